"""Training through a server that speaks SGLang's protocol (`frontier-rl serve`'s app):

- a server killed in the middle of a request and restarted from its start weights: the run
  completes with exactly the embedded engine's rollouts and eval metrics (the client reloads the
  synced policy, the probe checks it, the request is sent again);
- a server that answers 500 from some step on: the run stops with one clear error after the
  deadline, writes nothing of that step, and its newest checkpoint restores;
- slow: the same through the `frontier-rl serve` command in a subprocess, and a server gone for
  good (`pytest -m slow tests/test_engine_train.py`).
"""

import asyncio
import json
import os
import threading
import time

import pytest
from engine_testlib import Server
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from frontier_rl import config_lib, train
from frontier_rl.rollout import serve
from frontier_rl.run import checkpoint


def smoke(**overrides):
    c = config_lib.shrink_for_smoke(config_lib.default_config())
    c.log.progress = False
    c.log.tensorboard = False
    return config_lib.set_fields(c, overrides)


def records(run_dir) -> list[dict]:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def assert_same_run(a: list[dict], b: list[dict]) -> None:
    """b (through a server) has a's rollouts, eval and train metrics exactly: both runs
    recompute the old log-probs with the trainer (rl.recompute_old_logp=always)."""
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for ra, rb in zip(a, b, strict=True):
        for k, v in ra.items():
            if k.startswith(("eval/", "evalset/", "train/", "mech/")) or (
                    k.startswith("rollout/") and not k.startswith("rollout/engine_")):
                assert rb[k] == v, (ra["step"], k)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The embedded engine's run (and its warm start, which the other runs share)."""
    ref = tmp_path_factory.mktemp("engine_train") / "jax"
    train.run(smoke(**{"rl.recompute_old_logp": "always"}), str(ref))
    return ref


def through(url: str, reference, **overrides):
    return smoke(**{"rollout.engine": "sglang", "rollout.sglang.url": url,
                    "rl.recompute_old_logp": "always",
                    "warmstart.cache_dir": str(reference / "warmstart"), **overrides})


@pytest.mark.slow
def test_server_killed_mid_request_and_restarted_gives_the_same_run(reference, tmp_path):
    start = str(reference / "warmstart")
    policy = serve.Policy(start)
    app = serve.make_app(policy)
    route = {r.path: r.endpoint for r in app.router.routes}
    loads, after = [], []  # weight loads; generate calls since the second load

    def kill_and_restart():
        server.stop()  # cancels the request in flight (grace 0.05 s): the client sees a drop
        policy.load(start)  # a restarted server serves the weights it was started from
        time.sleep(0.3)
        server.start()

    async def update(request):
        loads.append(1)
        return await route["/update_weights_from_disk"](request)

    async def generate(request):
        # Killed on the second request after the sync that follows step 1 (the first is that
        # sync's probe): without the reload the server would go on with the start policy.
        if len(loads) >= 2:
            after.append(1)
            if len(after) == 2:
                threading.Thread(target=kill_and_restart).start()
                await asyncio.sleep(30)  # still in flight when the server goes down
        return await route["/generate"](request)

    app.router.routes[:0] = [Route("/generate", generate, methods=["POST"]),
                             Route("/update_weights_from_disk", update, methods=["POST"])]
    server = Server(app, grace=0.05)
    try:
        train.run(through(server.url, reference, **{"rollout.sglang.backoff": 0.2,
                                                    "rollout.sglang.retries": 10}),
                  str(tmp_path))
    finally:
        server.stop()
    got = records(tmp_path)
    assert_same_run(records(reference), got)
    assert got[-1]["rollout/engine_connection_errors"] >= 1
    assert got[-1]["rollout/engine_reloads"] >= 1 and got[-1]["rollout/engine_retries"] >= 1
    assert max(r.get("rollout/engine_logprob_abs_diff", 0) for r in got) < 1e-5


