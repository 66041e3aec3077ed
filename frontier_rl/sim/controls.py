"""Controls and HIVE vs DS on the synthetic learner, paired per seed at matched steps.

    frontier-rl sim --config=configs/sim_controls.py --workdir=runs/sim_controls

On the synthetic learner every prompt's current pass rate is known exactly
(`SimContext.pass_rates`), so the control arms of selection/oracle.py cost nothing: they measure
each candidate's pass rate for free and spend rollouts only on the groups they train on. A
study (`config.controls`) runs every arm of `controls.run` for `controls.seeds` seeds
(config.seed, config.seed + 1, ...), each for exactly `sim.steps` steps, and compares them
**paired per seed**: a seed fixes the training pool, the held-out set and the learner's start,
so arm A and arm B on seed s differ only by the selector. The unit of replication is the seed;
every interval is the Student t-interval over the per-seed values (experiment/stats.py).

Accuracy is the exact held-out mean over bands at the last step, in points (100 x the rate);
rollouts are the responses charged to the budget (a control's pass-rate measurements are counted
apart as `control_samples`, never charged). Measured:

- per arm: final accuracy, mean over seeds with its 95% t-interval; rollouts; effective share
  (responses in trained groups with non-zero variance / rollouts);
- **headroom** = positive control - reference (oracle - uniform) and **harm** = negative control
  - reference (oracle_negative - uniform): the paired per-seed accuracy differences, mean with
  95% t-interval, `stats.verdict`, the minimum detectable difference at 80% power at the
  measured sd and at its 80% upper confidence bound (never a power computed at the effect
  observed);
- **method vs comparator at matched steps** (HIVE vs DS): the rollouts each spent over the same
  `sim.steps` steps, the ratio comparator / method as the geometric mean of per-seed ratios with
  the t-interval of their logs (`stats.log_ratio`), and method - comparator final accuracy with
  the equivalence verdict of two one-sided tests at `controls.equivalence_margin` points
  (`stats.equivalence`), a margin fixed in the config before the run.

The training pool is `sim.composition` ("" = the mixture as drawn; otherwise shares of prompts
the starting policy solves / cannot solve / sits at the frontier of, by exact starting pass
rate, sim/learner.py). Every run records the pool it trained on as measured at the start
(`composition`: shares by class, the share of groups of G expected at zero variance), and the
study states it per seed.

Every comparison needs both arms to have run all `sim.steps` steps in every seed (a selector may
stop early, e.g. DS at its cap on generation rounds); otherwise it has no verdict and says which
arm stopped where. Verdicts need `stats.MIN_SEEDS` seeds; fewer give intervals only (from 2).

`config.controls` (default_controls_config):
  arms     {arm name: overrides of `config.selector` as a nested dict}; an arm may only change
           the selector, so the seeds pair (everything else is shared by all arms)
  run      the arms to run, comma-separated, in the report's order
  seeds    seeds per arm
  workers  parallel runs (processes); 0 = one per CPU core
  reference, positive, negative   arm names: headroom = positive - reference, harm = negative -
           reference ("" skips one)
  method, comparator   the matched-steps comparison ("" skips it)
  equivalence_margin   points of accuracy; method - comparator within it is "equivalent"
  compositions   () for one study at `sim.composition`; a tuple of `sim.composition` specs for
           a composition sweep: the study runs at each (every arm x seed), all runs in one pool
           of workers, and the report gives per composition the pool measured at the start and
           the headroom and harm (paired per seed, 95% t-interval, verdict), with where
           selection pays most and where it cannot (every prompt at the frontier: nothing to
           select away)

Writes `sim_controls.json` (the figures above, per-seed values and every run's curves) and
`sim_controls.md` into the workdir and prints a summary; a composition sweep writes
`sim_composition.json` (per composition its study, and every run) and `sim_composition.md`.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable

import ml_collections
import numpy as np

from frontier_rl import config_lib
from frontier_rl.experiment import stats
from frontier_rl.run import provenance
from frontier_rl.sim import run

ROLES = ("reference", "positive", "negative", "method", "comparator")
HEADROOM, HARM = "headroom", "harm"


def default_controls_config() -> ml_collections.ConfigDict:
    """`config.controls`: the five arms of the study, uniform as the reference."""
    return ml_collections.ConfigDict(dict(
        arms=dict(
            uniform={"name": "uniform"},
            # controls, not methods, as configs/compare_arith.py runs them: measured on their
            # own training rollouts (uncharged but for the B trained); the positive one fills B,
            # the negative one trains only on groups of zero reward variance (an exact floor)
            oracle={"name": "oracle", "oracle": {"mode": "frontier", "measure": "rollouts",
                                                 "fill": True, "candidates": 4}},
            oracle_negative={"name": "oracle",
                             "oracle": {"mode": "extremes", "measure": "rollouts",
                                        "candidates": 2, "max_rounds": 8}},
            hive={"name": "hive"},
            ds={"name": "ds"},
        ),
        run="uniform,oracle,oracle_negative,hive,ds",
        seeds=5,
        workers=0,
        reference="uniform",
        positive="oracle",
        negative="oracle_negative",
        method="hive",
        comparator="ds",
        equivalence_margin=1.5,  # points of held-out accuracy, fixed before the run
        compositions=(),  # sim.composition specs to sweep; () = one study (module docstring)
    ))


# ----------------------------------------------------------------------------- validation


def _flatten(node, prefix: str) -> dict:
    """{dotted path: leaf} of a nested dict / ConfigDict."""
    out = {}
    for k, v in node.items():
        path = f"{prefix}.{k}"
        if hasattr(v, "items"):
            out.update(_flatten(v, path))
        else:
            out[path] = v
    return out


def arm_names(config) -> list[str]:
    return [a.strip() for a in str(config.controls.run).split(",") if a.strip()]


def setting(config, arm: str) -> dict:
    """The arm's overrides as {dotted config path: value}, every path under `selector.`."""
    return _flatten(config.controls.arms[arm], "selector")


