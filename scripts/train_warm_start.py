"""Re-make the demo's shipped warm-start weights (src/adaptive_rollouts/demo/assets/), bit for bit.

    python scripts/train_warm_start.py   # 250 SFT steps x 64 on digit sorting, one thread: ~75 s CPU

Checkpoints go to --work (default runs/warm_start) and a rerun resumes from them.
"""

from adaptive_rollouts.demo.warm_start import main

if __name__ == "__main__":
    main()
