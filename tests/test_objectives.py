"""The loss and advantage-estimator registries: config sections, checks naming the field, the
LossConfig a config builds, advantages reaching the packed batch, and the train step's use of
the new aggregations and of rollout rejection."""

import dataclasses
import os

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from frontier_rl import config_lib
from frontier_rl.rl import losses, objectives, registry, sharding, update
from frontier_rl.rl.batch import pack
from frontier_rl.selection.base import Group


def test_every_entry_has_its_section_and_the_default_is_unchanged():
    c = config_lib.default_config()
    assert (c.rl.loss, c.rl.adv_estimator, c.rl.kl_estimator) == ("grpo", "grpo", "k3")
    assert set(c.rl.losses) == set(objectives.loss_names()) >= {"grpo", "dapo", "gspo", "cispo"}
    assert set(c.rl.estimators) == set(objectives.estimator_names()) >= {
        "grpo", "rloo", "reinforce_plus_plus_baseline"}
    # the embedded runs' loss: as before, with verl's log-ratio clamp
    assert objectives.loss_config(c) == dataclasses.replace(
        losses.LOSSES["grpo"], norm_len=c.rollout.max_new_tokens)
    for name in objectives.loss_names():
        c.rl.loss = name
        config_lib.validate(c)
    for name in objectives.estimator_names():
        c.rl.adv_estimator = name
        config_lib.validate(c)


@pytest.mark.parametrize("field,value,message", [
    ("rl.loss", "ppo2", "rl.loss='ppo2' is not allowed: one of ['cispo', 'dapo', 'grpo', "
                        "'gspo']"),
    ("rl.adv_estimator", "gae", "rl.adv_estimator='gae' is not allowed: one of ['grpo', "
                                "'reinforce_plus_plus_baseline', 'rloo']"),
    ("rl.loss_agg", "sum", "rl.loss_agg='sum' is not allowed: '' (the loss's own) or one of "
                           "'token_mean', 'seq_mean_token_mean', 'token_sum'"),
    ("rl.kl_estimator", "k4", "rl.kl_estimator='k4' is not allowed: one of ['k1', 'k1+'"),
    ("rl.rollout_is", "geo", "rl.rollout_is='geo' is not allowed"),
    ("rl.rollout_rs", "token", "rl.rollout_rs='token' is not allowed"),
    ("rl.log_ratio_clamp", -1.0, "rl.log_ratio_clamp=-1.0 is not allowed: a number >= 0"),
    ("rl.loss_scale_factor", -5, "rl.loss_scale_factor=-5 is not allowed"),
])
def test_bad_values_name_the_field(field, value, message):
    c = config_lib.default_config()
    config_lib.set_fields(c, {field: value})
    with pytest.raises(config_lib.ConfigError) as e:
        config_lib.validate(c)
    assert str(e.value).startswith(message)


def test_each_entry_checks_its_own_section():
    c = config_lib.default_config()
    c.rl.loss = "gspo"
    c.rl.losses.gspo.eps_low = 1.5
    with pytest.raises(config_lib.ConfigError, match=r"rl.losses.gspo.eps_low=1.5 is not"):
        config_lib.validate(c)
    c.rl.loss = "grpo"  # only the chosen loss's section is checked
    config_lib.validate(c)
    c.rl.adv_estimator, c.rl.estimators.grpo.eps = "grpo", 0.0
    with pytest.raises(config_lib.ConfigError, match=r"rl.estimators.grpo.eps=0.0 is not"):
        config_lib.validate(c)
    c.rl.estimators.grpo.eps = 1e-6
    c.rl.loss, c.rl.kl_coef = "dapo", 0.1
    with pytest.raises(config_lib.ConfigError, match="DAPO has no KL"):
        config_lib.validate(c)


def test_rejection_bounds_and_engine_logps():
    c = config_lib.default_config()
    c.rl.rollout_rs, c.rl.rs_low = "sequence", 1.5
    with pytest.raises(config_lib.ConfigError, match=r"rl.rs_low=1.5 is not allowed"):
        config_lib.validate(c)
    c.rl.rs_low, c.rl.rs_high = 0.5, 0.9
    with pytest.raises(config_lib.ConfigError, match=r"rl.rs_high=0.9 is not allowed"):
        config_lib.validate(c)
    c.rl.rs_high, c.rl.recompute_old_logp = 2.0, "never"
    with pytest.raises(config_lib.ConfigError, match="rejection needs the trainer's"):
        config_lib.validate(c)


