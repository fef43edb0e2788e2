"""Entry point: ``python -m adaptive_rollouts.integrations.verl.main [hydra overrides]``.

Runs verl's own ``run_ppo`` with a Ray task runner that first registers our trainer
(``trainer.v1.trainer_mode=adaptive``) and advantage estimators inside the Ray actor, then does
exactly what verl's ``TaskRunnerV1`` does. The config is ``adaptive_ppo.yaml`` (verl's
``ppo_trainer`` plus an ``adaptive:`` section); every verl override works as usual.
"""

from __future__ import annotations

import os

import hydra
import ray

from adaptive_rollouts.integrations.verl import register
from adaptive_rollouts.integrations.verl.config import (
    aggregation_for,
    check_allocator_kwargs,
    check_text_encoder,
    check_verl_config,
    settings_from_config,
)

CONFIG_DIR = os.path.dirname(os.path.abspath(__file__))


@ray.remote(num_cpus=1)
class AdaptiveTaskRunner:
    """verl's TaskRunnerV1, with adaptive_rollouts registered in this (Ray actor) process."""

    def run(self, config):
        from verl.trainer.main_ppo import TaskRunnerV1

        register()
        return TaskRunnerV1.__ray_actor_class__().run(config)


def check(config) -> None:
    """Everything that can fail before Ray starts: verl's ``validate_config`` (as verl's ``main``
    runs it), the features the adaptive trainer rejects, the ``adaptive:`` section, the allocator
    name and its keyword arguments."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    register()
    auto_set_device(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    check_verl_config(config)
    settings = settings_from_config(config.get("adaptive"))
    aggregation_for(config.actor_rollout_ref.actor.get("loss_agg_mode"), settings.aggregation)
    check_allocator_kwargs(settings.allocator, settings.allocator_kwargs)
    check_text_encoder(settings.allocator, settings.allocator_kwargs, settings.encoder)


def run(config) -> None:
    """`check` the config, then verl's ``run_ppo`` with our task runner (unless
    ``adaptive.validate_only``: then print 'config OK' and stop)."""
    from verl.trainer.main_ppo import run_ppo

    check(config)
    if config.get("adaptive", {}).get("validate_only", False):
        print("adaptive_rollouts: config OK (adaptive.validate_only=true, nothing started)")
        return
    run_ppo(config, task_runner_class=AdaptiveTaskRunner)


@hydra.main(config_path=CONFIG_DIR, config_name="adaptive_ppo", version_base=None)
def main(config) -> None:
    run(config)


if __name__ == "__main__":
    main()
