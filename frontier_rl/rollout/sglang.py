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
sync: a `WeightTransport` pushes the policy to the server, then the probe checks it. The
  transport here is `DiskTransport`: export the policy (HF safetensors in the model's compute
  dtype, cast on the devices before the host copy) to the sync directory and
  `POST /update_weights_from_disk` {model_path}. No `/flush_cache` follows: SGLang's scheduler
  flushes the radix cache itself after every successful load (see DiskTransport). The sync
  directory is a fresh one under /dev/shm (memory, not disk) when the server is on this host
  and /dev/shm has room, else `sync_dir` (see `memory_sync_dir`), chosen at the first sync and
  removed on close. The probe: the engine samples a continuation of `probe_ids` of at most
  `probe_len` tokens; the trainer's log-probs of it (`probe_fn`, always given the continuation
  padded to `probe_len`, so it runs at one shape for the whole run and compiles once) must be
  within `rollout.probe_tol` of the engine's (mean |diff|; default 0.05: bf16 kernels alone
  differ by ~0.01), else EngineError (never a silent stale policy).
faults: connection errors, timeouts, 5xx and malformed answers (a missing field, log-probs
  not one per output id or not finite, more output ids than max_new_tokens, a finish reason
  other than stop / length, an abort) are retried with exponential backoff until `retries`
  attempts or `deadline` seconds, then EngineError naming the last error; a 4xx (our request
  is wrong) is an EngineError at once. After a connection error the next attempt first reloads
  the last synced weights (a restarted server comes back with the weights it was started
  from) and checks them by the probe; a reload that fails is tried again before the next
  request. Counted under rollout/engine_*.
donation: the train step donates the parameters it is given, so the arrays of a sync are
  deleted by the next update. The engine holds them only while that update is followed by a
  sync that replaces them before any request (the next step syncs too: rollout.sync_every = 1);
  else (sync_every > 1: steps pass on the synced weights) it keeps a host copy of what it
  pushed, one device->host copy a sync, for a reload and its probe. A reload that finds the
  arrays it holds deleted anyway is an EngineError saying so, never JAX's RuntimeError.

One trainer process: the rollouts, the weight export and the probe are one process's work, so
a run of several processes (multi-host) with this engine is refused when the engine is made
(RunError naming rollout.engine); such runs use the embedded sampler (rollout.engine=jax).

Deviation: SGLang returns no per-token entropies; rows get 0 unless the server sends the
`output_token_entropy` extension (as `frontier-rl serve` does).
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol
from urllib.parse import urlparse

import httpx
import jax
import numpy as np

from frontier_rl.fit import perf
from frontier_rl.rollout.engine import EngineError, Sampling
from frontier_rl.rollout.registry import EngineParts, register_engine
from frontier_rl.rollout.sampler import SampleResult
from frontier_rl.run.errors import RunError

log = logging.getLogger("frontier_rl")

COUNTERS = ("requests", "retries", "failures", "timeouts", "server_errors", "malformed",
            "connection_errors", "reloads", "syncs", "sync_time", "sync_push_time",
            "sync_probe_time", "probe_abs_diff")
MEMORY_DIR = "/dev/shm"  # where a sync directory in memory is made (Linux)
PROBE_LEN = 64  # the most tokens the probe's continuation has (fixed: one probe shape a run)
_RETRYABLE = (httpx.TransportError,)


class Malformed(ValueError):
    """A 200 answer that is not what the protocol says."""


def check_server(url: str, wait: float = 10.0) -> None:
    """Fails in seconds, before a run spends minutes on its warm start, when no server answers
    `url`/health (`rollout.sglang.url`): RunError naming the URL and how to start one."""
    t0 = time.monotonic()
    last = ""
    while True:
        try:
            r = httpx.get(url.rstrip("/") + "/health", timeout=min(5.0, wait))
            if r.status_code == 200:
                return
            last = f"HTTP {r.status_code}"
        except httpx.HTTPError as e:
            last = f"{type(e).__name__}: {e}"
        if time.monotonic() - t0 >= wait:
            raise RunError(f"rollout.sglang.url={url}: no healthy server answers /health after "
                           f"{wait:.0f}s ({last}); start one first (launch/sglang_server.sh), or "
                           "set rollout.engine=jax")
        time.sleep(1.0)


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


