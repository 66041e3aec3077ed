"""Real SGLang on a GPU: launch/sglang_gpu_test.sh (3 RL steps through it, log-prob agreement)."""

import shutil
import subprocess

import pytest

pytestmark = pytest.mark.gpu


@pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="needs an NVIDIA GPU")
def test_real_sglang(tmp_path):
    r = subprocess.run(["bash", "launch/sglang_gpu_test.sh", str(tmp_path / "run")],
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "sglang gpu check: ok" in r.stdout
