"""Refactors keep behaviour: three smoke configs give bit-identical metrics.

The digest is a SHA-256 over every metrics record with the measured (wall-clock, memory,
throughput) keys removed: selections, rollouts, rewards, losses and evaluations. The recorded
values change only with a deliberate change of behaviour (then say why in the commit); a
refactor that moves code must leave them as they are.

Bit-level results hold on the machine (CPU model, thread count) that recorded them, not across
machines, so the check runs on request, before and after a refactor on one machine:

  FRONTIER_RL_DIGESTS=1 python -m pytest -m slow tests/test_digests.py

(`python tests/test_digests.py` prints the current digests to record.)
"""

import hashlib
import json
import os

import pytest

from frontier_rl import train
from frontier_rl.experiment import compare

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RECORDED = {  # recorded through pytest (conftest's devices) on a 2-core x86-64 CPU
    "configs/arith_grpo.py:smoke": "f8eade39c782f38c",
    "configs/compare_arith.py:smoke": "fd947e8bc7d2cef0,fd90fa189c106391",
    "configs/math_hive.py:smoke": "3a9f9aedd3e0b323",
}


def digest(path: str) -> str:
    """SHA-256 of a run's metrics.jsonl without its measured keys (perf/*: times, FLOPs rates,
    memory; select/*_ms and *_s: selector and teacher times) and verifier timeouts."""
    h = hashlib.sha256()
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            kept = {k: v for k, v in rec.items()
                    if not k.startswith("perf/")
                    and not k.endswith(("verify_timeouts", "_ms", "_s"))}
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
@pytest.mark.allow_skip(reason="bit-level digests hold on the machine that recorded them; "
                        "set FRONTIER_RL_DIGESTS=1 to check a refactor there")
@pytest.mark.parametrize("spec", sorted(RECORDED))
def test_smoke_metrics_are_bit_identical(spec, tmp_path):
    if os.environ.get("FRONTIER_RL_DIGESTS") != "1":
        pytest.skip("set FRONTIER_RL_DIGESTS=1 (on the machine that recorded the digests)")
    assert run_digest(spec, str(tmp_path)) == RECORDED[spec]


if __name__ == "__main__":
    import tempfile

    for spec in sorted(RECORDED):
        with tempfile.TemporaryDirectory() as d:
            print(f'    "{spec}": "{run_digest(spec, d)}",', flush=True)
