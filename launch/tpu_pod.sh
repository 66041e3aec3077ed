#!/usr/bin/env bash
# One training run on a multi-host Cloud TPU slice (v4-16, v5p-16, v5litepod-16 and up): copies
# this checkout to every host, creates the virtualenv on each (launch/env.sh detects the TPU and
# installs jax[tpu]), and runs the same command on all hosts at once; JAX finds the pod's
# coordinator and ranks itself (frontier_rl/distributed.py).
#   launch/tpu_pod.sh TPU_NAME ZONE WORKDIR CONFIG [frontier-rl flags...]
#   e.g. launch/tpu_pod.sh my-v5p-16 us-east5-a /mnt/shared/runs/math_grpo configs/math_grpo.py
# WORKDIR must be a path every host sees (a Filestore/NFS or gcsfuse mount): checkpoints are
# written by all hosts, everything else by process 0. A maintenance event sends SIGTERM: the run
# checkpoints at the end of its step and exits 0; rerun this script to resume.
# GCLOUD_FLAGS (e.g. "--project=P") is passed to every gcloud call.
set -euo pipefail
TPU="${1:?usage: launch/tpu_pod.sh TPU_NAME ZONE WORKDIR CONFIG [flags...]}"
ZONE="${2:?usage: launch/tpu_pod.sh TPU_NAME ZONE WORKDIR CONFIG [flags...]}"
WORKDIR="${3:?usage: launch/tpu_pod.sh TPU_NAME ZONE WORKDIR CONFIG [flags...]}"
CONFIG="${4:?usage: launch/tpu_pod.sh TPU_NAME ZONE WORKDIR CONFIG [flags...]}"
shift 4
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
read -r -a GFLAGS <<<"${GCLOUD_FLAGS:-}"
REMOTE_DIR="frontier_rl"
ARCHIVE="$(mktemp -t frontier_rl.XXXXXX).tar.gz"
trap 'rm -f "$ARCHIVE"' EXIT
git -C "$ROOT" archive --format=tar.gz -o "$ARCHIVE" HEAD
gcloud compute tpus tpu-vm scp "${GFLAGS[@]}" --zone="$ZONE" --worker=all "$ARCHIVE" \
  "$TPU:frontier_rl.tar.gz"
EXTRA="$(printf ' %q' "$@")"
gcloud compute tpus tpu-vm ssh "${GFLAGS[@]}" "$TPU" --zone="$ZONE" --worker=all --command="
set -euo pipefail
mkdir -p $REMOTE_DIR && tar -xzf frontier_rl.tar.gz -C $REMOTE_DIR && cd $REMOTE_DIR
source launch/env.sh tasks
python -m frontier_rl train --config=$(printf '%q' "$CONFIG") --workdir=$(printf '%q' "$WORKDIR")$EXTRA"
