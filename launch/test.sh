#!/usr/bin/env bash
# Sets up the environment (with the test extras) and runs the linter and the test suite.
#   launch/test.sh [pytest args...]     e.g. launch/test.sh -m slow
# Two workers, each test file on one worker (module-scoped runs are not repeated); skip
# reasons are printed. With CI=true and no -m of the caller's, the slow tests run too
# (-m "not gpu and not tpu"), the 20 slowest tests are listed, and an unexplained skip fails.
# shellcheck source=launch/env.sh
source "$(dirname "$0")/env.sh" tasks,test
ruff check .
args=(-q -n 2 --dist loadfile -rs)
if [ "${CI:-}" = true ] && [[ " $* " != *" -m "* ]]; then
  args+=(-m "not gpu and not tpu and not target" --durations=20)
fi
exec python -m pytest "${args[@]}" "$@"
