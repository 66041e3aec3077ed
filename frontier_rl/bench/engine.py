"""`frontier-rl bench engine --config=CONFIG --workdir=DIR [--repeats=N] [--json]`: what
rolling out through an HTTP server costs a training step.

Trains the same config twice from one warm start (DIR/warmstart, made on the first call and
reused after): embedded (`rollout.engine=jax`) and through `frontier-rl serve` started in a
subprocess on a free port (`rollout.engine=sglang`). Both recompute the old log-probs with the
trainer (`rl.recompute_old_logp=always`), so the two runs are the same computation and their
metrics must agree bit for bit; an embedded run of the default ("auto") skips that recompute,
and the report gives that run's step time too, so both costs are visible:

  http path      served / embedded-with-recompute - 1   (generation in another process, JSON,
                                                         the weight sync and its probe)
  recompute      embedded-with-recompute / embedded - 1 (the trainer's old log-probs, which any
                                                         external engine needs)

Each figure is the median over the last `repeats` steps of the run (after 20 steps in which
the shapes of the jitted functions settle). On a shared machine the two runs see the same
load only roughly; rerun to see the spread.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics

import ml_collections

from frontier_rl import config_lib
from frontier_rl.rollout import serve

SETTLE_STEPS = 20
PHASES = ("step", "generate", "update", "select")


def _records(run_dir: str) -> list[dict]:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def _compared(recs: list[dict]) -> list[dict]:
    """What must agree bit for bit between the embedded and the served run."""
    return [{k: v for k, v in r.items() if k.startswith(("eval/", "evalset/", "train/"))}
            for r in recs]


def _medians(recs: list[dict], repeats: int) -> dict[str, float]:
    steps = [r for r in recs if "perf/step_time" in r][-repeats:]
    return {p: statistics.median(r[f"perf/{p}_time"] for r in steps) for p in PHASES}


def main(config: ml_collections.ConfigDict, workdir: str, repeats: int = 20,
         as_json: bool = False) -> dict:
    from frontier_rl import train

    if not workdir:
        raise ValueError("bench engine needs --workdir (the warm start is cached there)")
    base = ml_collections.ConfigDict(config.to_dict())
    base.rl.num_steps = SETTLE_STEPS + repeats
    base.rollout.budget = 0
    base.eval.every = 0
    base.eval.every_rollouts = 0
    base.log.progress = False
    base.warmstart.cache_dir = os.path.join(os.path.abspath(workdir), "warmstart")

    def run(name: str, **fields) -> list[dict]:
        c = config_lib.set_fields(ml_collections.ConfigDict(base.to_dict()), fields)
        run_dir = os.path.join(workdir, name)
        shutil.rmtree(run_dir, ignore_errors=True)
        print(f"[bench engine] {name}: {c.rl.num_steps} steps", flush=True)
        train.run(config_lib.validate(c), run_dir)
        return _records(run_dir)

    plain = run("embedded")  # also makes the warm start on the first call
    embedded = run("embedded_recompute", **{"rl.recompute_old_logp": "always"})
    proc, url = serve.spawn(base.warmstart.cache_dir)
    try:
        served = run("served", **{"rl.recompute_old_logp": "always", "rollout.engine": "sglang",
                                  "rollout.sglang.url": url})
    finally:
        proc.kill()
        proc.wait()
    t = {name: _medians(recs, repeats) for name, recs in
         (("embedded", plain), ("embedded_recompute", embedded), ("served", served))}
    same = _compared(embedded) == _compared(served)
    syncs = [r["rollout/engine_sync_time"] for r in served if "rollout/engine_sync_time" in r]
    out = {
        "steps_timed": repeats,
        "step_s": {k: v["step"] for k, v in t.items()},
        "phase_s": t,
        "http_path_overhead": t["served"]["step"] / t["embedded_recompute"]["step"] - 1,
        "recompute_overhead": t["embedded_recompute"]["step"] / t["embedded"]["step"] - 1,
        "total_overhead": t["served"]["step"] / t["embedded"]["step"] - 1,
        "sync_s_per_step": (syncs[-1] - syncs[-repeats - 1]) / repeats
        if len(syncs) > repeats else float("nan"),
        "identical_metrics": same,
        "max_engine_logprob_abs_diff": max(
            (r.get("rollout/engine_logprob_abs_diff", 0.0) for r in served), default=0.0),
    }
    print(f"median step time over the last {repeats} of {base.rl.num_steps} steps:")
    for name, v in t.items():
        print(f"  {name:20s} " + "  ".join(f"{p} {v[p]:.3f}s" for p in PHASES))
    print(f"http path overhead   {100 * out['http_path_overhead']:+.1f}% "
          f"(served vs embedded, both recomputing; weight sync {out['sync_s_per_step']:.3f}s "
          "per step)")
    print(f"recompute overhead   {100 * out['recompute_overhead']:+.1f}% "
          "(embedded recomputing vs the default embedded run)")
    print(f"total                {100 * out['total_overhead']:+.1f}%")
    print(f"same eval/train metrics as the embedded run: {same}; engine vs trainer log-probs "
          f"differ by at most {out['max_engine_logprob_abs_diff']:.2e} nats/token")
    if as_json:
        print(json.dumps(out))
    return out
