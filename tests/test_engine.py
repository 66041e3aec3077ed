"""The rollout engines: the JAX engine is the sampler, `frontier-rl serve` speaks SGLang's
protocol and gives the sampler's exact tokens, and the SGLang client survives the faults the issue
names (a server killed and restarted, garbage / 500 / hangs, a server keeping old weights)."""

import asyncio
import re
import threading
import time

import jax
import numpy as np
import pytest
from engine_testlib import FakeSGLang, Server
from flax import nnx
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from frontier_rl import export
from frontier_rl.models import Transformer
from frontier_rl.rollout import serve
from frontier_rl.rollout.engine import EngineError, JaxEngine, Sampling
from frontier_rl.rollout.sglang import SGLangEngine

PROMPTS = [[1, 5, 6, 7], [1, 8, 9], [1, 10, 11, 12, 13]]


@pytest.fixture(scope="module")
def dirs(tiny_policy, tokenizer, tmp_path_factory):
    """Two HF directories of the same architecture: weights A and weights B."""
    cfg, graphdef, params = tiny_policy
    root = tmp_path_factory.mktemp("engine")
    other = nnx.split(Transformer(cfg, rngs=nnx.Rngs(1)), nnx.Param)[1]
    a = export.export_params(graphdef, params, cfg, tokenizer, str(root / "a"))
    b = export.export_params(graphdef, other, cfg, tokenizer, str(root / "b"))
    return a, b, root


@pytest.fixture(scope="module")
def served(dirs):
    policy = serve.Policy(dirs[0])
    server = Server(serve.make_app(policy))
    yield policy, server
    server.stop()


def client(url, policy, root, **kw) -> SGLangEngine:
    def export_fn(params, path):
        return export.export_params(policy.graphdef, params, policy.mcfg, policy.tokenizer, path)

    def probe_fn(params, prompt, response):
        res = policy.sampler(None)  # the reference: the sampler's own log-probs of `response`
        out = res.sample(params, [prompt], 1, seed=0, max_new_tokens=len(response))
        return out.logps[0, :len(response)]

    opts = dict(pad_id=policy.tokenizer.pad_token_id, stop_ids=policy.stop_ids,
                max_new_tokens=6, sync_dir=str(root / "sync"), export_fn=export_fn,
                probe_fn=probe_fn, probe_ids=PROMPTS[0], probe_tol=1e-4, timeout=30.0,
                deadline=60.0, retries=4, backoff=0.05)
    opts.update(kw)
    return SGLangEngine(url, **opts)


def test_jax_engine_is_the_sampler(served):
    policy, _ = served
    sampler = policy.sampler(None)
    ref = sampler.sample(policy.params, PROMPTS, 2, seed=3, temperature=0.7, top_p=0.9)
    eng = JaxEngine(sampler)
    eng.sync(policy.params, 0)
    got = eng.generate(PROMPTS, 2, Sampling(temperature=0.7, top_p=0.9, seed=3))
    for f in ("tokens", "logps", "lengths", "finished"):
        np.testing.assert_array_equal(getattr(got, f), getattr(ref, f))


def test_served_tokens_equal_the_sampler(served, dirs):
    policy, server = served
    ref = policy.sampler(None).sample(policy.params, PROMPTS, 2, seed=5, max_new_tokens=6)
    eng = client(server.url, policy, dirs[2])
    assert eng.health()
    got = eng.generate(PROMPTS, 2, Sampling(seed=5))
    np.testing.assert_array_equal(got.tokens, ref.tokens)
    np.testing.assert_array_equal(got.lengths, ref.lengths)
    np.testing.assert_array_equal(got.finished, ref.finished)
    np.testing.assert_allclose(got.logps, ref.logps, atol=1e-6)
    assert eng.counters["requests"] == 1 and eng.counters["retries"] == 0


def test_served_per_row_seeds_are_one_key(served):
    """The client's per-row seeds s, s+1, ... sample the batch from key s (the embedded
    sampler's rows); seeds that are not such a run are refused, not silently merged."""
    import httpx

    policy, server = served
    ref = policy.sampler(None).sample(policy.params, PROMPTS, 1, seed=9, max_new_tokens=4)
    sp = {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 4, "n": 1}
    body = {"input_ids": PROMPTS, "return_logprob": True,
            "sampling_params": [{**sp, "sampling_seed": 9 + i} for i in range(3)]}
    r = httpx.post(f"{server.url}/generate", json=body, timeout=60)
    assert r.status_code == 200
    assert [row["output_ids"] for row in r.json()] == [
        ref.tokens[i, :ref.lengths[i]].tolist() for i in range(3)]
    body["sampling_params"] = [{**sp, "sampling_seed": 9} for _ in range(3)]
    r = httpx.post(f"{server.url}/generate", json=body, timeout=60)
    assert r.status_code == 400 and "sampling_seed" in r.text


