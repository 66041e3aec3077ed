"""Calibrating the synthetic learner on a finished comparison, then predicting held-out arms.

    frontier-rl sim calibrate --workdir=DIR --fit=uniform,oracle --predict=hive,oracle_negative
        [--update=adam|sgd|adam,sgd] [--sim_seeds=5]

DIR is a directory written by `frontier-rl compare`: DIR/results.json (experiment/compare.py:
per run its method, seed, selector and evaluation curve on every bucket; the batch and group
size, the budget and the reference `target_method`) and, when present, DIR/compare_config.json
(the pool size `task.train_size`, `task.bucket_weights`, the real selector sections and each
method's delta in `compare.methods`). The learner's figures are a model's output, never a
measurement; everything this writes is labelled so.

1. The testbed. A learner (sim/learner.py) matched to the comparison: one band per evaluation
   bucket (the pooled "all" / "bench_mean" left out), the training pool `task.train_size`
   prompts split by `task.bucket_weights` (equal without them), B and G of each arm (an arm's
   `rl.batch_size` delta included), the same budget (matched rollouts: `sim.rollout_budget`;
   matched steps: `sim.steps`). Band k's mean difficulty mu_k is solved so that the learner's
   starting held-out accuracy on band k equals the runs' step-0 accuracy on bucket k, mean over
   every run (at s_0 = 0, slope a and spread sd_k at the learner's defaults). Deviation: one
   start for every seed, the mean of theirs, where each real seed has its own warm start.
2. The fit. The update rule's free parameters, (eta_a = `adam_lr`, sigma = `adam_noise`) for
   "adam" and eta_skill for "sgd", are chosen by a deterministic search (`fit`): the rate by a
   golden-section search on its log for each sigma of a grid (the two trade off along a ridge,
   so each sigma gets its own best rate), then sigma on a finer grid between the best value's
   neighbours, minimising the squared error in points between the
   learner's mean curve over `sim_seeds` seeds and the measured mean curve over the real seeds,
   on the primary bucket (`compare.metric`) at every evaluation after step 0 of every arm named
   by --fit. Every setting runs on the same sim seeds 0..S-1 (common random numbers), so the
   search compares settings, not seeds. The learner's curve is read at the measured points by
   linear interpolation on rollouts (matched rollouts) or steps (matched steps). Where every
   step is noise-dominated (S << sd_N, sim/learner.py) the curves determine eta_a / sigma and
   little else: the output gives the ratio, and arms of different signal-to-noise ratio (the
   positive control beside uniform) are what separate the two. A best point at the edge of a
   search range is named on the console and in `grid_edge`.
3. The prediction. Each arm (fitted and held out) and the reference run on the fitted learner,
   with the selector registered under the run's name, configured as in the comparison (its
   real section, then its delta). Per arm: the predicted final paired difference arm -
   reference on the primary bucket, mean over sim seeds with its 95% t-interval (the spread of
   the learner's own noise at the fitted parameters; the parameters' uncertainty is not in it),
   beside the measured paired difference over the real seeds with its 95% t-interval (the
   per-seed final values of results.json, as experiment/stats.py), and whether the measured
   interval contains the predicted mean.

Writes DIR/calibration.json: {"label", "results", "updates": {rule: its fit and predictions}};
a second call with another rule adds its entry beside the first. Prints the same as a table.
"""

from __future__ import annotations

import copy
import json
import math
import os
import time
from collections.abc import Callable, Sequence

import ml_collections
import numpy as np

from frontier_rl.run import provenance
from frontier_rl.sim import run
from frontier_rl.sim.learner import MODEL_DEFAULTS, UPDATES

LABEL = "model output: the synthetic learner fitted to the measured curves, not a measurement"
POOLED = ("all", "bench_mean")
# The fit (module docstring): the rate parameter of each rule, the range its golden-section
# search spans, the steps of that search, and the noise grid it is profiled over.
RATE = {"adam": "adam_lr", "sgd": "eta_skill"}
BRACKET = {"adam_lr": (1e-4, 1.0), "eta_skill": (1e-4, 100.0)}
GOLDEN_TOL = 0.01  # the search stops when the rate's log-range is this narrow (~1%)
GRIDS = {"adam": {"adam_noise": (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)}, "sgd": {}}
LEVEL = 0.95  # two-sided confidence of every interval (experiment/stats.py's)
DEFAULT_PROMPTS = 1500  # the pool when DIR/compare_config.json does not say