def test_loss_config_takes_the_losses_own_section():
    c = config_lib.default_config()
    c.rl.loss, c.rl.kl_estimator, c.rl.loss_scale_factor = "gspo", "k3+", 16
    cfg = objectives.loss_config(c)
    assert (cfg.name, cfg.eps_low, cfg.eps_high) == ("gspo", 3e-4, 4e-4)
    assert (cfg.aggregation, cfg.kl_estimator, cfg.norm_len) == ("seq_mean_token_mean", "k3+", 16)
    c.rl.loss, c.rl.loss_agg = "cispo", "seq_mean_token_sum_norm"
    cfg = objectives.loss_config(c)
    assert (cfg.eps_low, cfg.eps_high, cfg.aggregation) == (10.0, 0.2, "seq_mean_token_sum_norm")
    c.rl.loss, c.rl.loss_agg = "dapo", ""
    assert objectives.loss_config(c).aggregation == "token_mean"


def test_a_registered_toy_loss_runs_with_its_own_option(monkeypatch):
    """docs/extending.md's worked example: one function, one registration."""
    c = config_lib.default_config()
    monkeypatch.setattr(registry, "_LOSSES", dict(registry._LOSSES))

    @registry.register_loss("toy", aggregation="token_mean", defaults={"scale": 2.0})
    def toy(x, cfg):
        return -cfg.option("scale") * x.adv * x.logp, {}

    with pytest.raises(ValueError, match="registered twice"):
        registry.register_loss("toy", aggregation="token_mean")(toy)
    c.rl.losses.toy = ml_collections.ConfigDict(registry.loss("toy").defaults)
    c.rl.loss = "toy"
    cfg = objectives.loss_config(config_lib.validate(c))
    assert cfg.option("scale") == 2.0
    loss, m = losses.policy_loss(jnp.full((1, 2), -1.0), jnp.zeros((1, 2)), jnp.ones(1),
                                 jnp.ones((1, 2)), cfg)
    assert float(loss) == pytest.approx(2.0) and "ppo_kl" in m


# -- advantage estimators --


def test_rloo_and_reinforce_plus_plus_baseline_hand_values():
    r = np.array([1, 0, 1, 0, 1, 0, 0, 0], np.float32)
    opts = {"std_norm": True}
    # RLOO: A_i = r_i - mean of the other three = 4/3 (r_i - mean): +-2/3; 1 - 0 = 1, -1/3.
    np.testing.assert_allclose(objectives.estimator("rloo").fn(r, 4, np.ones(8), opts),
                               [2 / 3, -2 / 3, 2 / 3, -2 / 3, 1, -1 / 3, -1 / 3, -1 / 3],
                               atol=1e-6)
    # REINFORCE++-baseline: a = r - group mean, whitened over tokens (each response weighted
    # by its length): token-weighted mean 0 and unbiased variance 1.
    lengths = np.array([3, 1, 2, 5, 1, 1, 4, 2])
    adv = objectives.estimator("reinforce_plus_plus_baseline").fn(r, 4, lengths, opts)
    tok = np.repeat(adv.astype(np.float64), lengths)
    assert abs(tok.mean()) < 1e-6 and tok.var(ddof=1) == pytest.approx(1.0, rel=1e-6)
    a = r.reshape(2, 4) - r.reshape(2, 4).mean(1, keepdims=True)
    assert np.all(np.diff(adv[np.argsort(a.reshape(-1))]) >= 0)  # order kept


def _groups(baseline=None):
    rng = np.random.default_rng(0)
    out = []
    for j in range(3):
        rewards = np.array([1, 0, 1, 1] if j != 1 else [0, 0, 1, 0], np.float32)
        lengths = rng.integers(1, 5, size=4).astype(np.int32)
        tokens = rng.integers(3, 9, size=(4, 5)).astype(np.int32)
        out.append(Group(index=j, prompt_id=str(j), outcomes=rewards.astype(np.int8),
                         rewards=rewards, lengths=lengths, mean_entropy=np.zeros(4, np.float32),
                         tokens=tokens, logps=np.zeros((4, 5), np.float32)))
    if baseline is not None:
        out[2] = dataclasses.replace(out[2], adv_baseline=baseline, adv_scale=0.5)
    return out


