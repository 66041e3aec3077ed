"""Answer checking in worker processes, with a per-response timeout.

math-verify hands answers to sympy, and some answers (a tower of powers, a huge factorial, a
pathological LaTeX string) take minutes or never return. In the trainer's process that would
stall the step, and math-verify's own timeouts use signal.alarm, which only works on the main
thread. So responses are scored by `VerifyPool(scorer, workers, timeout_s)`:

- each worker process runs `scorer(response, answer, finished) -> 1 | 0 | -1` on chunks of
  responses and reports every result as soon as it has it;
- a worker that reports nothing for `timeout_s` seconds is killed and replaced; the response it
  was on scores REWARD_WRONG and is counted as a timeout, the rest of its chunk is re-queued;
- a worker that dies (segfault, out of memory) or a scorer that raises: that response scores
  REWARD_WRONG and is counted as a crash;
so one bad answer costs at most `timeout_s` and never stops the step.

Workers are forked from a forkserver that has imported the scorer's modules once (never from the
trainer itself: forking a process that runs JAX threads can deadlock), so a replacement starts in
milliseconds. `scorer` must be picklable: a module-level function or a functools.partial of one
(e.g. partial(math_verify_reward, require_boxed=True)). workers=0 scores in this process, in
order, with no timeout.
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import math
import multiprocessing as mp
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait

import numpy as np

from frontier_rl.tasks.rewards import REWARD_WRONG

Scorer = Callable[[str, str, bool], int]
Item = tuple[str, str, bool]  # (response, reference answer, finished)

_PRELOAD = ["frontier_rl.tasks.verify", "math_verify", "sympy"]


@dataclasses.dataclass
class PoolResult:
    rewards: np.ndarray  # int8 [n]
    timeouts: int = 0  # responses whose check ran past timeout_s (scored wrong)
    crashes: int = 0  # responses whose check raised or killed its worker (scored wrong)
    restarts: int = 0  # workers replaced


def _work(conn, scorer: Scorer) -> None:
    """Worker loop: receives [(index, item), ...], sends (index, reward, crashed) per item."""
    while True:
        try:
            chunk = conn.recv()
        except EOFError:
            return
        if chunk is None:
            return
        for i, (response, answer, finished) in chunk:
            try:
                out = (i, int(scorer(response, answer, bool(finished))), False)
            except Exception:  # a scorer error on odd input means "not correct"
                out = (i, REWARD_WRONG, True)
            conn.send(out)


@dataclasses.dataclass
class _Worker:
    proc: mp.process.BaseProcess
    conn: object
    inflight: collections.deque  # indices sent and not answered, in the order they run
    deadline: float = math.inf


class VerifyPool:
    """`pool.map(items)` scores [(response, answer, finished), ...] -> PoolResult."""

    def __init__(self, scorer: Scorer, workers: int = 2, timeout_s: float = 10.0,
                 chunk: int = 16):
        if workers < 0:
            raise ValueError(f"workers={workers} must be >= 0")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s={timeout_s} must be > 0")
        self.scorer = scorer
        self.workers = workers
        self.timeout_s = float(timeout_s)
        self.chunk = max(1, int(chunk))
        self.totals = collections.Counter()
        self._pool: list[_Worker] = []
        self._ctx = None
        if workers:
            self._ctx = mp.get_context("forkserver")
            self._ctx.set_forkserver_preload(_PRELOAD)

    def _spawn(self) -> _Worker:
        parent, child = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(target=_work, args=(child, self.scorer), daemon=True)
        proc.start()
        child.close()
        return _Worker(proc, parent, collections.deque())

    def _kill(self, w: _Worker) -> None:
        try:
            w.proc.kill()
            w.proc.join(timeout=5)
        except (OSError, ValueError):
            pass
        w.conn.close()

    def map(self, items: Sequence[Item]) -> PoolResult:
        n = len(items)
        out = PoolResult(np.zeros(n, np.int8))
        if n == 0:
            return out
        if not self.workers:
            for i, (response, answer, finished) in enumerate(items):
                try:
                    out.rewards[i] = self.scorer(response, answer, bool(finished))
                except Exception:
                    out.rewards[i] = REWARD_WRONG
                    out.crashes += 1
            self._count(out)
            return out
        while len(self._pool) < self.workers:
            self._pool.append(self._spawn())
        todo = collections.deque(range(n))
        done = np.zeros(n, bool)
        size = max(1, min(self.chunk, math.ceil(n / (2 * self.workers))))
        remaining = n
        while remaining:
            for k, w in enumerate(self._pool):
                if not w.inflight and todo:
                    take = [todo.popleft() for _ in range(min(size, len(todo)))]
                    if not w.proc.is_alive():  # died while idle (killed from outside)
                        self._kill(w)
                        w = self._pool[k] = self._spawn()
                        out.restarts += 1
                    w.conn.send([(i, items[i]) for i in take])
                    w.inflight.extend(take)
                    w.deadline = time.monotonic() + self.timeout_s
            busy = [w for w in self._pool if w.inflight]
            wait_s = max(0.0, min(w.deadline for w in busy) - time.monotonic())
            ready = set(wait([w.conn for w in busy], timeout=wait_s))
            now = time.monotonic()
            for k, w in enumerate(self._pool):
                if not w.inflight:
                    continue
                if w.conn in ready:
                    try:
                        while w.conn.poll():
                            i, reward, crashed = w.conn.recv()
                            out.rewards[i] = reward
                            out.crashes += int(crashed)
                            done[i] = True
                            remaining -= 1
                            w.inflight.remove(i)
                            w.deadline = now + self.timeout_s
                        continue
                    except (EOFError, OSError):  # the worker died on its current response
                        lost, kind = w.inflight.popleft(), "crashes"
                elif now >= w.deadline:
                    lost, kind = w.inflight.popleft(), "timeouts"
                else:
                    continue
                out.rewards[lost] = REWARD_WRONG
                setattr(out, kind, getattr(out, kind) + 1)
                done[lost] = True
                remaining -= 1
                todo.extendleft(reversed([i for i in w.inflight if not done[i]]))
                self._kill(w)
                self._pool[k] = self._spawn()
                out.restarts += 1
        self._count(out)
        return out

    def _count(self, out: PoolResult) -> None:
        self.totals.update(responses=len(out.rewards), timeouts=out.timeouts,
                           crashes=out.crashes, restarts=out.restarts)

    def close(self) -> None:
        for w in self._pool:
            try:
                w.conn.send(None)
            except (OSError, ValueError):
                pass
            self._kill(w)
        self._pool = []


_POOLS: dict[tuple, VerifyPool] = {}


def shared_pool(scorer: Scorer, workers: int, timeout_s: float) -> VerifyPool:
    """One pool per (scorer, workers, timeout) in this process: the rollouts and the evaluation
    of a run share their workers. Closed at exit."""
    key = (repr(scorer), workers, float(timeout_s))
    pool = _POOLS.get(key)
    if pool is None:
        pool = _POOLS[key] = VerifyPool(scorer, workers, timeout_s)
    return pool


@atexit.register
def _close_all() -> None:
    for pool in _POOLS.values():
        pool.close()
    _POOLS.clear()
