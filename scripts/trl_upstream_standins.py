"""Local stand-ins for running TRL's own GRPO trainer tests offline (see scripts/trl_upstream_tests.sh).

TRL's tests load ``trl-internal-testing/<name>`` from the Hub. With the working directory set to
``OUT``, ``from_pretrained("trl-internal-testing/<name>")`` and ``load_dataset("trl-internal-testing/zen",
config)`` find the folders this script writes there instead:

- ``zen``: TRL's own ``scripts/generate_zen_dataset.py`` (taken from the TRL checkout), run with
  its ``push_to_hub`` writing parquet files and a dataset card with one config per subset;
- tiny randomly initialised models (``MODELS``): Qwen2 / Qwen3 / Qwen3-MoE / Llama / Mistral causal
  LMs and Qwen2 / Qwen3 / Llama sequence classifiers, 2 layers, hidden size 16;
- their tokenizer: a character-level tokenizer with Qwen3's chat template (TRL's
  ``qwen3_chat_template``, so tool calling is rendered) whose special tokens sit at Qwen's ids
  (``<|endoftext|>`` 151643, ``<|im_end|>`` 151645, ``<tool_call>`` 151657, ...), padded to Qwen's
  vocabulary size. Token ids that TRL's tests hard-code decode to filler tokens here, not Qwen text.

Vision models and the image datasets have no stand-in: those tests fail alike for stock and plug-in.

    python scripts/trl_upstream_standins.py --zen-script PATH/generate_zen_dataset.py --out DIR
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import string
from pathlib import Path

ORG = "trl-internal-testing"
VOCAB = 151_936  # Qwen2.5 / Qwen3
SPECIAL = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<tool_call>": 151657,
    "</tool_call>": 151658,
    "<tool_response>": 151665,
    "</tool_response>": 151666,
    "<think>": 151667,
    "</think>": 151668,
}
MODELS = {
    "tiny-Qwen2ForCausalLM-2.5": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "tiny-Qwen3ForCausalLM": ("Qwen3Config", "Qwen3ForCausalLM", {}),
    "tiny-Qwen3MoeForCausalLM": (
        "Qwen3MoeConfig",
        "Qwen3MoeForCausalLM",
        {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8},
    ),
    "tiny-LlamaForCausalLM-3.2": ("LlamaConfig", "LlamaForCausalLM", {}),
    "tiny-MistralForCausalLM-0.2": ("MistralConfig", "MistralForCausalLM", {}),
    "tiny-Qwen2ForSequenceClassification-2.5": ("Qwen2Config", "Qwen2ForSequenceClassification", {"num_labels": 1}),
    "tiny-Qwen3ForSequenceClassification": ("Qwen3Config", "Qwen3ForSequenceClassification", {"num_labels": 1}),
    "tiny-LlamaForSequenceClassification-3.2": ("LlamaConfig", "LlamaForSequenceClassification", {"num_labels": 1}),
}


def build_tokenizer():
    """Characters at ids 0.., Qwen's special tokens at Qwen's ids, filler tokens in between."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen3_chat_template

    characters = sorted(set(string.printable))
    taken = {**{c: i for i, c in enumerate(characters)}, **SPECIAL}
    used = set(taken.values())
    vocab = dict(taken)
    for i in range(VOCAB):
        if i not in used:
            vocab[f"<filler_{i}>"] = i
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="?"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<|endoftext|>", eos_token="<|im_end|>", unk_token="?"
    )
    tok.add_special_tokens(
        {"additional_special_tokens": [t for t in SPECIAL if t not in ("<|endoftext|>", "<|im_end|>")]}
    )
    tok.chat_template = qwen3_chat_template
    return tok


def build_models(out: Path) -> None:
    import torch
    import transformers

    tok = build_tokenizer()
    for name, (config_class, model_class, extra) in MODELS.items():
        torch.manual_seed(0)
        config = getattr(transformers, config_class)(
            vocab_size=VOCAB,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=8,
            max_position_embeddings=4096,
            pad_token_id=SPECIAL["<|endoftext|>"],
            eos_token_id=SPECIAL["<|im_end|>"],
            **extra,
        )
        model = getattr(transformers, model_class)(config)
        folder = out / ORG / name
        model.save_pretrained(folder)
        tok.save_pretrained(folder)


def build_zen(script: Path, out: Path) -> None:
    """Run TRL's zen generator with ``push_to_hub`` writing local parquet files and a dataset card."""
    from datasets import Dataset, DatasetDict

    folder = out / ORG / "zen"
    configs: list[dict] = []

    def push(self, repo_id, config_name="default", **kwargs):
        splits = self.items() if isinstance(self, DatasetDict) else [("train", self)]
        files = []
        for split, data in splits:
            path = f"{config_name}/{split}-00000.parquet"
            (folder / config_name).mkdir(parents=True, exist_ok=True)
            data.to_parquet(str(folder / path))
            files.append({"split": split, "path": path})
        configs.append({"config_name": config_name, "data_files": files})

    Dataset.push_to_hub = push
    DatasetDict.push_to_hub = push
    spec = importlib.util.spec_from_file_location("generate_zen_dataset", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(test_size=0.1, push_to_hub=True, repo_id=f"{ORG}/zen")
    lines = ["---", "configs:"]
    for config in configs:
        lines.append(f"- config_name: {config['config_name']}")
        lines.append("  data_files:")
        for file in config["data_files"]:
            lines.append(f"  - split: {file['split']}")
            lines.append(f"    path: {json.dumps(file['path'])}")
    lines.append("---")
    (folder / "README.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--zen-script", type=Path, required=True, help="TRL's scripts/generate_zen_dataset.py")
    parser.add_argument("--out", type=Path, required=True, help="folder for the stand-ins (the tests' cwd)")
    args = parser.parse_args()
    if not args.zen_script.is_file():
        raise SystemExit(f"--zen-script {args.zen_script}: no such file")
    os.makedirs(args.out, exist_ok=True)
    build_zen(args.zen_script, args.out)
    build_models(args.out)
    print(f"stand-ins written to {args.out}")


if __name__ == "__main__":
    main()
