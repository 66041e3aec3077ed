"""launch/target_env.sh without the checkout's .venv: the project installed in another
virtualenv or the system Python. The JAX version of the target compilers' virtualenv comes
from the first Python that imports frontier_rl and jax (FRONTIER_RL_VENV's, the checkout's
.venv, then python3 / python on PATH), else from setup.py's pin. The script runs from a copy of
the checkout without .venv, against a stand-in cache whose virtualenv for the expected version
is already made (so nothing is installed; pip is told to reach no index)."""

import os
import shutil
import subprocess
import sys

import jax
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _source(tmp_path, python3: str) -> subprocess.CompletedProcess:
    root = tmp_path / "checkout"  # no .venv here
    (root / "launch").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "launch", "target_env.sh"), root / "launch")
    shutil.copy(os.path.join(ROOT, "setup.py"), root)
    with open(root / "setup.py", "rb") as f:
        crc = subprocess.run(["cksum"], stdin=f, capture_output=True, text=True,
                             check=True).stdout.split()[0]
    cache = tmp_path / "cache"
    venv = cache / f"venv-target-tpu-jax{jax.__version__}"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("#!/bin/sh\n")
    (venv / "bin" / "python").chmod(0o755)
    (venv / f".frontier_rl-{crc}").touch()
    bin_dir = tmp_path / "bin"  # python3 and python, ahead of any system Python
    bin_dir.mkdir()
    for name in ("python3", "python"):
        (bin_dir / name).write_text(python3)
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("FRONTIER_RL_", "JAX_TARGET", "VIRTUAL_ENV"))}
    env.update(FRONTIER_RL_VENV=str(tmp_path / "nowhere"), FRONTIER_RL_TARGET_CACHE=str(cache),
               PATH=f"{bin_dir}:/usr/bin:/bin", PIP_NO_INDEX="1", PYTHONPATH=ROOT)
    return subprocess.run(
        ["bash", "-c", f'source "{root}/launch/target_env.sh" tpu && '
                       'echo "python=$FRONTIER_RL_TARGET_PYTHON"'],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_the_jax_version_comes_from_the_python_on_path(tmp_path):
    r = _source(tmp_path, f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    assert r.returncode == 0, r.stderr
    assert "no trainer virtualenv" not in r.stderr
    assert f"[target_env] JAX {jax.__version__}, as python3 has it" in r.stdout
    assert r.stdout.strip().endswith(f"venv-target-tpu-jax{jax.__version__}/bin/python")


@pytest.mark.allow_skip("setup.py's pin is the installed JAX only on the tested release")
def test_without_a_python_that_imports_jax_the_version_is_setup_pys_pin(tmp_path):
    from frontier_rl.fit import targets

    if jax.__version__ != targets.TESTED_VERSIONS["tpu"]["jax"]:
        pytest.skip("the stand-in cache holds the installed JAX's virtualenv")
    r = _source(tmp_path, "#!/bin/sh\nexit 1\n")  # no Python here imports anything
    assert r.returncode == 0, r.stderr
    assert "no trainer virtualenv" not in r.stderr
    assert (f"no Python here imports frontier_rl and jax: JAX {jax.__version__}, setup.py's pin"
            in r.stdout)