# ----------------------------------------------------------------------------- the testbed


def _read_json(path: str, what: str) -> dict:
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file ({what})")
    try:
        with open(path) as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None


def _field(d: dict, key: str, path: str, where: str = ""):
    if not isinstance(d, dict) or key not in d:
        raise ValueError(f"{path}: no field {where}{key!r} (a results.json of "
                         "`frontier-rl compare` has it)")
    return d[key]


def _natural(name: str) -> tuple:
    """Sort key putting "2op" before "10op"."""
    digits = "".join(ch for ch in name if ch.isdigit())
    return (int(digits) if digits else math.inf, name)


def _band_mean(acc: float, slope: float, sd: float) -> float:
    """mu such that E_z sigmoid(slope (0 - mu - sd z)) = acc (bisection; acc clipped to
    [0.5%, 99.5%], a bucket measured at 0 or 1 gets a band just inside)."""
    acc = min(max(acc, 0.005), 0.995)
    z = np.sqrt(2.0) * _erfinv(np.linspace(-1, 1, 2003)[1:-1])  # normal quantiles

    def mean_acc(mu):
        return float(np.mean(1.0 / (1.0 + np.exp(slope * (mu + sd * z)))))

    lo, hi = -30.0, 30.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if mean_acc(mid) > acc:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _erfinv(x: np.ndarray) -> np.ndarray:
    from scipy.special import erfinv

    return erfinv(x)


def _overlay(node: ml_collections.ConfigDict, values: dict) -> None:
    """Sets the leaves of `values` that `node` has; a section recurses. A field the sim's
    config lacks, or holds with another type, keeps the sim's value."""
    for k, v in values.items():
        if k not in node:
            continue
        if hasattr(node[k], "keys"):
            if isinstance(v, dict):
                _overlay(node[k], v)
            continue
        old = node[k]
        if isinstance(old, tuple) and isinstance(v, list):
            v = tuple(v)
        if isinstance(old, float) and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        try:
            node[k] = v
        except (TypeError, ValueError):
            pass