def validate(config) -> ml_collections.ConfigDict:
    """`run.validate_sim` and the `controls` section; raises ValueError naming the field.
    Every arm is applied to the config and validated, so a bad arm fails before any run."""
    run.validate_sim(config)
    if "controls" not in config:
        raise ValueError("the config has no `controls` section (see sim/controls.py)")
    c = config.controls
    known = set(default_controls_config().keys())
    unknown = sorted(set(c.keys()) - known)
    if unknown:
        raise ValueError(f"controls.{unknown[0]} is not a controls field; known: {sorted(known)}")
    arms = arm_names(config)
    if not arms:
        raise ValueError(f"controls.run={c.run!r} names no arm")
    for arm in arms:
        if arm not in c.arms:
            raise ValueError(f"controls.run names arm {arm!r}, which is not in controls.arms "
                             f"({sorted(c.arms.keys())})")
    if len(set(arms)) != len(arms):
        raise ValueError(f"controls.run={c.run!r} names an arm twice")
    for f, lo in (("seeds", 1), ("workers", 0)):
        v = c[f]
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"controls.{f}={v!r} is not allowed: an integer >= {lo}")
    m = c.equivalence_margin
    if isinstance(m, bool) or not isinstance(m, (int, float)) or not (math.isfinite(m) and m > 0):
        raise ValueError(f"controls.equivalence_margin={m!r} is not allowed: a number > 0 "
                         "(points)")
    for role in ROLES:
        if c[role] and c[role] not in arms:
            raise ValueError(f"controls.{role}={c[role]!r} is not one of the arms run "
                             f"(controls.run={c.run!r}); '' skips it")
    for arm in arms:
        s = setting(config, arm)
        if "selector.name" not in s:
            raise ValueError(f"controls.arms.{arm} sets no `name` (the selector it runs)")
        for path in s:
            run.lookup(config, path, f"controls.arms.{arm}", what="arm")
        run.apply(config, s, config.seed)
    specs = c.compositions
    if isinstance(specs, str) or not isinstance(specs, (tuple, list)):
        raise ValueError(f"controls.compositions={specs!r} is not allowed: a tuple of "
                         "sim.composition specs (() for one study)")
    for i, spec in enumerate(specs):
        if not isinstance(spec, str):
            raise ValueError(f"controls.compositions[{i}]={spec!r} is not a sim.composition "
                             "spec (a string)")
        try:
            run.apply(config, {"sim.composition": spec}, config.seed)
        except ValueError as e:
            raise ValueError(f"controls.compositions[{i}]: {e}") from None
    if len(set(specs)) != len(specs):
        raise ValueError(f"controls.compositions={specs!r} names a composition twice")
    return config


def pool_composition(config, seed: int, spec: str | None = None) -> dict:
    """The training pool of `config` (at sim.composition = `spec` when given) at `seed`, as
    measured at the start (SimContext.pool_composition): the same pool every arm of that seed
    trains on, since an arm only changes the selector."""
    c = run.apply(config, {} if spec is None else {"sim.composition": spec}, seed)
    return run.make_context(c).pool_composition


# ----------------------------------------------------------------------------- running


def run_controls(config, *, say: Callable[[str], None] = print) -> dict:
    """Every arm x seed, all for `sim.steps` steps; returns the study (module doc) with the raw
    runs under "runs" (each tagged with its "arm")."""
    validate(config)
    arms = arm_names(config)
    seeds = [config.seed + k for k in range(config.controls.seeds)]
    jobs, tags = [], []
    for arm in arms:
        for seed in seeds:
            jobs.append((config.to_dict(), setting(config, arm), seed))
            tags.append(arm)
    workers = config.controls.workers or os.cpu_count() or 1
    workers = max(1, min(workers, len(jobs)))
    s = config.sim
    say(f"controls: {len(arms)} arms x {len(seeds)} seeds = {len(jobs)} runs of "
        f"{s.num_prompts:,} prompts x {s.steps} steps (B={config.rl.batch_size}, "
        f"G={config.rl.group_size}) on {workers} worker(s)")
    t0 = time.perf_counter()
    count = [0]

    def done(i, res):
        count[0] += 1
        say(f"  [{count[0]}/{len(jobs)}] {tags[i]} seed {res['seed']}: "
            f"{res['steps_run']} steps, acc {100 * res['final']['acc_mean']:.1f}, "
            f"{res['final']['rollouts']:,} rollouts, {res['wall_s']:.1f} s")

    # the pools, measured before any run (a composition the mixture cannot fill fails here)
    pools = {seed: pool_composition(config, seed) for seed in seeds}
    results = run.run_jobs(jobs, workers, done)
    for tag, res in zip(tags, results, strict=True):
        res["arm"] = tag
        res["composition"] = pools[res["seed"]]
    study = summarise(config, results)
    study["wall_s"] = time.perf_counter() - t0
    study["runs"] = results
    return study


