"""Asynchronous teacher annotation (HeaPA, arXiv 2601.22448; the released code's
AsyncTeacherAnnotator): candidates in, (question, answer) out.

The RL loop never waits on the teacher. `AsyncTeacher.submit` appends to a bounded queue and
returns at once (a full queue drops the candidate and counts it: back-pressure); worker
threads call the teacher with a per-call timeout and retries with exponential backoff; the
selector collects finished verdicts with `drain` at the start of the next step. Every fault
(timeout, connection error, HTTP error, malformed JSON, exception) is counted, never raised.
`workers=0` runs the teacher inline inside `drain` instead: deterministic, for tests and
exactly reproducible CPU runs with the programmatic teacher.

Teachers are callables `teacher(candidate) -> Verdict`; they raise `TeacherError` for faults
worth a retry and return `Verdict(ok=False, reason=...)` for content they reject:

- `ArithTeacher` solves embedded arith problems with `tasks.arith.solve`: ill-formed ones are
  "unsolvable"; operand count and digit filters are "filter". It is exact and instant.
- `HttpTeacher` asks any OpenAI-compatible chat-completions endpoint for the spec's JSON object
  {"clean", "solvable", "answer", "difficulty"}, over httpx (the client the SGLang engine
  uses). Fixes over the released code: an answer must parse as a number ("no_numeric_answer"
  otherwise; the code let a missing answer through as gt=None), and a JSON number answer is
  accepted as its string (the code dropped it to None).

`state_dict` snapshots queued and in-flight candidates (re-queued on load, so nothing is lost)
and finished verdicts not yet drained.

A fair teacher. The programmatic teacher is exact, instant and free; HeaPA's LLM teacher is
none of these (the paper estimates a 1.2% wrong-label rate among accepted augmented queries,
and counts teacher annotation as about 13.1% of main training time in auxiliary service time).
Two settings make the embedded teacher pay what a real one does:
- wrong labels (`selector.<name>.teacher_error_rate`, applied by the selector to accepted
  children, so for any teacher): with that probability, decided per candidate from (run seed,
  candidate id), the child keeps its text and gets `wrong_answer` as its reference answer;
- latency (`latency_s`, `selector.<name>.teacher_latency_s`): every call takes that many more
  seconds before its verdict is posted. With worker threads the delay is real: each call holds
  its worker (throughput = workers / (latency + service time)) and the step at which a verdict
  is drained depends on wall-clock time, as with a remote teacher. Inline (workers=0) it is
  simulated so that runs stay deterministic: a step stands for `step_s` seconds
  (`teacher_step_s`) and calls run concurrently, so a candidate submitted after step t's update
  is drained at step t + 1 + ⌈latency_s / step_s⌉ (t + 1 without latency).
"""

from __future__ import annotations

import collections
import dataclasses
import decimal
import fractions
import json
import math
import os
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence

import httpx
import numpy as np

from frontier_rl.selection.heapa.augment import Candidate, clamp_d
from frontier_rl.tasks import arith
from frontier_rl.tasks.verify import parse_number

TEACHERS = ("auto", "arith", "http")


@dataclasses.dataclass
class Verdict:
    ok: bool
    reason: str = ""  # why it was rejected (when not ok)
    question: str = ""  # the clean, self-contained problem
    answer: str = ""
    teacher_d: float = 1.0  # stored, not used downstream (as in the paper's code)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class TeacherError(Exception):
    """A fault on the way to a verdict (retried while `retryable`)."""

    def __init__(self, reason: str, retryable: bool = True):
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable


# ----------------------------------------------------------------------------- programmatic


