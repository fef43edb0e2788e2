"""Every shipped config and command line composes and passes verl's validate_config and our checks."""

from __future__ import annotations

import os
import subprocess

import pytest

pytest.importorskip("verl")
pytest.importorskip("hydra")

from adaptive_rollouts.integrations.verl import main  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = ["scripts/gpu_smoke_verl.sh", "examples/verl/run_multi_gpu.sh"]
MINIMAL = [
    "data.train_files=/data/train.parquet",
    "data.val_files=/data/test.parquet",
    "actor_rollout_ref.model.path=/models/m",
    "actor_rollout_ref.rollout.name=vllm",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
    "adaptive.allocator=vigor",
]


def compose(overrides):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=main.CONFIG_DIR, version_base=None):
        return hydra_compose("adaptive_ppo", overrides=list(overrides))


def shipped_yamls():
    return sorted(f for f in os.listdir(main.CONFIG_DIR) if f.endswith(".yaml"))


@pytest.mark.parametrize("name", shipped_yamls())
def test_every_shipped_yaml_composes_and_validates(name):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=main.CONFIG_DIR, version_base=None):
        cfg = hydra_compose(name[: -len(".yaml")], overrides=MINIMAL)
    main.check(cfg)
    assert cfg.trainer.v1.trainer_mode == "adaptive" and cfg.adaptive.prompt_key is None


def script_command_lines(script: str, tmp_path) -> list[list[str]]:
    """Run the script with VALIDATE_ONLY=1 and a `python` that records its arguments instead of
    starting Python: the exact command lines the script builds, in order."""
    record, stub = tmp_path / "argv.txt", tmp_path / "python-stub"
    stub.write_text('#!/usr/bin/env bash\n{ printf "%s\\n" "$@"; echo "--END--"; } >> "$RECORD"\n')
    stub.chmod(0o755)
    env = dict(os.environ, VALIDATE_ONLY="1", PYTHON=str(stub), RECORD=str(record), OUT=str(tmp_path / "out"))
    proc = subprocess.run(["bash", os.path.join(REPO, script)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = record.read_text().split("\n")
    commands, current = [], []
    for arg in lines:
        if arg == "--END--":
            commands.append(current)
            current = []
        elif arg or current:
            current.append(arg)
    return commands


@pytest.mark.parametrize("script", SCRIPTS)
def test_shipped_command_lines_pass_verl_validate_config(script, tmp_path):
    """Each command line of the script goes through Hydra, verl's validate_config and our checks."""
    commands = script_command_lines(script, tmp_path)
    assert len(commands) == (2 if "smoke" in script else 1)
    for argv in commands:
        assert argv[:2] == ["-m", "adaptive_rollouts.integrations.verl.main"]
        assert "adaptive.validate_only=true" in argv
        main.check(compose(argv[2:]))


def test_validate_only_stops_before_ray(capsys):
    main.run(compose([*MINIMAL, "adaptive.validate_only=true"]))
    assert "config OK" in capsys.readouterr().out


def test_allocator_kwargs_override_is_accepted():
    cfg = compose([*MINIMAL, "adaptive.allocator_kwargs={m0: 2, upper: 32}"])
    main.check(cfg)
    assert dict(cfg.adaptive.allocator_kwargs) == {"m0": 2, "upper": 32}
    cfg = compose([*MINIMAL, "+adaptive.allocator_kwargs.rounds=3"])
    assert dict(cfg.adaptive.allocator_kwargs) == {"rounds": 3}


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["algorithm.filter_groups.enable=true"], r"filter_groups.enable=false and keep the default allocator"),
        (["trainer.v1.sampler.sync_refill_failed_groups=true"], "sync_refill_failed_groups"),
        (["adaptive.allocator=no-such-allocator"], "unknown allocator"),
        (["adaptive.allocator_kwargs={lower: 2}"], "does not accept"),
        (["+adaptive.nonsense=1"], "unknown option"),
        (["adaptive.session_retries=-1"], "session_retries"),
        (["actor_rollout_ref.actor.loss_agg_mode=weird"], "loss_agg_mode"),
        (["trainer.use_v1=false"], "use_v1"),
        (["+trainer.v1.adaptive.parameter_sync_step=2"], "parameter_sync_step=1"),
        (["adaptive.encoder=no_such_module:factory"], "no_such_module"),
        (["adaptive.loss_rows=budget"], "adaptive.loss_rows"),
        (["adaptive.time_rounds=sometimes"], "adaptive.time_rounds"),
        (["adaptive.loss_rows=uniform", "algorithm.adv_estimator=grpo"], "adaptive.loss_rows=uniform scales"),
    ],
)
def test_check_rejects_what_the_trainer_cannot_serve(overrides, message):
    cfg = compose([*MINIMAL, *overrides])
    with pytest.raises(Exception, match=message):
        main.check(cfg)


