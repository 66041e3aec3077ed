"""JAX's persistent compilation cache for a run: compiled programs kept on disk, so a resumed
or restarted run (a preemption, a crash, the next arm of a comparison) loads them instead of
compiling them again. At the paper configs' shapes a train step or a sampler program takes
minutes to compile, and a restart otherwise pays all of them before its first step.

The cache lives in `<workdir>/.jax_cache` unless the environment names one
(`JAX_COMPILATION_CACHE_DIR`, JAX's own variable, e.g. a directory shared by the runs of a
cluster). JAX keys every entry by the program, its shardings, the devices and the JAX/XLA
versions, so a cache written by another mesh or another release is never used by mistake.
"""

from __future__ import annotations

import os
import re
import threading
from collections import Counter

import jax
from jax import monitoring

ENV = "JAX_COMPILATION_CACHE_DIR"
MIN_SECONDS_ENV = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"


def enable(workdir: str, min_compile_seconds: float = 1.0) -> str:
    """Points JAX's persistent cache at `<workdir>/.jax_cache` (or $JAX_COMPILATION_CACHE_DIR)
    and returns that directory. Programs that compiled faster than `min_compile_seconds` are
    not written (JAX's default threshold is 1 s; 0 keeps every program), unless
    $JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS sets it. JAX opens the directory at the
    process's first compile with a cache, so call this before any compile."""
    path = os.environ.get(ENV) or os.path.join(workdir, ".jax_cache")
    jax.config.update("jax_compilation_cache_dir", path)
    if MIN_SECONDS_ENV not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs",
                          float(min_compile_seconds))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return path


# ----------------------------------------------------------------------------- compile churn

# JAX's event for every XLA backend compile (jax/_src/dispatch.py, BACKEND_COMPILE_EVENT): a
# program loaded from the persistent cache reports its load time under the same event.
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


class CompileLog:
    """Every backend compile of this process: seconds and a count per jitted function name
    (the kind of program: train step, sampler segment, log-prob pass...). Read by the trainer
    into each step's records (`perf/compile_s`, `perf/compiles`, `perf/compiles/<kind>`), so
    a run shows how much of its time went to compiling new shapes."""

    def __init__(self):
        self.seconds = 0.0
        self.counts: Counter = Counter()
        self._lock = threading.Lock()

    def _listen(self, event: str, duration: float, **kwargs) -> None:
        if event != COMPILE_EVENT:
            return
        kind = re.sub(r"[^A-Za-z0-9_]+", "_", str(kwargs.get("fun_name", "other"))).strip("_")
        with self._lock:
            self.seconds += float(duration)
            self.counts[kind or "other"] += 1

    def metrics(self, since: dict[str, float] | None = None) -> dict[str, float]:
        """Cumulative figures, less those of `since` (an earlier `metrics()`: what a run in a
        process that compiled before it, such as a comparison's later arms, added itself)."""
        with self._lock:
            out = {"perf/compile_s": self.seconds,
                   "perf/compiles": float(sum(self.counts.values()))}
            out.update({f"perf/compiles/{k}": float(v) for k, v in self.counts.items()})
        since = since or {}
        return {k: v - since.get(k, 0.0) for k, v in out.items()}


_LOG: CompileLog | None = None


def compile_log() -> CompileLog:
    """The process's CompileLog, listening from the first call on (cumulative)."""
    global _LOG
    if _LOG is None:
        _LOG = CompileLog()
        monitoring.register_event_duration_secs_listener(_LOG._listen)
    return _LOG
