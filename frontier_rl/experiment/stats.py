"""Uncertainty for the comparison: t-intervals over seeds on per-seed paired differences.

The unit of replication is the seed. A run's seed drives its rollouts, its selector, its update
RNG and (unless `compare.shared_start`) its warm start, and the k samples drawn for each eval
prompt are independent per run; so one number per seed, the mean over the eval prompts, carries
both the run-to-run spread and the eval set's sampling noise. Two methods are compared *paired*
on the same seeds and eval prompts: for seed s,

    d_s = mean over eval prompts of method A  -  mean over eval prompts of method B,

and the 95% interval of the mean difference is the Student-t interval on the S values d_s,

    mean(d) +- t_{0.975, S-1} * sd(d) / sqrt(S)      (sd with S - 1 degrees of freedom),

which has its nominal coverage at any S >= 2 when the d_s are roughly normal (a mean over
hundreds of prompts is). A bootstrap over 2-3 seeds has far too few distinct resamples to
estimate the run-to-run spread and is not used.

A difference is "better" or "worse" when its interval excludes 0 and there are at least
MIN_SEEDS seeds; with fewer the verdict is "too few seeds for a verdict" (the interval is still
given from 2 seeds on, and is absent with 1). Every comparison also states its minimum
detectable difference: the true paired difference that a two-sided 5% test on S seeds finds
with 80% power, given the measured sd of the d_s,

    MDD = (t_{0.975, S-1} + t_{0.80, S-1}) * sd(d) / sqrt(S),

undefined with one seed (no sd). A "not distinguishable" next to an MDD of 10 points says the
experiment could not have seen a 5-point effect, not that there is none.

"Not distinguishable" is not "equivalent". A claim of equal accuracy (HIVE: DS's accuracy with
fewer rollouts) is tested by two one-sided tests (TOST) at a margin delta fixed in the config
before the run (`compare.equivalence_margin`): the difference is "equivalent within +-delta" when
both H0: mean <= -delta and H0: mean >= +delta are rejected at 5% each, which is the same as the
(1 - 2 * 0.05) = 90% t-interval lying inside (-delta, delta) (`equivalence`). At a true
difference of exactly delta the test says "equivalent" in at most 5% of experiments, at any
number of seeds >= 2.

Ratios (rollouts-to-target of one method over another's) are compared on the log scale: the
t-interval of the per-seed log ratios, reported as the geometric mean ratio with the interval's
bounds exponentiated. Rollouts-to-target itself is read off an accuracy curve by linear
interpolation between evaluation points (`to_target`). It is only defined for a run that
reaches the target: a ratio with any arm short of the target in any seed gets no verdict, and
says which arm in which seed (`ratio_verdict`).

Power is never computed at the observed effect (that is a restatement of the p-value): only at
effect sizes fixed before the run with their source (`power_plan`), and at two sds, the one
measured and its one-sided SD_UPPER upper confidence bound (`sd_upper`), since an sd from 3-5
seeds may be half the true one. `Interval.mdd_hi` is the MDD at that bound.

A declared confirmatory family is corrected by Holm's step-down procedure (`holm`) on two-sided
paired-t p-values (`p_value`; `tost_p` for an equivalence claim); every other verdict is
exploratory. A method's effect as a share of the headroom is a ratio of two paired means, whose
interval is Fieller's (`fieller`). `eval_floor_sd` is the part of a paired sd that the eval
set's binomial sampling alone would give.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

LEVEL = 0.95  # two-sided confidence of every interval; a verdict is a test at 1 - LEVEL
POWER = 0.80  # power at which the minimum detectable difference is stated
MIN_SEEDS = 3  # fewer seeds give an interval but no verdict
TOO_FEW = "too few seeds for a verdict"
NOT_DISTINGUISHABLE = "not distinguishable at this budget"
EQUIVALENCE_ALPHA = 1 - LEVEL  # each one-sided test of `equivalence` is at 5%
EQUIVALENT = "equivalent within"  # + " ±<delta>"
NOT_EQUIVALENT = "not shown equivalent"
NO_VERDICT = "no verdict: "  # + which arm did not reach the target in which seed
NO_RATIO = "no seed with a ratio"
# one-sided confidence of the sd's upper bound that power is also planned at: an 80% upper
# bound is the usual choice for a pilot's sd (Browne 1995, Stat. Med. 14:1933), large enough to
# matter at 3 seeds (x2.1) without planning for the worst case (x4.4 at 95%)
SD_UPPER = 0.80


@functools.cache
def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t with df degrees of freedom (scipy comes with jax)."""
    from scipy.special import stdtrit

    if df < 1:
        raise ValueError(f"t quantile needs df >= 1, got {df}")
    return float(stdtrit(df, p))


