"""Success-probability predictors: one protocol (`adaptive_rollouts.types.Predictor`).

    predict(prompts) -> Prediction(mean, var)     # E[p], Var[p] per prompt
    update(prompts, rewards)                      # one 1-D reward array per prompt, in [0, 1]
    state_dict() / load_state_dict(state)

- `PaperGP`: VIP's GP as published (the baseline to beat).
- `GaussianProcess`: ours - count-aware, drifting, similarity + identity, scalable.
- `DiscountedBeta` (MoPPS / SPO), `WindowedMean` (Knapsack-RL / GRESO), `Ridge` (VIP's ablation),
  `CumulativeMean` (DynaMO).
"""

from .cumulative_mean import CumulativeMean
from .discounted_beta import DiscountedBeta
from .gaussian_process import GaussianProcess
from .paper_gp import PaperGP
from .ridge import Ridge
from .windowed_mean import WindowedMean

__all__ = ["PaperGP", "GaussianProcess", "DiscountedBeta", "WindowedMean", "Ridge", "CumulativeMean"]
