"""launch/run_gpu.sh sums the whole GPU before it compiles or starts anything: on a stand-in
node of 8 H100s (a stand-in nvidia-smi; stand-ins for `frontier-rl` and sglang_server.sh that
only record that they ran), a colocated layout whose JAX share fits but whose JAX + SGLang sum
exceeds a GPU stops with exit 5, naming both figures; the default layout passes; a split layout
(SGLang on GPUs of its own) adds nothing. The check is the real frontier_rl.fit.node_memory, run
by the script; no program is compiled."""

from test_launch import stand_in_node

# An H100's memory by XLA's device spec (gpu_specs): 79.1 GiB. JAX's colocated share 0.45 of it
# is 35.6 GiB; SGLang at 0.55 takes 43.5 GiB of weights + KV pool, 0.5 of CUDA graphs
# (cuda_graph_max_bs 256 x 2 MiB), 5.0 of activations and 0.6 of metadata: 49.6 GiB; with two
# 0.5 GiB CUDA contexts the sum is 86.2 GiB.
OFFLINE = {"HF_HUB_OFFLINE": "1"}  # the config's model.path is not here: its preset's shape


def test_run_gpu_refuses_a_node_whose_jax_and_sglang_exceed_a_gpu(tmp_path):
    run = stand_in_node(tmp_path, 8)
    r, calls = run(SGLANG_MEM="0.55", **OFFLINE)
    assert r.returncode == 5, r.stdout + r.stderr
    assert calls == []  # neither fit --target nor SGLang nor the trainer ran
    assert "JAX's share 35.6 GiB" in r.stderr and "the engine's 49.6 GiB" in r.stderr
    assert "86.2 GiB > the device's 79.1 GiB" in r.stderr
    assert "nothing started" in r.stderr


def test_run_gpu_starts_the_default_layout_after_summing_it(tmp_path):
    run = stand_in_node(tmp_path, 8)
    r, calls = run(**OFFLINE)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[node] node per GPU (colocated): JAX's share 35.6 GiB (0.45)" in r.stdout
    assert "of 79.1 GiB: fits" in r.stdout
    assert [c.split()[0] for c in calls] == ["frontier-rl", "sglang_server.sh", "frontier-rl"]


def test_run_gpu_sums_no_node_for_sglang_on_gpus_of_its_own(tmp_path):
    run = stand_in_node(tmp_path, 8)
    r, calls = run("--config.mesh.fsdp=4", SGLANG_GPUS="0,1,2,3", SGLANG_MEM="0.95", **OFFLINE)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[node]" not in r.stdout and len(calls) == 3
    assert "SGLANG_MEM=0.95" in calls[1]