@dataclasses.dataclass(frozen=True)
class Interval:
    """A mean over n seeds with its LEVEL t-interval (lo, hi are NaN with one seed) and the
    sample sd of the per-seed values. `log`: the numbers are logs of ratios (printed as
    ratios)."""

    mean: float
    lo: float
    hi: float
    n: int = 1
    sd: float = float("nan")
    log: bool = False
    # the per-seed values it summarises (for the distribution-free check, `signed_rank_p`)
    values: tuple[float, ...] = dataclasses.field(default=(), compare=False, repr=False)

    def excludes_zero(self) -> bool:
        return self.lo > 0 or self.hi < 0  # False for NaN bounds

    def mdd(self) -> float | None:
        """Minimum detectable difference at POWER, two-sided test at 1 - LEVEL (None with one
        seed); for a log-ratio interval, on the log scale."""
        if self.n < 2:
            return None
        df = self.n - 1
        return (t_quantile(1 - (1 - LEVEL) / 2, df) + t_quantile(POWER, df)) * self.sd / \
            math.sqrt(self.n)

    def mdd_hi(self) -> float | None:
        """The MDD at the sd's one-sided SD_UPPER upper confidence bound (`sd_upper`): the
        difference these seeds detect with POWER unless the true sd is above that bound."""
        d = self.mdd()
        return None if d is None else d * sd_upper(1.0, self.n)

    def fmt(self, digits: int = 1, signed: bool = False) -> str:
        """`mean [lo, hi]`; `mean [—]` without an interval; ratios as `1.52x [1.10, 2.10]`."""
        if self.log:
            m, lo, hi = (math.exp(x) if math.isfinite(x) else x
                         for x in (self.mean, self.lo, self.hi))
            body = f"{m:.{digits}f}x"
            return body + (f" [{lo:.{digits}f}, {hi:.{digits}f}]" if self.n > 1 else " [—]")
        sign = "+" if signed else ""
        body = f"{self.mean:{sign}.{digits}f}"
        if self.n < 2:
            return body + " [—]"
        return body + f" [{self.lo:{sign}.{digits}f}, {self.hi:{sign}.{digits}f}]"

    def fmt_mdd(self, digits: int = 1) -> str:
        """The MDD as text: points, a ratio factor for log intervals, or why there is none."""
        d = self.mdd()
        if d is None:
            return "undefined (1 seed)"
        return f"{math.exp(d):.{digits}f}x" if self.log else f"{d:.{digits}f}"

    def fmt_mdd_both(self, digits: int = 1) -> str:
        """`MDD at the sd / MDD at its SD_UPPER upper bound`, or why there is none."""
        if self.n < 2:
            return self.fmt_mdd(digits)
        hi = self.mdd_hi()
        hi_txt = f"{math.exp(hi):.{digits}f}x" if self.log else f"{hi:.{digits}f}"
        return f"{self.fmt_mdd(digits)} / {hi_txt}"


MAX_SEEDS = 1000  # seeds_for_power gives up beyond this


def seeds_for_power(effect: float, sd: float, power: float = POWER) -> int | None:
    """The fewest seeds S >= 2 whose paired design detects a true difference `effect` with
    `power` at two-sided 1 - LEVEL, at per-seed sd `sd` of the differences: the smallest S with
    (t_{1-(1-LEVEL)/2, S-1} + t_{power, S-1}) * sd / sqrt(S) <= |effect| (the MDD formula
    solved for S). None when no S up to MAX_SEEDS does (or effect is 0 / not finite)."""
    effect, sd = abs(float(effect)), float(sd)
    if not (math.isfinite(effect) and math.isfinite(sd)) or sd < 0:
        raise ValueError(f"seeds_for_power needs a finite effect and sd >= 0, got {effect}, {sd}")
    if effect == 0:
        return None
    if sd == 0:
        return 2
    for n in range(2, MAX_SEEDS + 1):
        q = t_quantile(1 - (1 - LEVEL) / 2, n - 1) + t_quantile(power, n - 1)
        if q * sd / math.sqrt(n) <= effect:
            return n
    return None


