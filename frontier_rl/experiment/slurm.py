"""The `slurm` launcher: every run of a comparison is one SLURM job, submitted through submitit
(facebookincubator/submitit), the same per-run entry the local launcher calls (compare.run_one)
running inside it.

- **Settings** (`compare.slurm`, DEFAULTS below): partition, account, qos, constraint, time
  (minutes), nodes per run, GPUs and CPUs per node, tasks per node (one process per node, as
  launch/slurm.sbatch runs one: JAX finds its coordinator and ranks in SLURM's environment,
  distributed.initialize), memory, setup lines run before the step, extra sbatch parameters.
- **Dependencies:** a run that needs another's outcome is submitted with
  `--dependency=afterok:<job>`: a matched run (compare.match_rollouts) after its reference (its
  budget is read inside the job, once the reference has finished), and a run whose warm start
  is not cached yet after the first unfinished run of that warm start, which trains and
  caches it (launchers.needs, the rule the local launcher follows too).
- **Time limits and preemption:** SLURM sends SIGTERM `signal_delay_s` before the time limit
  (`--signal=TERM@...`); train checkpoints at the end of its step and returns, and the job
  requeues itself (`scontrol requeue`, exit REQUEUE_EXIT, no result written). A preemption
  that SIGTERMs the job does the same. The requeued job resumes from the run's checkpoint.
- **Reattaching:** job ids go to DIR/slurm/jobs.json with each run's fingerprint. Rerunning the
  same command follows a recorded job that has not ended instead of submitting it again, skips
  finished runs and submits the rest; `--detach` returns once everything is submitted, and
  `--report_only` writes the report once every run has ended.
- **Stopping:** Ctrl-C while following cancels the comparison's unfinished jobs (scancel) and
  says so in one line; a job that ends without its run's DONE record stops the comparison with
  its name, job id, state and log.

Logs are DIR/slurm/<job id>/<job id>_0_log.out and .err (submitit's layout)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import ml_collections

from frontier_rl import config_lib
from frontier_rl.experiment import launchers
from frontier_rl.experiment.launchers import Outcome, Plan
from frontier_rl.run import statefile
from frontier_rl.run.errors import RunError

# compare.slurm's fields and defaults: a paper run is one node of 8 GPUs, one process per node
DEFAULTS = {"partition": "", "account": "", "qos": "", "constraint": "", "time_min": 1440,
            "nodes": 1, "gpus_per_node": 8, "tasks_per_node": 1, "cpus_per_task": 32,
            "mem_gb": 0, "setup": [], "additional": {}, "signal_delay_s": 300,
            "poll_s": 30.0, "job_name": "frontier_rl"}
# sacct states of a job that has not ended (a requeued job passes through these again)
UNFINISHED = {"PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "COMPLETING",
              "CONFIGURING", "RESIZING", "SUSPENDED", "PREEMPTED", "UNKNOWN", "READY"}
REQUEUE_EXIT = 3  # a job that checkpointed and asked SLURM to run it again
JOBS = "jobs.json"
NUMERICS_ENV = "FRONTIER_RL_NUMERICS_DIGEST"  # compare._numerics: inherited through sbatch
UNKNOWN_POLLS = 40  # polls a job may stay without an accounting record before it is named
DONE_WAIT_S = 60.0  # a shared filesystem may show a finished run's records late


def settings(c: ml_collections.ConfigDict) -> dict:
    """compare.slurm over DEFAULTS; a field DEFAULTS lacks, or a bad value, is an error naming
    it."""
    given = c.get("slurm") or {}
    given = given.to_dict() if isinstance(given, ml_collections.ConfigDict) else dict(given)
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        raise config_lib.ConfigError(
            f"compare.slurm.{unknown[0]} is not a SLURM setting: one of {', '.join(DEFAULTS)}")
    s = {**DEFAULTS, **given}
    for key in ("time_min", "nodes", "gpus_per_node", "tasks_per_node", "cpus_per_task",
                "mem_gb", "signal_delay_s"):
        low = 1 if key in ("time_min", "nodes", "tasks_per_node") else 0
        if not (isinstance(s[key], int) and not isinstance(s[key], bool) and s[key] >= low):
            raise config_lib.ConfigError(
                f"compare.slurm.{key}={s[key]!r} is not allowed: an integer >= {low}")
    if s["signal_delay_s"] >= 60 * s["time_min"]:
        raise config_lib.ConfigError(
            f"compare.slurm.signal_delay_s={s['signal_delay_s']} is not below the time limit "
            f"({s['time_min']} min): the run would be told to stop before it starts")
    return s


def _params(s: dict, dependency: str = "") -> dict:
    """submitit's SlurmExecutor parameters (sbatch's names) for one run's job."""
    p = {"job_name": s["job_name"], "time": s["time_min"], "nodes": s["nodes"],
         "ntasks_per_node": s["tasks_per_node"], "gpus_per_node": s["gpus_per_node"] or None,
         "cpus_per_task": s["cpus_per_task"] or None,
         "mem": f"{s['mem_gb']}GB" if s["mem_gb"] else None,
         "partition": s["partition"] or None, "account": s["account"] or None,
         "qos": s["qos"] or None, "constraint": s["constraint"] or None,
         "setup": list(s["setup"]) or None, "signal_delay_s": s["signal_delay_s"],
         "dependency": dependency or None,
         # srun no longer inherits --cpus-per-task (SLURM 22.05 to 23.02): give it to the step
         "srun_args": [f"--cpus-per-task={s['cpus_per_task']}"] if s["cpus_per_task"] else None,
         # SIGTERM, which train checkpoints on, in place of submitit's USR2; requeue allowed; a
         # job whose dependency failed is cancelled, not left pending for ever
         "additional_parameters": {"signal": f"TERM@{s['signal_delay_s']}", "requeue": True,
                                   "kill_on_invalid_dep": "yes", **dict(s["additional"])}}
    return {k: v for k, v in p.items() if v is not None}


