"""The launch scripts: the environment they set up (launch/env.sh, sourced against a stand-in
virtualenv, so nothing is installed) and what `frontier-rl fit` reads back from it."""

import os
import re
import subprocess

import pytest

from frontier_rl import fit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCH = os.path.join(ROOT, "launch")
GPU_SCRIPTS = ("run_gpu.sh", "slurm.sbatch", "gpu_check.sh", "sglang_gpu_test.sh")


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
