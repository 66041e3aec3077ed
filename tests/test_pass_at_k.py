"""Unbiased pass@k (frontier_rl/evaluation/passk.py; Chen et al. 2021) against the plain estimate
at k = n, a brute-force enumeration of k-subsets, exact binomials at large n, its edge cases,
vectorised over prompts, the eval.pass_k check, and the comparison cells built from it."""

import itertools
import math
from fractions import Fraction

import ml_collections
import numpy as np
import pytest

from frontier_rl.evaluation import passk
from frontier_rl.experiment import evalcells, table

SMALL = [(n, c) for n in range(1, 9) for c in range(n + 1)]


@pytest.mark.parametrize("n,c", SMALL)
def test_at_k_equal_n_it_is_any_correct_among_the_n(n, c):
    assert passk.pass_at_k(n, c, n) == float(c > 0)


@pytest.mark.parametrize("n,c", SMALL)
def test_it_is_the_share_of_k_subsets_holding_a_correct_sample(n, c):
    """Every k-subset of n samples (the first c correct) enumerated, for every k <= n."""
    samples = [1] * c + [0] * (n - c)
    for k in range(1, n + 1):
        subsets = list(itertools.combinations(samples, k))
        want = sum(any(s) for s in subsets) / len(subsets)
        assert passk.pass_at_k(n, c, k) == pytest.approx(want, abs=1e-12), (n, c, k)


def test_the_product_is_stable_where_the_binomials_are_not():
    """n = 2,000 samples: C(n, k) is far beyond a float64, the product is exact to 1e-12."""
    n = 2000
    for c, k in [(1, 1000), (3, 500), (40, 64), (1000, 10), (7, 1)]:
        want = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
        assert passk.pass_at_k(n, c, k) == pytest.approx(float(want), abs=1e-12), (c, k)
    assert passk.pass_at_k(n, 1, 1000) == 0.5  # one correct in 2,000, half of them drawn


def test_edge_cases():
    for n in range(1, 9):
        for k in range(1, n + 1):
            assert passk.pass_at_k(n, 0, k) == 0.0  # nothing correct: never
            assert passk.pass_at_k(n, n, k) == 1.0  # all correct: always
            for c in range(max(0, n - k + 1), n + 1):  # n - c < k: every subset has one
                assert passk.pass_at_k(n, c, k) == 1.0
    assert passk.pass_at_k(5, 1, 1) == pytest.approx(0.2)  # pass@1 = c / n
    assert passk.pass_at_k(16, np.zeros(0, int), 4).shape == (0,)  # no prompts


def test_vectorised_over_prompts():
    """One value per prompt, equal to the scalar estimate, for one n or an n per prompt."""
    c = np.array([0, 1, 2, 5, 8, 3])
    got = passk.pass_at_k(8, c, 3)
    assert got.shape == (6,) and got.dtype == np.float64
    np.testing.assert_array_equal(got, [passk.pass_at_k(8, x, 3) for x in c])
    n = np.array([4, 8, 3, 5, 8, 16])
    np.testing.assert_array_equal(passk.pass_at_k(n, c, 3),
                                  [passk.pass_at_k(a, b, 3) for a, b in zip(n, c, strict=True)])
    grid = passk.pass_at_k(8, np.arange(9).reshape(3, 3), 2)  # any shape of prompts
    assert grid.shape == (3, 3) and grid[0, 0] == 0.0 and grid[2, 2] == 1.0


def test_a_k_above_the_samples_or_a_count_outside_them_is_refused():
    with pytest.raises(ValueError, match="1 <= k <= n samples: k=5, n=4"):
        passk.pass_at_k(4, 2, 5)
    with pytest.raises(ValueError, match="k=0"):
        passk.pass_at_k(4, 2, 0)
    with pytest.raises(ValueError, match=r"correct counts must lie in \[0, n\]"):
        passk.pass_at_k(4, [1, 5], 2)


def test_eval_pass_k_is_checked_in_the_configs_words():
    def cfg(**kw):
        return ml_collections.ConfigDict(dict(k=8, **kw))

    assert passk.resolve(cfg()) == 8  # a config without the field: k = n
    assert passk.resolve(cfg(pass_k=0)) == 8
    assert passk.resolve(cfg(pass_k=3)) == 3
    for bad in (9, -1, 2.0, True):
        with pytest.raises(ValueError, match=rf"^eval.pass_k={bad!r} is not allowed: an "
                                             r"integer in \[0, eval.k=8\]"):
            passk.resolve(cfg(pass_k=bad))
    assert passk.metric(4, 16) == "pass@4_unbiased_n16"
    assert passk.label(4, 16) == "pass@4 (unbiased, n=16)"


def test_comparison_cells_of_unbiased_pass_at_k():
    """evalcells reads a run's per-prompt correct counts (of k = 4) as unbiased pass@2 cells:
    per bucket, in the unweighted benchmark mean, and over seeds."""
    def run(seed, counts):
        return {"method": "m", "seed": seed, "k": 4, "curve": {"correct_counts": [None, counts]},
                "eval_buckets": ["x", "x", "y"]}

    # pass@2 of 4 at c = 0, 1, 2, 3, 4: 0, 1/2, 5/6, 1, 1
    rs = table.read({"methods": ["m"], "runs": [run(0, [1, 0, 2]), run(1, [4, 3, 1])]})
    m = evalcells.matrix(rs, "m", [0, 1], -1, "all", pass_k=2)
    np.testing.assert_allclose(m, 100 * np.array([[1 / 2, 0, 5 / 6], [1, 1, 1 / 2]]))
    np.testing.assert_allclose(evalcells.matrix(rs, "m", [0, 1], -1, "y", pass_k=2),
                               [[100 * 5 / 6], [50.0]])
    # the benchmark mean: mean of x's mean and y's
    bench = evalcells.matrix(rs, "m", [0, 1], -1, "bench_mean", pass_k=2).mean(axis=1)
    np.testing.assert_allclose(bench, [100 * (1 / 4 + 5 / 6) / 2, 100 * (1 + 1 / 2) / 2])
    iv = evalcells.pass_at_k(rs, "m", 2)
    assert iv.mean == pytest.approx(100 * (4 / 3 / 3 + 5 / 2 / 3) / 2)
    # pass@4 of 4 is any correct, and Avg@4 stays what it was
    np.testing.assert_allclose(evalcells.matrix(rs, "m", [0, 1], pass_k=4),
                               [[100, 0, 100], [100, 100, 100]])
    np.testing.assert_allclose(evalcells.matrix(rs, "m", [0, 1]), [[25, 0, 50], [100, 75, 25]])
