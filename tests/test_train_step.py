"""The jitted RL update: packing, learning direction, sharding, compile-once."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from frontier_rl.rl import sharding
from frontier_rl.rl.batch import pack
from frontier_rl.rl.losses import LOSSES
from frontier_rl.rl.train_step import OptimConfig, Trainer, make_optimizer
from frontier_rl.rollout.sampler import Sampler
from frontier_rl.selection.base import Group

PROMPTS = [[1, 5, 14, 6, 15], [1, 7, 8, 14, 9, 14, 4, 15]]


def _groups(tiny_policy, tokenizer, seed=0):
    cfg, graphdef, params = tiny_policy
    sampler = Sampler(graphdef, cfg, eos_id=tokenizer.eos_token_id,
                      pad_id=tokenizer.pad_token_id, max_new_tokens=6)
    res = sampler.sample(params, PROMPTS, 4, seed=seed)
    groups = []
    for j in range(len(PROMPTS)):
        s = slice(4 * j, 4 * j + 4)
        rewards = np.array([1, 0, 1, 0], np.float32)
        groups.append(Group(index=j, prompt_id=str(j), outcomes=rewards.astype(np.int8),
                            rewards=rewards, lengths=res.lengths[s],
                            mean_entropy=np.zeros(4, np.float32), tokens=res.tokens[s],
                            logps=res.logps[s]))
    return groups


def _pack(groups, row_multiple=2):
    return pack(groups, PROMPTS, pad_id=0, prompt_buckets=(16,), row_buckets=(8, 16),
                row_multiple=row_multiple)


def test_pack_layout(tiny_policy, tokenizer):
    groups = _groups(tiny_policy, tokenizer)
    b = _pack(groups)
    assert b["tokens"].shape == (8, 16 + 6)
    g = groups[1]
    row = 4 + 2  # group 1, sample 2
    n = int(g.lengths[2])
    np.testing.assert_array_equal(b["tokens"][row, 16 - 8:16], PROMPTS[1])
    np.testing.assert_array_equal(b["tokens"][row, 16:16 + n], g.tokens[2, :n])
    assert b["loss_mask"][row].sum() == n
    assert b["loss_mask"][row, 15] == 1 and b["loss_mask"][row, 14] == 0
    np.testing.assert_allclose(b["old_logp"][row, 15:15 + n], g.logps[2, :n])
    assert b["valid"][row].sum() == len(PROMPTS[1]) + n
    np.testing.assert_allclose(b["advantages"][:4], [0.866025, -0.866025] * 2, atol=1e-5)


def _trainer(tiny_policy, mesh, minibatches=1, lr=1e-2):
    cfg, graphdef, params = tiny_policy
    tr = Trainer(graphdef, LOSSES["grpo"], make_optimizer(OptimConfig(learning_rate=lr)), mesh,
                 epochs=1, minibatches=minibatches)
    return tr, *tr.init(jax.tree.map(lambda x: x.copy(), params))


def test_update_moves_logps_in_advantage_direction(tiny_policy, tokenizer):
    groups = _groups(tiny_policy, tokenizer)
    b = _pack(groups)
    mesh = sharding.make_mesh(devices=jax.devices()[:1])
    tr, params, opt = _trainer(tiny_policy, mesh)
    before = tr.logps(params, b["tokens"], b["valid"])
    expected_grad_norm = _policy_gradient_norm(tiny_policy[1], params, b)
    params, opt, m = tr.step(params, opt, b, seed=0)
    after = tr.logps(params, b["tokens"], b["valid"])
    delta = ((after - before) * b["loss_mask"]).sum(axis=1)
    adv = b["advantages"]
    assert np.all(delta[adv > 0] > 0) and np.all(delta[adv < 0] < 0)
    # One update on fresh samples: the ratio is 1 (the sampler's log-probs are the old policy's),
    # nothing is clipped, and the loss is -mean(A) = 0 since advantages sum to 0 in a group.
    assert m["clip_frac"] == 0.0 and m["approx_kl_old"] < 1e-8
    assert m["loss"] == pytest.approx(0.0, abs=1e-5)
    # ... and its gradient is the vanilla policy gradient -1/N sum_i A_i mean_t grad log p.
    assert m["grad_norm"] == pytest.approx(expected_grad_norm, rel=1e-3)


def _policy_gradient_norm(graphdef, params, b):
    """|grad of -1/N sum_i A_i mean_t log p(y_it)|: REINFORCE with the group baseline."""
    from flax import nnx

    from frontier_rl.rl.train_step import sequence_logps

    mask = b["loss_mask"]

    def objective(p):
        logp, _ = sequence_logps(nnx.merge(graphdef, p), b["tokens"], b["valid"])
        per_seq = (logp * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1.0)
        return -(b["advantages"] * per_seq).sum() / (mask.sum(axis=1) > 0).sum()

    grads = jax.grad(objective)(params)
    return float(np.sqrt(sum(np.sum(np.square(g)) for g in jax.tree.leaves(grads))))


def test_pack_without_std_norm(tiny_policy, tokenizer):
    """rl.adv_std_norm=False: the trainer's batch carries A = r - mean (here +-0.5, not
    +-0.866); a selector's own baseline and scale are kept as they are."""
    groups = _groups(tiny_policy, tokenizer)
    groups[1].adv_baseline, groups[1].adv_scale = 0.25, 0.5
    b = pack(groups, PROMPTS, pad_id=0, prompt_buckets=(16,), row_buckets=(8, 16),
             row_multiple=2, std_norm=False)
    np.testing.assert_allclose(b["advantages"][:4], [0.5, -0.5, 0.5, -0.5])
    np.testing.assert_allclose(b["advantages"][4:8], [1.5, -0.5, 1.5, -0.5])
    np.testing.assert_allclose(_pack(groups)["advantages"][:4], [0.866025, -0.866025] * 2,
                               atol=1e-5)


