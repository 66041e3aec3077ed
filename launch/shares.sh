# shellcheck shell=bash disable=SC2034
# Each GPU's memory shares the launch scripts give JAX and SGLang when nothing overrides them:
# one place for launch/env.sh, run_gpu.sh and sglang_server.sh (which source this file) and
# for `frontier-rl fit` (frontier_rl/fit/node_memory.py reads these lines: NAME=VALUE only).
#   DEFAULT_JAX_MEM_FRACTION         JAX with its GPUs to itself (JAX_MEM_FRACTION overrides)
#   DEFAULT_JAX_MEM_FRACTION_SHARED  JAX beside SGLang on the same GPUs (JAX_MEM_FRACTION_SHARED)
#   DEFAULT_SGLANG_MEM_SHARED        SGLang's --mem-fraction-static beside JAX (SGLANG_MEM)
#   DEFAULT_SGLANG_MEM               SGLang on GPUs of its own (SGLANG_MEM)
DEFAULT_JAX_MEM_FRACTION=0.9
DEFAULT_JAX_MEM_FRACTION_SHARED=0.45
DEFAULT_SGLANG_MEM_SHARED=0.45
DEFAULT_SGLANG_MEM=0.85
