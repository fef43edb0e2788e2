"""Character-level tokenizer for the demo model, built in code (no download).

One token per character of ``ALPHABET`` plus ``<pad>``, ``<bos>``, ``<eos>``; a
``PreTrainedTokenizerFast`` so TRL and ``generate`` treat it like any Hugging Face tokenizer.
"""

from __future__ import annotations

ALPHABET = "0123456789+-*/=()., ?abcdefghijklmnopqrstuvwxyz"
SPECIAL = ["<pad>", "<bos>", "<eos>"]


def build_tokenizer():
    """>>> tok = build_tokenizer(); tok.decode(tok("12+3=")["input_ids"])
    '12+3='
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIAL + list(ALPHABET))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="?"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>", unk_token="?"
    )
    tok.padding_side = "left"
    return tok