# -- weight transports ---------------------------------------------------------------------------

Post = Callable[..., object]  # SGLangEngine._post: (path, payload, parse) with the retries


class WeightTransport(Protocol):
    """How the trainer's parameters reach the server. `SGLangEngine.sync` calls `push` and then
    checks the probe; the run loop never sees the transport.

    push(params, step): from its return on, the server serves `params` (step: the policy's
        update count, for the server's bookkeeping); `timings` then holds the push's phases in
        seconds.
    reload(params, step): a restarted server came back with its start weights: serve the last
        pushed weights again (cheaper than a push where the transport can be). `params` are
        those weights, the trainer's arrays or the engine's host copy of them (the trainer's
        may have been donated since; see SGLangEngine._keep).
    close(): release what the transport holds (directories, process groups).

    `DiskTransport` (below) is the fallback that works with any server that reaches the files.
    An in-memory transport is SGLang's distributed weight update: `POST
    /init_weights_update_group` {master_address, master_port, rank_offset: 1, world_size: 1 +
    the server's tp size, group_name, backend: "nccl"} once (the trainer is rank 0 of that
    process group, the server's ranks are rank_offset + tp rank), then per push
    `POST /update_weights_from_distributed` {names, dtypes, shapes, group_name, flush_cache}
    (HF names and the engine's dtype) while the trainer broadcasts each tensor from rank 0 in
    that order; `POST /destroy_weights_update_group` {group_name} on close. It needs an NCCL
    communicator on the trainer's side that JAX does not expose, so it is not implemented here;
    it plugs in as `SGLangEngine(transport=lambda post: Transport(post, ...))` without a change
    to the engine or the loop (docs/architecture.md, weight sync).
    """

    timings: dict[str, float]

    def push(self, params, step: int) -> None: ...

    def reload(self, params, step: int) -> None: ...

    def close(self) -> None: ...


def _params_bytes(params) -> int:
    return sum(int(np.prod(np.shape(x))) * np.dtype(getattr(x, "dtype", np.float32)).itemsize
               for x in jax.tree.leaves(params))


def _deleted(params) -> bool:
    """Whether any of `params`' arrays was deleted (donated to a jitted call, or freed)."""
    return any(isinstance(x, jax.Array) and x.is_deleted() for x in jax.tree.leaves(params))


def _local(url: str) -> bool:
    """Whether `url` names this host (loopback or this machine's name): a server there reads
    this host's /dev/shm; any other may not."""
    host = (urlparse(url).hostname or "").lower()
    names = {"localhost", "::1", "0.0.0.0", socket.gethostname().lower()}
    return host in names or host.startswith("127.")


def memory_sync_dir(url: str, need: int, memory_dir: str | None = MEMORY_DIR) -> str | None:
    """A fresh sync directory in memory, or None to use the configured `sync_dir`.

    The rule: Linux, `memory_dir` (/dev/shm) exists and is writable, the server's URL names this
    host (loopback or its hostname), and both the filesystem's free space and the host's
    available memory exceed 2 x `need` + 1 GiB (`need`: the parameters' bytes, which bound the
    export; the atomic swap holds a new export beside the old). Directories of this user's
    earlier processes that are gone (a killed run) are removed first."""
    if memory_dir is None or not sys.platform.startswith("linux"):
        return None
    if not (os.path.isdir(memory_dir) and os.access(memory_dir, os.W_OK)) or not _local(url):
        return None
    _sweep(memory_dir)
    st = os.statvfs(memory_dir)
    room = min(st.f_bavail * st.f_frsize, perf.available_memory_bytes())
    if room < 2 * need + 2**30:
        log.info("sync dir: %s has %.1f GiB free, a sync needs %.1f GiB: using the configured "
                 "directory", memory_dir, room / 2**30, (2 * need + 2**30) / 2**30)
        return None
    return tempfile.mkdtemp(prefix=f"frontier_rl-sync-{os.getpid()}-", dir=memory_dir)


