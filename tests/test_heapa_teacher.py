"""Teachers: the programmatic arith teacher, the HTTP teacher against a real local server
(correct, garbage, slow, erroring, down), and the asynchronous wrapper's fault handling,
back-pressure and checkpointing. Faults are counted, never raised."""

import http.server
import json
import re
import socket
import threading
import time

import pytest

from frontier_rl import tasks
from frontier_rl.selection.heapa.augment import Candidate
from frontier_rl.selection.heapa.teacher import (
    ArithTeacher,
    AsyncTeacher,
    HttpTeacher,
    TeacherError,
    Verdict,
    numeric_answer,
    parse_reply,
)


def cand(text, cid=0, original="73+5+218="):
    return Candidate(cid=cid, parent="p", text=text, original=original, d=1.0, est=0.5, step=1)


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


def test_arith_teacher_label_noise_rate_and_determinism():
    t = ArithTeacher(wrong_label_rate=0.3, seed=1)
    vs = [t(cand("73+5+218=", cid=i)) for i in range(400)]
    wrong = sum(v.answer != "458" for v in vs)
    assert 80 < wrong < 160
    assert [v.answer for v in vs] == [t(cand("73+5+218=", cid=i)).answer for i in range(400)]
    assert all(re.fullmatch(r"[0-9]+", v.answer) for v in vs)


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
        teacher_for(server, timeout_s=0.2)(cand("What is 2 + 3?"))


def test_http_faults_are_counted_and_never_stop_the_caller(server):
    host, port = server.server_address
    with socket.socket() as s:  # a port nobody listens on: the teacher is down
        s.bind(("127.0.0.1", 0))
        down_port = s.getsockname()[1]
    results = {}
    for mode in ("ok", "garbage", "error", "bad_request", "slow", "down"):
        server.mode = "ok" if mode == "down" else mode
        url = f"http://127.0.0.1:{down_port if mode == 'down' else port}"
        at = AsyncTeacher(HttpTeacher(url, model="m", api_key_env="", timeout_s=0.2),
                          workers=2, max_retries=1, backoff_s=0.01)
        t0 = time.monotonic()
        at.submit([cand("What is 2 + 3?", cid=i) for i in range(3)])
        assert time.monotonic() - t0 < 0.1  # submitting never waits on the teacher
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
    service, age, n = at.take_latency()
    assert n == 49 and service >= 0 and age >= service


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
    gate = threading.Event()

    def slow(c):
        gate.wait(5)
        return Verdict(True, question=c.text, answer="x")

    at = AsyncTeacher(slow, workers=1, timeout_s=10)
    at.submit([cand(f"{i}+1=", cid=i) for i in range(1, 4)])
    time.sleep(0.05)  # one in flight, two queued
    state = json.loads(json.dumps(at.state_dict()))
    assert [c["cid"] for c in state["pending"]] == [1, 2, 3]
    gate.set()
    at.close()

    fresh = AsyncTeacher(ArithTeacher(), workers=0)
    fresh.load_state_dict(state)
    done = fresh.drain()
    assert [c.cid for c, _ in done] == [1, 2, 3] and all(v.ok for _, v in done)
    assert fresh.state_dict()["pending"] == []