# ----------------------------------------------------------------------------- figures


def _iv(iv: stats.Interval) -> dict:
    """An interval as JSON numbers (None where undefined, e.g. with one seed)."""

    def num(x):
        return None if x is None or not math.isfinite(x) else float(x)

    return {"mean": num(iv.mean), "lo": num(iv.lo), "hi": num(iv.hi), "n": iv.n,
            "sd": num(iv.sd), "mdd": num(iv.mdd()), "mdd_hi": num(iv.mdd_hi())}


def _short(runs: dict, arm: str, steps: int) -> list[str]:
    """Why arm's runs are not at `steps` steps, per seed ([] when every seed ran them all)."""
    return [f"{arm} stopped at step {r['steps_run']} in seed {seed}"
            + (f" ({r['stopped']})" if r["stopped"] else "")
            for seed, r in sorted(runs.items()) if r["steps_run"] != steps]


def _composition(config, results: list[dict], seeds: list[int]) -> dict:
    """The pool the study trained on: sim.composition, and per seed and on average the pool
    measured at the start (from the runs, or measured again where a run lacks it)."""
    per_seed = {}
    for r in results:
        if "composition" in r:
            per_seed.setdefault(r["seed"], r["composition"])
    for seed in seeds:
        if seed not in per_seed:
            per_seed[seed] = pool_composition(config, seed)
    pools = [per_seed[s] for s in seeds]
    return {"spec": config.sim.get("composition", ""),
            "shares": {k: float(np.mean([p["shares"][k] for p in pools]))
                       for k in pools[0]["shares"]},
            "zero_variance": float(np.mean([p["zero_variance"] for p in pools])),
            "group_size": pools[0]["group_size"], "thresholds": pools[0]["thresholds"],
            "per_seed": {str(s): per_seed[s] for s in seeds}}


def _pool_text(comp: dict) -> str:
    """`solved 0.18 / unsolved 0.34 / frontier 0.49` of a composition entry."""
    return " / ".join(f"{k} {v:.2f}" for k, v in comp["shares"].items())


def summarise(config, results: list[dict]) -> dict:
    """The study's figures from its runs (module doc); JSON-ready."""
    c = config.controls
    steps = config.sim.steps
    seeds = sorted({r["seed"] for r in results})
    by: dict[str, dict[int, dict]] = {}
    for r in results:
        by.setdefault(r["arm"], {})[r["seed"]] = r

    def acc(arm):  # points, in seed order
        return np.array([100 * by[arm][s]["final"]["acc_mean"] for s in seeds])

    arms = {}
    for arm in arm_names(config):
        runs = by[arm]
        arms[arm] = {
            "setting": setting(config, arm),
            "accuracy": _iv(stats.seed_interval(acc(arm))),
            "per_seed": {str(s): {
                "accuracy": 100 * runs[s]["final"]["acc_mean"],
                "initial_accuracy": 100 * runs[s]["initial_acc"]["mean"],
                "rollouts": runs[s]["final"]["rollouts"],
                "effective_ratio": runs[s]["final"]["effective_ratio"],
                "control_samples": runs[s]["counters"].get("control_samples", 0),
                "steps_run": runs[s]["steps_run"], "stopped": runs[s]["stopped"],
                "wall_s": runs[s]["wall_s"]} for s in seeds},
            "short": _short(runs, arm, steps),
        }
    out = {"num_prompts": config.sim.num_prompts, "steps": steps,
           "batch_size": config.rl.batch_size, "group_size": config.rl.group_size,
           "seeds": seeds, "equivalence_margin": float(c.equivalence_margin),
           "roles": {role: c[role] for role in ROLES}, "arms": arms,
           "staleness": int(config.rl.staleness),
           "composition": _composition(config, results, seeds)}

    for name, role in ((HEADROOM, "positive"), (HARM, "negative")):
        arm, ref = c[role], c.reference
        if not arm or not ref:
            continue
        entry = {"control": arm, "reference": ref, "units": "points"}
        short = arms[arm]["short"] + arms[ref]["short"]
        d = acc(arm) - acc(ref)
        iv = stats.seed_interval(d)
        entry.update(per_seed=[float(x) for x in d], **_iv(iv))
        if short:
            entry["verdict"] = stats.NO_VERDICT + "; ".join(short)
        else:
            entry["verdict"] = stats.verdict(iv)
        out[name] = entry

    if c.method and c.comparator:
        m, k = c.method, c.comparator
        short = arms[m]["short"] + arms[k]["short"]
        rm = np.array([by[m][s]["final"]["rollouts"] for s in seeds], float)
        rk = np.array([by[k][s]["final"]["rollouts"] for s in seeds], float)
        ratio = stats.log_ratio(rk / rm)
        d = acc(m) - acc(k)
        diff = stats.seed_interval(d)
        ci90 = stats.equivalence_interval(d) if d.size >= 2 else (None, None)
        entry = {
            "method": m, "comparator": k,
            "matched_steps": {str(s): [by[m][s]["steps_run"], by[k][s]["steps_run"]]
                              for s in seeds},
            "rollouts": {m: rm.tolist(), k: rk.tolist()},
            "rollouts_mean": {m: float(rm.mean()), k: float(rk.mean())},
            "ratio": {"of": f"{k}/{m}", "per_seed": (rk / rm).tolist(),
                      "log": _iv(ratio), "geomean": math.exp(ratio.mean),
                      "lo": math.exp(ratio.lo) if ratio.n > 1 else None,
                      "hi": math.exp(ratio.hi) if ratio.n > 1 else None},
            "accuracy_difference": {"of": f"{m} - {k}", "units": "points",
                                    "per_seed": d.tolist(), **_iv(diff),
                                    "ci90": list(ci90)},
        }
        if short:
            why = stats.NO_VERDICT + "; ".join(short)
            entry["ratio"]["verdict"] = entry["accuracy_difference"]["verdict"] = why
        else:
            entry["ratio"]["verdict"] = stats.verdict(ratio)
            entry["accuracy_difference"]["verdict"] = (
                stats.equivalence(d, float(c.equivalence_margin))
                if d.size >= stats.MIN_SEEDS else stats.TOO_FEW)
        out[f"{m}_vs_{k}"] = entry
        out["matched"] = f"{m}_vs_{k}"
    return out


