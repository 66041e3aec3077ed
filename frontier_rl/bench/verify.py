"""`frontier-rl bench verify [--repeats=N] [--json]`: answer-checking throughput.

Scores a fixed set of 512 generated responses that look like long chain-of-thought math
solutions (about 2,500 characters of LaTeX each, the final answer in \\boxed{}: integers,
fractions, radicals, expressions and intervals against references written differently, a
quarter of them wrong and a few without a box) with math-verify, the papers' reward, and
reports responses per second in this process (`workers_0`, serial, no timeout) and in the
process pool (tasks/verify_pool.py) with 1 and 2 worker processes. The pool's workers are
started (and their imports paid) before the timed runs. Each figure is the median of `repeats`
runs.
"""

from __future__ import annotations

import functools
import statistics
import time

import numpy as np

from frontier_rl.tasks.verify import math_verify_reward
from frontier_rl.tasks.verify_pool import VerifyPool

# (answer the response boxes, the reference): the same value written two ways
PAIRS = [("42", "42"), ("\\frac{3}{4}", "0.75"), ("\\sqrt{2}/2", "\\frac{\\sqrt{2}}{2}"),
         ("2x+1", "1+2x"), ("(1, 3]", "(1,3]"), ("\\dfrac{7}{2}", "3.5"), ("-5", "-5"),
         ("3\\pi", "3 \\pi"), ("\\frac{1}{6}", "1/6"), ("12", "12.0")]
STEP = ("Let $f(x) = {a}x^2 + {b}x + {c}$. We compute $f({d}) = {a}\\cdot {d}^2 + {b}\\cdot {d} "
        "+ {c} = {v}$, and since $\\frac{{{v}}}{{{d}}}$ must be an integer we check the cases "
        "$d \\in \\{{1, 2, \\ldots, {d}\\}}$ one by one. ")


def responses(n: int = 512, seed: int = 0, chars: int = 2500) -> list[tuple[str, str, bool]]:
    """(response, reference, finished) triples: long LaTeX reasoning ending in \\boxed{}."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        parts, size = [], 0
        while size < chars:
            a, b, c, d = (int(x) for x in rng.integers(1, 20, 4))
            s = STEP.format(a=a, b=b, c=c, d=d, v=a * d * d + b * d + c)
            parts.append(s)
            size += len(s)
        boxed, ref = PAIRS[i % len(PAIRS)]
        if rng.random() < 0.25:
            boxed = boxed + "+1"  # wrong
        tail = f"Therefore the answer is $\\boxed{{{boxed}}}$." if i % 17 else "So that is it."
        out.append(("".join(parts) + tail, ref, True))
    return out


def _rate(pool: VerifyPool, items, repeats: int) -> tuple[float, float]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        pool.map(items)
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    return len(items) / med, med


def run(work: dict | None = None, repeats: int = 3, workers: tuple[int, ...] = (0, 1, 2),
        n: int = 512) -> dict:
    """Responses per second with 0 (in-process), 1 and 2 worker processes."""
    items = responses(n)
    scorer = functools.partial(math_verify_reward, require_boxed=True)
    out = {"bench": "verify", "responses": len(items),
           "mean_chars": float(np.mean([len(r) for r, _, _ in items])), "repeats": repeats}
    for w in workers:
        pool = VerifyPool(scorer, workers=w, timeout_s=30.0)
        try:
            res = pool.map(items)  # warm-up: workers started, gold answers parsed
            rate, med = _rate(pool, items, repeats)
        finally:
            pool.close()
        out[f"workers_{w}_responses_per_s"] = rate
        out[f"workers_{w}_median_s"] = med
        out[f"workers_{w}_correct"] = int(np.sum(res.rewards == 1))
        out[f"workers_{w}_timeouts"] = res.timeouts
    return out