class ArithTeacher:
    """Answers arith problems exactly (see module docstring)."""

    enforces_timeout = True  # instant: no timeout thread needed

    def __init__(self, *, min_operands: int = 2, max_operands: int = 6, max_digits: int = 3,
                 reverse_digits: bool = True):
        self.min_operands, self.max_operands = min_operands, max_operands
        self.max_digits = max_digits
        self.reverse = reverse_digits

    def __call__(self, cand: Candidate) -> Verdict:
        try:
            answer = arith.solve(cand.text, self.reverse)
        except ValueError:
            return Verdict(False, "unsolvable")
        ops = cand.text[:-1].split("+")
        if not self.min_operands <= len(ops) <= self.max_operands:
            return Verdict(False, "filter")
        lead = -1 if self.reverse else 0  # the most significant digit's position
        if any(len(o) > self.max_digits or (len(o) > 1 and o[lead] == "0") for o in ops):
            return Verdict(False, "filter")  # too long, or not written the task's way
        return Verdict(True, question=cand.text, answer=answer, teacher_d=cand.d)


def wrong_answer(answer: str, rng: np.random.Generator, *, is_arith: bool,
                 reverse_digits: bool = True) -> str:
    """A wrong reference answer in place of `answer`: the number moved by d in 1..9, up or down
    at random (up when down would go below 0 on arith). Arith answers keep the task's digit
    order; others (bare numbers: integers, decimals, fractions a/b) are written as given."""
    delta = int(rng.integers(1, 10))
    if is_arith:
        value = int(answer[::-1] if reverse_digits else answer)
        value = value + delta if value < delta or rng.random() < 0.5 else value - delta
        return arith.format_answer(value, reverse_digits)
    sign = 1 if rng.random() < 0.5 else -1
    try:
        return str(decimal.Decimal(answer) + sign * delta)
    except decimal.InvalidOperation:
        pass
    try:
        f = fractions.Fraction(answer) + sign * delta
    except (ValueError, ZeroDivisionError):
        return answer + str(delta)  # not a number we can move: still not the answer
    return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"


# ----------------------------------------------------------------------------- HTTP

SYSTEM = "You are a careful math data cleaner and solver."
USER = """ORIGINAL:
{original}

GENERATION:
{generation}

Do three things.
1. From GENERATION only, extract one self-contained math problem. Drop any preface, role tags,
code fences and answer lines, and copy nothing from ORIGINAL. If no clean problem can be
extracted, use an empty string and mark it unsolvable.
2. Decide whether the problem is well-posed. If it is solvable, compute only its final
numeric answer.
3. Rate its difficulty relative to ORIGINAL on a scale from 0.75 to 1.33 (1.0 = the same).
Reply with a single line of JSON and nothing else:
{{"clean": "<problem>", "solvable": true, "answer": "<number>", "difficulty": 1.0}}
Use lowercase true/false/null; when solvable, "answer" is a string holding a bare number."""

_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef]")
_FENCE = re.compile(r"^\s*```(?:json)?\s*|\s*```\s*$", re.IGNORECASE)
_FRAC = re.compile(r"^(-?)\\d?frac\{(\d+)\}\{(\d+)\}$")
_BOXED = re.compile(r"^\\boxed\{(.*)\}$")


def numeric_answer(value) -> str | None:
    """A bare number string from a teacher's answer ("1,200", "$-3/4$", "\\frac{1}{2}"), or None
    when it is not a plain number."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return None if isinstance(value, float) and not math.isfinite(value) else str(value)
    if not isinstance(value, str):
        return None
    s = value.strip().strip("$").strip().rstrip(".").replace(" ", "").replace(",", "")
    m = _BOXED.match(s)
    if m:
        s = m.group(1)
    m = _FRAC.match(s)
    if m:
        s = f"{m.group(1)}{m.group(2)}/{m.group(3)}"
    return s if s and parse_number(s) is not None else None


def parse_reply(content: str, d_min: float = 0.75, d_max: float = 1.33) -> Verdict:
    """The spec's JSON object -> Verdict; raises TeacherError("malformed_json")."""
    text = _FENCE.sub("", content or "")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        m = re.search(r"\{.*\}", text, re.DOTALL)
        try:
            obj = json.loads(m.group(0)) if m else None
        except json.JSONDecodeError:
            obj = None
    if not isinstance(obj, dict):
        raise TeacherError("malformed_json")
    clean = obj.get("clean")
    clean = clean.strip() if isinstance(clean, str) else ""
    if not clean:
        return Verdict(False, "empty_clean")
    if obj.get("solvable") is not True:
        return Verdict(False, "unsolvable")
    answer = numeric_answer(obj.get("answer"))
    if answer is None:
        return Verdict(False, "no_numeric_answer")
    try:
        td = float(obj.get("difficulty", 1.0))
    except (TypeError, ValueError):
        td = 1.0
    return Verdict(True, question=clean, answer=answer, teacher_d=clamp_d(td, d_min, d_max))