def testbed(workdir: str, arms: Sequence[str]) -> dict:
    """What the learner needs from DIR: per arm its sim config template and measured curve;
    the bucket, the reference, the budget. Errors name the file and the field."""
    path = os.path.join(workdir, "results.json")
    res = _read_json(path, "`frontier-rl compare --workdir=DIR` writes it")
    runs = _field(res, "runs", path)
    for f in ("metric", "target_method", "budget_kind", "budget", "batch_size", "group_size"):
        _field(res, f, path)
    primary = res["metric"].rsplit("/", 1)[-1]
    reference = res["target_method"]
    have = sorted({r.get("method") for r in runs if isinstance(r, dict)} - {None})
    by: dict[str, list[dict]] = {}
    for arm in [*arms, reference]:
        rs = sorted((r for r in runs if r.get("method") == arm), key=lambda r: r.get("seed", 0))
        if not rs:
            role = "the reference (field target_method)" if arm == reference else "arm"
            raise ValueError(f"{path}: no runs of {role} {arm!r} in field runs[].method "
                             f"(arms there: {', '.join(have) or 'none'})")
        for r in rs:
            curve = _field(r, "curve", path, f"runs[{arm}-s{r.get('seed')}].")
            for f in ("step", "rollouts", "metric", "buckets"):
                _field(curve, f, path, f"runs[{arm}-s{r.get('seed')}].curve.")
            if not curve["metric"]:
                raise ValueError(f"{path}: runs[{arm}-s{r.get('seed')}].curve.metric is empty")
        by[arm] = rs
    starts: dict[str, list[float]] = {}
    for rs in by.values():
        for r in rs:
            for b, v in r["curve"]["buckets"].items():
                if b not in POOLED and v:
                    starts.setdefault(b, []).append(float(v[0]))
    buckets = sorted(starts, key=_natural)
    if primary not in POOLED and primary not in buckets:
        raise ValueError(f"{path}: the primary bucket {primary!r} (field metric) has no step-0 "
                         "accuracy in runs[].curve.buckets")
    if not buckets:
        raise ValueError(f"{path}: no bucket with a step-0 accuracy in runs[].curve.buckets")

    cfg_path = os.path.join(workdir, "compare_config.json")
    real = _read_json(cfg_path, "") if os.path.exists(cfg_path) else {}
    task = real.get("task", {}) or {}
    prompts = int(task.get("train_size") or DEFAULT_PROMPTS)
    weights = task.get("bucket_weights")
    if not (isinstance(weights, (list, tuple)) and len(weights) == len(buckets)):
        weights = [1.0] * len(buckets)
    slope, sd = MODEL_DEFAULTS["slope"], MODEL_DEFAULTS["band_sd"][0]
    start = {b: float(np.mean(starts[b])) for b in buckets}
    band_mean = tuple(_band_mean(start[b] / 100.0, slope, sd) for b in buckets)
    kind = res["budget_kind"]
    templates, measured = {}, {}
    for arm, rs in by.items():
        c = run.base_config()
        name = rs[0].get("selector") or arm
        delta = ((real.get("compare", {}) or {}).get("methods", {}) or {}).get(arm, {}) or {}
        if name in (real.get("selector", {}) or {}) and name in c.selector:
            _overlay(c.selector[name], real["selector"][name])
        _overlay(c.selector, delta.get("selector", {}) or {})
        c.selector.name = name
        c.rl.batch_size = int((delta.get("rl", {}) or {}).get("batch_size")
                              or (real.get("rl", {}) or {}).get("batch_size")
                              or res["batch_size"])
        c.rl.group_size = int(res["group_size"])
        s = c.sim
        s.num_prompts = prompts
        s.band_names = tuple(buckets)
        s.band_weights = tuple(float(w) for w in weights)
        s.band_mean = band_mean
        s.band_sd = tuple([sd] * len(buckets))
        s.eval_every = 1
        s.eval_per_band = 256
        if kind == "steps":
            s.steps = int(res.get("steps_budget") or max(len(r["curve"]["step"]) for r in rs))
            s.rollout_budget = 0
        else:
            per_step = c.rl.batch_size * c.rl.group_size
            s.rollout_budget = int(res["budget"])
            s.steps = 4 * math.ceil(s.rollout_budget / per_step) + 10
        templates[arm] = c
        measured[arm] = _measured(rs, "step" if kind == "steps" else "rollouts")
    return {"path": path, "primary": primary, "reference": reference, "buckets": buckets,
            "start": start, "band_mean": dict(zip(buckets, band_mean, strict=True)),
            "prompts": prompts, "band_weights": list(weights), "budget_kind": kind,
            "budget": res["budget"] if kind != "steps" else res.get("steps_budget"),
            "x": "step" if kind == "steps" else "rollouts", "templates": templates,
            "measured": measured, "compare_config": os.path.exists(cfg_path)}


def _measured(rs: list[dict], x: str) -> dict:
    """An arm's mean curve over its seeds (points at each evaluation index, truncated to the
    shortest run) and its final value per seed."""
    n = min(len(r["curve"]["metric"]) for r in rs)
    xs = np.mean([r["curve"][x][:n] for r in rs], axis=0)
    ys = np.mean([r["curve"]["metric"][:n] for r in rs], axis=0)
    final = {int(r["seed"]): float(r.get("final", r["curve"]["metric"][-1])) for r in rs}
    return {"x": xs.tolist(), "acc": ys.tolist(), "final": final, "seeds": len(rs)}


# ----------------------------------------------------------------------------- the learner


class Learner:
    """Runs an arm of the testbed on the learner at given parameters; remembers every run."""

    def __init__(self, bed: dict, update: str):
        self.bed, self.update = bed, update
        self._cache: dict = {}
        self.runs = 0

    def curve(self, arm: str, params: dict, seed: int) -> tuple[np.ndarray, float]:
        """(primary-bucket points at the arm's measured evaluation x, final points)."""
        key = (arm, tuple(sorted(params.items())), seed)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        c = copy.deepcopy(self.bed["templates"][arm])
        c.sim.update = self.update
        for k, v in params.items():
            c.sim[k] = float(v)
        c.seed = seed
        res = run.run_sim(c)
        self.runs += 1
        cv = res["curve"]
        primary = self.bed["primary"]
        acc = cv["acc_mean"] if primary in POOLED else cv["acc"][primary]
        acc = 100.0 * np.asarray(acc, float)
        xs = np.asarray(cv["step"] if self.bed["x"] == "step" else cv["rollouts"], float)
        at = np.interp(self.bed["measured"][arm]["x"], xs, acc)
        out = (at, float(acc[-1]))
        self._cache[key] = out
        return out

    def mean_curve(self, arm: str, params: dict, seeds: Sequence[int]) -> np.ndarray:
        return np.mean([self.curve(arm, params, s)[0] for s in seeds], axis=0)


