"""Selector studies on the synthetic learner: one run, or a sensitivity sweep.

    frontier-rl sim --config=configs/sim_hive.py [--workdir=DIR]
    frontier-rl sim --config=configs/sim_sweep.py --workdir=runs/sim_sweep
    frontier-rl sim --config=configs/sim_controls.py --workdir=runs/sim_controls  (controls.py)
    frontier-rl sim calibrate --workdir=DIR --fit=uniform,oracle --predict=hive   (calibrate.py)

The learner's skill moves by `sim.update`: "sgd" (the default, a step proportional to the
batch-mean signal) or "adam" (a normalised step whose direction noise falls with the number of
informative groups, as under the trainer's AdamW); sim/learner.py has both rules and their
fields, and `sim calibrate` fits either to a finished comparison. Every figure here is a model
output.

One run (`run_sim`) builds the selector `config.selector.name` from `config.selector` exactly as
the trainer does, and a `SimContext` (sim/learner.py) from `config.sim`, `config.rl.batch_size`
(B), `config.rl.group_size` (G), `config.task.reverse_digits` and `config.seed`. Each step is the
trainer's loop with the parameter update replaced by the learner's:

    ctx.begin_step(t); groups = selector.build_batch(ctx); ctx.update(groups);
    selector.after_update(ctx, groups)

`rl.staleness = k` runs the trainer's pipeline (rollout/pipeline.py) instead: step t's groups
are built (and the selector's feedback given on them) under a snapshot of the learner from k
updates before (`SimContext.snapshot` / `behave`), the update applies to the current learner.

until `sim.steps` steps or `sim.rollout_budget` rollouts. Every `sim.eval_every` steps (and at
the end) a curve point records the cumulative rollouts, the exact held-out accuracy per band and
their mean, the zero-variance easy / hard ratios of every group rolled out since the previous
point (discarded ones included, as HIVE counts them), the cumulative effective rollouts (the
responses of trained groups with non-zero variance), the selector's host time per step (time
inside the context excluded, as in `bench selection`), the skill and the number of prompts.

A sweep (`config.sweep.grid` non-empty) runs every setting x `sweep.seeds` seeds and writes
`sweep_results.json`, `sweep_report.md` and one PNG per swept parameter. `sweep.grid` is a
tuple of (key, values) pairs; a key is a dotted config path ("selector.heapa.alpha"), or several
joined by commas whose values are tuples ("selector.heapa.d_min,selector.heapa.d_max" with
((0.75, 1.33), (0.5, 2.0))). A key under `selector.<name>.` runs selector <name>, so one sweep
can cover several selectors. `sweep.mode`:
  "one_at_a_time" (default): each parameter moves alone, everything else at the config's
     values; settings that coincide (a parameter at its base value) run once. This is the
     sensitivity study: its cost is the sum of the grid sizes, not their product.
  "grid": the cartesian product of all grids; the report marginalises each parameter over the
     others.

The HeaPA teacher runs inline (`sim.inline_teacher`, every selector section's
teacher_workers = 0), so a run depends only on its seed.
"""

from __future__ import annotations

import concurrent.futures
import copy
import itertools
import json
import math
import multiprocessing
import os
import time
from collections.abc import Callable

import ml_collections
import numpy as np

from frontier_rl import config_lib, selection
from frontier_rl.rollout.pipeline import Pipeline
from frontier_rl.run import budget as budget_rule
from frontier_rl.sim.learner import MODEL_DEFAULTS, SimContext, validate_model

RUN_DEFAULTS = dict(
    num_prompts=100_000,  # training prompts in the pool
    steps=1000,  # steps to run (each: build_batch, update, after_update)
    rollout_budget=0,  # stop once this many rollouts are spent (0 = no budget)
    eval_every=25,  # steps between curve points (the last step is always one)
    target_acc=0.0,  # mean held-out accuracy for rollouts-to-target; 0 = initial + target_gain
    target_gain=0.10,  # the target above the initial mean held-out accuracy when target_acc = 0
    inline_teacher=True,  # set teacher_workers = 0 in every selector section (deterministic)
    progress_every=0,  # print a progress line every this many steps (0 = none)
)
SWEEP_MODES = ("one_at_a_time", "grid")


