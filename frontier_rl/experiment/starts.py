"""`frontier-rl start`: make (or remake) a shipped starting point of a testbed.

  frontier-rl start --config=configs/compare_arith.py --seeds=0 --out=configs/starts/arith_s0

A testbed's comparisons load their starts from files in the repository (`warmstart.start`,
`compare.starts`) rather than training them, because a thousand-step warm start turns any
change of float rounding into another starting point. This command is the recipe that made
them: it warm-starts the config's policy at the seed exactly as a run would (warmstart.py, the
regime check included), writes the result as a shipped start (warmstart.write_start: the cache's
files, their digests, how and where it was made, the code's numerics digest) and says whether
it landed in the regime and whether its weights are those of the start already at `--out`.
"""

from __future__ import annotations

import os
import tempfile

import ml_collections

from frontier_rl import numerics, warmstart
from frontier_rl.bench import warmstart as bench_warmstart
from frontier_rl.run import provenance
from frontier_rl.run.errors import RunError

WEIGHTS = "model.safetensors"


def make(config: ml_collections.ConfigDict, seed: int, out: str, say=print) -> dict:
    """Warm-starts `config` at `seed` and writes the shipped start `out`; returns its record."""
    if not out:
        raise RunError("start needs --out (the directory of the start, e.g. "
                       "configs/starts/arith_s0)")
    before = (warmstart.file_digest(os.path.join(out, WEIGHTS))
              if os.path.exists(os.path.join(out, WEIGHTS)) else None)
    base = ml_collections.ConfigDict(config.to_dict())
    if "compare" in base:
        del base["compare"]
    base.warmstart.start = ""
    with tempfile.TemporaryDirectory(prefix="frontier_rl_start_") as tmp:
        row = bench_warmstart.one_seed(base, seed, say=say, workdir=tmp)
        cache = os.path.join(tmp, "warmstart", f"s{seed}")
        if not row["attempts"]:
            raise RunError(f"start: the warm start at seed {seed} reached no regime in "
                           f"{base.warmstart.attempts} attempts; nothing written to {out}")
        c = base.warmstart
        made = {"seed": seed, **provenance.stamp(), "numerics": numerics.digest(),
                "numerics_pinned": numerics.pinned(),
                "regime": {"easy_acc": row["easy_acc"], "frontier_acc": row["frontier_acc"],
                           "steps": row["steps"], "attempts": row["attempts"],
                           "target_acc": c.target_acc, "frontier_min": c.frontier_min}}
        record = warmstart.write_start(cache, out, made)
    after = record["files"][WEIGHTS]
    say(f"start {out}: digest {record['digest']}; in the regime (held-out greedy exact match "
        f"{row['easy_acc']:.3f} on the easy buckets >= {c.target_acc}, {row['frontier_acc']:.3f} "
        f"on the frontier bucket >= {c.frontier_min}) after {row['steps']} steps, attempt "
        f"{row['attempts']}")
    if before is not None:
        say(f"start {out}: weights {'identical to' if before == after else 'differ from'} the "
            "start that was there" + ("" if before == after else
                                       " (another machine's or code's float rounding: a new "
                                       "start; published comparisons on the old one must be "
                                       "rerun)"))
    return record
