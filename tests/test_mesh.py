"""The device functions on (data, fsdp, model) meshes of 8 fake CPU devices give the
single-device results: one train step (loss, metrics, updated parameters), sampled tokens
(temperature 1, top-p 0.7) and prompt entropies. And the suite's one end-to-end run over all 8
devices: a run on a data=4 x fsdp=2 mesh resumes exactly."""

import math
import os

import jax
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

from frontier_rl.entropy import PromptEntropy
from frontier_rl.models import ModelConfig, Transformer
from frontier_rl.rl import sharding
from frontier_rl.rl.losses import LOSSES
from frontier_rl.rl.train_step import Trainer
from frontier_rl.rollout.sampler import Sampler

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MESHES = [(1, 1, 1), (8, 1, 1), (2, 4, 1), (2, 2, 2)]
PROMPTS = [[1, 5, 9, 3], [1, 7, 2], [1, 4, 4, 8, 6, 2, 3], [1, 30]]

pytestmark = pytest.mark.skipif(jax.device_count() < 8, reason="needs 8 fake devices (conftest)")


@pytest.fixture(scope="module")
def policy():
    # Every sharded dimension divides 2 and 4: vocab 32, hidden 32, 4 heads / 2 KV heads of 8.
    cfg = ModelConfig(vocab_size=32, hidden_size=32, intermediate_size=64, num_layers=1,
                      num_heads=4, num_kv_heads=2, head_dim=8, qk_norm=True)
    graphdef, params = nnx.split(Transformer(cfg, rngs=nnx.Rngs(0)), nnx.Param)
    return cfg, graphdef, params


@pytest.fixture(scope="module")
def batch():
    rng = np.random.default_rng(0)
    rows, plen, length = 8, 6, 14
    tokens = rng.integers(1, 32, (rows, length)).astype(np.int32)
    valid = np.ones((rows, length), np.int32)
    loss_mask = np.zeros((rows, length - 1), np.float32)
    for r in range(rows):
        valid[r, :r % 3] = 0
        loss_mask[r, plen - 1:plen - 1 + 3 + r] = 1.0
    return {"tokens": tokens, "valid": valid, "loss_mask": loss_mask,
            "old_logp": (-3.4 + 0.3 * rng.standard_normal((rows, length - 1))).astype(
                np.float32) * loss_mask,
            "advantages": rng.standard_normal(rows).astype(np.float32)}


def _named(tree) -> dict:
    return {sharding._path_str(p): x for p, x in jax.tree_util.tree_flatten_with_path(tree)[0]}


@pytest.fixture(scope="module")
def results(policy, batch):
    """Per mesh shape: the outputs of a sample, a train step and an entropy pass (computed on
    first use, so each shape compiles once for all the tests)."""
    cache = {}

    def get(shape):
        if shape not in cache:
            cache[shape] = _run(policy, batch, shape)
        return cache[shape]

    return get


def _run(policy, batch, shape):
    cfg, graphdef, params = policy
    mesh = sharding.make_mesh(*shape, devices=jax.devices()[:math.prod(shape)])
    # Plain SGD: the parameters move by exactly the gradient, which the comparison then pins.
    trainer = Trainer(graphdef, LOSSES["grpo"], optax.sgd(0.5), mesh, logits_chunk=5)
    params, opt = trainer.init(jax.tree.map(lambda x: x.copy(), params))
    placed = _named(params)
    # top_k=8 < vocab: the nucleus search takes the top-k path and its sorted fallback;
    # prefill_tokens=8: the prefill runs one 8-token row per device at a time.
    sampler = Sampler(graphdef, cfg, eos_id=(2, 3), pad_id=0, prompt_buckets=(8,),
                      batch_buckets=(16,), max_new_tokens=5, mesh=mesh, top_k=8,
                      prefill_tokens=8)
    sample = sampler.sample(params, PROMPTS, 2, seed=4, top_p=0.7)
    entropy = PromptEntropy(graphdef, pad_id=0, prompt_buckets=(8,), batch_buckets=(16,),
                            mesh=mesh, micro_batch=8, chunk=3)
    ent = entropy(params, PROMPTS * 3)
    params, _, metrics = trainer.step(params, opt, batch, seed=0)
    return dict(mesh=mesh, placed=placed, sample=sample, entropy=ent,
                metrics=metrics, params=jax.device_get(params), sampler=sampler,
                entropy_fn=entropy)


def test_parameters_are_split_as_the_rules_say(results):
    """fsdp=4 splits every weight matrix 4 ways on its non-tensor-parallel dimension; model=2
    splits column-parallel outputs, row-parallel inputs and the vocabulary."""
    placed = results((2, 4, 1))["placed"]
    assert placed["layers/0/self_attn/q_proj/kernel"].sharding.shard_shape((32, 32)) == (8, 32)
    assert placed["layers/0/mlp/down_proj/kernel"].sharding.shard_shape((64, 32)) == (64, 8)
    assert placed["embed_tokens/embedding"].sharding.shard_shape((32, 32)) == (32, 8)
    placed = results((2, 2, 2))["placed"]
    q = placed["layers/0/self_attn/q_proj/kernel"]
    assert q.sharding.spec == P("fsdp", "model") and q.sharding.shard_shape((32, 32)) == (16, 16)
    assert placed["layers/0/self_attn/k_proj/kernel"].sharding.shard_shape((32, 16)) == (16, 8)
    assert placed["layers/0/self_attn/o_proj/kernel"].sharding.shard_shape((32, 32)) == (16, 16)
    assert placed["embed_tokens/embedding"].sharding.shard_shape((32, 32)) == (16, 16)
    assert placed["norm/weight"].sharding.is_fully_replicated