def default_sim_config() -> ml_collections.ConfigDict:
    """`config.sim`: the run fields above and the learner's model fields (sim/learner.py)."""
    return ml_collections.ConfigDict({**RUN_DEFAULTS, **MODEL_DEFAULTS})


def default_sweep_config() -> ml_collections.ConfigDict:
    return ml_collections.ConfigDict(dict(
        grid=(),  # ((dotted key, values), ...); empty = a single run
        mode="one_at_a_time",  # or "grid" (see the module docstring)
        seeds=1,  # seeds per setting: config.seed, config.seed + 1, ...
        workers=0,  # parallel runs (processes); 0 = one per CPU core
    ))


def base_config() -> ml_collections.ConfigDict:
    """`config_lib.default_config()` with the `sim` and `sweep` sections, B = 256, G = 8.

    The sim's prompts are arith sums, so every selector section with HeaPA's augmentation
    fields (heapa, ps and composites) is set up as configs/arith_heapa.py does: arith
    continuation format, programmatic teacher inline, digit order and filters of the task
    (children may grow one operand beyond the largest band).
    """
    c = config_lib.default_config()
    c.rl.batch_size = 256
    c.rl.group_size = 8
    c.rl.minibatches = 1
    c.sim = default_sim_config()
    c.sweep = default_sweep_config()
    # band k is a sum of k + 2 operands of up to 3 digits (learner.py)
    return config_lib.augment_on_arith(c, max_digits=3, max_operands=len(c.sim.band_names) + 1)


# ----------------------------------------------------------------------------- validation


def validate_sim(config) -> ml_collections.ConfigDict:
    """Raises ValueError naming the field on the first bad `sim.*` / `sweep.*` value."""
    if "sim" not in config:
        raise ValueError("the config has no `sim` section (start from sim.run.base_config())")
    s = config.sim
    unknown = sorted(set(s.keys()) - set(RUN_DEFAULTS) - set(MODEL_DEFAULTS))
    if unknown:
        raise ValueError(f"sim.{unknown[0]} is not a sim field; known: "
                         f"{sorted({**RUN_DEFAULTS, **MODEL_DEFAULTS})}")

    def get(field):
        return s.get(field, RUN_DEFAULTS.get(field))

    def integer(field, lo):
        v = get(field)
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"sim.{field}={v!r} is not allowed: an integer >= {lo}")

    integer("num_prompts", 1)
    integer("steps", 1)
    integer("rollout_budget", 0)
    integer("eval_every", 1)
    integer("progress_every", 0)
    for f in ("target_acc", "target_gain"):
        v = get(f)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
            raise ValueError(f"sim.{f}={v!r} is not allowed: a number in [0, 1]")
    if not isinstance(get("inline_teacher"), bool):
        raise ValueError(f"sim.inline_teacher={get('inline_teacher')!r} is not True or False")
    model = {**MODEL_DEFAULTS, **{k: v for k, v in s.items() if k in MODEL_DEFAULTS}}
    validate_model(_namespace(model))
    if "sweep" in config:
        w = config.sweep
        if w.get("mode", "one_at_a_time") not in SWEEP_MODES:
            raise ValueError(f"sweep.mode={w.mode!r} is not one of {list(SWEEP_MODES)}")
        for f, lo in (("seeds", 1), ("workers", 0)):
            v = w.get(f, 1 if f == "seeds" else 0)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"sweep.{f}={v!r} is not allowed: an integer >= {lo}")
        _grid(config)  # checks the keys and value shapes
    return config


def _namespace(d: dict):
    import types

    return types.SimpleNamespace(**d)


# ----------------------------------------------------------------------------- one run


def _selector_config(config) -> ml_collections.ConfigDict:
    sel = copy.deepcopy(config.selector)
    if config.sim.get("inline_teacher", True):
        for name in selection.names():
            section = sel.get(name)
            if section is not None and "teacher_workers" in section:
                section.teacher_workers = 0
    return sel


def make_context(config) -> SimContext:
    return SimContext(config.sim, num_prompts=config.sim.num_prompts,
                      batch_size=config.rl.batch_size, group_size=config.rl.group_size,
                      seed=config.seed, reverse_digits=bool(config.task.get("reverse_digits",
                                                                              True)))


