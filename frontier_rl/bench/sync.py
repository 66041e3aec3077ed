"""`frontier-rl bench sync --bench_config=qwen2.5-0.5b [--repeats=N] [--json]
[--workdir=DIR]`: what one weight sync to an external engine costs, phase by phase.

Starts `frontier-rl serve` (a subprocess on a free port) on a random policy of the named work
(bench WORK: the preset's architecture, float32 master weights, bfloat16 compute), then times
`repeats` syncs of `SGLangEngine` after one warm-up sync (compiles), each of parameters that
changed since the last (a multiplicative nudge, outside the timing), in two ways:

  before   the path this bench was written to replace: master weights copied to the host in
           float32 and cast there, the export written to the configured sync directory
           (DIR/sync on disk), `/update_weights_from_disk` then `/flush_cache`, and a probe
           continuation of up to `rollout.max_new_tokens` (MAX_NEW_TOKENS) tokens whose log-probs
           the trainer computes at the continuation's own length;
  after    the engine as it is: the cast on the devices before a 16-bit host copy, the export
           in /dev/shm when the rule allows (rollout/sglang.py `memory_sync_dir`), no
           `/flush_cache`, and a probe of at most `probe_len` tokens at one padded shape.

Each sync is split into phases: `host_copy` (device cast + device->host copy), `write` (the
safetensors, config and tokenizer files), `load` (the server's `/update_weights_from_disk`, and
for `before` its `/flush_cache`) and `probe` (the probe's generation and the trainer's
log-probs); `sync` is their sum as the engine times it. Figures are medians over the timed
syncs. The trainer's probe function is train.py's (Trainer.logps on the sequence padded to a
multiple of 8); `probe_compiles` counts its compiles over the timed syncs.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import statistics
import tempfile
import time

import jax
import numpy as np

from frontier_rl.rollout.engine import EngineError, Sampling
from frontier_rl.rollout.sglang import DiskTransport, SGLangEngine

# The engine's token cap (rollout.max_new_tokens), the old probe's length: 128 on an
# accelerator; 16 on a CPU, where decoding 128 tokens of a 0.5B model takes minutes (the two
# probes then have the same length and differ only in the padding to one shape).
MAX_NEW_TOKENS = {"cpu": 16}
PHASES = ("host_copy", "write", "load", "probe")


class _FlushingDisk(DiskTransport):
    """The old disk path: a `/flush_cache` after every load."""

    def _load(self, path: str) -> None:
        super()._load(path)
        self.post("/flush_cache", {}, None)


class _VariableProbeEngine(SGLangEngine):
    """The old probe: a continuation of up to the engine's cap, its log-probs computed by the
    trainer at the continuation's own length."""

    def _probe(self, params) -> float:
        res = self.generate([self.probe_ids], 1, Sampling(temperature=self.temperature, seed=0))
        n = int(res.lengths[0])
        mine = np.asarray(self.probe_fn(params, self.probe_ids, res.tokens[0, :n].tolist()))
        diff = float(np.mean(np.abs(mine - res.logps[0, :n]))) if n else 0.0
        self.counters["probe_abs_diff"] = diff
        if not np.isfinite(diff) or diff > self.probe_tol:
            raise EngineError(f"probe differs by {diff:.3g} nats/token")
        return diff


def _run(mode: str, url: str, params, nudge, graphdef, cfg, tokenizer, trainer, probe_ids,
         sync_dir: str, repeats: int) -> tuple[dict, object]:
    from frontier_rl import export, policy
    from frontier_rl.rollout import sglang

    before = mode == "before"
    timings: dict[str, float] = {}

    def export_fn(p, path):
        return export.export_params(graphdef, p, cfg, tokenizer, path, device_cast=not before,
                                    timings=timings)

    probe_fn = functools.partial(trainer.response_logps, pad_id=tokenizer.pad_token_id)

    max_new = MAX_NEW_TOKENS.get(jax.default_backend(), 128)
    cls = _VariableProbeEngine if before else SGLangEngine
    opts = dict(transport=lambda post: _FlushingDisk(post, export_fn, sync_dir, url=url,
                                                     memory_dir=None)) if before else {}
    eng = cls(url, pad_id=tokenizer.pad_token_id, stop_ids=policy.stop_ids(cfg, tokenizer),
              max_new_tokens=max_new, sync_dir=sync_dir, export_fn=export_fn, probe_fn=probe_fn,
              probe_ids=probe_ids, temperature=1.0, timeout=1800.0, retries=2, **opts)
    rows = []
    try:
        for i in range(repeats + 1):  # the first: warm-up
            params = nudge(params)
            jax.block_until_ready(params)
            timings.clear()
            c0, n0 = dict(eng.counters), trainer.compile_count
            eng.sync(params, i + 1)
            c = {k: eng.counters[k] - c0[k] for k in c0}
            rows.append({"sync": c["sync_time"], "host_copy": timings["host_copy"],
                         "write": timings["write"], "load": eng.transport.timings["load"],
                         "probe": c["sync_probe_time"],
                         "compiles": trainer.compile_count - n0,
                         "probe_abs_diff": eng.counters["probe_abs_diff"]})
            print(f"[bench sync] {mode} sync {i}{' (warm-up)' if i == 0 else ''}: "
                  + "  ".join(f"{k} {rows[-1][k]:.2f}s" for k in ("sync", *PHASES)), flush=True)
        sync_dir_used = eng.transport.dir
    finally:
        eng.close()
    timed = rows[1:]
    out = {k: statistics.median(r[k] for r in timed) for k in ("sync", *PHASES)}
    out["probe_compiles"] = sum(r["compiles"] for r in timed)
    out["max_probe_abs_diff"] = max(r["probe_abs_diff"] for r in rows)
    out["sync_dir"] = sync_dir_used
    out["in_memory"] = sync_dir_used is not None and sync_dir_used.startswith(
        sglang.MEMORY_DIR + os.sep)
    return out, params


