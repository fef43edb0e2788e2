"""Which methods the saving evidence runs, and which allocators are given the trainer's loss
aggregation, come from what each allocator class declares (``kind``, ``aggregation_aware``), never
from hand-written lists: a newly registered allocator joins them without any list being edited."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from adaptive_rollouts.allocators import ALLOCATORS, Pilot, Uniform, saving_allocators
from adaptive_rollouts.experiments.bench import build_allocator
from adaptive_rollouts.reporting.saving_tables import demo_saving_arms
from adaptive_rollouts.sim.problem import make_problem

ROOT = Path(__file__).resolve().parents[1]

# registers a saving and a budget-filling allocator first (as a library entry or a plug-in would, at
# import), then reads every list the saving evidence runs from
REGISTER_THEN_READ = """
import json, runpy, sys
from adaptive_rollouts.allocators import ALLOCATORS, Pilot, Uniform

class NewSaver(Pilot):
    name = "new-saver"

class NewFiller(Uniform):
    name = "new-filler"

ALLOCATORS["new-saver"] = NewSaver
ALLOCATORS["new-filler"] = NewFiller

from adaptive_rollouts.demo.protocol import SAVING_BASELINES
from adaptive_rollouts.experiments.regime_map import SAVING_MAP, SAVING_METHODS
from adaptive_rollouts.reporting.saving_tables import demo_saving_arms

print(json.dumps({
    "saving map": list(SAVING_MAP.methods),
    "saving methods": list(SAVING_METHODS),
    "demo protocol": list(SAVING_BASELINES),
    "demo protocol benchmark": list(runpy.run_path("benchmarks/demo_protocol.py")["default_arms"]()),
    "demo saving table": list(demo_saving_arms()),
    "saving-signal benchmark": list(runpy.run_path("benchmarks/saving_signal.py")["METHODS"]),
}))
"""


def test_a_registered_saving_allocator_joins_every_list_of_the_saving_evidence():
    out = subprocess.run(
        [sys.executable, "-c", REGISTER_THEN_READ], capture_output=True, text=True, cwd=ROOT, check=True
    )
    lists = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(lists) == 6
    for where, names in lists.items():
        assert "new-saver" in names, where
        assert "new-filler" not in names, where
        assert {"pilot", "greso"} <= set(names), where


def test_saving_allocators_are_the_classes_that_declare_saving(monkeypatch):
    assert saving_allocators() == ("default", "greso", "pilot", "pilot-commit", "sgpo")
    assert all(getattr(ALLOCATORS[n], "kind", None) == "save" for n in saving_allocators())

    class Later(Pilot):
        name = "later"

    monkeypatch.setitem(ALLOCATORS, "later", Later)
    monkeypatch.setitem(ALLOCATORS, "later-alias", Later)  # an alias is listed once
    assert saving_allocators()[-1] == "later" and "later-alias" not in saving_allocators()
    assert "later" in demo_saving_arms()


class _Aware(Uniform):
    aggregation_aware = True

    def __init__(self, aggregation: str | None = None, seed: int | None = 0):
        super().__init__(seed=seed)
        self.aggregation = aggregation


class _Unaware(_Aware):
    aggregation_aware = False


@pytest.mark.parametrize(("cls", "given"), [(_Aware, "token-mean"), (_Unaware, None)])
def test_the_loss_aggregation_goes_to_the_allocators_that_declare_they_model_it(monkeypatch, cls, given):
    monkeypatch.setitem(ALLOCATORS, "new-method", cls)
    problem = make_problem("hard-heavy", n_prompts=40, n_test=10, seed=0)
    alloc, _ = build_allocator("new-method", problem, seed=0, aggregation="token-mean")
    assert type(alloc) is cls and alloc.aggregation == given


def test_the_builtin_aggregation_aware_allocators():
    aware = sorted(n for n, f in ALLOCATORS.items() if getattr(f, "aggregation_aware", False))
    assert aware == ["default", "guarded-progressive", "posterior-progressive", "saving-progressive"]
