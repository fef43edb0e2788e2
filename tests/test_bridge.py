"""The trainer bridge: one allocator factory and name rule, prompt text, the step's count rule, the
rewards -> success mapping and the step log, as every trainer plug-in calls them."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from adaptive_rollouts.allocators import ALLOCATORS, VIP, PosteriorProgressive, Uniform, make_allocator
from adaptive_rollouts.allocators.predictive import PREDICTORS, TEXT_PREDICTORS, PredictorSlot
from adaptive_rollouts.bridge import (
    OptionsError,
    allocator_factory,
    allocator_kind,
    build_allocator,
    check_counts,
    check_request,
    check_spent,
    needs_pool,
    needs_text,
    plan_or_prompts,
    prompt_text,
    prompts,
    scored_draw,
    scored_successes,
    step_log,
    step_values,
    text_features,
)
from adaptive_rollouts.embeddings import FeatureTable, KeyedTexts
from adaptive_rollouts.fingerprints import RegimeTracker
from adaptive_rollouts.predictors import CumulativeMean
from adaptive_rollouts.success import SuccessSignal
from adaptive_rollouts.types import Prediction


def test_one_name_rule_for_registry_names_class_names_and_paths():
    for name in ("posterior_progressive", "Posterior-Progressive", "PosteriorProgressive"):
        assert allocator_factory(name) is PosteriorProgressive
    assert type(make_allocator("Posterior_Progressive")) is PosteriorProgressive  # the same rule
    for default in (None, "", "default"):
        assert allocator_factory(default) is ALLOCATORS["default"] is type(make_allocator())
    assert allocator_factory("adaptive_rollouts.allocators:Uniform") is Uniform
    with pytest.raises(ValueError, match="adaptive.allocator: unknown allocator 'nope'"):
        allocator_factory("nope", "adaptive.allocator")
    with pytest.raises(ValueError, match="must look like"):
        allocator_factory("module:", "adaptive.allocator")


def test_build_passes_trainer_values_only_where_taken_and_options_win():
    vip = build_allocator("vip", {"estimator": "grpo"}, estimator="rloo", aggregation="constant", seed=4)
    assert (vip.estimator, vip.aggregation) == ("grpo", "constant")  # the user's option wins
    uniform = build_allocator("uniform", aggregation="token-mean", estimator="rloo", features=object())
    assert type(uniform) is Uniform
    assert type(build_allocator(None, seed=1)) is ALLOCATORS["default"]
    with pytest.raises(OptionsError, match="rejects adaptive.allocator_kwargs") as err:
        build_allocator("vigor", {"lower": 2}, what="adaptive.allocator", options_name="adaptive.allocator_kwargs")
    assert isinstance(err.value, ValueError) and isinstance(err.value, TypeError)


def test_build_takes_an_object_and_gives_it_the_trainers_settings(caplog):
    mine = VIP("beta", estimator="rloo", aggregation="seq-mean")
    with caplog.at_level(logging.WARNING):
        assert build_allocator(mine, estimator="grpo", aggregation="token-mean") is mine
    assert (mine.estimator, mine.aggregation) == ("grpo", "token-mean") and "set to 'grpo'" in caplog.text
    with pytest.raises(ValueError, match="its options"):
        build_allocator(mine, {"seed": 1})
    with pytest.raises(ValueError, match="must have run"):
        build_allocator(object())


def test_prompt_text_reads_strings_conversations_and_content_blocks():
    assert prompt_text("2+2=") == "2+2="
    chat = [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "t"}]}]
    assert prompt_text(chat) == "s\nt"
    arr = np.empty(2, dtype=object)
    arr[:] = chat  # verl hands conversations over as object arrays
    assert prompt_text(arr) == "s\nt"
    blocks = [{"role": "user", "content": [{"text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]}]
    assert prompt_text(blocks) == "a b"
    assert prompt_text([{"role": "user", "content": None}, {"role": "user", "content": "x"}]) == "x"
    assert prompt_text({"question": 1}) == '{"question": 1}'


def test_text_and_pool_needs_come_from_the_settings():
    assert needs_text("vip", {}) and needs_text("vip-paper", {}) and not needs_text("vigor", {})
    assert not needs_text("vip", {"features": None}) and not needs_text(None, {})
    assert needs_pool("VIP_Paper", {}) and not needs_pool("vip-paper", {"predictor": "gp"})


def test_text_features_use_the_trainers_encoder_and_the_pool():
    enc = FeatureTable(["x", "y"], [[1.0, 0.0], [0.0, 1.0]])
    vip = VIP("gp")
    texts = text_features(vip, encoder=enc)
    assert isinstance(texts, KeyedTexts) and vip.slot.features is texts
    texts.register(["row#0"], ["y"])
    assert texts.encode(["row#0"]).tolist() == [[0.0, 1.0]]
    paper = VIP("paper-gp")
    with pytest.raises(ValueError, match="known prompt pool"):
        text_features(paper, encoder=enc)
    assert text_features(paper, pool=lambda: (["row#0", "row#1"], ["y", "x"]), encoder=enc) is None
    assert paper.slot.features.encode(["row#1"]).tolist() == [[1.0, 0.0]]
    assert text_features(Uniform()) is None and text_features(VIP("beta")) is None


def test_the_count_rule_follows_the_allocator_kind():
    class Saver:
        kind = "save"

    assert allocator_kind(Saver()) == "save" and allocator_kind(Uniform()) == "fill"
    assert check_spent(np.array([4, 4]), 8) == 8 and check_spent(np.array([0, 0]), 8, "save") == 0
    with pytest.raises(ValueError, match="sum to 7, budget is 8"):
        check_spent(np.array([3, 4]), 8)
    with pytest.raises(ValueError, match="at most"):
        check_spent(np.array([5, 4]), 8, "save")
    assert check_counts([2, 0], 2, 8, "save").tolist() == [2, 0]
    for bad, match in (([9, -1], "negative"), ([8], "shape"), ([4.5, 3.5], "non-integer")):
        with pytest.raises(ValueError, match=match):
            check_counts(bad, 2, 8)

    class Odd:
        kind = "spend-all"

    with pytest.raises(ValueError, match="got 'spend-all'"):
        allocator_kind(Odd())


def test_scored_successes_leave_out_unscored_rollouts():
    scored, unscored = scored_successes(SuccessSignal(threshold=0.5), [0.2, None, 0.9, float("nan")], "q")
    assert scored.tolist() == [0.0, 1.0] and unscored == 2
    with pytest.raises(ValueError, match="prompt 'q'"):
        scored_successes(SuccessSignal(reward_range=(0, 1)), [2.0], "q")


def test_step_values_and_log_keep_the_trainers_counts_and_add_the_regime():
    counts = np.array([3, 0, 2])  # prompt a: one of its 3 rollouts unscored
    success = [np.array([0.0, 1.0]), np.array([]), np.array([1.0, 1.0])]
    values = step_values(["a", "b", "c"], counts, success, {"brier": 0.1, "rollouts_spent": 99, "note": "x"})
    assert values["rollouts_spent"] == 5 and values["skipped"] == 1 and values["brier"] == 0.1
    assert "rollouts" not in values  # one key per quantity: no copy of rollouts_spent
    assert values["mean_reward"] == pytest.approx(0.75)  # over the scored rollouts
    log = step_log({**values, "unscored": 1, "flag": True}, RegimeTracker(), ["a", "b", "c"], success, drop=("brier",))
    assert log["adaptive/unscored"] == 1.0 and log["adaptive/flag"] == 1.0 and "adaptive/brier" not in log
    assert "adaptive/note" not in log and "adaptive/allocation_histogram" not in log
    assert any(name.startswith("regime/") for name in log)


def test_observe_gets_the_plan_back_or_the_prompts_from_an_older_allocator():
    plan = Uniform().plan(["a", "b"], 4)
    assert plan_or_prompts(plan, ["a", "b"]) is plan
    assert plan_or_prompts(np.array([2, 2]), ("a", "b")) == ["a", "b"]


def test_an_allocator_offers_run_or_where_the_trainer_allows_plan_and_observe():
    class Planner:
        def plan(self, prompts, budget):
            return np.full(len(prompts), budget // len(prompts))

        def observe(self, prompts, rewards):
            pass

    with pytest.raises(ValueError, match=r"must have run\(prompts, budget, sample\), got a Planner"):
        build_allocator(Planner())
    planner = Planner()
    assert build_allocator(planner, plan_only=True) is planner
    with pytest.raises(ValueError, match="or plan and observe"):
        build_allocator(object(), plan_only=True)


def test_a_sample_request_is_checked_where_it_enters_the_trainer():
    indices, counts = check_request(np.array([1, 0]), [2.0, 0], 2)
    assert indices.dtype == counts.dtype == np.int64 and counts.tolist() == [2, 0]
    for bad_indices, bad_counts, match in (
        ([0, 0], [1, 1], "repeated"),
        ([2], [1], "bad or repeated"),
        ([0], [-1], "bad counts"),
        ([0, 1], [1], "bad counts"),
    ):
        with pytest.raises(ValueError, match=match):
            check_request(bad_indices, bad_counts, 2)


@pytest.mark.parametrize("name", [None, "uniform", "vigor", "vip-paper"])
def test_a_trainer_is_its_hooks_plus_the_bridge(name):
    """A whole trainer step written with the bridge alone: what a plug-in for another framework adds
    is only its generation (here: +-1 rewards drawn per prompt, one in five unscored)."""
    from adaptive_rollouts.keys import row_key

    rng = np.random.default_rng(0)
    texts = [f"question {i}" for i in range(8)]
    keys = [row_key(source="train", index=i) for i in range(8)]
    p = np.linspace(0.05, 0.95, 8)
    encoder = FeatureTable(texts, rng.normal(size=(8, 4)))
    allocator = build_allocator(name, estimator="rloo", aggregation="seq-mean", seed=0)
    features = text_features(allocator, pool=lambda: (keys, texts), encoder=encoder)
    signal, regime, budget = SuccessSignal(), RegimeTracker(), 32
    for _ in range(3):
        if features is not None:
            features.register(keys, [prompt_text([{"role": "user", "content": t}]) for t in texts])
        spent = np.zeros(8, dtype=np.int64)
        seen: list[list[np.ndarray]] = [[] for _ in keys]

        def sample(indices, counts):
            indices, counts = check_request(indices, counts, len(keys))
            raw = [
                [None if rng.random() < 0.2 else float(2 * (rng.random() < p[i]) - 1) for _ in range(c)]
                for i, c in zip(indices, counts)
            ]
            spent[indices] += counts
            draw = scored_draw(signal, raw, [keys[i] for i in indices])
            for i, got in zip(indices, draw):
                seen[i].append(got)
            return draw

        allocator.run(keys, budget, sample)
        assert check_spent(spent, budget, allocator_kind(allocator)) == spent.sum()
        successes = [np.concatenate(s) if s else np.zeros(0) for s in seen]
        log = step_log(step_values(keys, spent, successes, allocator.last_metrics, budget), regime, keys, successes)
        assert log["adaptive/rollouts_spent"] == spent.sum() and log["adaptive/unscored"] == spent.sum() - sum(
            map(len, successes)
        )
        assert all(0.0 <= x <= 1.0 for s in successes for x in s)  # +-1 rewards reach the allocator as {0, 1}


def test_a_round_is_mapped_at_once_so_equal_rewards_give_equal_successes():
    draw = scored_draw(SuccessSignal(), [[0.5], [-1.0, 1.0]], ["a", "b"])
    assert [s.tolist() for s in draw] == [[0.75], [0.0, 1.0]]  # the round's range [-1, 1] maps both groups
    with pytest.raises(ValueError, match="2 reward groups for 1 prompts"):
        scored_draw(SuccessSignal(), [[0.5], [1.0]], ["a"])


def test_one_list_of_text_predictors_for_the_bridge_and_the_predictor_slot():
    """`bridge.prompts.TEXT_PREDICTORS` is the allocators' own list, and `PredictorSlot` builds exactly
    those names with features (every other name without)."""
    assert prompts.TEXT_PREDICTORS is TEXT_PREDICTORS and set(TEXT_PREDICTORS) <= set(PREDICTORS)
    table = FeatureTable(["a", "b"], np.eye(2))
    for name in PREDICTORS:
        built = PredictorSlot(name, features=table).predictor
        assert type(built).__name__ == PREDICTORS[name]
        assert (getattr(built, "features", None) is table) == (name in TEXT_PREDICTORS), name
        assert needs_text("vip", {"predictor": name}) == (name in TEXT_PREDICTORS)


def test_the_demo_builds_every_arm_through_the_bridge(monkeypatch):
    allocation = pytest.importorskip("adaptive_rollouts.demo.allocation")

    class Sampled(CumulativeMean):  # stands in for the demo's SampledSuccess
        def predict(self, prompts):
            return Prediction(np.full(len(prompts), 0.5), np.zeros(len(prompts)))

    built = []

    def spy(spec=None, options=None, **provided):
        out = build_allocator(spec, options, **provided)
        built.append(type(out).__name__)
        return out

    monkeypatch.setattr(allocation, "build_allocator", spy)
    arms = ["uniform", "uniform-drgrpo", "null", "oracle", "oracle-skip", "default@true-p", "vip-paper", "vigor"]
    made = [type(allocation.make_arm_allocator(a, 0, 8, oracle=Sampled())).__name__ for a in arms]
    assert built == made
    assert made == ["Uniform", "Uniform", "SavingProgressive", "VIP", "SkipOracle", "SavingProgressive", "VIP", "VIGOR"]
