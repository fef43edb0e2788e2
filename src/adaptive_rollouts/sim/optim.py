"""The simulator's optimisers (numpy): AdamW as TRL and verl train (default), and plain SGD.

Both take the *ascent* direction g (the policy-gradient estimate) and return the parameter step.

AdamW (Loshchilov & Hutter 2019; ``torch.optim.AdamW`` with its defaults betas = (0.9, 0.999),
eps = 1e-8; weight decay 0 by default here), step t = 1, 2, ...:

    g   <- g * min(1, max_grad_norm / |g|)          (optional clipping, like TRL's max_grad_norm)
    m   <- beta1 m + (1 - beta1) g,   v <- beta2 v + (1 - beta2) g^2
    step = lr ( m / (1 - beta1^t) ) / ( sqrt(v / (1 - beta2^t)) + eps ) - lr wd theta

SGD: step = lr g (with the same optional clipping).

>>> import numpy as np
>>> opt = AdamW(lr=0.1)
>>> opt.step(np.zeros(2), np.array([3.0, -0.5])).round(6).tolist()   # first step: lr sign(g)
[0.1, -0.1]
"""

from __future__ import annotations

import numpy as np

from adaptive_rollouts.checks.validation import check_choice

__all__ = ["AdamW", "SGD", "OPTIMIZERS", "make_optimizer", "clip_by_norm"]

OPTIMIZERS = ("adamw", "sgd")


def clip_by_norm(grad: np.ndarray, max_norm: float | None) -> np.ndarray:
    """``grad`` scaled down to norm ``max_norm`` when larger (the global norm over all parameters)."""
    if max_norm is None:
        return grad
    norm = float(np.sqrt(np.sum(grad * grad)))
    return grad * (max_norm / norm) if norm > max_norm else grad


class SGD:
    """theta <- theta + lr g (ascent)."""

    def __init__(self, lr: float, max_grad_norm: float | None = None):
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        self.lr, self.max_grad_norm = float(lr), max_grad_norm

    def step(self, theta: np.ndarray, grad: np.ndarray) -> np.ndarray:
        """The increment to add to ``theta``."""
        return self.lr * clip_by_norm(np.asarray(grad, dtype=float), self.max_grad_norm)


class AdamW:
    """Adam with decoupled weight decay, ascent form (see the module docstring for the rule)."""

    def __init__(
        self,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        max_grad_norm: float | None = None,
    ):
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"betas must lie in [0, 1), got {betas}")
        if eps <= 0 or weight_decay < 0:
            raise ValueError(f"need eps > 0 and weight_decay >= 0, got {eps}, {weight_decay}")
        if max_grad_norm is not None and not max_grad_norm > 0:
            raise ValueError(f"max_grad_norm must be > 0 or None, got {max_grad_norm}")
        self.lr, self.betas, self.eps = float(lr), (float(betas[0]), float(betas[1])), float(eps)
        self.weight_decay, self.max_grad_norm = float(weight_decay), max_grad_norm
        self.t = 0
        self.m: np.ndarray | None = None
        self.v: np.ndarray | None = None

    def step(self, theta: np.ndarray, grad: np.ndarray) -> np.ndarray:
        """The increment to add to ``theta`` (updates the moment estimates)."""
        g = clip_by_norm(np.asarray(grad, dtype=float), self.max_grad_norm)
        m, v = self.m, self.v
        if m is None or v is None or m.shape != g.shape:
            m, v = np.zeros_like(g), np.zeros_like(g)
        b1, b2 = self.betas
        self.t += 1
        self.m = m = b1 * m + (1 - b1) * g
        self.v = v = b2 * v + (1 - b2) * g * g
        m_hat = m / (1 - b1**self.t)
        v_hat = v / (1 - b2**self.t)
        return self.lr * m_hat / (np.sqrt(v_hat) + self.eps) - self.lr * self.weight_decay * np.asarray(theta)


def make_optimizer(name: str, lr: float, **options) -> AdamW | SGD:
    """ "adamw" (default everywhere in the bench) or "sgd"."""
    check_choice("optimizer", name, OPTIMIZERS)
    if name == "adamw":
        return AdamW(lr, **options)
    return SGD(lr, max_grad_norm=options.get("max_grad_norm"))
