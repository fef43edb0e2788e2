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

CONFIG_DIR = os.path.dirname(os.path.abspath(__file__))


@ray.remote(num_cpus=1)
class AdaptiveTaskRunner:
    """verl's TaskRunnerV1, with adaptive_rollouts registered in this (Ray actor) process."""

    def run(self, config):
        from verl.trainer.main_ppo import TaskRunnerV1

        from adaptive_rollouts.integrations.verl import register

        register()
        return TaskRunnerV1.__ray_actor_class__().run(config)


def run(config) -> None:
    """Validate the config as verl's ``main`` does, then ``run_ppo`` with our task runner."""
    from verl.trainer.main_ppo import run_ppo
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    from adaptive_rollouts.integrations.verl import register

    register()  # fail fast here (bad allocator name, missing verl) rather than inside Ray
    auto_set_device(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    if not config.trainer.use_v1:
        raise ValueError("adaptive_rollouts needs verl's v1 trainer: set trainer.use_v1=true")
    run_ppo(config, task_runner_class=AdaptiveTaskRunner)


@hydra.main(config_path=CONFIG_DIR, config_name="adaptive_ppo", version_base=None)
def main(config) -> None:
    run(config)


if __name__ == "__main__":
    main()
