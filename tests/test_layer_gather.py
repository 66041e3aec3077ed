"""FSDP gathers a scanned model's decoder layers one at a time (sharding.LayerGather): the same
gradient as one device, less memory than gathering the whole model; the gathers move 16-bit
weights and the gradients are summed over the devices in float32 (sharding.map_rows), as the
GPU compiler builds the train step."""

import json
import os
import re
import subprocess

import jax
import numpy as np
import pytest
from flax import nnx

from frontier_rl.fit import targets
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


def _whole_model(graphdef, params, mesh, dtype=None, *, once=False, dims=None):
    """The gather this replaced: every weight gathered once, before the layers run."""
    return nnx.merge(graphdef, sharding.gather_params(params, mesh, dtype, dims=dims))


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


# Run with the GPU target compiler's Python (launch/target_env.sh gpu): the train step of a
# bfloat16 policy with float32 master weights, scanned (LayerGather) on fsdp=8 and unscanned
# (gather_params, untied LM head) on data=2 x fsdp=4, compiled for 8 compile-only H100s; prints
# {name: {"hlo": the compiled HLO, "weights": every weight's global, stored-shard and stacked
# shape}} as one JSON line.
_GPU_STEPS = """
import json, os
os.environ["JAX_PLATFORMS"] = "cpu"
import jax
from frontier_rl.fit import targets
from frontier_rl.models import ModelConfig, abstract_params
from frontier_rl.rl import sharding
from frontier_rl.rl.losses import LOSSES
from frontier_rl.rl.train_step import OptimConfig, Trainer, make_optimizer

target = targets.parse("h100x8")
devices = target.compile_devices()
out = {}
# the scanned policy on cuDNN's attention (a custom-partitioned op inside the manual region),
# as `model.attention=auto` resolves on a GPU
for name, scan, data, tie, attention in (("scanned", True, 1, True, "cudnn"),
                                         ("unscanned", False, 2, False, "xla")):
    cfg = ModelConfig(vocab_size=64, hidden_size=256, intermediate_size=512, num_layers=2,
                      num_heads=4, num_kv_heads=2, head_dim=64, qk_norm=True,
                      dtype="bfloat16", tie_word_embeddings=tie, scan_layers=scan,
                      remat="full", attention=attention)
    graphdef, params = abstract_params(cfg)
    mesh = sharding.make_mesh(data=data, fsdp=8 // data, devices=devices)
    tr = Trainer(graphdef, LOSSES["grpo"], make_optimizer(OptimConfig()), mesh,
                 logits_chunk=0)
    with targets.compiling_for(target, devices):
        hlo = tr.lower_step(params, 8, 64).compile().as_text()
    shapes = [(tuple(x.shape), s.shard_shape(x.shape)) for x, s in zip(
        jax.tree.leaves(params), jax.tree.leaves(sharding.param_shardings(params, mesh)))]
    weights = {w for g, s in shapes for w in (g, s, (cfg.num_layers, *g), (cfg.num_layers, *s))}
    out[name] = {"hlo": hlo, "weights": sorted(weights)}
print(json.dumps(out))
"""

_COLLECTIVE = re.compile(r"=\s+(?P<shape>.+?)\s+(?P<op>all-gather|all-reduce|reduce-scatter|"
                         r"all-to-all|collective-permute)(?:-start)?\(")
_ARRAY = re.compile(r"\b(pred|[su]\d+|bf16|f16|f32|f64|f8\w*?)\[([\d,]*)\]")


def _arrays(hlo: str) -> list[tuple[str, str, tuple[int, ...]]]:
    """(op, dtype, dims) of every array a collective of `hlo` moves (its operands and results;
    a combined collective moves several)."""
    out = []
    for line in hlo.splitlines():
        m = _COLLECTIVE.search(line)
        if m:
            out += [(m.group("op"), dt, tuple(int(d) for d in dims.split(",") if d))
                    for dt, dims in _ARRAY.findall(m.group("shape"))]
    return out


@pytest.mark.target
def test_gpu_compiled_step_gathers_16_bit_weights_and_reduces_gradients_in_float32():
    """As XLA:GPU compiles the train step (after its SPMD partitioner), the FSDP weights are
    all-gathered in bfloat16 and every cross-device sum of the gradients is float32, scanned
    (LayerGather) and unscanned (gather_params). The CPU compiler cannot show this: it
    promotes a bfloat16 all-reduce to float32, and XLA:GPU does not."""
    python = targets.target_python("gpu")
    if python is None:
        pytest.skip("no GPU target compiler: `source launch/target_env.sh gpu` makes it")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)  # the suite's 8 fake CPU devices are not the target's
    r = subprocess.run([python, "-c", _GPU_STEPS], cwd=root, env=env, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    wrong = {}
    for name, step in json.loads(r.stdout.strip().splitlines()[-1]).items():
        # matched up to the order of dimensions: XLA may gather a transposed copy
        weights = {tuple(sorted(w)) for w in step["weights"]}
        arrays = _arrays(step["hlo"])
        gathered = [(op, dt, dims) for op, dt, dims in arrays
                    if op == "all-gather" and len(dims) > 1 and tuple(sorted(dims)) in weights]
        # the gradients' sums: reduce-scatters and all-reduces (and the all-to-all the
        # partitioner makes of an embedding lookup's gradient)
        summed = [(op, dt, dims) for op, dt, dims in arrays
                  if op in ("all-reduce", "reduce-scatter", "all-to-all")]
        assert gathered and [a for a in summed if a[0] == "reduce-scatter" and a[1] == "f32"
                             and tuple(sorted(a[2])) in weights], (name, gathered, summed)
        bad = ([a for a in gathered if a[1] != "bf16"]
               + [a for a in summed if a[1] in ("bf16", "f16")])
        if bad:
            wrong[name] = sorted(set(bad))
    assert not wrong, wrong
