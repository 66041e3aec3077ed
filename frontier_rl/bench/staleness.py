"""`frontier-rl bench staleness --config=configs/compare_arith.py --workdir=DIR [--repeats=N]
[--json] [--pin_cores]`: rollouts per second of the synchronous loop against rollouts that
overlap the update (rl.staleness = 1 and 2, rollout/pipeline.py), on one run of the config.

The run is the config's own (a comparison config: its first planned run, the testbed's uniform
arm on its shipped start). Each staleness trains WARM + `repeats` steps in a directory of its
own, evaluating only at the start and the end; the compile cache is shared, and the first
WARM steps (compiles, the pipeline's fill) are left out. Per staleness:

  rollouts_per_s    rollouts made in the timed steps / their summed step time (perf/step_time)
  s_per_1k          seconds per 1,000 rollouts
  phases            medians per step: synchronous, `build` (selection, generation,
                    verification, the entropy pass) and `update`; overlapped, `build` on this
                    thread, `update` on the trainer's thread, `wait` (this thread waiting for it),
                    `publish` (the new weights to the engine: a server's sync, after the wait)
  ratio             rollouts_per_s / the synchronous one's
  model             the ratio were the two halves to overlap perfectly: (build + update) /
                    max(build, update), from the synchronous phases; at paper scale the same
                    model on the published rollout and total hours (PAPER_HOURS)

Two halves that each use every core overlap only where one of them waits on the host (Python,
verification, dispatch): on a CPU the measured ratio sits below the model's, on an accelerator
with a rollout mesh of its own each half has its own devices.

With `--config.rollout.engine=sglang` the rollouts come from an SGLang-protocol server in a
process of its own: `rollout.sglang.url`, or, left empty, `frontier-rl serve` started here on
the run's start (stopped at the end). The trainer pushes its weights to the server after every
update (rollout.sync_every = 1), so each step's time includes that sync, and the server
generates the next step's groups while the trainer updates. `--pin_cores` then gives the
server the last CPU core and the trainer the others (each process's threads, and XLA's pool,
on its own cores: the embedded sampler in a process of its own, one core generating while the
other trains); `cores` in the output says which.
"""

from __future__ import annotations

import json
import os
import statistics

import ml_collections

from frontier_rl.run import metrics

WARM = 3
LEVELS = (0, 1, 2)
# Paper scale: rollout and total training hours of Qwen2.5-Math-7B on DAPO+MATH (HIVE,
# arXiv 2603.25184, section 4.2 and Table 1b; A100s). The update's share is the rest of the
# step. A perfect overlap of the two phases gives total / max(rollout, rest).
PAPER_HOURS = {"hive": {"rollout": 40.2, "total": 85.8},
               "ds": {"rollout": 153.7, "total": 198.4},
               "greso": {"rollout": 66.3, "total": 112.3}}


def paper_model() -> dict:
    """The ratio a perfect overlap would give at paper scale, per method, from PAPER_HOURS."""
    return {m: {"rollout_share": h["rollout"] / h["total"],
                "ratio": h["total"] / max(h["rollout"], h["total"] - h["rollout"])}
            for m, h in PAPER_HOURS.items()}


def _run_config(config: ml_collections.ConfigDict, workdir: str) -> ml_collections.ConfigDict:
    if "compare" in config:
        from frontier_rl.experiment import compare

        return compare.plan(config, workdir)[0].config
    return config


