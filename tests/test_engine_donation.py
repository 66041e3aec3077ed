"""The SGLang engine and the train step's donation: the update donates the parameters it is
given, so after a step that did not sync (rollout.sync_every > 1) the arrays the engine last
synced are deleted. A server that drops a connection must then get the synced weights again and
pass the probe without those arrays: never a RuntimeError about a deleted array, and a server
that does not take the weights back still fails through the engine's own error."""

import contextlib
import os
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from engine_testlib import Server
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from frontier_rl.rollout.engine import EngineError, Sampling
from frontier_rl.rollout.sglang import SGLangEngine

PROBE = [1, 5, 6]
STOP = 3
START_W = 7.0  # the weights a (re)started server serves


class WeightServer:
    """A server whose answers follow the weights it serves, a scalar w: START_W when it starts
    (again after a restart), else what the directory of its last /update_weights_from_disk holds
    (the export below writes mean(params["w"]) there). /generate answers every row with the ids
    20, 21, ... (4 at most, ending in the stop id when shorter than asked) of log-prob
    -(k + 1) / 10 x w. `ignore_loads`: answer success but keep the weights."""

    def __init__(self):
        self.w = START_W
        self.ignore_loads = False
        self.loads = 0
        self.server = Server(Starlette(routes=[
            Route("/generate", self._generate, methods=["POST"]),
            Route("/update_weights_from_disk", self._update, methods=["POST"])]))
        self.url = self.server.url

    async def _generate(self, request):
        body = await request.json()
        out = []
        for sp in body["sampling_params"]:
            n = min(4, sp["max_new_tokens"])
            ids = [20 + k for k in range(n)]
            if n < sp["max_new_tokens"]:
                ids[-1] = STOP
            reason = ({"type": "stop", "matched": STOP} if n < sp["max_new_tokens"]
                      else {"type": "length", "length": n})
            logps = [[-(k + 1) / 10 * self.w, t, None] for k, t in enumerate(ids)]
            out.append({"output_ids": ids, "meta_info": {"output_token_logprobs": logps,
                                                         "finish_reason": reason}})
        return JSONResponse(out)

    async def _update(self, request):
        body = await request.json()
        self.loads += 1
        if not self.ignore_loads:
            with open(os.path.join(body["model_path"], "w")) as f:
                self.w = float(f.read())
        return JSONResponse({"success": True, "message": "ok", "num_paused_requests": 0})

    @contextlib.contextmanager
    def restarted(self):
        """Killed now and back with its start weights 0.2 s later: a request in the block
        meets the dropped connection, and the client's retries reach the restarted server."""
        self.server.stop()
        self.w = START_W

        def back():
            time.sleep(0.2)
            self.server.start()

        t = threading.Thread(target=back)
        t.start()
        try:
            yield
        finally:
            t.join()


def export_fn(params, path):
    """The policy's 'export': mean(w), read from the arrays as the real export reads them."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "w"), "w") as f:
        f.write(repr(float(np.mean(np.asarray(params["w"])))))
    return path


def probe_fn(params, prompt, response):
    """The trainer's log-probs of `response` under `params`: -(k + 1) / 10 x mean(w)."""
    w = float(np.mean(np.asarray(params["w"])))
    return -(np.arange(len(response), dtype=np.float32) + 1) / 10 * w


def engine(url, tmp_path, sync_every) -> SGLangEngine:
    return SGLangEngine(url, pad_id=0, stop_ids=[STOP], max_new_tokens=8,
                        sync_dir=str(tmp_path / "sync"), export_fn=export_fn, probe_fn=probe_fn,
                        probe_ids=PROBE, probe_len=8, probe_tol=1e-4, timeout=10.0,
                        deadline=30.0, retries=10, backoff=0.05, memory_dir=None,
                        sync_every=sync_every)


def params(w: float):
    """A policy: jax arrays on the device, like the trainer's."""
    return {"w": jnp.full(4, w, jnp.float32), "b": jnp.zeros((2, 3), jnp.float32)}


def donate(tree):
    """What the train step's donation does to the arrays it is given."""
    for x in jax.tree.leaves(tree):
        x.delete()


