"""Trainer integrations. Each submodule imports its framework lazily (TRL, verl)."""

__all__ = ["trl"]
