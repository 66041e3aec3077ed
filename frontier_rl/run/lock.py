"""One writer per workdir: an advisory lock held for the life of a run or comparison.

`hold(workdir, what)` takes an exclusive `flock` on DIR/.lock and writes the holder (pid, host,
command, start time) into it. A second writer fails at once with a RunError naming the holder.
The kernel drops the lock when its process dies, however it dies, so a lock left by a dead
process is never in the way: the next writer takes it and says whose it was.

flock is local to a host: on a shared filesystem a lock taken on another host is invisible
here, and only the holder line says it is there. A holder line naming another host is refused
(that run may still be writing) unless `break_lock` (the command line's --break_lock, which
sets BREAK_ENV so a comparison's worker processes break the locks of its runs too); a clean
release empties the line, so only a run that died without releasing leaves one. Inside a SLURM
job the holder line also names the job (SLURM_JOB_ID): a requeued job, which may start on
another node once the earlier start of the same job was killed, takes over a line naming its
own job id (SLURM runs one start of a job at a time).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import sys
import time

from frontier_rl.run.errors import RunError

log = logging.getLogger("frontier_rl")

NAME = ".lock"
BREAK_ENV = "FRONTIER_RL_BREAK_LOCK"  # "1": break a lock that names another host


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Held:
    """An open, locked DIR/.lock; `release()` (or exiting the process) lets it go."""

    def __init__(self, fd: int, path: str):
        self.fd, self.path = fd, path

    def release(self) -> None:
        if self.fd >= 0:
            os.ftruncate(self.fd, 0)  # a holder line left behind means its process died
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Held:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def hold(workdir: str, what: str, say=print, break_lock: bool | None = None) -> Held:
    """Locks `workdir` for this process (`what`: "train" or "compare", for the messages).
    `break_lock` (default: $FRONTIER_RL_BREAK_LOCK is "1") takes over a lock that names another
    host; without it that lock stops this process with a RunError naming its holder."""
    if break_lock is None:
        break_lock = os.environ.get(BREAK_ENV) == "1"
    path = os.path.join(workdir, NAME)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _read(fd)
        os.close(fd)
        raise RunError(
            f"{workdir} is in use by another {holder.get('what', 'process')} (pid "
            f"{holder.get('pid', '?')} on {holder.get('host', '?')}, started "
            f"{holder.get('started', '?')}): one writer per workdir; wait for it, stop it, or "
            "use another --workdir") from None
    previous = _read(fd)
    here = socket.gethostname()
    job = os.environ.get("SLURM_JOB_ID", "")
    if previous.get("pid") and job and previous.get("slurm_job") == job:
        say(f"{what}: took over the lock of {path}, left by an earlier start of this SLURM job "
            f"{job} (pid {previous['pid']} on {previous.get('host', '?')}): it was requeued")
    elif previous.get("pid") and previous.get("host", here) != here:
        held = (f"{path} is held by a {previous.get('what', 'run')} of pid {previous['pid']} on "
                f"host {previous['host']}, started {previous.get('started', '?')}")
        if not break_lock:
            os.close(fd)
            raise RunError(
                f"{held}: a lock taken on another host cannot be checked from here, so that run "
                "may still be writing; stop it there, or rerun with --break_lock if it is gone")
        log.warning("%s: broke the lock (%s; --break_lock)", what, held)
    elif previous.get("pid") and previous.get("host") == here and \
            previous["pid"] != os.getpid() and not _alive(int(previous["pid"])):
        say(f"{what}: took over the lock of {path}, left by pid {previous['pid']} "
            f"({previous.get('what', '?')}, started {previous.get('started', '?')}), which is "
            "no longer running")
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, json.dumps({
        "what": what, "pid": os.getpid(), "host": socket.gethostname(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"), "command": " ".join(sys.argv),
        **({"slurm_job": job} if job else {})}).encode())
    os.fsync(fd)
    return Held(fd, path)


def _read(fd: int) -> dict:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = os.read(fd, 1 << 16)
        return json.loads(data) if data.strip() else {}
    except (OSError, ValueError):
        return {}