def run_sim(config, *, say: Callable[[str], None] | None = None,
            calls: list | None = None) -> dict:
    """Runs `config.selector.name` on the synthetic learner; returns its curves (module doc).
    `calls`: a list that receives every device call of the run (SimContext.calls)."""
    config_lib.validate(config)
    validate_sim(config)
    sim = config.sim
    name = config.selector.name
    t_start = time.perf_counter()
    ctx = make_context(config)
    ctx.calls = calls
    selector = selection.make(name, _selector_config(config), sim.num_prompts, config.seed)
    acc0 = ctx.evaluate()
    target = sim.target_acc or min(1.0, acc0["mean"] + sim.target_gain)
    bands = list(sim.band_names)
    curve: dict = {k: [] for k in ("step", "rollouts", "acc_mean", "zv_easy", "zv_hard",
                                   "effective_rollouts", "select_ms", "skill", "prompts")}
    curve["acc"] = {b: [] for b in bands}

    def record(step, win):
        acc = ctx.evaluate()
        curve["step"].append(step)
        curve["rollouts"].append(ctx.counters["rollouts"])
        curve["acc_mean"].append(acc["mean"])
        for b in bands:
            curve["acc"][b].append(acc[b])
        g = max(win["groups"], 1)
        curve["zv_easy"].append(win["easy"] / g)
        curve["zv_hard"].append(win["hard"] / g)
        curve["effective_rollouts"].append(total["effective"])
        curve["select_ms"].append(1e3 * win["select_s"] / max(win["steps"], 1))
        curve["skill"].append(ctx.skill)
        curve["prompts"].append(ctx.size)

    def fresh():
        return {"groups": 0, "easy": 0, "hard": 0, "select_s": 0.0, "steps": 0}

    total = {"groups": 0, "easy": 0, "hard": 0, "effective": 0, "trained": 0, "select_s": 0.0}
    win = fresh()

    def selecting(fn):  # the selector's host time: its call's, less the context's inside it
        in_ctx, t0 = ctx.time_in_s, time.perf_counter()
        out = fn()
        sel_s = time.perf_counter() - t0 - (ctx.time_in_s - in_ctx)
        win["select_s"] += sel_s
        total["select_s"] += sel_s
        return out

    def build(s: int, policy) -> list:  # policy: the version (k = 0) or a stale snapshot
        ctx.begin_step(s)
        ctx.behave(policy if config.rl.staleness else None)
        return selecting(lambda: selector.build_batch(ctx))

    def after(groups) -> None:  # then this batch's groups and zero-variance counts
        selecting(lambda: selector.after_update(ctx, groups))
        for k in ("groups", "easy", "hard"):
            win[k] += ctx.step_stats[k]
            total[k] += ctx.step_stats[k]

    def update(version, opt_state, groups, s: int, lag: int):
        ctx.update(groups)
        return version + 1, opt_state, {}, None

    # rl.staleness = k: step t's groups come from the policy of k updates before (the
    # trainer's pipeline, rollout/pipeline.py); 0 = build, update, feedback in turn
    pipe = Pipeline(config.rl.staleness, build, update, after=after,
                    snapshot=lambda version: ctx.snapshot(), overlap=False)
    record(0, win)
    stopped = ""
    step = 0
    try:
        for step in range(1, sim.steps + 1):
            before = ctx.counters["rollouts"]
            try:
                groups, _ = pipe.run(step, step - 1, None)
            except RuntimeError as e:  # e.g. DS's cap on generation rounds: the selector's words
                step -= 1
                stopped = f"step {step + 1}: {e}"
                break
            win["steps"] += 1
            total["trained"] += len(groups)
            total["effective"] += sum(g.size for g in groups if not g.zero_variance)
            if step % sim.eval_every == 0 or step == sim.steps:
                record(step, win)
                win = fresh()
            if say is not None and sim.progress_every and step % sim.progress_every == 0:
                say(f"  step {step}: rollouts {ctx.counters['rollouts']:,} "
                    f"acc {ctx.evaluate()['mean']:.3f} skill {ctx.skill:+.3f}")
            # the trainer's rule (run/budget.py): stop at the step boundary nearest the budget
            if budget_rule.reached(ctx.counters["rollouts"], sim.rollout_budget,
                                   ctx.counters["rollouts"] - before):
                stopped = f"rollout budget {sim.rollout_budget:,} reached"
                break
    finally:
        pipe.close()
        close = getattr(selector, "close", None)
        if close is not None:
            close()
    if curve["step"][-1] != step:
        record(step, win)
    wall = time.perf_counter() - t_start
    hit = next((r for r, a in zip(curve["rollouts"], curve["acc_mean"], strict=True)
                if a >= target), None)
    groups = max(total["groups"], 1)
    final = {"acc_mean": curve["acc_mean"][-1], **{f"acc_{b}": curve["acc"][b][-1]
                                                   for b in bands},
             "rollouts": ctx.counters["rollouts"], "skill": ctx.skill,
             "zv_easy": total["easy"] / groups, "zv_hard": total["hard"] / groups,
             "effective_rollouts": total["effective"],
             "effective_ratio": total["effective"] / max(ctx.counters["rollouts"], 1),
             "select_ms": 1e3 * total["select_s"] / max(step, 1), "prompts": ctx.size}
    return {
        "selector": name, "seed": config.seed, "steps_run": step, "stopped": stopped,
        "num_prompts": sim.num_prompts, "batch_size": config.rl.batch_size,
        "group_size": config.rl.group_size, "wall_s": wall, "steps_per_s": step / wall,
        "initial_acc": acc0, "target_acc": target, "rollouts_to_target": hit,
        "final": final, "counters": dict(ctx.counters), "curve": curve,
        "mechanisms": dict(getattr(selector, "mechanisms", dict)()),
        "config": {"sim": sim.to_dict(), "selector": config.selector[name].to_dict()
                   if name in config.selector else {}},
    }


