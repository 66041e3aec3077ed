"""Host-time and memory profile of the HeaPA pool at large sizes.

    python -m frontier_rl.selection.heapa.bench 1000000

`profile(pool_size)` fills a pool of that many scored records (pool statistics on the grid of
G = 8 ternary outcomes, as real groups give), then times each step's pool work:

    sample  B records (boundary sampler: 2B candidates, B drawn, the rest pushed back)
    observe B groups (pool statistic from a [B, G] reward array, archive)
    insert  B augmented records with parents (heap entry at an estimate: the costlier path;
            cold entry is a deque append) and their lineage edges

and reports per-step mean / p50 / p99 / max milliseconds (heap rebuilds, amortised O(1),
included), plus the memory per record (everything the pool keeps for it: the record, its
id string, heap entries and dict slots; no text), measured with tracemalloc.

As in a run, the archive is recycled when it reaches `archive_max`, `recycle_chunk` records
per step (reported apart as recycle_ms), so the number of live records stays near N. The
interpreter's full garbage collections land in whichever phase triggers them; their count and
total time are reported (gc_full_collections, gc_pause_ms_total).
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc

import numpy as np

from frontier_rl.selection.heapa.lineage import Lineage
from frontier_rl.selection.heapa.pool import Pool, Record


class _GcPauses:
    """Counts the collector's full (generation 2) passes and the time it spends in all passes
    while timing, so a step's figure can be read with or without them."""

    def __init__(self):
        self.reset()
        self._t0 = 0.0
        gc.callbacks.append(self._cb)

    def reset(self) -> None:
        self.full, self.seconds = 0, 0.0

    def _cb(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._t0
            self.full += int(info["generation"] == 2)

    def close(self) -> None:
        gc.callbacks.remove(self._cb)


def _fill(pool_size: int, group_size: int, rng: np.random.Generator) -> Pool:
    pool = Pool(alpha=0.5, capacity=pool_size, seed=int(rng.integers(1 << 30)))
    stats = (rng.integers(-group_size, group_size + 1, pool_size) / group_size).tolist()
    pool.bulk_load([Record(f"seed/{i:07d}", index=i, stat=s) for i, s in enumerate(stats)])
    return pool


def memory_per_record(n: int, group_size: int = 8) -> float:
    """Bytes the pool holds per scored record (no text), by tracemalloc."""
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    pool = _fill(n, group_size, np.random.default_rng(1))
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    del pool
    return used / n


def profile(pool_size: int, batch: int = 256, *, steps: int = 100, warmup: int = 5,
            group_size: int = 8, entry: str = "heap", archive_max: int = 8192,
            recycle_chunk: int = 512, memory: bool = True, memory_records: int = 200_000,
            seed: int = 0) -> dict:
    """Times sample / observe / insert of `batch` items per step on a full pool."""
    rng = np.random.default_rng(seed)
    t_fill = time.perf_counter()
    pool = _fill(pool_size, group_size, rng)
    t_fill = time.perf_counter() - t_fill
    gc.collect()  # start from the steady state, not from the fill's collector backlog
    pauses = _GcPauses()
    graph = Lineage()
    pool.on_evict = lambda rec: graph.remove(rec.rid, rec.parent)  # as the selector does
    G = group_size
    times = np.zeros((steps, 4))
    n_new = 0
    for step in range(steps + warmup):
        rewards = rng.integers(-1, 2, size=(batch, G)).astype(np.float32)
        est = (rng.integers(-G, G + 1, size=batch) / G).tolist()
        t0 = time.perf_counter()
        recs = pool.sample(batch)
        t1 = time.perf_counter()
        stats = rewards.astype(np.float64).mean(axis=1).tolist()
        for rec, s in zip(recs, stats, strict=False):
            pool.observe(rec, s, step)
        t2 = time.perf_counter()
        new = []
        for j, rec in enumerate(recs):
            child = Record(f"aug/{n_new:x}", text="", answer="", est=est[j],
                           stat=est[j] if entry == "heap" else None, aug=True,
                           parent=rec.rid, d=1.0)
            n_new += 1
            new.append(child)
        pool.add_many(new)
        for child in new:
            graph.add(child.rid, child.parent)
        t3 = time.perf_counter()
        if not pool.recycling and len(pool.archive) >= archive_max:
            pool.begin_recycle()
        pool.recycle_some(recycle_chunk)
        t4 = time.perf_counter()
        if step >= warmup:
            times[step - warmup] = (t1 - t0, t2 - t1, t3 - t2, t4 - t3)
        if step == warmup - 1:
            pauses.reset()
    pauses.close()
    ms = 1e3 * times
    total = ms[:, :3].sum(axis=1)
    out = {
        "pool_size": pool_size, "batch": batch, "steps": steps, "entry": entry,
        "fill_s": t_fill,
        "sample_ms": float(ms[:, 0].mean()), "observe_ms": float(ms[:, 1].mean()),
        "insert_ms": float(ms[:, 2].mean()), "recycle_ms": float(ms[:, 3].mean()),
        "step_ms_mean": float(total.mean()),
        "step_ms_p50": float(np.percentile(total, 50)),
        "step_ms_p99": float(np.percentile(total, 99)), "step_ms_max": float(total.max()),
        "heap_rebuilds": int(pool.counters["heap_rebuilds"]),
        "evicted": int(pool.counters["evicted"]), "records": len(pool.records),
        "gc_full_collections": pauses.full, "gc_pause_ms_total": 1e3 * pauses.seconds,
    }
    if memory:
        n = min(pool_size, memory_records)
        out["memory_records"] = n
        out["bytes_per_record"] = memory_per_record(n, group_size)
    return out


def main(argv: list[str]) -> None:
    sizes = [int(a) for a in argv] or [10_000, 100_000, 1_000_000]
    for n in sizes:
        r = profile(n)
        print(f"pool {n:>9,}: step {r['step_ms_mean']:.2f} ms mean, {r['step_ms_p50']:.2f} p50, "
              f"{r['step_ms_p99']:.2f} p99, {r['step_ms_max']:.2f} max (sample "
              f"{r['sample_ms']:.2f} + observe {r['observe_ms']:.2f} + insert "
              f"{r['insert_ms']:.2f}; recycling {r['recycle_ms']:.2f} more); "
              f"{r['bytes_per_record']:.0f} B/record (measured on {r['memory_records']:,})")


if __name__ == "__main__":
    main(sys.argv[1:])
