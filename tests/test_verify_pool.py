"""Answer checking in worker processes (tasks/verify_pool.py): a hanging check scores wrong
within the timeout and is counted, a crashing one too, and results keep their order."""

import functools
import os

import numpy as np

from frontier_rl.tasks import Prompt, Task, verify_pool
from frontier_rl.tasks.verify import math_verify_reward

HANG = r"The answer is $\boxed{9^{9^{9^{9}}}}$."  # sympy evaluates the tower: minutes


def _crash(response, answer, finished):
    if response == "crash":
        os._exit(3)  # the worker dies mid-check
    if response == "raise":
        raise RuntimeError("scorer error")
    return 1 if response == answer else 0


def test_hanging_check_scores_wrong_within_timeout_and_is_counted():
    pool = verify_pool.VerifyPool(functools.partial(math_verify_reward, require_boxed=True),
                                  workers=2, timeout_s=3.0)
    try:
        # Start the workers first: the first call also starts the forkserver (it imports sympy),
        # which on a loaded machine can take longer than a check's timeout.
        assert pool.map([(r"\boxed{1}", "1", True)] * 2).rewards.tolist() == [1, 1]
        items = ([(r"so \boxed{3}", "3", True), (HANG, "3", True), (r"\boxed{4}", "3", True),
                  ("no box", "3", True), (r"\boxed{1/2}", "0.5", True)] * 2)
        res = pool.map(items)
        # the two towers were cut off (each a timeout and a replaced worker), not waited for
        assert res.rewards.tolist() == [1, 0, 0, -1, 1] * 2
        assert (res.timeouts, res.restarts, res.crashes) == (2, 2, 0)
        # the replacement workers serve the next call
        assert pool.map(items[:1]).rewards.tolist() == [1]
    finally:
        pool.close()


def test_crash_and_raise_score_wrong_and_order_is_kept():
    pool = verify_pool.VerifyPool(_crash, workers=2, timeout_s=5.0, chunk=3)
    try:
        items = [(str(i), str(i), True) for i in range(20)]
        items[5] = ("crash", "x", True)
        items[11] = ("raise", "x", True)
        res = pool.map(items)
        want = np.ones(20, np.int8)
        want[[5, 11]] = 0
        assert res.rewards.tolist() == want.tolist()
        assert res.crashes == 2 and res.timeouts == 0
    finally:
        pool.close()


def test_task_verify_many_serial_and_pooled_agree():
    prompts = [Prompt(id=str(i), text="q", answer=str(i % 3), bucket="all") for i in range(12)]
    responses = [rf"\boxed{{{i % 2}}}" for i in range(12)]
    scorer = functools.partial(math_verify_reward, require_boxed=True)

    def verifier(p, r, f):
        return scorer(r, p.answer, f)

    serial = Task("t", [], prompts, ["all"], verifier, scorer=scorer, verify_workers=0)
    pooled = Task("t", [], prompts, ["all"], verifier, scorer=scorer, verify_workers=2,
                  verify_timeout_s=5.0)
    a, ta = serial.verify_many(prompts, responses, [True] * 12)
    pooled.verify_many(prompts[:2], responses[:2], [True] * 2)  # the workers started (above)
    b, tb = pooled.verify_many(prompts, responses, [True] * 12)
    assert a.tolist() == b.tolist() and ta == tb == 0
    assert b.tolist()[:3] == [1, 1, 0]  # answers 0, 1, 2 vs boxed 0, 1, 0
