"""Held-out evaluation: Avg@k and greedy accuracy per difficulty bucket.

Avg@k (HeaPA's metric, Avg@16 there; k = `config.eval.k`, 8 by default) is the mean correctness
of k samples per prompt at `config.eval.temperature` and `config.eval.top_p` (0.7 / 0.7,
HeaPA's protocol), averaged over the prompts of a bucket.
Greedy accuracy is one argmax decode per prompt. Evaluation samples are not charged to the
rollout budget. Seeds are fixed per call site, so the same parameters give the same figures.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np

from frontier_rl.rollout.context import decode_responses, encode_prompt
from frontier_rl.rollout.sampler import Sampler

CHUNK_ROWS = 1024


def _outcomes(sampler, params, tokenizer, prompts, verify, n, *, seed, temperature, top_p,
              greedy):
    ids = [encode_prompt(tokenizer, p.text) for p in prompts]
    per_chunk = max(1, CHUNK_ROWS // n)
    out = np.zeros((len(prompts), n), np.int8)
    for c in range(0, len(prompts), per_chunk):
        res = sampler.sample(params, ids[c:c + per_chunk], n, seed=seed + c,
                             temperature=temperature, top_p=top_p, greedy=greedy)
        texts = decode_responses(tokenizer, res)
        for r, text in enumerate(texts):
            i = c + r // n
            out[i, r % n] = verify(prompts[i], text, bool(res.finished[r]))
    return out


def evaluate(
    sampler: Sampler,
    params,
    tokenizer,
    prompts: Sequence,
    verify: Callable[[object, str, bool], int],
    *,
    k: int = 8,
    temperature: float = 0.7,
    top_p: float = 0.7,
    greedy: bool = True,
    seed: int = 0,
    per_prompt: bool = False,
) -> dict[str, float] | tuple[dict[str, float], np.ndarray]:
    """`eval/avg@k/<bucket>`, `eval/greedy/<bucket>`, `eval/invalid@k/<bucket>` and `/all`.

    With per_prompt, also the number of correct samples (of k) of each prompt, int [P]: what a
    comparison resamples for its intervals (stats.py)."""
    sampled = _outcomes(sampler, params, tokenizer, prompts, verify, k, seed=seed,
                        temperature=temperature, top_p=top_p, greedy=False)
    greedy_out = None
    if greedy:
        greedy_out = _outcomes(sampler, params, tokenizer, prompts, verify, 1, seed=seed,
                               temperature=1.0, top_p=1.0, greedy=True)
    by_bucket: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(prompts):
        by_bucket[p.bucket].append(i)
    by_bucket["all"] = list(range(len(prompts)))
    metrics = {}
    for b, idx in by_bucket.items():
        s = sampled[idx]
        metrics[f"eval/avg@{k}/{b}"] = 100.0 * float(np.mean(s == 1))
        metrics[f"eval/pass@{k}/{b}"] = 100.0 * float(np.mean(np.any(s == 1, axis=1)))
        metrics[f"eval/invalid@{k}/{b}"] = 100.0 * float(np.mean(s == -1))
        if greedy_out is not None:
            metrics[f"eval/greedy/{b}"] = 100.0 * float(np.mean(greedy_out[idx] == 1))
    if per_prompt:
        return metrics, np.sum(sampled == 1, axis=1).astype(np.int32)
    return metrics