def main(config_name: str = "qwen2.5-0.5b", *, repeats: int = 3, as_json: bool = False,
         workdir: str | None = None) -> dict:
    from frontier_rl import bench, export, tasks
    from frontier_rl.policy import random_params
    from frontier_rl.rl import sharding
    from frontier_rl.rl.losses import LOSSES
    from frontier_rl.rl.train_step import OptimConfig, Trainer, make_optimizer
    from frontier_rl.rollout import serve

    if config_name not in bench.WORK:
        raise ValueError(f"--bench_config={config_name!r} is not one of {sorted(bench.WORK)}")
    if repeats < 1:
        raise ValueError(f"--repeats={repeats} must be >= 1")
    cfg = bench.WORK[config_name]["model"]
    mesh = sharding.make_mesh()
    graphdef, params = random_params(cfg, 0, mesh)
    tokenizer = tasks.build_char_tokenizer(tasks.ARITH_ALPHABET)
    probe_ids = tokenizer.encode("12+34=", add_special_tokens=False)
    trainer = Trainer(graphdef, LOSSES["grpo"], make_optimizer(OptimConfig()), mesh)
    nudge = jax.jit(lambda p: jax.tree.map(lambda x: x * (1 + 1e-3), p), donate_argnums=0)
    root = os.path.abspath(workdir) if workdir else tempfile.mkdtemp(
        prefix="frontier_rl-bench-sync-")
    os.makedirs(root, exist_ok=True)
    start = export.export_params(graphdef, params, cfg, tokenizer, os.path.join(root, "start"))
    print(f"[bench sync] {config_name}: {sum(x.size for x in jax.tree.leaves(params)) / 1e9:.2f}"
          f"B parameters ({cfg.param_dtype} master, {cfg.dtype} export); starting "
          "frontier-rl serve", flush=True)
    t0 = time.perf_counter()
    proc, url = serve.spawn(start, timeout=900.0)
    print(f"[bench sync] serving at {url} ({time.perf_counter() - t0:.0f}s)", flush=True)
    results = {}
    try:
        for mode in ("before", "after"):
            results[mode], params = _run(mode, url, params, nudge, graphdef, cfg, tokenizer,
                                         trainer, probe_ids, os.path.join(root, "sync"),
                                         repeats)
    finally:
        proc.kill()
        proc.wait()
        if not workdir:
            shutil.rmtree(root, ignore_errors=True)
    out = {"bench": "sync", "config": config_name, "repeats": repeats,
           "params_b": sum(x.size for x in jax.tree.leaves(params)) / 1e9,
           "max_new_tokens": MAX_NEW_TOKENS.get(jax.default_backend(), 128), **results,
           "speedup": results["before"]["sync"] / results["after"]["sync"]}
    print(f"median seconds per sync over {repeats} syncs (after one warm-up):")
    for mode, r in results.items():
        print(f"  {mode:6s} sync {r['sync']:.2f}s = " + " + ".join(
            f"{p} {r[p]:.2f}" for p in PHASES)
              + f"  (sync dir {'in memory' if r['in_memory'] else 'on disk'}, "
              f"probe compiles {r['probe_compiles']}, |diff| <= {r['max_probe_abs_diff']:.3g})")
    print(f"  speedup {out['speedup']:.2f}x")
    if as_json:
        print(json.dumps(out))
    return out