def test_served_top_k_is_the_samplers(served):
    """SGLang's top_k reaches the sampler: the served tokens are the embedded sampler's at the
    same seed and top-k (which differ from its draws without one); 0 is refused with a 400, as
    SGLang refuses it."""
    import httpx

    policy, server = served
    sampler = policy.sampler(None)
    ref = sampler.sample(policy.params, PROMPTS, 1, seed=9, max_new_tokens=4, sample_top_k=2)
    plain = sampler.sample(policy.params, PROMPTS, 1, seed=9, max_new_tokens=4)
    assert not np.array_equal(ref.tokens, plain.tokens)
    sp = {"temperature": 1.0, "top_p": 1.0, "top_k": 2, "max_new_tokens": 4, "n": 1}
    body = {"input_ids": PROMPTS, "return_logprob": True,
            "sampling_params": [{**sp, "sampling_seed": 9 + i} for i in range(3)]}
    r = httpx.post(f"{server.url}/generate", json=body, timeout=120)
    assert r.status_code == 200
    assert [row["output_ids"] for row in r.json()] == [
        ref.tokens[i, :ref.lengths[i]].tolist() for i in range(3)]
    body["sampling_params"] = {**sp, "top_k": 0, "sampling_seed": 9}
    r = httpx.post(f"{server.url}/generate", json=body, timeout=60)
    assert r.status_code == 400 and "top_k must be -1 (disable) or at least 1" in r.text


def test_sync_loads_and_probe_passes(served, dirs):
    policy, server = served
    b = jax.tree.map(np.asarray, serve.Policy(dirs[1]).params)
    eng = client(server.url, policy, dirs[2])
    try:
        eng.sync(b, 1)
        assert eng.counters["probe_abs_diff"] < 1e-4 and eng.synced_step == 1
    finally:
        policy.load(dirs[0])


def test_stale_server_is_caught_by_the_probe(served, dirs):
    """A server that answers success to update_weights_from_disk but keeps the old weights."""
    policy, server = served

    async def fake_update(request):
        return JSONResponse({"success": True, "message": "ok", "num_paused_requests": 0})

    app = serve.make_app(policy)
    app.router.routes.insert(0, Route("/update_weights_from_disk", fake_update,
                                      methods=["POST"]))
    stale = Server(app)
    b = serve.Policy(dirs[1]).params
    try:
        eng = client(stale.url, policy, dirs[2])
        with pytest.raises(EngineError, match="not serving the synced policy"):
            eng.sync(b, 1)
    finally:
        stale.stop()


@pytest.mark.parametrize("offset,ok", [(0.02, True), (0.2, False)])
def test_default_probe_tolerance_passes_bf16_noise_and_catches_other_weights(served, dirs,
                                                                            offset, ok):
    """At rollout.probe_tol's default, an engine whose log-probs sit 0.02 nats/token from the
    trainer's (bf16 kernels: ~0.011 measured) passes; 0.2 (other weights: tiny random models
    differ by ~0.14) stops the run."""
    from frontier_rl import config_lib

    policy, server = served
    tol = config_lib.default_config().rollout.probe_tol
    base = client(server.url, policy, dirs[2])

    def shifted(params, prompt, response):
        return np.asarray(base.probe_fn(params, prompt, response)) + offset

    eng = client(server.url, policy, dirs[2], probe_fn=shifted, probe_tol=tol)
    a = jax.tree.map(np.asarray, policy.params)
    if ok:
        eng.sync(a, 1)
        assert eng.counters["probe_abs_diff"] == pytest.approx(offset, abs=1e-4)
    else:
        with pytest.raises(EngineError, match=f"rollout.probe_tol={tol}"):
            eng.sync(a, 1)


def _bad_server(fault, seen):
    async def generate(request):
        seen.append(1)
        if fault == "500":
            return PlainTextResponse("boom", status_code=500)
        if fault == "garbage":
            return PlainTextResponse("<html>not json")
        if fault == "short":  # JSON, but one result for three rows
            return JSONResponse([{"output_ids": [1], "meta_info": {}}])
        await asyncio.sleep(2.0)  # hang past the client's timeout
        return JSONResponse([])

    return Server(Starlette(routes=[Route("/generate", generate, methods=["POST"])]))


@pytest.mark.parametrize("fault", ["500", "garbage", "hang", "short"])
def test_bad_server_fails_after_the_retries(fault, served, dirs):
    policy, _ = served
    seen = []
    bad = _bad_server(fault, seen)
    eng = client(bad.url, policy, dirs[2], timeout=0.3 if fault == "hang" else 30.0,
                 deadline=60.0, retries=3)
    try:
        with pytest.raises(EngineError, match="failed 3 times"):
            eng.generate(PROMPTS, 1, Sampling())
    finally:
        bad.stop()
    assert len(seen) == 3 and eng.counters["requests"] == 3
    assert eng.counters["retries"] == 2 and eng.counters["failures"] == 1
    key = {"500": "server_errors", "garbage": "malformed", "hang": "timeouts",
           "short": "malformed"}[fault]
    assert eng.counters[key] == 3


def test_hanging_server_fails_at_the_deadline(served, dirs):
    """retries=100 but deadline=1 s with requests timing out at 0.3 s: the deadline ends the
    retries after at most 3 attempts (a 4th could not start before it), whatever the load."""
    policy, _ = served
    seen = []
    bad = _bad_server("hang", seen)
    eng = client(bad.url, policy, dirs[2], timeout=0.3, deadline=1.0, retries=100)
    try:
        with pytest.raises(EngineError, match=r"retries=100, deadline=1.0s\); last error: "
                                              r"ReadTimeout") as err:
            eng.generate(PROMPTS, 1, Sampling())
    finally:
        bad.stop()
    attempts = int(re.search(r"failed (\d+) times", str(err.value)).group(1))
    assert 1 <= attempts <= 3 and eng.counters["requests"] == attempts
    assert eng.counters["timeouts"] == attempts and eng.counters["failures"] == 1


