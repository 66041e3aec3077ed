#!/usr/bin/env python3
"""A one-machine stand-in for SLURM's commands, for the tests of the slurm launcher: linked on
PATH as sbatch, sacct, squeue, scancel, scontrol and srun, it runs each submitted batch script
in the background on this machine and reports its states as sacct does. State lives in
$FAKE_SLURM_DIR: <id>.state (PENDING, RUNNING, REQUEUED, COMPLETED, FAILED, CANCELLED), the
script as submitted, and calls.log (every command and its arguments).

  sbatch SCRIPT            a job id; afterok dependencies are honoured (a failed dependency
                           cancels the job, as --kill-on-invalid-dep=yes does)
  sacct -o JobID,State,NodeList --parsable2 -j ID ...
  squeue [-j ID,...]       the jobs that have not ended
  scancel ID ...           SIGTERM to the job's processes, SIGKILL after $FAKE_SLURM_KILL_WAIT s
  scontrol requeue ID      the job runs again once its processes end (same id)
  srun [opts] CMD ...      runs CMD with --output / --error (%j, %t expanded)
  fake_slurm.py preempt ID a preemption: requeue, then SIGTERM to the job's processes

With FAKE_SLURM_HOLD=1 no job starts (a full cluster): submission alone can be tested.

A job runs as the process group of `bash SCRIPT` with SLURM_JOB_ID, SLURM_PROCID=0 and
SLURM_NTASKS=1 set; the runner is a child subreaper, so it waits for every process of the job
(a SIGTERM ends bash before the Python it started) before it runs the job again or records
its end."""

from __future__ import annotations

import fcntl
import os
import re
import signal
import subprocess
import sys
import time

DIR = os.environ.get("FAKE_SLURM_DIR", "")
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")


def _p(job: str, what: str) -> str:
    return os.path.join(DIR, f"{job}.{what}")


def _get(job: str, what: str, default: str = "") -> str:
    try:
        with open(_p(job, what)) as f:
            return f.read().strip()
    except OSError:
        return default


def _put(job: str, what: str, text: str) -> None:
    tmp = _p(job, what) + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, _p(job, what))


def _log(argv: list[str]) -> None:
    with open(os.path.join(DIR, "calls.log"), "a") as f:
        f.write(" ".join(argv) + "\n")