def test_sharded_mesh_matches_single_device(tiny_policy, tokenizer):
    if jax.device_count() < 4:
        pytest.skip("needs XLA_FLAGS=--xla_force_host_platform_device_count=8 (conftest)")
    b = _pack(_groups(tiny_policy, tokenizer), row_multiple=4)
    out = []
    for mesh in (sharding.make_mesh(devices=jax.devices()[:1]),
                 sharding.make_mesh(data=2, model=2, devices=jax.devices()[:4])):
        tr, params, opt = _trainer(tiny_policy, mesh)
        # Adam's moments live where their parameters do; its step count is replicated.
        placed = {sharding._path_str(p): x.sharding.spec
                  for p, x in jax.tree_util.tree_flatten_with_path(opt)[0]}
        q = "layers/0/self_attn/q_proj/kernel"
        moments = [v for k, v in placed.items() if k.endswith(q)]
        assert len(moments) == 2 and all(v == params["layers"][0]["self_attn"]["q_proj"][
            "kernel"].sharding.spec for v in moments)
        assert all(v == jax.sharding.PartitionSpec() for k, v in placed.items()
                   if k.endswith("count"))
        params, opt, m = tr.step(params, opt, b, seed=0)
        out.append((jax.device_get(params), m))
    (p1, m1), (p2, m2) = out
    assert m1["loss"] == pytest.approx(m2["loss"], abs=1e-5)
    for a, c in zip(jax.tree.leaves(p1), jax.tree.leaves(p2), strict=True):
        np.testing.assert_allclose(a, c, atol=1e-4)  # Adam amplifies reduction order


