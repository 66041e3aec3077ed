"""`frontier-rl fit` with an external engine on JAX's GPUs (launch/run_gpu.sh's colocated
layout) sizes the whole GPU: JAX's preallocated share, SGLang's weights + KV pool at its memory
fraction, its CUDA graphs and activations, and a runtime margin (frontier_rl/fit/node_memory.py);
a bare `fit` sizes JAX at the launcher's colocated share, not JAX's default 0.75. Arithmetic
only: no program is compiled here."""

import pytest

from frontier_rl.fit import command as fit
from frontier_rl.fit import node_memory

GIB = 2**30


@pytest.fixture(scope="module")
def sglang_run():
    from configs import arith_grpo

    c = arith_grpo.get_config("smoke")
    c.rollout.engine, c.rollout.sglang.url = "sglang", "http://127.0.0.1:31000"
    return c, fit.simulate(c, steps=2)


def _check(run, device="h100", **env):
    c, sim = run
    return fit.check(c, fit.parse_mesh("data=1"), device, say=lambda *a, **k: 0, sim=sim,
                     kinds=(), env=env)


def test_the_launch_scripts_read_one_file_of_shares():
    shares = node_memory.launch_shares()
    assert shares == {"DEFAULT_JAX_MEM_FRACTION": 0.9, "DEFAULT_JAX_MEM_FRACTION_SHARED": 0.45,
                      "DEFAULT_SGLANG_MEM_SHARED": 0.45, "DEFAULT_SGLANG_MEM": 0.85}


def test_a_bare_fit_sizes_jax_at_the_launchers_colocated_share(sglang_run):
    r = _check(sglang_run)
    assert r["usable_share"] == 0.45 != fit.JAX_DEFAULT_MEM_FRACTION
    assert "colocated share" in r["usable_source"]
    assert "DEFAULT_JAX_MEM_FRACTION_SHARED=0.45 of launch/shares.sh" in r["usable_source"]
    assert r["usable_bytes"] == int(0.45 * 80 * 10**9)
    node = r["node"]
    assert node["jax_bytes"] == 0.45 * 80 * 10**9 and node["engine_fraction"] == 0.45
    assert "SGLANG_MEM unset" in node["engine_fraction_source"]
    # an H100's 80 GB at 0.45 + 0.45: 33.5 + 33.5 + graphs 0.5 + activations 5 + metadata 0.6
    # + two CUDA contexts 1.0 = 74.2 GiB of 74.5
    assert node["fits"] and r["fits"]
    assert node["total_bytes"] / GIB == pytest.approx(74.2, abs=0.05)
    # the policy's 16-bit weights sit inside SGLang's static share; the KV pool is the rest
    assert node["weights_bytes"] == 2 * r["params"]
    assert node["kv_pool_bytes"] == 0.45 * 80 * 10**9 - node["weights_bytes"]


def test_the_fraction_launch_env_sh_sets_still_wins(sglang_run):
    r = _check(sglang_run, XLA_PYTHON_CLIENT_MEM_FRACTION="0.4")
    assert r["usable_share"] == 0.4 and r["usable_source"] == "XLA_PYTHON_CLIENT_MEM_FRACTION=0.4"
    assert r["node"]["jax_share"] == 0.4


def test_a_layout_whose_sum_exceeds_the_gpu_does_not_fit(sglang_run, capsys):
    r = _check(sglang_run, SGLANG_MEM="0.55")
    node = r["node"]
    assert not node["fits"] and r["fits"] is False
    # JAX 0.45 x 80 GB = 33.5 GiB; SGLang 0.55 x 80 GB = 41.0 + 0.5 + 5.0 + 0.6 = 47.1 GiB;
    # with the 1.0 GiB margin 81.6 GiB > 74.5 GiB
    (line,) = [a for a in r["advice"] if a.startswith("the node does not fit")]
    assert "JAX's share 33.5 GiB" in line and "the engine's 47.1 GiB" in line
    assert "the device's 74.5 GiB" in line and "SGLANG_MEM=0.55" in line
    fit.print_report(r)
    out = capsys.readouterr().out
    assert "node per GPU (colocated): JAX's share 33.5 GiB" in out and "does NOT fit" in out
    assert "fits: NO" in out


