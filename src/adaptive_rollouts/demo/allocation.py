"""The demo's arms: each one's allocator, the trainer settings it runs under, and the objective it uses.

An *arm* is an allocator plus the TRL loss it trains with. Most arms train with TRL's default
GRPO configuration (``loss_type="grpo"``, rewards scaled by the group std); there the plug-in
gives every allocator the GRPO estimator (`bridge.configure_allocator`), so
VIP's paper objective would silently become the GRPO one. VIP as published therefore runs under
Dr. GRPO (``loss_type="dr_grpo"``, ``scale_rewards="none"``), with ``uniform-drgrpo`` as its
Uniform. `objective_of` says which objective each arm's allocator optimises.

- ``uniform``: stock GRPO groups.
- ``default``: ``make_allocator()`` with no name (whatever the library's recommended default is).
- ``null``: the null control, `experiments.bench.null_control` (the map's): allocates like Uniform through
  the default's code path, so only the sampling noise differs from Uniform.
- ``oracle``: known p. Each batch prompt's p is estimated from `SampledSuccess` samples of the
  current policy that are not charged to the budget; allocated by the library's objective for the
  trainer's loss (`VIP` with ``aggregation=``: the expected improvement, the map's
  ``optimum@true-p``).
- ``oracle-skip``: the known-p skip rule (`sim.oracle.SkipOracle` on the sampled p): skips
  prompts whose group would be all-equal with probability > 0.9, the others get Uniform's group.
- ``default@true-p``: the default given the sampled p as its text source (the map's arm of that
  name, which gives it the simulator's true p): how far the default's own rule goes when a source
  knows p, so a gap to ``oracle-skip`` splits into what the belief lacks and what the rule gives up.
- ``vip-paper``: VIP as published (the paper's GP on MiniLM features of the pool, plug-in p(1-p),
  Dr. GRPO objective) with `vip_bounds`; ``vigor``: VIGOR as published.
- any other registry name of `make_allocator` (e.g. the saving baselines): built by the trainer
  from the name, with its estimator and aggregation.
- ``<arm>~<engine>`` (e.g. ``default~synchronous``, the map's mark): the arm with each generation
  round priced by that engine's modelled time (`sim.step_time.ENGINES`, the trainer's
  ``time_rounds``), not the CPU's clock.
- ``<name>[key=value;...]`` (a registry name or ``default@true-p``, e.g. ``default[share=0.3]``): that
  allocator built with those constructor options (`experiments.bench.method_options`, the map's syntax).
- ``<arm>+view`` (last, e.g. ``default+view``): the arm given the policy's own view of each prompt
  before it allocates (the trainer's ``policy_features=True``: the model's last-layer hidden state at
  the prompt's last token). The simulator's view mark (``^view0.8``, a modelled view) is refused here.

Learning rates of `make demo` (``LEARNING_RATES``) were chosen with ``benchmarks/demo_tune.py``;
the protocol (``benchmarks/demo_protocol.py``) tunes its own on its tune seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from adaptive_rollouts.allocators import ALLOCATORS
from adaptive_rollouts.bridge import build_allocator
from adaptive_rollouts.experiments.bench import method_options, null_control
from adaptive_rollouts.experiments.map_config import ENGINE_MARK, map_method
from adaptive_rollouts.sim.oracle import SkipOracle
from adaptive_rollouts.sim.step_time import ENGINES

from .oracle import truth_of

ARMS = ("uniform", "default", "null", "oracle", "oracle-skip", "default@true-p", "vip-paper", "uniform-drgrpo", "vigor")
ORACLE_ARMS = ("oracle", "oracle-skip", "default@true-p")  # the arms that read the sampled p (`uses_oracle`)
LR_GRID = (1e-5, 3e-5, 1e-4, 3e-4)
TUNE_SEEDS = (100,)
LEARNING_RATES = {"uniform": 1e-4, "vigor": 3e-5, "default": 1e-4, "default+view": 1e-4}
DR_GRPO = ("dr_grpo", "none")  # (loss_type, scale_rewards) of VIP as published
GRPO = ("grpo", "group")  # TRL's default
POLICY_VIEW_MARK = "+view"  # "default+view": the trainer's policy-features pass feeds the arm's allocator


@dataclass(frozen=True)
class Arm:
    """How an arm trains: its allocator name, the TRL loss settings and the engine whose modelled
    time prices its rounds (None: rounds not timed)."""

    name: str
    loss_type: str
    scale_rewards: str
    round_clock: str | None = None
    policy_features: bool = False

    @property
    def base(self) -> str:
        """The arm's allocator without its marks (`experiments.map_config.map_method`) or options."""
        return method_options(self.spec)[0]

    @property
    def spec(self) -> str:
        """The arm's allocator with its ``[options]``, without its marks."""
        return map_method(self.name.removesuffix(POLICY_VIEW_MARK))[0]


