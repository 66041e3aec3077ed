#!/usr/bin/env bash
# Compiles a small run's every program with the real GPU and TPU compilers on compile-only
# devices (no hardware): makes the target compilers' virtualenvs (launch/target_env.sh, cached
# under ~/.cache/frontier_rl; measured here: TPU 133 s, GPU 278 s to install) and runs the
# tests marked `target`.
#   launch/target_check.sh [pytest args...]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=launch/env.sh
source "$HERE/env.sh" tasks,test
# shellcheck source=launch/target_env.sh
( source "$HERE/target_env.sh" gpu )
# shellcheck source=launch/target_env.sh
( source "$HERE/target_env.sh" tpu )
exec python -m pytest -q -m target "$@"