def test_transient_500_is_retried(served, dirs):
    policy, server = served
    calls = []
    app = serve.make_app(policy)
    real = next(r for r in app.router.routes if r.path == "/generate").endpoint

    async def flaky(request):
        calls.append(1)
        if len(calls) == 1:
            return PlainTextResponse("busy", status_code=503)
        return await real(request)

    app.router.routes.insert(0, Route("/generate", flaky, methods=["POST"]))
    srv = Server(app)
    try:
        eng = client(srv.url, policy, dirs[2])
        got = eng.generate(PROMPTS, 1, Sampling(seed=2))
    finally:
        srv.stop()
    ref = policy.sampler(None).sample(policy.params, PROMPTS, 1, seed=2, max_new_tokens=6)
    np.testing.assert_array_equal(got.tokens, ref.tokens)
    assert eng.counters["retries"] == 1 and eng.counters["server_errors"] == 1


def test_killed_server_restarted_gets_the_synced_weights_again(dirs):
    """The server dies after a sync to weights B and comes back serving its start weights A:
    the client reloads B before the next generate, so the tokens are B's."""
    a, b_dir, root = dirs
    policy = serve.Policy(a)
    srv = Server(serve.make_app(policy))
    b = serve.Policy(b_dir).params
    eng = client(srv.url, policy, root, deadline=60.0, retries=10, backoff=0.2)
    eng.sync(b, 1)
    ref = eng.generate(PROMPTS, 2, Sampling(seed=9))
    srv.stop()
    policy.load(a)  # what a restarted `frontier-rl serve --model=A` serves

    def restart():
        time.sleep(0.5)
        srv.start()

    threading.Thread(target=restart).start()
    got = eng.generate(PROMPTS, 2, Sampling(seed=9))
    srv.stop()
    assert eng.counters["connection_errors"] >= 1 and eng.counters["reloads"] >= 1
    np.testing.assert_array_equal(got.tokens, ref.tokens)
    np.testing.assert_allclose(got.logps, ref.logps, atol=1e-6)


def test_heapa_http_teacher_talks_to_serve(served):
    """HeaPA's teacher (httpx) against `frontier-rl serve`'s chat endpoint: the envelope comes
    back well-formed; a random policy's reply in it is no JSON verdict (malformed_json, a
    content fault), not a transport fault (connection_error, timeout, http_error,
    malformed_response)."""
    from frontier_rl.selection.heapa.augment import Candidate
    from frontier_rl.selection.heapa.teacher import HttpTeacher, TeacherError

    _, server = served
    teacher = HttpTeacher(server.url + "/v1", model="policy", api_key_env="", timeout_s=30.0,
                          max_tokens=8)
    cand = Candidate(cid=0, parent="p", text="3+4", original="1+2", d=1.0, est=0.5, step=1)
    try:
        with pytest.raises(TeacherError) as err:
            teacher(cand)
    finally:
        teacher.close()
    assert err.value.reason == "malformed_json"


def test_jax_engine_rows_per_call_splits_whole_prompts(served):
    """rollout.rows_per_call: the rows come from consecutive sampler calls of whole prompts,
    the first with the call's seed; within the cap it is the one sampler call."""
    from frontier_rl.rollout.engine import generate

    policy, _ = served
    sampler = policy.sampler(None)
    sampling = Sampling(temperature=0.7, seed=3)
    split = JaxEngine(sampler, policy.params, rows_per_call=5)  # 2 prompts x 2 rows per call
    got = split.generate(PROMPTS, 2, sampling)
    assert len(got.parts) == 2 and [len(p.lengths) for p in got.parts] == [4, 2]
    first = sampler.sample(policy.params, PROMPTS[:2], 2, seed=3, temperature=0.7)
    second = sampler.sample(policy.params, PROMPTS[2:], 2, temperature=0.7,
                            seed=int(np.random.SeedSequence([3, 1]).generate_state(1)[0]))
    for f in ("tokens", "logps", "entropies", "lengths", "finished", "prompt_lens"):
        np.testing.assert_array_equal(getattr(got, f), np.concatenate(
            [getattr(first, f), getattr(second, f)]))
    whole = JaxEngine(sampler, policy.params, rows_per_call=6).generate(PROMPTS, 2, sampling)
    ref = sampler.sample(policy.params, PROMPTS, 2, seed=3, temperature=0.7)
    assert whole.parts == () and whole.shape == ref.shape
    np.testing.assert_array_equal(whole.tokens, ref.tokens)
    # evaluation's helper keeps the engine's cap, with the parameters it is given
    via = generate(JaxEngine(sampler, None, rows_per_call=5), policy.params, PROMPTS, 2,
                   sampling)
    np.testing.assert_array_equal(via.tokens, got.tokens)


