"""The gradient noise scale's estimator recovers a known noise scale, and the trainer measures
it without changing what a step computes."""

import numpy as np
import pytest

from frontier_rl.rl import noise


@pytest.mark.parametrize("b_noise", [4.0, 40.0, 400.0])
def test_the_estimator_recovers_a_known_noise_scale(b_noise):
    rng = np.random.default_rng(0)
    dim = 50
    G = rng.normal(size=dim)
    G *= 1.0 / np.linalg.norm(G)  # |G|^2 = 1
    sigma = np.full(dim, np.sqrt(b_noise / dim))  # tr(Sigma) = b_noise
    g2s, ss = [], []
    for _ in range(400):  # steps: per-example gradients G + N(0, diag(sigma^2)), 4 x 8
        g = G + rng.normal(size=(32, dim)) * sigma
        chunks = g.reshape(4, 8, dim).mean(axis=1)
        small = np.mean(np.sum(chunks ** 2, axis=-1))
        big = np.sum(g.mean(axis=0) ** 2)
        g2, s = noise.estimates(small, big, 8, 32)
        g2s.append(g2)
        ss.append(s)
    assert np.mean(g2s) == pytest.approx(1.0, rel=0.25 if b_noise < 100 else 0.6)
    assert np.mean(ss) == pytest.approx(b_noise, rel=0.1)
    assert noise.scale(g2s, ss) == pytest.approx(b_noise, rel=0.25 if b_noise < 100 else 0.6)


def test_the_estimates_are_exact_on_their_expectations():
    g2, trs = 2.0, 30.0
    small, big = g2 + trs / 8, g2 + trs / 32
    assert noise.estimates(small, big, 8, 32) == pytest.approx((g2, trs))
    with pytest.raises(ValueError):
        noise.estimates(small, big, 32, 8)
    assert np.isnan(noise.scale([-1.0], [3.0]))


def test_runs_pool_into_one_ratio_of_means_weighted_by_steps():
    # two runs of one regime: the pooled estimate is mean tr(Sigma) over mean |G|^2, each mean
    # weighted by the steps that measured it, never the mean of the runs' own ratios
    runs = [(1.0, 100.0, 10), (3.0, 100.0, 30)]
    assert noise.pooled(runs) == pytest.approx(100.0 / 2.5)
    assert noise.pooled(runs) != pytest.approx(np.mean([100.0 / 1.0, 100.0 / 3.0]))
    assert noise.pooled(runs + [(float("nan"), 5.0, 4), (9.0, 9.0, 0)]) == noise.pooled(runs)
    assert np.isnan(noise.pooled([]))


def _run(method, seed, start, g2, s, n, informative, group_size):
    return {"method": method, "seed": seed, "start_name": start,
            "gns": {"g2": g2, "s": s, "n": n}, "informative_groups": informative,
            "regime": {"group_size": group_size, "batch_size": 32, "learning_rate": 1e-4,
                       "bucket_weights": [1.0, 0.0, 1.0, 1.0]}}


def test_a_pilot_regime_qualifies_by_its_pooled_noise_against_its_informative_groups():
    from frontier_rl.experiment import regimes

    results = {"methods": ["g4", "g8", "off"], "runs": [
        _run("g4", 10, "s0", 1.0, 40.0, 20, 4.0, 4), _run("g4", 12, "s1", 1.0, 20.0, 20, 6.0, 4),
        _run("g8", 10, "s0", 2.0, 20.0, 20, 5.0, 8), _run("g8", 12, "s1", 2.0, 20.0, 20, 5.0, 8),
        {**_run("off", 10, "s0", 1.0, 1.0, 0, 5.0, 8), "gns": {"g2": 0, "s": 0, "n": 0}}]}
    cells = {c["method"]: c for c in regimes.cells(results, well_above=4.0)}
    assert set(cells) == {"g4", "g8"}  # "off" measured nothing
    assert cells["g4"]["b_noise"] == pytest.approx(30.0)
    assert cells["g4"]["b_noise_by_start"] == pytest.approx({"s0": 40.0, "s1": 20.0})
    assert cells["g4"]["ratio"] == pytest.approx(30.0 / 5.0) and cells["g4"]["qualifies"]
    assert cells["g8"]["ratio"] == pytest.approx(2.0) and not cells["g8"]["qualifies"]
    assert cells["g4"]["regime"]["group_size"] == 4 and cells["g4"]["steps_measured"] == 40
