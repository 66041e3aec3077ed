"""`distributed.initialize` on the clusters the launch scripts target, checked on CPU: what
`jax.distributed.initialize` is called with, and what JAX's own cluster detection
(jax/_src/clusters/) makes of those arguments in a SLURM step or on a Cloud TPU VM."""

import os
import re

import jax
import pytest
from jax._src import cloud_tpu_init, clusters
from jax._src.clusters import cloud_tpu_cluster
from jax._src.clusters import cluster as cluster_mod

from frontier_rl.run import distributed
from frontier_rl.run.errors import RunError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREFIXES = ("SLURM_", "TPU_", "MEGASCALE_", "FRONTIER_RL_", "OMPI_", "JAX_COORDINATOR",
            "JAX_LOCAL_DEVICE_IDS", "CUDA_VISIBLE_DEVICES", "KUBERNETES_SERVICE_HOST")


@pytest.fixture
def calls(monkeypatch):
    """A clean environment (no cluster variables) and a recorder in place of
    jax.distributed.initialize."""
    for k in list(os.environ):
        if k.startswith(PREFIXES):
            monkeypatch.delenv(k)
    monkeypatch.setattr(distributed, "_initialized", False)
    monkeypatch.setattr(cloud_tpu_init, "running_in_cloud_tpu_vm", False)
    got = []
    monkeypatch.setattr(jax.distributed, "initialize", lambda **kw: got.append(kw))
    monkeypatch.setattr(jax.config, "update", lambda *a: None)  # gloo: not for this process
    return got


def slurm_env(monkeypatch, *, nodes, tasks_per_node, node_id=0, local_id=0,
              gpus="0,1,2,3,4,5,6,7"):
    """The variables srun sets in one task of a step (`srun` inside `sbatch --nodes=nodes
    --ntasks-per-node=tasks_per_node --gpus-per-node=8`)."""
    env = {"SLURM_JOB_ID": "4242", "SLURM_STEP_NODELIST": f"gpu[001-{nodes:03d}]",
           "SLURM_NTASKS": str(nodes * tasks_per_node), "SLURM_STEP_NUM_NODES": str(nodes),
           "SLURM_STEP_TASKS_PER_NODE": f"{tasks_per_node}(x{nodes})",
           "SLURM_NODEID": str(node_id), "SLURM_LOCALID": str(local_id),
           "SLURM_PROCID": str(node_id * tasks_per_node + local_id)}
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpus
    for k, v in env.items():
        monkeypatch.setenv(k, v)


def jax_resolves(kw):
    """What JAX's cluster detection fills in for the arguments initialize passed."""
    return clusters.ClusterEnv.auto_detect_unset_distributed_params(
        kw["coordinator_address"], kw["num_processes"], kw["process_id"],
        kw.get("local_device_ids"), None, 300)


def test_one_process_alone_initialises_nothing(calls, monkeypatch):
    distributed.initialize()
    monkeypatch.setenv("SLURM_JOB_ID", "1")
    slurm_env(monkeypatch, nodes=1, tasks_per_node=1)  # a one-task step: one process
    distributed.initialize()
    assert calls == []


def test_slurm_one_task_per_node_gets_every_gpu_of_its_node(calls, monkeypatch):
    slurm_env(monkeypatch, nodes=2, tasks_per_node=1, node_id=1)
    distributed.initialize()
    (kw,) = calls
    assert kw["local_device_ids"] == list(range(8))
    coordinator, count, rank, local = jax_resolves(kw)
    assert (coordinator.split(":")[0], count, rank, local) == ("gpu001", 2, 1, list(range(8)))
    # Without them JAX assumes one task per GPU: this process would see GPU 0 alone.
    assert jax_resolves({**kw, "local_device_ids": None})[3] == [0]


def test_slurm_one_task_per_gpu_keeps_jaxs_default(calls, monkeypatch):
    slurm_env(monkeypatch, nodes=2, tasks_per_node=8, node_id=1, local_id=5)
    distributed.initialize()
    assert calls[0]["local_device_ids"] == [5]
    assert jax_resolves(calls[0])[1:] == (16, 13, [5])