# ----------------------------------------------------------------------------- the report


def _fmt(e: dict, digits: int = 1, signed: bool = False) -> str:
    """`mean [lo, hi]` of an `_iv` dict; `mean [—]` without an interval."""
    sign = "+" if signed else ""
    body = f"{e['mean']:{sign}.{digits}f}"
    if e["lo"] is None:
        return body + " [—]"
    return body + f" [{e['lo']:{sign}.{digits}f}, {e['hi']:{sign}.{digits}f}]"


def _pool_lines(comp: dict) -> list[str]:
    """The training pool's composition as a sentence of the report."""
    t = comp["thresholds"]
    spec = f"`{comp['spec']}`" if comp["spec"] else '"" (the mixture as drawn)'
    return [f"Training pool: sim.composition = {spec}. Measured at the start by exact pass rate "
            f"(solved p >= {t['solved']:g}, unsolved p <= {t['unsolved']:g}, frontier in "
            f"between), mean over seeds: {_pool_text(comp)}; groups of G = "
            f"{comp['group_size']} expected at zero reward variance: "
            f"{comp['zero_variance']:.2f}."]


def _need(e: dict, n: int) -> str:
    """The MDD at the sd's one-sided 80% upper bound as text ("—" below 2 seeds): the power
    statement the seeds allow, never one computed at the effect observed."""
    if n < 2 or e.get("mdd_hi") is None:
        return "—"
    return f"MDD {e['mdd_hi']:.2f} at the sd's 80% upper bound"


def _ratio_reading(verdict: str, m: str, k: str) -> str:
    return {"better": f"{k} spends more rollouts than {m}",
            "worse": f"{k} spends fewer rollouts than {m}"}.get(verdict, verdict)


