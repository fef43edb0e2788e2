"""verl plug-in: adaptive rollout allocation inside verl's v1 Ray trainer, without forking verl.

* :mod:`.advantage` - advantage estimators ``adaptive_grpo`` / ``adaptive_drgrpo`` /
  ``adaptive_rloo`` for groups of unequal size (registered with ``register_adv_est``).
* :mod:`.trainer` - ``AdaptiveRolloutTrainer``, registered as trainer mode ``adaptive``;
  :mod:`.rounds` runs progressive allocators' rounds through verl inside a step.
* :mod:`.config` - the ``adaptive:`` section, start-up checks, allocator construction.
* :mod:`.rows` - prompt keys (one per training-set row); :mod:`.rollouts` - reading rollouts back
  from TransferQueue; :mod:`.steps` - counts, rewards and metrics of one step.
* :mod:`.main` - ``python -m adaptive_rollouts.integrations.verl.main`` (Hydra, verl's config).

Importing this package does not import verl; :func:`register` does.
"""

from __future__ import annotations

__all__ = ["register"]


def register() -> None:
    """Register our advantage estimators and trainer with verl (idempotent).

    Must run in the process that builds the trainer; the entry point's Ray task runner does it.
    """
    from . import advantage, trainer

    advantage.register()
    trainer.register()
