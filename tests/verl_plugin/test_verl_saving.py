"""Saving allocators (``kind = "save"``) in the real trainer under verl's fit(): a step trains on fewer
rollouts than the budget, skipped prompts are not dispatched, verl's padding carries no loss weight
and is reported apart from rollouts, an empty step makes no update, failed sessions are booked as
spent, and checkpoint/resume stays exact (harness.py: what is real and what is faked)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("verl")
pytest.importorskip("transfer_queue")
torch = pytest.importorskip("torch")

import harness as H  # noqa: E402
from harness import rows_by_uid, step_metrics  # noqa: E402

SINGLE = "harness_plugins:SaveSingleShot"
PROGRESSIVE = "harness_plugins:SaveProgressive"


def grpo_reference(rows: list[dict]) -> np.ndarray:
    """verl's own GRPO advantages of these trajectory rows (one group per uid)."""
    from verl.trainer.ppo import core_algos

    index = np.array([r["uid"] for r in rows], dtype=object)
    rewards = torch.zeros(len(rows), 2)
    rewards[:, -1] = torch.tensor([r["score"] for r in rows])
    ref, _ = core_algos.compute_grpo_outcome_advantage(rewards, torch.ones(len(rows), 2), index)
    return ref[:, 0].numpy()


def test_single_shot_saving_trains_fewer_rollouts_and_pads_with_zero_weight(run):
    trainer, manager, logged = run(2, **{"adaptive.allocator": SINGLE})
    assert trainer.kind == "save" and trainer.single_shot
    # step 1: every prompt is new (3 rollouts) but the last is skipped: 9 of 16, and q3 is never dispatched
    assert manager.dispatched[0]["counts"] == [3, 3, 3]
    update = trainer.actor_rollout_wg.updates[0]
    real = [r for r in update["rows"] if not r["padding"]]
    pad = [r for r in update["rows"] if r["padding"]]
    assert len(real) == 9 and {r["prompt"] for r in real} == {"question q0", "question q1", "question q2"}
    # verl pads to lcm(dp 2, ppo_mini_batch_size 4 x n 4) = 16; its rows have no loss weight at all
    assert len(pad) == 7
    assert all(r["loss_tokens"] == 0 and r["abs_advantage_sum"] == 0.0 and r["score"] == 0.0 for r in pad)
    assert all(r["loss_tokens"] == 3 for r in real)  # "answer right|wrong <eos>"
    # padding does not enter the advantage groups: verl's GRPO on the real rows alone
    np.testing.assert_allclose([r["advantage"] for r in real], grpo_reference(real), atol=1e-5)
    m = step_metrics(logged, 1)
    assert (m["adaptive/rollouts_spent"], m["adaptive/rollouts_saved"], m["adaptive/skipped"]) == (9, 7, 1)
    assert (m["adaptive/generated_rollouts"], m["adaptive/trained_rows"], m["adaptive/padding_rows"]) == (9, 9, 7)
    assert m["adaptive/response_tokens"] == 27 and m["adaptive/update_skipped"] == 0
    assert m["response_length/mean"] == 3.0  # verl's own data metrics leave the padding out
    # the allocator observed exactly what was generated, the skipped prompt as an empty group
    prompts, rewards = trainer.allocator.observed[0]
    assert [len(r) for r in rewards] == [3, 3, 3, 0]
    # step 2 (q4..q7): all new again -> the same shape; counts are unequal once prompts recur (resume test)
    assert step_metrics(logged, 2)["adaptive/rollouts_spent"] == 9


def test_progressive_saving_rounds_spend_less_and_report_it(run):
    trainer, manager, logged = run(1, **{"adaptive.allocator": PROGRESSIVE})
    assert trainer.kind == "save" and not trainer.single_shot
    # pilot round: 2 each for q0..q2 (q3 skipped); then half of the rest (10 // 2) to the first varied one
    assert manager.dispatched[0]["counts"] == [2, 2, 2]
    spent = sum(sum(d["counts"]) for d in manager.dispatched)
    assert spent < 16 and len(manager.dispatched) == 2 and manager.dispatched[1]["counts"] == [5]
    update = trainer.actor_rollout_wg.updates[0]
    groups = rows_by_uid(update)
    assert len(groups) == 3 and sorted(len(g) for g in groups.values()) == [2, 2, 7]
    real = [r for g in groups.values() for r in g]
    np.testing.assert_allclose([r["advantage"] for r in real], grpo_reference(real), atol=1e-5)
    pad = [r for r in update["rows"] if r["padding"]]
    assert len(pad) == 16 - 11 and all(r["loss_tokens"] == 0 and r["abs_advantage_sum"] == 0.0 for r in pad)
    m = step_metrics(logged, 1)
    assert (m["adaptive/rollouts_spent"], m["adaptive/rollouts_saved"], m["adaptive/skipped"]) == (11, 5, 1)
    assert m["adaptive/padding_rows"] == 5 and m["adaptive/trained_rows"] == 11


