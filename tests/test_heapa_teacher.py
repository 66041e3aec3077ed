"""Teachers: the programmatic arith teacher, the HTTP teacher against a real local server
(correct, garbage, slow, erroring, down), and the asynchronous wrapper's fault handling,
back-pressure and checkpointing. Faults are counted, never raised."""

import http.server
import json
import re
import socket
import threading
import time

import numpy as np
import pytest
from heapa_testlib import ArithCtx, run_steps

from frontier_rl import selection, tasks
from frontier_rl.selection.heapa.augment import Candidate
from frontier_rl.selection.heapa.teacher import (
    ArithTeacher,
    AsyncTeacher,
    HttpTeacher,
    TeacherError,
    Verdict,
    numeric_answer,
    parse_reply,
    wrong_answer,
)
from frontier_rl.tasks.verify import parse_number


def cand(text, cid=0, original="73+5+218=", step=1):
    return Candidate(cid=cid, parent="p", text=text, original=original, d=1.0, est=0.5,
                     step=step)


def wait_for(t: AsyncTeacher, n: int, timeout: float = 5.0):
    out, t0 = [], time.monotonic()
    while len(out) < n and time.monotonic() - t0 < timeout:
        out += t.drain()
        time.sleep(0.005)
    return out


# ----------------------------------------------------------------------------- arith


def test_arith_teacher_solves_and_filters():
    t = ArithTeacher(max_operands=4, max_digits=3)
    v = t(cand("73+5+218="))
    assert v.ok and v.answer == "458" and v.question == "73+5+218="
    assert t(cand("73+5+=")).reason == "unsolvable"
    assert t(cand("7a+5=")).reason == "unsolvable"
    assert t(cand("1+2+3+4+5=")).reason == "filter"  # too many operands
    assert t(cand("1+2345=")).reason == "filter"  # too many digits
    assert t(cand("1+50=")).reason == "filter"  # "50" reversed is 05: not the task's writing
    assert t(cand("7=")).reason == "filter"  # a single operand is not a sum


def test_wrong_answers_are_numbers_other_than_the_answer():
    rng = np.random.default_rng(0)
    for answer in ("854", "0", "7", "9001"):  # arith, least significant digit first
        for _ in range(50):
            w = wrong_answer(answer, rng, is_arith=True)
            assert re.fullmatch(r"0|[0-9]*[1-9]", w), w  # written the task's way
            assert 1 <= abs(int(w[::-1]) - int(answer[::-1])) <= 9
    assert wrong_answer("458", np.random.default_rng(1), is_arith=True,
                        reverse_digits=False) != "458"
    for answer in ("12", "-3/4", "2.5", "1200"):
        for _ in range(20):
            w = wrong_answer(answer, rng, is_arith=False)
            assert parse_number(w) is not None and parse_number(w) != parse_number(answer)


# ----------------------------------------------------------------------------- parsing


def test_numeric_answers():
    assert numeric_answer("42") == "42"
    assert numeric_answer(" $-3/4$ ") == "-3/4"
    assert numeric_answer("1,200.") == "1200"
    assert numeric_answer("\\frac{1}{2}") == "1/2"
    assert numeric_answer("\\boxed{7}") == "7"
    assert numeric_answer(12) == "12"  # a JSON number is kept (the code dropped it)
    for bad in (None, True, "", "x+1", "\\sqrt{2}", float("nan")):
        assert numeric_answer(bad) is None


def test_parse_reply():
    ok = parse_reply('```json\n{"clean": "Q?", "solvable": true, "answer": "3", '
                     '"difficulty": 9}\n```')
    assert ok.ok and ok.question == "Q?" and ok.answer == "3" and ok.teacher_d == 1.33
    assert parse_reply('{"clean": "", "solvable": true, "answer": "3"}').reason == "empty_clean"
    assert parse_reply('{"clean": "Q", "solvable": false}').reason == "unsolvable"
    assert parse_reply('{"clean": "Q", "solvable": true, "answer": null}').reason == (
        "no_numeric_answer")
    assert parse_reply('Sure! {"clean": "Q", "solvable": true, "answer": "2"} bye').ok
    for bad in ("not json", "[1, 2]", ""):
        with pytest.raises(TeacherError, match="malformed_json"):
            parse_reply(bad)


