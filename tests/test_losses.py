"""Golden values for the policy losses and their modes, computed by hand in the comments."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from frontier_rl.rl import objectives  # noqa: F401  (registers gspo, cispo)
from frontier_rl.rl.losses import (
    LOSSES,
    LossConfig,
    aggregate,
    group_advantages,
    kl_penalty,
    overlong_penalty,
    policy_loss,
    rejection_keep,
)


def test_group_advantages_hand_values():
    # mean 0.5, unbiased std sqrt(4 * 0.25 / 3) = 0.57735 -> +-0.866025.
    adv = group_advantages(np.array([1, 0, 1, 0, 1, 1, 1, 1], np.float32), 4)
    np.testing.assert_allclose(adv[:4], [0.866025, -0.866025, 0.866025, -0.866025], atol=1e-5)
    np.testing.assert_array_equal(adv[4:], 0.0)  # zero-variance group: exactly no signal


def test_group_advantages_without_std_norm():
    # rl.adv_std_norm=False: A = r - mean only. Group 1: mean 0.5 -> +-0.5; group 2 has
    # mean 0.25 -> 0.75, -0.25 x 3; the zero-variance group still gets exactly 0.
    r = np.array([1, 0, 1, 0, 1, 0, 0, 0, 1, 1, 1, 1], np.float32)
    np.testing.assert_allclose(group_advantages(r, 4, std_norm=False),
                               [0.5, -0.5, 0.5, -0.5, 0.75, -0.25, -0.25, -0.25, 0, 0, 0, 0],
                               atol=1e-7)
    # The default divides by the unbiased std: group 2's std is 0.5 -> 1.5, -0.5 x 3.
    np.testing.assert_allclose(group_advantages(r, 4)[4:8], [1.5, -0.5, -0.5, -0.5], atol=1e-5)


def test_group_advantages_rejects_ragged():
    with pytest.raises(ValueError, match="groups of 3"):
        group_advantages(np.zeros(4), 3)


def test_overlong_penalty_hand_values():
    # L_max 8, L_cache 2: no penalty up to 6, -0.5 at 7, -1 at 8.
    np.testing.assert_allclose(overlong_penalty(np.array([3, 6, 7, 8]), 8, 2), [0, 0, -0.5, -1])
    np.testing.assert_allclose(overlong_penalty(np.array([8]), 8, 0), [0.0])


def _loss(log_ratio, adv, mask, cfg, ref=None, logp=None):
    logp = jnp.zeros_like(jnp.asarray(log_ratio)) if logp is None else jnp.asarray(logp)
    old = logp - jnp.asarray(log_ratio)
    return policy_loss(logp, old, jnp.asarray(adv, jnp.float32), jnp.asarray(mask), cfg,
                       ref_logp=ref)


def test_clip_higher_positive_advantage():
    # ratios 1.5 and 0.5, A = +1, eps 0.2/0.28:
    #   1.5: max(-1.5, -1.28) = -1.28 (clipped);  0.5: max(-0.5, -0.8) = -0.5.
    cfg = LOSSES["dapo"]
    loss, m = _loss([[math.log(1.5), math.log(0.5)]], [1.0], [[1.0, 1.0]], cfg)
    assert float(loss) == pytest.approx((-1.28 - 0.5) / 2, abs=1e-6)
    assert float(m["clip_frac"]) == pytest.approx(0.5)


def test_clip_negative_advantage_and_dual_clip():
    # A = -1: ratio 1.5 -> max(1.5, 1.28) = 1.5; ratio 0.5 -> max(0.5, 0.8) = 0.8;
    # ratio 12 -> max(12, 1.28) = 12, dual clip min(12, c=10) = 10.
    cfg = LOSSES["dapo"]
    loss, _ = _loss([[math.log(1.5), math.log(0.5), math.log(12.0)]], [-1.0],
                    [[1.0, 1.0, 1.0]], cfg)
    assert float(loss) == pytest.approx((1.5 + 0.8 + 10.0) / 3, abs=1e-5)


def test_no_dual_clip_when_c_is_zero():
    # GRESO's verl: clip 0.2/0.2, no dual clip. A = -1, ratio 12: max(12, 1.2) = 12 stays 12.
    cfg = LossConfig(aggregation="token_mean", eps_low=0.2, eps_high=0.2, clip_ratio_c=0.0)
    loss, m = _loss([[math.log(12.0), math.log(0.5)]], [-1.0], [[1.0, 1.0]], cfg)
    assert float(loss) == pytest.approx((12.0 + 0.8) / 2, abs=1e-5)
    assert float(m["dual_clip_frac"]) == 0.0


def test_entropy_bonus_hand_value_and_gradient():
    # ratio 1 (logp = old): per-token pg loss = -A. Row 0: A = +1 on 3 tokens, entropies 1, 2,
    # 3; row 1: A = -1 on 1 token (2 padded), entropy 4. token-mean: pg = (-3 + 1) / 4 = -0.5,
    # H = (1 + 2 + 3 + 4) / 4 = 2.5, loss = -0.5 - 0.001 * 2.5 = -0.5025; dloss/dH_t =
    # -0.001 / 4 on every response token, 0 on padding.
    cfg = LossConfig(aggregation="token_mean", eps_high=0.2, clip_ratio_c=0.0,
                     entropy_coef=0.001)
    zeros = jnp.zeros((2, 3))
    mask = jnp.array([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    adv = jnp.array([1.0, -1.0])
    ent = jnp.array([[1.0, 2.0, 3.0], [4.0, 9.0, 9.0]])

    def f(h):
        return policy_loss(zeros, zeros, adv, mask, cfg, entropy=h)

    (loss, m), grad = jax.value_and_grad(f, has_aux=True)(ent)
    assert float(loss) == pytest.approx(-0.5025, abs=1e-7)
    assert float(m["pg_loss"]) == pytest.approx(-0.5) and float(m["entropy_bonus"]) == 2.5
    np.testing.assert_allclose(grad, -0.001 / 4 * mask, atol=1e-9)
    # seq-mean-token-mean aggregates the bonus the same way: H = (2 + 4) / 2 = 3.
    seq = dataclasses.replace(cfg, aggregation="seq_mean_token_mean")
    loss, m = policy_loss(zeros, zeros, adv, mask, seq, entropy=ent)
    assert float(m["entropy_bonus"]) == pytest.approx(3.0)
    assert float(loss) == pytest.approx((-1 + 1) / 2 - 0.001 * 3.0, abs=1e-7)
    with pytest.raises(ValueError, match="needs entropy"):
        policy_loss(zeros, zeros, adv, mask, cfg)


def test_aggregations_differ_as_specified():
    # seq 1: one token of loss 1; seq 2: three tokens of loss 2.
    per_token = jnp.array([[1.0, 0.0, 0.0], [2.0, 2.0, 2.0]])
    mask = jnp.array([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    assert float(aggregate(per_token, mask, "token_mean")) == pytest.approx(7 / 4)
    assert float(aggregate(per_token, mask, "seq_mean_token_mean")) == pytest.approx(3 / 2)
    # Padding rows (no tokens) do not dilute the sequence mean.
    per_token = jnp.concatenate([per_token, jnp.zeros((1, 3))])
    mask = jnp.concatenate([mask, jnp.zeros((1, 3))])
    assert float(aggregate(per_token, mask, "seq_mean_token_mean")) == pytest.approx(3 / 2)
    with pytest.raises(ValueError, match="aggregation"):
        aggregate(per_token, mask, "sum")


def test_kl_k3_penalty():
    # logp = log 0.5, ref = log 0.25: delta = log 0.5, k3 = 0.5 - log 0.5 - 1 = 0.193147.
    cfg = LossConfig(kl_coef=0.1)
    logp = jnp.log(jnp.array([[0.5]]))
    ref = jnp.log(jnp.array([[0.25]]))
    loss, m = _loss([[0.0]], [0.0], [[1.0]], cfg, ref=ref, logp=logp)
    assert float(m["kl_ref"]) == pytest.approx(0.5 - math.log(0.5) - 1, abs=1e-6)
    assert float(loss) == pytest.approx(0.1 * 0.193147, abs=1e-6)
    with pytest.raises(ValueError, match="ref_logp"):
        _loss([[0.0]], [0.0], [[1.0]], cfg)


def test_kl_k3_is_clamped_as_verl_low_var_kl():
    # delta = ref - logp per token: 50 and -50 are extreme (exp(50) ~ 5e21); k3 at 3 is
    # e^3 - 4 = 16.09 and at -3 is e^-3 + 2 = 2.0498. Clamped to [-10, 10]: 10, 10, 10, 2.0498.
    cfg = LossConfig(aggregation="token_mean", kl_coef=1.0)
    delta = jnp.array([[50.0, -50.0, 3.0, -3.0]])
    logp = jnp.full((1, 4), -1.0)
    _, m = _loss(jnp.zeros((1, 4)), [0.0], jnp.ones((1, 4)), cfg, ref=logp + delta, logp=logp)
    assert float(m["kl_ref"]) == pytest.approx((10 + 10 + 10 + math.exp(-3) + 2) / 4, abs=1e-5)

    # The gradient stays finite (zero where clamped, e^delta - 1 w.r.t. -logp elsewhere).
    def kl_of(lp):
        return policy_loss(lp, lp, jnp.zeros(1), jnp.ones((1, 4)), cfg, ref_logp=logp + delta)[1][
            "kl_ref"]

    grad = np.asarray(jax.grad(kl_of)(logp))
    np.testing.assert_allclose(grad, [[0.0, 0.0, 0.0, -(math.exp(-3) - 1) / 4]], atol=1e-6)


def test_masked_tokens_do_not_count():
    cfg = LOSSES["dapo"]
    loss, _ = _loss([[0.0, 5.0]], [1.0], [[1.0, 0.0]], cfg)
    assert float(loss) == pytest.approx(-1.0, abs=1e-6)


def test_truncated_importance_sampling_weights_each_token():
    # ratio 1 everywhere (A = +1, per-token loss -1); the engine gave the two tokens
    # log-probs log 3 and log 1.5 below the trainer's: weights min(3, 2) = 2 and 1.5.
    cfg = dataclasses.replace(LOSSES["dapo"], tis_cap=2.0)
    logp = jnp.zeros((1, 2))
    rollout = jnp.asarray([[-math.log(3.0), -math.log(1.5)]])
    args = (logp, logp, jnp.asarray([1.0]), jnp.ones((1, 2)))
    loss, m = policy_loss(*args, cfg, rollout_logp=rollout)
    assert float(loss) == pytest.approx(-(2.0 + 1.5) / 2, abs=1e-6)
    assert float(m["tis_weight"]) == pytest.approx(1.75, abs=1e-6)
    assert float(m["tis_capped_frac"]) == pytest.approx(0.5)
    # the weight carries no gradient: d loss / d logp is the unweighted gradient times it
    g = jax.grad(lambda lp: policy_loss(lp, *args[1:], cfg, rollout_logp=rollout)[0])(logp)
    np.testing.assert_allclose(np.asarray(g), [[-2.0 / 2, -1.5 / 2]], atol=1e-6)
    # off (cap 0): the engine's log-probs change nothing
    off, m_off = policy_loss(*args, LOSSES["dapo"], rollout_logp=rollout)
    assert float(off) == pytest.approx(-1.0) and "tis_weight" not in m_off
    with pytest.raises(ValueError, match="rollout_logp"):
        policy_loss(*args, cfg)


# -- the modes beside the GRPO/DAPO presets (verl's own outputs: test_verl_conformance.py) --


def test_sum_aggregations_hand_values():
    # seq 1: one token of loss 1; seq 2: three tokens of loss 2; a padding row.
    per_token = jnp.array([[1.0, 0.0, 0.0], [2.0, 2.0, 2.0], [5.0, 5.0, 5.0]])
    mask = jnp.array([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    assert float(aggregate(per_token, mask, "token_sum")) == pytest.approx(7.0)
    assert float(aggregate(per_token, mask, "seq_mean_token_sum")) == pytest.approx(7 / 2)
    # Dr. GRPO: the seq-mean of token sums over a constant L, not each response's length
    assert float(aggregate(per_token, mask, "seq_mean_token_sum_norm", norm_len=10)) == \
        pytest.approx(7 / 2 / 10)
    # L defaults to the mask's width (verl's horizon)
    assert float(aggregate(per_token, mask, "seq_mean_token_sum_norm")) == pytest.approx(7 / 6)


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean", "token_sum",
                                         "seq_mean_token_sum", "seq_mean_token_sum_norm"])
def test_aggregations_agree_on_packed_rows(aggregation):
    """The same two responses (1 token of loss 1, 3 of loss 2) one per row or both in one row
    with seq_weight (rl/batch.py's "pack"): the same value."""
    rows = aggregate(jnp.array([[1.0, 0.0, 0.0, 0.0], [2.0, 2.0, 2.0, 0.0]]),
                     jnp.array([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]]), aggregation,
                     norm_len=4)
    packed = aggregate(jnp.array([[1.0, 2.0, 2.0, 2.0]]), jnp.ones((1, 4)), aggregation,
                       seq_weight=jnp.array([[1.0, 1 / 3, 1 / 3, 1 / 3]]), norm_len=4)
    assert float(packed) == pytest.approx(float(rows), rel=1e-6)


