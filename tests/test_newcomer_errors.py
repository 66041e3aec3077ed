"""The errors a newcomer meets first, driven as a user meets them (the command, a terminal's
Ctrl-C, a file damaged on disk): each ends in one line naming what is wrong and what to do, a
non-zero exit status, no traceback, and nothing lost.

1. Ctrl-C on `frontier-rl compare` with worker processes: exit 130, the runs checkpointed.
2. A config file that does not load: exit 2, the file and line named.
3. A damaged warm-start cache: the file and the cache named, the file left as it was.
4. A learning rate that kills the policy: the collapse watch stops the run, keeping the last
   checkpoint from before the collapse.
5. A workdir lock that names another host: refused unless --break_lock.
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from frontier_rl import config_lib, warmstart
from frontier_rl.run import health, lock
from frontier_rl.run.errors import RunError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMOKE = "--config=configs/arith_grpo.py:smoke"


def _cli(*args, timeout=300, **kw):
    return subprocess.run([sys.executable, "-m", "frontier_rl", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, **kw)


def _last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.strip()][-1]


def _gone(pid: int) -> bool:
    """Whether process `pid` has ended (a zombie left to a parent that never reaps counts)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


# ----------------------------------------------------------------------------- 1. Ctrl-C


def _fake_run(spec, workdir: str) -> bool:
    """A comparison's run without the training (compare.run_one's contract): it writes a
    checkpoint directory per step and, on SIGTERM, one more and returns False (cut)."""
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(True))
    ckpts = os.path.join(spec.dir, "checkpoints")
    step = 0
    while not stop:
        step += 1
        os.makedirs(os.path.join(ckpts, str(step)))
        time.sleep(0.05)
    os.makedirs(os.path.join(ckpts, str(step + 1)))
    return False


def _compare_with_fake_runs() -> None:
    """`frontier-rl compare` (cli.main, argv as given) whose runs are `_fake_run`."""
    from frontier_rl import cli
    from frontier_rl.experiment import compare

    compare.run_one = _fake_run
    cli.main()


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def _interrupt_when(proc: subprocess.Popen, ready, timeout: float) -> list[int]:
    """Ctrl-C to the process group of `proc` (as a terminal sends it) once `ready()`; returns
    the pids of its children at that moment."""
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None and not ready():
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()
    kids = _children(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)
    return kids


def _checkpointed(run_dir: str) -> bool:
    ckpts = os.path.join(run_dir, "checkpoints")
    return os.path.isdir(ckpts) and any(d.isdigit() for d in os.listdir(ckpts))


def test_ctrl_c_on_a_comparison_with_workers_is_one_line_and_exit_130(tmp_path):
    """The real command line, scheduler and signals; only each run's training is a stand-in."""
    workdir = tmp_path / "cmp"
    runs = [workdir / "runs" / name for name in ("uniform-s0", "hive-s0")]
    proc = subprocess.Popen(
        [sys.executable, "-c", "import test_newcomer_errors as t; t._compare_with_fake_runs()",
         "compare", "--config=configs/compare_arith.py:smoke", f"--workdir={workdir}",
         "--config.compare.workers=2", "--config.warmstart.steps=0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
            os.path.join(ROOT, "tests"), ROOT, os.environ.get("PYTHONPATH", "")]))})
    kids = _interrupt_when(proc, lambda: all(_checkpointed(str(r)) for r in runs), 120)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err
    assert _last_line(err) == (f"frontier-rl compare: interrupted; runs uniform-s0, hive-s0 "
                               f"checkpointed in {workdir}; the same command resumes the "
                               "comparison")
    assert len(kids) == 2 and all(_gone(pid) for pid in kids)
    assert not (workdir / "results.json").exists()
    assert json.loads((workdir / lock.NAME).read_text() or "{}") == {}  # released


