#!/usr/bin/env bash
# GPU smoke test of the verl plug-in: 2 training steps of a 0.5B model on 1 GPU with vLLM, the
# default (progressive) allocator, a checkpoint at step 1 and a resume. Needs: a CUDA GPU,
# `pip install -e '.[verl]' vllm`, the model in the HF cache (offline) and GSM8K parquet files
# (verl's examples/data_preprocess/gsm8k.py). Passes when both runs exit 0 and the allocator state
# file exists. ~5-10 min on one H100/H200.
# VALIDATE_ONLY=1 checks both command lines (verl's validate_config and the adaptive section)
# without a GPU, Ray, model or data; tests/verl_plugin/test_verl_config.py runs it that way.
set -euo pipefail
DATA=${DATA:-$HOME/data/gsm8k}
MODEL=${MODEL:-Qwen/Qwen2.5-0.5B-Instruct}
OUT=${OUT:-/tmp/adaptive_verl_smoke}
PYTHON=${PYTHON:-python}
VALIDATE_ONLY=${VALIDATE_ONLY:-0}
extra=()
if [ "$VALIDATE_ONLY" = 1 ]; then extra=(adaptive.validate_only=true); else rm -rf "$OUT"; fi
common=(
  data.train_files="$DATA/train.parquet" data.val_files="$DATA/test.parquet"
  data.train_batch_size=16 data.val_max_samples=16 data.max_prompt_length=256 data.max_response_length=256
  actor_rollout_ref.model.path="$MODEL" actor_rollout_ref.actor.ppo_mini_batch_size=8
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4
  actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n=4
  actor_rollout_ref.rollout.gpu_memory_utilization=0.4 actor_rollout_ref.rollout.tensor_model_parallel_size=1
  algorithm.adv_estimator=adaptive_grpo adaptive.allocator="${ALLOCATOR:-default}"
  trainer.nnodes=1 trainer.n_gpus_per_node=1 trainer.val_before_train=false trainer.test_freq=-1
  trainer.save_freq=1 trainer.logger='["console"]' trainer.default_local_dir="$OUT/ckpt"
)
"$PYTHON" -m adaptive_rollouts.integrations.verl.main "${common[@]}" trainer.total_training_steps=1 "${extra[@]}" "$@"
[ "$VALIDATE_ONLY" = 1 ] || test -f "$OUT/ckpt/global_step_1/adaptive_allocator.safetensors"
"$PYTHON" -m adaptive_rollouts.integrations.verl.main "${common[@]}" trainer.total_training_steps=2 \
  trainer.resume_mode=auto "${extra[@]}" "$@"
[ "$VALIDATE_ONLY" = 1 ] || test -f "$OUT/ckpt/global_step_2/adaptive_allocator.safetensors"
echo "verl smoke: OK"
