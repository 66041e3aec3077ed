"""Where a comparison's runs execute (`compare.launcher`), behind one door.

A launcher takes the plan (compare.plan: one RunSpec per method and seed, in order) and runs
each as `target(spec, workdir)` (compare.run_one: train.run, then the DONE record), announcing
each through `begin` (which skips a run that finished earlier and reads a matched run's budget).
The plan, its dependencies and the results do not depend on the launcher:

  local   this machine (workers.py): one run after another in this process
          (compare.workers = 1), or `compare.workers` child processes at once, output
          prefixed, Ctrl-C and SIGTERM checkpointing every run;
  slurm   one SLURM job per run, submitted through submitit (experiment/slurm.py): job ids kept
          in DIR/slurm/jobs.json so the same command reattaches, `--detach` returns once
          submitted, a run cut by its time limit or a preemption checkpoints and requeues.

A launcher gets a Plan (the runs and the comparison's own functions on them) and `run`
returns an Outcome: the runs SIGTERM cut (the comparison stops naming them) and whether the
launcher returned before the runs ended (`--detach`). `dry_run` says what would execute,
submitting and training nothing. Both launchers start a run once the runs it `needs` have
ended. Launchers are registered by import path (LAUNCHERS), so this
door imports none of them."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable

import ml_collections

from frontier_rl import config_lib


@dataclasses.dataclass
class Plan:
    """A comparison's runs and what a launcher may do with them (compare.py supplies these):
    `begin(i, spec, say)` announces run i and returns False for one finished earlier;
    `target(spec, workdir)` runs it (True once at its budget); `finished(spec)` whether it
    ended at its budget; `fingerprint(spec)` what makes it the same run; `prepare(spec)` what
    must happen where it runs before it starts (a matched run's budget), or None."""

    specs: list
    workdir: str
    c: ml_collections.ConfigDict
    begin: Callable
    target: Callable
    finished: Callable
    fingerprint: Callable
    prepare: Callable


@dataclasses.dataclass
class Outcome:
    cut: list[str] = dataclasses.field(default_factory=list)
    detached: bool = False


def needs(spec, specs: list, finished: Callable) -> list:
    """The runs that must end before `spec` (a compare.RunSpec) starts: a matched run's
    reference at its seed, and, while its warm start is not cached, the first unfinished run of
    that warm start (which trains the cache the others load). The local launcher asks again at
    every poll, so the others start once the cache is on disk; the slurm launcher asks once,
    at submission (a job's dependency)."""
    out = [spec.reference(specs)] if spec.match else []
    if spec.needs_warm_start():
        cache = spec.config.warmstart.cache_dir
        first = next((s for s in specs if s.config.warmstart.cache_dir == cache
                      and not finished(s)), spec)
        if first is not spec and first not in out:
            out.append(first)
    return out


# name -> "module:class"
LAUNCHERS = {"local": "frontier_rl.experiment.workers:Local",
             "slurm": "frontier_rl.experiment.slurm:Slurm"}


def _load(path: str):
    module, attr = path.split(":")
    return getattr(importlib.import_module(module), attr)


def slurm_settings(**over) -> ml_collections.ConfigDict:
    """compare.slurm for a config file: the slurm launcher's defaults (slurm.DEFAULTS: one node
    of 8 GPUs a run, one process per node) with the config's own changes."""
    defaults = _load(LAUNCHERS["slurm"]).DEFAULTS
    unknown = sorted(set(over) - set(defaults))
    if unknown:
        raise config_lib.ConfigError(f"compare.slurm.{unknown[0]} is not a SLURM setting")
    return ml_collections.ConfigDict({**defaults, **over})


def names() -> list[str]:
    return sorted(LAUNCHERS)


def get(c: ml_collections.ConfigDict):
    """The launcher compare.launcher names (default local)."""
    name = c.get("launcher", "local")
    if name not in LAUNCHERS:
        raise config_lib.ConfigError(
            f"compare.launcher={name!r} is not a launcher: one of {', '.join(names())}")
    return _load(LAUNCHERS[name])()


def check(c: ml_collections.ConfigDict) -> None:
    """compare.launcher names a launcher, and every launcher's section the config holds
    (compare.slurm) is valid, whichever launcher runs: a typo is found before any run."""
    get(c)
    for name, path in LAUNCHERS.items():
        cls = _load(path)
        if c.get(name) is not None and hasattr(cls, "settings"):
            cls.settings(c)
