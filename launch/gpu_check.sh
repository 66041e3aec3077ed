#!/usr/bin/env bash
# The accelerator checks of the scale work, as one script (under 10 minutes on one H200):
#   launch/gpu_check.sh [OUT_DIR]
# 1. installs frontier_rl with the GPU extra (launch/env.sh detects the GPU),
# 2. `bench train_step` on the Qwen2.5-0.5B shape, 64 rows x 4,096 tokens, micro-batches of 8,
#    bf16 compute, full remat: prints MFU against the device's bf16 peak (target >= 40% on H200),
# 3. `bench sampler` on the same shape, 256 rows x (1,024 + 512) tokens,
# Each bench also reports the device's peak bytes in use (`peak_bytes_in_use`), to set beside
# the fit check's CPU-compiled estimate for the same shapes.
# Figures are printed and saved as JSON lines in OUT_DIR (default runs/gpu_check).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-runs/gpu_check}"
mkdir -p "$OUT"
# shellcheck source=launch/env.sh
source launch/env.sh tasks  # sets XLA_PYTHON_CLIENT_MEM_FRACTION, the share `fit` sizes against
echo "XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-unset}"
python -c "import jax; print('devices:', jax.devices())"
frontier-rl bench train_step --bench_config=qwen2.5-0.5b-full --repeats=5 --json \
  | tee "$OUT/train_step.txt"
frontier-rl bench sampler --bench_config=qwen2.5-0.5b-full --repeats=3 --json \
  | tee "$OUT/sampler.txt"
tail -n 1 -q "$OUT"/train_step.txt "$OUT"/sampler.txt > "$OUT/figures.jsonl"
echo "figures in $OUT/figures.jsonl"
