"""The SGLang engine: an HTTP client of SGLang's native API (checked against SGLang
0.5.7-0.5.23's `io_struct.GenerateReqInput` / `UpdateWeightFromDiskReqInput`,
`sampling_params.SamplingParams` and `http_server.py`; launch/sglang_server.sh pins that range).

generate: `POST /generate` with `input_ids` (a batch of token-id lists; the server runs with
  `--skip-tokenizer-init`), `sampling_params` (one dict per row: temperature (0 = greedy),
  top_p, top_k (-1 = off, SGLang's own "disabled"; SGLang refuses 0), max_new_tokens,
  stop_token_ids, n, sampling_seed) and `return_logprob`; the answer is
  one object per row with `output_ids` and `meta_info` {`output_token_logprobs`: [[logprob,
  token_id, text], ...], `finish_reason`: {"type": "stop", "matched": id} | {"type": "length",
  "length": k}}. Each prompt is sent n times with n=1, prompt-major: SGLang's own `n` repeats the
  whole batch (sample-major), and explicit rows keep the order ours without relying on that.
  Rows go in requests of at most `max_rows`, `concurrency` at a time. Row r of a call carries
  `sampling_seed` = the call's seed + r: a server with deterministic sampling (SGLang's
  --enable-deterministic-inference draws each token from a hash of the request's seed and the
  position) would give the n copies of a prompt identical responses under one shared seed, so
  no two rows of a call share one; and a call is reproducible on a server that honours seeds.
  `sampling_seed` exists since SGLang 0.5.3 (an older server refuses the field) and is an
  int64 since 0.5.7 (the calls' seeds are 32-bit hashes, so rows may pass 2**31).
sync: export the policy (HF safetensors) to `sync_dir`, `POST /update_weights_from_disk`
  {model_path}, `POST /flush_cache` (the radix cache holds the old policy's KV), then the probe:
  the engine's log-probs of a fixed sampled sequence against the trainer's, mean |diff| within
  `rollout.probe_tol` (default 0.05: bf16 kernels alone differ by ~0.01), else EngineError
  (never a silent stale policy).
faults: connection errors, timeouts, 5xx and malformed answers (a missing field, log-probs
  not one per output id or not finite, more output ids than max_new_tokens, a finish reason
  other than stop / length, an abort) are retried with exponential backoff until `retries`
  attempts or `deadline` seconds, then EngineError naming the last error; a 4xx (our request
  is wrong) is an EngineError at once. After a connection error the next attempt first reloads
  the last synced weights (a restarted server comes back with the weights it was started
  from). Counted under rollout/engine_*.

One trainer process: the rollouts, the weight export and the probe are one process's work, so
a run of several processes (multi-host) with this engine is refused when the engine is made
(RunError naming rollout.engine); such runs use the embedded sampler (rollout.engine=jax).

Deviation: SGLang returns no per-token entropies; rows get 0 unless the server sends the
`output_token_entropy` extension (as `frontier-rl serve` does).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import httpx
import jax
import numpy as np

from frontier_rl.errors import RunError
from frontier_rl.rollout.engine import EngineError, Sampling
from frontier_rl.rollout.sampler import SampleResult

log = logging.getLogger("frontier_rl")

COUNTERS = ("requests", "retries", "failures", "timeouts", "server_errors", "malformed",
            "connection_errors", "reloads", "syncs", "sync_time", "probe_abs_diff")
_RETRYABLE = (httpx.TransportError,)


class Malformed(ValueError):
    """A 200 answer that is not what the protocol says."""


def _parse_rows(body, rows: int, max_new: int) -> list[dict]:
    """The rows of a /generate answer; Malformed unless each has as many finite log-probs as
    output ids, at most `max_new` of them, and a stop or length finish."""
    if isinstance(body, dict):
        body = [body]
    if not isinstance(body, list) or len(body) != rows:
        raise Malformed(f"expected a list of {rows} results, got {type(body).__name__}"
                        + (f" of {len(body)}" if isinstance(body, list) else ""))
    out = []
    for r in body:
        try:
            ids = [int(t) for t in r["output_ids"]]
            meta = r["meta_info"]
            logps = [float(x[0]) for x in meta["output_token_logprobs"]]
            reason = meta["finish_reason"]
            kind = reason["type"] if isinstance(reason, dict) else None
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise Malformed(f"a result lacks output_ids / meta_info fields ({e!r})") from None
        if len(logps) != len(ids):
            raise Malformed(f"{len(ids)} output_ids but {len(logps)} output_token_logprobs")
        if len(ids) > max_new:
            raise Malformed(f"{len(ids)} output_ids, more than the max_new_tokens={max_new} "
                            "asked for")
        if not np.all(np.isfinite(logps)):
            bad = next(i for i, x in enumerate(logps) if not np.isfinite(x))
            raise Malformed(f"output_token_logprobs[{bad}] is {logps[bad]} (a sampled token's "
                            "log-prob must be finite)")
        if kind not in ("stop", "length", "abort"):
            raise Malformed(f"finish_reason {reason!r}")
        if kind == "abort":
            raise Malformed(f"the server aborted the request: {reason!r}")
        ent = meta.get("output_token_entropy")
        out.append({"ids": ids, "logps": logps, "stop": kind == "stop",
                    "ent": [float(x) for x in ent] if ent and len(ent) == len(ids) else None})
    return out


class SGLangEngine:
    """Rollouts from a server speaking SGLang's native API (see the module docstring)."""

    external = True

    def __init__(self, url: str, *, pad_id: int, stop_ids: Sequence[int], max_new_tokens: int,
                 sync_dir: str, export_fn: Callable[[object, str], str] | None = None,
                 probe_fn: Callable[[object, list[int], list[int]], np.ndarray] | None = None,
                 probe_ids: Sequence[int] = (), probe_tol: float = 0.05,
                 temperature: float = 1.0, timeout: float = 1800.0, deadline: float = 7200.0,
                 retries: int = 8, backoff: float = 1.0, concurrency: int = 8,
                 max_rows: int = 4096, sync_every: int = 1):
        if jax.process_count() > 1:
            # Every process would send its own requests (and sample its own responses), and the
            # export would device_get parameters that live on other hosts: refuse, clearly.
            raise RunError(
                f"rollout.engine='sglang' with {jax.process_count()} trainer processes is not "
                "supported: the SGLang client generates, exports the weights and checks the "
                "probe in one process. Run one trainer process per server (launch/run_gpu.sh, "
                "one node), or set rollout.engine='jax' for a multi-host run")
        self.url = url.rstrip("/")
        self.sync_every = int(sync_every)  # steps between weight syncs (rollout.sync_every)
        self._staleness_base = -1
        self.pad_id = pad_id
        self.stop_ids = [int(i) for i in stop_ids]
        self.max_new_tokens = max_new_tokens
        self.sync_dir = sync_dir
        self.export_fn, self.probe_fn = export_fn, probe_fn
        self.probe_ids, self.probe_tol, self.temperature = list(probe_ids), probe_tol, temperature
        self.timeout, self.deadline = timeout, deadline
        self.retries, self.backoff = retries, backoff
        self.concurrency, self.max_rows = concurrency, max_rows
        self.client = httpx.Client(base_url=self.url, timeout=timeout,
                                   limits=httpx.Limits(max_connections=concurrency + 2))
        self.counters = {k: 0.0 for k in COUNTERS}
        self.synced_step = -1
        self._loaded: str | None = None  # the directory the server should be serving
        self._stale_server = False  # a connection dropped: reload before the next generate
        self._lock = threading.RLock()

    # -- transport ----------------------------------------------------------------------------

    def _post(self, path: str, payload: dict, parse: Callable | None, *,
              reload: bool = False):
        """POST with retries until `retries` attempts or `deadline` seconds; `parse(json)`
        raising Malformed counts as a retryable failure. With `reload`, a server that dropped a
        connection gets the synced weights again before the request is retried."""
        t0, last, attempt = time.monotonic(), "", 0
        while True:
            attempt += 1
            try:
                if reload and self._stale_server:
                    self._reload()
                self.counters["requests"] += 1
                r = self.client.post(path, json=payload)
                if r.status_code >= 500:
                    self.counters["server_errors"] += 1
                    raise Malformed(f"HTTP {r.status_code}: {r.text[:200]!r}")
                if r.status_code >= 400:  # our request is wrong: retrying will not help
                    raise EngineError(f"{self.url}{path}: HTTP {r.status_code}: {r.text[:500]}")
                if parse is None:  # an answer without a body worth reading (/flush_cache)
                    return r.text
                try:
                    body = r.json()
                except ValueError:
                    self.counters["malformed"] += 1
                    raise Malformed(f"not JSON: {r.text[:200]!r}") from None
                try:
                    return parse(body)
                except Malformed:
                    self.counters["malformed"] += 1
                    raise
            except (httpx.TimeoutException, httpx.TransportError, Malformed) as e:
                if isinstance(e, httpx.TimeoutException):
                    self.counters["timeouts"] += 1
                elif isinstance(e, httpx.TransportError):
                    self.counters["connection_errors"] += 1
                    self._stale_server = True
                last = f"{type(e).__name__}: {e}"
            except EngineError:
                self.counters["failures"] += 1
                raise
            elapsed = time.monotonic() - t0
            wait = self.backoff * 2 ** (attempt - 1)
            if attempt >= self.retries or elapsed + wait > self.deadline:
                self.counters["failures"] += 1
                raise EngineError(
                    f"{self.url}{path} failed {attempt} times in {elapsed:.1f}s "
                    f"(rollout.sglang.retries={self.retries}, deadline={self.deadline}s); "
                    f"last error: {last}")
            self.counters["retries"] += 1
            log.warning("%s%s: %s; retry %d in %.1fs", self.url, path, last, attempt, wait)
            time.sleep(wait)

    # -- generate -----------------------------------------------------------------------------

    def _request(self, rows: list[list[int]], sampling: Sampling, max_new: int, seed: int):
        """One /generate request; row i gets sampling_seed `seed + i`."""
        params = {"temperature": 0.0 if sampling.greedy else float(sampling.temperature),
                  "top_p": 1.0 if sampling.greedy else float(sampling.top_p),
                  "top_k": -1 if sampling.greedy or sampling.top_k < 1 else int(sampling.top_k),
                  "max_new_tokens": int(max_new), "stop_token_ids": self.stop_ids, "n": 1}
        payload = {"input_ids": rows, "return_logprob": True,
                   "sampling_params": [{**params, "sampling_seed": int(seed) + i}
                                       for i in range(len(rows))]}
        return self._post("/generate", payload, lambda b: _parse_rows(b, len(rows), max_new),
                          reload=True)

    def generate(self, prompt_ids, n: int, sampling: Sampling) -> SampleResult:
        if not prompt_ids:
            raise ValueError("generate() got no prompts")
        max_new = sampling.max_new_tokens or self.max_new_tokens
        rows = [list(map(int, p)) for p in prompt_ids for _ in range(n)]
        starts = range(0, len(rows), self.max_rows)
        chunks = [rows[i:i + self.max_rows] for i in starts]
        seeds = [sampling.seed + i for i in starts]  # a chunk's first row: seeds run on
        if len(chunks) == 1:
            parts = [self._request(chunks[0], sampling, max_new, seeds[0])]
        else:
            with ThreadPoolExecutor(min(self.concurrency, len(chunks))) as pool:
                parts = list(pool.map(lambda a: self._request(a[0], sampling, max_new, a[1]),
                                      zip(chunks, seeds, strict=True)))
        out = [r for part in parts for r in part]
        R = len(rows)
        tokens = np.full((R, max_new), self.pad_id, np.int32)
        logps = np.zeros((R, max_new), np.float32)
        ents = np.zeros((R, max_new), np.float32)
        lengths = np.zeros(R, np.int32)
        finished = np.zeros(R, bool)
        for i, r in enumerate(out):  # _parse_rows checked that each row fits max_new
            k = len(r["ids"])
            tokens[i, :k], logps[i, :k] = r["ids"], r["logps"]
            if r["ent"] is not None:
                ents[i, :k] = r["ent"]
            lengths[i] = k
            finished[i] = r["stop"]
        return SampleResult(tokens=tokens, logps=logps, entropies=ents, lengths=lengths,
                            finished=finished,
                            prompt_lens=np.array([len(r) for r in rows], np.int32))

    # -- weights ------------------------------------------------------------------------------

    def _reload(self) -> None:
        """Points the server at the synced directory again and checks it by the probe."""
        with self._lock:
            if not self._stale_server:
                return
            self._stale_server = False
            if self._loaded is None:
                return
            self.counters["reloads"] += 1
            log.warning("%s dropped a connection: reloading %s", self.url, self._loaded)
            self._load(self._loaded)
            self._probe(self._params)

    def _load(self, path: str) -> None:
        def ok(body):
            if not isinstance(body, dict) or "success" not in body:
                raise Malformed(f"update_weights_from_disk answered {body!r}")
            if not body["success"]:
                raise EngineError(f"{self.url} could not load {path}: {body.get('message')}")
            return body

        self._post("/update_weights_from_disk", {"model_path": path}, ok)
        self._post("/flush_cache", {}, None)

    def _probe(self, params) -> float:
        """Mean |engine - trainer| log-prob over a fixed sampled continuation of `probe_ids`."""
        if self.probe_fn is None or not self.probe_ids:
            return 0.0
        res = self.generate([self.probe_ids], 1, Sampling(temperature=self.temperature, seed=0))
        n = int(res.lengths[0])
        mine = np.asarray(self.probe_fn(params, self.probe_ids, res.tokens[0, :n].tolist()))
        diff = float(np.mean(np.abs(mine - res.logps[0, :n]))) if n else 0.0
        self.counters["probe_abs_diff"] = diff
        if not np.isfinite(diff) or diff > self.probe_tol:
            raise EngineError(
                f"weight sync to {self.url}: the engine's log-probs on the probe differ from the "
                f"trainer's by {diff:.3g} nats/token (rollout.probe_tol={self.probe_tol}); the "
                "server is not serving the synced policy (stale weights, another checkpoint, or "
                "a different dtype)")
        return diff

    def sync(self, params, step: int) -> None:
        t0 = time.perf_counter()
        path = os.path.join(self.sync_dir, "policy")
        self.export_fn(params, path)
        self._load(path)
        self._loaded, self._params = path, params
        self._probe(params)
        self.synced_step = step
        self.counters["syncs"] += 1
        self.counters["sync_time"] += time.perf_counter() - t0

    # -- the run loop's view -------------------------------------------------------------------

    def ensure(self, params, step: int) -> None:
        if self.synced_step != step:
            self.sync(params, step)

    def sync_due(self, step: int) -> bool:
        return step % self.sync_every == 0

    def begin_step(self, step: int) -> None:
        self._staleness_base = self.synced_step

    def step_metrics(self, step: int) -> dict[str, float]:
        """Counters plus staleness: updates the served policy lagged behind the trainer's when
        the step's rollouts were generated."""
        return {**self.metrics(), "rollout/engine_staleness": step - 1 - self._staleness_base}

    def health(self) -> bool:
        try:
            return self.client.get("/health", timeout=min(self.timeout, 10.0)).status_code == 200
        except httpx.HTTPError:
            return False

    def metrics(self) -> dict[str, float]:
        return {f"rollout/engine_{k}": float(v) for k, v in self.counters.items()}

    def state_dict(self) -> dict:
        return {k: v for k, v in self.counters.items() if k != "probe_abs_diff"}

    def load_state_dict(self, state: dict) -> None:
        self.counters.update({k: float(v) for k, v in state.items() if k in self.counters})

    def close(self) -> None:
        self.client.close()
