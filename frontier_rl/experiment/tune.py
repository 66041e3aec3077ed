"""An equal tuning budget for every arm, then fresh confirmation seeds (`compare.tune`).

A method compared with a baseline at a setting that is bad for the baseline measures the
setting. So every arm of `compare.tune.arms` gets the same grid over the same named fields
(`compare.tune.grid`, a config delta whose leaves are tuples of values; at least the learning
rate), run on the tuning seeds (`compare.tune.seeds`) in DIR/tune; each arm's setting is then
chosen by the rule written in the config before the runs (`compare.tune.rule`), and the arms
run again at their chosen settings on confirmation seeds disjoint from the tuning ones
(`compare.seeds`) in DIR. The confirmatory verdicts are those of the confirmation stage: each
method tuned against the reference tuned, Holm over the family the config declares by name
(AlgoPerf, arXiv 2306.07179: the same tuning budget per algorithm; Eimer et al., arXiv
2306.01324: tuning seeds apart from reporting seeds).

Rules (`compare.tune.rule`):
- "best_mean": the grid point with the highest mean over the tuning seeds of the final
  pre-registered metric (compare.metric); a tie goes to the earlier point in grid order.

The tuning stage is an ordinary comparison of (arm, grid point) methods named
`arm@field=value[,field=value]`, so its runs are reused by fingerprint like any other, and its
results (`tuning` in results.json) give each arm's sensitivity curve: the endpoint per grid
point with its interval over the tuning seeds.
"""

from __future__ import annotations

import copy
import itertools

import ml_collections
import numpy as np

from frontier_rl import config_lib
from frontier_rl.experiment import stats

RULES = ("best_mean",)


def _csv(s) -> list[str]:
    return [x.strip() for x in str(s).split(",") if x.strip()]


def enabled(c: ml_collections.ConfigDict) -> bool:
    return bool(c.get("tune")) and bool(c.tune.get("grid"))


def points(grid) -> list[dict[str, object]]:
    """Every grid point as {dotted field: value}, in grid order (the first field slowest)."""
    flat = config_lib.flatten(grid.to_dict() if hasattr(grid, "to_dict") else dict(grid))
    fields = list(flat)
    return [dict(zip(fields, combo, strict=True))
            for combo in itertools.product(*(tuple(flat[f]) for f in fields))]


def _value(v) -> str:
    """A value as a method name may hold it (no dots): 3e-05, 1p5e-04, 64."""
    if isinstance(v, float):
        mant, exp = f"{v:.3e}".split("e")
        return f"{mant.rstrip('0').rstrip('.')}e{exp}".replace(".", "p")
    return str(v).replace(".", "p")


def label(point: dict) -> str:
    """`learning_rate=1e-04`: each field by its last name (the grid's fields are distinct)."""
    return ",".join(f"{f.rsplit('.', 1)[-1]}={_value(v)}" for f, v in point.items())


def _delta(point: dict) -> dict:
    out: dict = {}
    for field, value in point.items():
        node = out
        *path, leaf = field.split(".")
        for p in path:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def _merge(a: dict, b: dict) -> dict:
    out = copy.deepcopy(a)
    for k, v in b.items():
        out[k] = _merge(out.get(k, {}), v) if isinstance(v, dict) else v
    return out


def validate(c: ml_collections.ConfigDict) -> None:
    """compare.tune: a grid of >= 3 values per field (each field in the base config), arms that
    are methods, a known rule with its source, tuning seeds disjoint from compare.seeds."""
    t = c.tune
    for field in ("grid", "arms", "seeds", "rule", "rule_source", "shared"):
        if field not in t:
            raise config_lib.ConfigError(f"compare.tune.{field} is missing (see "
                                         "frontier_rl/experiment/tune.py)")
    flat = config_lib.flatten(t.grid.to_dict())
    for f, values in flat.items():
        if not isinstance(values, (tuple, list)) or len(values) < 3:
            raise config_lib.ConfigError(
                f"compare.tune.grid.{f}={values!r} is not allowed: a tuple of at least 3 values "
                "(bracketing each arm's best)")
    arms = _csv(t.arms)
    for a in arms:
        if a not in c.methods:
            raise config_lib.ConfigError(f"compare.tune.arms names {a!r}, which is not in "
                                         f"compare.methods")
    if c.target not in arms:
        raise config_lib.ConfigError(f"compare.tune.arms={t.arms!r} leaves out the reference "
                                     f"compare.target={c.target!r}: tune it as hard as the rest")
    if t.rule not in RULES:
        raise config_lib.ConfigError(f"compare.tune.rule={t.rule!r} is not one of {RULES}")
    if not (isinstance(t.rule_source, str) and t.rule_source.strip()):
        raise config_lib.ConfigError("compare.tune.rule_source is empty: say why the rule, "
                                     "written before the runs")
    tuning = {int(x) for x in _csv(t.seeds)}
    confirm = {int(x) for x in _csv(c.seeds)}
    if not tuning:
        raise config_lib.ConfigError("compare.tune.seeds is empty: name the tuning seeds")
    if tuning & confirm:
        raise config_lib.ConfigError(
            f"compare.tune.seeds and compare.seeds share seed(s) {sorted(tuning & confirm)}: "
            "confirmation seeds must be fresh")
    shared = config_lib.flatten(t.shared.to_dict())
    if set(shared) != set(flat) or any(shared[f] not in tuple(flat[f]) for f in flat):
        raise config_lib.ConfigError(
            f"compare.tune.shared={shared!r} is not allowed: one value of each grid field, from "
            "the grid (the shared setting whose verdicts are reported beside the tuned ones)")