# ----------------------------------------------------------------------------- HTTP


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        mode = self.server.mode
        if mode == "slow":
            time.sleep(0.6)
        if mode == "error":
            self.send_response(500)
            self.end_headers()
            return
        if mode == "bad_request":
            self.send_response(400)
            self.end_headers()
            return
        user = body["messages"][1]["content"]
        problem = user.split("GENERATION:\n", 1)[1].split("\n\nDo three things", 1)[0]
        total = sum(int(x) for x in re.findall(r"\d+", problem))
        reply = {"clean": problem, "solvable": True, "answer": str(total), "difficulty": 1.1}
        content = "I think the answer is 7." if mode == "garbage" else json.dumps(reply)
        payload = json.dumps({"choices": [{"message": {"content": content}}]}).encode()
        if mode == "bad_envelope":
            payload = b"<html>oops"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client that timed out and hung up is expected here


@pytest.fixture()
def server():
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.mode = "ok"
    srv.requests = []
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def teacher_for(srv, **kw):
    host, port = srv.server_address
    return HttpTeacher(f"http://{host}:{port}/v1", model="m", api_key_env="", **kw)


def test_http_teacher_answers(server):
    t = teacher_for(server, reasoning_effort="low")
    v = t(cand("What is 2 + 3?"))
    assert v.ok and v.answer == "5" and v.question == "What is 2 + 3?"
    assert v.teacher_d == pytest.approx(1.1)
    req = server.requests[-1]
    assert req["response_format"] == {"type": "json_object"} and req["model"] == "m"
    assert req["reasoning_effort"] == "low" and req["max_completion_tokens"] == 4196
    assert "73+5+218=" in req["messages"][1]["content"]  # the ORIGINAL is given
    assert t(cand("把 2 加 3")).reason == "cjk" and len(server.requests) == 1  # no call


@pytest.mark.parametrize("mode,reason", [
    ("garbage", "malformed_json"), ("bad_envelope", "malformed_response"),
    ("error", "http_error"), ("slow", "timeout")])
def test_http_teacher_faults_raise_teacher_errors(server, mode, reason):
    server.mode = mode
    with pytest.raises(TeacherError, match=reason):
        teacher_for(server, timeout_s=0.2 if mode == "slow" else 10.0)(cand("What is 2 + 3?"))


def test_http_faults_are_counted_and_never_stop_the_caller(server):
    host, port = server.server_address
    with socket.socket() as s:  # a port nobody listens on: the teacher is down
        s.bind(("127.0.0.1", 0))
        down_port = s.getsockname()[1]
    results = {}
    for mode in ("ok", "garbage", "error", "bad_request", "slow", "down"):
        server.mode = "ok" if mode == "down" else mode
        url = f"http://127.0.0.1:{down_port if mode == 'down' else port}"
        # a short timeout only where the server is slow: a loaded machine must not turn the
        # other faults into timeouts
        timeout_s = 0.2 if mode == "slow" else 10.0
        at = AsyncTeacher(HttpTeacher(url, model="m", api_key_env="", timeout_s=timeout_s),
                          workers=2, max_retries=1, backoff_s=0.01)
        at.submit([cand("What is 2 + 3?", cid=i) for i in range(3)])
        done = wait_for(at, 3)
        at.close()
        assert len(done) == 3
        results[mode] = (done[0][1], at.counters)
    assert results["ok"][0].ok and results["ok"][1]["accepted"] == 3
    assert results["garbage"][0].reason == "malformed_json"
    assert results["garbage"][1]["fault_malformed_json"] == 6  # 3 candidates x 2 attempts
    assert results["error"][1]["fault_http_error"] == 6  # 5xx is retried
    assert results["bad_request"][1]["fault_http_error"] == 3  # 4xx is not
    assert results["slow"][0].reason == "timeout" and results["slow"][1]["fault_timeout"] == 6
    assert results["down"][0].reason == "connection_error"
    assert results["down"][1]["rejected"] == 3


# ----------------------------------------------------------------------------- async wrapper


def test_async_teacher_with_arith_workers():
    at = AsyncTeacher(ArithTeacher(), workers=2)
    at.submit([cand(f"{i}9+1=", cid=i) for i in range(1, 50)])
    done = wait_for(at, 49)
    at.close()
    assert [c.cid for c, _ in done] == list(range(1, 50))
    assert all(v.ok and v.answer == tasks.solve(c.text) for c, v in done)
    assert at.take_latency()[2] == 49  # every call timed once
    assert at.take_latency() == (0.0, 0.0, 0)  # and the window restarts


