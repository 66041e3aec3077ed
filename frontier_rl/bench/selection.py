"""Selector host-time bench: `frontier-rl bench selection --selector=NAME [--sizes=...] [--json]`.

For each pool size N, the selector is built with its default config over a `ScriptedContext` of
N prompts (latent success probabilities ~ Beta(0.4, 0.4): about half the groups of G = 8 are
zero-variance, as early in a real run), B = 256 prompts per step, G = 8. After `WARMUP` untimed
steps, each timed step runs build_batch + after_update (the trainer's per-step calls; HeaPA's
augmentation and insertion happen in after_update) and its time minus the time spent inside the
context's own methods (rollout, prompt entropy, generate, add_prompts) is the selector's host
time. The figure is the median over `repeats` steps.

Memory per prompt: the bytes a fresh selector holds (tracemalloc, which sees numpy buffers) after
the warm-up steps, divided by N; measured on a separate instance so tracing does not slow the
timed one. Checkpoint bytes per prompt: the size of `json.dumps(state_dict())` / N.
"""

from __future__ import annotations

import gc
import json
import statistics
import time
import tracemalloc

import ml_collections
import numpy as np

from frontier_rl import selection
from frontier_rl.selection.scripted import ScriptedContext

BATCH_SIZE = 256
GROUP_SIZE = 8
WARMUP = 3
SEED = 0


def _context(n: int) -> ScriptedContext:
    p = np.random.default_rng([SEED, n]).beta(0.4, 0.4, n)
    return ScriptedContext(p, batch_size=BATCH_SIZE, group_size=GROUP_SIZE, seed=SEED)


def _make(name: str, n: int):
    """The selector with its registered defaults, in the ConfigDict shape the trainer passes."""
    cfg = ml_collections.ConfigDict({name: dict(selection.defaults(name))})
    return selection.make(name, cfg, n, SEED)


def _step(sel, ctx: ScriptedContext, step: int) -> tuple[float, float, int]:
    """(selector host seconds, context seconds, rollouts) of one step."""
    ctx.begin_step(step)
    in_ctx, rollouts = ctx.time_in_s, ctx.counters["rollouts"]
    t0 = time.perf_counter()
    groups = sel.build_batch(ctx)
    sel.after_update(ctx, groups)
    total = time.perf_counter() - t0
    ctx_s = ctx.time_in_s - in_ctx
    return total - ctx_s, ctx_s, ctx.counters["rollouts"] - rollouts


def _memory_per_prompt(name: str, n: int) -> float:
    ctx = _context(n)
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        sel = _make(name, n)
        for s in range(1, WARMUP + 1):
            _step(sel, ctx, s)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    del sel
    return held / n


def bench_size(name: str, n: int, repeats: int) -> dict:
    ctx = _context(n)
    t0 = time.perf_counter()
    sel = _make(name, n)
    build_s = time.perf_counter() - t0
    for s in range(1, WARMUP + 1):
        _step(sel, ctx, s)
    host, in_ctx, rollouts = [], [], []
    for s in range(WARMUP + 1, WARMUP + 1 + repeats):
        h, c, r = _step(sel, ctx, s)
        host.append(h)
        in_ctx.append(c)
        rollouts.append(r)
    ckpt = len(json.dumps(sel.state_dict()))
    return {
        "pool": n,
        "median_ms": 1e3 * statistics.median(host),
        "min_ms": 1e3 * min(host),
        "max_ms": 1e3 * max(host),
        "ctx_median_ms": 1e3 * statistics.median(in_ctx),
        "rollouts_per_step": statistics.median(rollouts),
        "build_s": build_s,
        "mem_bytes_per_prompt": _memory_per_prompt(name, n),
        "ckpt_bytes_per_prompt": ckpt / n,
    }


def main(selector: str, *, sizes: list[int], repeats: int, as_json: bool) -> dict:
    if selector not in selection.names():
        raise ValueError(f"--selector={selector!r} is not one of {selection.names()}")
    if repeats < 1:
        raise ValueError(f"--repeats={repeats} is not allowed: an integer >= 1")
    if not sizes or any(n < 1 for n in sizes):
        raise ValueError(f"--sizes={sizes} is not allowed: pool sizes >= 1")
    rows = [bench_size(selector, n, repeats) for n in sizes]
    out = {"bench": "selection", "selector": selector, "batch_size": BATCH_SIZE,
           "group_size": GROUP_SIZE, "warmup": WARMUP, "repeats": repeats, "results": rows}
    print(f"selector {selector}: host time per step (build_batch + after_update, context time "
          f"excluded), B={BATCH_SIZE}, G={GROUP_SIZE}, median of {repeats} after {WARMUP} "
          "warm-up steps")
    print(f"{'pool':>9} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'ctx ms':>8} "
          f"{'rollouts':>9} {'mem B/prompt':>13} {'ckpt B/prompt':>14}")
    for r in rows:
        print(f"{r['pool']:>9,} {r['median_ms']:>10.3f} {r['min_ms']:>8.3f} {r['max_ms']:>8.3f} "
              f"{r['ctx_median_ms']:>8.2f} {r['rollouts_per_step']:>9,.0f} "
              f"{r['mem_bytes_per_prompt']:>13.1f} {r['ckpt_bytes_per_prompt']:>14.2f}")
    if selector in ("heapa", "ps"):
        # The pool work the HeaPA acceptance names: sample B, observe B groups, insert B
        # augmented records, on a full pool of each size (selection/heapa/bench.py).
        from frontier_rl.selection.heapa import bench as heapa_bench

        out["pool_profile"] = []
        print("heapa pool: sample 256 + observe 256 groups + insert 256 augmented records")
        for n in sizes:
            r = heapa_bench.profile(n, BATCH_SIZE, memory=n <= 200_000 or n == max(sizes))
            out["pool_profile"].append(r)
            mem = f"{r['bytes_per_record']:.0f} B/record" if "bytes_per_record" in r else ""
            print(f"{n:>9,}  median {r['step_ms_p50']:.2f} ms  mean {r['step_ms_mean']:.2f}  "
                  f"p99 {r['step_ms_p99']:.2f}  (sample {r['sample_ms']:.2f} + observe "
                  f"{r['observe_ms']:.2f} + insert {r['insert_ms']:.2f})  {mem}")
    if as_json:
        print(json.dumps(out))
    return out
