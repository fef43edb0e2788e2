"""The helpers behind scripts/trl_upstream_tests.sh (TRL's own GRPO tests against the plug-in): the
pytest plugin that swaps in AdaptiveGRPOTrainer, and the offline stand-ins (zen dataset, tokenizer)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("torch")
trl = pytest.importorskip("trl")

from test_trl_support import make_trainer  # noqa: E402

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load(name):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_plugin_makes_the_tests_grpo_trainer_the_plug_in(tmp_path, monkeypatch):
    import trl.import_utils as import_utils

    from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer

    plugin = load("trl_upstream_plugin")
    stock = trl.GRPOTrainer
    monkeypatch.setattr(trl, "GRPOTrainer", stock)  # restored after the test
    monkeypatch.setenv("ADAPTIVE_ALLOCATOR", "stock")
    plugin.pytest_configure(None)
    assert trl.GRPOTrainer is stock
    monkeypatch.setenv("ADAPTIVE_ALLOCATOR", "vigor")
    plugin.pytest_configure(None)
    try:
        assert issubclass(trl.GRPOTrainer, AdaptiveGRPOTrainer) and trl.GRPOTrainer.__name__ == "GRPOTrainer"
        trainer = make_trainer(trl.GRPOTrainer, tmp_path)
        assert type(trainer.allocator).__name__ == "VIGOR"
        assert import_utils.is_no_such_package_available() is False  # a check this TRL lacks: unavailable
        with pytest.raises(AttributeError):
            import_utils.no_such_helper  # noqa: B018
    finally:
        if "__getattr__" in vars(import_utils):
            del import_utils.__getattr__


def test_standins_zen_from_trls_script_loads_offline(tmp_path, monkeypatch):
    from datasets import Dataset, DatasetDict, load_dataset

    standins = load("trl_upstream_standins")
    script = tmp_path / "generate_zen_dataset.py"
    script.write_text(
        "from datasets import Dataset\n"
        "def main(test_size, push_to_hub, repo_id):\n"
        "    data = Dataset.from_dict({'prompt': ['Beautiful is', 'Explicit is', 'Simple is', 'Flat is']})\n"
        "    data = data.train_test_split(test_size=test_size, shuffle=False)\n"
        "    if push_to_hub:\n"
        "        data.push_to_hub(repo_id, config_name='standard_prompt_only')\n"
        "        Dataset.from_dict({'text': ['x']}).push_to_hub(repo_id, config_name='standard_language_modeling')\n"
    )
    monkeypatch.setattr(Dataset, "push_to_hub", Dataset.push_to_hub)  # restored after the test
    monkeypatch.setattr(DatasetDict, "push_to_hub", DatasetDict.push_to_hub)
    standins.build_zen(script, tmp_path / "out")
    monkeypatch.chdir(tmp_path / "out")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    train = load_dataset("trl-internal-testing/zen", "standard_prompt_only", split="train")
    assert train["prompt"] == ["Beautiful is", "Explicit is", "Simple is"]
    assert load_dataset("trl-internal-testing/zen", "standard_language_modeling", split="train")["text"] == ["x"]


def test_standin_tokenizer_has_qwens_special_ids_and_chat_template():
    standins = load("trl_upstream_standins")
    tok = standins.build_tokenizer()
    assert len(tok) == standins.VOCAB
    assert tok.convert_tokens_to_ids("<|im_end|>") == 151645 and tok.eos_token_id == 151645
    assert tok.convert_tokens_to_ids("<tool_call>") == 151657 and tok.pad_token_id == 151643
    assert tok.decode(tok("2+3=5")["input_ids"]) == "2+3=5"
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert "<|im_start|>user" in text and text.rstrip().endswith("<|im_start|>assistant")
