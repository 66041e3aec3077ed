#!/usr/bin/env bash
# Starts an SGLang server for the trainer's rollouts (rollout.engine=sglang) and waits until it
# answers /health.
#   launch/sglang_server.sh MODEL_DIR [PORT=31000] [TP=1] [DP=1]
# (TP: tensor-parallel GPUs per replica; DP: data-parallel replicas; TP x DP GPUs in all)
# The client's requests are checked against SGLang's own request definitions over
# sglang[all]>=0.5.7,<=0.5.23 (tests/test_sglang_conformance.py reads that range from this line);
# what is installed is the part of it whose wheels match the machine's CUDA, below.
#
# CUDA 12 or 13, chosen as launch/env.sh chooses JAX's wheels: the NVIDIA driver's major version
# from nvidia-smi, 580 or newer -> CUDA 13, older -> CUDA 12. SGLANG_CUDA=12|13 overrides it;
# so does FRONTIER_RL_ACCEL=gpu (12) or gpu-cuda13 (13), env.sh's own override.
# Which SGLang releases are which, from their wheels' Requires-Dist on PyPI and the kernels they
# pin (the CUDA runtime their shared libraries link against):
#   0.5.8 - 0.5.10.post1  CUDA 12: cuda-python==12.9, torch==2.9.1 (PyPI's wheel: CUDA 12.8
#                         nvidia-*-cu12 libraries), flashinfer_python 0.6.1 - 0.6.7.post3,
#                         sgl-kernel 0.3.21 / sglang-kernel 0.4.1 (libcudart.so.12).
#   0.5.11 - 0.5.23       CUDA 13: cuda-python>=13.0, torch 2.11.0 / 2.13.0 / 2.14.1 (PyPI's
#                         wheels: cuda-toolkit 13.0), sglang-kernel 0.4.2 - 0.4.10
#                         (libcudart.so.13); flashinfer_python[cu13] from 0.5.13.
#   A CUDA 12 install also takes nvidia-cudnn-frontend<1.29: flashinfer leaves it unbounded, and
#   1.29.0 and later require nvidia-cutlass-dsl[cu13], whose CUDA 13 libraries would come along.
#   0.5.7 is left out: it pins torch 2.9.1 and sgl-kernel 0.3.20 but leaves cuda-python
#   unpinned, so a fresh install takes a CUDA 13 cuda-python beside CUDA 12 libraries.
# Each flavour gets a virtualenv of its own (.venv-sglang-cuda12, .venv-sglang-cuda13), so the
# two never share one; SGLang pins its own torch and CUDA kernels, which must not meet the
# trainer's JAX environment either.
#
# Seeded sampling: the client sends a per-row sampling_params.sampling_seed. SGLang builds the
# per-request seed tensor (sglang/srt/sampling/sampling_batch_info.py) only when the server runs
# with --enable-deterministic-inference; without it the tensor is None and the sampler
# (sglang/srt/layers/sampler.py) draws with an unseeded torch.multinomial, so the seed is
# ignored. With it the sampler draws from each row's seed and position, the sampling backend is
# forced to pytorch and, unless --attention-backend is given, the attention backend falls back to
# a deterministic one (fa3 on Hopper and older, which needs SM 80-90; flashinfer on Blackwell). The
# server is also given --random-seed (SGLANG_SEED) for everything else it seeds; without it
# SGLang draws a random one. Both flags are spelled the same over 0.5.8 - 0.5.23: declared
# directly in sglang/srt/server_args.py up to 0.5.13, and from 0.5.14 derived from the
# ServerArgs fields enable_deterministic_inference (a store_true flag) and random_seed by
# sglang/srt/arg_groups/arg_utils.py (underscores become dashes; from 0.5.20 the fields live in
# sglang/srt/arg_groups/fields/exec_.py and fields/device.py).
#
# Environment:
#   SGLANG_CUDA      12 or 13 (default: from the driver, as above)
#   SGLANG_VERSION   pip spec to install instead of the flavour's range (its pins still apply)
#   SGLANG_VENV      the virtualenv (default .venv-sglang-cudaNN)
#   SGLANG_SEED      --random-seed (default 0)
#   SGLANG_MEM       --mem-fraction-static, SGLang's weights + KV pool as a share of the GPU
#                    (default DEFAULT_SGLANG_MEM_SHARED of launch/shares.sh: the rest is left
#                    for JAX when both share a GPU; launch/run_gpu.sh sets DEFAULT_SGLANG_MEM
#                    on GPUs of its own; `frontier-rl fit` sizes the node with it)
#   SGLANG_ARGS      further server arguments, split on spaces (e.g. --attention-backend triton
#                    on GPUs older than SM 80)
#   SGLANG_DRY_RUN   1: print the CUDA flavour, virtualenv, pip spec and server command line,
#                    and exit without installing or starting anything
#   CUDA_VISIBLE_DEVICES  which GPUs SGLang uses.
# The server runs with --skip-tokenizer-init (the trainer sends token ids) and logs to
# MODEL_DIR/../sglang_PORT.log; its pid is printed on the last line.
set -euo pipefail
MODEL="${1:?usage: launch/sglang_server.sh MODEL_DIR [PORT] [TP] [DP]}"
PORT="${2:-31000}"
TP="${3:-1}"
DP="${4:-1}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=launch/shares.sh
source "$ROOT/launch/shares.sh"
CUDA="${SGLANG_CUDA:-}"
if [ -z "$CUDA" ]; then
  case "${FRONTIER_RL_ACCEL:-}" in
    gpu) CUDA=12 ;;
    gpu-cuda13) CUDA=13 ;;
  esac