def _sweep(memory_dir: str) -> None:
    """Removes frontier_rl-sync-<pid>-* directories of this user whose process is gone."""
    try:
        names = os.listdir(memory_dir)
    except OSError:
        return
    for name in names:
        parts = name.split("-")
        if not name.startswith("frontier_rl-sync-") or len(parts) < 4 or not parts[2].isdigit():
            continue
        path = os.path.join(memory_dir, name)
        try:
            if os.stat(path).st_uid != os.getuid():
                continue
            os.kill(int(parts[2]), 0)  # alive (or another user's): keep
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


class DiskTransport:
    """The policy as a Hugging Face directory the server loads: `export_fn(params, path)`, then
    `POST /update_weights_from_disk` {model_path}.

    No `/flush_cache` after it: SGLang's scheduler flushes the radix cache itself once a disk
    load succeeds (python/sglang/srt/managers/scheduler_update_weights_mixin.py,
    `SchedulerUpdateWeightsMixin.update_weights_from_disk`: `flush_cache()` after a successful
    `tp_worker.update_weights_from_disk`; newer releases gate it on the request's `flush_cache`
    field, default True in `io_struct.UpdateWeightFromDiskReqInput`), and a separate
    `/flush_cache` would only race the next request.

    The directory is chosen at the first push (`memory_sync_dir`: /dev/shm when the rule holds,
    else `sync_dir`) and kept; if the export into the memory directory fails (it filled up) or
    the server cannot load from it (a server in a container with its own /dev/shm) the
    transport falls back to `sync_dir` for good. A memory directory is removed on close (and at
    exit, for runs that end without closing)."""

    def __init__(self, post: Post, export_fn: Callable[[object, str], object], sync_dir: str,
                 *, url: str = "", memory_dir: str | None = MEMORY_DIR):
        self.post, self.export_fn, self.sync_dir = post, export_fn, sync_dir
        self.url, self.memory_dir = url, memory_dir
        self.dir: str | None = None
        self.path: str | None = None  # the directory the server should be serving
        self.timings: dict[str, float] = {}
        self._owned: str | None = None  # a memory directory of ours, removed on close
        self._cleanup: Callable[[], None] | None = None

    def _choose(self, params) -> str:
        mem = memory_sync_dir(self.url, _params_bytes(params), self.memory_dir)
        if mem is None:
            return self.sync_dir
        self._owned = mem
        self._cleanup = lambda: shutil.rmtree(mem, ignore_errors=True)
        atexit.register(self._cleanup)
        return mem

    def _load(self, path: str) -> None:
        def ok(body):
            if not isinstance(body, dict) or "success" not in body:
                raise Malformed(f"update_weights_from_disk answered {body!r}")
            if not body["success"]:
                raise EngineError(f"{self.url} could not load {path}: {body.get('message')}")
            return body

        self.post("/update_weights_from_disk", {"model_path": path}, ok)

    def push(self, params, step: int) -> None:
        if self.dir is None:
            self.dir = self._choose(params)
        path = os.path.join(self.dir, "policy")
        t0 = time.perf_counter()
        try:
            self.export_fn(params, path)
            t1 = time.perf_counter()
            self._load(path)
        except (OSError, EngineError) as e:
            if self._owned is None or self.dir != self._owned:
                raise
            # /dev/shm filled up under us, or the server cannot read it (its own /dev/shm).
            log.warning("%s: syncing through %s from now on, not %s", e, self.sync_dir,
                        self._owned)
            self._release()
            self.dir = self.sync_dir
            self.push(params, step)
            return
        self.path = path
        self.timings = {"export": t1 - t0, "load": time.perf_counter() - t1}

    def reload(self, params, step: int) -> None:
        if self.path is not None:  # the export is still there: point the server at it again
            self._load(self.path)

    def _release(self) -> None:
        if self._cleanup is not None:
            self._cleanup()
            atexit.unregister(self._cleanup)
        self._owned = self._cleanup = None

    def close(self) -> None:
        self._release()


