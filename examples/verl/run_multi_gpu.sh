#!/usr/bin/env bash
# Adaptive rollout allocation in verl on 2 nodes x 8 GPUs (FSDP actor, vLLM rollouts, GSM8K).
# Prerequisites on every node: pip install 'adaptive-rollouts[verl]' plus verl's GPU stack (vllm,
# flash-attn) and a Ray cluster: `ray start --head` on node 0, `ray start --address=<head>:6379` on
# the others. Data: verl's examples/data_preprocess/gsm8k.py writes the parquet files below.
# Extra arguments are Hydra overrides; VALIDATE_ONLY=1 checks the command line and exits.
set -euo pipefail
DATA=${DATA:-$HOME/data/gsm8k}
MODEL=${MODEL:-Qwen/Qwen2.5-3B-Instruct}
ALLOCATOR=${ALLOCATOR:-default}        # default | uniform | vip | vigor | package.module:Class
PYTHON=${PYTHON:-python}
extra=()
if [ "${VALIDATE_ONLY:-0}" = 1 ]; then extra=(adaptive.validate_only=true); fi

"$PYTHON" -m adaptive_rollouts.integrations.verl.main \
  data.train_files="$DATA/train.parquet" data.val_files="$DATA/test.parquet" \
  data.train_batch_size=256 data.max_prompt_length=512 data.max_response_length=1024 \
  actor_rollout_ref.model.path="$MODEL" \
  actor_rollout_ref.actor.ppo_mini_batch_size=64 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \
  actor_rollout_ref.actor.loss_agg_mode=token-mean \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16 \
  actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n=8 \
  actor_rollout_ref.rollout.tensor_model_parallel_size=2 \
  algorithm.adv_estimator=adaptive_grpo \
  adaptive.allocator="$ALLOCATOR" \
  trainer.nnodes=2 trainer.n_gpus_per_node=8 \
  trainer.save_freq=20 trainer.test_freq=10 trainer.total_epochs=3 \
  trainer.logger='["console"]' "${extra[@]}" "$@"
