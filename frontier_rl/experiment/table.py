"""A comparison's results as one tidy table: a row per run x evaluation point x bucket.

`read(results)` turns `results.json`'s nested runs into a `pandas.DataFrame`, once per
results (`of` keeps the last few). The analyses select from it: every accuracy analysis
(evalcells.py: intervals, paired differences, equivalence, the eval floor; through them the
controls, shares and Holm family of controls_report.py and the report's and docs' tables), the
curves read at a matched spend or paired per seed (`series`), and the spend-to-target ratios
(`finals`). The report and the docs renderers format what those return.

Columns:
  run        the run's index in results["runs"]
  method     the method as run (a best-of group's row is its chosen arm: `rows`)
  seed, k    the run's seed and samples per eval prompt
  target, rollouts_to_target, tokens_to_target, pflops_to_target
             the run's target accuracy (compare.target) and its spend to reach it (NaN: no
             target, or not reached; `finals` reads them back as None)
  point      the eval point, 0 first; `from_end` the same counted from the end (-1 last)
  step, rollouts, tokens, pflops, pflops_formula, updates
             the run's spend at that point (its curve; None where the run did not log it)
  metric     the pre-registered metric at that point (compare.metric), on every bucket's row
  bucket     an eval bucket's name, "all", or "bench_mean" (the unweighted mean over
             benchmarks, where the eval prompts carry bucket labels); every point has "all"
  accuracy   Avg@k in points as the run logged it (NaN where not logged)
  counts     per-prompt correct samples (of k) in the bucket, an int array; None where the
             run kept no per-prompt counts at that point
  weights    None, or on "bench_mean" each prompt's weight N / (B * n_its_bucket), so the
             weighted cells' plain mean is the mean of the per-benchmark means
"""

from __future__ import annotations

import operator
import weakref

import numpy as np
import pandas as pd

TO_TARGET = ("target", "rollouts_to_target", "tokens_to_target", "pflops_to_target")
COLUMNS = ("run", "method", "seed", "k", *TO_TARGET, "point", "from_end", "step", "rollouts",
           "tokens", "pflops", "pflops_formula", "updates", "metric", "bucket", "accuracy",
           "counts", "weights")
_POINT = ("step", "rollouts", "tokens", "pflops", "pflops_formula", "updates", "metric")


def _bucket_cells(counts, labels: np.ndarray) -> dict[str, tuple]:
    """bucket -> (counts, weights) of one eval point's per-prompt counts."""
    if counts is None:
        return {}
    c = np.asarray(counts, np.int64)
    out = {"all": (c, None)}
    if labels.shape != c.shape:
        return out
    names, inverse, sizes = np.unique(labels, return_inverse=True, return_counts=True)
    out["bench_mean"] = (c, len(c) / (len(names) * sizes[inverse]))
    for i, name in enumerate(names):
        out.setdefault(str(name), (c[inverse == i], None))  # a label "all" keeps the pool
    return out


def _at(values, p: int):
    """values[p], or None past the end of a list shorter than the run's eval points."""
    return values[p] if values is not None and p < len(values) else None


def _rows_of(i: int, r: dict):
    curve = r["curve"]
    n = max(len(curve.get("step") or ()), len(curve.get("correct_counts") or ()))
    counts = curve.get("correct_counts") or [None] * n
    logged = curve.get("buckets") or {}
    labels = np.asarray(r.get("eval_buckets") or [])
    run_level = tuple(r.get(c) for c in TO_TARGET)
    for p in range(n):
        cells = _bucket_cells(_at(counts, p), labels)
        spend = tuple(_at(curve.get(c), p) for c in _POINT)
        for b in dict.fromkeys(["all", *logged, *cells]):
            acc = _at(logged.get(b), p)
            acc = float("nan") if acc is None else float(acc)
            c, w = cells.get(b, (None, None))
            yield (i, r["method"], r["seed"], int(r["k"]), *run_level, p, p - n, *spend, b, acc,
                   c, w)


# Each table's report rows -> the methods they show (`rows`), kept beside the table while it
# lives: in its `attrs` pandas would deep-copy them into every selection.
_ROWS: dict[int, dict[str, str]] = {}


def _named(tab: pd.DataFrame, names: dict[str, str]) -> pd.DataFrame:
    _ROWS[id(tab)] = names
    weakref.finalize(tab, _ROWS.pop, id(tab), None)
    return tab


def read(results: dict, groups: bool = True) -> pd.DataFrame:
    """The tidy table of a comparison's results (columns above), runs in results' order; its
    names resolve as `rows(results, groups)` says (`method_of`): with groups=False every name
    is a method as run, even one a best-of group shares."""
    records = [row for i, r in enumerate(results["runs"]) for row in _rows_of(i, r)]
    tab = pd.DataFrame.from_records(records, columns=list(COLUMNS))
    # numpy object strings: the selections compare them on every call, without arrow's copies
    return _named(tab.astype({"method": object, "bucket": object}), rows(results, groups))


