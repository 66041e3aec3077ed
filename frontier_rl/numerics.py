"""The code's float numerics, pinned on the CPU and named by a digest.

A thousand-step warm start or a 150-step RL run turns any change of float rounding into another
trajectory: a changed matmul layout, another XLA:CPU code generation (XLA compiles for the
host's instruction set, so an AVX-512 machine and an AVX2 one round differently), or another
split of a contraction over threads. Two things follow.

- `pin_cpu` fixes what XLA:CPU may vary by machine, before JAX starts (`frontier-rl` calls it,
  and a comparison's worker processes inherit it): vector code no newer than AVX2 (every
  x86-64 CPU since 2013-2015 has it), no platform-dependent or fast math, no XNNPACK/YNNPACK
  kernels (they pick their kernels by the CPU they find), and one thread per contraction (an
  Eigen contraction split over threads may split its inner dimension, whose partial sums then
  depend on the core count). A flag already in XLA_FLAGS keeps its value.
  `FRONTIER_RL_NUMERICS=native` turns the pinning off (faster on some machines; results then
  are this machine's own). What pinning cannot fix: Eigen's GEMM blocks its inner dimension by
  the CPU's cache sizes, and arm64 has other vector units, so long contractions may still round
  differently on another machine: there the verdicts of a published comparison, not its
  digits, are what must agree (docs/results.md).
- `digest` names the numerics the code gives: a fixed small computation (a forward pass, a
  gradient and an AdamW update of the embedded policy's architecture, and sampled tokens from
  the project's sampler) hashed bit for bit, computed in a fresh process on one CPU device as
  a run has (the test suite's 8 fake devices on 2 cores round the forward pass otherwise). A
  change to any float operation of the model, the log-prob path, the optimizer or the sampler
  changes it. The warm-start cache key and every
  comparison's results file carry it, so a cache or a published table made by other numerics
  is refused or flagged, never reused silently (tests/test_published_results.py).
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import subprocess
import sys

from frontier_rl.run import statefile

# XLA:CPU flags that fix the code generation across x86-64 machines (see the module docstring).
CPU_FLAGS = (
    "--xla_cpu_max_isa=AVX2",
    "--xla_cpu_enable_fast_math=false",
    "--xla_cpu_enable_platform_dependent_math=false",
    "--xla_cpu_use_xnnpack=false",
    "--xla_cpu_experimental_ynn_fusion_type=",
    "--xla_cpu_multi_thread_eigen=false",
)
ENV = "FRONTIER_RL_NUMERICS"  # "native": leave XLA:CPU's flags to XLA


def pin_cpu(env=None) -> None:
    """Adds CPU_FLAGS to env["XLA_FLAGS"] (default os.environ), each unless that flag is already
    set there; a no-op with FRONTIER_RL_NUMERICS=native. Call before JAX starts its backend."""
    env = os.environ if env is None else env
    if env.get(ENV, "") == "native":
        return
    flags = env.get("XLA_FLAGS", "")
    have = {f.split("=", 1)[0] for f in flags.split()}
    add = [f for f in CPU_FLAGS if f.split("=", 1)[0] not in have]
    if add:
        env["XLA_FLAGS"] = " ".join([flags, *add]).strip()


def pinned(env=None) -> bool:
    """Whether every flag of CPU_FLAGS is in effect with its pinned value."""
    env = os.environ if env is None else env
    have = set(env.get("XLA_FLAGS", "").split())
    return all(f in have for f in CPU_FLAGS)


DEVICES_FLAG = "--xla_force_host_platform_device_count"


def digest_env(env=None) -> dict[str, str]:
    """The environment `digest` computes in: this one on the CPU with the numerics pinned (unless
    FRONTIER_RL_NUMERICS=native) and one CPU device, as a run has (fake devices beyond the
    cores change XLA:CPU's rounding: measured, 8 fake devices on 2 cores)."""
    env = dict(os.environ if env is None else env)
    env["XLA_FLAGS"] = " ".join(f for f in env.get("XLA_FLAGS", "").split()
                                if not f.startswith(DEVICES_FLAG))
    pin_cpu(env)
    env["JAX_PLATFORMS"] = "cpu"
    env.pop("JAX_COMPILATION_CACHE_DIR", None)  # compiled afresh, never from a cache
    return env


CACHE_ENV = "FRONTIER_RL_NUMERICS_CACHE"  # where digests are kept (default ~/.cache/...)


@functools.lru_cache(maxsize=1)
def digest() -> str:
    """16 hex digits naming the code's numerics (see the module docstring): `compute` in a
    fresh process on one CPU device under the pinned flags, whatever this process runs on.

    Computing it starts JAX and compiles in a new process (seconds), and every run with a warm
    start needs it, so it is kept on disk under a key of everything it is a function of: every
    source file of the package, the versions of Python, JAX, jaxlib, Flax, optax and NumPy, the
    environment it computes in (XLA_FLAGS, FRONTIER_RL_NUMERICS) and this CPU (its model and
    feature flags). Another code, library, flag or CPU is another key: a digest kept on disk is
    never one that other inputs made."""
    env = digest_env()
    path = os.path.join(os.environ.get(CACHE_ENV) or os.path.join(
        os.path.expanduser("~"), ".cache", "frontier_rl", "numerics"), cache_key(env))
    try:
        with open(path, encoding="utf-8") as f:
            kept = f.read().strip()
        if len(kept) == 16 and all(c in "0123456789abcdef" for c in kept):
            return kept
    except OSError:
        pass
    out = subprocess.run([sys.executable, "-c", "from frontier_rl import numerics; "
                          "print(numerics.compute())"], env=env, capture_output=True,
                         text=True, timeout=600)
    if out.returncode:
        raise RuntimeError(f"the numerics digest failed: {out.stderr.strip()[-2000:]}")
    value = out.stdout.strip().splitlines()[-1]
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        statefile.write_json(path, None, text=value + "\n")
    except OSError:  # a read-only home: computed again next time
        pass
    return value


def cache_key(env: dict[str, str]) -> str:
    """The digest's inputs (see `digest`), hashed."""
    from importlib import metadata

    h = hashlib.sha256()
    package = os.path.dirname(os.path.abspath(__file__))
    for root, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(root, name)
            h.update(os.path.relpath(path, package).encode())
            with open(path, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
    for dist in ("jax", "jaxlib", "flax", "optax", "numpy"):
        try:
            h.update(f"{dist}={metadata.version(dist)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{dist}=none".encode())
    h.update(sys.version.encode())
    h.update(f"{env.get('XLA_FLAGS', '')}|{env.get(ENV, '')}|{platform.machine()}".encode())
    h.update(_cpu().encode())
    return h.hexdigest()[:32]


def _cpu() -> str:
    """This CPU's model name and feature flags (Linux), else the platform's description."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            block = f.read().split("\n\n", 1)[0]
    except OSError:
        return platform.processor() or platform.platform()
    keep = ("model name", "flags", "Features", "CPU implementer", "CPU part")
    return "\n".join(line for line in block.splitlines() if line.split(":")[0].strip() in keep)


def compute() -> str:
    """The digest of the fixed computation in this process, on its default device."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from frontier_rl.models import ModelConfig, Transformer
    from frontier_rl.rl.train_step import OptimConfig, make_optimizer, sequence_logps
    from frontier_rl.rollout.sampler import Sampler

    # The embedded policy's architecture (config_lib's model defaults), a 20-token vocabulary.
    mcfg = ModelConfig(vocab_size=20, hidden_size=64, intermediate_size=256, num_layers=2,
                       num_heads=4, num_kv_heads=2, head_dim=16, rope_theta=10000.0,
                       family="qwen3", qk_norm=True, tie_word_embeddings=True,
                       dtype="float32", bos_token_id=1, eos_token_id=2, eos_token_ids=(2,),
                       pad_token_id=0)
    graphdef, params = nnx.split(Transformer(mcfg, rngs=nnx.Rngs(0)), nnx.Param)
    rng = np.random.default_rng(0)
    tokens = jnp.asarray(rng.integers(3, 20, size=(4, 24)), jnp.int32)
    valid = jnp.asarray(np.arange(24)[None, :] >= np.array([[0], [3], [7], [11]]), jnp.int32)
    weights = jnp.asarray(rng.normal(size=(4, 23)), jnp.float32)

    def loss(p):
        logp, ent = sequence_logps(nnx.merge(graphdef, p), tokens, valid, 0.7)
        return -(logp * weights * valid[:, 1:]).mean() - 1e-3 * ent.mean(), (logp, ent)

    tx = make_optimizer(OptimConfig(learning_rate=1e-3, weight_decay=0.01))

    @jax.jit
    def step(p):
        (value, aux), grads = jax.value_and_grad(loss, has_aux=True)(p)
        updates, _ = tx.update(grads, tx.init(p), p)
        return value, aux, grads, jax.tree.map(jnp.add, p, updates)

    value, (logp, ent), grads, new = step(params)
    sampler = Sampler(graphdef, mcfg, eos_id=2, pad_id=0, prompt_buckets=(16,),
                      max_new_tokens=8)
    prompts = [[1, 5, 6, 7], [1, 9, 3, 4, 12, 13]]
    drawn = sampler.sample(new, prompts, 2, seed=3, temperature=0.7, top_p=0.7)
    h = hashlib.sha256()
    for a in (value, logp, ent, *jax.tree.leaves(grads), *jax.tree.leaves(new),
              drawn.tokens, drawn.logps, drawn.entropies):
        h.update(np.asarray(a).tobytes())
    return h.hexdigest()[:16]