class Job:
    """What a run's job executes: the comparison's per-run entry, then a requeue if SIGTERM
    cut it (its checkpoint is on disk: the requeued job resumes from it)."""

    def __init__(self, target, spec, workdir: str, prepare=None, break_lock: bool = False):
        self.target, self.spec, self.workdir, self.prepare = target, spec, workdir, prepare
        self.break_lock = break_lock  # the run's earlier job ended: a lock it left is stale

    def __call__(self) -> bool:
        import signal

        import jax

        from frontier_rl.experiment import workers
        from frontier_rl.run import distributed, lock

        # submitit ignores SIGTERM in its jobs; until train's loop takes it over, a SIGTERM
        # ends the job (SLURM's requeue, or the comparison's rerun, resumes the run)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        env = workers.child_env(self.workdir)  # the comparison's shared compile cache
        os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", env["JAX_COMPILATION_CACHE_DIR"])
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_compilation_cache_max_size",
                          int(env["JAX_COMPILATION_CACHE_MAX_SIZE"]))
        # the numerics this node computes in, not those of the node that submitted the job
        os.environ.pop(NUMERICS_ENV, None)
        if self.break_lock:
            os.environ[lock.BREAK_ENV] = "1"
        if int(os.environ.get("SLURM_NTASKS", "1")) > 1:
            distributed.initialize()
        if self.prepare is not None:  # a matched run's budget, from its finished reference
            self.prepare()
        if self.target(self.spec, self.workdir):
            return True
        if os.environ.get("SLURM_PROCID", "0") == "0":
            job = os.environ.get("SLURM_JOB_ID", "")
            done = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True,
                                  timeout=60)
            if done.returncode != 0:
                raise RunError(f"{self.spec.name} checkpointed after SIGTERM, but `scontrol "
                               f"requeue {job}` failed ({done.stderr.strip()}): rerun the "
                               "comparison's command to resubmit it")
        sys.exit(REQUEUE_EXIT)


def _submitit():
    """submitit, imported without its logging set-up (handlers bound to this process's streams
    at import, which a test's captured streams outlive): its records go to the root logger.
    Its jobs, which import it themselves, keep submitit's own."""
    if "submitit" not in sys.modules:
        before = os.environ.get("SUBMITIT_LOG_LEVEL")
        os.environ["SUBMITIT_LOG_LEVEL"] = "NOCONFIG"
        try:
            import submitit  # noqa: F401
        finally:
            if before is None:
                os.environ.pop("SUBMITIT_LOG_LEVEL")
            else:
                os.environ["SUBMITIT_LOG_LEVEL"] = before
    return sys.modules["submitit"]