class HttpTeacher:
    """A teacher behind an OpenAI-compatible `POST {url}/chat/completions` endpoint."""

    enforces_timeout = True  # a deadline over connect, send and every read

    def __init__(self, url: str, *, model: str, api_key_env: str = "OPENAI_API_KEY",
                 timeout_s: float = 30.0, max_tokens: int = 4196,
                 max_tokens_field: str = "max_completion_tokens", reasoning_effort: str = "",
                 d_min: float = 0.75, d_max: float = 1.33, max_question_chars: int = 4000):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"teacher url {url!r} is not an http(s) URL")
        url = url.rstrip("/")
        self.url = url if url.endswith("/chat/completions") else url + "/chat/completions"
        self._http: httpx.Client | None = None
        self._client_lock = threading.Lock()
        self.model = model
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.max_tokens_field = max_tokens_field
        self.reasoning_effort = reasoning_effort
        self.d_min, self.d_max = d_min, d_max
        self.max_question_chars = max_question_chars

    def request_body(self, cand: Candidate) -> dict:
        body = {
            "model": self.model,
            "messages": [{"role": "system", "content": SYSTEM},
                         {"role": "user", "content": USER.format(original=cand.original,
                                                                 generation=cand.text)}],
            "response_format": {"type": "json_object"},
            self.max_tokens_field: self.max_tokens,
        }
        if self.reasoning_effort:
            body["reasoning_effort"] = self.reasoning_effort
        return body

    def __call__(self, cand: Candidate) -> Verdict:
        if _CJK.search(cand.text):
            return Verdict(False, "cjk")  # no API call, as in the released code
        envelope = self._post(json.dumps(self.request_body(cand)).encode())
        try:
            content = envelope["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise TeacherError("malformed_response") from None
        verdict = parse_reply(content, self.d_min, self.d_max)
        if verdict.ok and (len(verdict.question) > self.max_question_chars
                           or _CJK.search(verdict.question)):
            return Verdict(False, "filter")
        return verdict

    def _client(self) -> httpx.Client:
        """One pooled client per teacher, shared by the worker threads (httpx.Client is
        thread-safe); created on first use."""
        with self._client_lock:
            if self._http is None:
                self._http = httpx.Client(timeout=self.timeout_s)
            return self._http

    def _post(self, payload: bytes) -> dict:
        """POST within `timeout_s`: connect, send and each read wait at most the time left, and
        the body is abandoned once the deadline passes (a server that drips bytes is cut off)."""
        deadline = time.monotonic() + self.timeout_s
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        chunks = []
        try:
            with self._client().stream("POST", self.url, content=payload, headers=headers,
                                       timeout=self.timeout_s) as resp:
                for chunk in resp.iter_raw():
                    chunks.append(chunk)
                    if time.monotonic() > deadline:
                        raise TeacherError("timeout")
                status = resp.status_code
        except httpx.TimeoutException:
            raise TeacherError("timeout") from None
        except httpx.HTTPError:
            raise TeacherError("connection_error") from None
        if status != 200:
            raise TeacherError("http_error", retryable=status == 429 or status >= 500)
        try:
            envelope = json.loads(b"".join(chunks))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise TeacherError("malformed_response") from None
        if not isinstance(envelope, dict):
            raise TeacherError("malformed_response")
        return envelope

    def close(self) -> None:
        with self._client_lock:
            if self._http is not None:
                self._http.close()
                self._http = None


# ----------------------------------------------------------------------------- async wrapper


class AsyncTeacher:
    """Bounded queue + worker threads around a teacher callable (see module docstring)."""

    def __init__(self, teacher: Callable[[Candidate], Verdict] | None = None, *,
                 workers: int = 2, queue_size: int = 20000, timeout_s: float = 30.0,
                 max_retries: int = 1, backoff_s: float = 1.0, latency_s: float = 0.0,
                 step_s: float = 1.0):
        self.teacher = teacher
        self.workers = int(workers)
        self.latency_s = float(latency_s)
        self.step_s = float(step_s)
        # inline: steps beyond the next one before a submitted candidate is drained
        self.delay_steps = math.ceil(self.latency_s / self.step_s - 1e-9) if latency_s else 0
        self.queue_size = int(queue_size)
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self._cv = threading.Condition()
        self._queue: collections.deque[Candidate] = collections.deque()
        self._inflight: dict[int, Candidate] = {}
        self._done: list[tuple[Candidate, Verdict]] = []
        self._submitted_at: dict[int, float] = {}
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._gen = 0  # bumped by load_state_dict: results of older work are discarded
        self._hung = 0  # timed-out calls whose threads are still running
        self.counters: collections.Counter = collections.Counter()
        self._lat = [0.0, 0.0, 0]  # service seconds, submit-to-done seconds, count

    # ------------------------------------------------------------------ main-thread side

    def submit(self, cands: Sequence[Candidate]) -> int:
        """Queues candidates without blocking; returns how many were dropped (queue full)."""
        dropped = 0
        now = time.monotonic()
        with self._cv:
            for c in cands:
                if len(self._queue) >= self.queue_size:
                    dropped += 1
                    continue
                self._queue.append(c)
                self._submitted_at[c.cid] = now
            self.counters["submitted"] += len(cands) - dropped
            self.counters["dropped_queue_full"] += dropped
            self._cv.notify_all()
        if self.workers and not self._threads and self.teacher is not None:
            self._start()
        return dropped

    def counters_snapshot(self) -> dict[str, int]:
        """A copy of `counters`, taken under the lock the worker threads update them with."""
        with self._cv:
            return dict(self.counters)

    def ready(self, cand: Candidate, step: int | None) -> bool:
        """Inline mode: whether a queued candidate's simulated call has finished by the drain
        of `step` (always, without latency or without a step)."""
        return step is None or cand.step + 1 + self.delay_steps <= step

    def drain(self, step: int | None = None) -> list[tuple[Candidate, Verdict]]:
        """Finished (candidate, verdict) pairs in submission order; runs inline if workers=0,
        where `step` (the step about to be built) holds back the candidates whose simulated
        latency has not passed (module docstring)."""
        if not self.workers and self.teacher is not None:
            while True:
                with self._cv:
                    # FIFO by candidate id, so by submission step: the rest are not ready either
                    if not self._queue or not self.ready(self._queue[0], step):
                        break
                    cand = self._queue.popleft()
                t0 = time.monotonic()
                self._finish(cand, *self._process(cand), gen=self._gen, t0=t0)
        with self._cv:
            out, self._done = self._done, []
        out.sort(key=lambda cv: cv[0].cid)
        return out

    def depth(self) -> tuple[int, int]:
        with self._cv:
            return len(self._queue), len(self._inflight)

    def take_latency(self) -> tuple[float, float, int]:
        """(mean service seconds, mean submit-to-done seconds, count) since the last call."""
        with self._cv:
            service, age, n = self._lat
            self._lat = [0.0, 0.0, 0]
        return (service / n, age / n, n) if n else (0.0, 0.0, 0)

    def close(self, timeout: float = 1.0) -> None:
        self._stop.set()
        with self._cv:
            self._cv.notify_all()
        for t in self._threads:
            t.join(timeout)
        self._threads = []
        self._stop = threading.Event()
        if hasattr(self.teacher, "close"):
            self.teacher.close()  # its pooled connections (a later submit reopens them)

    # ------------------------------------------------------------------ workers

    def _start(self) -> None:
        for i in range(self.workers):
            t = threading.Thread(target=self._work, name=f"heapa-teacher-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def _work(self) -> None:
        stop = self._stop
        while not stop.is_set():
            with self._cv:
                while not self._queue and not stop.is_set():
                    self._cv.wait(0.5)
                if stop.is_set():
                    return
                cand = self._queue.popleft()
                self._inflight[cand.cid] = cand
                gen = self._gen
            t0 = time.monotonic()
            verdict, faults, attempts = self._process(cand)
            if self.latency_s and stop.wait(self.latency_s):  # closed while the call "ran"
                with self._cv:
                    self._inflight.pop(cand.cid, None)
                    if gen == self._gen:
                        self._queue.appendleft(cand)  # not lost: asked again on restart
                return
            self._finish(cand, verdict, faults, attempts, gen=gen, t0=t0)

    def _finish(self, cand, verdict, faults, attempts, *, gen: int, t0: float | None = None):
        now = time.monotonic()
        with self._cv:
            self._inflight.pop(cand.cid, None)
            if gen != self._gen:  # the state was reloaded meanwhile: this work is re-queued
                return
            self._done.append((cand, verdict))
            self.counters.update({f"fault_{k}": v for k, v in faults.items()})
            self.counters["attempts"] += attempts
            self.counters["completed"] += 1
            self.counters["accepted" if verdict.ok else "rejected"] += 1
            sub = self._submitted_at.pop(cand.cid, now)
            self._lat[0] += now - (t0 if t0 is not None else sub)
            self._lat[1] += now - sub
            self._lat[2] += 1

    def _process(self, cand: Candidate) -> tuple[Verdict, collections.Counter, int]:
        faults: collections.Counter = collections.Counter()
        reason = "exception"
        attempt = 0
        for attempt in range(1 + self.max_retries):
            if attempt and self._stop.wait(self.backoff_s * 2 ** (attempt - 1)):
                break
            try:
                return self._call(cand), faults, attempt + 1
            except TeacherError as e:
                faults[e.reason] += 1
                reason = e.reason
                if not e.retryable:
                    break
            except Exception:  # a teacher bug must not stop training: count it
                faults["exception"] += 1
                reason = "exception"
        return Verdict(False, reason), faults, attempt + 1

    def _call(self, cand: Candidate) -> Verdict:
        teacher = self.teacher
        if not self.workers or getattr(teacher, "enforces_timeout", False):
            return teacher(cand)
        # A generic teacher: run it on a daemon thread and stop waiting at the timeout. A hung
        # call keeps its thread; past 4 per worker new calls fail fast ("overloaded").
        if self._hung >= 4 * self.workers:
            raise TeacherError("overloaded", retryable=False)
        box: dict = {}

        def run():
            try:
                box["v"] = teacher(cand)
            except BaseException as e:  # handed to the waiting worker
                box["e"] = e
            finally:
                with self._cv:
                    box["finished"] = True
                    if box.get("late"):
                        self._hung -= 1

        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(self.timeout_s)
        with self._cv:
            if not box.get("finished"):
                box["late"] = True
                self._hung += 1
        if box.get("late"):
            raise TeacherError("timeout")
        if "e" in box:
            raise box["e"]
        return box["v"]

    # ------------------------------------------------------------------ checkpointing

    def state_dict(self) -> dict:
        with self._cv:
            pending = sorted(list(self._inflight.values()) + list(self._queue),
                             key=lambda c: c.cid)
            done = [[c.to_dict(), v.to_dict()] for c, v in self._done]
            counters = dict(self.counters)
        return {"pending": [c.to_dict() for c in pending], "done": done, "counters": counters}

    def load_state_dict(self, state: dict) -> None:
        now = time.monotonic()
        with self._cv:
            self._gen += 1
            self._queue = collections.deque(Candidate.from_dict(c) for c in state["pending"])
            self._inflight = {}
            self._done = [(Candidate.from_dict(c), Verdict(**v)) for c, v in state["done"]]
            self._submitted_at = {c.cid: now for c in self._queue}
            self.counters = collections.Counter(state["counters"])
            self._cv.notify_all()
        if self._queue and self.workers and not self._threads and self.teacher is not None:
            self._start()
