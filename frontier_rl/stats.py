"""Uncertainty for the comparison: bootstrap intervals over seeds and eval prompts.

A method's held-out accuracy at the budget varies for two reasons: the run (its seed drives
rollouts, selection and the update RNG) and the finite eval set (each prompt is solved k times
out of k). Both are resampled together, hierarchically: each bootstrap replicate draws the seeds
with replacement and, independently, the eval prompts with replacement, and takes the mean
accuracy over the drawn (seed, prompt) cells. The eval sets here hold a fixed number of prompts
per difficulty bucket, so prompts are resampled within their bucket (a stratified bootstrap):
resampling across buckets would add the spread between an easy and a hard bucket, which the
design of the eval set does not have. The 95% interval is the 2.5th-97.5th percentile of the
replicates.

Two methods are compared *paired*: on the same seeds (a run of method A and of method B with the
same seed share the warm start, the task and their initial RNG) and the same eval prompts, so
one replicate draws seeds and prompts once and applies them to both. The difference is "better"
or "worse" when its 95% interval excludes 0, otherwise "not distinguishable at this budget".
With few seeds the seed resampling is coarse (2 seeds give 3 distinct seed multisets); the
prompt resampling still captures the eval set's noise, which is the larger part at these budgets
(512 prompts x 8 samples: about +-1.5 points), and the pairing removes what the methods share.
"""

from __future__ import annotations

import dataclasses

import numpy as np

N_BOOT = 2000
LEVEL = 0.95


@dataclasses.dataclass(frozen=True)
class Interval:
    mean: float
    lo: float
    hi: float

    def excludes_zero(self) -> bool:
        return self.lo > 0 or self.hi < 0

    def fmt(self, digits: int = 1, signed: bool = False) -> str:
        sign = "+" if signed else ""
        return (f"{self.mean:{sign}.{digits}f} [{self.lo:{sign}.{digits}f}, "
                f"{self.hi:{sign}.{digits}f}]")


def _replicates(cells: np.ndarray, n_boot: int, seed: int,
                strata: np.ndarray | None = None) -> np.ndarray:
    """Means of n_boot hierarchical bootstrap replicates of cells [seeds, prompts]; with
    `strata` (a label per prompt) prompts are resampled within their stratum."""
    s, p = cells.shape
    rng = np.random.default_rng(seed)
    si = rng.integers(0, s, size=(n_boot, s))
    if strata is None:
        pi = rng.integers(0, p, size=(n_boot, p))
    else:
        pi = np.empty((n_boot, p), np.int64)
        for label in np.unique(strata):
            members = np.flatnonzero(strata == label)
            pi[:, members] = members[rng.integers(0, members.size, size=(n_boot, members.size))]
    # mean over the drawn seeds of the mean over the drawn prompts: per-seed prompt means via a
    # count matrix keep memory at n_boot x p.
    counts = np.zeros((n_boot, p))
    np.add.at(counts, (np.repeat(np.arange(n_boot), p), pi.ravel()), 1.0)
    per_seed = counts @ cells.T / p  # [n_boot, s]
    return np.take_along_axis(per_seed, si, axis=1).mean(axis=1)


def interval(cells: np.ndarray, *, strata=None, n_boot: int = N_BOOT,
             seed: int = 0) -> Interval:
    """Mean of cells [seeds, prompts] and its hierarchical-bootstrap 95% interval. `strata`
    (one label per prompt, e.g. the difficulty bucket) resamples prompts within each label, as
    an eval set built with a fixed count per bucket was drawn."""
    cells = np.asarray(cells, float)
    if cells.ndim != 2 or cells.size == 0:
        raise ValueError(f"cells must be [seeds, prompts], got shape {cells.shape}")
    if strata is not None:
        strata = np.asarray(strata)
        if strata.shape != (cells.shape[1],):
            raise ValueError(f"strata has shape {strata.shape}, expected ({cells.shape[1]},)")
    reps = _replicates(cells, n_boot, seed, strata)
    a = (1 - LEVEL) / 2
    lo, hi = np.quantile(reps, [a, 1 - a])
    return Interval(float(cells.mean()), float(lo), float(hi))


def paired(a: np.ndarray, b: np.ndarray, *, strata=None, n_boot: int = N_BOOT,
           seed: int = 0) -> Interval:
    """mean(a) - mean(b) with its 95% interval; a and b are [seeds, prompts] on the same seeds
    (rows) and prompts (columns), so the same draws apply to both."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape:
        raise ValueError(f"paired comparison needs the same seeds and prompts: {a.shape} vs "
                         f"{b.shape}")
    return interval(a - b, strata=strata, n_boot=n_boot, seed=seed)


def verdict(diff: Interval) -> str:
    """'better' / 'worse' (95% interval of the difference excludes 0) or 'not distinguishable
    at this budget'."""
    if diff.lo > 0:
        return "better"
    if diff.hi < 0:
        return "worse"
    return "not distinguishable at this budget"


def first_reaching(curve: dict, target: float, x: str) -> float | None:
    """The x (rollouts or pflops) of the first eval point whose metric >= target."""
    for xv, m in zip(curve[x], curve["metric"], strict=True):
        if m >= target - 1e-9:
            return float(xv)
    return None
