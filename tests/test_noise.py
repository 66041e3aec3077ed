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
