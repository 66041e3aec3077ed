"""The progress model with the learning rate as input (frontier_rl/sim/rate_model.py)."""

import itertools
import math

import numpy as np
import pytest

from frontier_rl.sim import rate_model as rm

TRUE = rm.Params(alpha=20.0, gamma=0.05, ceiling=15.0)


def _runs(params=TRUE, noise=0.0, seed=0):
    """Runs of 3 arms x 3 rates x 4 seeds with their own q and U, gains from `params`."""
    rng = np.random.default_rng(seed)
    arms = {"uniform": (5.0, 600), "oracle": (16.0, 600), "big": (9.0, 300)}
    out = []
    for (arm, (inf, updates)), rate, s in itertools.product(arms.items(), (3e-5, 1e-4, 3e-4),
                                                            range(4)):
        run = rm.Run(arm, rate, s, "s0", updates, inf, float(rng.uniform(40, 160)), 0.0)
        g = float(rm.gain(params, [run])[0]) + noise * float(rng.normal())
        out.append(rm.Run(arm, rate, s, "s0", updates, inf, run.b_noise, g))
    return out


def test_the_fit_recovers_known_parameters():
    got = rm.fit(_runs())
    for name in ("alpha", "gamma", "ceiling"):
        assert getattr(got, name) == pytest.approx(getattr(TRUE, name), rel=1e-3), name


def test_a_rate_too_high_makes_progress_negative():
    run = rm.Run("uniform", 1e-2, 0, "s0", 600, 5.0, 100.0, 0.0)
    assert rm.gain(TRUE, [run])[0] < 0 and rm.gain(TRUE, [run])[0] >= -TRUE.ceiling


def test_held_out_cells_are_predicted_from_the_fitted_cells_alone():
    runs = _runs(noise=0.5)
    out = rm.held_out(runs, lambda arm, rate: arm != "big")
    assert out["fitted_runs"] == 24
    cells = {(c["arm"], c["rate"]): c for c in out["cells"]}
    assert len(cells) == 9 and not any(c["fitted"] for k, c in cells.items() if k[0] == "big")
    # the prediction of a held-out cell does not move when its measured gains do
    moved = [rm.Run(r.arm, r.rate, r.seed, r.start, r.updates, r.informative, r.b_noise,
                    r.gain + (30.0 if r.arm == "big" else 0.0)) for r in runs]
    again = {(c["arm"], c["rate"]): c for c in rm.held_out(moved, lambda a, r: a != "big")[
        "cells"]}
    for key, c in cells.items():
        assert again[key]["predicted"] == pytest.approx(c["predicted"])
        if key[0] == "big":
            assert again[key]["measured"] == pytest.approx(c["measured"] + 30.0)
            assert again[key]["inside"] is False
    assert out["rmse_held_out"] < 2.0 and math.isfinite(out["params"]["alpha"])


def test_rows_read_arm_and_rate_and_leave_out_unresolved_noise():
    def run(method, seed, noise):
        return {"method": method, "seed": seed, "start_name": "s0", "updates": 600,
                "informative_groups": 5.0, "b_noise": noise, "final": 40.0,
                "curve": {"metric": [30.0, 35.0, 40.0]}}

    results = {"runs": [run("uniform@learning_rate=1e-04", 0, 100.0), run("hive", 0, 20.0),
                        run("heapa", 0, None), run("oracle", 0, -3.0),
                        run("uniform", 1, float("nan"))]}
    got = rm.rows(results, 3e-4)
    assert [(r.arm, r.rate, r.gain) for r in got] == [("uniform", 1e-4, 10.0),
                                                     ("hive", 3e-4, 10.0)]
    assert got[0].q == pytest.approx(5.0 / 105.0)
    assert len(rm.unique(got + got)) == 2