def summary_line(res: dict) -> str:
    f = res["final"]
    hit = res["rollouts_to_target"]
    return (f"{res['selector']}: {res['steps_run']} steps, {f['rollouts']:,} rollouts, "
            f"acc {res['initial_acc']['mean']:.3f} -> {f['acc_mean']:.3f}, "
            f"target {res['target_acc']:.3f} at "
            f"{'not reached' if hit is None else f'{hit:,} rollouts'}, "
            f"zero-variance easy {f['zv_easy']:.2f} / hard {f['zv_hard']:.2f}, "
            f"effective {f['effective_ratio']:.2f}, select {f['select_ms']:.2f} ms/step")


# ----------------------------------------------------------------------------- sweeps


def _grid(config) -> list[tuple[tuple[str, ...], list[tuple]]]:
    """[(keys, [value tuple per setting])], checked against the config (errors name the key)."""
    raw = config.sweep.get("grid", ()) if "sweep" in config else ()
    items = raw.items() if hasattr(raw, "items") else raw
    out = []
    for item in items:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise ValueError(f"sweep.grid entry {item!r} is not a (key, values) pair")
        key, values = item
        if not isinstance(key, str) or not key:
            raise ValueError(f"sweep.grid key {key!r} is not a dotted config path")
        keys = tuple(k.strip() for k in key.split(","))
        for k in keys:
            lookup(config, k, key)
        if not isinstance(values, (tuple, list)) or not values:
            raise ValueError(f"sweep key {key!r}: values {values!r} are not a non-empty list")
        vals = []
        for v in values:
            if len(keys) == 1:
                vals.append((v,))
            elif isinstance(v, (tuple, list)) and len(v) == len(keys):
                vals.append(tuple(v))
            else:
                raise ValueError(f"sweep key {key!r}: value {v!r} is not a tuple of "
                                 f"{len(keys)} values")
        out.append((keys, vals))
    return out


def lookup(config, path: str, key: str, what: str = "sweep key"):
    """The value at dotted `path`; a ValueError names `what` `key` and the missing field."""
    node = config
    for i, part in enumerate(path.split(".")):
        if not hasattr(node, "keys") or part not in node:
            where = ".".join(path.split(".")[: i + 1])
            raise ValueError(f"{what} {key!r}: the config has no field {where!r}")
        node = node[part]
    if hasattr(node, "keys"):
        raise ValueError(f"{what} {key!r}: {path!r} is a section, not a field")
    return node


