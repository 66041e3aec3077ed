# shellcheck shell=bash
# Sourced by the launch scripts: creates (once) and activates the project's virtualenv.
# Usage: source launch/env.sh [extras]   e.g. extras="tasks,test"
# The accelerator is detected (an NVIDIA GPU via nvidia-smi, a TPU via /dev/accel* or
# /dev/vfio) and its JAX wheels added to the extras; FRONTIER_RL_ACCEL=cpu|gpu|gpu-cuda13|tpu
# overrides the detection. Without an accelerator everything runs on the CPU.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${FRONTIER_RL_VENV:-$ROOT/.venv}"
EXTRAS="${1:-tasks}"
ACCEL="${FRONTIER_RL_ACCEL:-}"
if [ -z "$ACCEL" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    DRIVER="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | sed -n 1p | cut -d. -f1)"
    if [ "${DRIVER:-0}" -ge 580 ]; then ACCEL=gpu-cuda13; else ACCEL=gpu; fi
  elif compgen -G "/dev/accel*" >/dev/null || compgen -G "/dev/vfio/[0-9]*" >/dev/null; then
    ACCEL=tpu
  else
    ACCEL=cpu
  fi
fi
case "$ACCEL" in
  cpu) ;;
  gpu|gpu-cuda13|tpu) EXTRAS="$EXTRAS,$ACCEL" ;;
  *) echo "[env] FRONTIER_RL_ACCEL=$ACCEL is not one of cpu, gpu, gpu-cuda13, tpu" >&2; return 1 ;;
esac
STAMP="$VENV/.frontier_rl-$(echo "$EXTRAS" | tr ',' '-')-$(cksum < "$ROOT/setup.py" | cut -d' ' -f1)"
if [ ! -x "$VENV/bin/python" ]; then
  echo "[env] creating virtualenv in $VENV"
  python3 -m venv "$VENV"
fi
if [ ! -f "$STAMP" ]; then
  echo "[env] installing frontier_rl[$EXTRAS] (first time: a few minutes)"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # torch is a test-only dependency; the CPU wheel is pinned first so nothing pulls a CUDA build.
  if [[ ",$EXTRAS," == *",test,"* ]]; then
    "$VENV/bin/python" -m pip install -q "torch==2.13.0"
  fi
  "$VENV/bin/python" -m pip install -q -e "${ROOT}[$EXTRAS]"
  touch "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
if [ "$ACCEL" = cpu ]; then
  export JAX_PLATFORMS="${JAX_PLATFORMS:-cpu}"
else
  echo "[env] accelerator: $ACCEL"
fi
# The share of each GPU's memory JAX preallocates, one value for every launch script and what
# `frontier-rl fit` sizes programs against (frontier_rl/fit/command.py reads it back). JAX's own default
# is 0.75; with a GPU to itself the trainer takes JAX_MEM_FRACTION (default
# DEFAULT_JAX_MEM_FRACTION of launch/shares.sh, as openpi's training instructions use; the rest
# holds the CUDA context, NCCL and cuDNN workspaces); a script whose JAX shares a GPU with
# SGLang sets FRONTIER_RL_GPU_SHARED=1 before sourcing this file and gets
# JAX_MEM_FRACTION_SHARED (default DEFAULT_JAX_MEM_FRACTION_SHARED, beside SGLang's
# DEFAULT_SGLANG_MEM_SHARED). An XLA_PYTHON_CLIENT_MEM_FRACTION already set wins; one set under
# JAX's newer name XLA_CLIENT_MEM_FRACTION is left alone (JAX refuses both).
# shellcheck source=launch/shares.sh
source "$ROOT/launch/shares.sh"
if [ -z "${XLA_CLIENT_MEM_FRACTION:-}" ]; then
  if [ "${FRONTIER_RL_GPU_SHARED:-0}" = 1 ]; then
    export XLA_PYTHON_CLIENT_MEM_FRACTION="${XLA_PYTHON_CLIENT_MEM_FRACTION:-${JAX_MEM_FRACTION_SHARED:-$DEFAULT_JAX_MEM_FRACTION_SHARED}}"
  else
    export XLA_PYTHON_CLIENT_MEM_FRACTION="${XLA_PYTHON_CLIENT_MEM_FRACTION:-${JAX_MEM_FRACTION:-$DEFAULT_JAX_MEM_FRACTION}}"
  fi
fi
# The XLA flags that overlap a sharded train step's collectives (the per-layer weight gathers,
# the gradient reduce-scatters) with compute, one list for every launch script and for
# `frontier-rl fit --target` (frontier_rl/fit/targets.py OVERLAP_FLAGS): XLA_FLAGS on a GPU,
# LIBTPU_INIT_ARGS on a TPU. A flag already set there keeps its value.
case "$ACCEL" in
  gpu|gpu-cuda13|tpu)
    eval "$("$VENV/bin/python" - "${ACCEL%%-*}" <<'PY'
import os, shlex, sys
from frontier_rl.fit import targets
env = {k: os.environ.get(k, "") for k in ("XLA_FLAGS", "LIBTPU_INIT_ARGS")}
targets.set_overlap_flags(sys.argv[1], env)
print("\n".join(f"export {k}={shlex.quote(v)}" for k, v in env.items() if v))
PY
)" ;;
esac
export TF_CPP_MIN_LOG_LEVEL=2
export TRANSFORMERS_VERBOSITY=error  # torch is a test-only dependency; no "PyTorch was not found"
cd "$ROOT"