def test_kl_estimators_hand_values_and_gradients():
    # logp = log 0.5, ref = log 0.25: logp - ref = log 2.
    lp, ref = jnp.log(jnp.array([0.5])), jnp.log(jnp.array([0.25]))
    l2 = math.log(2.0)
    want = {"k1": (l2, 1.0), "abs": (l2, 1.0), "k2": (0.5 * l2 ** 2, l2),
            # k3: e^d - d - 1 at d = -log 2; d/dlogp = 1 - e^d = 0.5
            "k3": (0.5 + l2 - 1.0, 0.5),
            # "+": the value of the base estimator, the gradient of k2 (logp - ref)
            "k1+": (l2, l2), "abs+": (l2, l2), "k3+": (0.5 + l2 - 1.0, l2)}
    for est, (value, grad) in want.items():
        got, g = jax.value_and_grad(lambda x, e=est: jnp.sum(kl_penalty(x, ref, e)))(lp)
        assert float(got) == pytest.approx(value, abs=1e-6), est
        assert float(g[0]) == pytest.approx(grad, abs=1e-6), est
    with pytest.raises(ValueError, match="kl estimator"):
        kl_penalty(lp, ref, "k4")


def test_log_ratio_is_clamped_before_exp():
    # A = -1 on a token whose ratio is e^25, no dual clip: the loss is the clamped e^20.
    cfg = LossConfig(aggregation="token_mean", clip_ratio_c=0.0)
    loss, m = _loss([[25.0]], [-1.0], [[1.0]], cfg)
    assert float(loss) == pytest.approx(math.exp(20.0), rel=1e-6)
    assert float(m["ppo_kl"]) == pytest.approx(-20.0)  # verl's: of the clamped log-ratio
    off = dataclasses.replace(cfg, log_ratio_clamp=0.0)
    loss, m = _loss([[25.0]], [-1.0], [[1.0]], off)
    assert float(loss) == pytest.approx(math.exp(25.0), rel=1e-6)
    assert float(m["ppo_kl"]) == pytest.approx(-25.0)