def known_arms() -> tuple[str, ...]:
    """The arm names: `ARMS` plus every registry name of `make_allocator`."""
    return tuple(dict.fromkeys([*ARMS, *ALLOCATORS]))


def arm_of(name: str) -> Arm:
    """The `Arm` of a name (ValueError naming it if unknown).

    >>> arm_of("vip-paper"), arm_of("uniform").loss_type
    (Arm(name='vip-paper', loss_type='dr_grpo', scale_rewards='none', round_clock=None, policy_features=False), 'grpo')
    >>> arm_of("default~synchronous").round_clock, arm_of("default+view").policy_features
    ('synchronous', True)
    >>> arm_of("default[predictor='gp']+view").base
    'default'
    """
    viewed = name.endswith(POLICY_VIEW_MARK)
    try:
        spec, options = map_method(name.removesuffix(POLICY_VIEW_MARK))  # the map's marks, parsed in one place
        base, allocator_options = method_options(spec)
    except ValueError as err:
        raise ValueError(f"unknown arm {name!r}: {err}") from None
    if base not in known_arms() or set(options) - {"engine"}:
        raise ValueError(
            f"unknown arm {name!r}; known: {', '.join(known_arms())}, each optionally with "
            f"{ENGINE_MARK}<engine> ({', '.join(ENGINES)}) and then {POLICY_VIEW_MARK}"
        )
    if allocator_options and base not in (*ALLOCATORS, "default@true-p"):
        raise ValueError(
            f"arm {name!r}: only a registry allocator or default@true-p takes [options]; {base!r} is an arm of the demo"
        )
    loss_type, scale = DR_GRPO if base in ("vip-paper", "uniform-drgrpo") else GRPO
    return Arm(name, loss_type, scale, options.get("engine"), viewed)


def partner_arms(name: str, arms: Sequence[str]) -> list[str]:
    """The arms of ``arms`` a variant is read against head to head (`protocol_speed.head_to_head`):
    among those with the same allocator and marks whose ``[options]`` are a strict part of the
    variant's, the one with the most of them (the arm without the option the variant adds) and the
    one with the fewest (the arm the variant started from), once each; none when no arm is.

    >>> arms = ["default+view", "default[share=0.3]+view", "default[share=0.3;bound_skips=True]+view", "default"]
    >>> partner_arms("default[share=0.3;bound_skips=True]+view", arms)
    ['default[share=0.3]+view', 'default+view']
    >>> partner_arms("default[share=0.3]+view", arms), partner_arms("default+view", arms)
    (['default+view'], [])
    """
    me = arm_of(name)
    base, options = method_options(me.spec)
    mine = {(k, repr(v)) for k, v in options.items()}
    parts: list[tuple[int, str]] = []
    for other in arms:
        arm = arm_of(other)
        other_base, other_options = method_options(arm.spec)
        theirs = {(k, repr(v)) for k, v in other_options.items()}
        same = other_base == base and (arm.policy_features, arm.round_clock) == (me.policy_features, me.round_clock)
        if same and theirs < mine:
            parts.append((len(theirs), other))
    if not parts:
        return []
    closest, plainest = max(parts)[1], min(parts)[1]
    return list(dict.fromkeys([closest, plainest]))


