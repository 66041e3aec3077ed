"""A comparison's results read as per-seed, per-prompt accuracy: the runs of each report row,
each run's eval cells on a bucket and eval point, and the paired intervals on them (stats.py).
The report and the controls section both read the runs through these. A cell is a prompt's
share of correct samples (Avg@k), or with `pass_k` its unbiased pass@pass_k from the same k
samples (evaluation/passk.py)."""

from __future__ import annotations

import math

import numpy as np

from frontier_rl.evaluation import passk
from frontier_rl.experiment import stats


def controls(results: dict) -> dict[str, str]:
    """Control arm -> "positive" / "negative" (selection/oracle.py); empty without controls."""
    return dict(results.get("controls") or {})


def by_method(results: dict, groups: bool = True) -> dict[str, list[dict]]:
    """The runs of each report row, in compare.run's order. A best-of group (compare.best_of,
    two_run.py) is one row named by the group, holding its chosen arm's runs, where its first
    arm would be; each arm follows in a row of its own, named "<arm> (arm)". groups=False: one
    row per method as run (plots, which draw every run once)."""
    out: dict[str, list[dict]] = {m: [] for m in results["methods"]}
    for r in results["runs"]:
        out.setdefault(r["method"], []).append(r)
    best = results.get("best_of") or {}
    if not groups or not best:
        return out
    arm_of = {a: g for g, b in best.items() for a in b["arms"]}
    rows: dict[str, list[dict]] = {}
    for m, rs in out.items():
        g = arm_of.get(m)
        if g is None:
            rows[m] = rs
            continue
        if g not in rows:
            rows[g] = out.get(best[g]["chosen"], [])
        rows[f"{m} (arm)"] = rs
    return rows


def mean_sd(values) -> tuple[float, float, int]:
    """(mean, sample sd, count) of the values that are not None or NaN (sd 0 for one)."""
    v = [x for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))]
    if not v:
        return float("nan"), float("nan"), 0
    return float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else 0.0, len(v)


def fmt_ms(values, digits: int = 1) -> str:
    """`mean ± sd` over seeds (`mean` alone for one value, `—` for none)."""
    m, s, n = mean_sd(values)
    if n == 0:
        return "—"
    if n == 1:
        return f"{m:,.{digits}f}"
    return f"{m:,.{digits}f} ± {s:,.{digits}f}"


def primary(results: dict) -> str:
    """The pre-registered bucket compared (compare.metric)."""
    return results["metric"].rsplit("/", 1)[1]


# ----------------------------------------------------------------------------- accuracy


POOLED = ("bench_mean", "all")


def bucket_columns(names, pooled: tuple[str, ...] = ()) -> list[str]:
    """Per-bucket columns in sorted order, then the pooled ones asked for that are present
    (`bench_mean`, the unweighted mean over benchmarks, only exists with an eval suite)."""
    names = set(names)
    return sorted(names - set(POOLED)) + [p for p in pooled if p in names or p == "all"]


def prompt_cells(r: dict, point: int = -1, bucket: str = "all", pass_k: int = 0
                 ) -> np.ndarray | None:
    """Per-prompt correct samples (of r["k"]) of run r at eval `point`, in `bucket`; with
    `pass_k`, each prompt's unbiased pass@pass_k from them instead (a probability)."""
    counts = r["curve"].get("correct_counts") or []
    if not counts or counts[point] is None:
        return None
    c = np.asarray(counts[point], float)
    if pass_k:
        c = passk.pass_at_k(int(r["k"]), c.astype(np.int64), pass_k)
    if bucket == "bench_mean":
        # The unweighted mean over benchmarks: weight each prompt by N / (B * n_its_bucket), so
        # the cells' plain mean is the mean of the per-benchmark means.
        labels = np.asarray(r.get("eval_buckets") or [])
        if labels.shape != c.shape:
            return None
        names, inverse, sizes = np.unique(labels, return_inverse=True, return_counts=True)
        return c * (len(c) / (len(names) * sizes[inverse]))
    if bucket != "all":
        keep = np.asarray([b == bucket for b in (r.get("eval_buckets") or [])], bool)
        if keep.shape != c.shape or not keep.any():
            return None
        c = c[keep]
    return c


