"""HIVE's two-run protocol as two general `compare` fields (HIVE §4.1 and App. B.2).

HIVE runs Pre-filter and PCL twice, once at the method's own settings and once at HIVE's
common ones, both at a matched rollout budget (in its Table 1 their #Rollout equals GRESO's),
and reports the run with the higher average benchmark score. Any comparison can do the same
with two fields of its `compare` section:

- `compare.match_rollouts = {method: reference}`: every run of `method` goes to the rollouts
  that `reference`'s run at the same seed spent. The references run first (compare.plan orders
  the runs so); the matched run then takes rl.rollout_budget = those rollouts, so it ends at
  the step boundary nearest them (train.py: after the step that reaches them, or before a step
  when less than half of the last step's rollouts remain), its step count whatever that comes
  to, and is evaluated each time its rollouts cross a multiple of target / compare.evals and
  at its last step: compare.evals evaluations over its budget, as every other run has (fewer
  only if one of its steps spans more than one multiple). References may chain
  (a -> b -> c); a cycle, a method not in compare.methods, or a reference left out of
  compare.run while its method runs is an error. Entries for methods not in compare.run are
  ignored, so `--config.compare.run` can still pick a subset.
- `compare.best_of = {group: "arm,arm,..."}`: the report's row `group` is the arm with the
  higher mean over seeds of its final primary metric (compare.metric at the end of its
  budget, the value the report compares everywhere), ties to the arm named first. It is one
  choice over all seeds, never one per seed: HIVE reports one number per method. The group's
  paired differences and verdicts use the chosen arm's per-seed values; each arm keeps a row of
  its own. The choice is made after the results are seen, as HIVE makes it, so it favours the
  group (a selection effect), which the report says. A group may be named as one of its arms
  (HIVE's "PCL" is the better of pcl and pcl_own); it may not be compare.target or
  compare.rollout_reference (a reference is one pre-registered run), and an ablation names the
  group, not an arm.

Deviation: HIVE picks by the average of each run's best checkpoint; the report compares final
values, so the choice does too.
"""

from __future__ import annotations

import math

import ml_collections

from frontier_rl import config_lib

RULE = ("the arm with the higher mean over seeds of its final primary metric (one choice over "
        "all seeds; a tie goes to the arm named first)")


def _csv(s) -> list[str]:
    return [x.strip() for x in str(s).split(",") if x.strip()]


def _mapping(c: ml_collections.ConfigDict, field: str) -> dict:
    value = c.get(field, {})
    if not isinstance(value, (dict, ml_collections.ConfigDict)):
        raise config_lib.ConfigError(
            f"compare.{field}={value!r} is not allowed: a ConfigDict keyed by method "
            "(or group) name")
    return dict(value.items())


def matches(c: ml_collections.ConfigDict) -> dict[str, str]:
    """compare.match_rollouts for the methods compare.run names: {method: reference}."""
    run = set(_csv(c.run))
    return {m: ref for m, ref in _mapping(c, "match_rollouts").items() if m in run}


def groups(c: ml_collections.ConfigDict) -> dict[str, list[str]]:
    """The compare.best_of groups whose arms compare.run names: {group: [arm, ...]}."""
    run = set(_csv(c.run))
    return {g: _csv(arms) for g, arms in _mapping(c, "best_of").items()
            if set(_csv(arms)) & run}