def tuning_config(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """The tuning stage: every (arm, grid point) as a method, on the tuning seeds, the reference
    at the shared setting as the target (its verdicts are the shared-setting ones), no tuning."""
    cfg = copy.deepcopy(config)
    c = cfg.compare
    grid = points(c.tune.grid)
    shared = label(config_lib.flatten(c.tune.shared.to_dict()))
    methods, run = {}, []
    for arm in _csv(c.tune.arms):
        base = c.methods[arm].to_dict()
        for p in grid:
            name = f"{arm}@{label(p)}"
            methods[name] = _merge(base, _delta(p))
            run.append(name)
    with c.unlocked():
        c.methods = ml_collections.ConfigDict(methods)
        c.run = ",".join(run)
        c.seeds = c.tune.seeds
        c.target = f"{c.target}@{shared}"
        c.rollout_reference = c.target
        c.ablations = ml_collections.ConfigDict()
        c.match_rollouts = ml_collections.ConfigDict()
        c.best_of = ml_collections.ConfigDict()
        # the shared-setting family: each tuned arm at the shared setting against the reference
        c.confirmatory = [f"{m}@{shared}" for m in config.compare.confirmatory] if isinstance(
            config.compare.confirmatory, (list, tuple)) else "all"
        c.tune = ml_collections.ConfigDict()
    return cfg


def choose(results: dict, config: ml_collections.ConfigDict) -> dict:
    """The tuning record: per arm, each grid point's endpoint over the tuning seeds (mean, 95%
    t-interval, per seed) and the point the rule picks; the paired sd of each method's chosen
    point against the reference's and the confirmation seeds 80% power needs at the
    pre-registered effects with it."""
    c = config.compare
    grid = points(c.tune.grid)
    by = {}
    for r in results["runs"]:
        by.setdefault(r["method"], {})[r["seed"]] = r["final"]
    arms = {}
    for arm in _csv(c.tune.arms):
        cells = []
        for p in grid:
            per_seed = by.get(f"{arm}@{label(p)}", {})
            vals = [v for v in per_seed.values() if np.isfinite(v)]
            iv = stats.seed_interval(vals) if len(vals) >= 2 else None
            cells.append({"point": p, "label": label(p), "per_seed": per_seed,
                          "mean": float(np.mean(vals)) if vals else float("nan"),
                          "lo": iv.lo if iv else float("nan"),
                          "hi": iv.hi if iv else float("nan")})
        means = [x["mean"] if np.isfinite(x["mean"]) else -np.inf for x in cells]
        best = int(np.argmax(means))  # the first of equal means: grid order breaks ties
        arms[arm] = {"cells": cells, "chosen": cells[best]["point"],
                     "chosen_label": cells[best]["label"]}
    ref = c.target
    power = {}
    for arm, a in arms.items():
        if arm == ref:
            continue
        mine = by.get(f"{arm}@{a['chosen_label']}", {})
        theirs = by.get(f"{ref}@{arms[ref]['chosen_label']}", {})
        d = [mine[s] - theirs[s] for s in mine if s in theirs]
        sd = float(np.std(d, ddof=1)) if len(d) >= 2 else float("nan")
        power[arm] = {"sd": sd, "n": len(d), "seeds_needed": {
            n: stats.seeds_for_power(float(e["points"]), sd) if np.isfinite(sd) else None
            for n, e in c.effect_sizes.items()}}
    return {"grid": [dict(p) for p in grid], "rule": c.tune.rule,
            "rule_source": c.tune.rule_source,
            "tuning_seeds": [int(x) for x in _csv(c.tune.seeds)],
            "confirmation_seeds": [int(x) for x in _csv(c.seeds)],
            "shared": config_lib.flatten(c.tune.shared.to_dict()), "arms": arms,
            "power": power}


def confirmation_config(config: ml_collections.ConfigDict, record: dict
                        ) -> ml_collections.ConfigDict:
    """The confirmation stage: each arm at its chosen setting on the confirmation seeds
    (compare.seeds), the rest of the comparison as declared. An arm chosen at the shared setting
    keeps its name (an untuned comparison's run of it in the same workdir is the same run); one
    chosen elsewhere is named `arm@setting`, and the target, the family and the ablations
    follow the names."""
    cfg = copy.deepcopy(config)
    c = cfg.compare
    shared = label(config_lib.flatten(c.tune.shared.to_dict()))
    names = {arm: arm if a["chosen_label"] == shared else f"{arm}@{a['chosen_label']}"
             for arm, a in record["arms"].items()}
    with c.unlocked():
        methods = c.methods.to_dict()
        for arm, a in record["arms"].items():
            methods[names[arm]] = _merge(methods[arm], _delta(a["chosen"]))
        c.methods = ml_collections.ConfigDict(methods)
        c.run = ",".join(names.values())
        c.target = names.get(c.target, c.target)
        c.rollout_reference = names.get(c.rollout_reference, c.rollout_reference)
        if isinstance(c.confirmatory, (list, tuple)):
            c.confirmatory = [names.get(x, x) for x in c.confirmatory]
        for ab in c.ablations.values():
            ab.method = names.get(ab.method, ab.method)
            ab.ablation = names.get(ab.ablation, ab.ablation)
        c.tune = ml_collections.ConfigDict()
    return cfg
