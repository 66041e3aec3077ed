"""A three-parameter model of RL progress with the learning rate as an input, fitted to the
trainer's runs and checked on cells it was not fitted on.

The synthetic learner (sim/learner.py) takes its rate as a free parameter fitted per
comparison, so it cannot say what another rate would do. This model makes the rate an input
and the gradient noise the trainer measured (rl/noise.py) the signal-to-noise it acts on:

    per update:   progress = alpha * eta * q  -  gamma * eta^2
    q = B_inf / (B_inf + B_noise)
    gain = A * tanh(U * progress / A)

- eta is the rate in units of 1e-4 (the testbed's tuned rate);
- B_inf is the run's informative groups per update (groups with reward variance);
- B_noise is its measured gradient noise scale, in groups (McCandlish et al. 2018: a step on a
  batch of B gains in proportion to 1 / (1 + B_noise / B));
- U is the run's number of updates;
- gain is the primary metric's change from step 0 to the end.

Progress per update grows with the rate times the fraction of the update that is signal, and
pays a noise cost that grows with the rate's square, so too high a rate makes progress negative.
A bounds the gain both ways, as accuracy is bounded. alpha, gamma and A are fitted by least
squares on the runs of some (arm, rate) cells; every other cell is a prediction: per-run
inputs (U, B_inf, B_noise) are the runs' own measurements, and no measurement of the held-out
cell's outcome enters the fit.

`rows` reads runs from comparison results files; `fit`, `predict` and `held_out` do the rest.
The output is a model's, never a measurement.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np

RATE_UNIT = 1e-4  # eta is the rate in this unit
LABEL = ("model output: a three-parameter progress model with the learning rate as input, "
         "fitted to measured runs; not a measurement")


@dataclasses.dataclass(frozen=True)
class Run:
    """One training run as the model sees it."""

    arm: str
    rate: float  # rl.learning_rate
    seed: int
    start: str  # the shipped start's name
    updates: int
    informative: float  # informative groups per update, mean over the run
    b_noise: float  # gradient noise scale in groups, mean over the run
    gain: float  # final minus step-0 value of the primary metric, in points

    @property
    def q(self) -> float:
        return self.informative / (self.informative + self.b_noise)


@dataclasses.dataclass(frozen=True)
class Params:
    alpha: float
    gamma: float
    ceiling: float  # A

    def as_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


def rows(results: dict, shared_rate: float) -> list[Run]:
    """The runs of a comparison's results (experiment/compare.py's results.json): the arm and
    rate from a method named `arm@learning_rate=X`, else the method at `shared_rate`. Runs
    without a positive, finite gradient-noise scale (the unbiased estimate is negative or
    undefined where the noise is below what the run resolves) are left out."""
    out = []
    for r in results["runs"]:
        arm, _, setting = r["method"].partition("@")
        rate = float(setting.split("=", 1)[1]) if setting.startswith("learning_rate=") \
            else shared_rate
        curve = r["curve"]["metric"]
        noise, inf = r.get("b_noise"), r.get("informative_groups")
        if (noise is None or inf is None or not curve or not math.isfinite(noise)
                or noise <= 0 or not math.isfinite(inf)):
            continue
        out.append(Run(arm, rate, int(r["seed"]), r.get("start_name") or "", int(r["updates"]),
                       float(r["informative_groups"]), float(r["b_noise"]),
                       float(r["final"]) - float(curve[0])))
    return out


def unique(runs: Iterable[Run]) -> list[Run]:
    """One run per (arm, rate, seed): a run reused by two comparisons counts once."""
    seen: dict[tuple, Run] = {}
    for r in runs:
        seen.setdefault((r.arm, r.rate, r.seed), r)
    return list(seen.values())


def gain(p: Params, runs: Sequence[Run]) -> np.ndarray:
    """The model's gain for each run, from the run's own rate, updates and noise."""
    eta = np.array([r.rate for r in runs]) / RATE_UNIT
    q = np.array([r.q for r in runs])
    u = np.array([r.updates for r in runs], float)
    with np.errstate(over="ignore", invalid="ignore"):  # a search point far out: inf, nan
        progress = u * (p.alpha * eta * q - p.gamma * eta**2)
        return p.ceiling * np.tanh(progress / p.ceiling)


def fit(runs: Sequence[Run]) -> Params:
    """alpha, gamma, A by least squares on the runs' gains (each run one residual), searched
    on their logs (all three positive) from a grid of starting points; deterministic."""
    from scipy.optimize import least_squares

    target = np.array([r.gain for r in runs])

    def residual(x):
        with np.errstate(over="ignore"):
            return gain(Params(*np.exp(x)), runs) - target

    best = None
    for a0 in (1.0, 10.0, 100.0):
        for g0 in (1e-3, 1e-2, 1e-1):
            for c0 in (10.0, 30.0):
                sol = least_squares(residual, np.log([a0, g0, c0]), method="trf",
                                    x_scale="jac")
                if best is None or sol.cost < best.cost:
                    best = sol
    return Params(*(float(v) for v in np.exp(best.x)))


def cells(runs: Iterable[Run]) -> dict[tuple[str, float], list[Run]]:
    out: dict[tuple[str, float], list[Run]] = {}
    for r in runs:
        out.setdefault((r.arm, r.rate), []).append(r)
    return dict(sorted(out.items()))


def held_out(runs: Sequence[Run], fitted: Callable[[str, float], bool]) -> dict:
    """Fits on the runs of the cells `fitted(arm, rate)` says, predicts every cell: per cell
    the measured mean gain with its 95% t-interval over its runs, the predicted mean gain,
    whether the interval holds it, and whether the cell was fitted."""
    from frontier_rl.experiment import stats

    train = [r for r in runs if fitted(r.arm, r.rate)]
    p = fit(train)
    out = []
    for (arm, rate), rs in cells(runs).items():
        iv = stats.seed_interval([r.gain for r in rs])
        pred = float(np.mean(gain(p, rs)))
        out.append({"arm": arm, "rate": rate, "n": len(rs), "fitted": fitted(arm, rate),
                    "measured": iv.mean, "lo": iv.lo, "hi": iv.hi, "predicted": pred,
                    "inside": (iv.lo <= pred <= iv.hi) if math.isfinite(iv.lo) else None,
                    "q": float(np.mean([r.q for r in rs])),
                    "updates": float(np.mean([r.updates for r in rs]))})
    return {"params": p.as_dict(), "fitted_runs": len(train), "cells": out,
            "rmse_held_out": _rmse([c for c in out if not c["fitted"]])}


def _rmse(cs: list[dict]) -> float | None:
    if not cs:
        return None
    return float(np.sqrt(np.mean([(c["predicted"] - c["measured"]) ** 2 for c in cs])))