def seed_interval(values, *, log: bool = False) -> Interval:
    """Mean of per-seed values with its t-interval (S - 1 degrees of freedom)."""
    v = np.asarray(values, float)
    if v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError(f"seed_interval needs a non-empty 1-d array of finite per-seed values, "
                         f"got {v!r}")
    n, mean = v.size, float(v.mean())
    if n < 2:
        return Interval(mean, float("nan"), float("nan"), 1, float("nan"), log, tuple(v))
    sd = float(v.std(ddof=1))
    half = t_quantile(1 - (1 - LEVEL) / 2, n - 1) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n, sd, log, tuple(v))


def seed_means(cells) -> np.ndarray:
    """Per-seed means over the eval prompts of cells [seeds, prompts]."""
    cells = np.asarray(cells, float)
    if cells.ndim != 2 or cells.size == 0:
        raise ValueError(f"cells must be [seeds, prompts], got shape {cells.shape}")
    return cells.mean(axis=1)


def interval(cells) -> Interval:
    """Mean accuracy of cells [seeds, prompts] with the t-interval over its per-seed means."""
    return seed_interval(seed_means(cells))


def paired(a, b) -> Interval:
    """mean(a) - mean(b) with the t-interval over the per-seed differences d_s; a and b are
    [seeds, prompts] on the same seeds (rows) and eval prompts (columns)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape:
        raise ValueError(f"paired comparison needs the same seeds and prompts: {a.shape} vs "
                         f"{b.shape}")
    return seed_interval(seed_means(a) - seed_means(b))


def log_ratio(ratios) -> Interval:
    """Geometric-mean ratio of per-seed positive ratios: the t-interval of their logs."""
    r = np.asarray(ratios, float)
    if r.size and np.any(r <= 0):
        raise ValueError(f"log_ratio needs ratios > 0, got {r!r}")
    return seed_interval(np.log(r), log=True)


def verdict(diff: Interval) -> str:
    """'better' / 'worse' (the interval excludes 0, at least MIN_SEEDS seeds), else 'not
    distinguishable at this budget', or 'too few seeds for a verdict'."""
    if diff.n < MIN_SEEDS:
        return TOO_FEW
    if diff.lo > 0:
        return "better"
    if diff.hi < 0:
        return "worse"
    return NOT_DISTINGUISHABLE


def equivalence_interval(diffs) -> tuple[float, float]:
    """The (1 - 2 * EQUIVALENCE_ALPHA) = 90% t-interval of the mean of per-seed differences:
    the one whose inclusion in (-delta, delta) is the two one-sided tests' rejection of both
    H0: mean <= -delta and H0: mean >= delta at EQUIVALENCE_ALPHA each."""
    d = np.asarray(diffs, float)
    if d.ndim != 1 or d.size < 2 or not np.all(np.isfinite(d)):
        raise ValueError(f"diffs must be finite per-seed differences from at least 2 seeds (an "
                         f"equivalence test needs their spread), got {d!r}")
    n, mean = d.size, float(d.mean())
    half = t_quantile(1 - EQUIVALENCE_ALPHA, n - 1) * float(d.std(ddof=1)) / math.sqrt(n)
    return mean - half, mean + half


def equivalence(diffs, delta: float) -> str:
    """The verdict on per-seed differences d_s (method minus comparator, in the units of
    `delta`) against the margin delta > 0 fixed before the run:

    - "equivalent within ±delta": the 90% interval (`equivalence_interval`) lies inside
      (-delta, delta), i.e. both one-sided tests reject at 5%;
    - else "better" / "worse": the usual LEVEL interval excludes 0 on that side;
    - else "not shown equivalent".

    Equivalence takes precedence: a difference shown both non-zero and inside the margin is
    "equivalent", because the margin was fixed to say which differences do not matter, and the
    claim tested (equal accuracy) holds. "better" / "worse" thus means a difference that is
    real and not shown to be within the margin. The MIN_SEEDS rule of `verdict` is the
    caller's: the test itself holds its 5% error rate from 2 seeds on."""
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not (
            math.isfinite(delta) and delta > 0):
        raise ValueError(f"delta must be a finite equivalence margin > 0, got {delta!r}")
    lo, hi = equivalence_interval(diffs)
    if -delta < lo and hi < delta:
        return f"{EQUIVALENT} ±{delta:g}"
    iv = seed_interval(diffs)
    if iv.lo > 0:
        return "better"
    if iv.hi < 0:
        return "worse"
    return NOT_EQUIVALENT


