"""Mixed precision: float32 master weights under bfloat16 compute.

An RL update at lr 1e-6 moves a weight of ~0.02 by ~1e-6 (Adam's first step is lr * sign(g)),
far below half of bfloat16's spacing there (2^-14 ~ 6e-5), so bfloat16 master weights would
not move at all. A bfloat16 checkpoint therefore loads as float32 parameters computing in
bfloat16, and the bfloat16 forward must stay close to the float32 one.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from safetensors import safe_open

from frontier_rl.models import Transformer, family_preset, load_pretrained, save_pretrained
from frontier_rl.rl.train_step import OptimConfig, make_optimizer

TINY = dict(vocab_size=97, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4,
            num_kv_heads=2, head_dim=16)
LR = 1e-6
# bfloat16 keeps 8 significant bits (rounding error up to 2^-9 relative per op). Measured on
# this model over 4 seeds: the loss (~4.58) moves by 6e-6..4e-5 relative, the O(1) logits by at
# most 3.9e-3. The bounds leave a margin of 25x and 5x.
LOSS_RTOL = 1e-3
LOGITS_ATOL = 2e-2


def batch(seed: int = 0, rows: int = 4, length: int = 16):
    tokens = np.random.default_rng(seed).integers(0, TINY["vocab_size"], (rows, length))
    positions = np.broadcast_to(np.arange(length), (rows, length))
    return jnp.asarray(tokens, jnp.int32), jnp.asarray(positions, jnp.int32)


def loss_fn(graphdef, tokens, positions):
    """Mean next-token cross-entropy, and the float32 logits."""

    def loss(params):
        logits, _ = nnx.merge(graphdef, params)(tokens, positions)
        logp = jax.nn.log_softmax(logits[:, :-1])
        return -jnp.mean(jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1)), logits

    return loss


def adamw_step(model: Transformer):
    """Parameters before and after one clipped AdamW step at LR on a cross-entropy loss."""
    graphdef, params = nnx.split(model, nnx.Param)
    tx = make_optimizer(OptimConfig(learning_rate=LR))

    @jax.jit
    def step(params):
        grads, _ = jax.grad(loss_fn(graphdef, *batch()), has_aux=True)(params)
        updates, _ = tx.update(grads, tx.init(params), params)
        return optax.apply_updates(params, updates)

    return params, step(params)


@pytest.fixture(scope="module")
def bf16_checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("bf16")
    cfg = family_preset("qwen2", **TINY, dtype="bfloat16")
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    save_pretrained(model, cfg, path)
    return path, model


def test_bf16_checkpoint_loads_as_float32_params_with_bf16_compute(bf16_checkpoint):
    path, saved = bf16_checkpoint
    with safe_open(path / "model.safetensors", framework="numpy") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"BF16"}
    model, cfg = load_pretrained(path)
    assert (cfg.dtype, cfg.param_dtype) == ("bfloat16", "float32")
    params = jax.tree.leaves(nnx.state(model, nnx.Param))
    assert {p.dtype for p in params} == {jnp.dtype(jnp.float32)}
    # The values are the saved float32 weights rounded to bfloat16, nothing else.
    for got, want in zip(params, jax.tree.leaves(nnx.state(saved, nnx.Param)), strict=True):
        np.testing.assert_array_equal(got, np.asarray(want).astype(jnp.bfloat16).astype(np.float32))
    tokens, positions = batch()
    hidden, _ = model.embed_and_hidden(tokens, positions)
    assert hidden.dtype == jnp.bfloat16 and model.logits(hidden).dtype == jnp.float32
    # `dtype` overrides the compute dtype; parameters follow `param_dtype`.
    _, cfg32 = load_pretrained(path, dtype="float32")
    assert (cfg32.dtype, cfg32.param_dtype) == ("float32", "float32")


def test_lr_1e6_step_moves_float32_master_weights_not_bf16_ones(bf16_checkpoint):
    path, _ = bf16_checkpoint
    moved = {}
    for param_dtype in ("float32", "bfloat16"):
        model, _ = load_pretrained(path, param_dtype=param_dtype)
        before, after = adamw_step(model)
        before = np.concatenate([np.asarray(x, np.float32).ravel()
                                 for x in jax.tree.leaves(before)])
        after = np.concatenate([np.asarray(x, np.float32).ravel()
                                for x in jax.tree.leaves(after)])
        big = np.abs(before) > 0.01  # weights of ~0.02 (the init scale) and the norms' ~1
        moved[param_dtype] = np.mean(after[big] != before[big])
        if param_dtype == "float32":
            step = np.abs(after - before)[big]
            assert np.median(step) == pytest.approx(LR, rel=0.05)  # Adam: lr * sign(g)
    assert moved["float32"] > 0.99
    assert moved["bfloat16"] == 0.0  # the counterfactual: the same step is lost entirely


def test_bf16_compute_tracks_float32_compute():
    cfg32 = family_preset("qwen2", **TINY)
    model32 = Transformer(cfg32, rngs=nnx.Rngs(1))
    cfg16 = dataclasses.replace(cfg32, dtype="bfloat16")
    graphdef16 = nnx.graphdef(nnx.eval_shape(lambda: Transformer(cfg16, rngs=nnx.Rngs(0))))
    graphdef32, params = nnx.split(model32, nnx.Param)
    tokens, positions = batch(seed=1)
    loss32, logits32 = jax.jit(loss_fn(graphdef32, tokens, positions))(params)
    loss16, logits16 = jax.jit(loss_fn(graphdef16, tokens, positions))(params)
    assert logits16.dtype == jnp.float32
    assert float(loss16) == pytest.approx(float(loss32), rel=LOSS_RTOL)
    np.testing.assert_allclose(logits16, logits32, atol=LOGITS_ATOL, rtol=0)
    assert float(jnp.max(jnp.abs(logits16 - logits32))) > 0  # bfloat16 really was used
