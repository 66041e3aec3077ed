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

import jax

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