@pytest.mark.slow
def test_ctrl_c_on_a_training_comparison_checkpoints_and_the_rerun_resumes(tmp_path):
    """The same with real training: both runs checkpoint the step they were in, and the rerun
    (to a budget both have spent) resumes each from its checkpoint and finishes."""
    workdir = tmp_path / "cmp"
    cmd = [sys.executable, "-m", "frontier_rl", "compare",
           "--config=configs/compare_arith.py:smoke", f"--workdir={workdir}",
           "--config.compare.workers=2", "--config.checkpoint.every=1",
           "--config.warmstart.steps=0", "--config.log.progress=True"]
    proc = subprocess.Popen(cmd + ["--config.compare.rollout_budget=6400"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    runs = [workdir / "runs" / name for name in ("uniform-s0", "hive-s0")]
    kids = _interrupt_when(proc, lambda: all(_checkpointed(str(r)) for r in runs), 600)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err
    assert re.fullmatch(r"frontier-rl compare: interrupted; runs (uniform-s0, hive-s0|hive-s0, "
                        rf"uniform-s0) checkpointed in {re.escape(str(workdir))}; the same "
                        "command resumes the comparison", _last_line(err)), err
    assert len(kids) == 2 and all(_gone(pid) for pid in kids)
    rerun = subprocess.run(cmd + ["--config.compare.rollout_budget=64"], cwd=ROOT,
                           capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert "[uniform-s0] resumed from step" in rerun.stdout
    assert "[hive-s0] resumed from step" in rerun.stdout
    assert (workdir / "results.json").exists()


# ----------------------------------------------------------------------------- 2. config file


@pytest.mark.parametrize("source,words", [
    ("import ml_collections\n\ndef get_config(\n    return 1\n",
     "config file {path} line 3: '(' was never closed"),
    ("from frontier_rl import config_lib\n\nc = config_lib.nosuch()\n",
     "config file {path} line 3: AttributeError: module 'frontier_rl.config_lib' has no "
     "attribute 'nosuch'"),
    ("def get_config(arg=None):\n    return {}['model']\n",
     "config file {path} line 2: KeyError: 'model'"),
    ("X = 1\n", "config file {path} has no get_config(arg=None) function (see "
                "configs/arith_grpo.py)"),
])
def test_a_config_file_that_does_not_load_is_one_line_naming_file_and_line(tmp_path, source,
                                                                           words):
    path = tmp_path / "bad.py"
    path.write_text(source)
    r = _cli("train", f"--config={path}", f"--workdir={tmp_path / 'run'}", timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == f"frontier-rl train: error: {words.format(path=path)}"
    assert not (tmp_path / "run").exists()


# ----------------------------------------------------------------------------- 3-5. a run


@pytest.fixture(scope="module")
def collapsed(tmp_path_factory):
    """A policy killed by construction, on any CPU's rounding: `rl.learning_rate=1000` behind a
    one-update warmup, one update a step (rl.epochs = rl.minibatches = 1). The first update
    has a rate of 0 (the policy stays live for step 2); the second, at 1000, moves every
    weight by about 1000 (Adam's first steps are the rate times the gradient's sign), which
    saturates the softmax, so from step 3 on the gradient is exactly 0
    (the collapse does not rest on rounding: tests/test_reliability.py runs it under other
    XLA:CPU code generation too). Every checkpoint is kept, so the ones the stop sets aside are
    seen. Returns (args, workdir, the run's result, the checkpoint steps on disk and each
    step's record, once it stopped)."""
    workdir = tmp_path_factory.mktemp("collapse") / "run"
    args = ["train", SMOKE, f"--workdir={workdir}", "--config.rl.learning_rate=1000",
            "--config.rl.warmup_steps=1", "--config.rl.epochs=1", "--config.rl.minibatches=1",
            "--config.rl.collapse_steps=3", "--config.rl.num_steps=12",
            "--config.checkpoint.every=1", "--config.checkpoint.max_to_keep=12",
            "--config.eval.every=0", "--config.warmstart.steps=2", "--config.log.progress=True"]
    r = _cli(*args, timeout=600)
    steps = sorted(int(d) for d in os.listdir(workdir / "checkpoints") if d.isdigit())
    with open(workdir / "metrics.jsonl") as f:
        records = {rec["step"]: rec for rec in map(json.loads, f)}
    return args, workdir, r, steps, records


def test_a_collapsed_policy_stops_the_run_keeping_the_last_good_checkpoint(collapsed):
    """Stopped after rl.collapse_steps collapsed steps, in one line; the checkpoints whose
    policy gave no live step are set aside, so the newest one left is the last good one (the
    lock test below resumes from it)."""
    _, workdir, r, steps, records = collapsed
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    aside = workdir / "checkpoints" / health.COLLAPSED_SUBDIR
    m = re.fullmatch(rf"frontier-rl train: error: run {re.escape(str(workdir))}: stopped at "
                     r"step (\d+): .+ for 3 steps since step (\d+)(?:, no learning signal since "
                     r"step (\d+))? \(policy collapsed, rl\.collapse_steps=3\); last good "
                     r"checkpoint: step (\d+) \(the collapsed policy's checkpoints? of steps? "
                     rf"([\d, ]+) moved to {re.escape(str(aside))}\); rerun with a lower "
                     r"rl\.learning_rate and --allow_config_change to resume from it",
                     _last_line(r.stderr))
    assert m, r.stderr
    stop, since, good = int(m[1]), int(m[2]), int(m[4])
    kinds = {s: health.collapsed(rec) for s, rec in records.items() if s > 0}
    quiet = min(s for s in kinds if all(kinds[t] for t in range(s, stop + 1)))
    assert int(m[3] or since) == quiet and 3 <= quiet  # the collapse came after two updates
    assert sum(kinds[s] != "idle" for s in range(since, stop + 1)) == 3
    # the policy of the checkpoint before the quiet steps gave a live step; those from it on
    # (held once the streak opened) are moved, not deleted
    assert good == quiet - 2 and kinds[quiet - 1] is None
    bad = list(range(quiet - 1, since))
    assert m[5] == ", ".join(map(str, bad)) and steps == list(range(1, good + 1))
    assert sorted(int(d.split("-")[0]) for d in os.listdir(aside)) == bad
    assert not (workdir / "final_metrics.json").exists()  # not a finished run


def test_a_lock_naming_another_host_is_refused_until_broken(collapsed):
    """A run left on another host's lock (a shared filesystem): refused in one line naming the
    lock, the host, pid and start; --break_lock takes it over and the run proceeds (here it
    resumes the collapsed run's last good checkpoint, which it restores)."""
    args, workdir, _, steps, _ = collapsed
    other = f"not-{socket.gethostname()}"
    holder = {"what": "train", "pid": 4242, "host": other, "started": "2025-01-02 03:04:05"}
    (workdir / lock.NAME).write_text(json.dumps(holder))
    resume = [*args, f"--config.rl.num_steps={steps[-1]}"]
    r = _cli(*resume, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert _last_line(r.stderr) == (
        f"frontier-rl train: error: {workdir / lock.NAME} is held by a train of pid 4242 on "
        f"host {other}, started 2025-01-02 03:04:05: a lock taken on another host cannot be "
        "checked from here, so that run may still be writing; stop it there, or rerun with "
        "--break_lock if it is gone")
    assert json.loads((workdir / lock.NAME).read_text()) == holder  # left as it was
    r = _cli(*resume, "--break_lock", timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"broke the lock ({workdir / lock.NAME} is held by a train of pid 4242" in r.stderr
    assert f"resumed from step {steps[-1]}" in r.stdout
    assert (workdir / lock.NAME).read_text() == ""  # released at the end


def test_a_comparison_refuses_another_hosts_lock_too(tmp_path):
    holder = {"what": "compare", "pid": 7, "host": f"not-{socket.gethostname()}",
              "started": "then"}
    (tmp_path / lock.NAME).write_text(json.dumps(holder))
    r = _cli("compare", "--config=configs/compare_arith.py:smoke", f"--workdir={tmp_path}",
             timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"{tmp_path / lock.NAME} is held by a compare of pid 7 on host not-" in r.stderr
    assert "--break_lock" in _last_line(r.stderr) and not (tmp_path / "runs").exists()


def test_a_damaged_warm_start_cache_is_named_and_kept(collapsed, tmp_path):
    import shutil

    _, workdir, _, _, _ = collapsed
    cache = tmp_path / "ws"
    shutil.copytree(workdir / "warmstart", cache)
    (cache / warmstart.KEY_NAME).write_text("")  # a copy cut short
    r = _cli("train", SMOKE, f"--workdir={tmp_path / 'run'}",
             f"--config.warmstart.cache_dir={cache}", timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert _last_line(r.stderr) == (
        f"frontier-rl train: error: the warm-start cache file {cache / warmstart.KEY_NAME} is "
        "damaged (JSONDecodeError: Expecting value: line 1 column 1 (char 0)): delete the "
        f"cache directory {cache} to train the warm start again, or point "
        "warmstart.cache_dir elsewhere")
    assert (cache / warmstart.KEY_NAME).read_text() == ""  # not deleted, not rewritten
    # the weights: a truncated copy is named before anything loads it
    (cache / warmstart.KEY_NAME).write_bytes((workdir / "warmstart" / warmstart.KEY_NAME)
                                             .read_bytes())
    weights = cache / "model.safetensors"
    size = weights.stat().st_size
    with open(weights, "r+b") as f:
        f.truncate(size - 100)
    with pytest.raises(RunError, match=rf"cache file {re.escape(str(weights))} is damaged "
                                       rf"\(ValueError: {size - 100} bytes where its header "
                                       rf"gives {size}\)"):
        warmstart.check_cache(str(cache))
    warmstart.check_cache(str(workdir / "warmstart"))  # the intact one passes


# ----------------------------------------------------------------------------- the watch


def _step(grad=0.0, zero_var=0.5, correct=0.2, entropy=1.0) -> dict:
    return {"train/grad_norm": grad, "rollout/zero_var_frac": zero_var,
            "rollout/correct": correct, "train/entropy": entropy}


class _Ckpt:
    """checkpoint.Checkpointer's steps, without the files."""

    def __init__(self, *steps):
        self.steps, self.aside = list(steps), []

    def wait(self):
        pass

    def all_steps(self):
        return list(self.steps)

    def set_aside(self, steps, subdir):
        self.aside += steps
        self.steps = [s for s in self.steps if s not in steps]
        return f"CKPTS/{subdir}"

    def latest_step(self):
        return max(self.steps, default=None)


def test_the_watch_counts_collapsed_steps_in_a_row_and_nothing_else():
    w = health.CollapseWatch(3, "DIR")
    for step, rec in enumerate([_step(0.3), _step(), _step(), _step(0.1), _step(), _step()], 1):
        w.observe(step, rec)
        assert w.stop(step, _Ckpt(1)) is None
    assert w.open and w.since == 5
    # nothing to learn from (every group of zero variance, some right): no evidence either way
    w.observe(7, _step(zero_var=1.0))
    assert w.stop(7, _Ckpt(1)) is None and w.open
    w.observe(8, _step())
    ckpt = _Ckpt(2, 3, 4)
    assert str(w.stop(8, ckpt)) == (
        "run DIR: stopped at step 8: gradient norm 0 for 3 steps since step 5 (policy "
        "collapsed, rl.collapse_steps=3); last good checkpoint: step 3 (the collapsed policy's "
        "checkpoint of step 4 moved to CKPTS/_collapsed); rerun with a lower rl.learning_rate "
        "and --allow_config_change to resume from it")
    assert ckpt.aside == [4] and ckpt.steps == [2, 3]
    # idle steps before the collapse: their checkpoints held a policy without a live step
    w = health.CollapseWatch(2, "DIR")
    for step, rec in enumerate([_step(0.2), _step(zero_var=1.0), _step(zero_var=1.0), _step(),
                                _step()], 1):
        w.observe(step, rec)
    ckpt = _Ckpt(1, 2, 3)
    assert str(w.stop(5, ckpt)) == (
        "run DIR: stopped at step 5: gradient norm 0 for 2 steps since step 4, no learning "
        "signal since step 2 (policy collapsed, rl.collapse_steps=2); no checkpoint from before "
        "it (the collapsed policy's checkpoints of steps 1, 2, 3 moved to CKPTS/_collapsed); "
        "rerun with a lower rl.learning_rate")
    # certain of a wrong answer: no variance, nothing right, entropy ~0, whatever the gradient
    w = health.CollapseWatch(2, "DIR")
    for step in (1, 2):
        w.observe(step, _step(grad=0.5, zero_var=1.0, correct=0.0, entropy=1e-6))
    assert str(w.stop(2, _Ckpt())) == (
        "run DIR: stopped at step 2: policy entropy below 0.0001 and no correct response for 2 "
        "steps since step 1 (policy collapsed, rl.collapse_steps=2); no checkpoint from before "
        "it; rerun with a lower rl.learning_rate")


def test_solved_pools_negative_controls_and_the_off_switch_never_stop():
    solved = _step(zero_var=1.0, correct=1.0, entropy=1e-6)  # every group all right
    negative = _step(zero_var=1.0, correct=0.4)  # the negative control's groups
    for rec in (solved, negative):
        w = health.CollapseWatch(2, "DIR")
        for step in range(1, 20):
            w.observe(step, rec)
            assert w.stop(step, _Ckpt(1)) is None and not w.open
    w = health.CollapseWatch(0, "DIR")
    for step in range(1, 20):
        w.observe(step, _step())
        assert w.stop(step, _Ckpt(1)) is None and not w.open


def test_collapse_steps_is_validated_with_a_default_of_ten():
    c = config_lib.default_config()
    assert c.rl.collapse_steps == 10
    c.rl.collapse_steps = -1
    with pytest.raises(config_lib.ConfigError, match=r"rl\.collapse_steps=-1 is not allowed: "
                                                     r"an integer >= 0"):
        config_lib.validate(c)