def _assign(config, path: str, value) -> None:
    *head, last = path.split(".")
    node = config
    for part in head:
        node = node[part]
    old = node[last]
    if isinstance(old, tuple) and isinstance(value, list):
        value = tuple(value)
    if isinstance(old, float) and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    try:
        node[last] = value
    except TypeError as e:
        raise ValueError(f"sweep key {path!r}: value {value!r}: {e}") from None


def _selector_of(path: str) -> str | None:
    parts = path.split(".")
    if len(parts) >= 3 and parts[0] == "selector" and parts[1] in selection.names():
        return parts[1]
    return None


def settings(config) -> list[dict]:
    """The sweep's distinct settings, each {dotted key: value} (selector.name included)."""
    grid = _grid(config)
    mode = config.sweep.get("mode", "one_at_a_time")
    if mode == "grid":
        combos = [dict(itertools.chain.from_iterable(zip(keys, v, strict=True)
                                                     for (keys, _), v in zip(grid, pick,
                                                                             strict=True)))
                  for pick in itertools.product(*(vals for _, vals in grid))]
    else:
        combos = [dict(zip(keys, v, strict=True)) for keys, vals in grid for v in vals]
    base_name = config.selector.name
    out, seen = [], set()
    for combo in combos:
        names = {n for n in map(_selector_of, combo) if n}
        if len(names) > 1:
            raise ValueError(f"sweep setting {combo} moves fields of several selectors "
                             f"{sorted(names)}; use mode='one_at_a_time' for those")
        # A parameter at its base value is the base run: drop it, so coinciding runs run once.
        setting = {k: v for k, v in combo.items() if not _same(_value(config, k), v)}
        name = setting.get("selector.name", names.pop() if names else base_name)
        setting.pop("selector.name", None)
        if name != base_name:
            setting["selector.name"] = name
        key = json.dumps(sorted(setting.items()), default=str)
        if key not in seen:
            seen.add(key)
            out.append(setting)
    return out


def _same(a, b) -> bool:
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return list(a) == list(b)
    return a == b


def apply(config, setting: dict, seed: int) -> ml_collections.ConfigDict:
    c = copy.deepcopy(config)
    for path, value in setting.items():
        _assign(c, path, value)
    c.seed = seed
    try:
        config_lib.validate(c)
        validate_sim(c)
    except ValueError as e:
        raise ValueError(f"sweep setting {setting}: {e}") from None
    return c


def _run_job(job: tuple[dict, dict, int]) -> dict:
    cfg_dict, setting, seed = job
    config = ml_collections.ConfigDict(cfg_dict)
    res = run_sim(apply(config, setting, seed))
    res["setting"] = setting
    return res


def run_jobs(jobs: list[tuple[dict, dict, int]], workers: int,
              done: Callable[[int, dict], None]) -> list[dict]:
    """Runs every job (config dict, setting, seed) through `_run_job`, in `workers` processes
    (1: in this one); calls done(job index, result) as each finishes and returns the results in
    job order."""
    results: list = [None] * len(jobs)
    if workers == 1:
        for i, job in enumerate(jobs):
            results[i] = _run_job(job)
            done(i, results[i])
        return results
    # spawn: the caller may have imported jax, whose threads do not survive fork.
    mp = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=mp) as ex:
        futures = {ex.submit(_run_job, job): i for i, job in enumerate(jobs)}
        for fut in concurrent.futures.as_completed(futures):
            i = futures[fut]
            results[i] = fut.result()
            done(i, results[i])
    return results