def test_weights_that_fill_sglangs_share_leave_no_kv_pool():
    node = node_memory.size(device_bytes=80 * GIB, jax_share=0.1, jax_source="test",
                            params=20 * 10**9, env={"SGLANG_MEM": "0.45"})
    assert node["kv_pool_bytes"] < 0 and not node["fits"]
    assert "leaving no KV pool" in node["advice"][0]
    # split over 2 tensor-parallel GPUs the same weights leave a pool
    node = node_memory.size(device_bytes=80 * GIB, jax_share=0.1, jax_source="test",
                            params=20 * 10**9, env={"SGLANG_MEM": "0.45", "SGLANG_TP": "2"})
    assert node["kv_pool_bytes"] > 0 and node["fits"]


def test_sglangs_cuda_graph_batch_follows_its_defaults_and_sglang_args():
    assert node_memory.cuda_graph_max_bs(80 * 10**9, 1)[0] == 256
    assert node_memory.cuda_graph_max_bs(80 * 10**9, 4)[0] == 512
    assert node_memory.cuda_graph_max_bs(40 * 10**9, 1)[0] == 32
    assert node_memory.cuda_graph_max_bs(180 * 10**9, 1)[0] == 512
    assert node_memory.cuda_graph_max_bs(80 * 10**9, 1, "--cuda-graph-max-bs 64")[0] == 64
    assert node_memory.cuda_graph_max_bs(80 * 10**9, 1, "--cuda-graph-max-bs=8")[0] == 8
    assert node_memory.cuda_graph_max_bs(80 * 10**9, 1, "--disable-cuda-graph")[0] == 0


def test_an_engine_on_gpus_of_its_own_or_an_embedded_sampler_adds_no_node(sglang_run):
    r = _check(sglang_run, FRONTIER_RL_GPU_SHARED="0", SGLANG_MEM="0.95")
    assert "node" not in r and r["usable_share"] == fit.JAX_DEFAULT_MEM_FRACTION
    assert "node" in dict(r["not_sized"])
    c, sim = sglang_run
    c = c.copy_and_resolve_references()
    c.rollout.engine = "jax"
    r = fit.check(c, fit.parse_mesh("data=1"), "h100", say=lambda *a, **k: 0, sim=sim,
                  kinds=(), env={})
    assert "node" not in r and r["usable_share"] == fit.JAX_DEFAULT_MEM_FRACTION
    # a TPU has no SGLang beside JAX
    r = _check(sglang_run, device="v5p")
    assert "node" not in r


def test_a_bad_engine_setting_is_named():
    with pytest.raises(ValueError, match="SGLANG_MEM='1.5' is not a fraction"):
        node_memory.engine_fraction({"SGLANG_MEM": "1.5"})
    with pytest.raises(ValueError, match="SGLANG_TP='0'"):
        node_memory.size(device_bytes=GIB, jax_share=0.5, jax_source="t", env={"SGLANG_TP": "0"})


@pytest.mark.target
def test_a_bare_fit_target_sizes_the_colocated_node_with_the_gpu_compiler():
    """`fit --target=h100x8 --config.rollout.engine=sglang` with nothing set: JAX at the
    launcher's colocated share, the node summed, the probe at the shape the trainer sends."""
    import json
    import os

    from test_target_compile import _python, _run

    python = _python("gpu")
    unset = ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION", "SGLANG_MEM",
             "SGLANG_TP", "SGLANG_ARGS", "FRONTIER_RL_GPU_SHARED", "JAX_MEM_FRACTION_SHARED")
    saved = {k: os.environ.pop(k) for k in unset if k in os.environ}
    try:
        r = _run(python, "-m", "frontier_rl.cli", "fit", "--config=configs/arith_grpo.py:smoke",
                 "--target=h100x8", "--json", "--config.rollout.engine=sglang",
                 "--config.rollout.sglang.url=http://127.0.0.1:31000",
                 "--config.fit.sim_steps=2")
    finally:
        os.environ.update(saved)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report["usable_share"] == 0.45 and "colocated share" in report["usable_source"]
    assert report["node"]["fits"] and report["node"]["jax_share"] == 0.45
    assert "node per GPU (colocated)" in r.stdout
    probe = next(p for p in report["programs"] if p["kind"] == "probe")
    from configs import arith_grpo

    c = arith_grpo.get_config("smoke")
    assert int(probe["tokens"]) == fit.probe_shape(c, probe["rows"])[1]