def test_a_text_allocator_without_an_encoder_is_caught_at_start_up():
    import importlib.util

    from adaptive_rollouts.integrations.verl.config import needs_text

    assert needs_text("vip", {}) and needs_text("vip-paper", {}) and needs_text("vigor", {}) is False
    assert not needs_text("vip", {"predictor": "beta"}) and not needs_text(None, {})
    main.check(compose([*MINIMAL, "adaptive.allocator=vip", "adaptive.encoder=harness_plugins:HashEncoder"]))
    main.check(compose([*MINIMAL, "adaptive.allocator=vip", "adaptive.allocator_kwargs={predictor: beta}"]))
    if importlib.util.find_spec("sentence_transformers") is None:  # this venv: no [embed] extra
        with pytest.raises(ValueError, match="adaptive.encoder"):
            main.check(compose([*MINIMAL, "adaptive.allocator=vip"]))


def test_the_trainer_itself_rejects_dapo_before_any_work():
    from verl.trainer.ppo.v1 import get_trainer_cls

    from adaptive_rollouts.integrations.verl import register

    register()
    cfg = compose([*MINIMAL, "algorithm.filter_groups.enable=true"])
    with pytest.raises(ValueError, match="DAPO dynamic sampling"):
        get_trainer_cls("adaptive")(cfg)


@pytest.mark.parametrize("module", ["config", "rows"])
def test_docstring_examples_run(module):
    import doctest
    import importlib

    mod = importlib.import_module(f"adaptive_rollouts.integrations.verl.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_filter_groups_is_refused_with_the_saving_default_as_the_way_out():
    cfg = compose([*MINIMAL, "algorithm.filter_groups.enable=true"])
    with pytest.raises(ValueError) as refused:
        main.check(cfg)
    message = str(refused.value)
    assert "the saving one" in message and "adaptive.allocator=null" in message
    # the saving default is the first way out named; VIGOR is no longer suggested
    assert message.index("adaptive.allocator=null") < message.index("dynamic-sampling")
    assert "VIGOR" not in message and "drop_zero_variance" not in message


# An existing verl set-up switched on as docs/verl.md says: a config of its own built on verl's
# ppo_trainer, with no `adaptive:` section (so the adaptive options take Hydra's `+` prefix).
SWITCH_ON = [
    "trainer.use_v1=true",
    "trainer.v1.trainer_mode=adaptive",
    "algorithm.adv_estimator=adaptive_grpo",
    "+adaptive.allocator=default",
    "+adaptive.validate_only=true",
]


def _own_config(tmp_path):
    folder = tmp_path / "my_conf"
    folder.mkdir()
    (folder / "my_grpo.yaml").write_text(
        "hydra:\n  searchpath:\n    - pkg://verl.trainer.config\n"
        "defaults:\n  - ppo_trainer\n  - _self_\n"
        "algorithm:\n  adv_estimator: grpo\n"
        "actor_rollout_ref:\n  rollout:\n    n: 8\n"
    )
    return folder


def _compose_own(folder, overrides):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(folder), version_base=None):
        return hydra_compose("my_grpo", overrides=list(overrides))


def test_an_existing_config_is_switched_on_as_the_docs_say(tmp_path, capsys):
    docs = open(os.path.join(REPO, "docs", "verl.md")).read()
    for override in SWITCH_ON:
        assert override in docs, f"docs/verl.md does not show {override}"
    folder = _own_config(tmp_path)
    base = [o for o in MINIMAL if not o.startswith("adaptive.")]
    main.run(_compose_own(folder, [*base, *SWITCH_ON]))
    assert "config OK" in capsys.readouterr().out
    # without the switch the check says which setting to change
    with pytest.raises(ValueError, match="trainer.v1.trainer_mode must be 'adaptive'"):
        main.check(_compose_own(folder, base))
    # without the `+`, Hydra refuses a key the config does not have
    with pytest.raises(Exception, match="adaptive"):
        _compose_own(folder, [*base, "trainer.v1.trainer_mode=adaptive", "adaptive.validate_only=true"])
