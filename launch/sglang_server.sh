#!/usr/bin/env bash
# Starts an SGLang server for the trainer's rollouts (rollout.engine=sglang) and waits until it
# answers /health.
#   launch/sglang_server.sh MODEL_DIR [PORT=31000] [TP=1] [DP=1]
# (TP: tensor-parallel GPUs per replica; DP: data-parallel replicas; TP x DP GPUs in all)
# SGLang gets a virtualenv of its own (SGLANG_VENV, default .venv-sglang): it pins its own torch
# and CUDA kernels, which must not meet the trainer's JAX environment. Environment:
#   SGLANG_VERSION   pip spec of the pinned versions (default: sglang[all]>=0.5.7,<=0.5.23, the
#                    range whose request definitions the client's requests are checked
#                    against at both ends: tests/test_sglang_conformance.py; sampling_seed is
#                    an int64 from 0.5.7)
#   SGLANG_MEM       --mem-fraction-static, the GPU memory SGLang takes (default 0.45: the rest
#                    is left for JAX when both share a GPU; 0.85 on GPUs of its own)
#   CUDA_VISIBLE_DEVICES  which GPUs SGLang uses.
# The server runs with --skip-tokenizer-init (the trainer sends token ids) and logs to
# MODEL_DIR/../sglang_PORT.log; its pid is printed on the last line.
set -euo pipefail
MODEL="${1:?usage: launch/sglang_server.sh MODEL_DIR [PORT] [TP] [DP]}"
PORT="${2:-31000}"
TP="${3:-1}"
DP="${4:-1}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${SGLANG_VENV:-$ROOT/.venv-sglang}"
SPEC="${SGLANG_VERSION:-sglang[all]>=0.5.7,<=0.5.23}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi
# Every start: a no-op when the installed SGLang is in the range, else it is replaced.
"$VENV/bin/pip" install -q "$SPEC"
LOG="$(dirname "$MODEL")/sglang_${PORT}.log"
"$VENV/bin/python" -m sglang.launch_server --model-path "$MODEL" --port "$PORT" \
  --host 127.0.0.1 --tp-size "$TP" --dp-size "$DP" --skip-tokenizer-init \
  --mem-fraction-static "${SGLANG_MEM:-0.45}" >"$LOG" 2>&1 &
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
