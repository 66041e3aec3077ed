"""Prompt entropy (HIVE Stage 2): V(x) = mean over prompt positions t = 2..L of the entropy of
the policy's full-vocabulary next-token distribution p(. | x_<t), under the current parameters.

One jitted pass over a left-padded batch; padding is excluded and the entropies are taken in
float32 from the final hidden states, `chunk` positions at a time (`sequence_logps`), so no
[rows, L, vocab] array is built. Rows run `micro_batch` at a time (a `lax.map` inside the one
jitted function) and, on a mesh, are split over its ("data", "fsdp") axes. Prompt lengths and
batch sizes are padded to buckets (rows then to a multiple of the micro-batch), so the pass
compiles once per bucket.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from frontier_rl.fit.accounting import abstract, compiled_flops
from frontier_rl.fit.shapes import bucket
from frontier_rl.models.transformer import cost_model
from frontier_rl.rl import sharding
from frontier_rl.rl.train_step import compute_dtype, sequence_logps
from frontier_rl.rollout.sampler import left_pad
from frontier_rl.run import distributed


class PromptEntropy:
    """`micro_batch`: rows per forward (0 = the whole batch at once), rounded up to a multiple
    of the mesh's row shards; `chunk`: sequence positions per logits chunk (0 = all)."""

    def __init__(self, graphdef: nnx.GraphDef, *, pad_id: int,
                 prompt_buckets: Sequence[int] = (16, 32, 64, 128, 256, 512),
                 batch_buckets: Sequence[int] = (64, 256, 1024),
                 mesh: Mesh | None = None, micro_batch: int = 256, chunk: int = 512):
        if isinstance(micro_batch, bool) or not isinstance(micro_batch, int) or micro_batch < 0:
            raise ValueError(f"micro_batch={micro_batch!r} must be an int >= 0 (0 = all rows)")
        self.graphdef = graphdef
        self.pad_id = pad_id
        self.prompt_buckets = tuple(prompt_buckets)
        self.batch_buckets = tuple(batch_buckets)
        self.mesh = mesh
        self.row_multiple = 1 if mesh is None else sharding.row_multiple(mesh)
        self.micro_batch = -(-micro_batch // self.row_multiple) * self.row_multiple
        self.chunk = chunk
        self.compile_count = 0
        self._built_for = ()
        self._param_shardings = None
        self._fn = jax.jit(self._impl) if mesh is None else None

    def _build(self, params) -> None:
        struct = jax.tree.structure(params)
        if self.mesh is None or self._built_for == (struct,):
            return
        rows = sharding.batch_sharding(self.mesh)
        self._param_shardings = sharding.param_shardings(params, self.mesh)
        self._fn = jax.jit(self._impl, in_shardings=(self._param_shardings, rows, rows),
                           out_shardings=rows)
        self._built_for = (struct,)

    def _impl(self, params, tokens, valid):
        self.compile_count += 1
        model = nnx.merge(self.graphdef, params)
        dtype = compute_dtype(model)
        per_layer = self.mesh is not None and getattr(model.cfg, "scan_layers", False)
        if self.mesh is not None and not per_layer:  # gathered once, for all row groups
            model = nnx.merge(self.graphdef, sharding.gather_params(params, self.mesh, dtype))

        def forward(tokens, valid):
            # A scanned model gathers each layer as it runs (sharding.LayerGather), per row
            # group: a device never holds the whole gathered model (Qwen2.5-Math-7B at fsdp=8:
            # 15.2 GiB of bfloat16 weights beside the row group's activations, which put the
            # pass over JAX's share of an 80 GB GPU beside SGLang, by `fit --target`).
            m = (sharding.gathered_model(self.graphdef, params, self.mesh, dtype)
                 if per_layer else model)
            return self._entropy(m, tokens, valid)

        rows = tokens.shape[0]
        if not self.micro_batch or rows <= self.micro_batch:
            return forward(tokens, valid)
        k = rows // self.micro_batch
        parts = sharding.split_rows((tokens, valid), k)
        if self.mesh is not None:
            parts = jax.lax.with_sharding_constraint(
                parts, sharding.stacked_batch_sharding(self.mesh))
        return sharding.merge_rows(jax.lax.map(lambda x: forward(*x), parts), k)

    def _entropy(self, model, tokens, valid, unroll: bool = False):
        _, entropy = sequence_logps(model, tokens, valid, chunk=self.chunk, unroll=unroll)
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
        if self.mesh is not None:
            self._build(params)
            params = jax.device_put(params, self._param_shardings)
            rows_sharding = sharding.batch_sharding(self.mesh)
            tokens = distributed.to_global(tokens, rows_sharding)
            valid = distributed.to_global(valid, rows_sharding)
        return np.asarray(distributed.to_host(self._fn(params, tokens, valid)))[:n]

    def _rows(self, n: int) -> int:
        rows = -(-n // self.row_multiple) * self.row_multiple
        if self.micro_batch and rows > self.micro_batch:
            rows = -(-rows // self.micro_batch) * self.micro_batch
        return rows

    def padded_shape(self, prompt_lens: Sequence[int]) -> tuple[int, int]:
        """(rows, prompt length) of the batch a call with prompts of these lengths runs."""
        rows = self._rows(bucket(len(prompt_lens), self.batch_buckets))
        return rows, bucket(max(prompt_lens), self.prompt_buckets)

    def lower(self, params, rows: int, plen: int) -> jax.stages.Lowered:
        """The pass lowered for `rows` prompts (padded as a call pads them) of `plen` tokens,
        with parameters shaped like `params` (ShapeDtypeStructs will do); nothing is
        allocated."""
        self._build(params)
        x = jax.ShapeDtypeStruct((self._rows(rows), plen), jnp.int32)
        return self._fn.lower(abstract(params), x, x)

    def cost_analysis(self, params, rows: int, plen: int) -> float:
        """XLA FLOPs of one pass at a padded shape (compiled for analysis only, never run):
        the logical computation, unsharded, in one piece."""
        x = jax.ShapeDtypeStruct((rows, plen), jnp.int32)
        return compiled_flops(
            lambda p, t, v: self._entropy(cost_model(self.graphdef, p), t, v, unroll=True),
            abstract(params), x, x)
