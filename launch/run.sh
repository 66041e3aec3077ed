#!/usr/bin/env bash
# Sets up the environment and runs the embedded comparison: uniform GRPO, DAPO dynamic sampling,
# HIVE and HeaPA on the arithmetic task, each to the same rollout budget (CPU).
#   launch/run.sh [workdir] [extra frontier-rl flags...]
# Rerunning with the same workdir skips finished runs and resumes the interrupted one.
# shellcheck source=launch/env.sh
source "$(dirname "$0")/env.sh" tasks
WORKDIR="${1:-runs/compare}"
shift || true
exec frontier-rl compare --config=configs/compare_arith.py --workdir="$WORKDIR" "$@"