def test_param_rules_shard_on_fsdp_and_model_axes(tiny_policy):
    if jax.device_count() < 8:
        pytest.skip("needs 8 fake devices")
    P = jax.sharding.PartitionSpec
    mesh = sharding.make_mesh(data=2, fsdp=2, model=2)
    specs = jax.tree_util.tree_flatten_with_path(sharding.param_shardings(tiny_policy[2], mesh))[0]
    named = {sharding._path_str(p): s.spec for p, s in specs}
    assert named["layers/0/mlp/gate_proj/kernel"] == P("fsdp", "model")
    assert named["layers/0/self_attn/k_proj/kernel"] == P("fsdp", "model")
    assert named["layers/0/mlp/down_proj/kernel"] == P("model", "fsdp")
    assert named["layers/0/self_attn/o_proj/kernel"] == P("model", "fsdp")
    assert named["embed_tokens/embedding"] == P("model", "fsdp")  # vocab on model
    assert named["norm/weight"] == P()
    assert named["layers/0/self_attn/q_norm/weight"] == P()
    # An axis that does not divide its dimension is dropped (tiny models on big meshes).
    assert sharding._fit(P("fsdp", "model"), (12, 16), sharding.make_mesh(fsdp=8)) == \
        P(None, "model")
    assert sharding._fit(P(("data", "fsdp")), (12,), mesh) == P(("data", "fsdp"))
    assert sharding._fit(P(("data", "fsdp")), (6,), mesh) == P(None)


@pytest.mark.all_devices
def test_make_mesh_checks_the_device_count():
    if jax.device_count() < 8:
        pytest.skip("needs 8 fake devices")
    mesh = sharding.make_mesh(fsdp=2, model=2)
    assert dict(mesh.shape) == {"data": 2, "fsdp": 2, "model": 2}
    assert sharding.row_multiple(mesh) == 4
    assert sharding.batch_sharding(mesh).spec == jax.sharding.PartitionSpec(("data", "fsdp"))
    with pytest.raises(ValueError, match=r"mesh.fsdp=3 x mesh.model=1"):
        sharding.make_mesh(fsdp=3)
    with pytest.raises(ValueError, match=r"mesh.data=2 x mesh.fsdp=2 x mesh.model=1 = 4 != 8"):
        sharding.make_mesh(data=2, fsdp=2)
    with pytest.raises(ValueError, match=r"mesh.model=0"):
        sharding.make_mesh(model=0)


def test_compiles_once_across_steps(tiny_policy, tokenizer):
    mesh = sharding.make_mesh(devices=jax.devices()[:1])
    tr, params, opt = _trainer(tiny_policy, mesh, minibatches=2)
    for seed in range(3):
        b = _pack(_groups(tiny_policy, tokenizer, seed=seed))
        params, opt, _ = tr.step(params, opt, b, seed=seed)
    assert tr.compile_count == 1


def test_rejects_ragged_rows(tiny_policy, tokenizer):
    mesh = sharding.make_mesh(devices=jax.devices()[:1])
    tr, params, opt = _trainer(tiny_policy, mesh, minibatches=3)
    with pytest.raises(ValueError, match="multiple of 3"):
        tr.step(params, opt, _pack(_groups(tiny_policy, tokenizer)), seed=0)


def test_pack_uses_a_selector_baseline_when_given(tiny_policy, tokenizer):
    groups = _groups(tiny_policy, tokenizer)
    groups[0].adv_baseline, groups[0].adv_scale = 0.25, 0.5
    b = _pack(groups)
    np.testing.assert_allclose(b["advantages"][:4], [1.5, -0.5, 1.5, -0.5])  # (r - 0.25) / 0.5
    np.testing.assert_allclose(b["advantages"][4:8], [0.866025, -0.866025] * 2, atol=1e-5)


def _noisy_batch(tiny_policy, tokenizer):
    """A packed batch whose old log-probs are off the current policy (ratios != 1, some
    clipped) with a reference policy beside it, so every term of the loss is exercised."""
    b = _pack(_groups(tiny_policy, tokenizer))
    rng = np.random.default_rng(0)
    mask = b["loss_mask"]
    b["old_logp"] = (b["old_logp"] + 0.3 * rng.standard_normal(mask.shape) * mask).astype(
        np.float32)
    b["ref_logp"] = (b["old_logp"] - 0.2 * rng.random(mask.shape) * mask).astype(np.float32)
    return b