def ratio_verdict(ratio: Interval | None, x_to_target: dict) -> str:
    """The verdict on a ratio of rollouts- or PFLOPs-to-target (`verdict` of its log
    interval; NO_RATIO when no seed gave one), given every seed's X-to-target per arm
    ({seed: {arm: X, or None when the arm did not reach the target}}): "no verdict: <arm> did
    not reach the target in seed <s>" for each such arm and seed, in seed order, when any arm
    fell short in any seed. A run that
    never reaches the target has no X-to-target, only a lower bound (its final X), so that
    seed's ratio is a bound whose size depends on where the run was stopped, not on the
    method: it can be shown as a bound but not tested."""
    missing = [(arm, seed) for seed in sorted(x_to_target)
               for arm, x in x_to_target[seed].items() if x is None]
    if missing:
        return NO_VERDICT + "; ".join(f"{arm} did not reach the target in seed {seed}"
                                      for arm, seed in missing)
    return NO_RATIO if ratio is None else verdict(ratio)


def to_target(curve: dict, target: float, x: str) -> float | None:
    """The x (rollouts or pflops) at which the accuracy curve first reaches `target`, linearly
    interpolated between the two evaluation points around the first crossing; None if no point
    reaches it. A curve already at the target at its first point gives that point's x."""
    xs, ms = curve[x], curve["metric"]
    if len(xs) != len(ms):
        raise ValueError(f"curve has {len(xs)} {x} values and {len(ms)} metric values")
    for i, (xv, m) in enumerate(zip(xs, ms, strict=True)):
        if m >= target - 1e-9:
            if i == 0:
                return float(xv)
            x0, m0 = xs[i - 1], ms[i - 1]  # m0 < target <= m (up to rounding)
            return float(x0 + min(1.0, (target - m0) / (m - m0)) * (xv - x0))
    return None


# An X-to-target is resolved when the two evaluations around its crossing are at most this
# share of its value apart (the interpolation between them can then move it by no more than
# that); set with the rule, before any comparison read it.
RESOLUTION = 0.25


def to_target_bracket(curve: dict, target: float, x: str) -> tuple[float, float] | None:
    """(x before, x at) the evaluation where the curve first reaches `target`: the interval
    `to_target` interpolates in ((x0, x0) when the first point reaches it); None if none does."""
    xs, ms = curve[x], curve["metric"]
    for i, m in enumerate(ms):
        if m >= target - 1e-9:
            return (float(xs[i - 1]) if i else float(xs[0])), float(xs[i])
    return None


def resolved(curve: dict, target: float, x: str) -> bool | None:
    """Whether the curve's X-to-target is resolved by its evaluations (RESOLUTION); a target
    reached at the first evaluation (step 0) is not; None when it is never reached."""
    b, v = to_target_bracket(curve, target, x), to_target(curve, target, x)
    if b is None or v is None:
        return None
    return b[1] > b[0] and v > 0 and (b[1] - b[0]) <= RESOLUTION * v


# ----------------------------------------------------------------------------- power


def sd_upper(sd: float, n: int, conf: float = SD_UPPER) -> float:
    """The one-sided `conf` upper confidence bound of a normal sd estimated from n values
    (n - 1 degrees of freedom): sd * sqrt((n - 1) / chi2_{1-conf, n-1}), chi2_q the q-quantile
    of the chi-square distribution. NaN below 2 values."""
    from scipy.special import chdtri  # chdtri(df, y): the x with P(chi2_df > x) = y

    if n < 2 or not math.isfinite(sd):
        return float("nan")
    return float(sd) * math.sqrt((n - 1) / float(chdtri(n - 1, conf)))