def _sse(learner: Learner, arms: Sequence[str], params: dict, seeds: Sequence[int]) -> float:
    """Squared error in points over every evaluation after step 0 of every fitted arm."""
    total = 0.0
    for arm in arms:
        want = np.asarray(learner.bed["measured"][arm]["acc"], float)
        got = learner.mean_curve(arm, params, seeds)
        total += float(np.sum((got[1:] - want[1:]) ** 2))
    return total


def _golden(f: Callable[[float], float], lo: float, hi: float) -> float:
    """The minimiser of f over log-spaced [lo, hi] by golden-section search (deterministic),
    to a log-range of GOLDEN_TOL."""
    r = (math.sqrt(5) - 1) / 2
    a, b = math.log(lo), math.log(hi)
    c, d = b - r * (b - a), a + r * (b - a)
    fc, fd = f(math.exp(c)), f(math.exp(d))
    while b - a > GOLDEN_TOL:
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - r * (b - a)
            fc = f(math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + r * (b - a)
            fd = f(math.exp(d))
    return math.exp(c) if fc <= fd else math.exp(d)


def _between(grid: Sequence[float], best: float, n: int = 5) -> list[float]:
    """n values spanning the neighbours of `best` in `grid` (geometric; linear from 0)."""
    g = sorted(grid)
    i = g.index(best)
    lo = g[i - 1] if i > 0 else best / 2
    hi = g[i + 1] if i + 1 < len(g) else best * 2
    if lo <= 0:
        return [float(x) for x in np.linspace(0.0, hi, n)]
    return [float(x) for x in np.geomspace(lo, hi, n)]


def fit(learner: Learner, arms: Sequence[str], seeds: Sequence[int], grid: dict | None = None,
        bracket: tuple[float, float] | None = None, *, refine: bool = True,
        say: Callable[[str], None] = print) -> dict:
    """The search of the module docstring: the rate (eta_a, or eta_skill for sgd) by a
    golden-section search on its log for each value of the noise grid (a profile: the rate
    that fits best at that noise), then the noise on a finer grid between the best value's
    neighbours, each again with its best rate. Returns the best parameters, their error and
    every setting tried."""
    rule = learner.update
    rate = RATE[rule]
    grid = dict(GRIDS[rule] if grid is None else grid)
    lo, hi = bracket or BRACKET[rate]
    tried: dict[tuple, float] = {}

    def sse(p: dict) -> float:
        key = tuple(sorted(p.items()))
        if key not in tried:
            tried[key] = _sse(learner, arms, p, seeds)
        return tried[key]

    def profile(outer: dict, a: float, b: float) -> dict:
        best = _golden(lambda x: sse({**outer, rate: x}), a, b)
        return {**outer, rate: best}

    (noise, values), = grid.items() if grid else ((None, [None]),)
    t0 = time.perf_counter()
    say(f"  fit {rule}: {rate} by golden-section search on [{lo:g}, {hi:g}]"
        + (f" at {noise} = {', '.join(f'{v:g}' for v in values)}" if noise else "")
        + f"; {len(arms)} arms x {len(seeds)} sim seeds per setting")
    best = None
    for v in values:
        p = profile({noise: float(v)} if noise else {}, lo, hi)
        if best is None or sse(p) < sse(best):
            best = p
        say(f"    {_params_text(p)}: rmse {_rmse_of(learner, arms, sse(p)):.2f} points "
            f"({time.perf_counter() - t0:.0f} s)")
    edge = [rate] if min(abs(math.log(best[rate] / x)) for x in (lo, hi)) < 0.05 else []
    if noise and best[noise] != 0 and best[noise] == max(values):
        edge.append(noise)
    if refine and noise and len(values) > 1:
        finer = [v for v in _between(values, best[noise]) if v not in values]
        say(f"  fit {rule}: {noise} = {', '.join(f'{v:.3g}' for v in finer)}, {rate} within a "
            "factor 2 of its best")
        for v in finer:
            p = profile({noise: v}, best[rate] / 2, best[rate] * 2)
            if sse(p) < sse(best):
                best = p
            say(f"    {_params_text(p)}: rmse {_rmse_of(learner, arms, sse(p)):.2f} points "
                f"({time.perf_counter() - t0:.0f} s)")
    for k in edge:
        say(f"  note: {k}={best[k]:.4g} is at the edge of its search range; the best fit may "
            "lie beyond it")
    return {"params": best, "sse": sse(best), "rmse": _rmse_of(learner, arms, sse(best)),
            "points": _points(learner, arms), "edge": edge,
            "tried": [{"params": dict(k), "sse": v} for k, v in tried.items()]}


def _points(learner: Learner, arms: Sequence[str]) -> int:
    return sum(len(learner.bed["measured"][a]["acc"]) - 1 for a in arms)


def _rmse_of(learner: Learner, arms: Sequence[str], sse: float) -> float:
    return math.sqrt(sse / max(_points(learner, arms), 1))


def _params_text(params: dict) -> str:
    return " ".join(f"{k}={v:.4g}" for k, v in params.items())


# ----------------------------------------------------------------------------- prediction


def _interval(values: Sequence[float]) -> dict:
    """Mean of per-seed values with its LEVEL Student-t interval (S - 1 degrees of freedom),
    as experiment/stats.py's seed_interval (the sim sits below that layer); no interval from
    one seed."""
    from scipy.special import stdtrit

    v = np.asarray(values, float)
    n, mean = int(v.size), float(v.mean())
    if n < 2:
        return {"mean": mean, "lo": None, "hi": None, "n": n, "sd": None}
    sd = float(v.std(ddof=1))
    half = float(stdtrit(n - 1, 1 - (1 - LEVEL) / 2)) * sd / math.sqrt(n)
    return {"mean": mean, "lo": mean - half, "hi": mean + half, "n": n, "sd": sd}


def predict(learner: Learner, arms: Sequence[str], params: dict, seeds: Sequence[int],
            fitted: Sequence[str]) -> dict:
    """Per arm: predicted and measured final paired difference vs the reference (points)."""
    bed = learner.bed
    ref = bed["reference"]
    ref_final = [learner.curve(ref, params, s)[1] for s in seeds]
    out = {}
    for arm in arms:
        if arm == ref:
            continue
        pred = _interval([learner.curve(arm, params, s)[1] - r
                          for s, r in zip(seeds, ref_final, strict=True)])
        a, b = bed["measured"][arm]["final"], bed["measured"][ref]["final"]
        common = sorted(set(a) & set(b))
        meas = _interval([a[s] - b[s] for s in common]) if common else None
        contains = None
        if meas is not None and meas["n"] >= 2:
            contains = bool(meas["lo"] <= pred["mean"] <= meas["hi"])
        out[arm] = {"role": "fitted" if arm in fitted else "held out",
                    "predicted": pred, "measured": meas, "contains": contains,
                    "predicted_curve": learner.mean_curve(arm, params, seeds).tolist(),
                    "measured_curve": bed["measured"][arm]["acc"],
                    "x": bed["measured"][arm]["x"]}
    return out


# ----------------------------------------------------------------------------- entry points


def calibrate(workdir: str, fit_arms: Sequence[str], predict_arms: Sequence[str],
              update: str = "adam", sim_seeds: int = 5, *, grid: dict | None = None,
              bracket: tuple[float, float] | None = None, refine: bool = True,
              say: Callable[[str], None] = print) -> dict:
    """Fits `update`'s parameters to `fit_arms` and predicts `predict_arms` (module docstring);
    returns the entry calibration.json keeps for this rule."""
    if update not in UPDATES:
        raise ValueError(f"--update={update!r} is not allowed: one of {list(UPDATES)}")
    fit_arms, predict_arms = list(fit_arms), list(predict_arms)
    if not fit_arms:
        raise ValueError("--fit is empty: name the arms to fit, e.g. --fit=uniform,oracle")
    both = sorted(set(fit_arms) & set(predict_arms))
    if both:
        raise ValueError(f"--predict names {both}, which --fit fits: a held-out arm is one the "
                         "fit has not seen")
    if isinstance(sim_seeds, bool) or not isinstance(sim_seeds, int) or sim_seeds < 2:
        raise ValueError(f"--sim_seeds={sim_seeds!r} is not allowed: an integer >= 2 (an "
                         "interval needs two)")
    t0 = time.perf_counter()
    bed = testbed(workdir, [*fit_arms, *predict_arms])
    seeds = list(range(sim_seeds))
    learner = Learner(bed, update)
    say(f"calibrate ({LABEL.split(':')[0]}): update={update}, {bed['path']}, bucket "
        f"{bed['primary']}, reference {bed['reference']}, {bed['prompts']:,} prompts, "
        f"start " + ", ".join(f"{b} {v:.1f}" for b, v in bed["start"].items()))
    f = fit(learner, fit_arms, seeds, grid, bracket, refine=refine, say=say)
    say(f"  fitted {_params_text(f['params'])}: rmse {f['rmse']:.2f} points over "
        f"{f['points']} evaluations of {', '.join(fit_arms)}")
    ratio = None
    if update == "adam" and f["params"]["adam_noise"] > 0:
        # Where every step is noise-dominated the curves fix eta_a / sigma, not each alone.
        ratio = f["params"]["adam_lr"] / f["params"]["adam_noise"]
        say(f"  adam_lr / adam_noise = {ratio:.4g} (all that a noise-dominated testbed "
            "determines)")
    say(f"  predicting {', '.join(predict_arms) or 'nothing held out'} on {sim_seeds} sim seeds")
    arms = [a for a in [*fit_arms, *predict_arms] if a != bed["reference"]]
    preds = predict(learner, arms, f["params"], seeds, fit_arms)
    return {"label": LABEL, "update": update, "bucket": bed["primary"],
            "reference": bed["reference"], "fit_arms": fit_arms, "predict_arms": predict_arms,
            "sim_seeds": seeds, "params": f["params"], "rmse_points": f["rmse"],
            "fit_points": f["points"], "grid": f["tried"], "grid_edge": f["edge"],
            "adam_lr_over_noise": ratio,
            "testbed": {k: bed[k] for k in ("buckets", "start", "band_mean", "prompts",
                                            "band_weights", "budget_kind", "budget",
                                            "compare_config")},
            "batch_size": {a: bed["templates"][a].rl.batch_size for a in bed["templates"]},
            "predictions": preds, "sim_runs": learner.runs,
            "wall_s": time.perf_counter() - t0}


def _cell(e: dict | None) -> str:
    if e is None:
        return "—"
    if e["lo"] is None:
        return f"{e['mean']:+.1f} [—]"
    return f"{e['mean']:+.1f} [{e['lo']:+.1f}, {e['hi']:+.1f}]"


def table(entry: dict) -> str:
    """The predictions of one rule as a markdown table."""
    ref = entry["reference"]
    lines = [f"update={entry['update']} ({LABEL}); fitted {_params_text(entry['params'])}, "
             f"rmse {entry['rmse_points']:.2f} points on {entry['bucket']}",
             f"| arm | role | predicted − {ref} [95% CI, {len(entry['sim_seeds'])} sim seeds] "
             f"| measured − {ref} [95% CI over seeds] | measured interval contains it |",
             "|---|---|---|---|---|"]
    for arm, p in entry["predictions"].items():
        c = p["contains"]
        lines.append(f"| {arm} | {p['role']} | {_cell(p['predicted'])} | {_cell(p['measured'])} "
                     f"| {'—' if c is None else 'yes' if c else 'no'} |")
    return "\n".join(lines)


def main(workdir: str | None, fit_arms: Sequence[str], predict_arms: Sequence[str],
         updates: Sequence[str] = ("adam",), sim_seeds: int = 5,
         say: Callable[[str], None] = print) -> dict:
    """`frontier-rl sim calibrate`: every rule in `updates`, into DIR/calibration.json."""
    if not workdir:
        raise ValueError("--workdir is required: the directory of a finished `frontier-rl "
                         "compare` (DIR/results.json)")
    updates = list(updates) or ["adam"]
    for u in updates:
        if u not in UPDATES:
            raise ValueError(f"--update={u!r} is not allowed: one of {list(UPDATES)}")
    out_path = os.path.join(workdir, "calibration.json")
    doc = {"label": LABEL, "results": os.path.join(workdir, "results.json"), "updates": {}}
    if os.path.exists(out_path):
        try:
            with open(out_path) as f:
                doc["updates"] = json.load(f).get("updates", {})
        except (json.JSONDecodeError, AttributeError):
            pass
    for u in updates:
        entry = calibrate(workdir, fit_arms, predict_arms, u, sim_seeds, say=say)
        doc["updates"][u] = entry
        doc["meta"] = provenance.stamp()
        with open(out_path, "w") as f:
            json.dump(doc, f, indent=1)
        say(table(entry))
        say(f"  {entry['sim_runs']} learner runs in {entry['wall_s']:.0f} s")
    say(f"wrote {out_path}")
    return doc
