"""Bootstrap intervals over seeds and eval prompts, and the paired verdicts built on them."""

import numpy as np
import pytest

from frontier_rl import stats


def test_constant_cells_give_a_point_interval():
    iv = stats.interval(np.full((3, 50), 40.0))
    assert (iv.mean, iv.lo, iv.hi) == (40.0, 40.0, 40.0)


def test_interval_matches_the_mean_and_the_prompt_spread():
    rng = np.random.default_rng(0)
    cells = rng.binomial(8, 0.3, size=(1, 400)) / 8 * 100
    iv = stats.interval(cells)
    # one seed: the interval is the prompt bootstrap, about mean +- 1.96 sd / sqrt(n)
    half = 1.96 * cells.std() / np.sqrt(cells.shape[1])
    assert iv.mean == pytest.approx(cells.mean())
    assert (iv.hi - iv.lo) / 2 == pytest.approx(half, rel=0.15)


def test_coverage_of_the_true_mean_is_about_95_percent():
    # prompts with their own difficulty, seeds with their own offset: the hierarchical bootstrap
    # must cover the population mean in roughly 95% of experiments.
    rng = np.random.default_rng(1)
    hits, trials = 0, 300
    for t in range(trials):
        p = np.clip(rng.beta(2, 3, size=200), 0, 1)  # eval prompts drawn from a population
        seed_shift = rng.normal(0, 0.03, size=(3, 1))
        cells = rng.binomial(8, np.clip(p + seed_shift, 0, 1)) / 8
        iv = stats.interval(cells, n_boot=400, seed=t)
        hits += iv.lo <= 0.4 <= iv.hi  # E[beta(2, 3)] = 0.4, E[shift] = 0
    assert 0.86 <= hits / trials <= 0.99


def test_paired_difference_and_verdicts():
    rng = np.random.default_rng(2)
    base = rng.binomial(8, rng.uniform(0, 1, size=(2, 300))) / 8 * 100
    same = stats.paired(base, base)
    assert (same.mean, same.lo, same.hi) == (0.0, 0.0, 0.0)
    assert stats.verdict(same) == "not distinguishable at this budget"
    better = stats.paired(base + 5.0, base)
    assert better.lo == pytest.approx(5.0) and stats.verdict(better) == "better"
    assert stats.verdict(stats.paired(base, base + 5.0)) == "worse"
    noisy = base + rng.normal(0, 20, size=base.shape)  # no shift, only noise
    assert stats.verdict(stats.paired(noisy, base)) == "not distinguishable at this budget"
    with pytest.raises(ValueError, match="same seeds and prompts"):
        stats.paired(base, base[:, :10])


def test_same_seed_gives_the_same_interval():
    cells = np.random.default_rng(3).uniform(size=(2, 100))
    assert stats.interval(cells, seed=5) == stats.interval(cells, seed=5)


def test_first_reaching():
    curve = {"rollouts": [0, 10, 20], "metric": [1.0, 5.0, 4.0]}
    assert stats.first_reaching(curve, 4.5, "rollouts") == 10
    assert stats.first_reaching(curve, 6.0, "rollouts") is None


def test_stratified_resampling_keeps_the_bucket_mix():
    # two buckets, one always solved and one never: the mean over all prompts is fixed by the
    # design (half and half), so resampling within buckets gives a point interval, across
    # buckets a wide one.
    cells = np.concatenate([np.full((2, 100), 100.0), np.zeros((2, 100))], axis=1)
    strata = np.array(["easy"] * 100 + ["hard"] * 100)
    iv = stats.interval(cells, strata=strata)
    assert (iv.lo, iv.mean, iv.hi) == (50.0, 50.0, 50.0)
    wide = stats.interval(cells)
    assert wide.hi - wide.lo > 10
    with pytest.raises(ValueError, match="strata has shape"):
        stats.interval(cells, strata=strata[:10])
