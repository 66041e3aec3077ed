"""The SGLang client against SGLang's own request definitions, at both ends of the version range
launch/sglang_server.sh pins: the wheels are downloaded without dependencies (into
.cache/sglang-wheels, once) and read as source with `ast`, never imported into the trainer's
environment. What the client sends is recorded from a run of it against a stand-in server, so
the check follows the client's code rather than a list kept beside it:

* every /generate field and every sampling_params key it sends (top_k included) is defined by
  SGLang (`io_struct.GenerateReqInput`, `sampling_params.SamplingParams`), and it sends every
  field those define without a default;
* the weight update's body matches `io_struct.UpdateWeightFromDiskReqInput` likewise;
* every path it calls is a route of `entrypoints/http_server.py`.
"""

import ast
import glob
import os
import re
import subprocess
import sys
import zipfile

import pytest
from engine_testlib import FakeSGLang, Server

from frontier_rl.rollout.engine import Sampling
from frontier_rl.rollout.sglang import SGLangEngine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, ".cache", "sglang-wheels")
SRT = "sglang/srt/"


def pinned_range() -> tuple[str, str]:
    with open(os.path.join(ROOT, "launch", "sglang_server.sh")) as f:
        text = f.read()
    m = re.search(r"sglang\[all\]>=([\d.]+),<=([\d.]+)", text)
    assert m, "launch/sglang_server.sh pins no sglang[all]>=LO,<=HI range"
    return m.group(1), m.group(2)


def wheel(version: str) -> str:
    """The sglang wheel of `version` (CPython 3.11, manylinux x86-64 where it is not pure)."""
    found = glob.glob(os.path.join(CACHE, f"sglang-{version}-*.whl"))
    if not found:
        os.makedirs(CACHE, exist_ok=True)
        r = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", f"sglang=={version}", "--no-deps",
             "--only-binary=:all:", "--python-version", "3.11", "--platform",
             "manylinux_2_34_x86_64", "-d", CACHE], capture_output=True, text=True, timeout=600)
        found = glob.glob(os.path.join(CACHE, f"sglang-{version}-*.whl"))
        if not found:
            pytest.skip(f"could not download sglang=={version} (no package index?): "
                        f"{r.stderr.strip()[-300:]}")
    return found[0]


def module(whl: str, path: str) -> ast.Module:
    with zipfile.ZipFile(whl) as z:
        return ast.parse(z.read(SRT + path).decode())


def fields(tree: ast.Module, name: str) -> tuple[set[str], set[str]]:
    """(all fields, fields without a default) of class `name`: its annotated attributes (a
    dataclass or msgspec Struct, with those of its bases in the same module) or, for a class
    with its own __init__, that method's parameters."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    cls = classes[name]
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"),
                None)
    if init is not None:
        args = init.args.args[1:] + init.args.kwonlyargs
        n_defaults = len(init.args.defaults)
        positional = init.args.args[1:]
        required = {a.arg for a in positional[:len(positional) - n_defaults]}
        required |= {a.arg for a, d in zip(init.args.kwonlyargs, init.args.kw_defaults,
                                           strict=True) if d is None}
        return {a.arg for a in args}, required
    every, required = set(), set()
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in classes:
            b_all, b_req = fields(tree, base.id)
            every |= b_all
            required |= b_req
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if "ClassVar" in ast.unparse(node.annotation):
                continue
            every.add(node.target.id)
            if node.value is None:
                required.add(node.target.id)
    return every, required


def routes(tree: ast.Module) -> set[str]:
    """Paths of the HTTP server's route decorators (@app.get / post / api_route("/path"))."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                if (isinstance(d, ast.Call) and d.args and isinstance(d.args[0], ast.Constant)
                        and isinstance(d.args[0].value, str)):
                    out.add(d.args[0].value)
    return out


