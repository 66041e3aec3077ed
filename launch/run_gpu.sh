#!/usr/bin/env bash
# One GPU node: an SGLang server for rollouts plus the JAX trainer.
#   launch/run_gpu.sh CONFIG WORKDIR [PORT=31000] [extra frontier-rl flags...]
# Two layouts of the node's N GPUs:
#   colocated (the default): SGLang and JAX both use every GPU, each with its share of the
#     memory (launch/shares.sh: SGLANG_MEM defaults to DEFAULT_SGLANG_MEM_SHARED, and
#     launch/env.sh gives JAX DEFAULT_JAX_MEM_FRACTION_SHARED). SGLang runs N / SGLANG_TP
#     data-parallel replicas of SGLANG_TP GPUs (default 1); JAX's mesh spans all N GPUs, so the
#     paper configs' data=1, fsdp=8 is valid on 8 GPUs. Size it with `frontier-rl fit
#     --target=h100x8 --config=CONFIG --config.rollout.engine=sglang` (this script runs that
#     check itself before starting anything).
#   split: SGLANG_GPUS (e.g. 0,1,2,3) go to SGLang (SGLANG_MEM DEFAULT_SGLANG_MEM), the others
#     to JAX (DEFAULT_JAX_MEM_FRACTION): more memory per program on fewer devices, e.g. 4 + 4
#     with --config.mesh.fsdp=4.
# Before SGLang starts, the config's mesh is checked against the GPUs JAX gets: a split whose
# rest the mesh does not fit (1 + 7 with fsdp=8) is refused, naming the fields to change; then,
# colocated, the whole GPU is summed (frontier_rl/fit/node_memory.py: JAX's share + SGLang's
# weights, KV pool, CUDA graphs and activations + the runtime margin; arithmetic, seconds) and a
# layout over a GPU's memory is refused (exit 5), naming both figures; then every program of the
# run is compiled for these GPUs (`frontier-rl fit --target`) and a run whose peak exceeds JAX's
# share of a GPU is refused (exit 3), naming the fields to change.
# SGLang starts from the run's warm start (or SGLANG_MODEL, e.g. the config's model.path): the
# trainer syncs its policy into it before the first rollout. Requests carry 512 rows each
# (rollout.sglang.max_rows; a timed-out one is redone whole), 8 in flight.
# The rollout server's port is 31000, not SGLang's default 30000: that one is left to a HeaPA
# teacher (selector.heapa.teacher_url in the paper configs); the trainer refuses a teacher URL
# that is the rollout server's.
set -euo pipefail
CONFIG="${1:?usage: launch/run_gpu.sh CONFIG WORKDIR [PORT] [flags...]}"
WORKDIR="${2:?usage: launch/run_gpu.sh CONFIG WORKDIR [PORT] [flags...]}"
PORT="${3:-31000}"
shift 3 || shift $#
HERE="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=launch/shares.sh
source "$HERE/shares.sh"
NGPU="$(nvidia-smi -L | wc -l)"
ALL="$(seq -s, 0 $((NGPU - 1)))"
if [ -z "${SGLANG_GPUS:-}" ] || [ "$NGPU" -le 1 ]; then
  SGLANG_GPUS="$ALL"
  JAX_GPUS="$ALL"
  export FRONTIER_RL_GPU_SHARED=1  # env.sh: JAX takes its share of a GPU it shares
  export SGLANG_MEM="${SGLANG_MEM:-$DEFAULT_SGLANG_MEM_SHARED}"
else
  JAX_GPUS="$(comm -23 <(tr , '\n' <<<"$ALL" | sort) <(tr , '\n' <<<"$SGLANG_GPUS" | sort) \
    | sort -n | paste -sd, -)"
  if [ -z "$JAX_GPUS" ]; then
    echo "run_gpu: SGLANG_GPUS=$SGLANG_GPUS leaves none of the $NGPU GPUs to JAX" >&2
    exit 2
  fi
  export FRONTIER_RL_GPU_SHARED=0  # env.sh and fit: JAX and SGLang on GPUs of their own
  export SGLANG_MEM="${SGLANG_MEM:-$DEFAULT_SGLANG_MEM}"
fi
# shellcheck source=launch/env.sh
source "$HERE/env.sh" tasks
N_SGLANG="$(tr , '\n' <<<"$SGLANG_GPUS" | wc -l)"
N_JAX="$(tr , '\n' <<<"$JAX_GPUS" | wc -l)"
export SGLANG_TP="${SGLANG_TP:-1}"  # read back by fit's node check
TP="$SGLANG_TP"
if [ $((N_SGLANG % TP)) -ne 0 ]; then
  echo "run_gpu: SGLANG_TP=$TP does not divide SGLang's $N_SGLANG GPUs" >&2
  exit 2
fi
# The mesh the trainer will build on JAX's GPUs, checked before SGLang takes minutes to start.
python - "$N_JAX" --config="$CONFIG" "$@" <<'PY'
import sys

from absl import flags
from ml_collections import config_flags

from frontier_rl.rl.sharding import mesh_shape