def run_steps(eng, steps: int, start=1.0):
    """The run loop's order of calls: sync at step 0, then per step the update (new arrays,
    the old ones donated) and the sync when due. Step s's policy has w = start + s."""
    p = params(start)
    eng.ensure(p, 0)
    for step in range(1, steps + 1):
        eng.begin_step(step)
        old, p = p, params(start + step)
        donate(old)
        if eng.sync_due(step):
            eng.ensure(p, step)
    return p


def logps_of(w):
    return [-(k + 1) / 10 * w for k in range(4)]


def test_reconnect_after_a_skipped_sync_serves_and_probes_the_synced_weights(tmp_path):
    """sync_every=2: synced at step 0 (w=1); step 1's update donates those arrays and does not
    sync. The server is restarted (its start weights) before step 2's rollouts: the client
    loads step 0's export again and checks it by the probe without the deleted arrays; the
    rollouts are step 0's policy, as the staleness metric says."""
    srv = WeightServer()
    eng = engine(srv.url, tmp_path, 2)
    try:
        run_steps(eng, 1)
        assert eng.synced_step == 0
        # nothing of the trainer's arrays is held past the sync: step 1 does not sync
        assert not any(isinstance(x, jax.Array) for x in jax.tree.leaves(eng._served))
        eng.begin_step(2)
        with srv.restarted():
            got = eng.generate([[1, 2, 3]], 2, Sampling(seed=4))
    finally:
        srv.server.stop()
        eng.close()
    assert eng.counters["connection_errors"] >= 1 and eng.counters["reloads"] == 1
    assert srv.w == 1.0 and srv.loads == 2  # the sync, then the reload of the same export
    np.testing.assert_allclose(got.logps[:, :4], [logps_of(1.0)] * 2, rtol=1e-6)
    assert eng.counters["probe_abs_diff"] < 1e-6
    assert eng.step_metrics(2)["rollout/engine_staleness"] == 1


def test_what_a_reload_serves_follows_each_sync(tmp_path):
    """sync_every=2 over 3 steps: synced at 0 (w=1) and 2 (w=3), both donated since. A restart
    in step 4's rollouts brings back step 2's weights, and the probe checks step 2's."""
    srv = WeightServer()
    eng = engine(srv.url, tmp_path, 2)
    try:
        run_steps(eng, 3)
        assert eng.synced_step == 2
        with srv.restarted():
            got = eng.generate([[1, 2, 3]], 1, Sampling(seed=4))
    finally:
        srv.server.stop()
        eng.close()
    assert eng.counters["reloads"] == 1 and eng.counters["probe_abs_diff"] < 1e-6
    np.testing.assert_allclose(got.logps[0, :4], logps_of(3.0), rtol=1e-6)


def test_a_restarted_server_that_keeps_its_start_weights_is_an_engine_error(tmp_path):
    """As above, but the restarted server answers success to the reload and keeps its start
    weights: the probe stops generate with the engine's error, not a RuntimeError. The failed
    reload is not forgotten: the next request reloads again (and passes once the server
    loads)."""
    srv = WeightServer()
    eng = engine(srv.url, tmp_path, 2)
    try:
        run_steps(eng, 1)
        srv.ignore_loads = True
        with srv.restarted(), pytest.raises(EngineError, match="not serving the synced policy"):
            eng.generate([[1, 2, 3]], 1, Sampling(seed=4))
        assert eng.counters["reloads"] == 1 and eng.counters["failures"] == 1
        srv.ignore_loads = False
        got = eng.generate([[1, 2, 3]], 1, Sampling(seed=4))
    finally:
        srv.server.stop()
        eng.close()
    assert eng.counters["reloads"] == 2 and srv.w == 1.0
    np.testing.assert_allclose(got.logps[0, :4], logps_of(1.0), rtol=1e-6)


def test_sync_every_one_donated_without_a_sync_is_an_engine_error(tmp_path):
    """sync_every=1: every update is followed by a sync before the next generate, so the engine
    probes a reload with the trainer's own arrays (no host copy each step). Were they donated
    all the same (a loop that updates without syncing), the reload fails with the engine's
    error saying so, not a RuntimeError about a deleted array."""
    srv = WeightServer()
    eng = engine(srv.url, tmp_path, 1)
    try:
        p = params(1.0)
        eng.ensure(p, 0)
        donate(p)
        with srv.restarted(), pytest.raises(EngineError, match="donated"):
            eng.generate([[1, 2, 3]], 1, Sampling(seed=4))
    finally:
        srv.server.stop()
        eng.close()