@pytest.fixture(scope="module")
def sent(tmp_path_factory):
    """The requests the client makes in a generate call (several prompts, n copies, greedy and
    sampled) and a weight sync, recorded by a stand-in server."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, PlainTextResponse
    from starlette.routing import Route

    fake = FakeSGLang()
    posts = []

    async def record(request):
        body = await request.body()
        posts.append((request.url.path, await request.json() if body else None))
        if request.url.path == "/update_weights_from_disk":
            return JSONResponse({"success": True, "message": "ok", "num_paused_requests": 0})
        return PlainTextResponse("Cache flushed.\n")

    async def generate(request):
        posts.append(("/generate", await request.json()))
        return await fake._generate(request)

    app = Starlette(routes=[Route("/generate", generate, methods=["POST"]),
                            Route("/update_weights_from_disk", record, methods=["POST"]),
                            Route("/flush_cache", record, methods=["POST"])])
    server = Server(app)
    root = tmp_path_factory.mktemp("conformance")
    try:
        eng = SGLangEngine(server.url, pad_id=0, stop_ids=[3, 2], max_new_tokens=5,
                           sync_dir=str(root), export_fn=lambda params, path: path,
                           timeout=30.0, deadline=60.0, retries=2, backoff=0.01, max_rows=4)
        eng.generate([[1, 5, 6], [1, 7]], 3, Sampling(temperature=0.7, top_p=0.9, top_k=50,
                                                        seed=5))
        eng.generate([[1, 5]], 1, Sampling(greedy=True, max_new_tokens=2, seed=1))
        eng.sync(params=None, step=1)
        eng.close()
    finally:
        server.stop()
    return posts


def test_the_pinned_range_is_what_the_client_docstring_names():
    import frontier_rl.rollout.sglang as client

    lo, hi = pinned_range()
    assert f"SGLang\n{lo}-{hi}" in client.__doc__ or f"SGLang {lo}-{hi}" in client.__doc__


@pytest.mark.allow_skip("downloads the pinned sglang wheels once (needs the package index); "
                        "they are cached in .cache/sglang-wheels")
@pytest.mark.parametrize("end", ["oldest", "newest"])
def test_client_requests_conform_to_the_pinned_sglang(sent, end):
    lo, hi = pinned_range()
    whl = wheel(lo if end == "oldest" else hi)
    io = module(whl, "managers/io_struct.py")
    gen_all, gen_req = fields(io, "GenerateReqInput")
    sp_all, sp_req = fields(module(whl, "sampling/sampling_params.py"), "SamplingParams")
    upd_all, upd_req = fields(io, "UpdateWeightFromDiskReqInput")
    paths = routes(module(whl, "entrypoints/http_server.py"))
    assert {"input_ids", "sampling_params", "return_logprob"} <= gen_all  # the parser works
    assert "sampling_seed" in sp_all and upd_req == {"model_path"}

    generates = [body for path, body in sent if path == "/generate"]
    updates = [body for path, body in sent if path == "/update_weights_from_disk"]
    assert len(generates) == 3 and len(updates) == 1  # 6 rows in requests of 4, then greedy
    for path, _ in sent:
        assert path in paths, f"{path} is not a route of SGLang {whl}"
    for body in generates:
        assert set(body) <= gen_all, f"/generate fields SGLang lacks: {set(body) - gen_all}"
        assert gen_req <= set(body), f"/generate omits required {gen_req - set(body)}"
        rows = body["sampling_params"]
        assert isinstance(rows, list) and len(rows) == len(body["input_ids"])
        for sp in rows:
            assert set(sp) <= sp_all, f"sampling_params keys SGLang lacks: {set(sp) - sp_all}"
            assert sp_req <= set(sp)
            assert sp["top_k"] == -1 or sp["top_k"] >= 1  # SamplingParams.verify refuses 0
        seeds = [sp["sampling_seed"] for sp in rows]
        assert len(set(seeds)) == len(seeds)  # the copies of a prompt never share a seed
    for body in updates:
        assert set(body) <= upd_all and upd_req <= set(body)
