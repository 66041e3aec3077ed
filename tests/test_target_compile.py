"""Programs compiled by the real GPU and TPU compilers on compile-only devices (no hardware):
`frontier-rl fit --target` compiles every program of a small run for one GPU and one TPU
target, and the GPU compiler's train step for packed rows on cuDNN.

The compilers live in virtualenvs of their own (launch/target_env.sh gpu|tpu; CI makes them),
so these tests run them as subprocesses; they are marked `target` (deselected by default)."""

import json
import os
import subprocess

import jax
import pytest
from flax import nnx

from frontier_rl.fit import targets
from frontier_rl.models import ModelConfig, Transformer
from frontier_rl.rl import batch as batch_lib
from frontier_rl.rl import sharding
from frontier_rl.rl.losses import LOSSES
from frontier_rl.rl.train_step import OptimConfig, Trainer, make_optimizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python(kind: str) -> str:
    python = targets.target_python(kind)
    if python is None:
        pytest.skip(f"no {kind} compiler: `source launch/target_env.sh {kind}` makes it")
    return python


def _run(python: str, *args: str, timeout: int = 1500) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)  # the suite's 8 fake CPU devices are not the target's
    return subprocess.run([python, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_pack_trains_packed_on_cudnn_and_xla():
    """rl.packing="pack" trains packed whichever kernel the policy's attention resolved to
    (cuDNN's packed layout, XLA's segment blocks)."""
    for attention in ("cudnn", "xla"):
        cfg = ModelConfig(vocab_size=48, hidden_size=32, intermediate_size=64, num_layers=1,
                          num_heads=2, num_kv_heads=1, head_dim=16, dtype="bfloat16",
                          attention=attention)
        graphdef, params = nnx.split(Transformer(cfg, rngs=nnx.Rngs(0)), nnx.Param)
        tr = Trainer(graphdef, LOSSES["grpo"], make_optimizer(OptimConfig()),
                     sharding.make_mesh(devices=jax.devices()[:1]), layout="pack")
        tr.init(params)
        assert tr.layout == "pack" == batch_lib.layout_for("pack", attention)


@pytest.mark.target
def test_packed_rows_build_no_dense_bias_on_the_gpu_compiler():
    """As the GPU compiler builds it, the train step of packed rows calls cuDNN's fused
    attention (forward and backward) in its packed layout, with no [rows, 1, T, T] bias or
    mask (nor its gradient) and no other [T, T] array anywhere in the program."""
    r = _run(_python("gpu"), os.path.join("tests", "target_programs.py"), "packed-cudnn")
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["attention"] == "cudnn" and out["layout"] == "pack"
    assert any("fmha" in c and "Backward" in c for c in out["cudnn_calls"]), out
    assert out["square_arrays"] == [], out


@pytest.mark.target
def test_packed_rows_compile_for_a_gpu_before_hopper():
    """cuDNN's packed layout needs Hopper: on an A100 the packed train step still compiles, its
    attention in XLA's query blocks (no packed cuDNN call, no [T, T] array); rows of one
    sequence keep cuDNN there."""
    r = _run(_python("gpu"), os.path.join("tests", "target_programs.py"), "packed-a100")
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["attention"] == "cudnn" and out["layout"] == "pack"
    assert out["square_arrays"] == [] and out["peak"] > 0, out


@pytest.mark.target
def test_packed_rows_build_no_square_array_on_the_tpu_compiler():
    """As libtpu builds it, the train step of packed rows (XLA attention in blocks of queries
    whose masks come from the segment ids) holds no [T, T] array."""
    r = _run(_python("tpu"), os.path.join("tests", "target_programs.py"), "packed-tpu")
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["attention"] == "xla" and out["layout"] == "pack"
    assert out["square_arrays"] == [] and out["peak"] > 0, out


@pytest.mark.target
def test_gpu_check_predicts_the_step_it_times_with_the_gpu_compiler():
    """launch/gpu_check.sh sets `fit --target`'s figure beside the measured peak: the train
    step it times, recompiled for the GPU's compile-only twin, gives a peak that holds at
    least the float32 weights."""
    r = _run(_python("gpu"), os.path.join("tests", "target_programs.py"), "gpu-check-twin")
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["weights_gib"] < out["peak_gib"] < 1.0, out


def _fit(kind: str, target: str, *extra: str) -> dict:
    r = _run(_python(kind), "-m", "frontier_rl.cli", "fit", "--config=configs/arith_hive.py",
             f"--target={target}", "--json", "--config.model.dtype=bfloat16",
             "--config.rl.kl_coef=0.01", "--config.fit.sim_steps=5", *extra)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.target
@pytest.mark.parametrize("kind,target,hosts", [("gpu", "h100x8", 1), ("tpu", "v5e-8", 2),
                                               ("tpu", "v5p-16", 2)])
def test_fit_compiles_every_program_with_the_target_compiler(kind, target, hosts):
    """One small run's every program for 8 GPUs on a host and two TPU slices of 8 devices on 2
    hosts each (compile-only topologies are hosts of 2 x 2 chips: v5e-8's 8 chips, v5p-16's 8
    megacore chips), the multi-host topology a v5p-16 is."""
    report = _fit(kind, target)
    assert report["compiler"] == f"{kind} target compiler"
    assert report["target"]["devices"] == 8 and report["fits"], report["advice"]
    assert report["target"]["hosts"] == hosts
    kinds = {p["kind"] for p in report["programs"]}
    assert kinds == {"sampler", "entropy", "logps", "train_step"}, kinds
    for p in report["programs"]:
        t = p["target"]
        assert not p.get("error") and t["peak"] > 0 and t["flops"] > 0, p
        assert p["bytes_per_device"] == t["peak"] + p["resident"]
    train = next(p for p in report["programs"] if p["kind"] == "train_step")
    assert train["target"]["collectives"], "an 8-device train step reduces its gradients"
    costs = report["cost_programs"]
    assert {c["kind"] for c in costs} == kinds
    assert all(not c.get("error") for c in costs), costs


@pytest.mark.target
@pytest.mark.parametrize("kind,target", [("gpu", "h100x8"), ("tpu", "v5e-8")])
def test_fit_compiles_a_split_layout_and_reports_both_halves_and_their_sum(kind, target):
    """mesh.rollout=4 with rl.staleness=1: the sampler and the entropy pass compiled by the
    target's compiler on a rollout mesh of 4 devices, the trainer's programs on the other 4
    (their gradients reduced over those 4), each half's largest program and bytes, and the
    sum: all 8 devices."""
    report = _fit(kind, target, "--config.mesh.rollout=4", "--config.rl.staleness=1")
    h = report["halves"]
    assert report["fits"] and h["sum"]["fits"], report["advice"]
    assert (h["train"]["devices"], h["rollout"]["devices"], h["sum"]["devices"]) == (4, 4, 8)
    assert h["rollout"]["mesh"] == {"data": 4, "fsdp": 1, "model": 1}
    kinds = {p["program"]: p["kind"] for p in report["programs"]}
    assert {kinds[n] for n in h["rollout"]["programs"]} == {"sampler", "entropy"}
    assert {kinds[n] for n in h["train"]["programs"]} == {"logps", "train_step"}
    for half in ("train", "rollout"):
        mine = [p for p in report["programs"] if p["program"] in h[half]["programs"]]
        assert all(p["target"]["peak"] > 0 and not p.get("error") for p in mine)
        assert h[half]["peak_bytes_per_device"] == max(p["bytes_per_device"] for p in mine)
    assert h["sum"]["bytes"] == h["train"]["bytes"] + h["rollout"]["bytes"]
    train = next(p for p in report["programs"] if p["kind"] == "train_step")
    assert train["target"]["collectives"], "a 4-device train step reduces its gradients"