class SGLangEngine:
    """Rollouts from a server speaking SGLang's native API (see the module docstring)."""

    external = True

    def __init__(self, url: str, *, pad_id: int, stop_ids: Sequence[int], max_new_tokens: int,
                 sync_dir: str, export_fn: Callable[[object, str], str] | None = None,
                 probe_fn: Callable[[object, list[int], list[int]], np.ndarray] | None = None,
                 probe_ids: Sequence[int] = (), probe_tol: float = 0.05,
                 temperature: float = 1.0, timeout: float = 1800.0, deadline: float = 7200.0,
                 retries: int = 8, backoff: float = 1.0, concurrency: int = 8,
                 max_rows: int = 4096, sync_every: int = 1, probe_len: int = PROBE_LEN,
                 transport: Callable[[Post], WeightTransport] | None = None,
                 memory_dir: str | None = MEMORY_DIR):
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
        self.probe_len = max(1, min(int(probe_len), int(max_new_tokens)))
        self.timeout, self.deadline = timeout, deadline
        self.retries, self.backoff = retries, backoff
        self.concurrency, self.max_rows = concurrency, max_rows
        self.client = httpx.Client(base_url=self.url, timeout=timeout,
                                   limits=httpx.Limits(max_connections=concurrency + 2))
        self.counters = {k: 0.0 for k in COUNTERS}
        self.synced_step = -1
        # What the server serves: the last push's weights in a form a reload can use (`_keep`).
        self._served, self._pushed, self._pushed_step = None, False, -1
        self._stale_server = False  # a connection dropped: reload before the next generate
        self._op_start: float | None = None  # a sync's start: its requests share one deadline
        self._lock = threading.RLock()
        # The transport (default: the disk path) gets the engine's POST with its retries.
        self.transport: WeightTransport = (
            transport(self._post) if transport is not None else
            DiskTransport(self._post, export_fn, sync_dir, url=self.url, memory_dir=memory_dir))

    # -- transport ----------------------------------------------------------------------------

    def _post(self, path: str, payload: dict, parse: Callable | None, *,
              reload: bool = False):
        """POST with retries until `retries` attempts or `deadline` seconds; `parse(json)`
        raising Malformed counts as a retryable failure. With `reload`, a server that dropped a
        connection gets the synced weights again before the request is retried."""
        # One deadline per operation: a sync's transport fallback (memory -> disk) and its
        # retries share the sync's clock (`_op_start`), and no attempt may wait past it.
        t0, last, attempt = self._op_start or time.monotonic(), "", 0
        while True:
            attempt += 1
            try:
                if reload and self._stale_server:
                    self._reload()
                self.counters["requests"] += 1
                left = self.deadline - (time.monotonic() - t0)
                if left <= 0:
                    raise httpx.TimeoutException(f"the operation's deadline of {self.deadline}s "
                                                 "passed")
                r = self.client.post(path, json=payload, timeout=min(self.timeout, left))
                if r.status_code >= 500:
                    self.counters["server_errors"] += 1
                    raise Malformed(f"HTTP {r.status_code}: {r.text[:200]!r}")
                if r.status_code >= 400:  # our request is wrong: retrying will not help
                    raise EngineError(f"{self.url}{path}: HTTP {r.status_code}: {r.text[:500]}")
                if parse is None:  # an answer without a body worth reading
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
        """Gives the server the synced weights again and checks them by the probe.

        The weights are the last sync's (step `_pushed_step`), not the trainer's current ones:
        after a reconnect the server must serve what the trainer says it serves (`synced_step`;
        rollout/engine_staleness logs the step's rollouts as that policy's), so a dropped
        connection changes nothing of the run. They come from what `_keep` kept, never from
        arrays a train step has donated since; were those donated all the same, the reload is
        an EngineError. A reload that fails leaves the server marked stale, so no later request
        goes to a server whose weights were not given back."""
        with self._lock:
            if not self._stale_server:
                return
            self._stale_server = False  # the probe's own request must not reload again
            if not self._pushed:
                return
            self.counters["reloads"] += 1
            log.warning("%s dropped a connection: giving it the weights of step %d again",
                        self.url, self._pushed_step)
            try:
                if _deleted(self._served):
                    raise EngineError(
                        f"{self.url} dropped a connection and must be given the weights of step "
                        f"{self._pushed_step} again, but the trainer's arrays of that step were "
                        "donated to a train step before a sync replaced them (the engine keeps "
                        "the trainer's arrays when the next step syncs, a host copy when it "
                        f"does not: rollout.sync_every={self.sync_every}); the server may be "
                        "serving other weights")
                self.transport.reload(self._served, self._pushed_step)
                # A drop met by the reload's own requests is what this reload repaired: no
                # second reload from inside the probe.
                self._stale_server = False
                self._probe(self._served)
            except BaseException:
                self._stale_server = True
                raise

    def _probe(self, params) -> float:
        """Mean |engine - trainer| log-prob over a sampled continuation of `probe_ids` (at most
        `probe_len` tokens, seed 0). `probe_fn` gets the continuation padded with `pad_id` to
        `probe_len` tokens, so the trainer's side has one shape for the whole run (one compile,
        not one per continuation length); a causal model's log-probs of the first n tokens do
        not see the padding, and only those n are compared."""
        if self.probe_fn is None or not self.probe_ids:
            return 0.0
        res = self.generate([self.probe_ids], 1, Sampling(
            temperature=self.temperature, seed=0, max_new_tokens=self.probe_len))
        n = int(res.lengths[0])
        padded = res.tokens[0, :n].tolist() + [self.pad_id] * (self.probe_len - n)
        mine = np.asarray(self.probe_fn(params, self.probe_ids, padded))[:n]
        diff = float(np.mean(np.abs(mine - res.logps[0, :n]))) if n else 0.0
        self.counters["probe_abs_diff"] = diff
        if not np.isfinite(diff) or diff > self.probe_tol:
            raise EngineError(
                f"weight sync to {self.url}: the engine's log-probs on the probe differ from the "
                f"trainer's by {diff:.3g} nats/token (rollout.probe_tol={self.probe_tol}); the "
                "server is not serving the synced policy (stale weights, another checkpoint, or "
                "a different dtype)")
        return diff

    def _keep(self, params, step: int):
        """What a reload gives the server and probes: the weights of `step`, in a form that
        outlives the train steps that donate `params` while the server is meant to serve them.
        If the next step syncs too, its update (which donates `params`) is followed by that
        sync before any request, so the trainer's own arrays serve until then and nothing is
        copied. Otherwise steps pass on these weights, their updates donating `params`: a host
        copy (one device->host copy of the parameters a sync, once per rollout.sync_every
        steps; host memory for one copy of them)."""
        if self.sync_due(step + 1):
            return params
        return jax.device_get(params)

    def sync(self, params, step: int) -> None:
        """Pushes `params` through the transport, then checks the probe. The push phase
        (sync_push_time) includes what the engine keeps for a reload (`_keep`)."""
        t0 = time.perf_counter()
        self._op_start = time.monotonic()
        try:
            self.transport.push(params, step)
            self._served, self._pushed, self._pushed_step = self._keep(params, step), True, step
            t1 = time.perf_counter()
            self._probe(params)
        finally:
            self._op_start = None
        t2 = time.perf_counter()
        self.synced_step = step
        self.counters["syncs"] += 1
        self.counters["sync_time"] += t2 - t0
        self.counters["sync_push_time"] += t1 - t0
        self.counters["sync_probe_time"] += t2 - t1

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
        self._served = None
        self.transport.close()
        self.client.close()


