# shellcheck shell=bash
# Sourced by `frontier-rl fit --target` (through launch/fit_target.sh) and CI: creates (once) and
# activates a virtualenv that holds a GPU or TPU *compiler* beside frontier_rl, so programs can be
# compiled for that target on a machine without the device (JAX compile-only devices).
#   source launch/target_env.sh gpu|tpu
# gpu: jax[cuda12] (the CUDA 12 plugin and NVIDIA's wheels, about 3.2 GB; no driver needed to
# compile); tpu: jax[tpu] (libtpu, about 0.3 GB). Both at the JAX version of the trainer's own
# Python, so the programs compiled are the ones the trainer would build: JAX_TARGET_VERSION if
# set, else the JAX of the first of these that imports frontier_rl and jax: the virtualenv
# FRONTIER_RL_VENV names, the checkout's .venv, then python3 / python on PATH (the project
# installed in another virtualenv or the system Python); else the release setup.py pins (its
# lower bound, the tested one). The target compilers never go into the trainer's Python: its JAX
# would then try to open the device.
# The virtualenvs live under ${FRONTIER_RL_TARGET_CACHE:-~/.cache/frontier_rl} (kept between
# runs and CI jobs that keep ~/.cache).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KIND="${1:-}"
case "$KIND" in
  gpu) JAX_EXTRA=cuda12 ;;
  tpu) JAX_EXTRA=tpu ;;
  *) echo "[target_env] usage: source launch/target_env.sh gpu|tpu (got '${KIND}')" >&2; return 2 ;;
esac
if [ -z "${JAX_TARGET_VERSION:-}" ]; then
  for PY in ${FRONTIER_RL_VENV:+"$FRONTIER_RL_VENV/bin/python"} "$ROOT/.venv/bin/python" python3 python; do
    if command -v "$PY" >/dev/null 2>&1 && JAX_TARGET_VERSION="$("$PY" -c \
        'import frontier_rl, jax; print(jax.__version__)' 2>/dev/null)" && [ -n "$JAX_TARGET_VERSION" ]; then
      echo "[target_env] JAX $JAX_TARGET_VERSION, as $PY has it"
      break
    fi
    JAX_TARGET_VERSION=""
  done
  if [ -z "$JAX_TARGET_VERSION" ]; then
    JAX_TARGET_VERSION="$(sed -n 's/.*"jax>=\([0-9][0-9.]*\)[,"].*/\1/p' "$ROOT/setup.py" | sed -n 1p)"
    if [ -z "$JAX_TARGET_VERSION" ]; then
      echo "[target_env] no Python here imports frontier_rl and jax, and setup.py pins no jax>=X: set JAX_TARGET_VERSION" >&2
      return 1
    fi
    echo "[target_env] no Python here imports frontier_rl and jax: JAX $JAX_TARGET_VERSION, setup.py's pin"
  fi
fi
CACHE="${FRONTIER_RL_TARGET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/frontier_rl}"
TVENV="$CACHE/venv-target-$KIND-jax$JAX_TARGET_VERSION"
STAMP="$TVENV/.frontier_rl-$(cksum < "$ROOT/setup.py" | cut -d' ' -f1)"
if [ ! -x "$TVENV/bin/python" ]; then
  echo "[target_env] creating $TVENV"
  mkdir -p "$CACHE"
  python3 -m venv "$TVENV"
fi
if [ ! -f "$STAMP" ]; then
  echo "[target_env] installing jax[$JAX_EXTRA]==$JAX_TARGET_VERSION and frontier_rl (first time: minutes)"
  "$TVENV/bin/python" -m pip install -q --upgrade pip
  "$TVENV/bin/python" -m pip install -q "jax[$JAX_EXTRA]==$JAX_TARGET_VERSION" -e "$ROOT"
  touch "$STAMP"
fi
export FRONTIER_RL_TARGET_PYTHON="$TVENV/bin/python"
# Compile-only devices: the default backend stays the CPU; the target's devices come from
# jax.experimental.topologies. libtpu probes the VM's metadata unless told where it runs.
export JAX_PLATFORMS=cpu
if [ "$KIND" = tpu ]; then
  export TPU_ACCELERATOR_TYPE="${TPU_ACCELERATOR_TYPE:-v5litepod-8}"
  export TPU_WORKER_HOSTNAMES="${TPU_WORKER_HOSTNAMES:-localhost}"
  export ALLOW_MULTIPLE_LIBTPU_LOAD="${ALLOW_MULTIPLE_LIBTPU_LOAD:-1}"  # compile-only: no chip to lock
fi