def pin_this_process(cores: set[int]) -> None:
    """Every thread of this process, and every thread it starts, on `cores` (before JAX starts
    its backend, so XLA sizes its thread pool to them)."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cores)
        except ProcessLookupError:  # a thread that has exited since
            pass


def measure(config: ml_collections.ConfigDict, workdir: str, repeats: int,
            pin_cores: bool = False) -> dict:
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(workdir, ".jax_cache"))
    if config.rollout.engine != "sglang" or config.rollout.sglang.url:
        if pin_cores:
            raise ValueError("--pin_cores splits the cores between the trainer and the server "
                             "it starts: it needs --config.rollout.engine=sglang with no "
                             "rollout.sglang.url")
        return _measure(_run_config(config, workdir), workdir, repeats)
    config = ml_collections.ConfigDict(config.to_dict())
    config.rollout.sglang.url = "http://127.0.0.1:1"  # the served one's, once it is up
    base = _run_config(config, workdir)
    from frontier_rl import warmstart
    from frontier_rl.rollout import serve

    start = warmstart.cached(base, workdir)
    if start is None:
        raise FileNotFoundError("bench staleness serves the run's start to the server, and this "
                                "config names none (warmstart.start) nor a cached warm start")
    cores = sorted(os.sched_getaffinity(0))
    if pin_cores and len(cores) < 2:
        raise ValueError(f"--pin_cores needs 2 cores or more; this process may use {cores}")
    server_cores = {cores[-1]} if pin_cores else None
    proc, url = serve.spawn(start, cores=server_cores)
    try:
        if pin_cores:
            pin_this_process(set(cores[:-1]))
        base.rollout.sglang.url = url
        out = {**_measure(base, workdir, repeats), "server": f"frontier-rl serve --model={start}"}
        if pin_cores:
            out["cores"] = {"trainer": cores[:-1], "server": sorted(server_cores)}
        return out
    finally:
        proc.kill()
        proc.wait()


def _measure(base: ml_collections.ConfigDict, workdir: str, repeats: int) -> dict:
    from frontier_rl import train

    out: dict = {"steps_timed": repeats, "warm_steps": WARM, "engine": base.rollout.engine,
                 "levels": {}}
    for k in LEVELS:
        cfg = ml_collections.ConfigDict(base.to_dict())
        cfg.rl.staleness = k
        cfg.rl.num_steps = WARM + repeats
        for field in ("rollout_budget", "token_budget", "pflops_budget"):
            cfg.rl[field] = 0
        for field in ("every", "every_rollouts", "every_budget", "early"):
            if field in cfg.eval:
                cfg.eval[field] = 0
        cfg.log.progress = False
        run_dir = os.path.join(workdir, f"staleness_{k}")
        train.run(cfg, run_dir)
        records = metrics.read(os.path.join(run_dir, "metrics.jsonl"))
        timed = [r for r in records if r["step"] > WARM]
        rollouts = timed[-1]["rollout/total"] - next(
            r["rollout/total"] for r in records if r["step"] == WARM)
        seconds = sum(r["perf/step_time"] for r in timed)

        def med(key, rows=timed):
            return statistics.median(r.get(key, 0.0) for r in rows)

        if k == 0:
            build = [r["perf/step_time"] - r["perf/update_time"] for r in timed]
            phases = {"build": statistics.median(build), "update": med("perf/update_time")}
        else:
            phases = {"build": med("perf/pipeline_build_time"),
                      "update": med("perf/pipeline_update_time"),
                      "wait": med("perf/pipeline_wait_time"),
                      "publish": med("perf/pipeline_publish_time"),
                      "lag": med("perf/pipeline_lag")}
        out["levels"][str(k)] = {"rollouts_per_s": rollouts / seconds,
                                 "s_per_1k": 1000.0 * seconds / rollouts,
                                 "step_s": med("perf/step_time"), "phases": phases}
    sync = out["levels"]["0"]
    b, u = sync["phases"]["build"], sync["phases"]["update"]
    out["model_ratio"] = (b + u) / max(b, u)
    out["paper_model"] = paper_model()
    for level in out["levels"].values():
        level["ratio"] = level["rollouts_per_s"] / sync["rollouts_per_s"]
    return out


def main(config: ml_collections.ConfigDict, workdir: str, repeats: int = 10,
         as_json: bool = False, pin_cores: bool = False) -> dict:
    from frontier_rl.run import provenance

    out = measure(config, workdir, repeats, pin_cores)
    out["meta"] = provenance.stamp()
    print(f"rollouts/s over {repeats} steps after {WARM} (model of a perfect overlap: "
          f"{out['model_ratio']:.2f}x; at paper scale, from HIVE's published hours: "
          + ", ".join(f"{m} {v['ratio']:.2f}x" for m, v in out["paper_model"].items()) + ")")
    for k, level in out["levels"].items():
        phases = ", ".join(f"{n} {v:.3f}" + ("" if n == "lag" else " s")
                           for n, v in level["phases"].items())
        print(f"  staleness {k}: {level['rollouts_per_s']:7.1f} rollouts/s, "
              f"{level['s_per_1k']:6.1f} s per 1,000, x{level['ratio']:.2f}  ({phases})")
    with open(os.path.join(workdir, "staleness.json"), "w") as f:
        json.dump(out, f, indent=1)
    if as_json:
        print(json.dumps(out))
    return out
