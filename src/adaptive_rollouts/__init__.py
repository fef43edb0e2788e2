"""adaptive-rollouts: how many rollouts each prompt gets in RLVR, under a fixed budget."""

__version__ = "0.1.0"