def validate(c: ml_collections.ConfigDict, methods: set[str], run: list[str]) -> None:
    """Checks compare.match_rollouts and compare.best_of; raises ConfigError naming the field."""
    known = sorted(methods)
    match = _mapping(c, "match_rollouts")
    for m, ref in match.items():
        where = f"compare.match_rollouts.{m}"
        if m not in methods:
            raise config_lib.ConfigError(f"{where}: {m!r} is not in compare.methods {known}")
        if not (isinstance(ref, str) and ref in methods):
            raise config_lib.ConfigError(
                f"{where}={ref!r} is not allowed: a method of compare.methods {known}")
        if ref == m:
            raise config_lib.ConfigError(f"{where}={ref!r}: a method cannot be matched to itself")
        if m in run and ref not in run:
            raise config_lib.ConfigError(
                f"{where}={ref!r} is not in compare.run={c.run!r}: the reference must run, "
                f"at the same seeds, before {m}")
    for m in match:  # follow each chain; coming back to a method is a cycle
        chain = [m]
        while chain[-1] in match:
            chain.append(match[chain[-1]])
            if chain[-1] in chain[:-1]:
                raise config_lib.ConfigError(
                    "compare.match_rollouts has a cycle: " + " -> ".join(chain)
                    + " (each run needs its reference's spent rollouts first)")
    arm_of: dict[str, str] = {}
    for g, value in _mapping(c, "best_of").items():
        where = f"compare.best_of.{g}"
        arms = _csv(value) if isinstance(value, str) else []
        if len(arms) < 2 or len(set(arms)) != len(arms):
            raise config_lib.ConfigError(
                f"{where}={value!r} is not allowed: two or more distinct methods, "
                "comma-separated")
        for a in arms:
            if a not in methods:
                raise config_lib.ConfigError(
                    f"{where} names {a!r}, which is not in compare.methods {known}")
            if a in arm_of:
                raise config_lib.ConfigError(
                    f"{where} names {a!r}, already an arm of compare.best_of.{arm_of[a]}")
            arm_of[a] = g
        if g in methods and g not in arms:
            raise config_lib.ConfigError(
                f"compare.best_of.{g}: the group's name is a method of compare.methods that "
                "is not one of its arms (its row would hide that method)")
        ran = [a for a in arms if a in run]
        if ran and len(ran) != len(arms):
            missing = [a for a in arms if a not in run]
            raise config_lib.ConfigError(
                f"{where} names {missing}, not in compare.run={c.run!r}: run every arm of a "
                "group or none")
    active = groups(c)
    for field in ("target", "rollout_reference"):
        for g, arms in active.items():
            if c[field] and c[field] in {g, *arms}:
                raise config_lib.ConfigError(
                    f"compare.{field}={c[field]!r} is in compare.best_of.{g}: a reference is "
                    "one pre-registered run, not an arm chosen after the results")
    for name, ab in c.get("ablations", {}).items():
        for field in ("method", "ablation"):
            x = ab[field]
            g = arm_of.get(x)
            if g is not None and g in active and x != g:
                raise config_lib.ConfigError(
                    f"compare.ablations.{name}.{field}={x!r} is an arm of compare.best_of.{g}; "
                    f"name the group {g!r} (the report compares the arm it chose)")


def order(run: list[str], match: dict[str, str]) -> list[str]:
    """compare.run's methods in the order they run: each after its reference (compare.run's
    order otherwise). `match` must be acyclic (validate)."""
    out: list[str] = []

    def visit(m: str) -> None:
        if m in out:
            return
        if m in match:
            visit(match[m])
        out.append(m)

    for m in run:
        visit(m)
    return out


def choose(group_arms: dict[str, list[str]], runs: list[dict]) -> dict[str, dict]:
    """Each group's chosen arm by RULE, from run results ("method", "seed", "final"):
    {group: {"arms", "chosen", "mean": {arm: mean final over seeds}, "rule"}}."""
    out = {}
    for g, arms in group_arms.items():
        mean = {}
        for a in arms:
            v = [r["final"] for r in runs if r["method"] == a
                 and isinstance(r["final"], (int, float)) and math.isfinite(r["final"])]
            mean[a] = sum(v) / len(v) if v else float("nan")
        scored = [a for a in arms if math.isfinite(mean[a])]
        chosen = max(scored, key=lambda a: (mean[a], -arms.index(a))) if scored else arms[0]
        out[g] = {"arms": list(arms), "chosen": chosen, "mean": mean, "rule": RULE}
    return out