# -- PolicyContext.rollout: rows, prompts and outcomes line up ------------------------------------

G = 4
# The verifier's answer for sample j of prompt i: q0 all right (easy), q1 all wrong (hard), q2
# all invalid, q3 and q4 mixed (q4 wrong and invalid: none of the zero-variance types).
CONTEXT_OUTCOMES = [[1, 1, 1, 1], [0, 0, 0, 0], [-1, -1, -1, -1], [1, 0, -1, 1], [0, -1, 0, 0]]


def _context(tokenizer, verify_many=None):
    from engine_testlib import ScriptedEngine

    from frontier_rl.rollout.context import PolicyContext
    from frontier_rl.tasks import Prompt

    prompts = [Prompt(f"q{i}", f"{i}=", "", "x") for i in range(5)]
    # sample j of prompt i answers "<i><j>"; q3's sample 2 runs to the cap of 6 tokens
    script = {p.text: [(f"{i}{j}", True) for j in range(G)] for i, p in enumerate(prompts)}
    script["3="][2] = ("320000", False)
    seen = []

    def verify(p, text, finished):
        seen.append((p.id, text, finished))
        i = int(p.id[1:])
        assert text[0] == str(i), f"{p.id} was given {text!r}, a response to another prompt"
        return CONTEXT_OUTCOMES[i][int(text[1])]

    ctx = PolicyContext(sampler=None, tokenizer=tokenizer, prompts=prompts, verify=verify,
                        shape_rewards=lambda o, lengths: o - 0.01 * lengths, group_size=G,
                        batch_size=2, temperature=0.9, top_p=0.95, seed=11,
                        flops_per_token=2.0, verify_many=verify_many,
                        engine=ScriptedEngine(tokenizer, script))
    return ctx, seen


def _seed(run_seed, step, call):
    return int(np.random.SeedSequence([run_seed, step, call]).generate_state(1)[0])


def test_rollout_lines_up_rows_prompts_and_outcomes(tokenizer):
    ctx, seen = _context(tokenizer)
    ctx.begin_step(3, params=None)
    groups = ctx.rollout([3, 0, 4, 2], G)  # out of index order; q1 not rolled
    assert [g.index for g in groups] == [3, 0, 4, 2]
    assert [g.prompt_id for g in groups] == ["q3", "q0", "q4", "q2"]
    lengths = {3: [3, 3, 6, 3], 0: [3] * 4, 4: [3] * 4, 2: [3] * 4}  # "<i><j>" + EOS
    for row0, g in zip(range(0, 16, G), groups, strict=True):
        i = g.index
        assert g.outcomes.dtype == np.int8 and g.outcomes.tolist() == CONTEXT_OUTCOMES[i]
        assert g.lengths.tolist() == lengths[i]
        # the shaping sees each row's own outcome and length
        np.testing.assert_allclose(g.rewards, np.array(CONTEXT_OUTCOMES[i]) - 0.01 * np.array(
            lengths[i]), rtol=1e-6)
        want_texts = [f"{i}{j}" for j in range(G)]
        if i == 3:
            want_texts[2] = "320000"
        assert g.texts == want_texts
        np.testing.assert_allclose(g.mean_entropy, 0.25 * np.arange(row0 + 1, row0 + G + 1))
        for j in range(G):  # the token rows are the texts' (EOS after a finished one)
            toks = tokenizer.encode(want_texts[j], add_special_tokens=False)
            if (i, j) != (3, 2):
                toks.append(tokenizer.eos_token_id)
            assert g.tokens[j, :len(toks)].tolist() == toks
            np.testing.assert_allclose(g.logps[j, :len(toks)], -0.25 * (row0 + j + 1))
    # the verifier saw each row with its own prompt and finish flag, prompt-major
    assert seen == [(f"q{i}", t, not (i == 3 and j == 2))
                    for i, g in zip([3, 0, 4, 2], groups, strict=True)
                    for j, t in enumerate(g.texts)]
    # one engine call at the rollout temperature / top-p, seeded by (run seed, step, call 1)
    (texts, n, sampling), = ctx.engine.calls
    assert texts == ["3=", "0=", "4=", "2="] and n == G
    assert sampling == Sampling(temperature=0.9, top_p=0.95, seed=_seed(11, 3, 1))
    # 16 responses of 15 x 3 + 6 tokens; prompts of BOS + 2 tokens, each rolled G times;
    # 2 FLOPs per token
    c = ctx.counters
    assert (c["rollouts"], c["response_tokens"], c["prompt_tokens"]) == (16, 51, 48)
    assert c["rollout_flops"] == 2.0 * (51 + 48) and c["verify_timeouts"] == 0
    # q0 easy, q2 invalid, q3 and q4 neither; correct counts 2, 4, 0, 0 of G
    m = ctx.rolled.metrics()
    assert m["rollout/rolled_groups"] == 4.0
    assert (m["rollout/rolled_zero_var_easy"], m["rollout/rolled_zero_var_hard"],
            m["rollout/rolled_zero_var_invalid"]) == (0.25, 0.0, 0.25)
    assert [m[f"rollout/rolled_pass_hist/{k}"] for k in range(G + 1)] == [0.5, 0, 0.25, 0, 0.25]

    # A second call in the step: the next seed, n = 2 (q1 hard, binned by pass rate).
    (g1,) = ctx.rollout([1], 2)
    assert g1.outcomes.tolist() == [0, 0] and g1.texts == ["10", "11"]
    assert ctx.engine.calls[-1][2].seed == _seed(11, 3, 2)
    m = ctx.rolled.metrics()
    assert m["rollout/rolled_groups"] == 5.0 and m["rollout/rolled_zero_var_hard"] == 0.2
    assert m["rollout/rolled_pass_hist/0"] == pytest.approx(3 / 5)
    # the next step starts its calls and its rolled groups afresh
    ctx.begin_step(4, params=None)
    ctx.rollout([0], G)
    assert ctx.engine.calls[-1][2].seed == _seed(11, 4, 1)
    assert ctx.rolled.metrics()["rollout/rolled_groups"] == 1.0
    assert ctx.rollout([], G) == [] and len(ctx.engine.calls) == 3


