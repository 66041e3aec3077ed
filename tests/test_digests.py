"""Refactors keep behaviour: three smoke configs give bit-identical metrics.

The digest is a SHA-256 over every metrics record with the measured (wall-clock, memory,
throughput) keys removed: selections, rollouts, rewards, losses and evaluations. The recorded
values change only with a deliberate change of behaviour (then say why in the commit); a
refactor that moves code must leave them as they are.
"""

import hashlib
import json
import os

import pytest

from frontier_rl import train
from frontier_rl.experiment import compare

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RECORDED = {
    "configs/arith_grpo.py:smoke": "",
    "configs/math_hive.py:smoke": "",
    "configs/compare_arith.py:smoke": "",
}


def digest(path: str) -> str:
    """SHA-256 of a run's metrics.jsonl without its measured keys (perf/*: times, FLOPs rates,
    memory) and verifier timeouts (wall-clock)."""
    h = hashlib.sha256()
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            kept = {k: v for k, v in rec.items()
                    if not k.startswith("perf/") and not k.endswith("verify_timeouts")}
            h.update(json.dumps(kept, sort_keys=True).encode())
    return h.hexdigest()[:16]


def run_digest(spec: str, workdir: str) -> str:
    import importlib.util

    path, _, arg = spec.partition(":")
    mod_spec = importlib.util.spec_from_file_location("cfg", os.path.join(ROOT, path))
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    cfg = mod.get_config(arg)
    if "compare" in cfg:
        compare.run(cfg, workdir)
        return ",".join(digest(os.path.join(s.dir, "metrics.jsonl"))
                        for s in compare.plan(cfg, os.path.abspath(workdir)))
    train.run(cfg, workdir)
    return digest(os.path.join(workdir, "metrics.jsonl"))


@pytest.mark.slow
@pytest.mark.parametrize("spec", sorted(RECORDED))
def test_smoke_metrics_are_bit_identical(spec, tmp_path):
    assert run_digest(spec, str(tmp_path)) == RECORDED[spec]
