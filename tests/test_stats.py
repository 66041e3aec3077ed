"""Seed-level t-intervals, paired verdicts, the minimum detectable difference and the
interpolated rollouts-to-target; simulated experiments check the error rates."""

import math

import numpy as np
import pytest

from frontier_rl.experiment import stats

EXPERIMENTS = 1000  # simulated comparisons per setting


def _simulate(rng, seeds: int, run_sd: float, diff: float, n: int = EXPERIMENTS,
              prompts: int = 200, k: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """n simulated comparisons of method A against method B: [n, seeds, prompts] accuracy in
    points. The eval prompts (shared by both methods and every seed of one experiment) have
    their own solve rates between 10% and 85%; each run (method, seed) has its own offset with
    sd `run_sd` points (the run-to-run effect of its seed); A is `diff` points better in truth;
    each prompt is sampled k times, independently per run."""
    p = rng.uniform(0.10, 0.85, size=(n, 1, prompts))
    off_a = rng.normal(0.0, run_sd, size=(n, seeds, 1)) / 100
    off_b = rng.normal(0.0, run_sd, size=(n, seeds, 1)) / 100
    a = rng.binomial(k, np.clip(p + diff / 100 + off_a, 0, 1)) / k * 100
    b = rng.binomial(k, np.clip(p + off_b, 0, 1)) / k * 100
    return a, b


SETTINGS = [(s, sd) for s in (3, 5) for sd in (0.0, 1.0, 2.0)]


@pytest.mark.parametrize("seeds,run_sd", SETTINGS)
def test_no_true_difference_gives_few_false_verdicts(seeds, run_sd):
    rng = np.random.default_rng([seeds, int(10 * run_sd)])
    a, b = _simulate(rng, seeds, run_sd, diff=0.0)
    called = sum(stats.verdict(stats.paired(a[i], b[i])) in ("better", "worse")
                 for i in range(len(a)))
    assert called / len(a) <= 0.07, f"false better/worse rate {called / len(a):.3f}"


@pytest.mark.parametrize("seeds,run_sd", SETTINGS)
def test_paired_interval_covers_a_true_difference(seeds, run_sd):
    rng = np.random.default_rng([seeds, int(10 * run_sd), 1])
    a, b = _simulate(rng, seeds, run_sd, diff=5.0)
    ivs = [stats.paired(a[i], b[i]) for i in range(len(a))]
    coverage = np.mean([iv.lo <= 5.0 <= iv.hi for iv in ivs])
    assert 0.92 <= coverage <= 0.98, f"coverage {coverage:.3f}"


@pytest.mark.parametrize("seeds", [1, 2])
def test_fewer_than_three_seeds_give_no_verdict(seeds):
    a = np.full((seeds, 50), 80.0)
    b = np.full((seeds, 50), 20.0)
    b[-1, 0] = 30.0  # a little spread between seeds
    d = stats.paired(a, b)
    assert d.mean > 50 and stats.verdict(d) == stats.TOO_FEW == "too few seeds for a verdict"
    if seeds == 1:
        assert math.isnan(d.lo) and d.mdd() is None and d.fmt() == "59.8 [—]"
        assert d.fmt_mdd() == "undefined (1 seed)"
    else:
        assert d.lo <= d.mean <= d.hi and d.mdd() is not None


def test_t_quantiles_match_the_tables():
    assert stats.t_quantile(0.975, 2) == pytest.approx(4.303, abs=1e-3)
    assert stats.t_quantile(0.975, 4) == pytest.approx(2.776, abs=1e-3)
    assert stats.t_quantile(0.80, 2) == pytest.approx(1.061, abs=1e-3)
    assert stats.t_quantile(0.975, 1000) == pytest.approx(1.962, abs=1e-3)
    with pytest.raises(ValueError, match="df >= 1"):
        stats.t_quantile(0.975, 0)


def test_interval_is_the_t_interval_over_seed_means():
    cells = np.array([[10.0, 20.0], [30.0, 40.0], [20.0, 20.0]])  # seed means 15, 35, 20
    iv = stats.interval(cells)
    half = 4.302653 * np.std([15, 35, 20], ddof=1) / np.sqrt(3)
    assert iv.mean == pytest.approx(70 / 3) and iv.n == 3
    assert (iv.lo, iv.hi) == pytest.approx((70 / 3 - half, 70 / 3 + half))
    assert stats.interval(np.full((3, 50), 40.0)) == stats.Interval(40.0, 40.0, 40.0, 3, 0.0)


def test_paired_difference_and_verdicts():
    rng = np.random.default_rng(2)
    base = rng.binomial(8, rng.uniform(0, 1, size=(4, 300))) / 8 * 100
    same = stats.paired(base, base)
    assert (same.mean, same.lo, same.hi) == (0.0, 0.0, 0.0)
    assert stats.verdict(same) == stats.NOT_DISTINGUISHABLE
    better = stats.paired(base + 5.0, base)
    assert better.lo == pytest.approx(5.0) and stats.verdict(better) == "better"
    assert stats.verdict(stats.paired(base, base + 5.0)) == "worse"
    noisy = base + rng.normal(0, 20, size=base.shape)  # prompt noise only, averaged per seed
    assert stats.paired(noisy, base).hi - stats.paired(noisy, base).lo < 10
    with pytest.raises(ValueError, match="same seeds and prompts"):
        stats.paired(base, base[:, :10])


def test_mdd_is_the_paired_power_formula():
    d = stats.seed_interval([1.0, 3.0, 2.0, 6.0, 3.0])
    sd = np.std([1, 3, 2, 6, 3], ddof=1)
    assert d.mdd() == pytest.approx((2.776445 + 0.940965) * sd / np.sqrt(5), rel=1e-5)
    assert d.fmt_mdd() == f"{d.mdd():.1f}"


def test_mdd_gives_about_80_percent_power():
    # at a true difference equal to the expected MDD (run sd 2 points, 5 seeds), the test
    # calls about 80% of the experiments "better" (the MDD formula is a normal-style
    # approximation of the noncentral t; it errs on the generous side)
    rng = np.random.default_rng(7)
    a, b = _simulate(rng, 5, 2.0, diff=0.0, n=400)
    sd = np.mean([stats.paired(a[i], b[i]).sd for i in range(len(a))])
    mdd = (stats.t_quantile(0.975, 4) + stats.t_quantile(0.8, 4)) * sd / np.sqrt(5)
    a, b = _simulate(rng, 5, 2.0, diff=mdd, n=400)
    power = np.mean([stats.verdict(stats.paired(a[i], b[i])) == "better"
                     for i in range(len(a))])
    assert 0.70 <= power <= 0.90


def test_log_ratio_interval_prints_ratios():
    iv = stats.log_ratio([2.0, 2.0, 2.0])
    assert iv.log and iv.mean == pytest.approx(math.log(2)) and iv.fmt(2) == "2.00x [2.00, 2.00]"
    assert stats.verdict(iv) == "better"
    assert stats.log_ratio([1.5]).fmt(2) == "1.50x [—]"
    with pytest.raises(ValueError, match="ratios > 0"):
        stats.log_ratio([1.0, 0.0])


def test_to_target_interpolates_between_evaluations():
    curve = {"rollouts": [0, 10, 20, 30], "metric": [1.0, 5.0, 4.0, 9.0]}
    assert stats.to_target(curve, 3.0, "rollouts") == pytest.approx(5.0)  # halfway 1 -> 5
    assert stats.to_target(curve, 5.0, "rollouts") == pytest.approx(10.0)
    assert stats.to_target(curve, 7.0, "rollouts") == pytest.approx(26.0)  # 4 -> 9: 3/5 of 20 -> 30
    assert stats.to_target(curve, 0.5, "rollouts") == 0.0
    assert stats.to_target(curve, 9.5, "rollouts") is None
    with pytest.raises(ValueError, match="3 rollouts values and 4 metric"):
        stats.to_target({"rollouts": [0, 1, 2], "metric": [0, 1, 2, 3]}, 1.0, "rollouts")


def test_to_target_is_resolved_only_between_close_evaluations():
    curve = {"rollouts": [0, 10, 20, 40, 80], "metric": [1.0, 2.0, 5.0, 6.0, 9.0]}
    # crossing 5 -> 6 between 20 and 40 at 30: a bracket of 20 is 2/3 of the value
    assert stats.to_target_bracket(curve, 5.5, "rollouts") == (20.0, 40.0)
    assert stats.resolved(curve, 5.5, "rollouts") is False
    # denser evaluations around the same crossing resolve it (a bracket of 4 at 30: 13%)
    dense = {"rollouts": [0, 10, 20, 28, 32, 40, 80], "metric": [1, 2, 5, 5.4, 5.6, 6, 9]}
    assert stats.resolved(dense, 5.5, "rollouts") is True
    assert stats.to_target(dense, 5.5, "rollouts") == pytest.approx(30.0)
    assert stats.resolved(curve, 0.5, "rollouts") is False  # reached at step 0
    assert stats.resolved(curve, 99.0, "rollouts") is None  # never reached
    assert stats.to_target_bracket(curve, 99.0, "rollouts") is None


def test_seed_interval_rejects_missing_values():
    with pytest.raises(ValueError, match="finite per-seed values"):
        stats.seed_interval([1.0, float("nan")])
    with pytest.raises(ValueError, match="finite per-seed values"):
        stats.seed_interval([])


def test_excludes_zero_at_its_edges():
    assert stats.Interval(0.5, 0.01, 1.0, 3, 0.1).excludes_zero()  # just above 0
    assert stats.Interval(-0.5, -1.0, -0.01, 3, 0.1).excludes_zero()  # just below
    assert not stats.Interval(0.5, 0.0, 1.0, 3, 0.1).excludes_zero()  # touches 0
    assert not stats.Interval(0.0, -0.1, 0.1, 3, 0.1).excludes_zero()
    assert not stats.Interval(1.0, float("nan"), float("nan")).excludes_zero()
    # a verdict at the smallest margin: lo = +0.01 is "better", lo = 0 is not
    assert stats.verdict(stats.Interval(0.5, 0.01, 1.0, 3, 0.1)) == "better"
    assert stats.verdict(stats.Interval(0.5, 0.0, 1.0, 3, 0.1)) == stats.NOT_DISTINGUISHABLE


def test_formats_name_sign_digits_and_missing_intervals():
    two = stats.seed_interval([1.0, 3.0])  # n = 2: an interval, no verdict
    half = 12.706205 * np.std([1.0, 3.0], ddof=1) / np.sqrt(2)
    assert two.fmt(1) == f"2.0 [{2 - half:.1f}, {2 + half:.1f}]"
    assert two.fmt(2, signed=True) == f"+2.00 [{2 - half:+.2f}, {2 + half:+.2f}]"
    assert stats.seed_interval([-1.5]).fmt(1, signed=True) == "-1.5 [—]"
    assert stats.seed_interval([1.5]).fmt(1) == "1.5 [—]"
    assert stats.seed_interval([1.5]).mdd() is None
    assert stats.seed_interval([1.5]).fmt_mdd() == "undefined (1 seed)"
    # two seeds: the MDD exists (df = 1)
    assert two.mdd() == pytest.approx((12.706205 + 1.376382) * np.sqrt(2) / np.sqrt(2),
                                      rel=1e-5)
    ratio = stats.log_ratio([2.0, 4.0, 8.0])
    assert ratio.fmt_mdd(2) == f"{math.exp(ratio.mdd()):.2f}x"
    assert ratio.fmt(1).startswith("4.0x [")


def test_seed_means_and_log_ratio_reject_bad_input():
    with pytest.raises(ValueError, match=r"\[seeds, prompts\], got shape \(3,\)"):
        stats.seed_means([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"\[seeds, prompts\]"):
        stats.seed_means(np.zeros((0, 4)))
    assert stats.seed_means([[1.0, 3.0], [5.0, 5.0]]).tolist() == [2.0, 5.0]
    with pytest.raises(ValueError, match="ratios > 0"):
        stats.log_ratio([-2.0, 1.0])


def test_two_seed_ratios_one_seed_sd_and_ratios_below_one():
    # a log interval from two seeds is printed with its bounds (only one seed has none)
    two = stats.log_ratio([2.0, 8.0])
    half = 12.706205 * np.std(np.log([2.0, 8.0]), ddof=1) / np.sqrt(2)
    assert two.fmt(1) == f"4.0x [{math.exp(math.log(4) - half):.1f}, " \
                         f"{math.exp(math.log(4) + half):.1f}]"
    # one seed: the sd is NaN (not missing), so arithmetic on it stays NaN
    assert math.isnan(stats.seed_interval([1.5]).sd)
    # ratios in (0, 1] are valid: a method slower than the reference
    slower = stats.log_ratio([0.5, 0.5, 0.5])
    assert slower.fmt(2) == "0.50x [0.50, 0.50]" and stats.verdict(slower) == "worse"