def _pack(groups, std_norm=True, layout="pad"):
    return pack(groups, [[1, 2], [1, 2, 3], [2]], pad_id=0, prompt_buckets=(4,),
                row_buckets=(16,), row_multiple=1, std_norm=std_norm, layout=layout)


@pytest.mark.parametrize("std_norm", [True, False])
@pytest.mark.parametrize("layout", ["pad", "pack"])
def test_grpo_estimator_packs_bit_identical_advantages(std_norm, layout):
    """The default estimator gives the batch exactly the advantages batch.pack computed before
    the registry; a selector's own baseline (Reinforce-Ada) is kept."""
    c = config_lib.default_config()
    c.rl.adv_std_norm = std_norm
    for groups in (_groups(), _groups(baseline=0.25)):
        old = _pack(groups, std_norm, layout)
        new = _pack(update.with_advantages(c, groups), std_norm, layout)
        np.testing.assert_array_equal(new["advantages"], old["advantages"])
        assert groups[0].adv_baseline is None  # the selector's groups are left as they were


def test_other_estimators_reach_the_batch():
    c = config_lib.default_config()
    c.rl.adv_estimator = "rloo"
    groups = _groups()
    b = _pack(update.with_advantages(c, groups))
    rewards = np.concatenate([g.rewards for g in groups])
    want = objectives.estimate(c, rewards, 4, np.concatenate([g.lengths for g in groups]))
    np.testing.assert_array_equal(b["advantages"][:12], want)
    np.testing.assert_allclose(want[:4], [1 / 3, -1, 1 / 3, 1 / 3], atol=1e-6)


# -- in the train step --


def _batch(tiny_policy, layout="pad"):
    """Two prompts x 4 responses of the tiny policy's vocabulary, old log-probs off the
    current policy and an engine's log-probs far from them on half the responses."""
    rng = np.random.default_rng(1)
    groups = []
    for j in range(2):
        rewards = np.array([1, 0, 1, 0], np.float32)
        groups.append(Group(index=j, prompt_id=str(j), outcomes=rewards.astype(np.int8),
                            rewards=rewards, lengths=np.array([5, 2, 4, 3], np.int32),
                            mean_entropy=np.zeros(4, np.float32),
                            tokens=rng.integers(3, 12, size=(4, 6)).astype(np.int32),
                            logps=(-2.0 + 0.3 * rng.standard_normal((4, 6))).astype(
                                np.float32)))
    b = pack(groups, [[1, 5, 14], [1, 7, 8, 9]], pad_id=0, prompt_buckets=(8,),
             row_buckets=(8,), row_multiple=4, layout=layout)
    far = np.zeros(b["loss_mask"].shape[0], np.float32)
    far[::2] = 2.0  # every other row: the engine 2 nats per token below the trainer
    b["rollout_logp"] = (b["old_logp"] - far[:, None] * b["loss_mask"]).astype(np.float32)
    return b


def _gradient(tiny_policy, loss_cfg, b, micro=0):
    import optax

    from frontier_rl.rl.train_step import Trainer

    mesh = sharding.make_mesh(devices=jax.devices()[:1])
    tr = Trainer(tiny_policy[1], loss_cfg, optax.sgd(0.1), mesh, micro_batch_size=micro,
                 layout="pack" if "seq_weight" in b else "pad")
    params, _ = tr.init(jax.tree.map(lambda x: x.copy(), tiny_policy[2]))
    loss, m, g = tr.gradient(params, b)
    return float(loss), jax.device_get(m), jax.device_get(g)


@pytest.mark.parametrize("aggregation", ["token_sum", "seq_mean_token_sum_norm"])
def test_micro_batches_give_the_minibatch_gradient_for_the_sum_modes(tiny_policy, aggregation):
    b = _batch(tiny_policy)
    cfg = dataclasses.replace(losses.LOSSES["grpo"], aggregation=aggregation, norm_len=6)
    loss0, m0, g0 = _gradient(tiny_policy, cfg, b)
    loss2, m2, g2 = _gradient(tiny_policy, cfg, b, micro=2)
    assert loss2 == pytest.approx(loss0, rel=1e-5, abs=1e-6)
    assert m2["pg_loss"] == pytest.approx(m0["pg_loss"], rel=1e-5, abs=1e-6)
    for a, c in zip(jax.tree.leaves(g0), jax.tree.leaves(g2), strict=True):
        np.testing.assert_allclose(c, a, atol=1e-6)


