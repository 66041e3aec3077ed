"""Equivalence verdicts by two one-sided tests at a margin fixed before the run, and ratios of
rollouts- / PFLOPs-to-target that get no verdict when an arm did not reach the target;
simulated experiments check the equivalence test's error rate and power."""

import math
import os

import numpy as np
import pytest

from frontier_rl import config_lib
from frontier_rl.experiment import compare, report, stats

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPERIMENTS = 20_000  # simulated comparisons per setting of the error-rate test
DELTA = 1.5  # the margin, in points


def _rate(seeds: int, sd: float, true_diff: float, n: int, seed) -> float:
    """Share of n simulated experiments called "equivalent within ±DELTA": per-seed differences
    d_s ~ N(true_diff, sd), `seeds` of them per experiment."""
    d = np.random.default_rng(seed).normal(true_diff, sd, size=(n, seeds))
    return float(np.mean([stats.equivalence(x, DELTA).startswith(stats.EQUIVALENT)
                          for x in d]))


# (seeds, per-seed sd as a share of the margin, sign of the true difference)
AT_THE_MARGIN = [(3, 0.25, 1), (3, 1.0, -1), (5, 0.25, -1), (5, 1.0, 1)]


@pytest.mark.parametrize("seeds,sd_share,sign", AT_THE_MARGIN)
def test_a_true_difference_of_delta_is_rarely_called_equivalent(seeds, sd_share, sign):
    # At a true difference of exactly ±delta, "equivalent" is a false verdict; the test makes
    # it in at most 5% of experiments (exactly 5% when the spread is small next to delta, as
    # then only the one-sided test on delta's side can fail). The bound allows 3 Monte Carlo
    # standard errors, as the t-interval's false "better" test allows (test_stats.py).
    rate = _rate(seeds, sd_share * DELTA, sign * DELTA, EXPERIMENTS, [seeds, int(100 * sd_share)])
    se = math.sqrt(0.05 * 0.95 / EXPERIMENTS)
    assert rate <= 0.05 + 3 * se, (
        f"false 'equivalent' rate {rate:.4f} at a true difference of {sign * DELTA:+g} "
        f"({seeds} seeds, sd {sd_share * DELTA:g}; Monte Carlo se {se:.4f})")
    if sd_share < 0.5:
        # ... and at its nominal level: the 90% interval, not the 95% one (2.5% here)
        assert rate >= 0.05 - 3 * se, f"'equivalent' rate {rate:.4f} below the test's 5%"


@pytest.mark.parametrize("seeds,sd_share", [(3, 0.25), (10, 0.5)])
def test_no_true_difference_is_shown_equivalent_most_of_the_time(seeds, sd_share):
    rate = _rate(seeds, sd_share * DELTA, 0.0, 2000, [seeds, 7])
    assert rate >= 0.8, f"'equivalent' rate {rate:.3f} at a true difference of 0"


def test_verdicts_and_their_precedence():
    assert stats.equivalence([3.0, 3.1, 2.9], DELTA) == "better"
    assert stats.equivalence([-3.0, -3.1, -2.9], DELTA) == "worse"
    # non-zero (the 95% interval excludes 0) and inside the margin: equivalence comes first
    small = [0.5, 0.51, 0.49]
    assert stats.seed_interval(small).lo > 0
    assert stats.equivalence(small, DELTA) == "equivalent within ±1.5"
    # centred on 0 but too spread to show it within ±delta
    assert stats.equivalence([0.0, 2.0, -2.0], DELTA) == stats.NOT_EQUIVALENT
    # the 90% interval is mean ± t(0.95, S − 1) · sd / √S
    lo, hi = stats.equivalence_interval([1.0, 2.0, 3.0])
    half = 2.919986 * 1.0 / math.sqrt(3)
    assert (lo, hi) == pytest.approx((2.0 - half, 2.0 + half), abs=1e-5)
    # inside means strictly inside: an interval reaching the margin is not equivalent
    assert stats.equivalence([1.0, 2.0, 3.0], hi) == stats.NOT_EQUIVALENT
    assert stats.equivalence([1.0, 2.0, 3.0], hi + 1e-6).startswith(stats.EQUIVALENT)


@pytest.mark.parametrize("diffs,delta,name", [
    ([0.1, 0.2, 0.3], 0.0, "delta"), ([0.1, 0.2, 0.3], -1.0, "delta"),
    ([0.1, 0.2, 0.3], float("nan"), "delta"), ([0.1, 0.2, 0.3], float("inf"), "delta"),
    ([0.1, 0.2, 0.3], True, "delta"), ([0.1], 1.0, "diffs"), ([], 1.0, "diffs"),
    ([0.1, float("nan")], 1.0, "diffs"), ([[0.1, 0.2]], 1.0, "diffs"),
])
def test_bad_arguments_are_named(diffs, delta, name):
    with pytest.raises(ValueError, match=rf"^{name} must be"):
        stats.equivalence(diffs, delta)