@pytest.mark.parametrize("shape", MESHES[1:])
def test_mesh_matches_one_device(results, shape):
    want, got = results((1, 1, 1)), results(shape)
    np.testing.assert_array_equal(got["sample"].tokens, want["sample"].tokens)
    np.testing.assert_array_equal(got["sample"].lengths, want["sample"].lengths)
    np.testing.assert_allclose(got["sample"].logps, want["sample"].logps, atol=1e-5)
    assert 0 < got["sample"].finished.sum() < len(got["sample"].finished)  # stops are exercised
    np.testing.assert_allclose(got["entropy"], want["entropy"], atol=1e-5)
    assert got["metrics"].keys() == want["metrics"].keys()
    for k, v in want["metrics"].items():
        assert got["metrics"][k] == pytest.approx(v, rel=1e-5, abs=1e-6), k
    for a, b in zip(jax.tree.leaves(want["params"]), jax.tree.leaves(got["params"]),
                    strict=True):
        np.testing.assert_allclose(b, a, atol=1e-6)


def test_lowered_programs_split_rows(results, policy):
    """The sampler and the entropy pass, lowered for abstract parameters, return rows split
    over ('data', 'fsdp'); a row count off the mesh's multiple is padded up to it."""
    from frontier_rl.fit.accounting import abstract

    r = results((2, 2, 2))
    shapes = abstract(policy[2])
    gen = r["sampler"].lower(shapes, 6, 8, 5, use_top_p=True).compile()
    assert gen.output_shardings[0].spec == P(("data", "fsdp"))
    assert gen.input_shardings[0][1].shard_shape((8, 8)) == (2, 8)  # 6 rows padded to 8
    ent = r["entropy_fn"].lower(shapes, 32, 8).compile()
    assert ent.output_shardings.spec == P(("data", "fsdp"))


def _config_file(spec, **overrides):
    import importlib.util

    from frontier_rl import config_lib

    path, _, arg = spec.partition(":")
    mod_spec = importlib.util.spec_from_file_location("cfg", os.path.join(ROOT, path))
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    c = mod.get_config(arg)
    c.log.progress = c.log.tensorboard = False
    c.eval.every = 0
    return config_lib.validate(config_lib.set_fields(c, overrides))


@pytest.mark.slow
@pytest.mark.all_devices
def test_heapa_hive_on_an_fsdp_mesh_resumes_exactly(tmp_path, monkeypatch):
    """The suite's one end-to-end run over all 8 devices: configs/arith_heapa_hive.py:smoke on
    a data=4 x fsdp=2 mesh (parameters, gradients and Adam's moments split over fsdp), stopped
    after step 1 and resumed for step 2 (the heap, pool, gate and augmentation state restored;
    the warm start loaded from the first run's cache), equals an uninterrupted 2-step run."""
    import shutil

    from frontier_rl import train
    from frontier_rl.run import metrics

    meshes = []
    make_mesh = sharding.make_mesh

    def record(*args, **kw):
        mesh = make_mesh(*args, **kw)
        meshes.append(dict(mesh.shape))
        return mesh

    monkeypatch.setattr(sharding, "make_mesh", record)
    spec = "configs/arith_heapa_hive.py:smoke"
    full, parts = tmp_path / "full", tmp_path / "parts"
    train.run(_config_file(spec, **{"mesh.fsdp": 2, "rl.num_steps": 2}), str(full))
    parts.mkdir()
    shutil.copytree(full / "warmstart", parts / "warmstart")
    train.run(_config_file(spec, **{"mesh.fsdp": 2, "rl.num_steps": 1}), str(parts))
    assert sorted(d for d in os.listdir(parts / "checkpoints") if d.isdigit()) == ["1"]
    train.run(_config_file(spec, **{"mesh.fsdp": 2, "rl.num_steps": 2}), str(parts))
    assert meshes == [{"data": 4, "fsdp": 2, "model": 1}] * 3

    a = metrics.read(str(full / "metrics.jsonl"))
    b = metrics.read(str(parts / "metrics.jsonl"))
    assert [r["step"] for r in b] == [0, 1, 2]
    assert any(k.startswith("select/") for k in b[2])  # the selector's own figures compared
    for x, y in zip(_comparable(a), _comparable(b), strict=True):
        assert x.keys() == y.keys(), (x["step"], x.keys() ^ y.keys())
        assert {k: (x[k], y[k]) for k in x if x[k] != y[k]} == {}, x["step"]


def _comparable(records):
    """Records without measured figures (perf/*, durations such as select/time_ms) and without
    the evaluation of step 1, which only the stopped run has."""
    return [{k: v for k, v in r.items() if not k.startswith("perf/")
             and not k.endswith(("_ms", "_s"))
             and not (r["step"] == 1 and k.startswith(("eval/", "evalset/")))}
            for r in records]
