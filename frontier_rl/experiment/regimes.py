"""The gradient noise scale by regime (`:noise_pilot`): each arm of a pilot is one regime
(pool, group size G, batch B, learning rate), and its runs are pooled into one B_noise
(rl/noise.py: the ratio of the two estimates' means over every measured step of every run),
read beside the informative groups per update. Where an update's informative groups are well
below B_noise, more of them lower its noise, the one way selection can pay under Adam; a
regime qualifies when B_noise is at least `well_above` times the informative groups."""

from __future__ import annotations

import numpy as np

from frontier_rl.experiment import evalcells
from frontier_rl.rl import noise


def _pooled(runs: list[dict]) -> float:
    return noise.pooled([(r["gns"]["g2"], r["gns"]["s"], r["gns"]["n"])
                         for r in runs if r.get("gns")])


def cells(results: dict, well_above: float) -> list[dict]:
    """One dict per arm that measured the noise scale, in compare.run's order: its regime,
    B_noise pooled over its runs and per start, the informative groups per update (mean, sd
    over runs), their ratio and whether the regime qualifies."""
    out = []
    for method, runs in evalcells.by_method(results, groups=False).items():
        if not runs or not any((r.get("gns") or {}).get("n") for r in runs):
            continue
        b = _pooled(runs)
        starts = sorted({r.get("start_name") or "" for r in runs})
        inf_mean, inf_sd, _ = evalcells.mean_sd([r.get("informative_groups") for r in runs])
        ratio = b / inf_mean if inf_mean > 0 and np.isfinite(b) else float("nan")
        out.append({
            "method": method, "regime": runs[0].get("regime") or {},
            "runs": len(runs), "steps_measured": sum(r["gns"]["n"] for r in runs),
            "b_noise": b,
            "b_noise_by_start": {s: _pooled([r for r in runs if (r.get("start_name") or "")
                                             == s]) for s in starts},
            "informative": inf_mean, "informative_sd": inf_sd, "ratio": ratio,
            "qualifies": bool(np.isfinite(ratio) and ratio >= well_above)})
    return out
