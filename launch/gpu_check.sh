#!/usr/bin/env bash
# The accelerator checks of the scale work, as one script (about 10 minutes on one H200):
#   launch/gpu_check.sh [OUT_DIR]
# 1. installs frontier_rl with the GPU extra (launch/env.sh detects the GPU),
# 2. `bench train_step --bench_config=qwen2.5-0.5b-realistic`: the Qwen2.5-0.5B shape, bf16
#    compute, full remat, micro-batches of 8, on 128 responses of drawn lengths (mean a third of
#    a 3,072-token cap) laid out as "pad", "trim" and "pack": each layout's step time, MFU
#    against the device's bf16 peak, and two predictions for its program beside the measured
#    `peak_bytes_in_use`: `<layout>_fit_gib` (XLA's memory analysis of the program compiled
#    for this GPU) and `<layout>_fit_target_gib` (`frontier-rl fit --target`'s figure: the same
#    program compiled for this GPU's compile-only twin, as fit does with no GPU present; the
#    ratio measured / predicted calibrates fit --target). The layouts run largest first ("pad"),
#    so the peak in use is the pad step's,
# 3. `bench sampler` on the 0.5B shape, 256 rows x (1,024 + 512) tokens: generated tokens/s,
# 4. `bench sync` on the 0.5B shape against `frontier-rl serve` on the same GPU: seconds per
#    weight sync by phase (device cast + host copy, write, server load, probe), old path beside
#    new.
# 5. `bench packed`: packed rows on cuDNN's packed layout against a float32 reference (output
#    and q/k/v gradients beside XLA's own bfloat16 error, every gradient finite, padding
#    included), a small policy's log-probs packed vs one sequence per row, and attention
#    forward + backward timed in both layouts.
# Each bench also reports the device's peak bytes in use (`peak_bytes_in_use`).
# Figures are printed and saved as JSON lines in OUT_DIR (default runs/gpu_check).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-runs/gpu_check}"
mkdir -p "$OUT"
# shellcheck source=launch/env.sh
source launch/env.sh tasks  # sets XLA_PYTHON_CLIENT_MEM_FRACTION, the share `fit` sizes against
echo "XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-unset}"
python -c "import jax; print('devices:', jax.devices())"
frontier-rl bench train_step --bench_config=qwen2.5-0.5b-realistic --repeats=3 --json \
  | tee "$OUT/train_step.txt"
frontier-rl bench sampler --bench_config=qwen2.5-0.5b-full --repeats=3 --json \
  | tee "$OUT/sampler.txt"
# the bench's server shares the GPU with its trainer: env.sh's shared share for each
(
  unset XLA_PYTHON_CLIENT_MEM_FRACTION
  export FRONTIER_RL_GPU_SHARED=1
  # shellcheck source=launch/env.sh
  source launch/env.sh tasks
  frontier-rl bench sync --bench_config=qwen2.5-0.5b --repeats=3 --json
) | tee "$OUT/sync.txt"
frontier-rl bench packed --repeats=5 --json | tee "$OUT/packed.txt"
tail -n 1 -q "$OUT"/train_step.txt "$OUT"/sampler.txt "$OUT"/sync.txt "$OUT"/packed.txt \
  > "$OUT/figures.jsonl"
echo "figures in $OUT/figures.jsonl"