fi
if [ -z "$CUDA" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    DRIVER="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | sed -n 1p | cut -d. -f1)"
    if [ "${DRIVER:-0}" -ge 580 ]; then CUDA=13; else CUDA=12; fi
  else
    echo "sglang_server: no NVIDIA driver found (nvidia-smi); SGLang needs an NVIDIA GPU" \
         "(SGLANG_CUDA=12|13 picks the wheels without one)" >&2
    exit 1
  fi
fi
case "$CUDA" in
  12) RANGE="sglang[all]>=0.5.8,<=0.5.10.post1"; PINS=("nvidia-cudnn-frontend<1.29") ;;
  13) RANGE="sglang[all]>=0.5.11,<=0.5.23"; PINS=() ;;
  *) echo "sglang_server: SGLANG_CUDA=$CUDA is not 12 or 13" >&2; exit 1 ;;
esac
SPEC=("${SGLANG_VERSION:-$RANGE}" "${PINS[@]}")
VENV="${SGLANG_VENV:-$ROOT/.venv-sglang-cuda$CUDA}"
SEED="${SGLANG_SEED:-0}"
if ! [[ "$SEED" =~ ^[0-9]+$ ]]; then
  echo "sglang_server: SGLANG_SEED=$SEED is not a non-negative integer" >&2
  exit 1
fi
read -r -a EXTRA <<<"${SGLANG_ARGS:-}"
CMD=("$VENV/bin/python" -m sglang.launch_server --model-path "$MODEL" --port "$PORT"
     --host 127.0.0.1 --tp-size "$TP" --dp-size "$DP" --skip-tokenizer-init
     --mem-fraction-static "${SGLANG_MEM:-$DEFAULT_SGLANG_MEM_SHARED}"
     --enable-deterministic-inference --random-seed "$SEED" "${EXTRA[@]}")
if [ "${SGLANG_DRY_RUN:-0}" = 1 ]; then
  echo "cuda: $CUDA"
  echo "venv: $VENV"
  echo "pip: ${SPEC[*]}"
  printf 'server:'
  printf ' %q' "${CMD[@]}"
  echo
  exit 0
fi
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  echo '*' >"$VENV/.gitignore"  # as newer Pythons' venv writes: git never lists it
  "$VENV/bin/pip" install -q --upgrade pip
fi
# Every start: a no-op when the installed SGLang is in the range, else it is replaced.
"$VENV/bin/pip" install -q "${SPEC[@]}"
LOG="$(dirname "$MODEL")/sglang_${PORT}.log"
"${CMD[@]}" >"$LOG" 2>&1 &
PID=$!
for _ in $(seq 600); do
  if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; then
    echo "sglang serving $MODEL on http://127.0.0.1:$PORT (log $LOG)"
    echo "$PID"
    exit 0
  fi
  if ! kill -0 "$PID" 2>/dev/null; then
    echo "sglang exited before answering /health; last lines of $LOG:" >&2
    tail -20 "$LOG" >&2
    exit 1
  fi
  sleep 2
done
echo "sglang did not answer /health within 20 minutes (log $LOG)" >&2
kill "$PID"
exit 1
