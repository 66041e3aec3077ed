"""A comparison's accuracy analyses, each a function of its tidy table (table.py): a method's
per-seed, per-prompt cells on a bucket and eval point, and the intervals, paired differences,
equivalence verdicts and eval floors on them (stats.py). The report, the controls section and
the docs' tables all read accuracy through these and only format what they return. A cell is
a prompt's share of correct samples (Avg@k), or with `pass_k` its unbiased pass@pass_k from the
same k samples (evaluation/passk.py). A method is named as run or by its report row
(table.method_of)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from frontier_rl.evaluation import passk
from frontier_rl.experiment import stats, table


def controls(results: dict) -> dict[str, str]:
    """Control arm -> "positive" / "negative" (selection/oracle.py); empty without controls."""
    return dict(results.get("controls") or {})


def by_method(results: dict, groups: bool = True) -> dict[str, list[dict]]:
    """The runs of each report row (table.rows), for their run-level fields (budgets spent,
    shares of informative groups): row -> the runs of the method it shows."""
    runs: dict[str, list[dict]] = {}
    for r in results["runs"]:
        runs.setdefault(r["method"], []).append(r)
    return {row: runs.get(m, []) for row, m in table.rows(results, groups).items()}


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


def seeds_of(tab: pd.DataFrame, method: str) -> list[int]:
    """The seeds `method` ran, sorted."""
    return sorted(set(table.column(tab, method, "seed").tolist()))


def _cells(counts: np.ndarray, weights, k: int, pass_k: int) -> np.ndarray:
    c = counts.astype(float)
    if pass_k:
        c = passk.pass_at_k(k, counts, pass_k)
    return c if weights is None else c * weights


def matrix(tab: pd.DataFrame, method: str, seeds: list[int], point: int = -1,
           bucket: str = "all", pass_k: int = 0) -> np.ndarray | None:
    """[seeds, prompts] accuracy in points of `method`'s runs at eval `point` in `bucket`
    (with `pass_k`, each prompt's unbiased pass@pass_k from its correct samples of k), rows in
    `seeds` order; None if any is missing."""
    keep = table.where(tab, method, bucket, point)
    sel = [tab[c].to_numpy()[keep] for c in ("seed", "counts", "weights", "k")]
    by_seed = {s: (c, w, k) for s, c, w, k in zip(*sel, strict=True)}
    rows = [_cells(c, w, int(k), pass_k) if c is not None else None
            for c, w, k in (by_seed.get(s, (None, None, 0)) for s in seeds)]
    if not rows or any(x is None for x in rows) or len({x.shape for x in rows}) != 1:
        return None
    return 100.0 * np.stack(rows) / (1 if pass_k else int(sel[3][0]))


def accuracy(tab: pd.DataFrame, method: str, bucket: str = "all") -> stats.Interval | None:
    """Mean final accuracy of `method`'s runs with the t-interval over its seeds."""
    m = matrix(tab, method, seeds_of(tab, method), -1, bucket)
    return None if m is None else stats.interval(m)


def pass_at_k(tab: pd.DataFrame, method: str, pass_k: int, bucket: str = "all"
              ) -> stats.Interval | None:
    """Mean final unbiased pass@pass_k (points) of `method`'s runs, from each prompt's correct
    samples of the runs' k, with the t-interval over its seeds (pass_k <= k)."""
    m = matrix(tab, method, seeds_of(tab, method), -1, bucket, pass_k)
    return None if m is None else stats.interval(m)


def paired_matrices(tab: pd.DataFrame, a: str, b: str, bucket: str, point_a: int,
                    point_b: int, other: pd.DataFrame | None = None
                    ) -> tuple[np.ndarray, np.ndarray] | None:
    """[seeds, prompts] accuracy of methods a and b (at eval points point_a, point_b) on their
    common seeds, rows in seed order, and the same eval prompts; None if any is missing. b's
    runs are read from `other` where given (another comparison's table on the same seeds)."""
    tb = tab if other is None else other
    common = sorted(set(seeds_of(tab, a)) & set(seeds_of(tb, b)))
    ma, mb = matrix(tab, a, common, point_a, bucket), matrix(tb, b, common, point_b, bucket)
    if ma is None or mb is None or ma.shape != mb.shape:
        return None
    return ma, mb


def paired(tab: pd.DataFrame, a: str, b: str, bucket: str = "all", point_a: int = -1,
           point_b: int = -1, other: pd.DataFrame | None = None) -> stats.Interval | None:
    """Accuracy of method a minus method b (at eval points point_a, point_b; b from `other`'s
    table where given) on their common seeds and the same eval prompts: the t-interval over
    the per-seed differences."""
    m = paired_matrices(tab, a, b, bucket, point_a, point_b, other)
    return None if m is None else stats.paired(*m)


def equivalence(tab: pd.DataFrame, a: str, b: str, bucket: str, delta: float
                ) -> tuple[str, tuple[float, float]] | None:
    """Final accuracy of a minus b on their common seeds: the two one-sided tests' verdict at
    the margin ±delta points (stats.equivalence; "too few seeds for a verdict" below
    stats.MIN_SEEDS, as every verdict of the report) and the 90% interval it is read from
    (NaN bounds with one seed); None without per-prompt eval counts on common seeds."""
    m = paired_matrices(tab, a, b, bucket, -1, -1)
    if m is None:
        return None
    d = stats.seed_means(m[0]) - stats.seed_means(m[1])
    ci90 = stats.equivalence_interval(d) if d.size >= 2 else (float("nan"), float("nan"))
    return (stats.equivalence(d, delta) if d.size >= stats.MIN_SEEDS else stats.TOO_FEW), ci90


def eval_floor(tab: pd.DataFrame, a: str, b: str, bucket: str) -> float | None:
    """The sd of a's paired difference to b (points) that the eval set's sampling alone gives
    (stats.eval_floor_sd) on their common seeds; None without per-prompt counts or on
    `bench_mean` (a weighted mean, whose cells are not solve rates)."""
    m = None if bucket == "bench_mean" else paired_matrices(tab, a, b, bucket, -1, -1)
    if m is None:
        return None
    return stats.eval_floor_sd(*m, int(table.column(tab, a, "k")[0]))