def sbatch(args: list[str]) -> int:
    script = args[-1]
    with open(script) as f:
        text = f.read()
    with open(os.path.join(DIR, "next.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = os.path.join(DIR, "next")
        job = int(open(path).read()) if os.path.exists(path) else 1000
        with open(path, "w") as f:
            f.write(str(job + 1))
    job = str(job)
    _put(job, "sh", text)
    deps = re.findall(r"^#SBATCH --dependency=afterok:([\d:]+)", text, re.M)
    _put(job, "deps", " ".join(deps[0].split(":")) if deps else "")
    _put(job, "state", "PENDING")
    if os.environ.get("FAKE_SLURM_HOLD") == "1":  # a full cluster: every job stays pending
        print(f"Submitted batch job {job}")
        return 0
    subprocess.Popen([sys.executable, os.path.realpath(__file__), "_run", job],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)
    print(f"Submitted batch job {job}")
    return 0


def _run(job: str) -> int:
    """The job's life: wait for its dependencies, run its script, again after a requeue."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans come back here
    for dep in _get(job, "deps").split():
        while _get(dep, "state") not in ENDED:
            if os.path.exists(_p(job, "cancel")):
                _put(job, "state", "CANCELLED")
                return 0
            time.sleep(0.2)
        if _get(dep, "state") != "COMPLETED":
            _put(job, "state", "CANCELLED")
            return 0
    restarts = 0
    while True:
        if os.path.exists(_p(job, "cancel")):
            _put(job, "state", "CANCELLED")
            return 0
        _put(job, "state", "RUNNING")
        env = dict(os.environ, SLURM_JOB_ID=job, SLURM_JOBID=job, SLURM_PROCID="0",
                   SLURM_NTASKS="1", SLURM_LOCALID="0", SLURM_NODEID="0",
                   SLURM_JOB_NUM_NODES="1", SLURM_RESTART_COUNT=str(restarts))
        proc = subprocess.Popen(["bash", _p(job, "sh")], env=env, start_new_session=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        _put(job, "pgid", str(proc.pid))
        rc = proc.wait()
        while True:  # every process of the job, however it was orphaned
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
        if os.path.exists(_p(job, "requeue")) and rc == 0:  # it ended before the signal
            os.remove(_p(job, "requeue"))
        if os.path.exists(_p(job, "requeue")):
            os.remove(_p(job, "requeue"))
            _put(job, "state", "REQUEUED")
            restarts += 1
            time.sleep(0.5)
            continue
        if os.path.exists(_p(job, "cancel")):
            _put(job, "state", "CANCELLED")
        else:
            _put(job, "state", "COMPLETED" if rc == 0 else "FAILED")
        _put(job, "rc", str(rc))
        return 0


def _signal(job: str, sig: int) -> None:
    pgid = _get(job, "pgid")
    if pgid and _get(job, "state") == "RUNNING":
        try:
            os.killpg(int(pgid), sig)
        except ProcessLookupError:
            pass


def sacct(args: list[str]) -> int:
    jobs = [args[i + 1] for i, a in enumerate(args) if a == "-j"]
    print("JobID|State|NodeList")
    for job in jobs:
        state = _get(job, "state")
        if state:
            print(f"{job}|{state}|localhost")
            print(f"{job}.batch|{state}|localhost")
    return 0


def squeue(args: list[str]) -> int:
    want = set(args[args.index("-j") + 1].split(",")) if "-j" in args else None
    print("JOBID STATE")
    for name in sorted(os.listdir(DIR)):
        if name.endswith(".state"):
            job = name.split(".")[0]
            state = _get(job, "state")
            if state not in ENDED and (want is None or job in want):
                print(f"{job} {state}")
    return 0


def scancel(args: list[str]) -> int:
    sig = None
    if "--signal" in args:
        sig = getattr(signal, "SIG" + args[args.index("--signal") + 1].removeprefix("SIG"))
    jobs = [a for a in args if a.isdigit()]
    for job in jobs:
        if sig is not None:
            _signal(job, sig)
            continue
        _put(job, "cancel", "")
        if _get(job, "state") == "PENDING":
            _put(job, "state", "CANCELLED")
        _signal(job, signal.SIGTERM)
        wait = os.environ.get("FAKE_SLURM_KILL_WAIT", "10")
        subprocess.Popen([sys.executable, os.path.realpath(__file__), "_kill", job, wait],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    return 0


def _kill(job: str, wait: str) -> int:
    time.sleep(float(wait))
    _signal(job, signal.SIGKILL)
    return 0


def scontrol(args: list[str]) -> int:
    if args[:1] == ["requeue"]:
        for job in args[1].split(","):
            if _get(job, "state") not in ("RUNNING", "REQUEUED"):
                print(f"scontrol: error: Job {job} is not running", file=sys.stderr)
                return 1
            _put(job, "requeue", "")
        return 0
    print(f"scontrol: error: {' '.join(args)} is not supported here", file=sys.stderr)
    return 1


def preempt(args: list[str]) -> int:
    job = args[0]
    if _get(job, "state") != "RUNNING":
        print(f"preempt: job {job} is not running", file=sys.stderr)
        return 1
    _put(job, "requeue", "")
    _signal(job, signal.SIGTERM)
    return 0


def srun(args: list[str]) -> int:
    out = err = os.devnull
    while args and args[0].startswith("--"):
        opt = args.pop(0)
        if opt in ("--output", "--error"):
            value = args.pop(0)
        elif "=" in opt:
            opt, value = opt.split("=", 1)
        else:
            continue
        value = value.replace("%j", os.environ.get("SLURM_JOB_ID", "0")).replace("%t", "0")
        os.makedirs(os.path.dirname(value) or ".", exist_ok=True)
        if opt == "--output":
            out = value
        elif opt == "--error":
            err = value
    fo, fe = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND), os.open(
        err, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(fo, 1)
    os.dup2(fe, 2)
    os.execvp(args[0], args)
    return 127


COMMANDS = {"sbatch": sbatch, "sacct": sacct, "squeue": squeue, "scancel": scancel,
            "scontrol": scontrol, "srun": srun, "preempt": preempt}

if __name__ == "__main__":
    name = os.path.basename(sys.argv[0])
    argv = sys.argv[1:]
    if name not in COMMANDS:
        name, argv = argv[0], argv[1:]
    if name == "_run":
        sys.exit(_run(argv[0]))
    if name == "_kill":
        sys.exit(_kill(*argv))
    _log([name, *argv])
    sys.exit(COMMANDS[name](argv))