# ------------------------------------------------------------------ registration (rollout.sglang)
DEFAULTS = {
    "url": "",  # e.g. http://127.0.0.1:31000 (launch/run_gpu.sh)
    # A request's rows decode together with the other requests in flight, so one lasts about
    # as long as the whole call: at the papers' sizes (thousands of rows x 2,560-20,480 tokens)
    # that is many minutes, and a timed-out request is generated again from scratch, so the
    # timeout is generous. launch/run_gpu.sh also sends real SGLang requests of 512 rows (a
    # retry redoes those, not the call); a call in one request is what `frontier-rl serve`
    # reproduces the embedded sampler's tokens for, hence the larger default.
    "timeout": 1800.0,  # seconds one request may take
    "deadline": 7200.0,  # seconds of retries before a call fails the step
    "retries": 8,  # attempts per request within the deadline
    "backoff": 1.0,  # first retry delay in seconds, doubled each retry
    "concurrency": 8,  # /generate requests in flight at once
    "max_rows": 4096,  # responses per /generate request
}


def _validate(s, config) -> None:
    """`rollout.sglang`'s fields; ValueError naming the first bad one."""
    def number(x, lo, strict):
        return (isinstance(x, (int, float)) and not isinstance(x, bool) and x == x
                and abs(x) != float("inf") and (x > lo if strict else x >= lo))

    def count(x):
        return isinstance(x, int) and not isinstance(x, bool) and x >= 1

    checks = (
        ("url", isinstance(s.url, str) and s.url.startswith(("http://", "https://")),
         "the server's address, e.g. http://127.0.0.1:31000"),
        ("timeout", number(s.timeout, 0, True), "a number > 0 (seconds)"),
        ("deadline", number(s.deadline, 0, True) and number(s.timeout, 0, True)
         and s.deadline >= s.timeout, f"a number >= rollout.sglang.timeout={s.timeout} (seconds)"),
        ("retries", count(s.retries), "an integer >= 1 (attempts)"),
        ("backoff", number(s.backoff, 0, False), "a number >= 0 (seconds)"),
        ("concurrency", count(s.concurrency), "an integer >= 1"),
        ("max_rows", count(s.max_rows), "an integer >= 1"),
    )
    for field, ok, allowed in checks:
        if not ok:
            raise ValueError(f"rollout.sglang.{field}={s[field]!r} is not allowed: {allowed}")


def _check(config) -> None:
    check_server(config.rollout.sglang.url)


@register_engine("sglang", external=True, defaults=DEFAULTS, validate=_validate, check=_check)
def _build(parts: EngineParts) -> SGLangEngine:
    """An HTTP client of the server at `rollout.sglang.url`, synced by exporting the policy to
    `rollout.sync_dir` (DIR/sync by default) and probed with the trainer's log-probs."""
    r, s = parts.config.rollout, parts.config.rollout.sglang
    return SGLangEngine(
        s.url, pad_id=parts.pad_id, stop_ids=parts.stop_ids, max_new_tokens=r.max_new_tokens,
        sync_dir=r.sync_dir or os.path.join(parts.workdir, "sync"), export_fn=parts.export_fn,
        probe_fn=parts.probe_fn, probe_ids=parts.probe_ids, probe_tol=r.probe_tol,
        temperature=r.temperature, timeout=s.timeout, deadline=s.deadline, retries=s.retries,
        backoff=s.backoff, concurrency=s.concurrency, max_rows=s.max_rows,
        sync_every=r.sync_every)