n = int(sys.argv[1])
config = config_flags.DEFINE_config_file("config")
flags.FLAGS([sys.argv[0]] + sys.argv[2:], known_only=True)
m = config.value.mesh
try:
    data, fsdp, model = mesh_shape(m.data, m.fsdp, m.model, n)
except ValueError as e:
    sys.exit(f"run_gpu: JAX gets {n} GPU(s) and {e}: change --config.mesh.data/fsdp/model or "
             "the split (SGLANG_GPUS; unset, SGLang and JAX share every GPU)")
print(f"[run_gpu] JAX on {n} GPU(s), mesh data={data} fsdp={fsdp} model={model}")
PY
# Colocated, the whole GPU first (frontier_rl/fit/node_check.py: JAX's share + SGLang's memory +
# the runtime margin against the GPU's memory; seconds, no compile; exit 5). Then every program
# of the run compiled for this node's GPUs by XLA:GPU (`frontier-rl fit --target`, on
# compile-only devices: nothing is allocated) and its peak compared with JAX's share of each GPU
# (the XLA_PYTHON_CLIENT_MEM_FRACTION env.sh set above), before SGLang takes minutes to start.
# A run that does not fit stops here with fit's report, which names the fields to change
# (rl.micro_batch_size, mesh.model, the fraction). FRONTIER_RL_SKIP_FIT=1 skips both checks
# (e.g. a node whose GPUs the target table does not know).
if [ "${FRONTIER_RL_SKIP_FIT:-0}" != 1 ]; then
  GPU_NAME="$(nvidia-smi --query-gpu=name --format=csv,noheader | sed -n 1p)"
  CHIP="$(python -c 'import sys; from frontier_rl.fit.targets import gpu_name_to_target as t
print(t(sys.argv[1]))' "$GPU_NAME")" || {
    echo "run_gpu: no compile target for '$GPU_NAME' (set FRONTIER_RL_SKIP_FIT=1 to start" \
         "without the fit check)" >&2; exit 2; }
  # The whole GPU first: arithmetic on the config and the shares, no compile.
  if [ "$FRONTIER_RL_GPU_SHARED" = 1 ]; then
    NODE_RC=0
    python -m frontier_rl.fit.node_check --gpu="$CHIP" --config="$CONFIG" \
      --config.rollout.engine=sglang --config.rollout.sglang.url="http://127.0.0.1:$PORT" \
      "$@" || NODE_RC=$?
    if [ "$NODE_RC" -eq 5 ]; then
      echo "run_gpu: JAX and SGLang together exceed each $CHIP's memory (the sum above); nothing" \
           "started" >&2
      exit 5
    elif [ "$NODE_RC" -ne 0 ]; then
      echo "run_gpu: the node check failed (exit $NODE_RC); nothing started" >&2
      exit "$NODE_RC"
    fi
  fi
  echo "[run_gpu] fit --target=${CHIP}x$N_JAX at JAX's share" \
       "${XLA_PYTHON_CLIENT_MEM_FRACTION:-${XLA_CLIENT_MEM_FRACTION:-}} of each GPU"
  FIT_RC=0
  frontier-rl fit --target="${CHIP}x$N_JAX" --config="$CONFIG" \
    --config.rollout.engine=sglang --config.rollout.sglang.url="http://127.0.0.1:$PORT" \
    --config.rollout.sglang.max_rows=512 "$@" || FIT_RC=$?
  if [ "$FIT_RC" -eq 3 ]; then
    echo "run_gpu: $CONFIG does not fit ${CHIP}x$N_JAX at JAX's share of each GPU" \
         "(fit's report above names the program and the fields to change); nothing started" >&2
    exit 3
  elif [ "$FIT_RC" -ne 0 ]; then
    echo "run_gpu: frontier-rl fit --target=${CHIP}x$N_JAX failed (exit $FIT_RC); nothing" \
         "started" >&2
    exit "$FIT_RC"
  fi
fi
# The model SGLang starts from: a warm-start / export of the run, else the config's model.path.
MODEL="${SGLANG_MODEL:-$WORKDIR/warmstart}"
if [ ! -f "$MODEL/config.json" ]; then
  echo "no $MODEL/config.json: set SGLANG_MODEL to an HF directory of the policy's" \
       "architecture (e.g. the config's model.path)" >&2
  exit 1
fi
echo "[run_gpu] SGLang on GPUs $SGLANG_GPUS (tp $TP x dp $((N_SGLANG / TP)), mem $SGLANG_MEM)," \
     "JAX on GPUs $JAX_GPUS (mem ${XLA_PYTHON_CLIENT_MEM_FRACTION:-${XLA_CLIENT_MEM_FRACTION:-}})"
PID="$(CUDA_VISIBLE_DEVICES="$SGLANG_GPUS" "$HERE/sglang_server.sh" "$MODEL" "$PORT" "$TP" \
  "$((N_SGLANG / TP))" | tail -1)"
trap 'kill "$PID" 2>/dev/null || true' EXIT
CUDA_VISIBLE_DEVICES="$JAX_GPUS" frontier-rl train --config="$CONFIG" --workdir="$WORKDIR" \
  --config.rollout.engine=sglang --config.rollout.sglang.url="http://127.0.0.1:$PORT" \
  --config.rollout.sglang.max_rows=512 "$@"