def test_rollout_through_verify_many_counts_its_timeouts(tokenizer):
    calls = []

    def verify_many(rows, texts, finished):
        calls.append([p.id for p in rows])
        return [CONTEXT_OUTCOMES[int(p.id[1:])][int(t[1])]
                for p, t in zip(rows, texts, strict=True)], 2

    ctx, seen = _context(tokenizer, verify_many=verify_many)
    ctx.begin_step(1, params=None)
    groups = ctx.rollout([4, 1], G)
    assert calls == [["q4"] * G + ["q1"] * G] and seen == []
    assert [g.outcomes.tolist() for g in groups] == [CONTEXT_OUTCOMES[4], CONTEXT_OUTCOMES[1]]
    ctx.rollout([0], 1)
    assert ctx.counters["verify_timeouts"] == 4


# -- the SGLang client's protocol branches, against a fake SGLang ---------------------------------


def _fake_client(url, tmp_path, **kw):
    opts = dict(pad_id=0, stop_ids=[3, 2], max_new_tokens=5, sync_dir=str(tmp_path),
                timeout=30.0, deadline=60.0, retries=2, backoff=0.01)
    opts.update(kw)
    return SGLangEngine(url, **opts)


def _fake_answer(prompts, n, sampling, max_rows, max_new):
    """What the client must return from FakeSGLang, row by row, worked out from its rule."""
    rows = [p for p in prompts for _ in range(n)]
    out = []
    for c in range(0, len(rows), max_rows):
        out += [FakeSGLang.answer(p, r, {"max_new_tokens": max_new, "stop_token_ids": [3, 2],
                                         "sampling_seed": sampling.seed + c + r})
                for r, p in enumerate(rows[c:c + max_rows])]
    return out


@pytest.mark.parametrize("max_rows", [4, 64])
def test_sglang_client_requests_rows_and_chunks(max_rows, tmp_path):
    """3 prompts x n=2: each prompt sent n times with n=1, prompt-major, in requests of at most
    max_rows rows, row r of the call seeded seed + r (no two copies of a prompt share a seed);
    the answers' ids, log-probs, lengths and finish reasons land in the rows they belong to,
    padded to the cap. The sampling top-k goes out as SGLang's top_k, -1 when off or greedy."""
    fake = FakeSGLang()
    srv = Server(fake.app)
    try:
        eng = _fake_client(srv.url, tmp_path, max_rows=max_rows)
        sampling = Sampling(temperature=0.7, top_p=0.9, top_k=50, seed=40)
        got = eng.generate(PROMPTS, 2, sampling)
        greedy = eng.generate(PROMPTS[:1], 1, Sampling(greedy=True, top_k=50, max_new_tokens=3,
                                                       seed=1))
        eng.generate(PROMPTS[:1], 1, Sampling(max_new_tokens=3, seed=2))
    finally:
        srv.stop()
    rows = [p for p in PROMPTS for _ in range(2)]
    # the requests of one call go out concurrently: in the order of their seeds
    sent = sorted(fake.requests[:-2], key=lambda r: r["sampling_params"][0]["sampling_seed"])
    assert [r["input_ids"] for r in sent] == [rows[i:i + max_rows]
                                              for i in range(0, 6, max_rows)]
    seeds = []
    for r in sent:
        assert r["return_logprob"] is True
        assert len(r["sampling_params"]) == len(r["input_ids"])
        for sp in r["sampling_params"]:
            seeds.append(sp.pop("sampling_seed"))
            assert sp == {"temperature": 0.7, "top_p": 0.9, "top_k": 50, "max_new_tokens": 5,
                          "stop_token_ids": [3, 2], "n": 1}
    assert seeds == list(range(40, 46))  # one per row, the copies of a prompt included
    assert fake.requests[-2]["sampling_params"] == [{
        "temperature": 0.0, "top_p": 1.0, "top_k": -1, "max_new_tokens": 3,
        "stop_token_ids": [3, 2], "n": 1, "sampling_seed": 1}]
    assert fake.requests[-1]["sampling_params"] == [{
        "temperature": 1.0, "top_p": 1.0, "top_k": -1, "max_new_tokens": 3,
        "stop_token_ids": [3, 2], "n": 1, "sampling_seed": 2}]
    want = _fake_answer(PROMPTS, 2, sampling, max_rows, 5)
    assert got.tokens.shape == (6, 5) and greedy.tokens.shape == (1, 3)
    for i, a in enumerate(want):
        ids = a["output_ids"]
        assert got.tokens[i].tolist() == ids + [0] * (5 - len(ids))
        np.testing.assert_allclose(got.logps[i], [-(k + 1) / 10 for k in range(len(ids))]
                                   + [0.0] * (5 - len(ids)), rtol=1e-6)
        assert got.lengths[i] == len(ids)
        assert got.finished[i] == (a["meta_info"]["finish_reason"]["type"] == "stop")
    assert got.prompt_lens.tolist() == [len(p) for p in rows]
    assert not np.any(got.entropies)  # SGLang sends none
    assert set(got.finished.tolist()) == {True, False}  # both finish reasons occurred
    assert eng.counters["requests"] == len(sent) + 2 and eng.counters["retries"] == 0


