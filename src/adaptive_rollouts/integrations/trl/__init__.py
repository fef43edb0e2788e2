"""TRL integration: ``AdaptiveGRPOTrainer`` (needs ``pip install adaptive-rollouts[trl]``).

Supported TRL range: ``>=1.0,<1.17`` (tested with 1.16); the trainer overrides
``GRPOTrainer._generate_and_score_completions`` and calls TRL's ``_generate`` and
``_calculate_rewards`` per generation call of a round (see docs/trl.md).
"""

from adaptive_rollouts.bridge import build_allocator, configure_allocator

from .layout import KeyedRow, assign_groups_to_ranks, key_of_row, plan_calls
from .settings import aggregation_for_loss_type, estimator_for

SUPPORTED_TRL = (">=1.0", "<1.17")

__all__ = [
    "SUPPORTED_TRL",
    "AdaptiveGRPOTrainer",
    "KeyedRow",
    "aggregation_for_loss_type",
    "assign_groups_to_ranks",
    "build_allocator",
    "check_trl_version",
    "configure_allocator",
    "estimator_for",
    "key_of_row",
    "plan_calls",
    "rollouts_consumed",
]


def check_trl_version(version: str | None = None) -> str:
    """Raise ImportError unless the installed (or given) TRL version is in ``SUPPORTED_TRL``."""
    from packaging.version import Version

    if version is None:
        import trl

        version = trl.__version__
    v = Version(version)
    if not (Version("1.0") <= v < Version("1.17")):
        raise ImportError(
            f"adaptive_rollouts.integrations.trl supports trl>=1.0,<1.17 (it overrides private GRPOTrainer "
            f"methods); found trl {version}"
        )
    return version


def __getattr__(name):
    if name in ("AdaptiveGRPOTrainer", "rollouts_consumed"):
        check_trl_version()
        from . import trainer

        return getattr(trainer, name)
    raise AttributeError(name)
