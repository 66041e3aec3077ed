#!/usr/bin/env bash
# Sets up the environment and runs the embedded default: GRPO on the arithmetic task (CPU).
#   launch/run.sh [workdir] [extra frontier-rl flags...]
# Rerunning with the same workdir resumes from the last checkpoint.
source "$(dirname "$0")/env.sh" tasks
WORKDIR="${1:-runs/arith_grpo}"
shift || true
exec frontier-rl train --config=configs/arith_grpo.py --workdir="$WORKDIR" "$@"
