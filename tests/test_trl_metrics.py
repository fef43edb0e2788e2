"""What AdaptiveGRPOTrainer logs: TRL's metrics over the rollouts trained on (not per round), extra
columns aligned with their rows, one name per allocation quantity, regime fingerprints."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from test_trl_support import Capture, Skewed, logged, make_trainer, reward_length  # noqa: E402

from adaptive_rollouts.allocators import VIGOR  # noqa: E402
from adaptive_rollouts.fingerprints import zero_variance_fraction  # noqa: E402
from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer  # noqa: E402


def reward_logging_its_completion(prompts, completions, log_extra=None, **kwargs):
    log_extra("echo", list(completions))
    log_extra("prompt_again", list(prompts))
    return [len(c) / 6.0 for c in completions]


@pytest.mark.parametrize("allocator", [Skewed, VIGOR], ids=["skewed", "vigor"])
def test_log_extra_columns_line_up_with_their_rows(tmp_path, allocator):
    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, reward=reward_logging_its_completion, allocator=allocator())
    trainer.train()
    logs = trainer._logs
    assert len(logs["extra"]["echo"]) == len(logs["completion"]) == 12
    assert list(logs["extra"]["echo"]) == list(logs["completion"])
    assert list(logs["extra"]["prompt_again"]) == list(logs["prompt"])


def test_completion_metrics_and_tokens_are_over_the_rollouts_used(tmp_path):
    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, reward=reward_length, allocator=Skewed())
    cap = Capture(trainer)
    trainer.train()
    tokens = 0
    for step, out in enumerate(cap.outputs):  # rounds of 3 and 9 rollouts, logged once per step
        lengths = out["completion_mask"].sum(dim=1).float()
        tokens += int(out["prompt_mask"].sum() + lengths.sum())
        assert logged(trainer, "completions/mean_length")[step] == pytest.approx(lengths.mean().item())
        assert logged(trainer, "completions/min_length")[step] == lengths.min().item()
        assert logged(trainer, "completions/max_length")[step] == lengths.max().item()
        assert logged(trainer, "num_tokens")[step] == tokens
    assert trainer.state.num_input_tokens_seen == tokens


def test_allocation_metrics_once_each_with_rounds_and_regime(tmp_path):
    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, reward=reward_length, allocator=Skewed())
    cap = Capture(trainer)
    trainer.train()
    entry = next(h for h in trainer.state.log_history if "adaptive/rounds" in h)
    names = {k for k in entry if k.startswith(("adaptive/", "regime/"))}
    for old in ("adaptive/prompts", "adaptive/prompts_skipped", "adaptive/rollouts_min", "adaptive/rollouts_max"):
        assert old not in names  # the same quantities are adaptive/num_prompts, skipped, count_min, count_max
    assert {"adaptive/num_prompts", "adaptive/skipped", "adaptive/count_min", "adaptive/count_max"} <= names
    assert {"adaptive/unscored", "adaptive/padding_unused", "adaptive/allocator_seconds"} <= names
    assert "adaptive/allocator_wall_time_s" not in names  # measured once, as allocator_seconds
    assert {"regime/zero_variance_fraction", "regime/zero_variance_fraction_mean"} <= names
    # nothing None or NaN: p_persistence appears once prompts are revisited; no copy of rollouts_spent
    assert "regime/p_persistence" not in names and "adaptive/rollouts" not in names
    assert all(isinstance(entry[k], float) and np.isfinite(entry[k]) for k in names)
    assert {"adaptive/rollouts_spent_total", "adaptive/rollouts_saved_total", "adaptive/budget_share_total"} <= names
    assert logged(trainer, "adaptive/rounds") == [2.0, 2.0]
    assert logged(trainer, "adaptive/count_max") == [9.0, 9.0]
    rewards = np.array(cap.rewards[-1]["reward_length"])
    groups = [rewards[:9], rewards[9:11], rewards[11:]]
    assert logged(trainer, "regime/zero_variance_fraction")[-1] == pytest.approx(zero_variance_fraction(groups))
    flat = [np.ptp(g) == 0 for g in groups]
    per_rollout = np.repeat(flat, [9, 2, 1]).mean()  # as TRL logs it: a share of rollouts
    assert logged(trainer, "frac_reward_zero_std")[-1] == pytest.approx(per_rollout)


def test_allocator_without_metrics_still_gets_the_standard_set(tmp_path):
    class Plain:
        def run(self, prompts, budget, sample):
            q = len(prompts)
            return sample(np.arange(q), np.full(q, budget // q))

    trainer = make_trainer(
        AdaptiveGRPOTrainer, tmp_path, reward=reward_length, allocator=Plain(), config={"max_steps": 4}
    )
    trainer.train()
    assert logged(trainer, "adaptive/num_prompts") == [3.0] * 4
    assert logged(trainer, "adaptive/count_min") == [4.0] * 4
    assert logged(trainer, "regime/revisits") == [0.0, 0.0, 3.0, 6.0]  # 6 prompts, 3 per step: epoch 2 revisits


def test_token_metrics_are_the_completion_lengths_of_the_rollouts_generated(tmp_path):
    """Each round hands the step every rollout's completion length (tokens the model generated):
    ``adaptive/tokens_spent`` is the completion tokens of the step's rollouts (the completion mask of
    the batch), ``tokens_saved`` the hand-computed estimate against Uniform's 4 per prompt, and the
    running totals add them up."""
    allocator = Skewed()
    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, reward=reward_length, allocator=allocator)
    cap = Capture(trainer)
    trainer.train()
    assert trainer.adaptive_step.max_length == trainer.args.max_completion_length
    spent, saved = logged(trainer, "adaptive/tokens_spent"), logged(trainer, "adaptive/tokens_saved")
    assert len(spent) == len(cap.outputs) == 2
    for step, out in enumerate(cap.outputs):
        assert spent[step] == out["completion_mask"].sum().item()
        first, second = allocator.answers[step]
        a, b = first.lengths, second.lengths  # the Draws the allocator got, lengths per asked prompt
        lengths = [np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]), a[2]]
        assert [len(g) for g in lengths] == [9, 2, 1]
        assert spent[step] == sum(int(g.sum()) for g in lengths)
        want = sum((4 - len(g)) * g.mean() for g in lengths)  # Uniform: 12 rollouts over 3 prompts
        assert saved[step] == pytest.approx(want)
    assert logged(trainer, "adaptive/tokens_spent_total") == pytest.approx(np.cumsum(spent).tolist())
    assert logged(trainer, "adaptive/tokens_saved_total") == pytest.approx(np.cumsum(saved).tolist())
    assert not logged(trainer, "adaptive/completion_tokens")  # it always equalled tokens_spent: not logged