def test_ppo_kl_is_verls_and_approx_kl_old_is_half_the_squared_log_ratio():
    # log pi - log pi_old = 0.2 and -0.4 on two tokens (a third masked):
    # ppo_kl = mean(old - new) = (-0.2 + 0.4) / 2; approx_kl_old = (0.04 + 0.16) / 2 / 2.
    _, m = _loss([[0.2, -0.4, 3.0]], [1.0], [[1.0, 1.0, 0.0]], LOSSES["dapo"])
    assert float(m["ppo_kl"]) == pytest.approx(0.1, abs=1e-6)
    assert float(m["approx_kl_old"]) == pytest.approx(0.05, abs=1e-6)


def test_sequence_level_importance_sampling():
    # ratio 1 (per-token loss -A = -1); engine below the trainer by log 1.5 and log 1.2 on
    # response 1 (product 1.8: under the cap 2) and log 3, log 1 on response 2 (3: capped).
    cfg = dataclasses.replace(LOSSES["dapo"], tis_cap=2.0, rollout_is="sequence")
    logp = jnp.zeros((2, 2))
    rollout = -jnp.log(jnp.array([[1.5, 1.2], [3.0, 1.0]]))
    args = (logp, logp, jnp.ones(2), jnp.ones((2, 2)))
    loss, m = policy_loss(*args, cfg, rollout_logp=rollout)
    assert float(m["tis_weight"]) == pytest.approx((1.8 * 2 + 2.0 * 2) / 4, rel=1e-6)
    assert float(m["tis_capped_frac"]) == pytest.approx(0.5)
    assert float(loss) == pytest.approx(-(1.8 * 2 + 2.0 * 2) / 4, rel=1e-6)
    g = jax.grad(lambda lp: policy_loss(lp, *args[1:], cfg, rollout_logp=rollout)[0])(logp)
    np.testing.assert_allclose(np.asarray(g), [[-1.8 / 4] * 2, [-2.0 / 4] * 2], rtol=1e-6)


