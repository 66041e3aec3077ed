"""Faults a user meets, driven as the user would: one writer per workdir, a comparison config
given to `train`. Each ends in one line naming the cause, never a traceback or a silent run."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from frontier_rl import lock
from frontier_rl.errors import RunError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "frontier_rl", *args], cwd=ROOT,
                          capture_output=True, text=True, **kw)


def test_a_second_writer_fails_at_once_naming_the_holder(tmp_path):
    first = lock.hold(str(tmp_path), "train", lambda s: None)
    with pytest.raises(RunError, match=rf"in use by another train \(pid {os.getpid()} on "
                                       rf"{socket.gethostname()}"):
        lock.hold(str(tmp_path), "compare", lambda s: None)
    first.release()
    said = []
    lock.hold(str(tmp_path), "compare", said.append).release()
    assert said == []  # a clean release leaves nothing to take over


def test_a_dead_processs_lock_is_taken_over_and_said_so(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = int(dead.stdout)
    (tmp_path / lock.NAME).write_text(json.dumps(
        {"what": "train", "pid": pid, "host": socket.gethostname(), "started": "then"}))
    said = []
    held = lock.hold(str(tmp_path), "train", said.append)
    assert len(said) == 1 and f"left by pid {pid}" in said[0] and "no longer running" in said[0]
    assert json.loads((tmp_path / lock.NAME).read_text())["pid"] == os.getpid()
    held.release()


def test_two_trains_on_one_workdir(tmp_path):
    """The second `train` on a running one's workdir exits 1 at once with one line; the first
    runs to its end with one record per step."""
    args = ["train", "--config=configs/arith_grpo.py:smoke", f"--workdir={tmp_path}",
            "--config.rl.num_steps=6", "--config.log.progress=False"]
    first = subprocess.Popen([sys.executable, "-m", "frontier_rl", *args], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    path = tmp_path / lock.NAME
    deadline = time.time() + 300
    while time.time() < deadline and first.poll() is None:
        if path.exists() and path.read_text().strip():
            break
        time.sleep(0.1)
    assert first.poll() is None
    t0 = time.time()
    second = _cli(*args)
    assert second.returncode == 1 and time.time() - t0 < 60
    assert f"in use by another train (pid {first.pid}" in second.stderr
    assert "Traceback" not in second.stderr
    out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err
    with open(tmp_path / "metrics.jsonl") as f:
        steps = [json.loads(line)["step"] for line in f]
    assert steps == sorted(set(steps)) and steps[-1] == 6


def test_train_refuses_a_comparison_config(tmp_path):
    r = _cli("train", "--config=configs/compare_arith.py:smoke", f"--workdir={tmp_path}")
    assert r.returncode == 1 and "run it with `frontier-rl compare`" in r.stderr
    assert "Traceback" not in r.stderr and not os.listdir(tmp_path)