_CACHE: list[tuple[dict, list, dict[bool, pd.DataFrame]]] = []


def _fingerprint(results: dict) -> list:
    """What `of` checks before reusing a table, by identity: the runs, their fields, their
    curves and every list in them, and best_of. The objects themselves are kept, so no id is
    reused while the table is cached. A value changed inside a list that stays the same
    object is not seen: read() again after such an edit."""
    objs: list = [results.get("best_of")]
    for r in results["runs"]:
        curve = r["curve"]
        objs += [r, *r.values(), curve, *curve.values(), *(curve.get("buckets") or {}).values(),
                 *(curve.get("correct_counts") or ())]
    return objs


def of(results: dict, groups: bool = True) -> pd.DataFrame:
    """read(results, groups), built once per results object while its runs stay the same
    objects (the last four results are kept): a report's sections all analyse one table. With
    groups=False, the same table under method names (a shallow copy)."""
    key = _fingerprint(results)
    tabs = next((t for res, k, t in _CACHE if res is results and len(k) == len(key)
                 and all(map(operator.is_, k, key))), None)
    if tabs is None:
        tabs = {}
        _CACHE.insert(0, (results, key, tabs))
        del _CACHE[4:]
    if groups not in tabs:
        tabs[groups] = (_named(tabs[True].copy(deep=False), rows(results, groups))
                        if True in tabs else read(results, groups))
    return tabs[groups]


def rows(results: dict, groups: bool = True) -> dict[str, str]:
    """Report row -> the method whose runs it shows, in compare.run's order. A best-of group
    (compare.best_of, two_run.py) is one row named by the group showing its chosen arm, where
    its first arm would be; each arm follows in a row of its own, "<arm> (arm)". groups=False:
    one row per method as run."""
    out = {m: m for m in results["methods"]}
    for r in results["runs"]:
        out.setdefault(r["method"], r["method"])
    best = results.get("best_of") or {}
    if not groups or not best:
        return out
    arm_of = {a: g for g, b in best.items() for a in b["arms"]}
    named: dict[str, str] = {}
    for m in out:
        g = arm_of.get(m)
        if g is None:
            named[m] = m
            continue
        named.setdefault(g, best[g]["chosen"])
        named[f"{m} (arm)"] = m
    return named


def method_of(tab: pd.DataFrame, name: str) -> str:
    """The method whose runs a report row shows (a method's own name names itself)."""
    return _ROWS.get(id(tab), {}).get(name, name)


def where(tab: pd.DataFrame, name: str, bucket: str | None = None, point: int | None = None
           ) -> np.ndarray:
    """The boolean mask of a report row's (or method's) rows, in `bucket` and at eval `point`
    (negative: counted from the end) where given: numpy comparisons, no frame copied. Report
    rows resolve on the table `read` returned; a copy or selection of it knows methods only."""
    keep = tab["method"].to_numpy() == method_of(tab, name)
    if bucket is not None:
        keep &= tab["bucket"].to_numpy() == bucket
    if point is not None:
        keep &= tab["from_end" if point < 0 else "point"].to_numpy() == point
    return keep


def column(tab: pd.DataFrame, name: str, col: str, bucket: str | None = None,
           point: int | None = None) -> np.ndarray:
    """One column's values on a report row's (or method's) rows, in `bucket` and at eval
    `point` where given, in run order, as a numpy array."""
    return tab[col].to_numpy()[where(tab, name, bucket, point)]


def series(tab: pd.DataFrame, name: str, x: str) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """Each run of a report row (or method), in run order: (seed, its spend `x` at every eval
    point, the pre-registered metric there); a run that did not log `x` is left out."""
    pts = tab.loc[where(tab, name, "all"), ["run", "seed", x, "metric"]]
    out = []
    for _, g in pts.groupby("run", sort=True):
        xs = g[x].to_numpy()
        if len(xs) and not pd.isna(xs).any():
            out.append((int(g["seed"].iloc[0]), xs.astype(float), g["metric"].to_numpy(float)))
    return out


def finals(tab: pd.DataFrame, name: str) -> list[dict]:
    """Each run of a report row (or method), in run order, at its last eval point: its seed,
    its spend there (step, rollouts, tokens, pflops, ...) and its target fields, missing values
    as None."""
    pts = tab.loc[where(tab, name, "all", -1), ["seed", *TO_TARGET, *_POINT]]
    return [{k: None if pd.isna(v) else v for k, v in row.items()}
            for row in pts.to_dict("records")]
