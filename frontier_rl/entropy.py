"""Prompt entropy (HIVE Stage 2): V(x) = mean over prompt positions t = 2..L of the entropy of
the policy's full-vocabulary next-token distribution p(. | x_<t), under the current parameters.

One jitted forward pass over a left-padded batch; padding is excluded, log-softmax is taken in
float32 and reduced at once; prompt lengths and batch sizes are padded to buckets so the pass
compiles once per bucket.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from frontier_rl.accounting import abstract, compiled_flops
from frontier_rl.rl.train_step import sequence_logps
from frontier_rl.rollout.sampler import bucket, left_pad


class PromptEntropy:
    def __init__(self, graphdef: nnx.GraphDef, *, pad_id: int,
                 prompt_buckets: Sequence[int] = (16, 32, 64, 128, 256, 512),
                 batch_buckets: Sequence[int] = (64, 256, 1024)):
        self.graphdef = graphdef
        self.pad_id = pad_id
        self.prompt_buckets = tuple(prompt_buckets)
        self.batch_buckets = tuple(batch_buckets)
        self.compile_count = 0
        self._fn = jax.jit(self._impl)

    def _impl(self, params, tokens, valid):
        self.compile_count += 1
        return self._entropy(params, tokens, valid)

    def _entropy(self, params, tokens, valid):
        _, entropy = sequence_logps(nnx.merge(self.graphdef, params), tokens, valid)
        # Target t is predicted from x_<t; count targets 2..L, whose context is a real token.
        mask = (valid[:, 1:] * valid[:, :-1]).astype(jnp.float32)
        return jnp.sum(entropy * mask, axis=-1) / jnp.maximum(jnp.sum(mask, axis=-1), 1.0)

    def __call__(self, params, prompts: Sequence[Sequence[int]]) -> np.ndarray:
        """Mean next-token entropy (nats) per prompt, float32 [len(prompts)]."""
        n = len(prompts)
        if n == 0:
            return np.zeros((0,), np.float32)
        rows, plen = self.padded_shape([len(p) for p in prompts])
        tokens, valid = left_pad(prompts, plen, rows, self.pad_id)
        return np.asarray(self._fn(params, tokens, valid))[:n]

    def padded_shape(self, prompt_lens: Sequence[int]) -> tuple[int, int]:
        """(rows, prompt length) of the batch a call with prompts of these lengths runs."""
        rows = bucket(len(prompt_lens), self.batch_buckets)
        return rows, bucket(max(prompt_lens), self.prompt_buckets)

    def cost_analysis(self, params, rows: int, plen: int) -> float:
        """XLA FLOPs of one pass at a padded shape (compiled for analysis only, never run)."""
        x = jax.ShapeDtypeStruct((rows, plen), jnp.int32)
        return compiled_flops(self._entropy, abstract(params), x, x)