def report(study: dict) -> str:
    """The study as markdown: arms, headroom and harm, the matched-steps comparison, a
    reading."""
    seeds = study["seeds"]
    lines = [
        "# Controls on the synthetic learner", "",
        f"{study['num_prompts']:,} prompts x {study['steps']} steps, B = {study['batch_size']}, "
        f"G = {study['group_size']}, seeds {seeds[0]}-{seeds[-1]} ({len(seeds)}), "
        f"{len(study['runs'])} runs in {study['wall_s']:.0f} s. Accuracy: the exact held-out "
        "mean over bands at the last step, in points. Every arm runs the same number of steps; "
        "differences are paired per seed (a seed fixes the pool, the held-out set and the "
        "learner's start) and intervals are 95% Student t over seeds. The controls read each "
        "candidate's exact current pass rate for free: those measurements are counted as "
        "`pass rates read`, never as rollouts.", "",
        *_pool_lines(study["composition"]), "",
        "| arm | selector | steps run | final accuracy [95% CI] | rollouts (mean) | "
        "effective share | pass rates read (mean) |", "|---|---|---|---|---|---|---|"]
    for arm, a in study["arms"].items():
        ps = a["per_seed"].values()
        sel = ", ".join(f"{k.removeprefix('selector.')}={v}" for k, v in a["setting"].items())
        steps = sorted({p["steps_run"] for p in ps})
        lines.append(
            f"| {arm} | {sel} | {'/'.join(map(str, steps))} | {_fmt(a['accuracy'])} | "
            f"{np.mean([p['rollouts'] for p in ps]):,.0f} | "
            f"{np.mean([p['effective_ratio'] for p in ps]):.2f} | "
            f"{np.mean([p['control_samples'] for p in ps]):,.0f} |")
    lines += ["", "Per seed (accuracy, points):", "",
              "| seed | initial | " + " | ".join(study["arms"]) + " |",
              "|---|---|" + "---|" * len(study["arms"])]
    first = next(iter(study["arms"].values()))["per_seed"]
    for s in seeds:
        cells = [f"{a['per_seed'][str(s)]['accuracy']:.1f}" for a in study["arms"].values()]
        lines.append(f"| {s} | {first[str(s)]['initial_accuracy']:.1f} | "
                     + " | ".join(cells) + " |")
    effects = [(n, study[n]) for n in (HEADROOM, HARM) if n in study]
    if effects:
        lines += ["", "## Headroom and harm", "",
                  "| effect | control − reference | paired difference, points [95% CI] | "
                  "verdict | MDD (80% power) | MDD at the sd's 80% upper bound |",
                  "|---|---|---|---|---|---|"]
        for name, e in effects:
            mdd = "—" if e["mdd"] is None else f"{e['mdd']:.1f}"
            lines.append(f"| {name} | {e['control']} − {e['reference']} | "
                         f"{_fmt(e, signed=True)} | {e['verdict']} | {mdd} | {_need(e, e['n'])} |")
    if "matched" in study:
        e = study[study["matched"]]
        m, k, r, d = e["method"], e["comparator"], e["ratio"], e["accuracy_difference"]
        span = ("—" if r["lo"] is None else f"[{r['lo']:.2f}, {r['hi']:.2f}]")
        ci90 = ("—" if d["ci90"][0] is None else
                f"[{d['ci90'][0]:+.1f}, {d['ci90'][1]:+.1f}]")
        lines += [
            "", f"## {m} vs {k} at matched steps", "",
            f"Both arms run {study['steps']} steps in every seed; rollouts are those charged "
            f"over them. The ratio {k}/{m} is the geometric mean of the per-seed ratios with "
            "the t-interval of their logs. The accuracy difference is tested for equivalence "
            f"by two one-sided tests at ±{study['equivalence_margin']:g} points "
            "(controls.equivalence_margin, set before the run): equivalent when its 90% "
            "interval lies inside the margin.", "",
            "| | value | verdict |", "|---|---|---|",
            f"| rollouts {m} (mean) | {e['rollouts_mean'][m]:,.0f} | |",
            f"| rollouts {k} (mean) | {e['rollouts_mean'][k]:,.0f} | |",
            f"| rollouts {k}/{m} [95% CI] | {r['geomean']:.2f}x {span} | "
            f"{_ratio_reading(r['verdict'], m, k)} (log ratio "
            f"{_need(r['log'], r['log']['n'])}) |",
            f"| accuracy {m} − {k}, points [95% CI] | {_fmt(d, signed=True)} (90%: {ci90}) | "
            f"{d['verdict']} |"]
    lines += ["", "## Reading", "", *reading(study)]
    return "\n".join(lines) + "\n"


def _mixed_per_step(study: dict, arm: str) -> float:
    """Trained groups with non-zero reward variance per step, mean over seeds."""
    ps = study["arms"][arm]["per_seed"].values()
    return float(np.mean([p["effective_ratio"] * p["rollouts"] / max(p["steps_run"], 1)
                          for p in ps])) / study["group_size"]


def reading(study: dict) -> list[str]:
    """What the figures say, in words, one paragraph per comparison."""
    out = []
    head, harm = study.get(HEADROOM), study.get(HARM)
    if head is not None:
        if head["verdict"] == "better":
            mdd = "" if head["mdd"] is None else (
                f"; with these seeds a paired difference of {head['mdd']:.1f} points or more "
                "(the MDD at 80% power) would be seen")
            out.append(f"The testbed responds to selection: training on the candidates nearest "
                       f"p = 0.5 gains {_fmt(head, signed=True)} points over "
                       f"{head['reference']} at the same steps{mdd}.")
        else:
            out.append(f"Headroom {_fmt(head, signed=True)} points: {head['verdict']}. Without "
                       "a headroom the testbed cannot show a selection method's effect.")
    if harm is not None:
        if harm["verdict"] == "worse":
            out.append(f"The testbed sees harm: training only on prompts at p ~ 0 or 1 moves "
                       f"accuracy by {_fmt(harm, signed=True)} points against "
                       f"{harm['reference']}.")
        else:
            out.append(f"Harm {_fmt(harm, signed=True)} points: {harm['verdict']}.")
    if "matched" in study:
        e = study[study["matched"]]
        m, k, r, d = e["method"], e["comparator"], e["ratio"], e["accuracy_difference"]
        out.append(f"At {study['steps']} steps, {k} spent {r['geomean']:.2f}x the rollouts of "
                   f"{m} ({_ratio_reading(r['verdict'], m, k)}); accuracy {m} − {k} "
                   f"{_fmt(d, signed=True)} points: {d['verdict']}.")
        pos = head["control"] if head is not None else ""
        if pos and study["arms"][m]["accuracy"]["mean"] > study["arms"][pos]["accuracy"]["mean"]:
            out.append(
                f"{m} ends above the positive control {pos} "
                f"({study['arms'][m]['accuracy']['mean']:.1f} vs "
                f"{study['arms'][pos]['accuracy']['mean']:.1f} points). The control rolls out "
                "the B candidates nearest p = 0.5 once, and a pass rate strictly between 0 and "
                "1 does not make every group of G responses mixed: it trains on "
                f"{_mixed_per_step(study, pos):.0f} groups with reward variance per step, "
                f"{m} on {_mixed_per_step(study, m):.0f} (it rolls out more to fill its "
                "batch). The control bounds what choosing B prompts among uniform draws buys, "
                "not what spending more rollouts per step buys.")
    return [p for para in out for p in (para, "")][:-1] if out else ["No comparison was set."]


