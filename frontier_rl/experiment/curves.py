"""Whole-curve endpoints: a run read by its whole accuracy curve, not its last evaluation.

One final evaluation is the noisiest point of a run, and a curriculum mostly changes how fast a
run gets somewhere rather than where it ends (ScaleRL, arXiv 2510.13786). Beside the
pre-registered final value the report gives, per run:

- ScaleRL's compute-performance curve fitted to (rollouts, accuracy),
      R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B),
  R0 the step-0 value (measured, not fitted), A the asymptote, B the efficiency (the slope in
  log-compute), C_mid the rollouts at half the gain; a fit that does not converge, or whose
  parameters leave their bounds, is "no fit" rather than a number;
- the area under the curve over the budget, as the mean accuracy (trapezoids over rollouts,
  divided by the span), which weighs early and late progress alike;
- the mean of the last `k` evaluations.

Each is compared between arms paired per seed like the final value (report.curve_table).
"""

from __future__ import annotations

import math

import numpy as np


def sigmoid(c, r0: float, a: float, b: float, c_mid: float):
    c = np.maximum(np.asarray(c, float), 1e-12)
    return r0 + (a - r0) / (1.0 + (c_mid / c) ** b)


def fit(rollouts, values) -> dict | None:
    """{"A", "B", "C_mid"} of ScaleRL's curve through the points (the first at 0 rollouts
    gives R0), or None when there are fewer than 4 points after step 0 or the fit fails."""
    from scipy.optimize import curve_fit

    x, y = np.asarray(rollouts, float), np.asarray(values, float)
    if x.size < 5 or not np.all(np.isfinite(y)) or x[0] != 0:
        return None
    r0, xs, ys = y[0], x[1:], y[1:]
    span = xs[-1]
    a0 = ys[-3:].mean() if ys[-3:].mean() != r0 else r0 + 1e-3
    try:
        (a, b, c_mid), _ = curve_fit(
            lambda c, a, b, m: sigmoid(c, r0, a, b, m * span), xs, ys,
            p0=(a0, 1.0, 0.3), bounds=((-100.0, 0.05, 1e-3), (200.0, 20.0, 10.0)),
            maxfev=5000)
    except (RuntimeError, ValueError):
        return None
    if not all(math.isfinite(v) for v in (a, b, c_mid)):
        return None
    return {"A": float(a), "B": float(b), "C_mid": float(c_mid * span)}


def auc(rollouts, values) -> float:
    """Mean accuracy over the budget: the trapezoid area under (rollouts, value) / the span."""
    x, y = np.asarray(rollouts, float), np.asarray(values, float)
    if x.size < 2 or x[-1] <= x[0]:
        return float("nan")
    return float(np.sum((y[1:] + y[:-1]) / 2 * np.diff(x)) / (x[-1] - x[0]))


def last_mean(values, k: int = 3) -> float:
    v = np.asarray(values, float)
    return float(v[-k:].mean()) if v.size else float("nan")


def endpoints(curve: dict) -> dict:
    """The whole-curve endpoints of one run's curve (compare.run_result's "curve")."""
    x, y = curve["rollouts"], curve["metric"]
    out = {"auc": auc(x, y), "last3": last_mean(y, 3)}
    f = fit(x, y)
    out.update({"A": f["A"], "B": f["B"], "C_mid": f["C_mid"]} if f else
               {"A": None, "B": None, "C_mid": None})
    return out
