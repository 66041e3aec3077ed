"""`frontier-rl bench warmstart`: does the warm start reach its regime, seed by seed?

  frontier-rl bench warmstart --config=configs/compare_arith.py --seeds=0-9 [--json] [--workdir=DIR]

For each seed, the config's policy is initialised and warm-started exactly as a run (or a
comparison's run at that seed) would, without RL: one table row per seed
with the steps, the held-out greedy exact match on the easy buckets and on the frontier bucket
where it stopped, the attempts it took (1 = the first attempt reached the regime; a seed that
reached it in none shows the last attempt's figures and `attempts` = 0) and its seconds. With
`--json` the last line is `{"seeds": [{"seed", "steps", "easy_acc", "frontier_acc",
"attempts", "seconds"}, ...]}`. A config with a `compare` section is read as its base config.

Without `--workdir` nothing is cached. With `--workdir=DIR` each seed's warm start is cached
where a comparison in DIR with one warm start per seed looks for it (DIR/warmstart/s<seed>), so
`frontier-rl compare --workdir=DIR` afterwards starts from the benched policies, and a seed
already cached there is reported from its cache (`cached` in the row) instead of being redone:
an interrupted bench resumes where it stopped.
"""

from __future__ import annotations

import copy
import json
import os
import re
import sys
import time

import ml_collections

from frontier_rl import config_lib, policy, tasks, warmstart
from frontier_rl.run.errors import RunError


def parse_seeds(text: str) -> list[int]:
    """'0-9' / '0,3,5' / '2' -> seeds; an error names the flag."""
    out: list[int] = []
    for part in (p.strip() for p in str(text).split(",") if p.strip()):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m or (m.group(2) is not None and int(m.group(2)) < int(m.group(1))):
            raise RunError(f"--seeds={text!r}: use integers and ranges, e.g. 0-9 or 0,2,5")
        lo = int(m.group(1))
        out += list(range(lo, int(m.group(2) or lo) + 1))
    if not out or len(set(out)) != len(out):
        raise RunError(f"--seeds={text!r}: name each seed once")
    return out


def one_seed(config: ml_collections.ConfigDict, seed: int, say=None,
             workdir: str | None = None) -> dict:
    """The warm start of `config` at `seed` (as compare sets it: run seed = warm-start seed);
    with `workdir`, cached in (or read from) workdir/warmstart/s<seed>."""
    from frontier_rl.rl import sharding

    cfg = copy.deepcopy(config)
    cfg.seed = seed
    cfg.warmstart.seed = seed
    task = tasks.make_task(cfg.task.name, {k: v for k, v in cfg.task.items() if k != "name"},
                           seed)
    mesh = sharding.meshes_of(cfg.mesh)[0]
    say = say or (lambda *a, **k: None)
    if workdir:
        return _cached_seed(cfg, task, mesh, seed, workdir, say)
    if cfg.model.path:
        graphdef, params, mcfg = policy.load(cfg.model.path, cfg, mesh)
        from frontier_rl.models import hf

        tokenizer = hf.load_tokenizer(cfg.model.path)
    else:
        tokenizer = tasks.build_char_tokenizer(policy.alphabet(task))
        mcfg = policy.random_config(cfg, tokenizer)
        graphdef, params = policy.random_params(mcfg, seed, mesh)
    t0 = time.perf_counter()
    try:
        info = warmstart.run(cfg, task, graphdef, params, mcfg, tokenizer, seed, say=say)
    except RunError as e:
        say(str(e))
        info = None
    return _row(cfg, seed, info, time.perf_counter() - t0)


def _row(cfg, seed: int, info: dict | None, seconds: float, cached: bool | None = None) -> dict:
    """A bench row from where the warm start stopped (`info`; None: no attempt reached the
    regime, shown with the step cap and no accuracies)."""
    row = {"seed": seed, "steps": int(cfg.warmstart.steps), "easy_acc": float("nan"),
           "frontier_acc": float("nan"), "attempts": 0, "seconds": round(seconds, 1)}
    if info is not None:
        row.update(steps=int(info["steps"]), easy_acc=float(info["check_acc"]),
                   frontier_acc=float(info.get("frontier_acc", float("nan"))),
                   attempts=int(info["attempts"]))
    if cached is not None:
        row["cached"] = cached
    return row


def _cached_seed(cfg, task, mesh, seed: int, workdir: str, say) -> dict:
    """one_seed through the run's own cache (policy.prepare, warmstart.apply): trained and
    cached, or read."""
    cfg.warmstart.cache_dir = os.path.join(workdir, "warmstart", f"s{seed}")
    cached = os.path.exists(os.path.join(cfg.warmstart.cache_dir, warmstart.RESULT_NAME))
    t0 = time.perf_counter()
    try:
        pol = policy.prepare(cfg, task, workdir, mesh, say=say)
        info = warmstart.apply(cfg, task, pol, workdir, say=say).warmstart
    except RunError as e:
        say(str(e))
        return _row(cfg, seed, None, time.perf_counter() - t0, cached=False)
    # a cached seed reports the seconds its warm start took, not the load's
    return _row(cfg, seed, info, float(info["seconds"]), cached=cached)


def main(config: ml_collections.ConfigDict, seeds: str, as_json: bool = False,
         verbose: bool = True, workdir: str | None = None) -> dict:
    """Warm-starts `config` at each seed of `seeds`, printing a row per seed (and, with
    `verbose`, each held-out check as it happens, to stderr)."""
    if "compare" in config:
        config = ml_collections.ConfigDict(config.to_dict())
        del config["compare"]
    config_lib.validate(config)
    if not config.warmstart.enabled:
        raise RunError("bench warmstart: the config has warmstart.enabled=False")
    c = config.warmstart
    print(f"warm start: target easy >= {c.target_acc:.2f}, frontier >= {c.frontier_min:.2f}, "
          f"dose {c.frontier_dose:.2f}, cap {c.steps} steps x {c.attempts} attempts", flush=True)
    print("| seed | steps | easy acc | frontier acc | attempts | seconds |\n"
          "|---|---|---|---|---|---|", flush=True)
    rows = []
    for seed in parse_seeds(seeds):
        r = one_seed(config, seed, say=(lambda *a, s=seed, **k: print(
            f"  seed {s}: " + " ".join(map(str, a)).strip(), file=sys.stderr, flush=True))
            if verbose else None, workdir=workdir)
        rows.append(r)
        print(f"| {r['seed']} | {r['steps']} | {r['easy_acc']:.3f} | {r['frontier_acc']:.3f} | "
              f"{r['attempts'] or 'none reached'} | {r['seconds']:.1f}"
              + (" (cached)" if r.get("cached") else "") + " |", flush=True)
    first = sum(r["attempts"] == 1 for r in rows)
    print(f"{first}/{len(rows)} seeds reached the regime on their first attempt", flush=True)
    out = {"seeds": rows}
    if as_json:  # strict JSON: an accuracy that was not measured (no check) is null
        print(json.dumps({"seeds": [{k: (None if isinstance(v, float) and v != v else v)
                                     for k, v in r.items()} for r in rows]}))
    return out