# ----------------------------------------------------------------------------- composition sweep


def run_compositions(config, *, say: Callable[[str], None] = print) -> dict:
    """The study at each `controls.compositions` spec (module doc): every spec x arm x seed in
    one pool of workers; returns {"compositions": [{"spec", "study"}, ...], "runs": [...], ...}
    with the reading under "reading"."""
    validate(config)
    specs = list(config.controls.compositions)
    if not specs:
        raise ValueError("controls.compositions is empty: nothing to sweep (run_controls runs "
                         "one study)")
    arms = arm_names(config)
    seeds = [config.seed + k for k in range(config.controls.seeds)]
    # every pool, measured before any run (a composition the mixture cannot fill fails here)
    pools = {(spec, seed): pool_composition(config, seed, spec) for spec in specs
             for seed in seeds}
    jobs, tags = [], []
    for spec in specs:
        for arm in arms:
            for seed in seeds:
                jobs.append((config.to_dict(), {**setting(config, arm), "sim.composition": spec},
                             seed))
                tags.append((spec, arm))
    workers = config.controls.workers or os.cpu_count() or 1
    workers = max(1, min(workers, len(jobs)))
    s = config.sim
    say(f"controls: {len(specs)} compositions x {len(arms)} arms x {len(seeds)} seeds = "
        f"{len(jobs)} runs of {s.num_prompts:,} prompts x {s.steps} steps "
        f"(B={config.rl.batch_size}, G={config.rl.group_size}) on {workers} worker(s)")
    t0 = time.perf_counter()
    count = [0]

    def done(i, res):
        count[0] += 1
        spec, arm = tags[i]
        say(f"  [{count[0]}/{len(jobs)}] {spec or '(as drawn)'} {arm} seed {res['seed']}: "
            f"{res['steps_run']} steps, acc {100 * res['final']['acc_mean']:.1f}, "
            f"{res['wall_s']:.1f} s")

    results = run.run_jobs(jobs, workers, done)
    for (spec, arm), res in zip(tags, results, strict=True):
        res["arm"] = arm
        res["composition"] = pools[spec, res["seed"]]
    entries = []
    for spec in specs:
        runs = [r for (sp, _), r in zip(tags, results, strict=True) if sp == spec]
        study = summarise(run.apply(config, {"sim.composition": spec}, config.seed), runs)
        entries.append({"spec": spec, "study": study})
    sweep = {"num_prompts": s.num_prompts, "steps": s.steps, "batch_size": config.rl.batch_size,
             "group_size": config.rl.group_size, "seeds": seeds, "arms": arms,
             "roles": {role: config.controls[role] for role in ROLES},
             "compositions": entries, "wall_s": time.perf_counter() - t0, "runs": results}
    sweep["reading"] = composition_reading(sweep)
    return sweep


def _effective(study: dict, arm: str) -> float:
    """The arm's effective share (mean over seeds)."""
    return float(np.mean([p["effective_ratio"] for p in study["arms"][arm]["per_seed"].values()]))


def _frontier_share(entry: dict) -> float:
    return entry["study"]["composition"]["shares"]["frontier"]


def _cell(study: dict, name: str) -> tuple[str, str]:
    """(`mean [lo, hi]`, verdict) of the study's headroom or harm for the sweep's tables; an
    arm that stopped early leaves no figure, only which arm ran how many steps."""
    e = study.get(name)
    if e is None:
        return "—", "—"
    if not e["verdict"].startswith(stats.NO_VERDICT):
        return _fmt(e, signed=True), e["verdict"]
    why = []
    for arm in (e["control"], e["reference"]):
        runs = study["arms"][arm]["per_seed"].values()
        short = [p["steps_run"] for p in runs if p["steps_run"] != study["steps"]]
        if short:
            ran = "/".join(map(str, sorted(set(short))))
            why.append(f"{arm} ran {ran} of {study['steps']} steps in {len(short)} of "
                       f"{len(runs)} seeds")
    return "—", f"{stats.NO_VERDICT}{'; '.join(why)}"