def _folder(workdir: str) -> str:
    return os.path.join(os.path.abspath(workdir), "slurm")


def script(spec, specs: list, workdir: str, s: dict, dependency: str = "") -> str:
    """The batch script submitit writes for this run's job (%j: the job id, known once
    submitted)."""
    _submitit()
    from submitit.slurm import slurm as submitit_slurm

    folder = os.path.join(_folder(workdir), "%j")
    command = f"{sys.executable} -u -m submitit.core._submit {folder}"
    return submitit_slurm._make_sbatch_string(command=command, folder=folder,
                                              **_params(s, dependency))


def _last_line(path) -> str:
    try:
        with open(path, errors="replace") as f:
            lines = [x.strip() for x in f.read().splitlines()[-40:] if x.strip()]
    except OSError:
        return "no log"
    return lines[-1][:300] if lines else "empty log"


class Slurm:
    name = "slurm"

    DEFAULTS = DEFAULTS
    settings = staticmethod(settings)

    def dry_run(self, plan: Plan) -> str:
        specs, workdir, s = plan.specs, plan.workdir, settings(plan.c)
        parts = [f"slurm launcher: {len(specs)} runs, one job each (nothing submitted)"]
        for spec in specs:
            after = ", ".join(x.name for x in launchers.needs(spec, specs, plan.finished))
            dep = "afterok:JOBID_OF_" + after.replace(", ", ":JOBID_OF_") if after else ""
            parts += ["", f"===== {spec.name} -> {spec.dir}"
                      + (f" (after {after})" if after else ""), script(spec, specs, workdir, s,
                                                                        dep)]
        return "\n".join(parts)

    def run(self, plan: Plan, detach: bool = False) -> Outcome:
        import functools

        from frontier_rl.experiment import workers

        specs, workdir, finished = plan.specs, plan.workdir, plan.finished
        s = settings(plan.c)
        folder = _folder(workdir)
        os.makedirs(folder, exist_ok=True)
        book_path = os.path.join(folder, JOBS)
        book = (statefile.read_json(book_path, "the comparison's SLURM job record",
                                    f"delete {book_path} to submit every unfinished run again")
                if os.path.exists(book_path) else {})
        jobs: dict = {}  # run name -> submitit.Job, filled as they are submitted
        say = functools.partial(print, flush=True)
        try:
            self._submit(plan, s, book_path, book, jobs, say)
            if detach and jobs:
                say(f"detached: {len(jobs)} SLURM job(s) of this comparison in {folder}; rerun "
                    "the same command to follow them, or add --report_only once they have "
                    "ended")
                return Outcome(detached=True)
            self._follow(jobs, {s_.name: s_ for s_ in specs}, finished, s["poll_s"], say)
        except KeyboardInterrupt:  # while submitting or following: cancel what is live
            live = [(n, j) for n, j in jobs.items()
                    if j.watcher.get_state(j.job_id, mode="cache").split()[0] in UNFINISHED]
            for _, j in live:
                j.cancel(check=False)
            raise workers.Interrupted(
                "interrupted; " + (f"cancelled SLURM jobs {', '.join(j.job_id for _, j in live)}"
                                   f" (runs {', '.join(n for n, _ in live)})" if live
                                   else "no SLURM job of this comparison was running")
                + "; each resumes from its newest checkpoint when the same command submits "
                "it again") from None
        return Outcome()

    @staticmethod
    def _submit(plan: Plan, s: dict, book_path: str, book: dict, jobs: dict, say) -> None:
        """Reattaches to each run's recorded job that has not ended (and still waits for the
        jobs its run needs now), submits the others that have not finished, after the jobs
        they need, recording every id as it goes."""
        submitit = _submitit()
        folder = os.path.join(os.path.dirname(book_path), "%j")
        specs, finished = plan.specs, plan.finished
        for i, spec in enumerate(specs, 1):
            # before begin: a matched run's budget is resolved there, once its reference has
            # finished, and the record must name the run as it was first submitted
            fp = plan.fingerprint(spec)
            needs = launchers.needs(spec, specs, finished)
            head = f"[{i}/{len(specs)}] {spec.name}"
            if all(finished(x) for x in needs):
                if not plan.begin(i, spec, say):  # finished earlier
                    continue
            elif finished(spec):
                say(f"{head}: finished earlier, skipped")
                continue
            after = [jobs[x.name].job_id for x in needs if x.name in jobs and not finished(x)]
            old = book.get(spec.name) or {}
            ended = True  # no earlier job of this run, or one that has ended
            if old.get("job_id"):
                job = submitit.SlurmJob(folder=folder, job_id=str(old["job_id"]))
                state = job.watcher.get_state(job.job_id, mode="force")
                ended = state.split()[0] not in UNFINISHED
                if not ended and old.get("fingerprint") != fp:
                    raise RunError(
                        f"{spec.name}: its SLURM job {job.job_id} runs another config of this "
                        f"run and is {state}; cancel it (scancel {job.job_id}) or let it end, "
                        "then rerun")
                if not ended and set(after) <= set(old.get("after") or []):
                    jobs[spec.name] = job
                    say(f"{head}: reattached to SLURM job {job.job_id} ({state})")
                    continue
                if not ended:  # it waits for a job that was replaced: replace it too
                    job.cancel(check=False)
                    say(f"{head}: cancelled SLURM job {job.job_id}, which waited for a job "
                        "submitted again")
            executor = submitit.SlurmExecutor(folder=folder)  # no parameter of another job
            executor.update_parameters(**_params(
                s, "afterok:" + ":".join(after) if after else ""))
            job = executor.submit(Job(plan.target, spec, plan.workdir, plan.prepare(spec),
                                      break_lock=bool(old.get("job_id")) and ended))
            jobs[spec.name] = job
            book[spec.name] = {"job_id": job.job_id, "fingerprint": fp, "after": after}
            statefile.write_json(book_path, book, indent=1)
            say(f"{head}: submitted as SLURM job {job.job_id}"
                + (f" (after job {', '.join(after)})" if after else "")
                + f"; log {job.paths.stdout}")

    @staticmethod
    def _follow(jobs: dict, by_name: dict, finished, poll_s: float, say) -> None:
        """Waits for every job, saying each change of state; a job that ended without its
        run's DONE record stops the comparison, naming it (the others keep running)."""
        seen: dict[str, str] = {}
        unknown: dict[str, int] = {}
        live = dict(jobs)
        while live:
            watcher = next(iter(live.values())).watcher
            # submitit stops asking about a job it takes for ended (SUSPENDED, REQUEUE_HOLD);
            # these may run again, so every live job is asked about at each poll
            watcher._finished.difference_update(j.job_id for j in live.values())
            watcher.update()  # one sacct call for every job
            for name, job in list(live.items()):
                state = watcher.get_state(job.job_id, mode="cache")
                if state != seen.get(name):
                    seen[name] = state
                    say(f"[slurm] {name}: job {job.job_id} {state}")
                unknown[name] = unknown.get(name, 0) + 1 if state == "UNKNOWN" else 0
                if unknown[name] > UNKNOWN_POLLS:
                    raise RunError(
                        f"{name}: sacct has had no record of SLURM job {job.job_id} for "
                        f"{UNKNOWN_POLLS} polls (is accounting on? `squeue -j {job.job_id}` "
                        "says whether it runs); rerun the same command to follow it again")
                if state.split()[0] in UNFINISHED:
                    continue
                del live[name]
                t0 = time.monotonic()
                while not finished(by_name[name]) and time.monotonic() - t0 < DONE_WAIT_S \
                        and state.split()[0] == "COMPLETED":
                    time.sleep(min(poll_s, 5.0))  # a shared filesystem may lag
                if not finished(by_name[name]):
                    others = ", ".join(f"{n} ({j.job_id})" for n, j in live.items())
                    raise RunError(
                        f"{name}: SLURM job {job.job_id} ended {state} before its budget "
                        f"(log {job.paths.stderr}: {_last_line(job.paths.stderr)})"
                        + (f"; still running: {others}" if others else "")
                        + "; rerun the same command to follow them and submit it again")
            if live:
                time.sleep(poll_s)