def run_sweep(config, *, say: Callable[[str], None] = print) -> dict:
    """Every setting x seed (in parallel processes); returns {"runs": [...], ...}."""
    validate_sim(config)
    grid = _grid(config)
    sets = settings(config)
    seeds = [config.seed + k for k in range(config.sweep.seeds)]
    jobs = []
    for s in sets:
        for seed in seeds:
            apply(config, s, seed)  # every setting validates before anything runs
            jobs.append((config.to_dict(), s, seed))
    workers = config.sweep.workers or os.cpu_count() or 1
    workers = max(1, min(workers, len(jobs)))
    say(f"sweep: {len(sets)} settings x {len(seeds)} seeds = {len(jobs)} runs on {workers} "
        f"worker(s), mode {config.sweep.mode}")
    t0 = time.perf_counter()
    count = [0]

    def done(_, res):
        count[0] += 1
        say(f"  [{count[0]}/{len(jobs)}] {_label(res['setting'])} seed {res['seed']}: "
            f"acc {res['final']['acc_mean']:.3f}, {res['wall_s']:.1f} s")

    runs = run_jobs(jobs, workers, done)
    order = {json.dumps(sorted(s.items()), default=str): i for i, s in enumerate(sets)}
    runs.sort(key=lambda r: (order[json.dumps(sorted(r["setting"].items()), default=str)],
                             r["seed"]))
    return {"mode": config.sweep.mode, "seeds": seeds, "selector": config.selector.name,
            "wall_s": time.perf_counter() - t0,
            "params": [",".join(keys) for keys, _ in grid],
            "grid": [[",".join(keys), [list(v) for v in vals]] for keys, vals in grid],
            "base": {",".join(keys): [_value(config, k) for k in keys] for keys, _ in grid},
            "runs": runs}


def _value(config, path: str):
    node = config
    for part in path.split("."):
        node = node[part]
    return node


def _label(setting: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in setting.items()) or "base"


# ----------------------------------------------------------------------------- the report


def _stats(values: list) -> tuple[float, float, int]:
    v = [x for x in values if x is not None]
    if not v:
        return math.nan, math.nan, 0
    return float(np.mean(v)), float(np.std(v)), len(v)


def _fmt(mean: float, std: float, digits: int = 3) -> str:
    return "n/a" if math.isnan(mean) else f"{mean:.{digits}f} ± {std:.{digits}f}"


def _rows(sweep: dict, param: str) -> list[tuple[str, list[dict]]]:
    """(value label, runs) for each value of `param`; one-at-a-time uses the runs that move
    only this parameter (and the base runs for its base value)."""
    keys = param.split(",")
    grid = dict((k, v) for k, v in sweep["grid"])[param]
    base = sweep["base"][param]
    sel = None if "selector.name" in keys else (_selector_of(keys[0]) or sweep["selector"])
    rows = []
    for vals in grid:
        picked = []
        for r in sweep["runs"]:
            s = r["setting"]
            have = [r["selector"] if k == "selector.name" else s.get(k, base[i])
                    for i, k in enumerate(keys)]
            ok = all(_same(h, v) for h, v in zip(have, vals, strict=True))
            if sweep["mode"] != "grid":
                ok = ok and set(s) - {"selector.name"} <= set(keys)
            if sel is not None:
                ok = ok and r["selector"] == sel
            if ok:
                picked.append(r)
        label = "–".join(str(v) for v in vals)
        if _same(vals, base):
            label += " (base)"
        rows.append((label, picked))
    return rows


