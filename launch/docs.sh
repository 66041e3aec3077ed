#!/usr/bin/env bash
# Regenerates every marked block of README.md and docs/ from the results files under
# docs/results/ (launch/docs.py says how a block is marked).
#   launch/docs.sh            rewrite the blocks in place
#   launch/docs.sh --check    change nothing; exit 1 naming each block that differs
# shellcheck source=launch/env.sh
source "$(dirname "$0")/env.sh" tasks
exec python "$(dirname "$0")/docs.py" "$@"
