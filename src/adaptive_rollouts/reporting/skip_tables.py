"""Skipping unseen at 8 rollouts a prompt: the bound per group before any rollout at every group
size (``bound_skips=True``), and where the run has measured that it pays (``bound_skips="measured"``,
`allocators.saving_rule.skipping_pays`), each against the default head to head on a map of fresh
seeds (docs/saving.md, "Skipping unseen at 8 rollouts")."""

from __future__ import annotations

from pathlib import Path

from adaptive_rollouts.experiments.map_config import DEFAULT
from adaptive_rollouts.reporting.bound_tables import SKIP_UNSEEN_MAPS, paired_check_block

__all__ = [
    "SKIP_UNSEEN",
    "SKIP_UNSEEN_AGAIN",
    "SKIP_MEASURED",
    "SKIP_MEASURED_MAPS",
    "SKIP_MEASURED_FIRST",
    "render_skip_measured_first",
    "render_skip_unseen",
    "render_skip_unseen_again",
    "render_skip_measured",
]

SKIP_UNSEEN = f"{DEFAULT}[bound_skips=True]"
SKIP_UNSEEN_AGAIN = ("results/map/skip-unseen-2.json",)  # the same check with the sharper probe, fresh seeds
SKIP_MEASURED = f"{DEFAULT}[bound_skips='measured']"
SKIP_MEASURED_FIRST = ("results/map/skip-measured.json",)  # its first form (a one-sided test), fresh seeds
SKIP_MEASURED_MAPS = ("results/map/skip-measured-2.json",)  # skipping unseen where measured to pay, fresh seeds


def _against_default(root: Path, maps: tuple[str, ...], arm: tuple[str, str], intro: str) -> str:
    """A skipping ``arm`` (name, label) head to head against the default as shipped on ``maps``."""
    return paired_check_block(root, maps, ((DEFAULT, "default"),), arm, intro)


def render_skip_unseen(root: Path) -> str:
    """The bound per group before any rollout at every group size (``bound_skips=True``, skipping
    unseen what the belief alone says is hopeless) against the default, which does so only where
    the pilot would be the whole group, on the `SKIP_UNSEEN_MAPS` (seeds fixed before the run)."""
    intro = (
        "Skip unseen: `bound_skips=True`, the bound also before any rollout at 8 rollouts a prompt; "
        "the default bounds there only flat pilots (short ones where its belief is sure)."
    )
    return _against_default(root, SKIP_UNSEEN_MAPS, (SKIP_UNSEEN, "skip unseen"), intro)


def render_skip_unseen_again(root: Path) -> str:
    """The same check on the `SKIP_UNSEEN_AGAIN` map: fresh seeds, the belief with the sharper probe."""
    intro = (
        "Skip unseen again, with the probe on the whole view (`bound_skips=True` against the default as "
        "shipped), on seeds not used before."
    )
    return _against_default(root, SKIP_UNSEEN_AGAIN, (SKIP_UNSEEN, "skip unseen"), intro)


def render_skip_measured_first(root: Path) -> str:
    """The first form of ``bound_skips="measured"`` (a one-sided test: skipping in a step only while
    the chance that the skipped prompts yield less was at least 0.9) against the default as shipped,
    on the `SKIP_MEASURED_FIRST` map (fresh seeds)."""
    intro = (
        "Skip unseen where measured to pay, first form: `bound_skips='measured'` when a step skipped only while the "
        "chance that the prompts the bound would skip yield fewer varied groups per rollout than the rest was at "
        "least 0.9 (a one-sided test), against the default as shipped, on seeds not used before."
    )
    return _against_default(root, SKIP_MEASURED_FIRST, (SKIP_MEASURED, "skip where measured"), intro)


def render_skip_measured(root: Path) -> str:
    """Skipping unseen where the run has measured that it pays (``bound_skips="measured"``, the
    two-sided sequential test of `allocators.saving_rule.skipping_pays`) against the default as
    shipped on the `SKIP_MEASURED_MAPS` (fresh seeds, fixed before the run)."""
    intro = (
        "Skip unseen where measured to pay: `bound_skips='measured'` (the two-sided test: it starts skipping once "
        "the prompts the bound would skip yield fewer varied groups per rollout than the rest with chance 0.9, and "
        "stops once they yield more with chance 0.9), against the default as shipped, on seeds not used before."
    )
    return _against_default(root, SKIP_MEASURED_MAPS, (SKIP_MEASURED, "skip where measured"), intro)
