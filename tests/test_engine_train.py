"""Training through `frontier-rl serve` (a subprocess on a free port): the same eval metrics and
rollouts as the embedded engine, and a server that dies for good stops the run with a clear error
and the last checkpoint intact. Slow (two smoke runs): `pytest -m slow tests/test_engine_train.py`.
"""

import json
import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

from frontier_rl import checkpoint, config_lib, train

pytestmark = pytest.mark.slow


def smoke(**overrides):
    c = config_lib.shrink_for_smoke(config_lib.default_config())
    c.log.progress = False
    c.log.tensorboard = False
    for k, v in overrides.items():
        node = c
        *path, leaf = k.split(".")
        for p in path:
            node = node[p]
        node[leaf] = v
    return c


def start_server(model: str) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "frontier_rl", "serve", f"--model={model}",
                             f"--port={port}"], env=os.environ.copy())
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(url + "/health").status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("frontier-rl serve did not come up")


def test_train_through_serve_matches_embedded(tmp_path):
    ref = tmp_path / "jax"
    train.run(smoke(), str(ref))
    proc, url = start_server(str(ref / "warmstart"))
    try:
        run = tmp_path / "sglang"
        train.run(smoke(**{"rollout.engine": "sglang", "rollout.sglang.url": url,
                           "warmstart.cache_dir": str(ref / "warmstart")}), str(run))
    finally:
        proc.kill()
    a = [json.loads(line) for line in open(ref / "metrics.jsonl")]
    b = [json.loads(line) for line in open(run / "metrics.jsonl")]
    assert len(a) == len(b)
    for ra, rb in zip(a, b, strict=True):
        for k, v in ra.items():
            if k.startswith(("eval/", "rollout/", "evalset/")):
                assert rb[k] == v, (ra["step"], k)
            elif k.startswith("train/"):  # old log-probs recomputed by the trainer
                assert rb[k] == pytest.approx(v, rel=1e-4, abs=1e-6), (ra["step"], k)
    assert max(r.get("rollout/engine_logprob_abs_diff", 0) for r in b) < 1e-5

    # The server gone for good: the resumed run fails with one clear error after the deadline,
    # and the newest checkpoint still restores.
    with pytest.raises(train.RunError, match="failed .* times"):
        train.run(smoke(**{"rl.num_steps": 6, "rollout.engine": "sglang",
                           "rollout.sglang.url": url, "rollout.sglang.timeout": 1.0,
                           "rollout.sglang.deadline": 3.0, "rollout.sglang.backoff": 0.1,
                           "warmstart.cache_dir": str(ref / "warmstart")}), str(run))
    assert checkpoint.Checkpointer(str(run / "checkpoints")).all_steps()[-1] == 4