def test_exceptions_and_hung_calls_are_counted():
    def broken(c):
        raise RuntimeError("bug in a teacher")

    at = AsyncTeacher(broken, workers=1, max_retries=2, backoff_s=0.001)
    at.submit([cand("1+1=")])
    (c, v), = wait_for(at, 1)
    assert not v.ok and v.reason == "exception" and at.counters["fault_exception"] == 3
    at.close()

    release = threading.Event()

    def hung(c):
        release.wait(5)
        return Verdict(True, question=c.text, answer="2")

    at = AsyncTeacher(hung, workers=1, timeout_s=0.05, max_retries=0)
    at.submit([cand("1+1=", cid=i) for i in range(2)])
    done = wait_for(at, 2)
    assert [v.reason for _, v in done] == ["timeout", "timeout"]
    assert at.counters["fault_timeout"] == 2
    release.set()
    at.close()


def test_back_pressure_drops_and_counts():
    at = AsyncTeacher(ArithTeacher(), workers=0, queue_size=2)
    assert at.submit([cand("1+1=", cid=i) for i in range(5)]) == 3
    assert at.counters["dropped_queue_full"] == 3
    assert len(at.drain()) == 2  # inline mode: processed at drain


def test_checkpoint_keeps_queued_and_in_flight_work():
    gate, started = threading.Event(), threading.Event()

    def slow(c):
        started.set()
        gate.wait(5)
        return Verdict(True, question=c.text, answer="x")

    at = AsyncTeacher(slow, workers=1, timeout_s=10)
    at.submit([cand(f"{i}+1=", cid=i) for i in range(1, 4)])
    assert started.wait(5)
    assert at.depth() == (2, 1)  # one in flight, two queued
    state = json.loads(json.dumps(at.state_dict()))
    assert [c["cid"] for c in state["pending"]] == [1, 2, 3]
    gate.set()
    at.close()

    fresh = AsyncTeacher(ArithTeacher(), workers=0)
    fresh.load_state_dict(state)
    done = fresh.drain()
    assert [c.cid for c, _ in done] == [1, 2, 3] and all(v.ok for _, v in done)
    assert fresh.state_dict()["pending"] == []


def test_submit_returns_while_the_teacher_is_still_working():
    started, release = threading.Event(), threading.Event()

    def blocking(c):
        started.set()
        release.wait(10)
        return Verdict(True, question=c.text, answer="2")

    at = AsyncTeacher(blocking, workers=1)
    at.submit([cand("1+1=")])  # had it waited for the call, the call would be over by now
    assert started.wait(10)
    assert at.depth() == (0, 1) and at.drain() == []
    release.set()
    (c, v), = wait_for(at, 1)
    at.close()
    assert v.ok and at.counters["completed"] == 1


# ----------------------------------------------------------------------------- a fair teacher


def test_inline_latency_defers_the_drain_by_whole_steps():
    at = AsyncTeacher(ArithTeacher(), workers=0, latency_s=2.5, step_s=1.0)
    at.submit([cand(f"{i}+1=", cid=i, step=3) for i in range(1, 4)])
    at.submit([cand(f"{i}+2=", cid=i, step=5) for i in range(4, 6)])
    # submitted after step 3's update; ⌈2.5 / 1⌉ = 3 steps later than the next one: step 7
    assert [len(at.drain(step=t)) for t in (4, 5, 6)] == [0, 0, 0]
    assert [c.cid for c, _ in at.drain(step=7)] == [1, 2, 3]
    assert at.drain(step=8) == [] and [c.cid for c, _ in at.drain(step=9)] == [4, 5]
    instant = AsyncTeacher(ArithTeacher(), workers=0)
    instant.submit([cand("1+1=", step=3)])
    assert len(instant.drain(step=4)) == 1  # no latency: the next step