@pytest.mark.parametrize("allocator", [SINGLE, PROGRESSIVE])
def test_a_step_that_skips_every_prompt_makes_no_update(run, allocator, clean_queue):
    trainer, manager, logged = run(
        3, **{"adaptive.allocator": allocator, "adaptive.allocator_kwargs": "{empty_steps: [2]}"}
    )
    assert len(trainer.actor_rollout_wg.updates) == 2  # steps 1 and 3; step 2 had nothing to train on
    m = step_metrics(logged, 2)
    assert m["adaptive/update_skipped"] == 1 and m["adaptive/skipped"] == 4
    assert (m["adaptive/rollouts_spent"], m["adaptive/rollouts_saved"], m["adaptive/trained_rows"]) == (0, 16, 0)
    assert m["training/global_step"] == 2 and not any(k.startswith("actor/") for k in m)
    assert step_metrics(logged, 3)["adaptive/update_skipped"] == 0
    assert trainer.allocator.steps == 3 and trainer.global_steps == 4
    if allocator == SINGLE:  # the allocator saw its empty step: four empty groups
        assert [len(r) for r in trainer.allocator.observed[1][1]] == [0, 0, 0, 0]
    assert not (clean_queue.kv_list() or {}).get("train")  # nothing left behind in TransferQueue


def test_progressive_saving_failed_session_is_spent_not_redispatched(run):
    llm = H.FakeLLM(H.P)
    llm.fail = {(1, 1, 0)}  # step 1, q1's first session crashes
    trainer, manager, logged = run(
        1, llm=llm, **{"adaptive.allocator": PROGRESSIVE, "adaptive.allocator_kwargs": "{greedy: true}"}
    )
    m = step_metrics(logged, 1)
    # the failed rollout is spent (the allocator asked for it) and never re-dispatched: the greedy
    # second round takes exactly what is left, so the step generates exactly the budget, not more
    assert m["adaptive/failed_sessions"] == 1 and m["adaptive/missing_rollouts"] == 1
    assert m["adaptive/redispatched_rollouts"] == 0 and m["adaptive/incomplete_step"] == 0
    assert m["adaptive/rollouts_spent"] == m["adaptive/generated_rollouts"] == 16 and m["adaptive/rollouts_saved"] == 0
    assert sum(sum(d["counts"]) for d in manager.dispatched) == 16
    assert trainer.allocator.unscored[0] == [0, 1, 0]  # the answer told the allocator which one is missing
    assert m["adaptive/trained_rows"] == 15


def test_an_allocator_asking_past_the_budget_is_stopped_before_dispatch(run, monkeypatch):
    import harness_plugins as plugins

    def overspend(self, prompts, budget, sample):
        sample(np.array([0]), np.array([budget]))
        sample(np.array([1]), np.array([1]))

    monkeypatch.setattr(plugins.SaveProgressive, "run", overspend)
    with pytest.raises(ValueError, match="asked for 17 rollouts this step in all, the budget is 16"):
        run(1, **{"adaptive.allocator": PROGRESSIVE})


def test_a_dispatch_whose_sessions_all_fail_makes_no_update(run, clean_queue):
    llm = H.FakeLLM(H.P)
    llm.fail = {(1, k, c) for k in range(3) for c in range(3)}  # every session of step 1 crashes
    trainer, manager, logged = run(2, llm=llm, **{"adaptive.allocator": SINGLE})
    m = step_metrics(logged, 1)
    assert m["adaptive/update_skipped"] == 1 and m["adaptive/trained_rows"] == 0
    assert (m["adaptive/rollouts_spent"], m["adaptive/failed_sessions"], m["adaptive/missing_rollouts"]) == (9, 9, 9)
    assert [len(r) for r in trainer.allocator.observed[0][1]] == [0, 0, 0, 0]
    assert len(trainer.actor_rollout_wg.updates) == 1 and step_metrics(logged, 2)["adaptive/update_skipped"] == 0
    assert not (clean_queue.kv_list() or {}).get("train")


def test_the_librarys_pilot_by_name_trains_on_what_it_generated(run):
    """adaptive.allocator=pilot (4 rollouts per prompt, 4 more only where they varied) through the YAML."""
    trainer, manager, logged = run(2, **{"adaptive.allocator": "pilot", "actor_rollout_ref.rollout.n": 8})
    assert type(trainer.allocator).__name__ == "Pilot" and trainer.kind == "save" and trainer.budget == 32
    for step, update in enumerate(trainer.actor_rollout_wg.updates, start=1):
        groups = rows_by_uid(update)
        sizes = {g[0]["prompt"]: len(g) for g in groups.values()}
        assert set(sizes.values()) <= {4, 8}
        flat = {g[0]["prompt"] for g in groups.values() if len({r["score"] for r in g}) == 1}
        assert all(sizes[p] == 4 for p in flat)  # a flat pilot got nothing more
        assert f"question q{4 * (step - 1)}" in flat  # this step's p = 0 prompt (q0, then q4)
        spent = sum(sizes.values())
        m = step_metrics(logged, step)
        assert (m["adaptive/rollouts_spent"], m["adaptive/rollouts_saved"]) == (spent, 32 - spent) and spent < 32
        assert m["adaptive/varied"] == sum(n == 8 for n in sizes.values())
        real = [r for g in groups.values() for r in g]
        np.testing.assert_allclose([r["advantage"] for r in real], grpo_reference(real), atol=1e-5)
        pad = [r for r in update["rows"] if r["padding"]]
        assert len(pad) == m["adaptive/padding_rows"] == 32 - spent  # lcm(dp 2, ppo_mini_batch_size 4 x n 8)
        assert all(r["loss_tokens"] == 0 and r["abs_advantage_sum"] == 0.0 for r in pad)


def test_a_fill_allocator_that_spends_less_is_an_error(run, monkeypatch):
    import harness_plugins as plugins

    monkeypatch.setattr(plugins.SaveProgressive, "kind", "fill")  # declares fill, spends 11 of 16
    with pytest.raises(ValueError, match="counts sum to 11, budget is 16.*'fill'"):
        run(1, **{"adaptive.allocator": PROGRESSIVE})