def test_rejection_drops_whole_responses_outside_the_bounds():
    # rho per response = exp(sum(old - rollout)): 1.8 (kept in [0.5, 2]), 3 (dropped), 1/6
    # (dropped); the geometric means: sqrt(3) = 1.73 (kept), sqrt(1/6) = 0.41 (dropped).
    old = jnp.zeros((3, 2))
    rollout = -jnp.log(jnp.array([[1.5, 1.2], [3.0, 1.0], [1 / 3, 1 / 2]]))
    mask = jnp.ones((3, 2))
    cfg = LossConfig(rollout_rs="sequence", rs_low=0.5, rs_high=2.0)
    keep = rejection_keep(old, rollout, mask, cfg)
    np.testing.assert_array_equal(np.asarray(keep), [[1, 1], [0, 0], [0, 0]])
    geo = dataclasses.replace(cfg, rollout_rs="geometric")
    np.testing.assert_array_equal(np.asarray(rejection_keep(old, rollout, mask, geo)),
                                  [[1, 1], [1, 1], [0, 0]])
    off = dataclasses.replace(cfg, rollout_rs="")
    np.testing.assert_array_equal(np.asarray(rejection_keep(old, rollout, mask, off)), 1.0)


def test_gspo_uses_the_geometric_mean_ratio():
    # One response, log-ratios 0.1 and 0.3: s = exp(0.2) = 1.2214 on both tokens. A = +1,
    # clip 0.2 / 0.28: unclipped, loss -s; each token's gradient is -A s / 2 (token-mean).
    cfg = LossConfig(name="gspo", aggregation="token_mean", eps_low=0.2, eps_high=0.28)
    old = jnp.array([[-1.0, -2.0]])
    f = lambda lp: policy_loss(lp, old, jnp.ones(1), jnp.ones((1, 2)), cfg)  # noqa: E731
    (loss, m), g = jax.value_and_grad(f, has_aux=True)(old + jnp.array([[0.1, 0.3]]))
    s = math.exp(0.2)
    assert float(loss) == pytest.approx(-s, rel=1e-6) and float(m["clip_frac"]) == 0.0
    np.testing.assert_allclose(np.asarray(g), [[-s / 2, -s / 2]], rtol=1e-6)
    # The paper's tiny clip range: s = 1.22 > 1 + 4e-4 is clipped, so no gradient.
    tight = dataclasses.replace(cfg, eps_low=3e-4, eps_high=4e-4)
    (loss, m), g = jax.value_and_grad(
        lambda lp: policy_loss(lp, old, jnp.ones(1), jnp.ones((1, 2)), tight),
        has_aux=True)(old + jnp.array([[0.1, 0.3]]))
    assert float(loss) == pytest.approx(-(1 + 4e-4), rel=1e-6) and float(m["clip_frac"]) == 1.0
    np.testing.assert_array_equal(np.asarray(g), 0.0)


