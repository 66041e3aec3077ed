"""The `local` launcher (launchers.py): a comparison's runs on this machine, one after another
in this process, or in `compare.workers` child processes at once.

The runs of a comparison are independent once their warm start exists. At the embedded task's
size a run is small programs dispatched from Python, and two at once on 2 cores finish sooner
than one after another (README gives the measured figures). A child starts, in plan order,
whenever one is free and the runs its run needs (launchers.needs) have ended: a matched run
waits for its reference; the first unfinished run of a warm start not cached yet trains and
caches it and continues from it in memory, and the others of that warm start start once the
cache is on disk, not once that run has ended.

Each child calls the function compare passes, compare.run_one (the sequential loop's body:
train.run, holding the run's own DIR/runs/<name>/.lock while this process keeps DIR/.lock,
then DONE once the run reached its budget). Every line a child prints reaches this process's
stdout or stderr prefixed with the run's name. The children share one persistent compile
cache, DIR/.jax_cache (unless $JAX_COMPILATION_CACHE_DIR names one), so a program is compiled
once for all of them. A run's randomness comes from its seed alone, so results.json equals
the sequential one but for timing and compile counts (tests/test_compare.py).

Stopping: the children run in their own session, so a terminal's Ctrl-C or a signal to this
process group reaches this process alone. SIGTERM here is passed to every child (each
checkpoints at the end of its step, train.py) and no further run starts; the comparison then
stops with one line naming the runs it cut (compare.cut_message), none marked finished. A
second SIGTERM ends the children and this process at once. Ctrl-C (SIGINT) stops the children
the same way, waits for them, and raises Interrupted naming the runs they checkpointed (cli.py
says it in one line and exits 130); a second Ctrl-C kills them, and they resume from the
checkpoint before. A child whose parent dies is sent SIGTERM (Linux), so none runs on alone.
A run that fails stops the others the same way, and its error is raised here. (A scheduler
that signals every process of a job, such as Slurm, reaches the children directly as well;
the forwarded SIGTERM is then their second and they stop without the last step's checkpoint,
resuming from the one before.)
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable

from frontier_rl import config_lib
from frontier_rl.experiment import launchers
from frontier_rl.run.errors import RunError

# What a child's error is raised as here (the errors cli.py reports as one line).
ERRORS = {"ConfigError": config_lib.ConfigError, "RunError": RunError,
          "FileNotFoundError": FileNotFoundError, "ValueError": ValueError}
POLL_S = 0.2
BAR_EVERY_S = 10.0


class Interrupted(Exception):
    """Ctrl-C (SIGINT) stopped the comparison: its running children checkpointed and ended
    (cli.py says this as one line and exits 130)."""


@dataclasses.dataclass
class _Child:
    spec: object  # compare.RunSpec
    proc: subprocess.Popen
    status_fd: int  # the read end of the pipe the child writes its outcome to
    relays: list[threading.Thread]

    def outcome(self) -> dict:
        """{"status": "done" | "cut" | "error", ...} once the process ended; {} when it wrote
        none (killed by a signal, or it crashed before writing)."""
        for t in self.relays:
            t.join()
        data = b""
        while chunk := os.read(self.status_fd, 1 << 16):
            data += chunk
        os.close(self.status_fd)
        try:
            return json.loads(data) if data else {}
        except ValueError:
            return {}


def _ready(spec, plan, ended: set[str]) -> bool:
    """Whether `spec` may start now: every run it needs (launchers.needs) has ended here."""
    return all(x.name in ended for x in launchers.needs(spec, plan.specs, plan.finished))


def child_env(workdir: str) -> dict[str, str]:
    """The environment of a worker: this one, with the comparison's shared compile cache
    (a size limit turns on JAX's lock on it, so no worker reads an entry another is still
    writing), every program written to it however fast it compiled (the runs of a comparison
    compile the same small sampler and evaluation programs, each a fraction of a second that
    every later worker would pay again), and unbuffered output."""
    env = dict(os.environ)
    env.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(workdir, ".jax_cache"))
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")  # fit/compile_cache.py
    env.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(4 << 30))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _relay(stream, out, prefix: str, lock: threading.Lock) -> None:
    """Copies a child's stream to `out`, each line prefixed. A progress bar redraws its line
    after a carriage return at every step; of those redraws one per BAR_EVERY_S is kept."""
    buf, last_bar = b"", float("-inf")
    while chunk := stream.read1(1 << 16):
        parts = re.split(rb"([\r\n])", buf + chunk)
        buf = parts.pop()  # the unterminated rest
        keep = []
        for text, end in zip(parts[::2], parts[1::2], strict=True):
            if not text.strip():
                continue
            if end == b"\r":
                if time.monotonic() - last_bar < BAR_EVERY_S:
                    continue
                last_bar = time.monotonic()
            keep.append(f"{prefix}{text.decode(errors='replace')}\n")
        if keep:
            with lock:
                out.write("".join(keep))
                out.flush()
    if buf.strip():
        with lock:
            out.write(f"{prefix}{buf.decode(errors='replace')}\n")
            out.flush()
    stream.close()


def _start(target: Callable, spec, workdir: str, lock: threading.Lock) -> _Child:
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "frontier_rl.experiment.workers", str(write_fd), str(os.getpid())],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        pass_fds=(write_fd,), env=child_env(workdir), start_new_session=True)
    os.close(write_fd)
    prefix = f"[{spec.name}] "
    relays = [threading.Thread(target=_relay, args=(stream, out, prefix, lock), daemon=True)
              for stream, out in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr))]
    for t in relays:
        t.start()
    try:
        proc.stdin.write(pickle.dumps((target, spec, workdir)))
        proc.stdin.close()
    except BrokenPipeError:  # it was stopped before it read its run
        pass
    return _Child(spec, proc, read_fd, relays)


class Local:
    """The `local` launcher (launchers.py): the runs in this process, one after another
    (compare.workers = 1), or in `compare.workers` children at once (run_all)."""

    name = "local"

    def run(self, plan: launchers.Plan, detach: bool = False) -> launchers.Outcome:
        if detach:
            raise config_lib.ConfigError(
                "--detach returns while the runs go on elsewhere: it needs a launcher that "
                "runs them without this process (compare.launcher='slurm'), not 'local'")
        n = plan.c.get("workers", 1)
        if n > 1:
            return launchers.Outcome(run_all(plan, n))
        for i, spec in enumerate(plan.specs, 1):
            if plan.begin(i, spec, lambda text: print(text, flush=True)) and not plan.target(
                    spec, plan.workdir):
                # train checkpointed on SIGTERM and returned before its budget: the run is
                # cut, not finished, and the comparison stops with it
                return launchers.Outcome([spec.name])
        return launchers.Outcome()

    def dry_run(self, plan: launchers.Plan) -> str:
        n = plan.c.get("workers", 1)
        how = "one after another in this process" if n == 1 else f"{n} child processes at once"
        return "\n".join([f"local launcher: {len(plan.specs)} runs, {how}"]
                         + [f"  {s.name} -> {s.dir}" for s in plan.specs])


def run_all(plan: launchers.Plan, workers: int) -> list[str]:
    """Runs every planned run, `workers` at once, each as `plan.target(spec, workdir)` in a
    child process (True: it reached its budget; False: SIGTERM cut it), once the runs it needs
    have ended. `plan.begin(i, spec, say)`, called when a run may start, announces it and
    returns False for one finished earlier (skipped). Returns the names of the runs SIGTERM
    cut (none when all finished); raises the first failed run's error. One supervisor loop
    (start what may start, wait, reap, stop all on SIGTERM or a failure) whose state is its
    local variables: about 100 lines, kept whole so the order of those steps reads at once."""
    waiting = list(enumerate(plan.specs, 1))
    running: dict[str, _Child] = {}
    ended: set[str] = set()
    # cut: checkpointed at the end of a step; stopped: ended under Ctrl-C without that
    out_of: dict[str, list[str]] = {"cut": [], "stopped": []}
    failure: list[tuple[str, dict, int]] = []
    signals = {signal.SIGTERM: 0, signal.SIGINT: 0}
    lock = threading.Lock()  # one writer at a time on this process's stdout and stderr

    def say(text: str, out=None) -> None:
        with lock:
            (out or sys.stdout).write(text + "\n")
            (out or sys.stdout).flush()

    def signal_children(sig: int = signal.SIGTERM) -> None:
        for child in running.values():
            if child.proc.poll() is None:
                child.proc.send_signal(sig)

    def on_signal(signum, frame) -> None:
        # A flag, not an exception, so it never lands in the middle of starting or reaping a
        # child. The first SIGTERM or Ctrl-C asks each child to checkpoint at the end of its
        # step. A second SIGTERM ends the children and this process at once, as train.py's loop
        # does; a second Ctrl-C kills the children (one inside a long compile runs no handler
        # until it returns; their checkpoints stay whole: orbax renames a step into place).
        signals[signum] += 1
        signal_children(signal.SIGKILL if signals[signum] > 1 and signum == signal.SIGINT
                        else signal.SIGTERM)
        if signals[signum] > 1 and signum == signal.SIGTERM:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, on_signal) for sig in signals} if main else {}
    told = False
    try:
        while waiting or running:
            progressed = False
            if signals[signal.SIGINT] and not told:
                told = True
                say("interrupted: each running run checkpoints at the end of its step (Ctrl-C "
                    "again kills them)", sys.stderr)
            for name, child in list(running.items()):
                if child.proc.poll() is not None:
                    progressed = True
                    del running[name]
                    out = child.outcome()
                    status = out.get("status")
                    if not out and any(signals.values()):  # before its first step, or a 2nd
                        status = "stopped" if signals[signal.SIGINT] else "cut"
                    if status == "done":
                        ended.add(name)
                    elif status in out_of:
                        out_of[status].append(name)
                    else:
                        failure.append((name, out, child.proc.returncode))
                        signal_children()
            if any(signals.values()) or failure:
                waiting.clear()
            for item in list(waiting):
                i, spec = item
                if len(running) >= workers:
                    break
                if _ready(spec, plan, ended):
                    waiting.remove(item)
                    progressed = True
                    if not plan.begin(i, spec, say):
                        ended.add(spec.name)
                    else:
                        running[spec.name] = _start(plan.target, spec, plan.workdir, lock)
                        if any(signals.values()):  # it came while this one was starting
                            signal_children()
            if waiting and not running and not progressed:
                raise RuntimeError(f"no run can start: {[s.name for _, s in waiting]}")
            if not progressed:
                time.sleep(POLL_S)
    finally:
        if running:  # an exception here: the children checkpoint and stop
            signal_children()
            for child in running.values():
                child.proc.wait()
                child.outcome()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    order = {spec.name: i for i, spec in enumerate(plan.specs)}  # whichever ended first
    cut, stopped = (sorted(out_of[k], key=order.__getitem__) for k in ("cut", "stopped"))
    if failure and not signals[signal.SIGINT]:
        name, out, rc = failure[0]
        if out.get("kind") in ERRORS:
            raise ERRORS[out["kind"]](f"{name}: {out.get('error', '')}")
        raise RunError(f"{name} failed ({out.get('kind') or f'exit code {rc}'}: "
                       f"{out.get('error', 'no message')}; its output is above, prefixed "
                       f"[{name}]); the other runs were stopped and checkpointed")
    if signals[signal.SIGINT]:
        raise Interrupted(interrupted_message(cut, stopped, [n for n, _, _ in failure],
                                              plan.workdir))
    return cut


def interrupted_message(cut: list[str], stopped: list[str], failed: list[str],
                        workdir: str) -> str:
    """What a comparison stopped by Ctrl-C says: the runs it checkpointed, those that ended
    without a checkpoint of their last step (a second Ctrl-C, or before their first step) and
    any that failed meanwhile (their output is above), and that the same command resumes."""
    def runs(names: list[str]) -> str:
        return ("run " if len(names) == 1 else "runs ") + ", ".join(names)

    parts = ([f"{runs(cut)} checkpointed in {workdir}"] if cut else []) + (
        [f"{runs(stopped)} stopped before checkpointing (they resume from their newest "
         "checkpoint, if any)"] if stopped else []) + (
        [f"{runs(failed)} failed (output above, prefixed with the name)"] if failed else [])
    return ("interrupted; " + "; ".join(parts or [f"no run was running in {workdir}"])
            + "; the same command resumes the comparison")


# ----------------------------------------------------------------------------- the child


def _stop_with_parent(parent: int) -> None:
    """SIGTERM to this process when its parent dies (Linux PR_SET_PDEATHSIG), so an orphaned
    worker checkpoints and stops instead of running on."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # it died before the request was in place
        os.kill(os.getpid(), signal.SIGTERM)


def _child(status_fd: int, parent: int) -> int:
    _stop_with_parent(parent)
    target, spec, workdir = pickle.load(sys.stdin.buffer)
    out: dict = {"status": "error"}
    try:
        out["status"] = "done" if target(spec, workdir) else "cut"
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises it
        out.update(kind=type(e).__name__, error=str(e)[:4000])
        if type(e).__name__ not in ERRORS:
            traceback.print_exc()
    with os.fdopen(status_fd, "w") as f:
        json.dump(out, f)
    return 0 if out["status"] != "error" else 1


if __name__ == "__main__":
    sys.exit(_child(int(sys.argv[1]), int(sys.argv[2])))