def matrix(rs: list[dict], seeds: list[int], point: int = -1, bucket: str = "all",
           pass_k: int = 0) -> np.ndarray | None:
    """[seeds, prompts] accuracy in points (with `pass_k`, unbiased pass@pass_k), rows in
    `seeds` order; None if any is missing."""
    by_seed = {r["seed"]: r for r in rs}
    rows = [prompt_cells(by_seed[s], point, bucket, pass_k) if s in by_seed else None
            for s in seeds]
    if not rows or any(x is None for x in rows) or len({x.shape for x in rows}) != 1:
        return None
    return 100.0 * np.stack(rows) / (1 if pass_k else int(rs[0]["k"]))


def accuracy(rs: list[dict], bucket: str = "all") -> stats.Interval | None:
    """Mean final accuracy of a method's runs with the t-interval over its seeds."""
    m = matrix(rs, sorted(r["seed"] for r in rs), -1, bucket)
    return None if m is None else stats.interval(m)


def pass_at_k(rs: list[dict], pass_k: int, bucket: str = "all") -> stats.Interval | None:
    """Mean final unbiased pass@pass_k (points) of a method's runs, from each prompt's correct
    samples of the runs' k, with the t-interval over its seeds (pass_k <= k)."""
    m = matrix(rs, sorted(r["seed"] for r in rs), -1, bucket, pass_k)
    return None if m is None else stats.interval(m)


def paired_matrices(a: list[dict], b: list[dict], bucket: str, point_a: int, point_b: int
                     ) -> tuple[np.ndarray, np.ndarray] | None:
    """[seeds, prompts] accuracy of a and b (at eval points point_a, point_b) on their common
    seeds, rows in seed order, and the same eval prompts; None if any is missing."""
    seeds = sorted({r["seed"] for r in a} & {r["seed"] for r in b})
    ma, mb = matrix(a, seeds, point_a, bucket), matrix(b, seeds, point_b, bucket)
    if ma is None or mb is None or ma.shape != mb.shape:
        return None
    return ma, mb


def paired(a: list[dict], b: list[dict], bucket: str = "all", point_a: int = -1,
           point_b: int = -1) -> stats.Interval | None:
    """Accuracy of a minus b (at eval points point_a, point_b) on their common seeds and the
    same eval prompts: the t-interval over the per-seed differences."""
    m = paired_matrices(a, b, bucket, point_a, point_b)
    return None if m is None else stats.paired(*m)


def equivalence(a: list[dict], b: list[dict], bucket: str, delta: float
                ) -> tuple[str, tuple[float, float]] | None:
    """Final accuracy of a minus b on their common seeds: the two one-sided tests' verdict at
    the margin ±delta points (stats.equivalence; "too few seeds for a verdict" below
    stats.MIN_SEEDS, as every verdict of the report) and the 90% interval it is read from
    (NaN bounds with one seed); None without per-prompt eval counts on common seeds."""
    m = paired_matrices(a, b, bucket, -1, -1)
    if m is None:
        return None
    d = stats.seed_means(m[0]) - stats.seed_means(m[1])
    ci90 = stats.equivalence_interval(d) if d.size >= 2 else (float("nan"), float("nan"))
    return (stats.equivalence(d, delta) if d.size >= stats.MIN_SEEDS else stats.TOO_FEW), ci90


def eval_floor(a: list[dict], b: list[dict], bucket: str) -> float | None:
    """The sd of a's paired difference to b (points) that the eval set's sampling alone gives
    (stats.eval_floor_sd) on their common seeds; None without per-prompt counts or on
    `bench_mean` (a weighted mean, whose cells are not solve rates)."""
    m = None if bucket == "bench_mean" else paired_matrices(a, b, bucket, -1, -1)
    return None if m is None else stats.eval_floor_sd(*m, int(a[0]["k"]))