def test_slurm_shares_split_evenly_or_are_refused(calls, monkeypatch):
    slurm_env(monkeypatch, nodes=1, tasks_per_node=2, local_id=1)
    assert distributed.slurm_local_devices() == [4, 5, 6, 7]
    # GPUs bound per task (--gpus-per-task=1): the task sees its own GPU as device 0.
    slurm_env(monkeypatch, nodes=1, tasks_per_node=8, local_id=3, gpus="3")
    assert distributed.slurm_local_devices() == [0]
    slurm_env(monkeypatch, nodes=1, tasks_per_node=3, local_id=0)
    with pytest.raises(RunError, match="3 tasks on this node, which sees 8 GPUs"):
        distributed.slurm_local_devices()
    monkeypatch.setenv("JAX_LOCAL_DEVICE_IDS", "0,1")  # the user's choice: JAX reads it
    assert distributed.slurm_local_devices() is None
    monkeypatch.delenv("JAX_LOCAL_DEVICE_IDS")
    slurm_env(monkeypatch, nodes=2, tasks_per_node=1, gpus="")  # no GPU: JAX decides
    assert distributed.slurm_local_devices() is None


def test_uneven_step_tasks_per_node(calls, monkeypatch):
    slurm_env(monkeypatch, nodes=4, tasks_per_node=1, node_id=3, local_id=1)
    monkeypatch.setenv("SLURM_STEP_TASKS_PER_NODE", "4(x3),2")
    assert distributed.slurm_local_devices() == [4, 5, 6, 7]


def test_slurm_sbatch_and_initialize_agree(calls, monkeypatch):
    """launch/slurm.sbatch's tasks per node and GPUs per node give each task a share, and the
    shares of one node cover its GPUs once."""
    with open(os.path.join(ROOT, "launch", "slurm.sbatch")) as f:
        text = f.read()
    tasks = int(re.search(r"^#SBATCH --ntasks-per-node=(\d+)", text, re.M).group(1))
    gpus = int(re.search(r"^#SBATCH --gpus-per-node=(\d+)", text, re.M).group(1))
    directives = "\n".join(line for line in text.splitlines() if line.startswith("#SBATCH"))
    assert "--gpus-per-task" not in directives and "--gpu-bind" not in directives
    shares = []
    for local in range(tasks):
        slurm_env(monkeypatch, nodes=2, tasks_per_node=tasks, local_id=local,
                  gpus=",".join(map(str, range(gpus))))
        shares += distributed.slurm_local_devices()
    assert sorted(shares) == list(range(gpus))


def fake_metadata(worker, endpoints):
    values = {"agent-worker-number": str(worker), "worker-network-endpoints": endpoints,
              "tpu-env": "ACCELERATOR_TYPE: 'v5p-32'\n"}
    return lambda key: (values[key], 200) if key in values else ("", 404)


@pytest.mark.parametrize("platforms", [None, "tpu,cpu"])
def test_cloud_tpu_vm_always_initialises_and_jax_reads_the_metadata_server(calls, monkeypatch,
                                                                           platforms):
    # A GCE TPU VM: no environment variable names the workers; JAX's start-up found libtpu and
    # the chips (running_in_cloud_tpu_vm) and its GCE detector asks the metadata server.
    if platforms is None:
        monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    else:
        monkeypatch.setenv("JAX_PLATFORMS", platforms)
    monkeypatch.delenv("TPU_SKIP_MDS_QUERY", raising=False)  # set by JAX on a machine w/o TPU
    for mod in (cloud_tpu_init, cluster_mod, cloud_tpu_cluster):
        monkeypatch.setattr(mod, "running_in_cloud_tpu_vm", True)
    monkeypatch.setattr(cloud_tpu_cluster, "get_metadata",
                        fake_metadata(2, "10.0.0.1,10.0.0.2,10.0.0.3,10.0.0.4"))
    distributed.initialize()
    (kw,) = calls
    assert kw == {"coordinator_address": None, "num_processes": None, "process_id": None}
    assert jax_resolves(kw) == ("10.0.0.1:8482", 4, 2, None)
    # One host (v5p-8): still initialised (orbax needs the client), as one process.
    calls.clear()
    monkeypatch.setattr(distributed, "_initialized", False)
    monkeypatch.setattr(cloud_tpu_cluster, "get_metadata", fake_metadata(0, "10.0.0.9"))
    distributed.initialize()
    assert jax_resolves(calls[0]) == ("10.0.0.9:8482", 1, 0, None)


