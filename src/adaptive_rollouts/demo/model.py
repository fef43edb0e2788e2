"""The demo's tiny causal LM (a Qwen2 config built locally) and its warm-start weights."""

from __future__ import annotations

import json
from pathlib import Path

from .tasks import task_of

ASSETS = Path(__file__).parent / "assets"
WEIGHTS = ASSETS / "warm_start.safetensors"
CONFIG = ASSETS / "config.json"

TINY = dict(
    hidden_size=192,
    intermediate_size=576,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=4,
    max_position_embeddings=32,
    tie_word_embeddings=True,
)


def assets_of(task: str = "sort") -> Path:
    """The folder of ``task``'s shipped warm start (`tasks.TASKS`): ``demo/assets`` for the default
    task, ``demo/assets/ladder`` for the ladder."""
    return ASSETS / task_of(task).assets


def build_model(tokenizer, seed: int = 0, **overrides):
    """A freshly initialised tiny Qwen2 for ``tokenizer`` (about 1.0 M parameters)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **{**TINY, **overrides},
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def save_warm_start(model, meta: dict, directory: Path = ASSETS) -> None:
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file(state, str(directory / WEIGHTS.name))
    overrides = {k: getattr(model.config, k) for k in TINY}
    (directory / CONFIG.name).write_text(json.dumps({"model": overrides, **meta}, indent=2) + "\n")


def load_warm_start(tokenizer, directory: Path = ASSETS):
    """The shipped warm-started model; raises FileNotFoundError naming the missing asset."""
    from safetensors.torch import load_file

    weights, config = directory / WEIGHTS.name, directory / CONFIG.name
    for path in (weights, config):
        if not path.exists():
            raise FileNotFoundError(f"warm-start asset missing: {path} (run scripts/train_warm_start.py)")
    meta = json.loads(config.read_text())
    model = build_model(tokenizer, **meta["model"])
    missing, unexpected = model.load_state_dict(load_file(str(weights)), strict=False)
    if unexpected or [k for k in missing if k != "lm_head.weight"]:
        raise ValueError(f"warm-start weights do not match the model: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    return model
