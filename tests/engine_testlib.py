"""Engines for the tests: a uvicorn server in a thread (stoppable, restartable on the same port)
serving `frontier-rl serve`'s app or a misbehaving one without a subprocess, and a scripted
engine whose responses are a table."""

from __future__ import annotations

import threading
import time

import numpy as np
import uvicorn

from frontier_rl.rollout.sampler import SampleResult
from frontier_rl.rollout.serve import free_port


class Server:
    """Serves `app` on 127.0.0.1; `stop()` cancels requests still in flight after
    `grace` seconds, as a killed server drops them."""

    def __init__(self, app, port: int | None = None, grace: float | None = None):
        self.app, self.port, self.grace = app, port or free_port(), grace
        self.url = f"http://127.0.0.1:{self.port}"
        self.start()

    def start(self):
        self.server = uvicorn.Server(uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, log_level="critical",
            timeout_graceful_shutdown=self.grace))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)

    def stop(self):
        self.server.should_exit = True
        self.thread.join(10)


class ScriptedEngine:
    """An engine whose answers are a table, for tests of what callers do with rows: sample j of
    a prompt is `sampled[prompt text][j]`, a greedy call's answer `greedy[prompt text]`, each a
    (response text, finished) pair; a finished row ends in EOS (counted in its length), an
    unfinished one is cut at the cap. Row i's entropies are `0.25 * (i + 1)` per token. Every
    call is recorded as (prompt texts, n, Sampling)."""

    external = False

    def __init__(self, tokenizer, sampled: dict, greedy: dict | None = None, cap: int = 6):
        self.tokenizer, self.sampled, self.greedy, self.cap = tokenizer, sampled, greedy, cap
        self.calls = []

    def generate(self, prompt_ids, n, sampling):
        tok = self.tokenizer
        texts = [tok.decode(list(ids), skip_special_tokens=True) for ids in prompt_ids]
        self.calls.append((texts, n, sampling))
        rows = [self.greedy[t] if sampling.greedy else self.sampled[t][j]
                for t in texts for j in range(n)]
        R = len(rows)
        tokens = np.full((R, self.cap), tok.pad_token_id, np.int32)
        ents = np.zeros((R, self.cap), np.float32)
        lengths, finished = np.zeros(R, np.int32), np.zeros(R, bool)
        for i, (text, fin) in enumerate(rows):
            ids = tok.encode(text, add_special_tokens=False) + ([tok.eos_token_id] if fin else [])
            if len(ids) > self.cap or (not fin and len(ids) != self.cap):
                raise ValueError(f"scripted row {text!r} (finished={fin}) does not fit cap "
                                 f"{self.cap}")
            tokens[i, :len(ids)] = ids
            ents[i, :len(ids)] = 0.25 * (i + 1)
            lengths[i], finished[i] = len(ids), fin
        return SampleResult(tokens=tokens, logps=-ents, entropies=ents, lengths=lengths,
                            finished=finished,
                            prompt_lens=np.array([len(p) for p in prompt_ids for _ in range(n)],
                                                 np.int32))

    def sync(self, params, step):
        pass

    def health(self):
        return True

    def metrics(self):
        return {}


class FakeSGLang:
    """A stand-in for SGLang's /generate (the native API, `--skip-tokenizer-init`) whose answer
    is a function of the request: row r (prompt ids p) generates 1 + (sum(p) + r) % max_new
    tokens, token k being 20 + (sum(p) + seed + k) % 30 (seed: the row's sampling_seed) with
    log-prob -(k + 1) / 10; a row
    of max_new tokens finishes "length", a shorter one ends in the first stop id and finishes
    "stop". `fault(row_answer)` (if set) edits each row's answer of the first `faults`
    requests (None: every request). Requests are recorded in `requests`."""

    def __init__(self, fault=None, faults: int | None = None, status: int = 200):
        from starlette.applications import Starlette
        from starlette.routing import Route

        self.fault, self.faults, self.status = fault, faults, status
        self.requests: list[dict] = []
        self.app = Starlette(routes=[Route("/generate", self._generate, methods=["POST"])])

    @staticmethod
    def answer(prompt: list[int], r: int, params: dict) -> dict:
        max_new, seed = params["max_new_tokens"], params["sampling_seed"]
        n = 1 + (sum(prompt) + r) % max_new
        ids = [20 + (sum(prompt) + seed + k) % 30 for k in range(n)]
        if n < max_new:
            ids[-1] = params["stop_token_ids"][0]
            reason = {"type": "stop", "matched": ids[-1]}
        else:
            reason = {"type": "length", "length": n}
        logps = [[-(k + 1) / 10, t, None] for k, t in enumerate(ids)]
        return {"text": "", "output_ids": ids,
                "meta_info": {"id": str(r), "prompt_tokens": len(prompt),
                              "completion_tokens": n, "output_token_logprobs": logps,
                              "finish_reason": reason}}

    async def _generate(self, request):
        import json

        from starlette.responses import PlainTextResponse, Response

        body = await request.json()
        self.requests.append(body)
        if self.status != 200:
            return PlainTextResponse(f"bad request {self.status}", status_code=self.status)
        sp = body["sampling_params"]
        out = [self.answer(p, r, sp[r] if isinstance(sp, list) else sp)
               for r, p in enumerate(body["input_ids"])]
        if self.fault is not None and (self.faults is None or len(self.requests) <= self.faults):
            for row in out:
                self.fault(row)
        # json.dumps, not JSONResponse: a NaN goes out as the bare NaN some servers write
        return Response(json.dumps(out), media_type="application/json")
