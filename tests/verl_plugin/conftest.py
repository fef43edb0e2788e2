"""One local Ray cluster and TransferQueue for the whole verl suite (starting them takes ~30 s)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def transfer_queue():
    ray = pytest.importorskip("ray")
    tq = pytest.importorskip("transfer_queue")
    from omegaconf import OmegaConf

    # TransferQueue's controller and storage unit ask for one logical CPU each.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    tq.init(
        OmegaConf.create(
            {
                "enable": True,
                "metrics": {"enabled": False, "port": 0},
                "backend": {
                    "storage_backend": "SimpleStorage",
                    "SimpleStorage": {"total_storage_size": 100000, "num_data_storage_units": 1},
                },
            }
        )
    )
    yield tq
    tq.close()
    ray.shutdown()


@pytest.fixture
def clean_queue(transfer_queue):
    """TransferQueue with nothing left over from an earlier test."""
    tq = transfer_queue

    def clear():
        for partition, items in (tq.kv_list() or {}).items():
            if items:
                tq.kv_clear(keys=list(items), partition_id=partition)

    clear()
    yield tq
    clear()


@pytest.fixture
def run(tmp_path, monkeypatch, clean_queue):
    """run(steps, files=..., llm=..., **overrides) -> (trainer, manager, logged metrics per step):
    the harness (harness.py) trains the real trainer with verl's fit() on toy.parquet (8 prompts)."""
    import harness as H
    import verl.trainer.ppo.v1.trainer_base as trainer_base

    monkeypatch.setattr(trainer_base, "Tracking", H.RecordingTracker)
    default_file = H.write_dataset(str(tmp_path / "toy.parquet"), list(range(8)))

    def go(steps, files=None, llm=None, root=None, **overrides):
        root = root or str(tmp_path / "run")
        os.makedirs(root, exist_ok=True)
        cfg = H.compose(H.base_overrides(root, files or [default_file], steps, **overrides))
        return H.train(cfg, llm or H.FakeLLM(H.P))

    return go