def power_plan(sd: float, n: int, effects: dict) -> dict[str, dict]:
    """For each pre-registered effect size ({name: {"points", "source"}}), the seeds a paired
    design needs for POWER at two-sided 1 - LEVEL (`seeds_for_power`), at the sd measured from n
    seeds and at its SD_UPPER upper bound. Takes the spread only, never the observed mean:
    power at the effect one happened to observe is a restatement of its p-value."""
    hi = sd_upper(sd, n)
    out = {}
    for name, e in effects.items():
        points = float(e["points"])
        ok = n >= 2 and math.isfinite(sd)
        out[name] = {"points": points, "source": str(e["source"]), "sd": sd if ok else None,
                     "sd_hi": hi if ok else None, "n": n,
                     "seeds": seeds_for_power(points, sd) if ok else None,
                     "seeds_at_sd_hi": seeds_for_power(points, hi) if ok else None}
    return out


def tost_power(n: int, sd: float, delta: float, alpha: float = EQUIVALENCE_ALPHA) -> float:
    """The exact power of the two one-sided tests (`equivalence`) on n per-seed differences
    with true mean 0 and sd `sd`, at margin delta: P(|mean| + t_{1-alpha, n-1} s / sqrt(n) <
    delta), integrated over the sample sd s (s^2 ~ sd^2 chi2_{n-1} / (n-1)) with the mean
    N(0, sd^2 / n) independent of it."""
    from scipy import integrate
    from scipy.stats import chi2, norm

    if n < 2:
        return 0.0
    if sd == 0:
        return 1.0
    df, se, t = n - 1, sd / math.sqrt(n), t_quantile(1 - alpha, n - 1)

    def given(u):  # u = the chi2 draw's quantile, so the integral is over (0, u_max)
        s = sd * math.sqrt(chi2.ppf(u, df) / df)
        return 2 * norm.cdf((delta - t * s / math.sqrt(n)) / se) - 1

    u_max = chi2.cdf(df * (delta * math.sqrt(n) / (t * sd)) ** 2, df)  # beyond it no room
    return float(integrate.quad(given, 0, u_max, limit=200)[0]) if u_max > 0 else 0.0


def tost_seeds(sd: float, delta: float, power: float = POWER) -> int | None:
    """The fewest seeds S >= 2 at which the two one-sided tests at margin delta show
    equivalence with `power` when the true difference is 0 and the per-seed sd is `sd`
    (`tost_power`); None beyond MAX_SEEDS."""
    if not (math.isfinite(sd) and sd >= 0 and delta > 0):
        raise ValueError(f"tost_seeds needs a finite sd >= 0 and delta > 0, got {sd}, {delta}")
    lo, hi = 2, MAX_SEEDS
    if tost_power(hi, sd, delta) < power:
        return None
    while lo < hi:  # the power rises with S
        mid = (lo + hi) // 2
        if tost_power(mid, sd, delta) >= power:
            hi = mid
        else:
            lo = mid + 1
    return lo


# ----------------------------------------------------------------------------- tests


def p_value(iv: Interval) -> float | None:
    """The two-sided paired-t p-value of H0: mean = 0 for a seed interval (its per-seed mean,
    sd and n; on the log scale for a ratio); None below 2 seeds. With sd 0 it is 0 for a
    non-zero mean and 1 for a zero one."""
    from scipy.special import stdtr

    if iv.n < 2 or not math.isfinite(iv.sd):
        return None
    if iv.sd == 0:
        return 1.0 if iv.mean == 0 else 0.0
    t = abs(iv.mean) / (iv.sd / math.sqrt(iv.n))
    return float(2 * stdtr(iv.n - 1, -t))


RANK_MIN_SEEDS = 6  # below 6 pairs the signed-rank test's smallest p is above 0.05


def signed_rank_p(iv: Interval) -> float | None:
    """The distribution-free check beside the paired t: Wilcoxon's signed-rank test of H0
    "the per-seed differences are symmetric about 0" (scipy.stats.wilcoxon, two-sided; exact
    without ties, zeros dropped as Wilcoxon did); None below RANK_MIN_SEEDS seeds, or when
    every difference is 0. It assumes no normality, so a verdict that rests on one seed far out
    shows here as a larger p than the t-test's."""
    from scipy.stats import wilcoxon

    v = np.asarray(iv.values, float)
    if v.size < RANK_MIN_SEEDS or not np.any(v != 0):
        return None
    return float(wilcoxon(v, alternative="two-sided").pvalue)


