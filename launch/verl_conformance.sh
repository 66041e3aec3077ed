#!/usr/bin/env bash
# Golden outputs of verl's own functions (policy losses, aggregations, KL estimators, rollout
# correction, advantage estimators) on fixed inputs, written to tests/fixtures/verl_goldens.json
# for tests/test_verl_conformance.py, which compares every registered mode of frontier_rl
# against them; and of verl's reward scorers (math_dapo, math_verify) on fixed responses, under
# this verl and an older one (HeaPA's math_dapo is verl 0.9.0's), written to
# tests/fixtures/verl_reward_goldens.json for tests/test_verl_reward_conformance.py. The tests
# read the files; this script is only needed to regenerate them.
#
#   launch/verl_conformance.sh
#
# Environment: VERL_VERSION (default 0.9.1), VERL_VENV (default .cache/venv-verl), PYTHON
# (makes the venv, default python3, >= 3.10), OUT (default tests/fixtures/verl_goldens.json),
# VERL_OLD_VERSION (default 0.9.0) and VERL_OLD_DIR (default .cache/verl-$VERL_OLD_VERSION:
# that verl alone, `pip install --target`, imported ahead of the venv's for the reward scorers),
# REWARD_OUT (default tests/fixtures/verl_reward_goldens.json).
#
# The venv is made when missing: the CPU torch wheel pinned exactly (torch==2.13.0+cpu), then
# verl without its declared dependencies (vllm, flash-attn, a CUDA torch, ...) plus only the
# packages its imports need, each pinned and each installed with --no-deps, so no resolve can
# pull another torch. A torch other than the pinned CPU build stops the script.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
VERL_VERSION=${VERL_VERSION:-0.9.1}
VERL_VENV=${VERL_VENV:-.cache/venv-verl}
PYTHON=${PYTHON:-python3}
OUT=${OUT:-tests/fixtures/verl_goldens.json}
VERL_OLD_VERSION=${VERL_OLD_VERSION:-0.9.0}
VERL_OLD_DIR=${VERL_OLD_DIR:-.cache/verl-$VERL_OLD_VERSION}
REWARD_OUT=${REWARD_OUT:-tests/fixtures/verl_reward_goldens.json}
TORCH="torch==2.13.0+cpu"

CHECK="import importlib.metadata, torch, verl, verl.trainer.ppo.core_algos, math_verify
import verl.trainer.ppo.rollout_corr_helper
assert torch.__version__ == '2.13.0+cpu' and torch.version.cuda is None, torch.__version__
assert verl.__version__ == '$VERL_VERSION', verl.__version__
assert importlib.metadata.version('math-verify') == '0.9.0'"

if ! [ -x "$VERL_VENV/bin/python" ] || ! "$VERL_VENV/bin/python" -c "$CHECK" 2>/dev/null; then
  echo "making the verl venv in $VERL_VENV" >&2
  "$PYTHON" -m venv "$VERL_VENV"
  pip=("$VERL_VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps)
  # the CPU torch (a wheel, never a build) and what `import torch` needs
  nice -n 19 "${pip[@]}" --only-binary=:all: "$TORCH" \
    "numpy==2.4.6" "filelock==4.3.2" "typing_extensions==4.16.0" "sympy==1.14.0" \
    "mpmath==1.4.1" "networkx==3.6.1" "Jinja2==3.1.6" "MarkupSafe==3.0.4" \
    "fsspec==2026.9.0"
  if ! "$VERL_VENV/bin/python" -c \
      "import torch; assert torch.__version__ == '2.13.0+cpu' and torch.version.cuda is None"
  then
    echo "the pinned CPU wheel $TORCH could not be installed in $VERL_VENV: stopped" >&2
    exit 1
  fi
  # verl and what `import verl.trainer.ppo.core_algos` needs (verl/__init__ imports ray and
  # tensordict; core_algos transformers and omegaconf)
  nice -n 19 "${pip[@]}" "verl==$VERL_VERSION" "packaging==26.4" \
    "omegaconf==2.4.0" "PyYAML==6.0.4" \
    "tensordict==0.15.3" "pyvers==0.2.3" "cloudpickle==3.1.3" "orjson==3.13.0" \
    "codetiming==1.4.0" "ray==2.60.0" "msgpack==1.2.4" "protobuf==7.36.2" \
    "jsonschema==4.26.0" "jsonschema-specifications==2025.9.1" "referencing==0.37.0" \
    "rpds-py==2026.9.1" "attrs==26.1.0" \
    "requests==2.34.2" "urllib3==2.8.0" "certifi==2026.10.19.post1" \
    "charset-normalizer==3.5.3" "idna==3.20" \
    "transformers==5.25.0" "tokenizers==0.23.3" "safetensors==0.8.0" "regex==2026.11.19" \
    "huggingface_hub==2.4.0" "tqdm==4.70.1" "httpx2==2.16.2" "httpcore2==2.16.2" \
    "h11==0.16.0" "truststore==0.10.5"
  # the reward scorers' math-verify, at the versions frontier_rl's tests run (they check it)
  nice -n 19 "${pip[@]}" "math-verify==0.9.0" "latex2sympy2_extended==1.11.0" \
    "antlr4-python3-runtime==4.13.2"
  "$VERL_VENV/bin/python" -c "$CHECK"
fi

"$VERL_VENV/bin/python" launch/verl_goldens.py --out "$OUT"
echo "wrote $OUT" >&2

OLD_CHECK="import verl; assert verl.__version__ == '$VERL_OLD_VERSION', verl.__version__"
if ! PYTHONPATH="$VERL_OLD_DIR" "$VERL_VENV/bin/python" -c "$OLD_CHECK" 2>/dev/null; then
  echo "installing verl $VERL_OLD_VERSION alone in $VERL_OLD_DIR" >&2
  nice -n 19 "$VERL_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-deps --upgrade --target "$VERL_OLD_DIR" "verl==$VERL_OLD_VERSION"
  PYTHONPATH="$VERL_OLD_DIR" "$VERL_VENV/bin/python" -c "$OLD_CHECK"
fi
"$VERL_VENV/bin/python" launch/verl_reward_goldens.py --out "$REWARD_OUT" \
  --verl "" --verl "$VERL_OLD_DIR"
echo "wrote $REWARD_OUT" >&2
