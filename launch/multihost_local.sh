#!/usr/bin/env bash
# One training run as P processes on this machine, each with DEVICES/P fake CPU devices: the
# multi-host code path (jax.distributed, gloo collectives, process-0-only files) without a
# cluster. Used by tests/test_multihost.py.
#   launch/multihost_local.sh P --config=configs/arith_grpo.py:smoke --workdir=runs/mh2 [flags]
# Process 0 prints to the terminal; the others log to $LOG_DIR/process_<i>.log (default: a new
# temporary directory, never the workdir). DEVICES (default 8) is the total device count, so
# `launch/multihost_local.sh 2 ...` and a 1-process run with 8 fake devices use the same mesh.
# Set FRONTIER_RL_PYTHON to a Python with frontier_rl installed to skip launch/env.sh.
set -euo pipefail
P="${1:?usage: launch/multihost_local.sh P [frontier-rl train flags...]}"
shift
if [ -z "${FRONTIER_RL_PYTHON:-}" ]; then
  # shellcheck source=launch/env.sh
  source "$(dirname "$0")/env.sh" tasks
  FRONTIER_RL_PYTHON=python
fi
DEVICES="${DEVICES:-8}"
if [ $((DEVICES % P)) -ne 0 ]; then
  echo "multihost_local: DEVICES=$DEVICES is not a multiple of P=$P" >&2
  exit 2
fi
PORT="${PORT:-$((20000 + RANDOM % 20000))}"
LOG_DIR="${LOG_DIR:-$(mktemp -d)}"
mkdir -p "$LOG_DIR"
export JAX_PLATFORMS=cpu
export XLA_FLAGS="--xla_force_host_platform_device_count=$((DEVICES / P))"
export FRONTIER_RL_COORDINATOR="localhost:$PORT" FRONTIER_RL_NUM_PROCESSES="$P"

pids=()
# SIGTERM/Ctrl-C reach every process: each checkpoints at the end of its step and exits 0.
trap 'kill "${pids[@]}" 2>/dev/null || true' INT TERM
for ((i = P - 1; i >= 0; i--)); do
  if [ "$i" -eq 0 ]; then
    FRONTIER_RL_PROCESS_ID=0 "$FRONTIER_RL_PYTHON" -m frontier_rl train "$@" &
  else
    FRONTIER_RL_PROCESS_ID="$i" "$FRONTIER_RL_PYTHON" -m frontier_rl train "$@" \
      >"$LOG_DIR/process_$i.log" 2>&1 &
  fi
  pids+=("$!")
done
status=0
for pid in "${pids[@]}"; do
  rc=0
  wait "$pid" || rc=$?
  # A trapped signal cuts `wait` short with 128+n while the process is still checkpointing;
  # waiting again gives the process's own exit status (the same 128+n if it died of a signal).
  for _ in 1 2 3; do
    [ "$rc" -gt 128 ] || break
    rc=0
    wait "$pid" || rc=$?
  done
  [ "$rc" -eq 0 ] || status=$rc
done
if [ "$status" -ne 0 ]; then
  echo "multihost_local: a process failed (exit $status); logs of processes 1..$((P - 1)) in $LOG_DIR" >&2
fi
exit "$status"
