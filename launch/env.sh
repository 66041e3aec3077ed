# Sourced by the launch scripts: creates (once) and activates the project's virtualenv.
# Usage: source launch/env.sh [extras]   e.g. extras="tasks,test"
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${FRONTIER_RL_VENV:-$ROOT/.venv}"
EXTRAS="${1:-tasks}"
STAMP="$VENV/.frontier_rl-$(echo "$EXTRAS" | tr ',' '-')-$(cksum < "$ROOT/setup.py" | cut -d' ' -f1)"
if [ ! -x "$VENV/bin/python" ]; then
  echo "[env] creating virtualenv in $VENV"
  python3 -m venv "$VENV"
fi
if [ ! -f "$STAMP" ]; then
  echo "[env] installing frontier_rl[$EXTRAS] (first time: a few minutes)"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # torch is a test-only dependency; the CPU wheel is pinned first so nothing pulls a CUDA build.
  if [[ ",$EXTRAS," == *",test,"* ]]; then
    "$VENV/bin/python" -m pip install -q "torch==2.13.0"
  fi
  "$VENV/bin/python" -m pip install -q -e "$ROOT[$EXTRAS]"
  touch "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
export JAX_PLATFORMS="${JAX_PLATFORMS:-cpu}"
export TF_CPP_MIN_LOG_LEVEL=2
export TRANSFORMERS_VERBOSITY=error  # torch is a test-only dependency; no "PyTorch was not found"
cd "$ROOT"
