"""Multi-host: the process helpers, and a 2-process run equal to 1 process (the launch scripts
are checked in tests/test_launch.py)."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from frontier_rl.run import distributed, metrics

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMOKE = ["--config=configs/arith_grpo.py:smoke", "--config.log.progress=false",
         "--config.log.tensorboard=false", "--config.eval.every=0"]


def test_one_process_helpers_are_identities():
    x = np.arange(6).reshape(3, 2)
    assert distributed.to_global(x, None) is x
    assert np.array_equal(distributed.to_host({"a": x})["a"], x)
    assert distributed.any_process(True) and not distributed.any_process(False)
    assert distributed.is_primary()


def test_one_process_broadcast_and_agreement_are_identities():
    obj = {"a": [1, 2]}
    assert distributed.broadcast_object(obj) is obj
    distributed.check_agree("anything", {"x": np.arange(3)}, step=1)  # nothing to disagree with


def test_the_digest_sees_values_shapes_and_dtypes():
    x = np.arange(6, dtype=np.int32)
    d = distributed.digest({"a": x})
    assert len(d) == 8 and d == distributed.digest({"a": x.copy()})
    changed = x.copy()
    changed[5] = 7
    for other in (changed, x.reshape(2, 3), x.astype(np.int64)):
        assert distributed.digest({"a": other}) != d


@pytest.mark.slow
def test_two_processes_decide_rewards_once_and_stop_when_batches_differ(tmp_path):
    """Process 1's verifier scores one response the other way: both processes hold process 0's
    outcomes (decided once, broadcast). Batches that differ in one advantage stop both
    processes with the cross-process error, within the timeout (no hang)."""
    port = 20000 + os.getpid() % 20000
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS="--xla_force_host_platform_device_count=1",
               FRONTIER_RL_COORDINATOR=f"localhost:{port}", FRONTIER_RL_NUM_PROCESSES="2")
    script = os.path.join(ROOT, "tests", "agree_two_processes.py")
    procs = [subprocess.Popen([sys.executable, script], cwd=ROOT,
                              env=dict(env, FRONTIER_RL_PROCESS_ID=str(i)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in (0, 1)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [3, 3], outs
    records = [json.loads(next(line for line in o.splitlines() if line.startswith("{")))
               for o in outs]
    # prompt i's response is the digit i and its answer i % 2: p0 and p1 right, p2 and p3
    # wrong, as process 0 scores them; process 1's own verifier would have scored p2 right.
    assert [r["outcomes"] for r in records] == [[[1, 1], [1, 1], [0, 0], [0, 0]]] * 2
    assert [r["broadcast"] for r in records] == [{"from": 0, "items": [1, 2, 3]}] * 2
    for o in outs:
        assert "processes disagree on the packed batch at step 2: process(es) [1]" in o


def test_sigterm_sets_the_flag_and_the_handler_is_restored():
    before = signal.getsignal(signal.SIGTERM)
    with distributed.Preemption() as p:
        assert not p.requested()
        os.kill(os.getpid(), signal.SIGTERM)
        assert p.requested()
    assert signal.getsignal(signal.SIGTERM) == before


def _files(workdir: str) -> set[str]:
    """Every file outside the checkpoints (whose per-process shards orbax lays out), and the
    checkpoint steps."""
    out = set()
    for root, _, names in os.walk(workdir):
        rel = os.path.relpath(root, workdir)
        if rel.split(os.sep)[0] == "checkpoints":
            if rel.count(os.sep) == 1:
                out.add(rel)
            continue
        out.update(os.path.normpath(os.path.join(rel, n)) for n in names)
    return out


def _assert_same_run(a: list[dict], b: list[dict]) -> None:
    """Equal records but for wall-clock figures; the loss and gradient figures (and the warm
    start's loss) may differ in the last bits, since gloo's cross-process all-reduce sums in
    another order than the in-process one. Rollouts, rewards, selection and evals are exact.
    Measured keys (perf/*) may differ too: perf/compiles/<program> names what each process
    compiled, and two processes compile their cross-process gathers besides."""
    def computed(r):
        return sorted(k for k in r if not k.startswith("perf/"))

    assert [computed(r) for r in a] == [computed(r) for r in b]
    for x, y in zip(a, b, strict=True):
        for k in x:
            if k.startswith("perf/"):
                continue
            if k.startswith("train/") or k == "warmstart/loss":
                # abs: a mean of log-prob differences (train/ppo_kl, ~1e-4) cancels log-probs
                # of order 1, whose float32 rounding in another order is ~1e-7 each
                assert y[k] == pytest.approx(x[k], rel=1e-4, abs=2e-6), (x["step"], k)
            else:
                assert y[k] == x[k], (x["step"], k)


def _one_process(flags: list[str], workdir) -> None:
    """The reference: `frontier-rl train` as 1 process with 8 fake CPU devices."""
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS="--xla_force_host_platform_device_count=8")
    subprocess.run([sys.executable, "-m", "frontier_rl", "train", *flags, f"--workdir={workdir}"],
                   cwd=ROOT, env=env, check=True, capture_output=True, timeout=900)


@pytest.mark.slow
def test_two_processes_equal_one_process(tmp_path):
    """`launch/multihost_local.sh 2` (2 processes x 4 fake devices) writes the metrics of one
    process with 8 fake devices, and only process 0's files."""
    one, two, logs = tmp_path / "one", tmp_path / "two", tmp_path / "logs"
    _one_process(SMOKE, one)
    env = dict(os.environ, FRONTIER_RL_PYTHON=sys.executable, LOG_DIR=str(logs))
    r = subprocess.run(["bash", "launch/multihost_local.sh", "2", *SMOKE, f"--workdir={two}"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "2 process(es), 8 cpu devices (4 per process)" in r.stderr
    a = metrics.read(str(one / "metrics.jsonl"))
    b = metrics.read(str(two / "metrics.jsonl"))
    assert [x["step"] for x in b] == [0, 1, 2, 3, 4]
    _assert_same_run(a, b)
    assert _files(str(one)) == _files(str(two))
    assert sorted(os.listdir(logs)) == ["process_1.log"]


@pytest.mark.slow
def test_two_processes_sigterm_checkpoint_then_resume(tmp_path):
    """SIGTERM to `launch/multihost_local.sh 2` after step 1 (the script forwards it to both
    processes, which agree on the step through a collective): one checkpoint at the step
    boundary, off the checkpoint.every schedule, exit 0; the same command then resumes and ends
    with the metrics of an uninterrupted 1-process x 8-device run."""
    import time

    flags = [*SMOKE, "--config.checkpoint.every=100"]
    one, two, logs = tmp_path / "one", tmp_path / "two", tmp_path / "logs"
    _one_process(flags, one)
    env = dict(os.environ, FRONTIER_RL_PYTHON=sys.executable, LOG_DIR=str(logs))
    cmd = ["bash", "launch/multihost_local.sh", "2", *flags, f"--workdir={two}"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    log_path = two / "metrics.jsonl"
    while time.monotonic() < deadline and proc.poll() is None:
        if log_path.exists() and any(r["step"] >= 1 for r in metrics.read(str(log_path))):
            proc.send_signal(signal.SIGTERM)
            break
        time.sleep(0.1)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    steps = sorted(int(d) for d in os.listdir(two / "checkpoints") if d.isdigit())
    assert len(steps) == 1 and 1 <= steps[0] < 4, steps  # stopped early, at a step boundary
    assert not (two / "final_metrics.json").exists()
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    _assert_same_run(metrics.read(str(one / "metrics.jsonl")),
                     metrics.read(str(two / "metrics.jsonl")))
