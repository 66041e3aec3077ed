"""Held-out evaluation: Avg@k, pass@k, invalid rate, response length and greedy accuracy per
bucket (a difficulty bucket, or a benchmark's name for an eval suite,
frontier_rl/evaluation/suite.py).

Avg@k (HeaPA's metric, Avg@16 there; k = `config.eval.k`, 8 by default) is the mean correctness
of k samples per prompt at `config.eval.temperature`, `config.eval.top_p` and `config.eval.top_k`
(0.7 / 0.7 / off by default; HeaPA's protocol adds top-k 50), averaged over the prompts of a
bucket; pass@k is the share of prompts with at least one correct sample among the k; invalid@k
the share of samples with no gradable answer (or cut at the token cap); response_len the mean
generated tokens (EOS included). Beside them, `pass@<j>_unbiased_n<k>`: Chen et al.'s unbiased
pass@j from the same k samples (evaluation/passk.py; j = `config.eval.pass_k`, at most k, 0 = k,
where it equals pass@k), averaged over the prompts of a bucket.
Greedy accuracy is one argmax decode per prompt. Evaluation samples are not charged to the
rollout budget. Seeds are fixed per call site, so the same parameters give the same figures.
Responses are checked by `verify_many` when given (a task's process pool, whose timeouts are
counted under `eval/verify_timeouts`), else one by one by `verify`.

Layer "rollout": may import base, models, tasks, selection, rl and rollout; suite.py, the
`frontier-rl eval` command, is a run (layer "runs").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np

from frontier_rl.evaluation import passk
from frontier_rl.rollout import engine as engine_lib
from frontier_rl.rollout.context import decode_responses, encode_prompt
from frontier_rl.rollout.sampler import Sampler

CHUNK_ROWS = 1024


def _outcomes(sampler, params, tokenizer, prompts, verify, verify_many, n, *, seed, temperature,
              top_p, top_k, greedy, max_new_tokens):
    """(outcomes int8 [P, n], lengths int32 [P, n], checks that timed out)."""
    ids = [encode_prompt(tokenizer, p.text) for p in prompts]
    per_chunk = max(1, CHUNK_ROWS // n)
    out = np.zeros((len(prompts), n), np.int8)
    lengths = np.zeros((len(prompts), n), np.int32)
    timeouts = 0
    for c in range(0, len(prompts), per_chunk):
        res = engine_lib.generate(sampler, params, ids[c:c + per_chunk], n, engine_lib.Sampling(
            temperature=temperature, top_p=top_p, top_k=top_k, greedy=greedy,
            max_new_tokens=max_new_tokens, seed=seed + c))
        texts = decode_responses(tokenizer, res)
        rows = [prompts[c + r // n] for r in range(len(texts))]
        finished = [bool(f) for f in res.finished]
        if verify_many is not None:
            rewards, t = verify_many(rows, texts, finished)
            timeouts += t
        else:
            rewards = [verify(p, text, f) for p, text, f in zip(rows, texts, finished,
                                                                strict=True)]
        block = slice(c, c + len(texts) // n)
        out[block] = np.asarray(rewards, np.int8).reshape(-1, n)
        lengths[block] = np.asarray(res.lengths, np.int32).reshape(-1, n)
    return out, lengths, timeouts


def evaluate(
    sampler: Sampler | engine_lib.Engine,
    params,
    tokenizer,
    prompts: Sequence,
    verify: Callable[[object, str, bool], int] | None,
    *,
    k: int = 8,
    temperature: float = 0.7,
    top_p: float = 0.7,
    top_k: int = -1,
    greedy: bool = True,
    seed: int = 0,
    per_prompt: bool = False,
    verify_many: Callable | None = None,
    max_new_tokens: int | None = None,
    pass_k: int = 0,
) -> dict[str, float] | tuple[dict[str, float], np.ndarray]:
    """`eval/avg@k/<bucket>`, `eval/pass@k/<bucket>`, `eval/pass@j_unbiased_nk/<bucket>`,
    `eval/invalid@k/<bucket>`, `eval/response_len/<bucket>`, `eval/greedy/<bucket>` and the same
    for `all`.

    A bucket is one that some prompt is in: a bucket without prompts gets no metric (its
    accuracy is undefined, never 0.0) and `all` pools the prompts there are.
    `top_k` is the sampling top-k of the k samples (-1 = off), not their count; `pass_k` the j
    of the unbiased pass@j from them (1 <= j <= k; 0 = k).
    With per_prompt, also the number of correct samples (of k) of each prompt, int [P]: what a
    comparison resamples for its intervals (stats.py)."""
    if verify is None and verify_many is None:
        raise ValueError("evaluate needs verify or verify_many")
    pass_k = pass_k or k
    if not 1 <= pass_k <= k:
        raise ValueError(f"pass_k={pass_k} is not allowed: an integer in [0, k={k}] (0 = k)")
    kw = dict(verify=verify, verify_many=verify_many, max_new_tokens=max_new_tokens)
    sampled, lengths, timeouts = _outcomes(sampler, params, tokenizer, prompts, n=k, seed=seed,
                                           temperature=temperature, top_p=top_p, top_k=top_k,
                                           greedy=False, **kw)
    greedy_out = None
    if greedy:
        greedy_out, _, t = _outcomes(sampler, params, tokenizer, prompts, n=1, seed=seed,
                                     temperature=1.0, top_p=1.0, top_k=-1, greedy=True, **kw)
        timeouts += t
    by_bucket: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(prompts):
        by_bucket[p.bucket].append(i)
    by_bucket["all"] = list(range(len(prompts)))
    correct = np.sum(sampled == 1, axis=1).astype(np.int32)
    unbiased = passk.pass_at_k(k, correct, pass_k)
    metrics = {}
    for b, idx in by_bucket.items():
        s = sampled[idx]
        metrics[f"eval/avg@{k}/{b}"] = 100.0 * float(np.mean(s == 1))
        metrics[f"eval/pass@{k}/{b}"] = 100.0 * float(np.mean(np.any(s == 1, axis=1)))
        metrics[f"eval/{passk.metric(pass_k, k)}/{b}"] = 100.0 * float(np.mean(unbiased[idx]))
        metrics[f"eval/invalid@{k}/{b}"] = 100.0 * float(np.mean(s == -1))
        metrics[f"eval/response_len/{b}"] = float(np.mean(lengths[idx]))
        if greedy_out is not None:
            metrics[f"eval/greedy/{b}"] = 100.0 * float(np.mean(greedy_out[idx] == 1))
    metrics["eval/verify_timeouts"] = float(timeouts)
    if per_prompt:
        return metrics, correct
    return metrics
