#!/usr/bin/env bash
# One GPU node: an SGLang server for rollouts plus the JAX trainer.
#   launch/run_gpu.sh CONFIG WORKDIR [PORT=31000] [extra frontier-rl flags...]
# With several GPUs, SGLANG_GPUS (default: the first) go to SGLang and the rest to JAX; with one
# GPU both share it: SGLang takes SGLANG_MEM (0.45) of its memory and JAX the shared share that
# launch/env.sh sets (XLA_PYTHON_CLIENT_MEM_FRACTION=0.45; `frontier-rl fit` sizes against it
# when run with the same variable). SGLang starts from the run's warm start (or
# model.path): the trainer syncs its policy into it before the first rollout.
# The rollout server's port is 31000, not SGLang's default 30000: that one is left to a HeaPA
# teacher (selector.heapa.teacher_url in the paper configs); the trainer refuses a teacher URL
# that is the rollout server's.
set -euo pipefail
CONFIG="${1:?usage: launch/run_gpu.sh CONFIG WORKDIR [PORT] [flags...]}"
WORKDIR="${2:?usage: launch/run_gpu.sh CONFIG WORKDIR [PORT] [flags...]}"
PORT="${3:-31000}"
shift 3 || shift $#
HERE="$(dirname "$0")"
NGPU="$(nvidia-smi -L | wc -l)"
if [ "$NGPU" -le 1 ]; then export FRONTIER_RL_GPU_SHARED=1; fi
# shellcheck source=launch/env.sh
source "$HERE/env.sh" tasks
if [ "$NGPU" -gt 1 ]; then
  SGLANG_GPUS="${SGLANG_GPUS:-0}"
  JAX_GPUS="$(seq -s, "$(( $(echo "$SGLANG_GPUS" | tr ',' '\n' | wc -l) ))" "$((NGPU - 1))")"
  TP="$(echo "$SGLANG_GPUS" | tr ',' '\n' | wc -l)"
  export SGLANG_MEM="${SGLANG_MEM:-0.85}"
else
  SGLANG_GPUS=0; JAX_GPUS=0; TP=1
  export SGLANG_MEM="${SGLANG_MEM:-0.45}"
fi
# The model SGLang starts from: a warm-start / export of the run, else the config's model.path.
MODEL="${SGLANG_MODEL:-$WORKDIR/warmstart}"
if [ ! -f "$MODEL/config.json" ]; then
  echo "no $MODEL/config.json: set SGLANG_MODEL to an HF directory of the policy's" \
       "architecture (e.g. the config's model.path)" >&2
  exit 1
fi
PID="$(CUDA_VISIBLE_DEVICES="$SGLANG_GPUS" "$HERE/sglang_server.sh" "$MODEL" "$PORT" "$TP" | tail -1)"
trap 'kill "$PID" 2>/dev/null || true' EXIT
CUDA_VISIBLE_DEVICES="$JAX_GPUS" frontier-rl train --config="$CONFIG" --workdir="$WORKDIR" \
  --config.rollout.engine=sglang --config.rollout.sglang.url="http://127.0.0.1:$PORT" "$@"