def report(sweep: dict, workdir: str) -> str:
    """Writes sweep_report.md and one PNG per parameter; returns the markdown."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = ["# Sensitivity sweep on the synthetic learner", "",
             f"Mode {sweep['mode']}, seeds {sweep['seeds']}, {len(sweep['runs'])} runs in "
             f"{sweep['wall_s']:.0f} s. Values are mean ± std over seeds (and, in grid mode, "
             "over the other parameters). Accuracy is the exact held-out mean over bands at "
             "the last step; rollouts-to-target counts the runs that reached the target "
             "(initial accuracy + sim.target_gain, unless sim.target_acc is set); zero-variance "
             "ratios are over every group rolled out; effective = share of rollouts in trained "
             "groups with non-zero variance.", ""]
    for param in sweep["params"]:
        rows = _rows(sweep, param)
        sel = {r["selector"] for _, runs in rows for r in runs}
        lines += [f"## {param}", "", f"selector: {', '.join(sorted(sel))}", "",
                  "| value | runs | final accuracy | rollouts to target (reached) | "
                  "zero-var easy | zero-var hard | effective | rollouts |",
                  "|---|---|---|---|---|---|---|---|"]
        xs, ys, es = [], [], []
        for label, runs in rows:
            acc = _stats([r["final"]["acc_mean"] for r in runs])
            hit = _stats([r["rollouts_to_target"] for r in runs])
            easy = _stats([r["final"]["zv_easy"] for r in runs])
            hard = _stats([r["final"]["zv_hard"] for r in runs])
            eff = _stats([r["final"]["effective_ratio"] for r in runs])
            roll = _stats([r["final"]["rollouts"] for r in runs])
            hit_s = "n/a" if not hit[2] else f"{hit[0]:,.0f} ± {hit[1]:,.0f} ({hit[2]}/{len(runs)})"
            lines.append(f"| {label} | {len(runs)} | {_fmt(*acc[:2])} | {hit_s} | "
                         f"{_fmt(*easy[:2], 2)} | {_fmt(*hard[:2], 2)} | {_fmt(*eff[:2], 2)} | "
                         f"{roll[0]:,.0f} |")
            xs.append(label)
            ys.append(acc[0])
            es.append(acc[1])
        lines.append("")
        fig, ax = plt.subplots(figsize=(5, 3.5))
        numeric = all(isinstance(v[0], (int, float)) and not isinstance(v[0], bool)
                      for v in dict((k, v) for k, v in sweep["grid"])[param]) and "," not in param
        if numeric:
            x = [v[0] for v in dict((k, v) for k, v in sweep["grid"])[param]]
            ax.errorbar(x, ys, yerr=es, marker="o", capsize=3)
        else:
            ax.errorbar(range(len(xs)), ys, yerr=es, marker="o", capsize=3)
            ax.set_xticks(range(len(xs)), xs, rotation=20, fontsize=8)
        ax.set_xlabel(param)
        ax.set_ylabel("final held-out accuracy (mean)")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        png = f"sweep_{param.replace(',', '+')}.png"
        fig.savefig(os.path.join(workdir, png), dpi=100)
        plt.close(fig)
        lines += [f"![{param}]({png})", ""]
    text = "\n".join(lines)
    with open(os.path.join(workdir, "sweep_report.md"), "w") as f:
        f.write(text)
    return text


# ----------------------------------------------------------------------------- entry point


def main(config, workdir: str | None = None) -> dict:
    """`frontier-rl sim` for a sweep if `config.sweep.grid` is set, else one run (a config
    with a `controls` section goes to sim/controls.py's `main` instead; cli.py routes it).

    Writes sim_results.json (one run) or sweep_results.json, sweep_report.md and PNGs (sweep)
    into `workdir` (default runs/sim), and prints a summary with the wall time.
    """
    if "controls" in config:
        raise ValueError("a config with a `controls` section is a controls study: run it with "
                         "`frontier-rl sim` or frontier_rl.sim.controls.main")
    validate_sim(config)
    workdir = workdir or os.path.join("runs", "sim")
    os.makedirs(workdir, exist_ok=True)
    sweeping = "sweep" in config and bool(_grid(config))
    if sweeping:
        sweep = run_sweep(config)
        with open(os.path.join(workdir, "sweep_results.json"), "w") as f:
            json.dump(sweep, f)
        report(sweep, workdir)
        print(f"sweep: {len(sweep['runs'])} runs in {sweep['wall_s']:.1f} s; wrote "
              f"{os.path.join(workdir, 'sweep_report.md')}")
        return sweep
    s = config.sim
    print(f"sim: {config.selector.name} on {s.num_prompts:,} prompts x {s.steps} steps, "
          f"B={config.rl.batch_size}, G={config.rl.group_size}, seed {config.seed}, "
          f"update {s.get('update', MODEL_DEFAULTS['update'])} (model output)")
    res = run_sim(config, say=print)
    with open(os.path.join(workdir, "sim_results.json"), "w") as f:
        json.dump(res, f)
    print(summary_line(res))
    if res["stopped"]:
        print(f"stopped early: {res['stopped']}")
    print(f"{s.num_prompts:,} prompts x {res['steps_run']} steps: {res['wall_s']:.1f} s "
          f"({res['steps_per_s']:.1f} steps/s); wrote {os.path.join(workdir, 'sim_results.json')}")
    return res