def _drop(key):
    def fault(row):
        (row["meta_info"] if key != "output_ids" else row).pop(key)
    return fault


def _set(**meta):
    def fault(row):
        row["meta_info"].update(meta)
    return fault


def _nan(row):
    row["meta_info"]["output_token_logprobs"][0][0] = float("nan")


def _one_fewer_logprob(row):
    row["meta_info"]["output_token_logprobs"].pop()


def _too_long(row):  # one token past max_new_tokens=5, finished on a stop id
    row["output_ids"] = [20, 21, 22, 23, 24, 3]
    row["meta_info"]["output_token_logprobs"] = [[-0.1, t, None] for t in row["output_ids"]]
    row["meta_info"]["finish_reason"] = {"type": "stop", "matched": 3}


MALFORMED = {
    "no output_ids": (_drop("output_ids"), "lacks output_ids / meta_info fields"),
    "no finish_reason": (_drop("finish_reason"), "lacks output_ids / meta_info fields"),
    "no logprobs": (_drop("output_token_logprobs"), "lacks output_ids / meta_info fields"),
    "logprob count": (_one_fewer_logprob, r"output_ids but \d+ output_token_logprobs"),
    "abort": (_set(finish_reason={"type": "abort", "message": "memory"}), "aborted the request"),
    "unknown finish_reason": (_set(finish_reason={"type": "eos"}), "finish_reason {'type': 'eos'}"),
    "finish_reason not a dict": (_set(finish_reason="stop"), "finish_reason 'stop'"),
    "nan logprob": (_nan, r"output_token_logprobs\[0\] is nan .*must be finite"),
    "longer than max_new": (_too_long, "6 output_ids, more than the max_new_tokens=5"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_sglang_client_rejects_malformed_answers(case, tmp_path):
    """Every malformed answer is retried and then stops generate with an error naming what was
    wrong; nothing of it reaches the rollout."""
    fault, message = MALFORMED[case]
    fake = FakeSGLang(fault)
    srv = Server(fake.app)
    try:
        eng = _fake_client(srv.url, tmp_path)
        with pytest.raises(EngineError, match="failed 2 times") as err:
            eng.generate(PROMPTS, 1, Sampling())
    finally:
        srv.stop()
    assert re.search(message, str(err.value)), str(err.value)
    assert len(fake.requests) == 2
    assert {k: eng.counters[k] for k in ("requests", "malformed", "retries", "failures")} == \
        {"requests": 2, "malformed": 2, "retries": 1, "failures": 1}


def test_sglang_client_malformed_once_then_good_is_the_good_answer(tmp_path):
    fake = FakeSGLang(_nan, faults=1)
    srv = Server(fake.app)
    try:
        eng = _fake_client(srv.url, tmp_path)
        got = eng.generate(PROMPTS, 1, Sampling(seed=6))
    finally:
        srv.stop()
    want = _fake_answer(PROMPTS, 1, Sampling(seed=6), 4096, 5)
    assert [got.tokens[i, :got.lengths[i]].tolist() for i in range(3)] == \
        [a["output_ids"] for a in want]
    assert len(fake.requests) == 2 and fake.requests[0] == fake.requests[1]
    assert (eng.counters["malformed"], eng.counters["retries"], eng.counters["failures"]) == \
        (1, 1, 0)


@pytest.mark.parametrize("status", [400, 422])
def test_sglang_client_4xx_is_not_retried(status, tmp_path):
    fake = FakeSGLang(status=status)
    srv = Server(fake.app)
    try:
        eng = _fake_client(srv.url, tmp_path, retries=5)
        with pytest.raises(EngineError, match=f"/generate: HTTP {status}: bad request {status}"):
            eng.generate(PROMPTS, 1, Sampling())
    finally:
        srv.stop()
    assert len(fake.requests) == 1
    assert (eng.counters["requests"], eng.counters["retries"], eng.counters["failures"]) == \
        (1, 0, 1)


def test_sglang_with_several_trainer_processes_is_refused_naming_the_field(tmp_path,
                                                                          monkeypatch):
    """A multi-process run would have every process send its own requests and export weights
    held on other hosts: the engine refuses to start, naming rollout.engine."""
    import jax

    from frontier_rl.run.errors import RunError

    monkeypatch.setattr(jax, "process_count", lambda: 2)
    with pytest.raises(RunError, match=r"rollout.engine='sglang' with 2 trainer processes"):
        SGLangEngine("http://127.0.0.1:1", pad_id=0, stop_ids=[1], max_new_tokens=4,
                     sync_dir=str(tmp_path))
    monkeypatch.setattr(jax, "process_count", lambda: 1)
    SGLangEngine("http://127.0.0.1:1", pad_id=0, stop_ids=[1], max_new_tokens=4,
                 sync_dir=str(tmp_path)).close()


@pytest.mark.parametrize("fsdp", [1, 4])
def test_device_cast_export_is_byte_identical_to_the_host_cast(tiny_policy, tokenizer, tmp_path,
                                                                fsdp):
    """The export casts fp32 master weights to bf16 on the devices (sharded over fsdp x model
    here) before the host copy; its files are the host cast's byte for byte, rounding ties to
    even, subnormals, overflow to inf and signed zeros included."""
    import dataclasses

    import jax.numpy as jnp

    from frontier_rl.models import hf
    from frontier_rl.policy import random_params
    from frontier_rl.rl import sharding

    cfg = dataclasses.replace(tiny_policy[0], dtype="bfloat16")
    mesh = sharding.make_mesh(8 // (fsdp * 2), fsdp, 2, devices=jax.devices())
    graphdef, params = random_params(cfg, 0, mesh)
    special = np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 1e-40, -1e-40, 3.4e38, -0.0,
                        0.0, np.inf, -np.inf, 1.00390625, 2**-133], np.float32)
    emb = params["embed_tokens"]["embedding"]
    flat = np.asarray(emb[...]).reshape(-1).copy()
    flat[:special.size] = special
    emb[...] = jax.device_put(flat.reshape(emb[...].shape), emb[...].sharding)
    assert isinstance(params["layers"][0]["self_attn"]["q_proj"]["kernel"][...], jax.Array)
    t_dev, t_host = {}, {}
    a = export.export_params(graphdef, params, cfg, tokenizer, str(tmp_path / "device"),
                             timings=t_dev)
    b = export.export_params(graphdef, params, cfg, tokenizer, str(tmp_path / "host"),
                             device_cast=False, timings=t_host)
    for name in ("model.safetensors", "config.json", "generation_config.json"):
        with open(f"{a}/{name}", "rb") as f, open(f"{b}/{name}", "rb") as g:
            assert f.read() == g.read(), name
    assert set(t_dev) == set(t_host) == {"host_copy", "write"}
    model, _ = hf.load_pretrained(a, param_dtype="bfloat16")
    got = np.asarray(model.embed_tokens.embedding[...]).reshape(-1)[:special.size]
    np.testing.assert_array_equal(got.view(np.uint16),
                                  special.astype(jnp.bfloat16).view(np.uint16))


def _sync_server(posts, lengths, refuse=lambda path: False):
    """A server whose /generate answers the probe with a continuation of lengths[i] tokens on
    its i-th call (ids 20.., log-prob -(k+1)/10, ending in stop id 3 when shorter than asked),
    and whose /update_weights_from_disk succeeds unless `refuse(model_path)`. Every request's
    path and body go to `posts`."""

    async def generate(request):
        body = await request.json()
        posts.append(("/generate", body))
        sp = body["sampling_params"][0]
        n = lengths[sum(p == "/generate" for p, _ in posts) - 1]
        ids = [20 + k for k in range(n)]
        if n < sp["max_new_tokens"]:
            ids[-1] = 3
        reason = {"type": "stop", "matched": 3} if n < sp["max_new_tokens"] else {
            "type": "length", "length": n}
        return JSONResponse([{"output_ids": ids, "meta_info": {
            "output_token_logprobs": [[-(k + 1) / 10, t, None] for k, t in enumerate(ids)],
            "finish_reason": reason}}])

    async def other(request):
        body = await request.body()
        body = await request.json() if body else None
        posts.append((request.url.path, body))
        if request.url.path == "/update_weights_from_disk":
            ok = not refuse(body["model_path"])
            return JSONResponse({"success": ok, "message": "ok" if ok else "no such dir",
                                 "num_paused_requests": 0})
        return PlainTextResponse("Cache flushed.\n")

    return Server(Starlette(routes=[
        Route("/generate", generate, methods=["POST"]),
        Route("/update_weights_from_disk", other, methods=["POST"]),
        Route("/flush_cache", other, methods=["POST"])]))


def test_sync_probe_compiles_once_and_sends_no_flush(tmp_path):
    """Two syncs whose probe continuations differ in length (2 and 11 tokens of at most 16):
    the trainer's probe function (train.py's padding: the sequence rounded up to a multiple of
    8) compiles once, because the engine hands it the continuation padded to probe_len; the
    log-probs compared are the continuation's own. No /flush_cache goes out (SGLang flushes
    after /update_weights_from_disk itself)."""
    import jax.numpy as jnp

    posts, traces = [], []
    srv = _sync_server(posts, [2, 11])

    @jax.jit
    def logps(tokens):
        traces.append(tokens.shape)
        return -(jnp.arange(tokens.shape[1], dtype=jnp.float32) + 1) / 10

    def probe_fn(params, prompt, response):  # train.py's shapes; log-prob k of the response
        seq = np.array(prompt + response, np.int32)
        tokens = np.zeros((1, -(-len(seq) // 8) * 8), np.int32)
        tokens[0, :len(seq)] = seq
        return np.asarray(logps(tokens))[:len(response)]

    exported = []
    eng = SGLangEngine(srv.url, pad_id=0, stop_ids=[3], max_new_tokens=64,
                       sync_dir=str(tmp_path / "sync"), export_fn=lambda p, path:
                       exported.append(path), probe_fn=probe_fn, probe_ids=[1, 5, 6],
                       probe_len=16, probe_tol=1e-6, timeout=30.0, retries=2, backoff=0.01,
                       memory_dir=str(tmp_path / "shm"))
    try:
        eng.sync({"w": np.zeros(4, np.float32)}, 1)
        eng.sync({"w": np.ones(4, np.float32)}, 2)
    finally:
        eng.close()
        srv.stop()
    gens = [b for p, b in posts if p == "/generate"]
    assert [b["sampling_params"][0]["max_new_tokens"] for b in gens] == [16, 16]
    assert len(traces) == 1 and eng.counters["syncs"] == 2
    assert eng.counters["probe_abs_diff"] < 1e-6  # the 11 tokens of the second probe
    assert [p for p, _ in posts].count("/update_weights_from_disk") == 2
    assert "/flush_cache" not in [p for p, _ in posts]
    assert eng.counters["sync_push_time"] + eng.counters["sync_probe_time"] == pytest.approx(
        eng.counters["sync_time"])


def test_memory_sync_dir_rule(tmp_path, monkeypatch):
    """/dev/shm (here a stand-in) is used when it exists, the server is on this host and the
    filesystem and the host's memory hold twice the parameters plus 1 GiB; else None (the
    configured sync_dir). A directory of a process that is gone is swept away first."""
    import os

    from frontier_rl.rollout import sglang

    shm = tmp_path / "shm"
    shm.mkdir()
    dead = shm / "frontier_rl-sync-999999999-abc"  # no such pid
    mine = shm / f"frontier_rl-sync-{os.getpid()}-abc"
    dead.mkdir()
    mine.mkdir()
    monkeypatch.setattr(sglang.perf, "available_memory_bytes", lambda: 64 * 2**30)
    got = sglang.memory_sync_dir("http://127.0.0.1:30000", 2**20, str(shm))
    assert got is not None and os.path.dirname(got) == str(shm)
    assert not dead.exists() and mine.exists()
    assert sglang.memory_sync_dir("http://localhost:1", 2**20, str(shm)) is not None
    assert sglang.memory_sync_dir("http://gpu-node-7:30000", 2**20, str(shm)) is None
    assert sglang.memory_sync_dir("http://127.0.0.1:1", 2**20, str(tmp_path / "none")) is None
    assert sglang.memory_sync_dir("http://127.0.0.1:1", 2**20, None) is None
    assert sglang.memory_sync_dir("http://127.0.0.1:1", 32 * 2**30, str(shm)) is None
    monkeypatch.setattr(sglang.perf, "available_memory_bytes", lambda: 2**29)
    assert sglang.memory_sync_dir("http://127.0.0.1:1", 2**20, str(shm)) is None


def test_memory_sync_dir_is_removed_on_close_and_refused_dir_falls_back(tmp_path, monkeypatch):
    """The first sync writes into the memory directory; a server that cannot load from it (its
    own /dev/shm), or a write into it that fails (full), makes the transport write to sync_dir
    from then on; close removes the memory directory."""
    import os

    from frontier_rl.rollout import sglang

    monkeypatch.setattr(sglang.perf, "available_memory_bytes", lambda: 64 * 2**30)
    shm = tmp_path / "shm"
    shm.mkdir()

    for fault in ("none", "load", "write"):
        def export_fn(params, path, fault=fault):
            if fault == "write" and path.startswith(str(shm)):
                raise OSError(28, "No space left on device")
            os.makedirs(path, exist_ok=True)

        posts = []
        srv = _sync_server(
            posts, [], refuse=lambda p, fault=fault: fault == "load" and p.startswith(str(shm)))
        eng = SGLangEngine(srv.url, pad_id=0, stop_ids=[3], max_new_tokens=8,
                           sync_dir=str(tmp_path / "sync"), export_fn=export_fn, timeout=30.0,
                           retries=2, backoff=0.01, memory_dir=str(shm))
        try:
            eng.sync({"w": np.zeros(4, np.float32)}, 1)
            eng.sync({"w": np.zeros(4, np.float32)}, 2)
        finally:
            srv.stop()
        loads = [b["model_path"] for p, b in posts if p == "/update_weights_from_disk"]
        if fault != "none":
            assert loads[0].startswith(str(shm)) == (fault == "load")
            assert loads[fault == "load":] == [str(tmp_path / "sync" / "policy")] * 2
            assert list(shm.iterdir()) == []  # given up at once
        else:
            assert len(loads) == 2 and all(p.startswith(str(shm)) for p in loads)
            assert len(list(shm.iterdir())) == 1
        eng.close()
        assert list(shm.iterdir()) == []