def test_server_failing_mid_run_stops_with_the_checkpoint_intact(reference, tmp_path):
    """500 from the first rollout of a resumed run: one clear error after the deadline,
    nothing of the failed step written, the newest checkpoint restores."""
    policy = serve.Policy(str(reference / "warmstart"))
    app = serve.make_app(policy)
    real = next(r for r in app.router.routes if r.path == "/generate").endpoint
    calls = []
    first = {"rl.num_steps": 2}

    async def generate(request):
        calls.append(1)
        if len(calls) > first.get("fail_after", 1 << 30):
            return PlainTextResponse("CUDA error: an illegal memory access", status_code=500)
        return await real(request)

    app.router.routes.insert(0, Route("/generate", generate, methods=["POST"]))
    server = Server(app)
    try:
        train.run(through(server.url, reference, **first), str(tmp_path))
        before = records(tmp_path)
        first["fail_after"] = len(calls) + 1  # the resumed run's start sync probes; then 500s
        with pytest.raises(train.RunError, match=r"step \d+: .*failed 3 times.*HTTP 500.*intact"):
            train.run(through(server.url, reference, **{
                "rl.num_steps": 4, "rollout.sglang.timeout": 1.0, "rollout.sglang.deadline": 3.0,
                "rollout.sglang.retries": 3, "rollout.sglang.backoff": 0.1}), str(tmp_path))
    finally:
        server.stop()
    assert records(tmp_path) == before  # nothing of the failed step
    ckpt = checkpoint.Checkpointer(str(tmp_path / "checkpoints"))
    assert ckpt.all_steps()[-1] == 2
    ckpt.close()
    # the newest checkpoint restores: the same run continues once the server is healthy
    first["fail_after"] = 1 << 30
    server = Server(app)
    try:
        train.run(through(server.url, reference, **{"rl.num_steps": 4}), str(tmp_path))
    finally:
        server.stop()
    assert_same_run(records(reference)[:len(records(tmp_path))], records(tmp_path))


def test_a_server_reloaded_by_another_trainer_stops_the_run_before_the_update(reference,
                                                                            tmp_path):
    """Two trainers on one server: after this run's sync following step 1 passed its probe,
    another trainer reloads the server with its own weights (here: the start policy). The
    next step's responses come from those; the per-step gap check stops the run before its
    update, naming rollout.probe_tol, and nothing of that step is written."""
    start = str(reference / "warmstart")
    policy = serve.Policy(start)
    app = serve.make_app(policy)
    route = {r.path: r.endpoint for r in app.router.routes}
    loads, since = [], []

    async def update(request):
        loads.append(1)
        since.clear()
        return await route["/update_weights_from_disk"](request)

    async def generate(request):
        since.append(1)
        if len(loads) == 2 and len(since) == 2:  # after the sync's probe: the intruder
            policy.load(start)
        return await route["/generate"](request)

    app.router.routes[:0] = [Route("/generate", generate, methods=["POST"]),
                             Route("/update_weights_from_disk", update, methods=["POST"])]
    server = Server(app)
    try:
        # this server matches the trainer to < 1e-5 nats/token (the tests above); one smoke
        # step moves the policy by ~0.06, so the tolerance is set below that
        with pytest.raises(train.RunError, match=r"step 2: the rollout engine's log-probs .*"
                                                 r"\(rollout.probe_tol=0.01\).*before the update"):
            train.run(through(server.url, reference, **{
                "rl.num_steps": 4, "checkpoint.every": 1, "rollout.probe_tol": 0.01}),
                str(tmp_path))
    finally:
        server.stop()
    assert [r["step"] for r in records(tmp_path)] == [0, 1]


@pytest.mark.slow
def test_train_through_serve_matches_embedded(tmp_path):
    ref = tmp_path / "jax"
    train.run(smoke(), str(ref))
    proc, url = serve.spawn(str(ref / "warmstart"))
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

    # The server gone for good: the resumed run fails in seconds with one clear error naming
    # the URL (checked before anything else starts), and the newest checkpoint still restores.
    t0 = time.monotonic()
    with pytest.raises(train.RunError, match=r"rollout.sglang.url=.*no healthy server"):
        train.run(smoke(**{"rl.num_steps": 6, "rollout.engine": "sglang",
                           "rollout.sglang.url": url, "rollout.sglang.timeout": 1.0,
                           "rollout.sglang.deadline": 3.0, "rollout.sglang.backoff": 0.1,
                           "warmstart.cache_dir": str(ref / "warmstart")}), str(run))
    assert time.monotonic() - t0 < 60
    assert checkpoint.Checkpointer(str(run / "checkpoints")).all_steps()[-1] == 4
