#!/usr/bin/env bash
# The real-SGLang check (needs an NVIDIA GPU; a few minutes): trains the embedded arith policy's
# warm start with attention heads SGLang's kernels take (head_dim 64), starts real SGLang on that
# HF Qwen3 directory, runs 3 RL steps through it and prints the train-inference log-prob
# mismatch (rollout/engine_logprob_abs_diff) and the probe's difference at each sync.
#   launch/sglang_gpu_test.sh [WORKDIR=runs/sglang_gpu] [PORT=30123]
# Run by tests/test_sglang_gpu.py (marked gpu). Both share the GPU (SGLANG_MEM 0.45 / JAX 0.45).
set -euo pipefail
WORKDIR="${1:-runs/sglang_gpu}"
PORT="${2:-30123}"
HERE="$(dirname "$0")"
export FRONTIER_RL_GPU_SHARED=1  # JAX beside SGLang on one GPU: env.sh gives JAX 0.45
# shellcheck source=launch/env.sh
source "$HERE/env.sh" tasks
SHAPE=(--config.model.hidden_size=256 --config.model.intermediate_size=512
       --config.model.num_heads=4 --config.model.num_kv_heads=2 --config.model.head_dim=64)
rm -rf "$WORKDIR"
# 1. The warm start only (0 RL steps): the HF directory SGLang starts from.
frontier-rl train --config=configs/arith_grpo.py:smoke --workdir="$WORKDIR/ws" \
  --config.rl.num_steps=0 --config.log.progress=False "${SHAPE[@]}"
PID="$("$HERE/sglang_server.sh" "$WORKDIR/ws/warmstart" "$PORT" 1 | tail -1)"
trap 'kill "$PID" 2>/dev/null || true' EXIT
# 2. Three steps through SGLang, at the default probe tolerance (rollout.probe_tol=0.05).
frontier-rl train --config=configs/arith_grpo.py:smoke --workdir="$WORKDIR/run" \
  --config.rl.num_steps=3 --config.eval.every=3 --config.log.progress=False "${SHAPE[@]}" \
  --config.warmstart.cache_dir="$WORKDIR/ws/warmstart" --config.rollout.engine=sglang \
  --config.rollout.sglang.url="http://127.0.0.1:$PORT"
python - "$WORKDIR/run/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows[1:]:
    print(f"step {r['step']}: engine_logprob_abs_diff {r.get('rollout/engine_logprob_abs_diff')}"
          f" probe {r.get('rollout/engine_probe_abs_diff')} syncs {r.get('rollout/engine_syncs')}"
          f" retries {r.get('rollout/engine_retries')} step_time {r['perf/step_time']:.2f}s")
assert len(rows) == 4, "expected 3 steps"
assert max(r["rollout/engine_logprob_abs_diff"] for r in rows[1:]) < 0.05
print("sglang gpu check: ok")
PY