def test_rejection_in_the_train_step_drops_the_far_responses(tiny_policy):
    """rl.rollout_rs: the responses whose engine log-probs are far (ratio e^(2 n)) leave the
    loss: the gradient is that of the batch without them, micro-batched or not."""
    b = _batch(tiny_policy)
    cfg = dataclasses.replace(losses.LOSSES["grpo"], rollout_rs="sequence", rs_low=0.5,
                              rs_high=2.0)
    loss, m, g = _gradient(tiny_policy, cfg, b)
    without = dict(b, loss_mask=b["loss_mask"] * (np.arange(8) % 2 == 1)[:, None])
    loss_w, _, g_w = _gradient(tiny_policy, losses.LOSSES["grpo"], without)
    assert loss == pytest.approx(loss_w, rel=1e-6, abs=1e-7)
    for a, c in zip(jax.tree.leaves(g_w), jax.tree.leaves(g), strict=True):
        np.testing.assert_allclose(c, a, atol=1e-7)
    import optax

    from frontier_rl.rl.train_step import Trainer

    tr = Trainer(tiny_policy[1], cfg, optax.sgd(0.1), sharding.make_mesh(
        devices=jax.devices()[:1]), micro_batch_size=2)
    params, opt = tr.init(jax.tree.map(lambda x: x.copy(), tiny_policy[2]))
    _, _, m = tr.step(params, opt, b, seed=0)
    assert m["loss"] == pytest.approx(loss, rel=1e-5, abs=1e-6)
    assert m["rs_rejected_frac"] == pytest.approx(0.5)


def test_sequence_terms_on_packed_rows_match_one_response_per_row(tiny_policy):
    """GSPO's sequence ratio and sequence-level IS weights over rows holding several responses
    (the train step's segments, rl.packing="pack") give the loss and gradient of one response
    per row."""
    cfg = dataclasses.replace(losses.LOSSES["grpo"], name="gspo", eps_low=0.2, eps_high=0.28,
                              tis_cap=2.0, rollout_is="sequence", rollout_rs="sequence",
                              rs_low=0.3, rs_high=3.0)
    pad = _batch(tiny_policy, layout="pad")
    packed = _batch(tiny_policy, layout="pack")
    assert packed["valid"].max() > 1  # rows holding several responses
    for b in (pad, packed):
        # 0.3 nats per token below the trainer: weight min(e^(0.3 n), 2), and the responses
        # of 4 and 5 tokens (ratio > 3) rejected
        b["rollout_logp"] = (b["old_logp"] - 0.3 * b["loss_mask"]).astype(np.float32)
    loss0, m0, g0 = _gradient(tiny_policy, cfg, pad)
    loss1, m1, g1 = _gradient(tiny_policy, cfg, packed)
    assert loss1 == pytest.approx(loss0, rel=1e-5)
    assert m1["tis_weight"] == pytest.approx(m0["tis_weight"], rel=1e-5)
    for a, c in zip(jax.tree.leaves(g0), jax.tree.leaves(g1), strict=True):
        np.testing.assert_allclose(c, a, atol=1e-6)


def _pairs():
    """Every registered loss and every registered estimator at least once, in as few runs."""
    ls, es = objectives.loss_names(), objectives.estimator_names()
    return [(ls[i % len(ls)], es[i % len(es)]) for i in range(max(len(ls), len(es)))]


@pytest.mark.slow
@pytest.mark.parametrize("loss,estimator", _pairs())
def test_train_runs_from_the_command_line_with_every_registered_loss_and_estimator(
        tmp_path, loss, estimator):
    import json
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run([sys.executable, "-m", "frontier_rl", "train",
                    "--config=configs/arith_grpo.py:smoke", f"--workdir={tmp_path}",
                    f"--config.rl.loss={loss}", f"--config.rl.adv_estimator={estimator}",
                    "--config.rl.num_steps=2", "--config.eval.every=0"],
                   cwd=root, check=True, capture_output=True, text=True)
    with open(tmp_path / "config.json") as f:
        cfg = json.load(f)
    assert (cfg["rl"]["loss"], cfg["rl"]["adv_estimator"]) == (loss, estimator)
    with open(tmp_path / "metrics.jsonl") as f:
        steps = [r for r in map(json.loads, f) if "train/loss" in r]
    assert len(steps) == 2 and all(np.isfinite(r["train/loss"]) for r in steps)
