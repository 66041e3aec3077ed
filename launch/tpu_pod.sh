#!/usr/bin/env bash
# One training run on a multi-host Cloud TPU slice (v4-16, v5p-16, v5litepod-16 and up): copies
# this checkout to every host, creates the virtualenv on each (launch/env.sh detects the TPU and
# installs jax[tpu]), and runs the same command on all hosts at once; every host calls
# jax.distributed.initialize(), whose TPU detector reads the pod's workers and this host's rank
# from the VM's metadata server (frontier_rl/run/distributed.py).
#   launch/tpu_pod.sh TPU_NAME ZONE WORKDIR CONFIG [frontier-rl flags...]
#   e.g. launch/tpu_pod.sh my-v5p-16 us-east5-a /mnt/shared/runs/math_grpo configs/math_grpo.py
# WORKDIR must be a path every host sees (a Filestore/NFS or gcsfuse mount): checkpoints are
# written by all hosts, everything else by process 0. A maintenance event sends SIGTERM: the run
# checkpoints at the end of its step and exits 0; rerun this script to resume.
# GCLOUD_FLAGS (e.g. "--project=P") is passed to every gcloud call.
# Files: the code is this checkout's HEAD (commit first). What the configs read by relative
# path and git does not hold, the corpora and benchmark files (data/, written by
# launch/prepare_benchmarks.py) and the model checkpoints (checkpoints/<Hugging Face name>),
# goes along: SHIP lists those directories, relative to the repository root (default
# "data checkpoints"; symlinks are followed), copied into the same archive to every host on
# each launch. For checkpoints of many GB, put them on a mount every host sees instead, set
# SHIP="data" (or SHIP="") and pass absolute paths (--config.model.path=/mnt/shared/...).
# FIT_TARGET=<slice> (e.g. v5p-16, as `frontier-rl fit --target` names it) first compiles the
# run for that slice here, with this checkout's `frontier-rl fit` (its TPU compiler from
# launch/target_env.sh tpu) and the same config and flags: a run that does not fit stops before
# anything is copied, the stop line naming fit's proposal (the smallest change of the run's
# knobs that fits); with FIT_APPLY=1 the proposal's --config. overrides are added to the run's
# flags instead.
set -euo pipefail
TPU="${1:?usage: launch/tpu_pod.sh TPU_NAME ZONE WORKDIR CONFIG [flags...]}"
ZONE="${2:?usage: launch/tpu_pod.sh TPU_NAME ZONE WORKDIR CONFIG [flags...]}"
WORKDIR="${3:?usage: launch/tpu_pod.sh TPU_NAME ZONE WORKDIR CONFIG [flags...]}"
CONFIG="${4:?usage: launch/tpu_pod.sh TPU_NAME ZONE WORKDIR CONFIG [flags...]}"
shift 4
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
read -r -a GFLAGS <<<"${GCLOUD_FLAGS:-}"
REMOTE_DIR="frontier_rl"
read -r -a SHIP_DIRS <<<"${SHIP-data checkpoints}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
if [ -n "${FIT_TARGET:-}" ]; then
  FIT_RC=0
  (cd "$ROOT" && frontier-rl fit --target="$FIT_TARGET" --config="$CONFIG" "$@") 2>&1 \
    | tee "$TMP/fit.txt" || FIT_RC=$?
  # fit's proposal: the line `proposal: --config.a=1 --config.b=2` (fit/propose.py)
  PROPOSAL="$(sed -n 's/^proposal: \(--config\..*\)$/\1/p' "$TMP/fit.txt" | tail -n 1)"
  if [ "$FIT_RC" -eq 3 ] && [ -z "$PROPOSAL" ]; then
    echo "[tpu_pod] $CONFIG does not fit $FIT_TARGET, and fit found no change of the run's" \
         "knobs that fits (the report above says what it tried); nothing launched" >&2
    exit 3
  elif [ "$FIT_RC" -eq 3 ] && [ "${FIT_APPLY:-0}" != 1 ]; then
    echo "[tpu_pod] $CONFIG does not fit $FIT_TARGET; fit proposes $PROPOSAL (its figures are" \
         "in the report above): rerun with FIT_APPLY=1 to take it; nothing launched" >&2
    exit 3
  elif [ "$FIT_RC" -eq 3 ]; then
    read -r -a PROPOSED <<<"$PROPOSAL"
    set -- "$@" "${PROPOSED[@]}"
    echo "[tpu_pod] taking fit's proposal: $PROPOSAL"
  elif [ "$FIT_RC" -ne 0 ]; then
    echo "[tpu_pod] frontier-rl fit --target=$FIT_TARGET failed (exit $FIT_RC)" >&2
    exit "$FIT_RC"
  fi
fi
ARCHIVE="$TMP/frontier_rl.tar"
git -C "$ROOT" archive --format=tar -o "$ARCHIVE" HEAD
for d in "${SHIP_DIRS[@]}"; do
  if [ -e "$ROOT/$d" ]; then
    tar -C "$ROOT" --dereference -rf "$ARCHIVE" "$d"
  else
    echo "[tpu_pod] no $d/ in $ROOT: the hosts will not have it (a config path under $d/" \
         "fails there; pass a path every host sees)" >&2
  fi
done
gcloud compute tpus tpu-vm scp "${GFLAGS[@]}" --zone="$ZONE" --worker=all "$ARCHIVE" \
  "$TPU:frontier_rl.tar"
EXTRA="$(printf ' %q' "$@")"
gcloud compute tpus tpu-vm ssh "${GFLAGS[@]}" "$TPU" --zone="$ZONE" --worker=all --command="
set -euo pipefail
mkdir -p $REMOTE_DIR && tar -xf frontier_rl.tar -C $REMOTE_DIR && cd $REMOTE_DIR
source launch/env.sh tasks
python -m frontier_rl train --config=$(printf '%q' "$CONFIG") --workdir=$(printf '%q' "$WORKDIR")$EXTRA"
