"""Supervised warm start on the easy slice of the task.

The policy learns the answer format (and the easy problems) by next-token cross-entropy on
(prompt, reference answer + EOS) pairs, the loss counted on the answer tokens only. The result
is saved in Hugging Face format in DIR/warmstart (weights, config, tokenizer), so reruns and
every run of a comparison start from the same cached policy.
"""

from __future__ import annotations

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


def train(graphdef, params, tokenizer, pairs, *, steps: int, batch_size: int,
          learning_rate: float, warmup_steps: int, seed: int, target_loss: float = 0.0,
          progress=None):
    """Returns (params, final loss EMA, steps taken).

    Linear warmup then cosine decay to 5% over `steps`. Learning on the arithmetic slice has a
    long plateau and then a sudden drop, whose timing varies with the data and seed; the decay
    helps the drop happen. Optionally the run stops early once the loss EMA (checked every 10
    steps) falls below `target_loss` (0 disables): trained much further, the policy fits the
    easy slice perfectly and stops generalising to the next bucket.
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
    ema, losses = None, []
    i = 0
    for i in range(1, steps + 1):
        params, opt_state, loss = step(params, opt_state, *next(batches))
        losses.append(loss)
        if i % 10 == 0 or i == steps:
            for x in jax.device_get(losses):
                ema = float(x) if ema is None else 0.95 * ema + 0.05 * float(x)
            losses = []
            if progress is not None and (i % 100 == 0 or i == steps):
                progress(i, ema)
            if target_loss > 0 and ema < target_loss:
                if progress is not None:
                    progress(i, ema)
                break
    return params, float(ema if ema is not None else "nan"), i
