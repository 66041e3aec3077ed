#!/usr/bin/env bash
# From a paper config to its report on one GPU node, in one command:
#   launch/paper.sh CONFIG [--target=GPUxN] [--gpus=N] [--workdir=DIR] [--port=P] [--dry-run]
#                   [--apply-fit] [--config.FIELD=VALUE ...]
# e.g.  launch/paper.sh configs/math_hive.py:qwen2.5-math-1.5b
#       launch/paper.sh configs/math_hive.py:qwen2.5-math-1.5b --target=a100-80gbx8 --dry-run
# Paths are relative to the repository root; DIR defaults to runs/paper/<config>_<arg>. The
# steps, each skipped when its output exists, so that a rerun resumes where the last one stopped
# (training itself resumes from its newest checkpoint):
#   1 env     launch/env.sh: the virtualenv (created and installed once)
#   2 hub     python -m frontier_rl.experiment.hub_fetch fetch (frontier_rl/hub.py): the model, the corpus and the
#             benchmarks from their Hugging Face ids (frontier_rl/experiment/paper.py) wherever
#             the config's local path holds nothing, each id pinned to the commit fetched
#             -> DIR/hub/flags (the config overrides), DIR/hub/sources.md, DIR/model (a link to
#             the policy's files)
#   3 fit     frontier-rl fit --target=GPUxN: every program of the run compiled for the node's
#             GPUs at JAX's share of each, laid out as launch/run_gpu.sh lays them out
#             -> DIR/fit_GPUxN.txt (exit 3 when the run does not fit: nothing starts, and the
#             stop line names fit's proposal, the smallest change of the run's knobs that fits;
#             with --apply-fit the proposal is taken instead: its --config. overrides are kept
#             in DIR/fit_flags, fit is run again with them, and every later step and rerun
#             adds them)
#   4 train   launch/run_gpu.sh: SGLang and the trainer (its own fit check skipped: step 3 ran
#             it) -> DIR/final_metrics.json
#   5 eval    frontier-rl eval --step=<last>: the config's benchmark suite -> DIR/eval/step_N/
#   6 report  DIR/report.md: the ids and their commits, the protocol table, the fit, the final
#             metrics and the benchmark table
# From step 3 on the hub is read offline (HF_HUB_OFFLINE=1 unless set otherwise): every step, and
# every rerun, reads the commits step 2 pinned. --target names the compile target (default: the
# node's GPU, from nvidia-smi, times its count); --gpus=N the node's GPU count; --dry-run prints
# each step without running, installing or fetching anything (with the virtualenv in place it
# also says what step 2 would fetch). SGLANG_GPUS, SGLANG_TP, SGLANG_MEM, SGLANG_MODEL and the
# rest are launch/run_gpu.sh's. A comparison (configs/compare_*.py) runs its arms with
# `frontier-rl compare`, not here. To redo a step, delete its output (DIR/hub to fetch again,
# e.g. after changing the --config overrides it was fetched for).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
cd "$ROOT"
USAGE="usage: launch/paper.sh CONFIG [--target=GPUxN] [--gpus=N] [--workdir=DIR] [--port=P] \
[--dry-run] [--apply-fit] [--config.FIELD=VALUE ...]"
CONFIG="${1:?$USAGE}"
shift
TARGET=""
GPUS=""
WORKDIR=""
PORT=31000
DRY=0
APPLY_FIT=0
EXTRA=()
for arg in "$@"; do
  case "$arg" in
    --target=*) TARGET="${arg#*=}" ;;
    --gpus=*) GPUS="${arg#*=}" ;;
    --workdir=*) WORKDIR="${arg#*=}" ;;
    --port=*) PORT="${arg#*=}" ;;
    --dry-run|--dry_run) DRY=1 ;;
    --apply-fit|--apply_fit) APPLY_FIT=1 ;;
    --config.*) EXTRA+=("$arg") ;;
    *) echo "paper: unknown argument $arg; $USAGE" >&2; exit 2 ;;
  esac
done
case "$(basename "${CONFIG%%:*}")" in
  compare_*) echo "paper: $CONFIG is a comparison: run its arms with frontier-rl compare" >&2
             exit 2 ;;
esac
if [ ! -f "${CONFIG%%:*}" ]; then
  echo "paper: no config file ${CONFIG%%:*} (paths are relative to $ROOT)" >&2
  exit 2