def composition_reading(sweep: dict) -> list[str]:
    """Where selection pays (the largest headroom) and where it cannot (every prompt at the
    frontier), from the sweep's figures."""
    entries = [e for e in sweep["compositions"] if HEADROOM in e["study"]]
    if not entries:
        return ["No headroom was measured (controls.positive or controls.reference is '')."]

    def name(e):
        return f"`{e['spec']}`" if e["spec"] else "the pool as drawn"

    out = []
    valid = [e for e in entries
             if not e["study"][HEADROOM]["verdict"].startswith(stats.NO_VERDICT)] or entries
    best = max(valid, key=lambda e: e["study"][HEADROOM]["mean"])
    h = best["study"][HEADROOM]
    text = (f"Selection pays most at {name(best)} (pool at the start: "
            f"{_pool_text(best['study']['composition'])}; "
            f"{best['study']['composition']['zero_variance']:.2f} of groups expected at zero "
            f"variance): headroom {_fmt(h, signed=True)} points, {h['verdict']}.")
    near = [name(e) for e in valid if e is not best and None not in (h["lo"],
            e["study"][HEADROOM]["hi"]) and e["study"][HEADROOM]["hi"] >= h["lo"]]
    if near:
        text += (f" The interval of {', '.join(near)} overlaps it: not distinguishable from it "
                 "by these intervals.")
    out.append(text)
    ordered = sorted(entries, key=_frontier_share)
    means = [e["study"][HEADROOM]["mean"] for e in ordered]
    if len(ordered) > 1:
        trend = ", ".join(f"{_frontier_share(e):.2f}: {m:+.1f}" for e, m in
                          zip(ordered, means, strict=True))
        top = int(np.argmax(means))
        rising = all(a < b for a, b in zip(means[:top], means[1:top + 1], strict=True))
        falling = all(a > b for a, b in zip(means[top:], means[top + 1:], strict=False))
        if rising and falling and top == 0:
            shape = "falls as the frontier share grows"
        elif rising and falling and top == len(means) - 1:
            shape = "grows with the frontier share"
        elif rising and falling:
            shape = (f"rises to its peak at frontier share {_frontier_share(ordered[top]):.2f} "
                     "and falls as the share grows beyond it")
        else:
            shape = "is not monotone in the frontier share"
        out.append(f"Headroom (points) by frontier share of the pool: {trend}; it {shape}.")
        ref, pos = sweep["roles"]["reference"], sweep["roles"]["positive"]
        eff_ref = [_effective(e["study"], ref) for e in ordered]
        eff_pos = [_effective(e["study"], pos) for e in ordered]
        eff = ", ".join(f"{_frontier_share(e):.2f}: {a:.2f} / {b:.2f}"
                        for e, a, b in zip(ordered, eff_ref, eff_pos, strict=True))
        text = (f"Effective share of rollouts ({ref} / {pos}; responses in trained groups with "
                f"reward variance) by frontier share: {eff}.")
        if all(a <= b for a, b in zip(eff_ref, eff_ref[1:], strict=False)) and \
                all(a <= b for a, b in zip(eff_pos, eff_pos[1:], strict=False)):
            text += (f" The more of the pool sits at the frontier, the less {ref} wastes and "
                     "the less there is to gain by choosing; the less, the fewer informative "
                     f"prompts {pos} finds among its candidates.")
        out.append(text)
    full = [e for e in entries if _frontier_share(e) >= 1.0]
    if full:
        for e in full:
            h = e["study"][HEADROOM]
            text = (f"At {name(e)} every prompt starts at the frontier: there is nothing to "
                    f"select away, and the headroom is {_fmt(h, signed=True)} points "
                    f"({h['verdict']}).")
            if h["verdict"] == "better":
                text += (" What remains is the control's choice within the frontier (the "
                         "candidates nearest p = 0.5 rather than any in (0.1, 0.9)) and of the "
                         "prompts that leave the frontier as the policy learns.")
            out.append(text)
    else:
        out.append("No composition of this sweep puts every prompt at the frontier "
                   "(frontier=1), where there is nothing to select away.")
    return out


