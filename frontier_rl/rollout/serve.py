"""`frontier-rl serve --model=HF_DIR | --workdir=DIR --port=P`: the JAX sampler behind SGLang's
native HTTP API, so the SGLang engine (rollout/sglang.py), its weight sync and its fault handling
run against a real server on any JAX backend, and a TPU user can run trainer and rollouts as
separate processes.

Endpoints (the shapes of SGLang 0.5 with `--skip-tokenizer-init`):
  POST /generate                  input_ids (one list or a batch), sampling_params {temperature
                                  (0 = greedy), top_p, top_k (-1 or absent = off; 0 and other
                                  values below -1 are refused, as SGLang refuses them),
                                  max_new_tokens, stop_token_ids, n,
                                  sampling_seed} (or one per row, equal but for seeds s, s+1,
                                  ...: the batch is sampled from key s, each row drawing its own
                                  stream, as the embedded sampler does), return_logprob -> per
                                  row {output_ids,
                                  meta_info {id, finish_reason, prompt_tokens, completion_tokens,
                                  output_token_logprobs [[logprob, id, null]], and our extension
                                  output_token_entropy}}; n > 1 repeats the batch sample-major,
                                  as SGLang does.
  POST /update_weights_from_disk  {model_path} -> {success, message, num_paused_requests}
                                  (SGLang flushes its radix cache after a successful load, so
                                  clients send no /flush_cache; this server has no prefix cache,
                                  and a load swaps the parameters under the sampler's lock)
  GET|POST /flush_cache           (no prefix cache here: a no-op)
  GET /health, /health_generate, /get_model_info
  POST /v1/chat/completions       enough of OpenAI's chat API for HeaPA's `teacher.kind=http`.

One batch is sampled at a time (a lock around the sampler): the batch a client sends is the
batch the sampler runs, so a request carrying a seed gives the tokens the embedded sampler gives
for the same rows and seed. --workdir serves that run's newest checkpoint (or its warm start).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import numpy as np

from frontier_rl.fit.shapes import PROMPT_BUCKETS
from frontier_rl.rollout.sampler import Sampler


class Policy:
    """The served model: parameters, tokenizer and one Sampler per stop-id set."""

    def __init__(self, path: str, max_new_tokens: int = 256):
        self.max_new_tokens = max_new_tokens
        self._samplers: dict[tuple[int, ...], Sampler] = {}
        self.lock = threading.Lock()
        self.load(path)

    def load(self, path: str) -> None:
        from flax import nnx

        from frontier_rl import policy as policy_lib
        from frontier_rl.models import abstract_params, hf
        from frontier_rl.rl import sharding

        mesh = sharding.make_mesh(-1, 1, 1)
        model, mcfg = hf.load_pretrained(
            path, shardings=lambda abstract: sharding.param_shardings(abstract, mesh))
        _, params = nnx.split(model, nnx.Param)
        if getattr(self, "mcfg", None) is not None:
            old = dataclasses.replace(self.mcfg, eos_token_ids=(), pad_token_id=None)
            new = dataclasses.replace(mcfg, eos_token_ids=(), pad_token_id=None)
            if old != new:
                raise ValueError(f"{path} is another architecture than the served model")
        graphdef = abstract_params(mcfg)[0]
        tokenizer = hf.load_tokenizer(path)
        with self.lock:
            if getattr(self, "mcfg", None) is None:
                self.graphdef, self.mcfg, self.mesh = graphdef, mcfg, mesh
                self.tokenizer = tokenizer
                self.stop_ids = policy_lib.stop_ids(mcfg, tokenizer)
                self.prompt_buckets = PROMPT_BUCKETS
            self.params, self.path = params, path

    def sampler(self, stop_ids) -> Sampler:
        key = tuple(int(i) for i in stop_ids) if stop_ids else self.stop_ids
        if key not in self._samplers:
            self._samplers[key] = Sampler(
                self.graphdef, self.mcfg, eos_id=key, pad_id=self.tokenizer.pad_token_id,
                prompt_buckets=self.prompt_buckets, max_new_tokens=self.max_new_tokens,
                mesh=self.mesh)
        return self._samplers[key]

    def generate(self, rows: list[list[int]], sp: dict) -> list[dict]:
        temperature = float(sp.get("temperature", 1.0))
        greedy = temperature < 1e-5
        max_new = int(sp.get("max_new_tokens") or 128)
        seed = sp.get("sampling_seed")
        seed = int(seed) if seed is not None else int(np.random.randint(2**31))
        with self.lock:
            sampler = self.sampler(sp.get("stop_token_ids"))
            res = sampler.sample(self.params, rows, 1, seed=seed,
                                 temperature=1.0 if greedy else temperature,
                                 top_p=float(sp.get("top_p", 1.0)),
                                 sample_top_k=top_k(sp), greedy=greedy,
                                 max_new_tokens=max_new)
        out = []
        for i, row in enumerate(rows):
            k = int(res.lengths[i])
            ids = res.tokens[i, :k].tolist()
            if res.finished[i]:
                reason = {"type": "stop", "matched": ids[-1]}
            else:
                reason = {"type": "length", "length": k}
            out.append({"output_ids": ids, "meta_info": {
                "id": uuid.uuid4().hex, "finish_reason": reason, "prompt_tokens": len(row),
                "completion_tokens": k,
                "output_token_logprobs": [[float(lp), t, None]
                                          for lp, t in zip(res.logps[i, :k].tolist(), ids,
                                                             strict=True)],
                "output_token_entropy": res.entropies[i, :k].tolist()}})
        return out


def top_k(sp: dict) -> int:
    """The sampling top-k of SGLang sampling params: -1 (off) when absent or null; ValueError
    for 0 or below -1 (SGLang's SamplingParams.verify refuses those)."""
    k = sp.get("top_k")
    if k is None:
        return -1
    if isinstance(k, bool) or not isinstance(k, int) or (k < 1 and k != -1):
        raise ValueError(f"top_k must be -1 (disable) or at least 1, got {k!r}")
    return k


def make_app(policy: Policy):
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse
    from starlette.routing import Route

    def bad(msg: str) -> JSONResponse:
        return JSONResponse({"error": {"message": msg}}, status_code=400)

    async def generate(request: Request):
        try:
            body = await request.json()
        except ValueError:
            return bad("the body is not JSON")
        ids = body.get("input_ids")
        if not ids:
            return bad("input_ids is required (this server runs without a tokenizer)")
        single = isinstance(ids[0], int)
        rows = [ids] if single else [list(r) for r in ids]
        sp = body.get("sampling_params") or {}
        if isinstance(sp, list):
            if len(sp) != len(rows):
                return bad(f"{len(sp)} sampling_params for {len(rows)} rows")
            first = sp[0].get("sampling_seed")
            for i, s in enumerate(sp):
                seed = s.get("sampling_seed")
                if ({**s, "sampling_seed": None} != {**sp[0], "sampling_seed": None}
                        or (first is None) != (seed is None)
                        or (first is not None and seed != first + i)):
                    return bad("per-row sampling_params must be equal but for sampling_seed "
                               "s, s+1, ... here (the batch is sampled from one key)")
            sp = sp[0]
        try:
            top_k(sp)
        except ValueError as e:
            return bad(str(e))
        n = int(sp.get("n", 1))
        if n > 1:
            if single:
                return bad("n > 1 needs a batch of input_ids")
            rows = rows * n  # SGLang's parallel sampling order: the whole batch, n times
        out = await run_in_threadpool(policy.generate, rows, sp)
        return JSONResponse(out[0] if single and n == 1 else out)

    async def update_weights(request: Request):
        body = await request.json()
        path = body.get("model_path", "")
        try:  # no cache to flush after it (SGLang flushes its radix cache here)
            await run_in_threadpool(policy.load, path)
        except (OSError, ValueError, KeyError) as e:
            return JSONResponse({"success": False, "message": f"{type(e).__name__}: {e}"},
                                status_code=400)
        return JSONResponse({"success": True, "message": f"loaded {path}",
                             "num_paused_requests": 0})

    async def flush_cache(request: Request):
        return PlainTextResponse("Cache flushed.\n")

    async def health(request: Request):
        return PlainTextResponse("")

    async def health_generate(request: Request):
        await run_in_threadpool(policy.generate, [[policy.stop_ids[0]]],
                                {"max_new_tokens": 1, "temperature": 0})
        return PlainTextResponse("")

    async def model_info(request: Request):
        return JSONResponse({"model_path": policy.path, "tokenizer_path": policy.path,
                             "is_generation": True})

    async def chat(request: Request):
        from frontier_rl.rollout.context import decode_responses, encode_prompt

        body = await request.json()
        msgs = body.get("messages") or []
        text = "\n".join(str(m.get("content", "")) for m in msgs)
        sp = {"temperature": float(body.get("temperature", 1.0)),
              "top_p": float(body.get("top_p", 1.0)),
              "max_new_tokens": int(body.get("max_tokens") or policy.max_new_tokens),
              "sampling_seed": body.get("seed")}
        ids = encode_prompt(policy.tokenizer, text)
        out = (await run_in_threadpool(policy.generate, [ids], sp))[0]
        k = len(out["output_ids"])
        stop = out["meta_info"]["finish_reason"]["type"] == "stop"
        from frontier_rl.rollout.sampler import SampleResult

        res = SampleResult(tokens=np.array([out["output_ids"] or [0]]), logps=np.zeros((1, 1)),
                           entropies=np.zeros((1, 1)), lengths=np.array([k]),
                           finished=np.array([stop]))
        content = decode_responses(policy.tokenizer, res)[0]
        return JSONResponse({
            "id": uuid.uuid4().hex, "object": "chat.completion", "model": policy.path,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop" if stop else "length"}],
            "usage": {"prompt_tokens": len(ids), "completion_tokens": k,
                      "total_tokens": len(ids) + k}})

    return Starlette(routes=[
        Route("/generate", generate, methods=["POST"]),
        Route("/update_weights_from_disk", update_weights, methods=["POST"]),
        Route("/flush_cache", flush_cache, methods=["GET", "POST"]),
        Route("/health", health, methods=["GET"]),
        Route("/health_generate", health_generate, methods=["GET"]),
        Route("/get_model_info", model_info, methods=["GET"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
    ])


def model_dir(model: str | None, workdir: str | None) -> str:
    """The HF directory to serve: --model, or a run's newest checkpoint (exported to a temporary
    directory), or its warm start when it has no checkpoint yet."""
    if model:
        return model
    if not workdir:
        raise ValueError("serve needs --model=HF_DIR or --workdir=RUN_DIR")
    from frontier_rl import policy as policy_lib
    from frontier_rl.run import checkpoint

    ckpts = checkpoint.Checkpointer(os.path.join(workdir, "checkpoints"))
    steps = ckpts.all_steps()
    ckpts.close()
    if steps:
        return policy_lib.export_run(workdir, os.path.join(tempfile.mkdtemp(), "policy"))
    ws = os.path.join(workdir, "warmstart")
    if os.path.isfile(os.path.join(ws, "config.json")):
        return ws
    raise FileNotFoundError(f"{workdir} has neither checkpoints nor a warm start to serve")


def main(model: str | None, workdir: str | None, port: int, host: str = "127.0.0.1") -> None:
    import uvicorn

    policy = Policy(model_dir(model, workdir))
    print(f"serving {policy.path} on http://{host}:{port}", flush=True)
    uvicorn.run(make_app(policy), host=host, port=port, log_level="warning")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(model: str, timeout: float = 300.0,
          cores: set[int] | None = None) -> tuple[subprocess.Popen, str]:
    """`frontier-rl serve --model=MODEL` in a subprocess on a free port, once it answers
    /health: (the process, its URL). `cores`: the CPU cores it may run on (set before it
    starts, so XLA sizes its thread pool to them). The caller kills the process."""
    import httpx

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "frontier_rl", "serve", f"--model={model}",
                             f"--port={port}"], stdout=subprocess.DEVNULL,
                            preexec_fn=None if cores is None
                            else (lambda: os.sched_setaffinity(0, cores)))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"frontier-rl serve --model={model} exited ({proc.returncode})")
        try:
            if httpx.get(url + "/health", timeout=2.0).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError(f"frontier-rl serve --model={model} did not answer /health in "
                       f"{timeout:.0f} s")
