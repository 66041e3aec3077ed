"""FSDP gathers a scanned model's decoder layers one at a time (sharding.LayerGather): the same
gradient as one device, less memory than gathering the whole model, float32 gradient
reductions."""

import re

import jax
import numpy as np
import pytest
from flax import nnx

from frontier_rl.models import ModelConfig, Transformer
from frontier_rl.rl import batch as batch_lib
from frontier_rl.rl import sharding
from frontier_rl.rl.losses import LOSSES
from frontier_rl.rl.train_step import OptimConfig, Trainer, make_optimizer

pytestmark = pytest.mark.skipif(jax.device_count() < 8,
                                reason="needs 8 devices (conftest sets 8 fake CPU devices)")


def _policy(**kw):
    cfg = ModelConfig(**{**dict(vocab_size=48, hidden_size=64, intermediate_size=128,
                                num_layers=3, num_heads=4, num_kv_heads=2, head_dim=16,
                                qk_norm=True, scan_layers=True, remat="full"), **kw})
    return cfg, *nnx.split(Transformer(cfg, rngs=nnx.Rngs(0)), nnx.Param)


def _whole_model(graphdef, params, mesh, dtype=None):
    """The gather this replaced: every weight gathered once, before the layers run."""
    return nnx.merge(graphdef, sharding.gather_params(params, mesh, dtype))


def test_per_layer_gather_gives_the_single_device_gradient():
    from test_batch_layouts import _groups

    cfg, graphdef, params = _policy()
    groups, prompts = _groups(cfg.vocab_size)
    out = {}
    for name, mesh in (("one", sharding.make_mesh(devices=jax.devices()[:1])),
                       ("fsdp", sharding.make_mesh(data=1, fsdp=8))):
        tr = Trainer(graphdef, LOSSES["grpo"], make_optimizer(OptimConfig()), mesh,
                     layout="pack", logits_chunk=0)
        placed, _ = tr.init(params)
        batch = batch_lib.pack(groups, prompts, pad_id=0, prompt_buckets=(16,),
                               row_buckets=(8,), row_multiple=tr.row_multiple, layout="pack")
        loss, _, grads = jax.device_get(tr.gradient(placed, batch))
        out[name] = loss, grads
    np.testing.assert_allclose(out["fsdp"][0], out["one"][0], atol=1e-6)
    for a, b in zip(jax.tree.leaves(out["fsdp"][1]), jax.tree.leaves(out["one"][1]),
                    strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_per_layer_gather_needs_less_memory_and_reduces_gradients_in_float32(monkeypatch):
    cfg, graphdef, params = _policy(hidden_size=256, intermediate_size=1024, num_layers=6,
                                    head_dim=64, dtype="bfloat16", vocab_size=64)
    mesh = sharding.make_mesh(data=1, fsdp=8)
    temp = {}
    for name in ("whole", "per_layer"):
        if name == "whole":
            monkeypatch.setattr(sharding, "gathered_model", _whole_model)
        else:
            monkeypatch.undo()
        tr = Trainer(graphdef, LOSSES["grpo"], make_optimizer(OptimConfig()), mesh,
                     logits_chunk=0)
        compiled = tr.lower_step(params, 8, 32).compile()
        temp[name] = compiled.memory_analysis().temp_size_in_bytes
        text = compiled.as_text()
        # the gradients' cross-device sums (reduce-scatter, or all-reduce on CPU) are float32
        sums = [ln for ln in text.splitlines() if re.search(r"(all-reduce|reduce-scatter)\(", ln)]
        assert sums and not [ln for ln in sums if "bf16[" in ln.split("=", 1)[1][:80]], name
    # one gathered 16-bit layer at a time instead of the whole model (6 layers)
    assert temp["per_layer"] < 0.6 * temp["whole"], temp


def test_forward_passes_gather_the_layers_once_and_match_one_device():
    """The sampler's decode loop and the entropy pass gather a scanned model's layers once
    (sharding.GatheredLayers): the same tokens, log-probs and entropies as one device."""
    from frontier_rl.entropy import PromptEntropy
    from frontier_rl.rollout.sampler import Sampler

    cfg, graphdef, params = _policy()
    prompts = [[5, 6, 7], [9, 10, 11, 12, 13], [14, 15], [20, 21, 22, 23]]
    out = {}
    for name, mesh in (("none", None), ("fsdp", sharding.make_mesh(data=1, fsdp=8))):
        p = params if mesh is None else jax.device_put(
            params, sharding.param_shardings(params, mesh))
        sampler = Sampler(graphdef, cfg, eos_id=2, pad_id=0, prompt_buckets=(8,),
                          max_new_tokens=12, mesh=mesh)
        res = sampler.sample(p, prompts, 2, seed=3)
        # 16 rows in two groups of 8: the gathered copy serves both
        ent = PromptEntropy(graphdef, pad_id=0, prompt_buckets=(8,), batch_buckets=(16,),
                            mesh=mesh, micro_batch=8)(p, prompts)
        out[name] = res, ent
    (a, ea), (b, eb) = out["none"], out["fsdp"]
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_allclose(a.logps, b.logps, atol=1e-5)
    np.testing.assert_allclose(ea, eb, atol=1e-5)