@pytest.mark.parametrize("chunk", [7, 16])
def test_chunked_logps_match_one_chunk(tiny_policy, tokenizer, chunk):
    """Log-probs, entropies and their gradients from chunked logits (L - 1 = 21 targets: a
    ragged last chunk) equal the one-chunk computation."""
    from flax import nnx

    from frontier_rl.rl.train_step import sequence_logps

    _, graphdef, params = tiny_policy
    b = _pack(_groups(tiny_policy, tokenizer))
    weights = np.random.default_rng(1).standard_normal(b["loss_mask"].shape).astype(np.float32)

    def run(p, c):
        logp, ent = sequence_logps(nnx.merge(graphdef, p), b["tokens"], b["valid"], 0.7, c)
        return jnp.sum(logp * weights) + jnp.sum(ent * weights), (logp, ent)

    fn = jax.jit(jax.value_and_grad(run, has_aux=True), static_argnums=1)
    (_, (logp0, ent0)), g0 = fn(params, 0)
    (_, (logp1, ent1)), g1 = fn(params, chunk)
    assert logp1.shape == logp0.shape == b["loss_mask"].shape
    np.testing.assert_allclose(logp1, logp0, atol=1e-5)
    np.testing.assert_allclose(ent1, ent0, atol=1e-5)
    for a, c in zip(jax.tree.leaves(g0), jax.tree.leaves(g1), strict=True):
        np.testing.assert_allclose(c, a, atol=1e-5 * max(1.0, float(np.abs(a).max())))


# Accumulation does not depend on the loss: GRPO's case runs by default, the others in CI.
@pytest.mark.parametrize("loss", ["grpo", pytest.param("dapo", marks=pytest.mark.slow),
                                  pytest.param("greso", marks=pytest.mark.slow)])
def test_micro_batches_give_the_minibatch_update(tiny_policy, tokenizer, loss):
    """Micro-batches of 4 or 2 rows accumulate the gradient and metrics of the whole 8-row
    minibatch, for token-mean (DAPO), seq-mean-token-mean (GRPO, with a KL term) and GRESO's
    token-mean GRPO with an entropy bonus and no dual clip."""
    import dataclasses

    import optax

    from frontier_rl.rl.losses import LOSSES

    b = _noisy_batch(tiny_policy, tokenizer)
    mesh = sharding.make_mesh(devices=jax.devices()[:1])
    loss_cfg = dataclasses.replace(LOSSES["dapo" if loss == "greso" else loss],
                                   kl_coef=0.1 if loss == "grpo" else 0.0)
    if loss == "greso":
        loss_cfg = dataclasses.replace(loss_cfg, eps_high=0.2, clip_ratio_c=0.0,
                                       entropy_coef=0.01)
    out = []
    for micro in (0, 4, 2):
        # Plain SGD, so the parameters move by exactly the accumulated gradient.
        tr = Trainer(tiny_policy[1], loss_cfg, optax.sgd(0.1), mesh, micro_batch_size=micro)
        params, opt = tr.init(jax.tree.map(lambda x: x.copy(), tiny_policy[2]))
        params, _, m = tr.step(params, opt, b, seed=0)
        out.append((jax.device_get(params), m))
    (p0, m0) = out[0]
    assert m0["clip_frac"] > 0 and m0["approx_kl_old"] > 0
    assert ("entropy_bonus" in m0) == (loss == "greso")
    if loss == "greso":
        assert m0["entropy_bonus"] == pytest.approx(m0["entropy"], rel=1e-5)  # both token-mean
    for p, m in out[1:]:
        assert m.keys() == m0.keys()
        for k in m0:
            assert m[k] == pytest.approx(m0[k], rel=1e-5, abs=1e-6), k
        for a, c in zip(jax.tree.leaves(p0), jax.tree.leaves(p), strict=True):
            np.testing.assert_allclose(c, a, atol=1e-6)