def test_a_tpu_vm_running_on_cpu_is_not_a_pod(calls, monkeypatch):
    monkeypatch.setattr(cloud_tpu_init, "running_in_cloud_tpu_vm", True)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    distributed.initialize()
    assert calls == []


def test_gke_tpu_pod_by_environment(calls, monkeypatch):
    monkeypatch.setenv("TPU_WORKER_HOSTNAMES", "w0,w1")
    monkeypatch.setenv("TPU_WORKER_ID", "1")
    distributed.initialize()
    assert len(calls) == 1 and "local_device_ids" not in calls[0]


def test_explicit_processes_win(calls, monkeypatch):
    monkeypatch.setenv("FRONTIER_RL_COORDINATOR", "localhost:1234")
    monkeypatch.setenv("FRONTIER_RL_NUM_PROCESSES", "2")
    monkeypatch.setenv("FRONTIER_RL_PROCESS_ID", "1")
    distributed.initialize()
    assert calls == [{"coordinator_address": "localhost:1234", "num_processes": 2,
                      "process_id": 1}]


def test_tpu_pod_ships_the_code_data_and_checkpoints(tmp_path, tpu_pod_repo):
    """launch/tpu_pod.sh with a stand-in gcloud: every host gets one archive holding HEAD's
    files plus data/ and checkpoints/ (a symlinked checkpoint copied as files), and runs the
    train command from the unpacked tree."""
    import subprocess
    import tarfile

    repo = tpu_pod_repo
    (repo / "data" / "train").mkdir(parents=True)
    (repo / "data" / "train" / "math.parquet").write_text("rows")
    model = tmp_path / "hf" / "Qwen3-4B"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (repo / "checkpoints").mkdir()
    (repo / "checkpoints" / "Qwen3-4B").symlink_to(model)
    bin_dir, log = tmp_path / "bin", tmp_path / "gcloud.log"
    bin_dir.mkdir()
    (bin_dir / "gcloud").write_text(
        "#!/usr/bin/env bash\n"
        f'printf "%s\\n" "$*" >> {log}\n'
        f'if [ "$4" = scp ]; then for a in "$@"; do [ -f "$a" ] && cp "$a" {tmp_path}/shipped.tar;'
        " done; fi\nexit 0\n")
    (bin_dir / "gcloud").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env.pop("SHIP", None)
    r = subprocess.run(["bash", str(repo / "launch" / "tpu_pod.sh"), "my-v5p-16", "us-east5-a",
                        "/mnt/shared/runs/x", "configs/math_grpo.py", "--config.seed=1"],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with tarfile.open(tmp_path / "shipped.tar") as tar:
        names = set(tar.getnames())
        assert {"launch/tpu_pod.sh", "data/train/math.parquet",
                "checkpoints/Qwen3-4B/config.json"} <= names
        assert tar.getmember("checkpoints/Qwen3-4B/config.json").isfile()
    scp, ssh = log.read_text().split("\n", 1)
    assert "--worker=all" in scp and scp.endswith("my-v5p-16:frontier_rl.tar")
    assert "tar -xf frontier_rl.tar -C frontier_rl" in ssh
    assert ("python -m frontier_rl train --config=configs/math_grpo.py "
            "--workdir=/mnt/shared/runs/x --config.seed=1") in ssh
    # SHIP="" ships the code alone and says nothing; a missing directory is named.
    r = subprocess.run(["bash", str(repo / "launch" / "tpu_pod.sh"), "t", "z", "/w", "c.py"],
                       env={**env, "SHIP": "data models"}, capture_output=True, text=True)
    assert r.returncode == 0 and "no models/ in" in r.stderr