def _load_config(arg="smoke"):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "compare_arith", os.path.join(ROOT, "configs/compare_arith.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.get_config(arg)


@pytest.mark.parametrize("value", [0.0, -1.0, "2", float("nan"), True])
def test_bad_equivalence_margin_is_named(value):
    cfg = _load_config()
    del cfg.compare["equivalence_margin"]  # a fresh field: any type
    cfg.compare.equivalence_margin = value
    with pytest.raises(config_lib.ConfigError, match=r"compare\.equivalence_margin="):
        compare.validate(cfg)


def test_a_config_without_the_margin_gets_the_default():
    cfg = _load_config()
    del cfg.compare["equivalence_margin"]  # a config written before the field
    compare.validate(cfg)
    assert compare._get(cfg.compare, "equivalence_margin") == compare.DEFAULTS[
        "equivalence_margin"] > 0


# ----------------------------------------------------------------------------- to target


def test_a_ratio_with_an_unreached_target_gets_no_verdict():
    fast = stats.log_ratio([3.0, 3.1, 2.9])
    assert stats.ratio_verdict(fast, {s: {"ds": 30.0, "hive": 10.0} for s in range(3)}) == \
        "better"
    verdict = stats.ratio_verdict(fast, {0: {"ds": 30.0, "hive": 10.0},
                                         2: {"ds": 30.0, "hive": None},
                                         1: {"ds": None, "hive": None}})
    assert verdict == ("no verdict: ds did not reach the target in seed 1; hive did not reach "
                       "the target in seed 1; hive did not reach the target in seed 2")
    assert stats.ratio_verdict(None, {0: {"ds": 0.0, "hive": 0.0}}) == stats.NO_RATIO


X = [0, 1000, 2000, 3000]
K, PROMPTS = 8, 96


def _run(method: str, seed: int, metric: list[float], target: float, shift: int = 0) -> dict:
    """A run as compare.collect makes it, on one bucket ("all"): `metric` its accuracy curve;
    each eval point's per-prompt correct counts (of K) are 4 everywhere plus `shift` on the
    first prompts, so the run's final accuracy is 50 + shift * 100 / (K * PROMPTS) points."""
    counts = [4] * PROMPTS
    counts[:abs(shift)] = [4 + (1 if shift > 0 else -1)] * abs(shift)
    curve = {"rollouts": X, "pflops": [x / 1e5 for x in X], "metric": metric,
             "correct_counts": [counts] * len(X)}
    return {"method": method, "seed": seed, "k": K, "final": metric[-1], "curve": curve,
            "target": target, "rollouts_to_target": stats.to_target(curve, target, "rollouts"),
            "pflops_to_target": stats.to_target(curve, target, "pflops"),
            "zero_var_easy": 0.1, "zero_var_hard": 0.2}


def _results(runs: list[dict], methods: list[str]) -> dict:
    return {"methods": methods, "runs": runs, "seeds": [0, 1, 2], "k": K,
            "metric": f"eval/avg@{K}/all", "target_method": "ds", "rollout_reference": "ds",
            "equivalence_margin": DELTA}


def test_efficiency_table_names_the_arm_and_seed_that_did_not_reach_the_target():
    runs = []
    for s in range(3):
        runs += [_run("ds", s, [30, 35, 38, 40], 40.0),
                 _run("fast", s, [30, 40 + s, 41, 41], 40.0),
                 # slow misses the target in seed 1 only: its ratio there is a bound (≤)
                 _run("slow", s, [30, 39, 39, 39] if s == 1 else [30, 40, 41, 41], 40.0)]
    table = report.efficiency_table(_results(runs, ["ds", "fast", "slow"]))
    fast = table.split("| fast |")[1].split("\n")[0]
    slow = table.split("| slow |")[1].split("\n")[0]
    assert fast.count("| better |") == 2  # rollouts and PFLOPs: every arm reached it
    assert "s1 not reached (> 3,000)" in slow and "≤ " in slow
    assert slow.count("no verdict: slow did not reach the target in seed 1 |") == 2
    assert "better" not in slow and "worse" not in slow


def test_hive_claim_names_the_unreached_seed_and_tests_accuracy_for_equivalence():
    def runs(hive_shift, hive_curve):
        out = []
        for s in range(3):
            out += [_run("ds", s, [30, 35, 38, 41], 41.0),
                    _run("hive", s, hive_curve(s), 41.0, shift=hive_shift[s])]
        return out

    # HIVE gets to DS's final accuracy early in seeds 0 and 2, never in seed 1; its final
    # accuracy is within 0.26 points of DS's at every seed
    res = _results(runs([2, -1, 1], lambda s: [30, 39, 39, 40] if s == 1 else [30, 42, 42, 41]),
                   ["ds", "hive"])
    by = {c["claim"]: c for c in report.claims(res)}
    ratio = by["HIVE reaches DS's accuracy with fewer rollouts"]
    assert ratio["held"] == "no verdict: hive did not reach the target in seed 1"
    assert "s1: DS final 41.0 at 3,000; HIVE not reached (> 3,000)" in ratio["measured"]
    eq = by["HIVE's accuracy is equivalent to DS's"]
    assert eq["held"] == "equivalent within ±1.5"
    assert "90% CI [" in eq["measured"] and "compare.equivalence_margin" in eq["note"]
    assert by["HIVE's accuracy is equivalent to GRESO's"]["held"] == "n/a"  # greso not run
    # HIVE 5.2 points above DS at every seed: a difference, not equivalence
    res = _results(runs([40, 40, 40], lambda s: [30, 42, 42, 41]), ["ds", "hive"])
    by = {c["claim"]: c for c in report.claims(res)}
    assert by["HIVE's accuracy is equivalent to DS's"]["held"] == "better"
    assert by["HIVE reaches DS's accuracy with fewer rollouts"]["held"] == "better"
    # results written before the margin existed: no test at a margin chosen afterwards
    del res["equivalence_margin"]
    eq = next(c for c in report.claims(res) if c["claim"] == "HIVE's accuracy is equivalent "
              "to DS's")
    assert eq["held"] == "n/a" and "compare.equivalence_margin" in eq["note"]
