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
