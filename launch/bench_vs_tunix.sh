#!/usr/bin/env bash
# Side by side on this machine, in one run: frontier_rl's fixed bench work (`frontier_rl bench
# sampler` and `bench train_step`, the repo's venv) against the same work in google-tunix 0.1.7
# (launch/bench_tunix.py, its own venv). Rounds alternate frontier_rl / tunix per bench, each
# process pinned to one core with single-threaded XLA CPU, and the table gives each side's
# median tokens/s per round and frontier_rl / tunix (the median of the per-round ratios).
#
#   launch/bench_vs_tunix.sh [ROUNDS] [REPEATS]     (defaults 3 and 10)
#
# Environment: CORE (the core to pin to, default 1), FRL_PYTHON (default .venv/bin/python),
# TUNIX_VENV (default .venv-tunix), PYTHON (makes the tunix venv, default python3, >= 3.11),
# OUT (a folder for the raw JSON, default a temporary one), RESULT (also write the summary there,
# with its machine, date, commit and command: docs/results/bench/vs_tunix.json is what the docs
# render).
#
# The tunix venv is made when missing: jax CPU 0.10.2 (the repo's version) with flax and optax,
# then google-tunix without its declared dependencies (datasets, transformers, tensorflow-
# datasets, ... which would pull a torch build) plus only the packages its imports need.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROUNDS=${1:-3}
REPEATS=${2:-10}
CORE=${CORE:-1}
FRL_PYTHON=${FRL_PYTHON:-.venv/bin/python}
TUNIX_VENV=${TUNIX_VENV:-.venv-tunix}
PYTHON=${PYTHON:-python3}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"

TUNIX_CHECK="import tunix.models.qwen3.model, tunix.generate.sampler, tunix.rl.grpo.grpo_learner"
if ! [ -x "$TUNIX_VENV/bin/python" ] || ! "$TUNIX_VENV/bin/python" -c "$TUNIX_CHECK" 2>/dev/null; then
  echo "making the tunix venv in $TUNIX_VENV" >&2
  "$PYTHON" -m venv "$TUNIX_VENV"
  pip=("$TUNIX_VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
  nice -n 19 "${pip[@]}" "jax==0.10.2" "jaxlib==0.10.2" "flax==0.12.8" "optax==0.2.8" \
    "jaxtyping==0.3.11"
  nice -n 19 "${pip[@]}" --no-deps "google-tunix==0.1.7" "google-metrax==0.2.4" \
    "clu==0.0.12" "wrapt==2.5.2" "tensorboardX==2.6.5" "tqdm==4.70.1" \
    "huggingface_hub==2.4.0" "sentencepiece==0.2.3" "pillow==13.0.0" "perfetto==0.59.1" \
    "pandas==3.1.1" "python-dateutil==4.0.0" "safetensors==0.7.0"
  "$TUNIX_VENV/bin/python" -c "$TUNIX_CHECK"
fi

export XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
export JAX_PLATFORMS=cpu

# run SIDE BENCH ROUND: one process, its JSON result line to $OUT/SIDE-BENCH-ROUND.json.
run() {
  local side=$1 bench=$2 round=$3 log="$OUT/$1-$2-$3.log"
  if [ "$side" = frontier_rl ]; then
    taskset -c "$CORE" "$FRL_PYTHON" -m frontier_rl bench "$bench" --repeats="$REPEATS" --json \
      >"$log" 2>&1
  else
    taskset -c "$CORE" "$TUNIX_VENV/bin/python" launch/bench_tunix.py "$bench" \
      --repeats "$REPEATS" --json >"$log" 2>&1
  fi || { echo "$side $bench failed:" >&2; tail -20 "$log" >&2; exit 1; }
  grep '^{' "$log" | tail -1 >"$OUT/$side-$bench-$round.json"
  printf '  round %s %-11s %-10s %s tokens/s\n' "$round" "$side" "$bench" \
    "$("$PYTHON" -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["tokens_per_s"]))' \
      "$OUT/$side-$bench-$round.json")" >&2
}

rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain -- frontier_rl 2>/dev/null)" ]; then rev="$rev+local changes"; fi
echo "frontier_rl $rev vs tunix; $ROUNDS rounds x $REPEATS repeats," \
  "core $CORE, nproc $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for round in $(seq 1 "$ROUNDS"); do
  for bench in sampler train_step; do
    run frontier_rl "$bench" "$round"
    run tunix "$bench" "$round"
  done
done

"$FRL_PYTHON" - "$OUT" "$ROUNDS" "$REPEATS" "${RESULT:-}" <<'EOF'
import json, statistics, sys

from frontier_rl.run import provenance

out, rounds, repeats, result = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
load = lambda side, bench, r: json.load(open(f"{out}/{side}-{bench}-{r}.json"))
summary = {}
for bench in ("sampler", "train_step"):
    print(f"\n{bench}: tokens/s (median of each run's repeats)")
    print(f"{'round':>5} {'frontier_rl':>12} {'tunix':>12} {'ratio':>7}")
    ratios, fr, tx = [], [], []
    for r in range(1, rounds + 1):
        a, b = load("frontier_rl", bench, r), load("tunix", bench, r)
        ratios.append(a["tokens_per_s"] / b["tokens_per_s"])
        fr.append(a["tokens_per_s"])
        tx.append(b["tokens_per_s"])
        print(f"{r:>5} {a['tokens_per_s']:>12,.0f} {b['tokens_per_s']:>12,.0f} {ratios[-1]:>7.3f}")
    summary[bench] = dict(frontier_rl_tokens_per_s=statistics.median(fr),
                          tunix_tokens_per_s=statistics.median(tx),
                          ratio=statistics.median(ratios), ratios=ratios)
    print(f"{'med':>5} {summary[bench]['frontier_rl_tokens_per_s']:>12,.0f} "
          f"{summary[bench]['tunix_tokens_per_s']:>12,.0f} {summary[bench]['ratio']:>7.3f}"
          "   (ratio: median of per-round frontier_rl / tunix)")
summary["meta"] = provenance.stamp(["launch/bench_vs_tunix.sh", str(rounds), repeats])
summary["meta"]["machine"] += f", each side pinned to one core"
print(json.dumps(summary))
if result:
    with open(result, "w") as f:
        json.dump(summary, f, indent=1)
EOF
echo "raw results: $OUT" >&2