def uses_oracle(name: str) -> bool:
    """Whether arm ``name`` reads the sampled p of the current policy (`ORACLE_ARMS`: the trainer
    builds a `SampledSuccess` for it, and its run settings record the samples behind p).

    >>> uses_oracle("oracle-skip"), uses_oracle("default@true-p+view"), uses_oracle("default")
    (True, True, False)
    """
    return arm_of(name).base in ORACLE_ARMS


def vip_bounds(mean_rollouts: int) -> tuple[int, int]:
    """VIP's per-prompt bounds [L, U]: the paper's [4, 32] at its budget of 8 rollouts per prompt,
    scaled to ``mean_rollouts`` (L = mean / 2, at least 2 so every group has a baseline; U = 4 x mean).

    >>> vip_bounds(8), vip_bounds(16), vip_bounds(4)
    ((4, 32), (8, 64), (2, 16))
    """
    if mean_rollouts < 2:
        raise ValueError(f"mean_rollouts must be >= 2, got {mean_rollouts}")
    return max(2, mean_rollouts // 2), 4 * mean_rollouts


def objective_of(allocator: Any) -> str:
    """What an allocator optimises, as the trainer configured it: ``"equal groups"`` (Uniform),
    ``"<estimator> variance (paper)"`` (VIP without an aggregation), ``"expected improvement,
    <aggregation>"`` (VIP with one), else the class name with its estimator / aggregation."""
    kind = type(allocator).__name__
    estimator, aggregation = getattr(allocator, "estimator", None), getattr(allocator, "aggregation", None)
    if kind == "Uniform":
        return "equal groups"
    if kind == "VIP":
        return f"{estimator} variance (paper)" if aggregation is None else f"expected improvement, {aggregation}"
    details = ", ".join(f"{k} {v}" for k, v in (("estimator", estimator), ("aggregation", aggregation)) if v)
    if getattr(allocator, "saving", None) is False:
        details += ", saving off"
    return f"{kind} ({details})" if details else kind


def make_arm_allocator(name: str, seed: int, mean_rollouts: int, features=None, oracle=None) -> Any:
    """The allocator (object, registry name, or None for the default) of arm ``name``. ``features``:
    a `FeatureTable` of the RL pool keyed by prompt text (``vip-paper``'s GP lives on a known pool); ``oracle``:
    a `SampledSuccess` predictor (`ORACLE_ARMS`). Built through `bridge.build_allocator`
    (the one way any trainer builds an allocator); the objects (``null``, ``oracle-skip``) pass through
    it as they are."""
    name, options = method_options(arm_of(name).spec)
    if options and name not in ORACLE_ARMS:  # a registry allocator with its options (the trainer sets its loss's)
        return build_allocator(name, options, seed=seed)
    if name in ("uniform", "uniform-drgrpo"):
        return build_allocator("uniform", seed=seed)
    if name == "null":
        return build_allocator(null_control(seed))
    if name in ORACLE_ARMS:
        if oracle is None:
            raise ValueError(f"arm {name!r} needs the sampled-p predictor (oracle=)")
        if name == "oracle-skip":
            return build_allocator(SkipOracle(truth_of(oracle)))
        if name == "default@true-p":  # the trainer sets its estimator and aggregation
            return build_allocator("default", {**options, "predictor": oracle}, seed=seed)
        options = {"predictor": oracle, "estimator": "grpo", "aggregation": "seq-mean"}  # the trainer sets its own
        return build_allocator("vip", options, seed=seed)
    if name == "vip-paper":
        lower, upper = vip_bounds(mean_rollouts)
        options = {"estimator": "drgrpo", "variance": "plugin", "lower": lower, "upper": upper}
        return build_allocator("vip-paper", options, features=features, seed=seed)
    if name == "vigor":
        return build_allocator("vigor", seed=seed)
    return None if name == "default" else name  # the trainer builds it (with its estimator / aggregation)