fi
if [ -z "$WORKDIR" ]; then
  ARG=default
  if [[ "$CONFIG" == *:* ]]; then ARG="${CONFIG#*:}"; fi
  WORKDIR="runs/paper/$(basename "${CONFIG%%:*}" .py)_${ARG//,/_}"
fi
case "$WORKDIR" in /*) ;; *) WORKDIR="$ROOT/$WORKDIR" ;; esac

say() { echo "[paper] $*"; }
# A step's command as it would run (dry run), or the note that its output exists.
show() { local name="$1"; shift; printf '[paper] %s:' "$name"; printf ' %s' "$@"; printf '\n'; }
skipped() { say "$1: skipped, $2 exists"; }

# ---- the node: its GPUs, and the share JAX gets of them (launch/run_gpu.sh's two layouts)
NGPU="$GPUS"
if [ -z "$NGPU" ] && [ -n "$TARGET" ]; then NGPU="${TARGET##*x}"; fi
if [ -z "$NGPU" ]; then
  if command -v nvidia-smi >/dev/null 2>&1; then
    NGPU="$(nvidia-smi -L | wc -l)"
  else
    echo "paper: no nvidia-smi here: give --target=GPUxN (e.g. h200x8) or --gpus=N" >&2
    exit 2
  fi
fi
if ! [[ "$NGPU" =~ ^[0-9]+$ ]] || [ "$NGPU" -lt 1 ]; then
  echo "paper: $NGPU GPUs (--gpus / --target=GPUxN): expected a count >= 1" >&2
  exit 2
fi
if [ -n "${SGLANG_GPUS:-}" ] && [ "$NGPU" -gt 1 ]; then  # split: JAX gets the other GPUs
  N_JAX=$((NGPU - $(tr , '\n' <<<"$SGLANG_GPUS" | wc -l)))
  SHARED=0
else  # colocated: SGLang and JAX share every GPU
  N_JAX="$NGPU"
  SHARED=1
fi
if [ "$N_JAX" -lt 1 ]; then
  echo "paper: SGLANG_GPUS=$SGLANG_GPUS leaves none of the $NGPU GPUs to JAX" >&2
  exit 2
fi
say "config $CONFIG, run directory $WORKDIR, $NGPU GPU(s), JAX on $N_JAX" \
    "($([ "$SHARED" = 1 ] && echo "sharing each with SGLang" || echo "SGLang on $SGLANG_GPUS"))"

# ---- 1 env
if [ "$DRY" = 1 ]; then
  show "1/6 env" source launch/env.sh tasks
else
  say "1/6 env: source launch/env.sh tasks"
  USER_FRACTION="${XLA_PYTHON_CLIENT_MEM_FRACTION-unset}"
  # shellcheck source=launch/env.sh
  source "$HERE/env.sh" tasks
  # the share of each GPU is each step's own (run_gpu.sh's, fit's, eval's): not this shell's
  if [ "$USER_FRACTION" = unset ]; then unset XLA_PYTHON_CLIENT_MEM_FRACTION; fi
fi
CHIP="${TARGET%x*}"
if [ -z "$TARGET" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && [ "$DRY" = 0 ]; then
    GPU_NAME="$(nvidia-smi --query-gpu=name --format=csv,noheader | sed -n 1p)"
    CHIP="$(python -c 'import sys; from frontier_rl.fit.targets import gpu_name_to_target as t
print(t(sys.argv[1]))' "$GPU_NAME")" || {
      echo "paper: no compile target for '$GPU_NAME': give --target=GPUxN" >&2; exit 2; }
  else
    CHIP="GPU"  # a dry run without --target: the node's GPU
  fi
fi
FIT_TARGET="${CHIP}x$N_JAX"

# ---- 2 hub
HUB="$WORKDIR/hub"
HUB_CMD=(python -m frontier_rl.experiment.hub_fetch fetch --config="$CONFIG" --out="$HUB" "${EXTRA[@]}")
if [ -f "$HUB/flags" ]; then
  skipped "2/6 hub" "$HUB/flags"
elif [ "$DRY" = 1 ]; then
  show "2/6 hub" "${HUB_CMD[@]}"
  PY="${FRONTIER_RL_VENV:-$ROOT/.venv}/bin/python"
  if [ -x "$PY" ]; then
    say "2/6 hub would fetch (field, action, ids):"
    "$PY" -m frontier_rl.experiment.hub_fetch plan --config="$CONFIG" "${EXTRA[@]}" | sed 's/^/[paper]     /'
  fi
else
  say "2/6 hub: ${HUB_CMD[*]}"
  mkdir -p "$WORKDIR"
  "${HUB_CMD[@]}"
fi
HUB_FLAGS=()
if [ -f "$HUB/flags" ]; then
  mapfile -t HUB_FLAGS <"$HUB/flags"
  MODEL_DIR="$(sed -n 1p "$HUB/model_dir")"
  if [ -n "$MODEL_DIR" ] && [ "$DRY" = 0 ]; then ln -sfn "$MODEL_DIR" "$WORKDIR/model"; fi
elif [ "$DRY" = 1 ]; then
  HUB_FLAGS=("<the overrides in $HUB/flags>")
fi
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"  # every later step reads the commits pinned
FIT_FLAGS=()  # fit's proposal, once --apply-fit took it
if [ -f "$WORKDIR/fit_flags" ]; then mapfile -t FIT_FLAGS <"$WORKDIR/fit_flags"; fi
FLAGS=("${HUB_FLAGS[@]}" "${EXTRA[@]}" "${FIT_FLAGS[@]}")
SGLANG=(--config.rollout.engine=sglang --config.rollout.sglang.url="http://127.0.0.1:$PORT"
        --config.rollout.sglang.max_rows=512)

# ---- 3 fit (the checkpoint's local files: fit reads config.json from model.path)
FIT_OUT="$WORKDIR/fit_$FIT_TARGET.txt"
MODEL_FLAG=()
if [ -e "$WORKDIR/model" ] || [ "$DRY" = 1 ]; then MODEL_FLAG=(--config.model.path="$WORKDIR/model"); fi
fit_cmd() {
  FIT_CMD=(frontier-rl fit --target="$FIT_TARGET" --config="$CONFIG" "${SGLANG[@]}" "${FLAGS[@]}"
           "${MODEL_FLAG[@]}")
}
run_fit() {  # FIT_CMD, its report to $FIT_OUT.tmp and the terminal; its status in FIT_RC
  FIT_RC=0
  (  # the share of each GPU is this subshell's alone (env.sh reads FRONTIER_RL_GPU_SHARED)
    # shellcheck disable=SC2030
    if [ "$SHARED" = 1 ]; then export FRONTIER_RL_GPU_SHARED=1; fi
    # shellcheck source=launch/env.sh
    source "$HERE/env.sh" tasks >/dev/null
    "${FIT_CMD[@]}"
  ) 2>&1 | tee "$FIT_OUT.tmp" || FIT_RC=$?
}
fit_cmd
if [ -f "$FIT_OUT" ]; then
  skipped "3/6 fit" "$FIT_OUT"
elif [ "$DRY" = 1 ]; then
  show "3/6 fit (JAX's share: $([ "$SHARED" = 1 ] && echo "beside SGLang" || echo "GPUs of its own"))" \
       "${FIT_CMD[@]}" ">" "$FIT_OUT"
else
  say "3/6 fit: ${FIT_CMD[*]}"
  run_fit
  if [ "$FIT_RC" -eq 3 ]; then
    # fit's proposal: the line `proposal: --config.a=1 --config.b=2` (fit/propose.py)
    PROPOSAL="$(sed -n 's/^proposal: \(--config\..*\)$/\1/p' "$FIT_OUT.tmp" | tail -n 1)"
    if [ -z "$PROPOSAL" ]; then
      echo "paper: $CONFIG does not fit $FIT_TARGET at JAX's share of each GPU, and fit found" \
           "no change of the run's knobs that fits (the report above says what it tried);" \
           "nothing started" >&2
      exit 3
    elif [ "$APPLY_FIT" = 0 ]; then
      echo "paper: $CONFIG does not fit $FIT_TARGET at JAX's share of each GPU; fit proposes" \
           "$PROPOSAL (its figures are in the report above): rerun with --apply-fit to take" \
           "it; nothing started" >&2
      exit 3
    fi
    read -r -a PROPOSED <<<"$PROPOSAL"
    printf '%s\n' "${PROPOSED[@]}" >"$WORKDIR/fit_flags"
    FLAGS+=("${PROPOSED[@]}")
    fit_cmd
    say "3/6 fit: taking fit's proposal $PROPOSAL (kept in $WORKDIR/fit_flags for every later" \
        "step and rerun): ${FIT_CMD[*]}"
    run_fit
  fi
  if [ "$FIT_RC" -eq 3 ]; then
    echo "paper: $CONFIG does not fit $FIT_TARGET at JAX's share of each GPU (the report above" \
         "names the program and the fields to change); nothing started" >&2
    exit 3
  elif [ "$FIT_RC" -ne 0 ]; then
    echo "paper: frontier-rl fit --target=$FIT_TARGET failed (exit $FIT_RC)" >&2
    exit "$FIT_RC"
  fi
  mv "$FIT_OUT.tmp" "$FIT_OUT"
fi

# ---- 4 train
TRAIN_OUT="$WORKDIR/final_metrics.json"
TRAIN_ENV=(FRONTIER_RL_SKIP_FIT=1)
if [ -e "$WORKDIR/model" ] || [ "$DRY" = 1 ]; then
  TRAIN_ENV+=(SGLANG_MODEL="${SGLANG_MODEL:-$WORKDIR/model}")
fi
TRAIN_CMD=(bash "$HERE/run_gpu.sh" "$CONFIG" "$WORKDIR" "$PORT" "${FLAGS[@]}")
if [ -f "$TRAIN_OUT" ]; then
  skipped "4/6 train" "$TRAIN_OUT"
elif [ "$DRY" = 1 ]; then
  show "4/6 train" env "${TRAIN_ENV[@]}" "${TRAIN_CMD[@]}"
else
  say "4/6 train: ${TRAIN_ENV[*]} ${TRAIN_CMD[*]}"
  env "${TRAIN_ENV[@]}" "${TRAIN_CMD[@]}"
  if [ ! -f "$TRAIN_OUT" ]; then
    echo "paper: training stopped before its last step (no $TRAIN_OUT; preempted?): rerun" \
         "this command to resume from the newest checkpoint" >&2
    exit 1
  fi
fi

# ---- 5 eval (the last checkpoint, on the config's benchmark suite)
STEP="<last>"
if [ -f "$TRAIN_OUT" ]; then
  STEP="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["step"])' \
    "$TRAIN_OUT")"
fi
EVAL_OUT="$WORKDIR/eval/step_$STEP/eval.json"
EVAL_CMD=(frontier-rl eval --config="$CONFIG" --workdir="$WORKDIR" --step="$STEP" "${FLAGS[@]}")
if [ -f "$EVAL_OUT" ]; then
  skipped "5/6 eval" "$EVAL_OUT"
elif [ "$DRY" = 1 ]; then
  show "5/6 eval" "${EVAL_CMD[@]}"
else
  say "5/6 eval: ${EVAL_CMD[*]}"
  (
    # shellcheck source=launch/env.sh
    source "$HERE/env.sh" tasks >/dev/null
    "${EVAL_CMD[@]}"
  )
fi

# ---- 6 report
REPORT="$WORKDIR/report.md"
if [ -f "$REPORT" ]; then
  skipped "6/6 report" "$REPORT"
elif [ "$DRY" = 1 ]; then
  show "6/6 report" "$REPORT" "(the ids and their commits, frontier-rl protocol, $FIT_OUT," \
       "$TRAIN_OUT, ${EVAL_OUT%.json}.md)"
else
  say "6/6 report: $REPORT"
  {
    echo "# $CONFIG"
    echo
    echo "Run directory \`$WORKDIR\`, $NGPU GPU(s), fit target $FIT_TARGET; written by" \
         "launch/paper.sh."
    echo
    echo "## Sources: Hugging Face ids and the commits they resolved to"
    echo
    cat "$HUB/sources.md"
    echo
    echo "## Protocol"
    echo
    echo '```'
    frontier-rl protocol --config="$CONFIG" "${FLAGS[@]}" 2>&1 \
      || echo "(no protocol table: not a paper config)"
    echo '```'
    echo
    echo "## Fit ($FIT_TARGET)"
    echo
    echo '```'
    cat "$FIT_OUT"
    echo '```'
    echo
    echo "## Training: final metrics"
    echo
    echo '```json'
    cat "$TRAIN_OUT"
    echo
    echo '```'
    echo
    echo "## Evaluation (step $STEP)"
    echo
    sed 's/^# /### /' "${EVAL_OUT%.json}.md"
  } >"$REPORT.tmp"
  mv "$REPORT.tmp" "$REPORT"
  say "done: $REPORT"
fi
