"""Is each published comparison a function of the code as it is now?

A results file under docs/results/testbed/ is published: the README and docs/ render it. It
records the numerics digest its runs were made under (`numerics`, compare.py) and, for each
shipped start it ran from, the start's digest (`testbed_starts`). It is current when both are
what the code gives now: `numerics.digest()` and the digests the start directories record
(warmstart.read_start, which also checks every file of the start). A change that moves the
figures (a float operation of the model, the sampler, the optimizer; another start) fails
tests/test_published_results.py until the comparison is rerun and the docs regenerated.
Results measured under older code are kept apart, in docs/results/superseded/, and say so.
"""

from __future__ import annotations

import gzip
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PUBLISHED = os.path.join(ROOT, "docs", "results", "testbed")


def load(path: str) -> dict:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def files(where: str = PUBLISHED) -> list[str]:
    return sorted(os.path.join(where, n) for n in os.listdir(where)
                  if n.endswith((".results.json", ".results.json.gz")))


def problems(path: str, digest: str, root: str = ROOT) -> list[str]:
    """What makes the results file at `path` not reproducible by the code now (numerics digest
    `digest`): one sentence per problem, [] when it is current."""
    from frontier_rl import warmstart
    from frontier_rl.run.errors import RunError

    name = os.path.relpath(path, root)
    results = load(path)
    out = []
    made = results.get("numerics")
    if made != digest:
        out.append(f"{name} was measured under numerics {made or 'not recorded'}, the code now "
                   f"gives {digest}: rerun it from a fresh clone and regenerate the docs")
    starts = results.get("testbed_starts") or {}
    if not starts:
        out.append(f"{name} ran from no shipped start (compare.starts): its starting point "
                   "cannot be reproduced")
    for start, v in starts.items():
        try:
            now = warmstart.read_start(os.path.join(root, v["path"]))["digest"]
        except RunError as e:
            out.append(f"{name}: start {start}: {e}")
            continue
        if v.get("digest") != now:
            out.append(f"{name} ran from start {start} at digest {v.get('digest')}, "
                       f"{v['path']} is now {now}: rerun it")
    return out