def test_threaded_latency_holds_the_verdict_and_close_loses_nothing():
    at = AsyncTeacher(ArithTeacher(), workers=1, latency_s=60.0)
    at.submit([cand(f"{i}+1=", cid=i) for i in range(1, 4)])
    for _ in range(1000):  # until the worker holds the first call
        if at.depth() == (2, 1):
            break
        time.sleep(0.005)
    assert at.depth() == (2, 1) and at.drain() == []  # its verdict waits out the latency
    at.close()  # interrupts the wait; the held call goes back to the queue
    assert at.depth() == (3, 0)
    assert [c["cid"] for c in at.state_dict()["pending"]] == [1, 2, 3]


def fair(seed=0, **over):
    cfg = dict(selection.defaults("heapa"))
    cfg.update({"teacher_workers": 0, "capacity": 100_000, **over})
    return selection.make("heapa", {"heapa": cfg}, 120, seed)


def children_through_the_teacher(sel, n):
    """Seeds `sel` on an arith context, then passes n distinct well-formed sums through its
    teacher and drain; returns {candidate text: answer} of the accepted children."""
    ctx = ArithCtx(120, allow_wrong=True)
    ctx.step = 1
    sel.build_batch(ctx)  # seeds the pool, resolves the arith format and teacher
    texts = [f"{a}+{b}=" for a in range(11, 999) for b in range(1, 10)
             if str(a)[-1] != "0"][:n]
    sel.teacher.submit([cand(t, cid=10_000 + i, step=0) for i, t in enumerate(texts)])
    sel._drain(ctx)
    got = {r.text: r.answer for r in sel.pool.records.values() if r.aug}
    assert len(got) == n
    return got


@pytest.mark.parametrize("rate,n", [(0.3, 2000), (0.012, 5000)])
def test_teacher_error_rate_within_binomial_bounds(rate, n):
    sel = fair(teacher_error_rate=rate)
    got = children_through_the_teacher(sel, n)
    wrong = sorted(t for t, a in got.items() if a != tasks.solve(t))
    sd = (n * rate * (1 - rate)) ** 0.5
    assert abs(len(wrong) - n * rate) < 5 * sd, (len(wrong), n * rate)
    assert sel.mechanisms()["teacher_wrong_labels"] == len(wrong)
    again = children_through_the_teacher(fair(teacher_error_rate=rate), n)
    assert again == got  # deterministic by seed
    other = children_through_the_teacher(fair(seed=1, teacher_error_rate=rate), n)
    assert sorted(t for t, a in other.items() if a != tasks.solve(t)) != wrong


def test_exact_teacher_reports_no_wrong_labels():
    sel = fair()
    got = children_through_the_teacher(sel, 500)
    assert all(a == tasks.solve(t) for t, a in got.items())
    assert "teacher_wrong_labels" not in sel.mechanisms()


def test_only_process_0_talks_to_the_teacher():
    """The teacher's drains and submissions go through `StepContext.on_primary` (a collective
    in the trainer): the selector of another process never calls its own teacher, takes
    process 0's results and grows the same pool."""
    results = []

    class Primary(ArithCtx):
        def on_primary(self, fn):
            results.append(fn())
            return results[-1]

    class Other(ArithCtx):
        calls = 0

        def on_primary(self, fn):
            self.calls += 1
            return results[self.calls - 1]

    sels, ctxs = (fair(), fair()), (Primary(120, junk=0.0), Other(120, junk=0.0))
    for step in range(1, 5):
        for sel, ctx in zip(sels, ctxs, strict=True):
            run_steps(sel, ctx, 1, start=step)
    children = [{r.text: r.answer for r in s.pool.records.values() if r.aug} for s in sels]
    assert children[0] and children[0] == children[1]
    assert ctxs[1].calls == len(results) and sels[1].teacher.depth() == (0, 0)


def test_selector_latency_delays_children_by_whole_steps():
    accepted = {}
    for latency in (0.0, 2.0):
        sel = fair(teacher_latency_s=latency, teacher_step_s=1.0)
        ctx = ArithCtx(120, junk=0.0)
        per_step = []
        for step in range(1, 6):
            run_steps(sel, ctx, 1, start=step)
            per_step.append(sel.metrics()["aug_accepted"])
        accepted[latency] = per_step
    # step 1's children: drained at step 2 by the instant teacher, at step 4 with 2 s latency
    assert accepted[0.0][0] == 0 and accepted[0.0][1] > 0
    assert accepted[2.0][:3] == [0, 0, 0] and accepted[2.0][3] == accepted[0.0][1]