def test_gspo_sequence_ratio_on_packed_rows():
    """Two responses in one row (segments 1 and 2) get the ratios they get in rows of
    their own."""
    cfg = LossConfig(name="gspo", aggregation="seq_mean_token_mean", eps_low=0.2,
                     eps_high=0.28)
    d = jnp.array([[0.1, 0.3, -0.2, 0.0, 0.0], [0.05, -0.4, 0.0, 0.0, 0.0]])
    mask = jnp.array([[1.0, 1, 1, 0, 0], [1.0, 1, 0, 0, 0]])
    rows, _ = policy_loss(d, jnp.zeros_like(d), jnp.array([1.0, -0.5]), mask, cfg)
    packed_d = jnp.array([[0.1, 0.3, -0.2, 0.05, -0.4]])
    w = jnp.array([[1 / 3, 1 / 3, 1 / 3, 1 / 2, 1 / 2]])
    adv = jnp.array([[1.0, 1.0, 1.0, -0.5, -0.5]])
    packed, _ = policy_loss(packed_d, jnp.zeros_like(packed_d), adv, jnp.ones((1, 5)), cfg,
                            seq_weight=w, segments=jnp.array([[1, 1, 1, 2, 2]]))
    assert float(packed) == pytest.approx(float(rows), rel=1e-6)


def test_cispo_weight_is_clipped_and_carries_no_gradient():
    # ratios e^0.5 = 1.65 (clipped to 1.2) and e^-0.1 (kept), A = +1, logp -1 and -2:
    # per token -w A logp; gradient -w A (the weight is a constant).
    cfg = LossConfig(name="cispo", aggregation="token_sum", eps_low=10.0, eps_high=0.2)
    logp = jnp.array([[-1.0, -2.0]])
    old = logp - jnp.array([[0.5, -0.1]])
    f = lambda lp: policy_loss(lp, old, jnp.ones(1), jnp.ones((1, 2)), cfg)  # noqa: E731
    (loss, m), g = jax.value_and_grad(f, has_aux=True)(logp)
    w = [1.2, math.exp(-0.1)]
    assert float(loss) == pytest.approx(w[0] * 1.0 + w[1] * 2.0, rel=1e-6)
    assert float(m["clip_frac"]) == pytest.approx(0.5)
    np.testing.assert_allclose(np.asarray(g), [[-w[0], -w[1]]], rtol=1e-6)