def test_non_finite_updates_are_skipped(tiny_policy, tokenizer):
    """NaN advantages: every update is skipped (parameters and Adam state untouched, counted
    in skipped_updates, the other metrics finite); NaN in one row's advantage skips only the
    update of the minibatch holding it."""
    b = _pack(_groups(tiny_policy, tokenizer))
    mesh = sharding.make_mesh(devices=jax.devices()[:1])
    tr = Trainer(tiny_policy[1], LOSSES["grpo"], make_optimizer(OptimConfig(learning_rate=1e-2)),
                 mesh, epochs=2, minibatches=2)
    params, opt = tr.init(jax.tree.map(lambda x: x.copy(), tiny_policy[2]))
    before = jax.device_get((params, opt))
    bad = dict(b, advantages=np.full_like(b["advantages"], np.nan))
    params, opt, m = tr.step(params, opt, bad, seed=0)
    assert m["skipped_updates"] == 4  # 2 epochs x 2 minibatches
    assert all(np.isfinite(v) for v in m.values())
    for x, y in zip(jax.tree.leaves(before), jax.tree.leaves(jax.device_get((params, opt))),
                    strict=True):
        np.testing.assert_array_equal(x, y)
    one = dict(b, advantages=b["advantages"].copy())
    one["advantages"][0] = np.nan
    params, opt, m = tr.step(params, opt, one, seed=0)
    assert m["skipped_updates"] == 2  # the minibatch with row 0, once per epoch
    assert np.isfinite(m["loss"]) and np.isfinite(m["grad_norm"]) and m["grad_norm"] > 0
    moved = jax.device_get(params)
    assert any(not np.array_equal(x, y) for x, y in
               zip(jax.tree.leaves(before[0]), jax.tree.leaves(moved), strict=True))


def test_lower_allocates_nothing(tiny_policy):
    """lower_step / lower_logps compile for abstract parameters on a sharded mesh without
    creating an array (what the fit check relies on)."""
    if jax.device_count() < 8:
        pytest.skip("needs 8 fake devices")
    from frontier_rl.fit.accounting import abstract

    _, graphdef, params = tiny_policy
    shapes = abstract(params)
    tr = Trainer(graphdef, LOSSES["dapo"], make_optimizer(OptimConfig()),
                 sharding.make_mesh(data=2, fsdp=2, model=2), minibatches=2,
                 micro_batch_size=4, logits_chunk=8)
    live = len(jax.live_arrays())
    step = tr.lower_step(shapes, 16, 22).compile()
    logps = tr.lower_logps(shapes, 16, 22).compile()
    assert len(jax.live_arrays()) == live
    # XLA sized both for the shapes alone: the step's arguments hold the optimizer state too
    step_args = step.memory_analysis().argument_size_in_bytes
    assert 0 < logps.memory_analysis().argument_size_in_bytes < step_args
    with pytest.raises(ValueError, match="multiple of 8"):
        tr.lower_step(shapes, 12, 22)


def test_truncated_importance_sampling_reaches_the_update(tiny_policy, tokenizer):
    """rl.tis_cap: the batch's rollout_logp (the engine's) weights the loss inside the step;
    an engine far below the trainer on every token caps every weight."""
    import dataclasses

    cfg, graphdef, params = tiny_policy
    b = _pack(_groups(tiny_policy, tokenizer))
    mesh = sharding.make_mesh(devices=jax.devices()[:1])
    tr = Trainer(graphdef, dataclasses.replace(LOSSES["grpo"], tis_cap=2.0),
                 make_optimizer(OptimConfig(learning_rate=1e-2)), mesh)
    p0, o0 = tr.init(jax.tree.map(lambda x: x.copy(), params))
    _, _, same = tr.step(p0, o0, dict(b), seed=0)  # no rollout_logp: the engine is the trainer
    assert same["tis_weight"] == pytest.approx(1.0) and same["tis_capped_frac"] == 0.0
    p0, o0 = tr.init(jax.tree.map(lambda x: x.copy(), params))
    _, _, far = tr.step(p0, o0, {**b, "rollout_logp": b["old_logp"] - 5.0}, seed=0)
    assert far["tis_weight"] == pytest.approx(2.0) and far["tis_capped_frac"] == 1.0
    assert far["grad_norm"] == pytest.approx(2.0 * same["grad_norm"], rel=1e-4)
