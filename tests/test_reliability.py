"""What a cluster does to a training run, driven for real: a disk that fills, a batch that
cannot fit, a damaged state file, a learning rate that kills the policy, Ctrl-C. Each ends in
one line, a non-zero exit status, no traceback, and nothing lost (docs/reliability.md).
"""

import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
import types

import ml_collections
import pytest

from frontier_rl import config_lib, train
from frontier_rl.run import checkpoint, health, metrics, statefile
from frontier_rl.run.errors import RunError
from frontier_rl.tasks import composition

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMOKE = ["train", "--config=configs/arith_grpo.py:smoke", "--config.log.progress=false",
         "--config.log.tensorboard=false", "--config.eval.every=0"]


REF_STEPS = 8


def _cli(*args, timeout=600, env=None):
    return subprocess.run([sys.executable, "-m", "frontier_rl", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, env=env)


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _records(workdir) -> list[dict]:
    """A run's records without wall-clock figures (perf/*, *_ms, *_s)."""
    return [{k: v for k, v in r.items()
             if not (k.startswith("perf/") or k.endswith(("_ms", "_s")))}
            for r in metrics.read(os.path.join(workdir, "metrics.jsonl"))]


def _steps(ckpts) -> list[int]:
    return sorted(int(d) for d in os.listdir(ckpts) if d.isdigit())


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted smoke run of REF_STEPS steps with a checkpoint every step (its warm
    start is the cache the runs below share): (workdir, its records)."""
    workdir = tmp_path_factory.mktemp("reference")
    r = _cli(*SMOKE, f"--workdir={workdir}", "--config.checkpoint.every=1",
             f"--config.rl.num_steps={REF_STEPS}")
    assert r.returncode == 0, r.stderr
    return workdir, _records(workdir)


# ----------------------------------------------------------------------------- a full disk


def _mount_tmpfs(path, size: int) -> bool:
    os.makedirs(path, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                       capture_output=True)
    return r.returncode == 0


def _du(path) -> int:
    """Bytes of the blocks a tree takes (a tmpfs counts whole pages for each file)."""
    return sum(os.stat(os.path.join(d, f)).st_blocks * 512
               for d, _, fs in os.walk(path) for f in fs) + 4096 * len(list(os.walk(path)))


@pytest.mark.slow  # CI runs it: two runs, one of them whole
@pytest.mark.allow_skip("mounting a tmpfs needs root (or CAP_SYS_ADMIN); CI's machine has it")
def test_a_full_disk_stops_at_the_failed_checkpoint_in_one_line_and_the_rerun_matches(
        reference, tmp_path):
    """The workdir on a tmpfs with room for a checkpoint but not for three: orbax's write of
    a later checkpoint fails in its background threads with ENOSPC. The run stops there in one
    line naming the directory, the cause and the newest complete checkpoint, exit 1, no
    traceback (orbax's own tracebacks kept off the terminal); after space is freed the same
    command resumes from checkpoint 1 and ends with the uninterrupted run's records."""
    ref_dir, ref_records = reference
    ckpts = os.path.join(ref_dir, "checkpoints")
    ckpt = _du(os.path.join(ckpts, str(_steps(ckpts)[-1])))
    assert ckpt > 100_000
    mnt = tmp_path / "fs"
    # room for the run's other files (config, metrics, policy: ~100 kB) and one checkpoint
    # with its write's transient files, not for the three checkpoint.max_to_keep keeps
    if not _mount_tmpfs(mnt, 4096 * ((ckpt * 5 // 2 + 512 * 1024) // 4096)):
        pytest.skip("cannot mount a tmpfs here")
    try:
        workdir = mnt / "run"
        args = [*SMOKE, f"--workdir={workdir}", "--config.checkpoint.every=1",
                f"--config.rl.num_steps={REF_STEPS}",
                f"--config.warmstart.cache_dir={ref_dir / 'warmstart'}"]
        r = _cli(*args)
        ckpts = workdir / "checkpoints"
        assert r.returncode == 1, r.stderr
        assert "Traceback" not in r.stderr and len(_lines(r.stderr)) == 1, r.stderr
        m = re.fullmatch(
            r"frontier-rl train: error: the checkpoint of step (\d+) could not be written to "
            rf"{re.escape(str(ckpts))} \(No space left on device\); the newest complete "
            r"checkpoint, step (\d+), is kept; free space \(or fix the cause\) and rerun the "
            r"same command to resume", _lines(r.stderr)[0])
        assert m, r.stderr
        failed, kept = int(m[1]), int(m[2])
        assert failed >= 2 and kept == failed - 1 and _steps(ckpts)[-1] == kept
        assert not (workdir / "final_metrics.json").exists()
        subprocess.run(["mount", "-o", "remount,size=64m", str(mnt)], check=True)
        r = _cli(*args)
        assert r.returncode == 0, r.stderr
        assert _records(workdir) == ref_records
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_write_error_in_a_step_is_one_line_naming_the_step_and_the_newest_checkpoint(
        tmp_path):
    """Any OSError leaving a step (here metrics.jsonl's append failing with ENOSPC, as a full
    disk gives it) becomes the run's one line: the step, the cause, the file, the newest
    complete checkpoint."""
    ckpt = checkpoint.Checkpointer(str(tmp_path / "checkpoints"))
    ckpt.save(3, {"x": 1.0}, {"step": 3})
    run_state = types.SimpleNamespace(workdir=str(tmp_path), ckpt=ckpt)
    closed = []
    bar = types.SimpleNamespace(close=lambda: closed.append("bar"))
    writer = types.SimpleNamespace(close=lambda: closed.append("writer"))
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "metrics.jsonl"))
    error = train._RunState.stopped(run_state, full, 4, bar, writer)
    assert isinstance(error, RunError) and closed == ["bar", "writer"]
    assert str(error) == (
        f"run {tmp_path}: stopped at step 4: No space left on device writing "
        f"{tmp_path / 'metrics.jsonl'}; the newest complete checkpoint, step 3, is kept; rerun "
        "the same command to resume once that is fixed")
    memory = train._RunState.stopped(run_state, MemoryError(), 5, bar, writer)
    assert "stopped at step 5: out of host memory; lower rl.batch_size" in str(memory)
    interrupt = KeyboardInterrupt()
    assert train._RunState.stopped(run_state, interrupt, 5, bar, writer) is interrupt


def test_failure_reasons_are_the_os_words_for_the_error():
    assert checkpoint.failure_reason(OSError(errno.EDQUOT, "x")) == "Disk quota exceeded"
    wrapped = ValueError("write failed")
    wrapped.__cause__ = PermissionError(errno.EACCES, "denied")
    assert checkpoint.failure_reason(wrapped) == "Permission denied"
    # tensorstore's errors carry the OS's words in their text, no errno
    text = ValueError("UNKNOWN: Error writing local file \"/x/d/0.0\": [OS error 28: No space "
                      "left on device]")
    assert checkpoint.failure_reason(text) == "No space left on device"
    assert checkpoint.failure_reason(RuntimeError("bad\nmore")) == "RuntimeError: bad"


# ----------------------------------------------------------------------------- sizes


def test_an_impossible_batch_stops_before_the_warm_start_in_one_line(tmp_path):
    r = _cli(*SMOKE, f"--workdir={tmp_path}", "--config.rl.batch_size=100000000", timeout=300)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert _lines(r.stderr) == [
        "frontier-rl train: error: rl.batch_size=100,000,000 is larger than the training pool "
        "(512 prompts of task 'arith'): a step would roll out prompts twice; lower "
        "rl.batch_size or raise task.train_size"]
    assert not (tmp_path / "warmstart").exists()


def test_rows_beyond_half_the_hosts_memory_are_refused_naming_the_fields(monkeypatch):
    c = config_lib.shrink_for_smoke(config_lib.default_config())
    task = types.SimpleNamespace(train=[None] * 512)
    train._check_sizes(c, task)  # the smoke run fits
    monkeypatch.setattr(train.perf, "available_memory_bytes", lambda: 2**30)
    c.rl.group_size, c.rollout.max_new_tokens = 4096, 4096
    with pytest.raises(RunError, match=r"rl\.batch_size=8 x rl\.group_size=4096 responses of "
                                       r"up to [\d,]+ tokens need about [\d.]+ GiB of host "
                                       r"memory .* than half of the 1\.0 GiB available: lower "
                                       r"rl\.batch_size, rl\.group_size or rollout\."
                                       r"max_new_tokens"):
        train._check_sizes(c, task)


# ----------------------------------------------------------------------------- state files


def _prompts(n=6):
    return [types.SimpleNamespace(id=f"p{i}") for i in range(n)]


@pytest.mark.parametrize("text, reason", [
    ('{"composition": "solved=0.5,frontier=0.5", "k": 4, "ids": ["p1", "p', "JSONDecodeError"),
    ('{"composition": "solved=0.5,frontier=0.5", "k": 4}', "no 'ids'"),
    ('["p1"]', "a JSON list, not a dict"),
])
def test_a_damaged_pool_composition_is_one_line_naming_the_file(tmp_path, text, reason):
    path = tmp_path / composition.FILE
    path.write_text(text)
    pool = ml_collections.ConfigDict({"composition": "solved=0.5,frontier=0.5", "k": 4,
                                      "size": 0})
    with pytest.raises(RunError) as e:
        composition.apply(pool, _prompts(), lambda idx, k: None, 0, str(tmp_path))
    assert str(e.value).startswith(f"the pool composition file {path} is damaged (")
    assert reason in str(e.value) and str(e.value).endswith(
        "delete it to measure the pool again (the same config and seed choose the same prompts)")
    assert path.read_text() == text  # left as it was


def test_state_files_are_written_whole_or_not_at_all(tmp_path):
    path = tmp_path / "state.json"
    statefile.write_json(path, {"a": 1})
    with pytest.raises(TypeError):  # fails midway through the dump
        statefile.write_json(path, {"a": 2, "b": object()})
    assert json.loads(path.read_text()) == {"a": 1} and os.listdir(tmp_path) == ["state.json"]
    assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


# ----------------------------------------------------------------------------- collapse


def _step(grad=0.0, zero_var=0.5, correct=0.2, entropy=1.0, invalid=0.1) -> dict:
    return {"train/grad_norm": grad, "rollout/zero_var_frac": zero_var,
            "rollout/correct": correct, "train/entropy": entropy, "rollout/invalid": invalid}


class _Ckpt:
    def __init__(self, *steps):
        self.steps = list(steps)

    def wait(self):
        pass

    def all_steps(self):
        return list(self.steps)

    def set_aside(self, steps, subdir):
        self.steps = [s for s in self.steps if s not in steps]
        return f"CKPTS/{subdir}"

    def latest_step(self):
        return max(self.steps, default=None)


def test_the_window_fits_a_short_run_and_a_collapsed_last_step_stops_it():
    w = health.CollapseWatch(10, "DIR", run_steps=4)
    assert w.steps == 3
    for step, rec in enumerate([_step(0.3), _step(), _step(), _step()], 1):
        w.observe(step, rec)
    error = w.stop(4, _Ckpt(1))
    assert error and "for 3 steps since step 2 (policy collapsed, rl.collapse_steps=10, 3 in " \
                     "a run of 4 steps)" in str(error)
    # a run cut short by its budget: the last step collapsed, the streak shorter than the window
    w = health.CollapseWatch(10, "DIR", run_steps=100)
    for step, rec in enumerate([_step(0.3), _step(0.2), _step()], 1):
        w.observe(step, rec)
    assert w.stop(3, _Ckpt(1, 2)) is None
    error = w.stop(3, _Ckpt(1, 2), final=True)
    assert error and "gradient norm 0 for 1 step since step 3 (policy collapsed, at the run's " \
                     "last step, rl.collapse_steps=10)" in str(error)
    # a last step that is live or idle ends nothing
    w.observe(4, _step(zero_var=1.0))
    assert w.stop(4, _Ckpt(1, 2), final=True) is None


def test_every_response_invalid_is_a_collapse_only_after_the_policy_answered_in_form():
    dead = _step(zero_var=1.0, correct=0.0, invalid=1.0)
    untrained = health.CollapseWatch(2, "DIR")
    untrained.observe(1, _step(0.4, invalid=0.75))  # a few answers in form: not yet answering
    for step in (2, 3, 4):
        untrained.observe(step, dead)
    assert untrained.stop(4, _Ckpt()) is None  # it has not learnt yet: nothing to lose
    assert untrained.stop(4, _Ckpt(), final=True) is None
    w = health.CollapseWatch(2, "DIR")
    w.observe(1, _step(0.4))
    w.observe(2, dead)
    w.observe(3, dead)
    error = w.stop(3, _Ckpt())
    assert error and "every response invalid (the lowest reward) for 2 steps since step 2" \
                     in str(error)
    # one such step at a run's end is a small policy's noise, not a collapse
    w = health.CollapseWatch(10, "DIR", run_steps=100)
    w.observe(1, _step(0.4))
    w.observe(2, dead)
    assert w.stop(2, _Ckpt(), final=True) is None


# A code generation other than the pinned one (frontier_rl/numerics.py): SSE4.2 vectors and
# fast math. The collapse must not rest on the CPU's rounding.
OTHER_CODEGEN = "--xla_cpu_max_isa=SSE4_2 --xla_cpu_enable_fast_math=true"


@pytest.mark.parametrize("codegen", [
    "pinned", pytest.param("other", marks=pytest.mark.slow)])  # other: every program compiled
def test_a_rate_that_saturates_stops_the_smoke_run_naming_the_collapse(reference, tmp_path,
                                                                       codegen):
    """`rl.learning_rate=1000` on the 4-step smoke run: the first Adam step moves every weight
    by about 1000, the softmax saturates and the gradient is exactly 0 from step 2, on any
    CPU. The window fits the run (3 of rl.collapse_steps=10), so it exits 1 naming the
    collapse instead of 0."""
    ref_dir, _ = reference
    env, extra = dict(os.environ), []
    if codegen == "other":
        # the shared warm start was made under the pinned numerics: its cache key names them,
        # so it is refused unless the change is allowed (the collapse comes from the rate)
        extra = ["--allow_config_change"]
        env["FRONTIER_RL_NUMERICS"] = "native"
        env["XLA_FLAGS"] = " ".join(
            [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith(
                ("--xla_cpu_max_isa", "--xla_cpu_enable_fast_math"))] + [OTHER_CODEGEN])
    r = _cli(*SMOKE, f"--workdir={tmp_path}", "--config.rl.learning_rate=1000",
             f"--config.warmstart.cache_dir={ref_dir / 'warmstart'}", *extra, env=env)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert re.fullmatch(
        rf"frontier-rl train: error: run {re.escape(str(tmp_path))}: stopped at step 4: "
        r"gradient norm 0 for 3 steps since step 2 \(policy collapsed, rl\.collapse_steps=10, "
        r"3 in a run of 4 steps\); .+", _lines(r.stderr)[-1]), r.stderr
    assert not (tmp_path / "final_metrics.json").exists()


# ----------------------------------------------------------------------------- Ctrl-C


def _interrupt_after_checkpoints(args, ckpts, n: int) -> subprocess.CompletedProcess:
    """Runs `frontier-rl` with `args` in a process group of its own and sends the group SIGINT
    (a terminal's Ctrl-C) once n checkpoints newer than those already there are complete."""
    before = max(_steps(ckpts), default=0) if os.path.isdir(ckpts) else 0
    proc = subprocess.Popen([sys.executable, "-m", "frontier_rl", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if os.path.isdir(ckpts) and len([s for s in _steps(ckpts) if s > before]) >= n:
            break
        time.sleep(0.05)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def _ctrl_c_then_resume(reference, tmp_path, times: int) -> None:
    """Ctrl-C after the second new checkpoint, `times` times, each time resuming the run
    from where the last left it: exit 130 and one line every time, no crash dump; then the
    rerun to the end equals the uninterrupted run."""
    ref_dir, ref_records = reference
    workdir = tmp_path / "run"
    ckpts = workdir / "checkpoints"
    # each start runs 2 or 3 steps before the signal lands: room for all, then the rest
    steps = REF_STEPS if times <= 2 else 3 * times + 4
    args = [*SMOKE, f"--workdir={workdir}", "--config.checkpoint.every=1",
            f"--config.rl.num_steps={steps}", "--config.checkpoint.max_to_keep=2",
            f"--config.warmstart.cache_dir={ref_dir / 'warmstart'}"]
    line = (f"frontier-rl train: interrupted; the newest checkpoint in {workdir} is kept; "
            "the same command resumes from it")
    for i in range(times):
        r = _interrupt_after_checkpoints(args, ckpts, 2)
        assert r.returncode == 130, (i, r.returncode, r.stderr[-3000:])
        assert _lines(r.stderr) == [line], (i, r.stderr[-3000:])
    r = _cli(*args)
    assert r.returncode == 0, r.stderr
    ref = os.path.join(str(tmp_path), "ref")
    if steps != REF_STEPS:
        r = _cli(*[a for a in args if not a.startswith("--workdir")], f"--workdir={ref}")
        assert r.returncode == 0, r.stderr
        ref_records = _records(ref)
    assert _records(workdir) == ref_records


def test_ctrl_c_on_a_training_run_exits_130_in_one_line_and_the_rerun_matches(reference,
                                                                               tmp_path):
    _ctrl_c_then_resume(reference, tmp_path, times=2)


@pytest.mark.slow  # 20 interrupted starts of a run: minutes
def test_ctrl_c_twenty_times_never_crashes(reference, tmp_path):
    _ctrl_c_then_resume(reference, tmp_path, times=20)


def test_a_ctrl_c_that_python_drops_still_stops_the_run(capfd):
    """A KeyboardInterrupt raised where Python cannot raise it (a finaliser or a garbage
    collection callback: it is printed as "Exception ignored" and dropped) is remembered, and
    the next step boundary raises it; its printout is left out."""
    from frontier_rl.run import distributed

    class Finaliser:
        def __del__(self):
            signal.raise_signal(signal.SIGINT)  # the handler runs here, inside __del__

    before = signal.getsignal(signal.SIGINT)
    ctrl_c = distributed.CtrlC().install()
    try:
        Finaliser()  # collected at once: the KeyboardInterrupt is unraisable
        assert ctrl_c.pressed
        with pytest.raises(KeyboardInterrupt):
            ctrl_c.check()
    finally:
        ctrl_c.uninstall()
    assert "Exception ignored" not in capfd.readouterr().err
    assert signal.getsignal(signal.SIGINT) is before  # the handler it replaced is back
    fresh = distributed.CtrlC()
    fresh.check()  # nothing pressed: no interrupt