def composition_report(sweep: dict) -> str:
    """The composition sweep as markdown: per composition the pool measured at the start and
    the headroom and harm, then the reading."""
    seeds = sweep["seeds"]
    arms = sweep["arms"]
    first = sweep["compositions"][0]["study"]["composition"]
    t = first["thresholds"]
    lines = [
        "# Where selection pays: pool composition on the synthetic learner", "",
        f"{sweep['num_prompts']:,} prompts x {sweep['steps']} steps, B = "
        f"{sweep['batch_size']}, G = {sweep['group_size']}, seeds {seeds[0]}-{seeds[-1]} "
        f"({len(seeds)}), arms {', '.join(arms)}; {len(sweep['runs'])} runs in "
        f"{sweep['wall_s']:.0f} s. Each row is one controls study with the training pool built "
        "to `sim.composition` (sim/learner.py): shares of prompts by exact starting pass rate, "
        f"solved p >= {t['solved']:g}, unsolved p <= {t['unsolved']:g}, frontier in between. "
        "The pool columns are measured at the start (mean over seeds); zero-variance is the "
        f"share of groups of G = {sweep['group_size']} expected with all rewards equal. "
        "The held-out set and the learner's start do not depend on the composition. Accuracy "
        "(per arm, mean over seeds, with its effective share of rollouts): the exact held-out "
        "mean over bands at the last step, in points; headroom = "
        f"{sweep['roles']['positive']} − {sweep['roles']['reference']}, harm = "
        f"{sweep['roles']['negative']} − {sweep['roles']['reference']}, paired per seed, mean "
        "[95% Student t-interval over seeds].", "",
        "| sim.composition | pool at start: solved / unsolved / frontier | zero-variance groups "
        "| " + " | ".join(f"{a} (effective share)" for a in arms)
        + " | headroom, points [95% CI] | verdict | harm, points [95% CI] | verdict |",
        "|---|---|---|" + "---|" * len(arms) + "---|---|---|---|"]
    for e in sweep["compositions"]:
        st = e["study"]
        comp = st["composition"]
        accs = " | ".join(f"{st['arms'][a]['accuracy']['mean']:.1f} ({_effective(st, a):.2f})"
                          for a in arms)
        head, hv = _cell(st, HEADROOM)
        harm, mv = _cell(st, HARM)
        lines.append(f"| {e['spec'] or '(as drawn)'} | {_pool_text(comp)} | "
                     f"{comp['zero_variance']:.2f} | {accs} | {head} | {hv} | {harm} | {mv} |")
    lines += ["", "## Reading", ""]
    lines += [p for para in sweep["reading"] for p in (para, "")][:-1]
    return "\n".join(lines) + "\n"


def composition_summary_lines(sweep: dict) -> list[str]:
    out = []
    for e in sweep["compositions"]:
        st = e["study"]
        line = (f"{e['spec'] or '(as drawn)'}: pool {_pool_text(st['composition'])}, "
                f"zero-variance {st['composition']['zero_variance']:.2f}")
        for name in (HEADROOM, HARM):
            if name in st:
                value, verdict = _cell(st, name)
                line += f"; {name} {value} points, {verdict}"
        out.append(line)
    return out + sweep["reading"]


# ----------------------------------------------------------------------------- entry point


def summary_lines(study: dict) -> list[str]:
    out = [f"{arm}: accuracy {_fmt(a['accuracy'])} points"
           for arm, a in study["arms"].items()]
    for name in (HEADROOM, HARM):
        if name in study:
            e = study[name]
            out.append(f"{name} ({e['control']} - {e['reference']}): {_fmt(e, signed=True)} "
                       f"points, {e['verdict']}, {_need(e, e['n'])}")
    if "matched" in study:
        e = study[study["matched"]]
        m, k, r, d = e["method"], e["comparator"], e["ratio"], e["accuracy_difference"]
        span = "" if r["lo"] is None else f" [{r['lo']:.2f}, {r['hi']:.2f}]"
        out.append(f"rollouts {k}/{m} at {study['steps']} steps: {r['geomean']:.2f}x{span}, "
                   f"{_ratio_reading(r['verdict'], m, k)}")
        out.append(f"accuracy {m} - {k}: {_fmt(d, signed=True)} points, {d['verdict']}")
    return out


def main(config, workdir: str | None = None) -> dict:
    """Runs the study and writes sim_controls.json and sim_controls.md into `workdir`
    (default runs/sim_controls), or with `controls.compositions` the composition sweep and
    sim_composition.json / .md; prints the summary with the wall time."""
    validate(config)
    workdir = workdir or os.path.join("runs", "sim_controls")
    os.makedirs(workdir, exist_ok=True)
    if config.controls.compositions:
        sweep = run_compositions(config)
        with open(os.path.join(workdir, "sim_composition.json"), "w") as f:
            json.dump(sweep, f)
        with open(os.path.join(workdir, "sim_composition.md"), "w") as f:
            f.write(composition_report(sweep))
        for line in composition_summary_lines(sweep):
            print(line)
        print(f"controls: {len(sweep['runs'])} runs in {sweep['wall_s']:.1f} s; wrote "
              f"{os.path.join(workdir, 'sim_composition.md')}")
        return sweep
    study = run_controls(config)
    study["meta"] = provenance.stamp()
    with open(os.path.join(workdir, "sim_controls.json"), "w") as f:
        json.dump(study, f)
    with open(os.path.join(workdir, "sim_controls.md"), "w") as f:
        f.write(report(study))
    for line in summary_lines(study):
        print(line)
    print(f"controls: {len(study['runs'])} runs in {study['wall_s']:.1f} s; wrote "
          f"{os.path.join(workdir, 'sim_controls.md')}")
    return study


def get_base() -> ml_collections.ConfigDict:
    """`run.base_config()` with the `controls` section (configs/sim_controls.py starts here)."""
    c = run.base_config()
    c.controls = default_controls_config()
    return validate(config_lib.validate(c))
