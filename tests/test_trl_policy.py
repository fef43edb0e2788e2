"""The policy's view of each prompt in `AdaptiveGRPOTrainer` (``policy_features``), and the step's
regime tracker fed the successes the allocator saw."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from test_trl_support import Capture, logged, make_trainer, reward_length, tiny_model  # noqa: E402

from adaptive_rollouts.allocators import Uniform  # noqa: E402
from adaptive_rollouts.fingerprints import zero_variance_fraction  # noqa: E402
from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer  # noqa: E402
from adaptive_rollouts.integrations.trl.policy import last_token_hidden_states  # noqa: E402


class Reader(Uniform):
    """Uniform that records the policy features it is given before each plan."""

    def __init__(self):
        super().__init__()
        self.seen: list[tuple[list, np.ndarray]] = []
        self.order: list[str] = []
        self.planned: list[list] = []

    def observe_policy(self, prompts, features):
        self.seen.append((list(prompts), features))
        self.order.append("policy")

    def _plan(self, prompts, budget, prediction):
        self.order.append("plan")
        self.planned.append(list(prompts))
        return super()._plan(prompts, budget, prediction)


def _tok():
    from adaptive_rollouts.demo.tokenizer import build_tokenizer

    return build_tokenizer()


def test_hidden_state_at_each_prompts_last_real_token_left_or_right_padded():
    tok = _tok()
    model = tiny_model(tok).eval()
    ids = torch.tensor([[0, 0, 5, 6, 7], [3, 4, 5, 6, 7]])
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    got = last_token_hidden_states(model, ids, mask)
    with torch.no_grad():
        want = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states[-1][:, -1]
    assert got.dtype == np.float32 and got.shape == (2, model.config.hidden_size)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-6)
    right = last_token_hidden_states(model, torch.tensor([[5, 6, 7, 0]]), torch.tensor([[1, 1, 1, 0]]))
    with torch.no_grad():
        alone = model(input_ids=torch.tensor([[5, 6, 7]]), output_hidden_states=True).hidden_states[-1][0, -1]
    np.testing.assert_allclose(right[0], alone.numpy(), rtol=1e-5, atol=1e-6)


def test_a_model_without_hidden_states_is_refused_naming_the_input():
    class NoHidden(torch.nn.Module):
        def forward(self, input_ids, attention_mask, output_hidden_states=False):
            return {"logits": torch.zeros(*input_ids.shape, 3)}

    with pytest.raises(ValueError, match="policy_features: the model \\(NoHidden\\) returned no hidden states"):
        last_token_hidden_states(NoHidden(), torch.ones(1, 2, dtype=torch.long), torch.ones(1, 2, dtype=torch.long))


def test_the_trainer_gives_a_policy_aware_allocator_hidden_states_before_it_plans(tmp_path):
    alloc = Reader()
    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, reward=reward_length, allocator=alloc, policy_features=True)
    trainer.train()
    assert alloc.order == ["policy", "plan"] * 2
    prompts, features = alloc.seen[0]
    assert features.shape == (3, 32) and features.dtype == np.float32 and np.isfinite(features).all()
    assert prompts == alloc.planned[0]  # the keys its plan gets, in the step's prompt order
    assert len(logged(trainer, "adaptive/policy_seconds")) == 2
    assert all(0.0 <= s <= 1.0 for s in logged(trainer, "adaptive/policy_share"))


@pytest.mark.parametrize("spec", [True, None])
def test_the_default_allocator_trains_on_the_policy_features(tmp_path, spec):
    """The saving default reads the hidden states under the prompts' keys (the rows the pass reads
    are dicts, not keys), and the trainer keeps the last step's pass time; ``None`` (the trainer's
    default) gives the view as ``True`` does where the model can."""
    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, reward=reward_length, policy_features=spec)
    trainer.train()
    assert trainer.allocator.belief.width == trainer.model.config.hidden_size
    assert len(logged(trainer, "adaptive/policy_seconds")) == 2
    assert trainer.last_step.policy_seconds == pytest.approx(logged(trainer, "adaptive/policy_seconds")[-1])


@pytest.mark.parametrize(
    "features, match",
    [(lambda rows: np.ones((len(rows), 2)) * np.nan, "NaN"), (lambda rows: np.ones((len(rows) + 1, 2)), "shape")],
)
def test_bad_features_from_a_users_callable_are_refused_naming_the_input(tmp_path, features, match):
    trainer = make_trainer(
        AdaptiveGRPOTrainer, tmp_path, reward=reward_length, allocator=Reader(), policy_features=features
    )
    with pytest.raises(ValueError, match=f"policy_features.*{match}"):
        trainer.train()


def test_the_default_gives_no_view_where_the_trainer_cannot_and_says_why_once(tmp_path, caplog):
    """``policy_features=None``: no pass (and one log line) for a model whose forward takes no
    ``output_hidden_states`` and under ``policy_features=False``; silent for an allocator that
    does not read the view."""
    from types import SimpleNamespace

    from adaptive_rollouts.allocators import SavingProgressive
    from adaptive_rollouts.integrations.trl.policy import policy_features_for

    class Plain(torch.nn.Module):
        def forward(self, input_ids, attention_mask):
            return input_ids

    def fake(allocator, model):
        return SimpleNamespace(allocator=allocator, model=model, accelerator=SimpleNamespace(unwrap_model=lambda m: m))

    with caplog.at_level("WARNING", logger="adaptive_rollouts.integrations.trl.policy"):
        assert policy_features_for(fake(SavingProgressive(), Plain()), None) is None
        assert policy_features_for(fake(Uniform(), Plain()), None) is None
        assert policy_features_for(fake(SavingProgressive(policy=False), tiny_model(_tok())), None) is None
    assert [r.getMessage() for r in caplog.records] == [
        "policy_features: the allocator gets no policy view (the model's forward takes no output_hidden_states); "
        "its belief uses the rest"
    ]
    assert callable(policy_features_for(fake(SavingProgressive(), tiny_model(_tok())), None))
    trainer = make_trainer(AdaptiveGRPOTrainer, tmp_path, reward=reward_length, policy_features=False)
    trainer.train()
    assert trainer.allocator.belief.width is None and not logged(trainer, "adaptive/policy_seconds")


def test_uniform_runs_no_policy_pass(tmp_path):
    calls = []
    trainer = make_trainer(
        AdaptiveGRPOTrainer,
        tmp_path,
        reward=reward_length,
        allocator="uniform",
        policy_features=lambda rows: calls.append(rows),
    )
    trainer.train()
    assert calls == [] and not logged(trainer, "adaptive/policy_seconds")
    with pytest.raises(ValueError, match="policy_features must be True, False, None or a callable"):
        make_trainer(AdaptiveGRPOTrainer, tmp_path, reward=reward_length, policy_features="yes")


def test_the_regime_tracker_sees_the_successes_the_allocator_saw(tmp_path):
    """With ``reward_threshold=0.5`` a group of lengths 1/6 .. 2/6 is all failures: flat for the
    allocator and for ``regime/zero_variance_fraction`` alike (the raw rewards are not all equal)."""
    trainer = make_trainer(
        AdaptiveGRPOTrainer, tmp_path, reward=reward_length, allocator="uniform", reward_threshold=0.5
    )
    cap = Capture(trainer)
    trainer.train()
    rewards = np.array(cap.rewards[-1]["reward_length"])
    raw = [rewards[i : i + 4] for i in range(0, 12, 4)]
    mapped = [(g >= 0.5).astype(float) for g in raw]
    assert logged(trainer, "regime/zero_variance_fraction")[-1] == pytest.approx(zero_variance_fraction(mapped))