def tost_p(iv: Interval, delta: float) -> float | None:
    """The p-value of the two one-sided tests at margin delta (the larger of the two one-sided
    p-values; < EQUIVALENCE_ALPHA exactly when `equivalence` says "equivalent"); None below 2
    seeds."""
    from scipy.special import stdtr

    if iv.n < 2 or not math.isfinite(iv.sd):
        return None
    if iv.sd == 0:
        return 0.0 if abs(iv.mean) < delta else 1.0
    se = iv.sd / math.sqrt(iv.n)
    return float(max(stdtr(iv.n - 1, -(iv.mean + delta) / se),
                     stdtr(iv.n - 1, (iv.mean - delta) / se)))


def holm(pvalues) -> list[float]:
    """Holm's step-down adjusted p-values of a family, in the input's order: sorted ascending,
    the i-th (from 0) becomes max over j <= i of min(1, (m - j) p_(j)). Rejecting where the
    adjusted p is below alpha controls the family-wise error rate at alpha."""
    p = np.asarray(pvalues, float)
    if p.ndim != 1 or np.any(~np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError(f"holm needs p-values in [0, 1], got {pvalues!r}")
    m = p.size
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj
    return out.tolist()


@dataclasses.dataclass(frozen=True)
class Ratio:
    """mean(num) / mean(den) of paired per-seed values with its Fieller interval; `bounded`
    False when the denominator's LEVEL t-interval includes 0 (the set is then unbounded)."""

    estimate: float
    lo: float
    hi: float
    n: int
    bounded: bool


def fieller(num, den, level: float = LEVEL) -> Ratio:
    """Fieller's interval for rho = E[num] / E[den] from paired per-seed values: the set of
    rho at which the paired t-test of num_s - rho den_s (n - 1 df) does not reject at
    1 - level, i.e. the roots of (x - rho y)^2 = t^2 (v11 - 2 rho v12 + rho^2 v22), x, y the
    means and v the (co)variances of the means. Bounded only when y is itself significant at
    that level (g = t^2 v22 / y^2 < 1); NaN bounds with fewer than 2 seeds."""
    a, b = np.asarray(num, float), np.asarray(den, float)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"fieller needs paired 1-d per-seed values, got {a.shape}, {b.shape}")
    n, x, y = a.size, float(a.mean()), float(b.mean())
    est = x / y if y != 0 else float("nan")
    if n < 2:
        return Ratio(est, float("nan"), float("nan"), n, False)
    cov = np.cov(a, b, ddof=1) / n
    v11, v12, v22 = float(cov[0, 0]), float(cov[0, 1]), float(cov[1, 1])
    t2 = t_quantile(1 - (1 - level) / 2, n - 1) ** 2
    lead = y * y - t2 * v22
    if lead <= 0:
        return Ratio(est, float("-inf"), float("inf"), n, False)
    mid = x * y - t2 * v12
    root = math.sqrt(max(0.0, mid * mid - lead * (x * x - t2 * v11)))
    return Ratio(est, (mid - root) / lead, (mid + root) / lead, n, True)


def eval_floor_sd(a, b, k: int) -> float | None:
    """The sd of a per-seed paired difference that the eval set's sampling alone gives: a and b
    are [seeds, prompts] accuracies in points of k samples per prompt; per seed and arm,
    var(mean) = sum_i p_i (1 - p_i) / (k - 1) / n^2 (p_i = the prompt's solve rate; p(1-p)/(k-1)
    is the unbiased estimate of the binomial variance p(1-p)/k of one prompt's rate), summed
    over the two independently sampled arms and averaged over seeds; in points. None with
    k < 2."""
    a, b = np.asarray(a, float) / 100, np.asarray(b, float) / 100
    if a.shape != b.shape or a.ndim != 2 or a.size == 0:
        raise ValueError(f"eval_floor_sd needs [seeds, prompts] pairs, got {a.shape}, {b.shape}")
    if k < 2:
        return None
    n = a.shape[1]
    var = ((a * (1 - a)).sum(axis=1) + (b * (1 - b)).sum(axis=1)) / (k - 1) / n ** 2
    return 100 * math.sqrt(float(var.mean()))
