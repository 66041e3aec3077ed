"""Supervised warm start on the easy slice of the task.

The policy learns the answer format (and the easy problems) by next-token cross-entropy on
(prompt, reference response + EOS) pairs, the loss counted on the response tokens only. The
result is saved in Hugging Face format in DIR/warmstart (weights, config, tokenizer), so reruns
and every run of a comparison start from the same cached policy.

When it stops is decided by held-out accuracy, not by a step count: supervised learning of the
easy slice has a long loss plateau and then a sudden drop whose timing moves with the seed, the
pool size and even the machine's float rounding, so a fixed number of steps lands the policy in
a different regime each time. Every `check_every` steps the policy decodes greedily a held-out
slice of the warm-start pairs (prompts never trained on) and training stops as soon as the exact-
match accuracy reaches `target_acc` and the next-harder bucket, which it never sees, is solved
at least `frontier_min` of the time (how far a tiny policy generalises to longer prompts also
swings with the seed, from 0% to a third); reaching the step cap first is an error, never a
silently different starting point.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from frontier_rl.rl.train_step import sequence_logps
from frontier_rl.rollout.context import encode_prompt


def make_batches(tokenizer, pairs, *, batch_size: int, seed: int):
    """Yields (tokens, valid, loss_mask) batches forever, left-padded prompts."""
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id
    encoded = [(encode_prompt(tokenizer, p), tokenizer.encode(r, add_special_tokens=False) + [eos])
               for p, r in pairs]
    plen = max(len(p) for p, _ in encoded)
    rlen = max(len(r) for _, r in encoded)
    n = len(encoded)
    if n < batch_size:
        raise ValueError(f"{n} warm-start pairs < batch_size={batch_size}: no batch can be made")
    tokens = np.full((n, plen + rlen), pad, np.int32)
    valid = np.zeros((n, plen + rlen), np.int32)
    loss_mask = np.zeros((n, plen + rlen - 1), np.float32)
    for i, (p, r) in enumerate(encoded):
        tokens[i, plen - len(p):plen] = p
        tokens[i, plen:plen + len(r)] = r
        valid[i, plen - len(p):plen + len(r)] = 1
        loss_mask[i, plen - 1:plen - 1 + len(r)] = 1.0
    rng = np.random.default_rng(seed)
    while True:
        perm = rng.permutation(n)
        for s in range(0, n - batch_size + 1, batch_size):
            b = perm[s:s + batch_size]
            yield tokens[b], valid[b], loss_mask[b]


@dataclasses.dataclass(frozen=True)
class Result:
    params: object
    loss: float  # EMA of the training loss when it stopped
    steps: int
    check_acc: float  # held-out greedy exact-match accuracy at the last check (nan: none)
    reached: bool  # the accuracy target was reached (True when there is no target)
    checks: tuple[tuple, ...] = ()  # (step, loss EMA, accuracy, frontier accuracy) per check
    frontier_acc: float = float("nan")  # held-out greedy exact match on the frontier bucket


def split_check(pairs: list[tuple[str, str]], n_check: int, seed: int
                ) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(train pairs, held-out check pairs): n_check distinct prompts, every occurrence of which
    is removed from the training pairs, so the check measures generalisation."""
    by_prompt: dict[str, str] = {}
    for p, r in pairs:
        by_prompt.setdefault(p, r)
    prompts = sorted(by_prompt)
    n_check = min(n_check, len(prompts) // 2)
    if n_check <= 0:
        return list(pairs), []
    picked = np.random.default_rng(seed).choice(len(prompts), n_check, replace=False)
    held = {prompts[i] for i in picked}
    check = [(p, by_prompt[p]) for p in sorted(held)]
    return [(p, r) for p, r in pairs if p not in held], check


def exact_match(sampler, params, tokenizer, pairs: list[tuple[str, str]]) -> float:
    """Share of pairs whose greedy response is exactly the reference response (then EOS)."""
    from frontier_rl.rollout.context import decode_responses

    ids = [encode_prompt(tokenizer, p) for p, _ in pairs]
    res = sampler.sample(params, ids, 1, greedy=True)
    texts = decode_responses(tokenizer, res)
    ok = [t == r and bool(f) for t, (_, r), f in zip(texts, pairs, res.finished, strict=True)]
    return float(np.mean(ok)) if ok else float("nan")


def train(graphdef, params, tokenizer, pairs, *, steps: int, batch_size: int,
          learning_rate: float, warmup_steps: int, seed: int, target_loss: float = 0.0,
          check: Callable[[object], float] | None = None, check_every: int = 100,
          target_acc: float = 0.0, frontier_check: Callable[[object], float] | None = None,
          frontier_min: float = 0.0, progress=None) -> Result:
    """Trains on `pairs` for at most `steps` steps; returns a `Result`.

    Linear warmup then cosine decay to 5% over `steps` (the cap). With `check` (params ->
    held-out accuracy) and `target_acc` > 0, training stops at the first check (every
    `check_every` steps) whose accuracy is >= target_acc and, with `frontier_check`, whose
    accuracy on the next-harder bucket (never trained on) is >= frontier_min: the regime RL
    needs, easy prompts solved and the frontier solved sometimes. `Result.reached` says whether
    it did.
    Optionally it also stops once the loss EMA falls below `target_loss` (0 disables).
    """
    schedule = optax.warmup_cosine_decay_schedule(
        0.0, learning_rate, max(1, min(warmup_steps, steps - 1)), max(steps, 2),
        end_value=learning_rate * 0.05)
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule, b2=0.98))
    opt_state = tx.init(params)

    def loss_fn(params, tokens, valid, mask):
        logp, _ = sequence_logps(nnx.merge(graphdef, params), tokens, valid)
        return -jnp.sum(logp * mask) / jnp.maximum(jnp.sum(mask), 1.0)

    @jax.jit
    def step(params, opt_state, tokens, valid, mask):
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens, valid, mask)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    batches = make_batches(tokenizer, pairs, batch_size=batch_size, seed=seed)
    ema, losses, checks = None, [], []
    acc, front, reached = float("nan"), float("nan"), not (check is not None and target_acc > 0)
    i = 0
    for i in range(1, steps + 1):
        params, opt_state, loss = step(params, opt_state, *next(batches))
        losses.append(loss)
        check_due = check is not None and (i % check_every == 0 or i == steps)
        if i % 10 == 0 or i == steps or check_due:
            for x in jax.device_get(losses):
                ema = float(x) if ema is None else 0.95 * ema + 0.05 * float(x)
            losses = []
        if check_due:
            acc = float(check(params))
            if frontier_check is not None:
                front = float(frontier_check(params))
            checks.append((i, float(ema), acc, front))
            if progress is not None:
                progress(i, ema, acc, front)
            if target_acc > 0 and acc >= target_acc and (
                    frontier_check is None or front >= frontier_min):
                reached = True
                break
        elif progress is not None and (i % 100 == 0 or i == steps):
            progress(i, ema, None, None)
        if target_loss > 0 and i % 10 == 0 and ema < target_loss:
            if progress is not None:
                progress(i, ema, None, None)
            break
    return Result(params, float(ema if ema is not None else "nan"), i, acc, reached,
                  tuple(checks), front)
