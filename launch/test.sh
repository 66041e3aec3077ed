#!/usr/bin/env bash
# Sets up the environment (with the test extras) and runs the linter and the test suite.
#   launch/test.sh [pytest args...]     e.g. launch/test.sh -m slow
source "$(dirname "$0")/env.sh" tasks,test
ruff check .
exec python -m pytest -q -n 2 "$@"
