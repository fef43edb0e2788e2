"""Tiny-LM RLVR demo: char tokenizer, tiny Qwen2, reasoning-gym tasks, warm start, the `demo` job."""
