"""Decoder-only NNX language model covering Qwen3, Qwen2/2.5 and Llama.

The maths follows Hugging Face's PyTorch modelling code line by line (RMSNorm in float32
with the weight applied after casting back, rotate-half RoPE with float32 frequencies,
float32 softmax) so that converted checkpoints reproduce HF logits to ~1e-5 in float32.
Attribute names mirror HF (`layers[i].self_attn.q_proj`, ...) so that hf.py can map
parameters by name. Attention is grouped-query attention without materialising repeated
key/value heads: on XLA the maths of `jax.nn.dot_product_attention`'s XLA path with each kv
head's query heads as one block of rows (`_attend_grouped`), on cuDNN its fused kernel
(`cfg.attention` picks).

Precision: parameters are stored in `cfg.param_dtype` (the float32 master weights an optimizer
updates) and cast to the compute dtype `cfg.dtype` inside each module's forward, so a bfloat16
run computes in bfloat16 while its lr-1e-6 updates still land. Logits are always float32.

Memory: `cfg.remat` rematerialises each decoder layer in the backward pass and
`cfg.scan_layers` runs the layers as one `lax.scan` over parameters stacked at call time (they
stay stored as `layers[i]`, so checkpoints, HF names and sharding rules do not change).

Two ways to run it:
  * full sequence: `model(tokens, positions, attn_mask=[B, T, T] or None)`;
  * with a KV cache (prefill then decode): `model(tokens, positions, attn_mask=[B, T, S],
    cache=cache, cache_index=i)` writes the T new keys/values at slots [i, i + T) and lets
    the queries attend over all S = max_len slots, masked by the caller.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from frontier_rl.models.config import ModelConfig, rope_type

_init = nnx.initializers.normal(stddev=0.02)
# "dots" keeps the outputs of matmuls without batch dimensions: the q/k/v/o and MLP projections
# (x [B, T, H] @ W). The attention scores and mix carry batch dimensions (batch, heads), so they
# are recomputed: they are the O(T^2) part, and keeping them (checkpoint_dots) would store the
# [B, N, T, S] score tensor that remat is meant to drop.
_REMAT_POLICIES = {
    "full": jax.checkpoint_policies.nothing_saveable,
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


class KVCache(NamedTuple):
    """Per-layer keys/values for incremental decoding (a pytree).

    Keys are [batch, kv_heads, slots, head_dim] and values [batch, kv_heads, head_dim, slots]
    per layer: kv heads are a batch axis of both attention dots and each dot contracts its
    operand's last axis (head_dim for the scores, slots for the mix), the layout XLA's dots
    read in place; a [batch, slots, kv_heads, head_dim] cache had XLA transpose every layer's
    keys and values each decode step. The layers are one array each (tuples, layer by layer),
    so a step's dot reads its layer's buffer as it is, where a slice of a stacked cache is a
    copy; a model with `scan_layers` indexes the layer inside the scan, and keeps them stacked
    ([layers, ...] arrays).
    """

    k: tuple[jax.Array, ...] | jax.Array  # layers x [batch, kv_heads, max_len, head_dim]
    v: tuple[jax.Array, ...] | jax.Array  # layers x [batch, kv_heads, head_dim, max_len]

    def write(self, layer, index, k: jax.Array, v: jax.Array):
        """(cache, keys, values): k, v [B, T, K, D] of `layer` (an int, or traced with a
        stacked cache) written into slots [index, index + T) (index may be traced), and that
        layer's whole keys [B, K, S, D] and values [B, K, D, S]. Each write is one small
        dynamic_update_slice in place (never a copy of the cache)."""
        k = jnp.swapaxes(k, 1, 2)  # [B, K, T, D]
        v = jnp.transpose(v, (0, 2, 3, 1))  # [B, K, D, T]
        zero, i = jnp.zeros((), jnp.int32), jnp.asarray(index, jnp.int32)
        k_at, v_at = (zero, zero, i, zero), (zero, zero, zero, i)
        if isinstance(self.k, tuple):
            ks, vs = list(self.k), list(self.v)
            ks[layer] = jax.lax.dynamic_update_slice(ks[layer], k.astype(ks[layer].dtype), k_at)
            vs[layer] = jax.lax.dynamic_update_slice(vs[layer], v.astype(vs[layer].dtype), v_at)
            return KVCache(tuple(ks), tuple(vs)), ks[layer], vs[layer]
        at = jnp.asarray(layer, jnp.int32)
        ck = jax.lax.dynamic_update_slice(self.k, k[None].astype(self.k.dtype), (at, *k_at))
        cv = jax.lax.dynamic_update_slice(self.v, v[None].astype(self.v.dtype), (at, *v_at))
        return KVCache(ck, cv), ck[layer], cv[layer]

    def pad(self, extra: int) -> KVCache:
        """The cache with `extra` more (zero) slots after the last one."""
        def grow(c, axis):
            widths = [(0, 0)] * c.ndim
            widths[axis] = (0, extra)
            return jnp.pad(c, widths)

        return KVCache(k=jax.tree.map(lambda c: grow(c, c.ndim - 2), self.k),
                       v=jax.tree.map(lambda c: grow(c, c.ndim - 1), self.v))


def attention_impl(cfg: ModelConfig, platform: str | None = None) -> str:
    """The backend `cfg.attention` resolves to on `platform` ("cpu", "gpu", "tpu"; default:
    JAX's default backend): "xla" or "cudnn" (flash attention).

    "auto" takes cuDNN only on a GPU in 16-bit compute, the one case where it runs (cuDNN's
    fused attention has no float32 kernel) and pays off. `frontier-rl fit --target` passes the
    target's platform, so a GPU target compiles the cuDNN programs a GPU run builds.
    """
    if cfg.attention != "auto":
        return cfg.attention
    platform = platform or jax.default_backend()
    if platform in ("gpu", "cuda") and jnp.dtype(cfg.dtype).itemsize == 2:
        return "cudnn"
    return "xla"


def attention_of(model) -> str:
    """The attention kernel a built policy runs ("xla" or "cudnn"), as its layers resolved it."""
    layers = getattr(model, "layers", None)
    return layers[0].self_attn.implementation if layers else "xla"


def init_cache(cfg: ModelConfig, batch: int, max_len: int, dtype=None) -> KVCache:
    """An all-zeros cache; `dtype` defaults to the model's compute dtype. One array per layer,
    or [layers, ...] arrays for a model with `scan_layers` (`KVCache`)."""
    kshape = (batch, cfg.num_kv_heads, max_len, cfg.head_dim)
    vshape = (batch, cfg.num_kv_heads, cfg.head_dim, max_len)
    dtype = jnp.dtype(cfg.dtype if dtype is None else dtype)
    if cfg.scan_layers:
        return KVCache(k=jnp.zeros((cfg.num_layers, *kshape), dtype),
                       v=jnp.zeros((cfg.num_layers, *vshape), dtype))
    return KVCache(k=tuple(jnp.zeros(kshape, dtype) for _ in range(cfg.num_layers)),
                   v=tuple(jnp.zeros(vshape, dtype) for _ in range(cfg.num_layers)))


def rope_inv_freq(cfg: ModelConfig) -> np.ndarray:
    """Inverse RoPE frequencies [head_dim // 2] in float32, as HF computes them."""
    d = cfg.head_dim
    inv_freq = 1.0 / (cfg.rope_theta ** (np.arange(0, d, 2, dtype=np.float32) / d))
    inv_freq = inv_freq.astype(np.float32)
    kind, p = rope_type(cfg), cfg.rope_scaling
    if kind == "linear":
        inv_freq = inv_freq / np.float32(p["factor"])
    elif kind == "llama3":
        # Llama 3.1: slow down low frequencies by `factor`, keep high ones, and interpolate
        # smoothly in between (transformers' _compute_llama3_parameters).
        factor, lo, hi = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
        old_len = p["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv_freq
        scaled = np.where(wavelen > old_len / lo, inv_freq / factor, inv_freq)
        smooth = (old_len / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= old_len / hi) & (wavelen <= old_len / lo)
        inv_freq = np.where(medium, smoothed, scaled).astype(np.float32)
    return inv_freq


def rope_cos_sin(cfg: ModelConfig, positions: jax.Array, dtype) -> tuple[jax.Array, jax.Array]:
    """cos, sin [B, T, head_dim] for int positions [B, T] (float32 maths, cast to dtype)."""
    freqs = positions.astype(jnp.float32)[..., None] * jnp.asarray(rope_inv_freq(cfg))
    emb = jnp.concatenate([freqs, freqs], axis=-1)
    return jnp.cos(emb).astype(dtype), jnp.sin(emb).astype(dtype)


def apply_rope(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotate x [B, T, heads, head_dim] with HF's rotate-half convention."""
    x1, x2 = jnp.split(x, 2, axis=-1)
    rotated = jnp.concatenate([-x2, x1], axis=-1)
    return x * cos[:, :, None, :] + rotated * sin[:, :, None, :]


class Linear(nnx.Module):
    """y = x @ kernel + bias, kernel stored [in, out] (HF stores the transpose)."""

    def __init__(self, in_features: int, out_features: int, *, bias: bool, cfg: ModelConfig,
                 rngs: nnx.Rngs):
        pdt = jnp.dtype(cfg.param_dtype)
        self.kernel = nnx.Param(_init(rngs.params(), (in_features, out_features), pdt))
        self.bias = nnx.Param(jnp.zeros((out_features,), pdt)) if bias else nnx.data(None)
        self.dtype = jnp.dtype(cfg.dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        # As one [tokens, in] @ [in, out] matmul: the same products and sums, but the weight
        # gradient is then x^T dy of two matrices. Left as a contraction over the [B, T] axes,
        # XLA:CPU computed it from transposed copies of x and dy (an extra pass over every
        # projection's activations, twice per SwiGLU's gate/up), a quarter of the train
        # step's time at `bench train_step`'s shapes.
        lead = x.shape[:-1]
        y = x.reshape(-1, x.shape[-1]) @ self.kernel[...].astype(self.dtype)
        if self.bias is not None:
            y = y + self.bias[...].astype(self.dtype)
        return y.reshape(*lead, y.shape[-1])


class Embed(nnx.Module):
    """Token embedding table [vocab, hidden]."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        shape = (cfg.vocab_size, cfg.hidden_size)
        self.embedding = nnx.Param(_init(rngs.params(), shape, jnp.dtype(cfg.param_dtype)))
        self.dtype = jnp.dtype(cfg.dtype)

    def __call__(self, tokens: jax.Array) -> jax.Array:
        # Clip rather than jnp.take's default NaN fill: a pad id outside the vocab must not
        # put NaNs into masked-out keys/values (0 * NaN would still poison the softmax mix).
        # Gather, then cast: only the looked-up rows are converted, not the whole table.
        return jnp.take(self.embedding[...], tokens, axis=0, mode="clip").astype(self.dtype)


class RMSNorm(nnx.Module):
    """HF RMSNorm: normalise in float32, cast back to the compute dtype, then scale."""

    def __init__(self, size: int, *, cfg: ModelConfig):
        self.weight = nnx.Param(jnp.ones((size,), jnp.dtype(cfg.param_dtype)))
        self.eps = cfg.rms_norm_eps
        self.dtype = jnp.dtype(cfg.dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        x32 = x.astype(jnp.float32)
        x32 = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
        return self.weight[...].astype(self.dtype) * x32.astype(self.dtype)


class MLP(nnx.Module):
    """SwiGLU feed-forward: down(silu(gate(x)) * up(x))."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        h, i = cfg.hidden_size, cfg.intermediate_size
        self.gate_proj = Linear(h, i, bias=False, cfg=cfg, rngs=rngs)
        self.up_proj = Linear(h, i, bias=False, cfg=cfg, rngs=rngs)
        self.down_proj = Linear(i, h, bias=False, cfg=cfg, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.down_proj(_swiglu(self.gate_proj(x), self.up_proj(x)))


# silu(gate) * up, its backward recomputing sigmoid(gate) from the two projections' outputs
# (kept for their weight gradients anyway) inside the backward's own elementwise pass. Plain
# autodiff also stores sigmoid(gate) and silu(gate): two more [tokens, intermediate] arrays
# written per layer in the forward, which at `bench train_step`'s shapes cost ~4% of the step
# on XLA:CPU. The gradient is autodiff's, the same operations.
_swiglu = jax.checkpoint(lambda gate, up: jax.nn.silu(gate) * up)


@functools.partial(jax.tree_util.register_dataclass, data_fields=["segment_ids"],
                   meta_fields=["packed", "max_segments"])
@dataclasses.dataclass(frozen=True)
class SegmentMask:
    """Causal attention within the sequences of each row, given by segment ids [B, T] int32:
    0 for padding, k >= 1 for the k-th sequence of the row (rl/batch.py's "trim" and "pack"
    layouts: the sequences of a row are contiguous from column 0, numbered in order). A query
    attends to the keys at or before it in its own sequence; a padding query attends to itself
    only (a finite softmax; its output is never used).

    `packed` (static) says whether a row may hold several sequences, at most `max_segments`
    (static; rl/batch.py's MAX_SEGMENTS) of them. No kernel builds the [B, T, T] mask for a
    long row (`dense` is for short rows and tests):
    - cuDNN's fused attention takes one sequence per row as sequence lengths (`is_causal` with
      `key_value_seq_lengths`), several as cuDNN's packed layout (per-row segment offsets and
      lengths, `segments`): causal tiles skipped, no bias tensor, no bias gradient;
    - XLA attends in blocks of queries whose masks are built from the segment ids
      (`_attend_chunked`), so only one block's [B, chunk, T] mask and scores exist at a time.
    """

    segment_ids: jax.Array
    packed: bool = True
    max_segments: int = 0

    def dense(self) -> jax.Array:
        """The bool [B, T, T] mask."""
        return self.rows(0, self.segment_ids.shape[1])

    def rows(self, start, size: int) -> jax.Array:
        """The bool [B, size, T] mask of the queries at positions [start, start + size)
        (`start` may be traced; positions past the row attend to themselves only)."""
        seg = self.segment_ids
        t = seg.shape[1]
        q_pos = start + jnp.arange(size)
        k_pos = jnp.arange(t)
        q_seg = jnp.take(seg, jnp.minimum(q_pos, t - 1), axis=1)
        q_seg = jnp.where(q_pos < t, q_seg, -1)
        causal = k_pos[None, :] <= q_pos[:, None]
        same = (q_seg[:, :, None] == seg[:, None, :]) & (seg[:, None, :] > 0)
        return (causal[None] & same) | (k_pos[None, :] == q_pos[:, None])[None]

    def lengths(self) -> jax.Array:
        """Tokens of each row (its one sequence, left-aligned), int32 [B]."""
        return jnp.sum(self.segment_ids > 0, axis=-1).astype(jnp.int32)

    def segments(self) -> tuple[jax.Array, jax.Array]:
        """(lengths [B, M], offsets [B, M + 1]) of each row's sequences, M = `max_segments`,
        int32, -1 past a row's last sequence: cuDNN's packed layout (JAX's
        jax/_src/cudnn/fused_attention_stablehlo.py, `dot_product_attention`'s q_seqlen and
        q_offsets). Sequences numbered above M are not seen: rl/batch.py packs at most M."""
        m = self.max_segments
        ids = jnp.arange(1, m + 1, dtype=self.segment_ids.dtype)
        counts = jnp.sum(self.segment_ids[:, :, None] == ids, axis=1).astype(jnp.int32)
        starts = jnp.cumsum(counts, axis=1) - counts
        present = counts > 0
        lengths = jnp.where(present, counts, -1)
        offsets = jnp.where(present, starts, -1)
        return lengths, jnp.pad(offsets, ((0, 0), (0, 1)), constant_values=-1)


# XLA attends in query blocks of this many positions when a SegmentMask row is longer (and
# model.attention_chunk sets no block), so no [B, T, T] mask or score array is built.
SEGMENT_BLOCK = 512


def attend(q: jax.Array, k: jax.Array, v: jax.Array, mask,
           implementation: str = "xla", q_chunk: int = 0, heads_first: bool = False,
           ) -> jax.Array:
    """Grouped-query attention.

    q: [B, T, N, D]; k, v: [B, S, K, D], or with `heads_first` a KV cache layer's k [B, K, S, D]
    and v [B, K, D, S] (`KVCache`); N a multiple of K (query head n reads kv head n // (N // K),
    as HF's repeat_kv); mask: bool [B, T, S], or a `SegmentMask` (T = S). Returns [B, T, N * D].
    Scores and softmax are float32 for 16-bit inputs too. Masked scores are replaced by a large
    finite negative, so a fully masked row (a padding query) averages the values uniformly
    instead of producing NaN. With `q_chunk` (XLA only) the queries run in blocks of that many
    positions (`_attend_chunked`).
    """
    b, t, n, d = q.shape
    if heads_first:
        if implementation == "xla":
            if 0 < q_chunk < t:
                return _attend_chunked(q, k, v, mask, q_chunk, heads_first=True)
            if isinstance(mask, SegmentMask):
                mask = mask.dense()
            return _attend_heads_first(q, k, v, mask).reshape(b, t, n * d)
        # cuDNN takes [B, S, K, D].
        k, v = jnp.swapaxes(k, 1, 2), jnp.transpose(v, (0, 3, 1, 2))
    if isinstance(mask, SegmentMask) and implementation == "cudnn":
        if not mask.packed or cudnn_packs():
            return _attend_cudnn_segments(q, k, v, mask).reshape(b, t, n * d)
        implementation = "xla"  # before Hopper cuDNN has no packed layout: XLA's query blocks
    if implementation == "xla":
        if isinstance(mask, SegmentMask) and not 0 < q_chunk < t and t > SEGMENT_BLOCK:
            q_chunk = SEGMENT_BLOCK
        if 0 < q_chunk < t:
            return _attend_chunked(q, k, v, mask, q_chunk)
    if isinstance(mask, SegmentMask):
        mask = mask.dense()
    if implementation == "xla":
        return _attend_grouped(q, k, v, mask)
    out = jax.nn.dot_product_attention(q, k, v, mask=mask[:, None], scale=d**-0.5,
                                       implementation=implementation)
    return out.reshape(b, t, n * d)


def cudnn_packs() -> bool:
    """Whether cuDNN's packed layout (several sequences per row) runs on the GPU being compiled
    for: Hopper (compute capability 9.0) and later, as JAX's cuDNN entry checks it
    (jax/_src/cudnn/fused_attention_stablehlo.py, `check_compute_capability`, which
    `targets.compiling_for` answers for a target's devices). An A100's packed rows take XLA's
    attention in query blocks instead, still without a [T, T] array."""
    from jax._src.cudnn import fused_attention_stablehlo as cudnn_fa

    return bool(cudnn_fa.check_compute_capability("9.0"))


@jax.custom_vjp
def _grad_within(x: jax.Array, keep: jax.Array) -> jax.Array:
    """`x`, whose gradient is kept where `keep` (broadcast to it) and zero elsewhere."""
    return x


def _grad_within_fwd(x, keep):
    return x, keep


def _grad_within_bwd(keep, g):
    return jnp.where(keep, g, jnp.zeros((), g.dtype)), None


_grad_within.defvjp(_grad_within_fwd, _grad_within_bwd)


def _attend_cudnn_segments(q: jax.Array, k: jax.Array, v: jax.Array, mask: SegmentMask
                           ) -> jax.Array:
    """cuDNN's fused attention of [B, T, N, D] queries over [B, T, K, D] keys and values within
    the sequences of `mask`: one per row as sequence lengths (jax.nn.dot_product_attention),
    several per row as cuDNN's packed layout with each row's segment lengths and offsets
    (JAX's own cuDNN entry, jax/_src/cudnn/fused_attention_stablehlo.py, whose packed form
    jax.nn.dot_product_attention does not expose).

    cuDNN writes no output and no gradient for a position outside every sequence: on an H200
    the packed backward left NaN there (`frontier-rl bench packed`), which the projections'
    weight gradients would sum. So padding positions get a zero output, and q, k and v a zero
    gradient there."""
    d = q.shape[-1]
    keep = (mask.segment_ids > 0)[:, :, None, None]
    q, k, v = (_grad_within(x, keep) for x in (q, k, v))
    if not mask.packed:
        lengths = mask.lengths()
        out = jax.nn.dot_product_attention(
            q, k, v, scale=d**-0.5, is_causal=True, query_seq_lengths=lengths,
            key_value_seq_lengths=lengths, implementation="cudnn")
    else:
        if mask.max_segments < 1:
            raise ValueError("a packed SegmentMask on cuDNN needs max_segments >= 1 "
                             "(rl/batch.py's MAX_SEGMENTS)")
        from jax._src.cudnn import fused_attention_stablehlo as cudnn_fa

        lengths, offsets = mask.segments()
        out = cudnn_fa.dot_product_attention(
            q, k, v, q_seqlen=lengths, kv_seqlen=lengths, q_offsets=offsets,
            kv_offsets=offsets, scale=d**-0.5, mask_type=cudnn_fa.MaskType.PADDING_CAUSAL,
            qkv_layout="BTNH")
    return jnp.where(keep, out, jnp.zeros((), out.dtype))


def _score_precision(dtype):
    """The dot algorithm of a 16-bit attention's score dot (float32 accumulation and output),
    as `jax.nn.dot_product_attention` picks it; None for float32."""
    return {jnp.dtype(jnp.bfloat16): jax.lax.DotAlgorithmPreset.BF16_BF16_F32,
            jnp.dtype(jnp.float16): jax.lax.DotAlgorithmPreset.F16_F16_F32}.get(jnp.dtype(dtype))


def _masked_softmax(scores: jax.Array, mask: jax.Array, d: int, dtype) -> jax.Array:
    """`jax.nn.dot_product_attention`'s XLA softmax of float32 scores: scaled after the dot,
    masked to -0.7 x float32 max, softmax in float32, cast to `dtype` (the values')."""
    scores = scores * jnp.asarray(d**-0.5, scores.dtype)
    big_negative = -0.7 * float(jnp.finfo(jnp.float32).max)
    scores = jnp.where(mask, scores, jnp.asarray(big_negative, scores.dtype))
    return jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(dtype)


def _attend_grouped(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array) -> jax.Array:
    """XLA attention of q [B, T, N, D] over k, v [B, S, K, D] with mask bool [B, T, S]; returns
    [B, T, N * D]. The maths of `jax.nn.dot_product_attention`'s XLA path
    (`_masked_softmax`), laid out for its dots: each kv head's G = N / K query heads are one
    [G x T, D] block of rows (heads first), so the scores and the mix are one plain batched
    matmul per (row, kv head) and their gradients too. JAX's own entry runs grouped heads as a
    vmap whose dots and their transposes XLA:CPU fed from re-laid-out copies of the scores,
    queries and keys (`bench train_step` took ~5% longer with it)."""
    b, t, n, d = q.shape
    s, kh = k.shape[1], k.shape[2]
    g = n // kh
    qg = q.reshape(b, t, kh, g, d).transpose(0, 2, 3, 1, 4).reshape(b, kh, g * t, d)
    scores = jnp.einsum("bkqd,bskd->bkqs", qg, k, precision=_score_precision(q.dtype),
                        preferred_element_type=jnp.promote_types(q.dtype, jnp.float32))
    probs = _masked_softmax(scores.reshape(b, kh, g, t, s), mask[:, None, None], d, v.dtype)
    out = jnp.einsum("bkqs,bskd->bkqd", probs.reshape(b, kh, g * t, s), v)
    return out.reshape(b, kh, g, t, d).transpose(0, 3, 1, 2, 4).reshape(b, t, n * d)


def _attend_heads_first(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array
                        ) -> jax.Array:
    """XLA attention of q [B, T, N, D] over a KV cache layer's k [B, K, S, D] and v
    [B, K, D, S] with mask bool [B, T, S]; returns [B, T, N, D]. The maths of
    `jax.nn.dot_product_attention`'s XLA path (scores in float32 scaled after the dot, masked to
    -0.7 x float32 max, float32 softmax, probabilities cast to the values' dtype), with the
    kv-head axis as a batch axis of both dots and each contracting its operands' last axis, so
    neither copies the keys or values into another layout."""
    b, t, n, d = q.shape
    kh = k.shape[1]
    qg = q.reshape(b, t, kh, n // kh, d)
    scores = jnp.einsum("btkgd,bksd->bkgts", qg, k, precision=_score_precision(q.dtype),
                        preferred_element_type=jnp.promote_types(q.dtype, jnp.float32))
    probs = _masked_softmax(scores, mask[:, None, None], d, k.dtype)
    return jnp.einsum("bkgts,bkds->btkgd", probs, v).reshape(b, t, n, d)


def _attend_chunked(q: jax.Array, k: jax.Array, v: jax.Array, mask, chunk: int,
                    heads_first: bool = False) -> jax.Array:
    """`attend` over blocks of `chunk` queries, each against every key: a block's softmax is
    its rows' softmax, so the result is the unblocked one; only one block's scores exist at a
    time, and the backward pass recomputes them from the block's queries (jax.checkpoint).
    `mask`: bool [B, T, S], or a `SegmentMask`, whose block masks are built inside the block
    from the segment ids (no [B, T, T] array)."""
    b, t, n, d = q.shape
    blocks = -(-t // chunk)
    pad = blocks * chunk - t
    # Padded queries attend to nothing (uniform weights, finite) and are sliced off.
    q = jnp.pad(q, ((0, 0), (0, pad), (0, 0), (0, 0)))
    qs = q.reshape(b, blocks, chunk, n, d).swapaxes(0, 1)
    if isinstance(mask, SegmentMask):
        ms = jnp.arange(blocks) * chunk  # each block's first query position

        def block_mask(m):
            return mask.rows(m, chunk)
    else:
        mask = jnp.pad(mask, ((0, 0), (0, pad), (0, 0)))
        ms = mask.reshape(b, blocks, chunk, mask.shape[-1]).swapaxes(0, 1)

        def block_mask(m):
            return m

    @jax.checkpoint
    def block(args):
        qb, mb = args
        mb = block_mask(mb)
        if heads_first:
            return _attend_heads_first(qb, k, v, mb)
        return _attend_grouped(qb, k, v, mb)

    out = jax.lax.map(block, (qs, ms))  # [blocks, b, chunk, n, d] or [blocks, b, chunk, n * d]
    return out.swapaxes(0, 1).reshape(b, blocks * chunk, n * d)[:, :t]


class Attention(nnx.Module):
    """Multi-head self-attention with GQA, optional q/k RMSNorm (Qwen3) and qkv bias (Qwen2)."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        h = cfg.hidden_size
        q_dim, kv_dim = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
        self.q_proj = Linear(h, q_dim, bias=cfg.qkv_bias, cfg=cfg, rngs=rngs)
        self.k_proj = Linear(h, kv_dim, bias=cfg.qkv_bias, cfg=cfg, rngs=rngs)
        self.v_proj = Linear(h, kv_dim, bias=cfg.qkv_bias, cfg=cfg, rngs=rngs)
        self.o_proj = Linear(q_dim, h, bias=False, cfg=cfg, rngs=rngs)
        if cfg.qk_norm:
            self.q_norm = RMSNorm(cfg.head_dim, cfg=cfg)
            self.k_norm = RMSNorm(cfg.head_dim, cfg=cfg)
        else:
            self.q_norm = nnx.data(None)
            self.k_norm = nnx.data(None)
        self.num_heads, self.num_kv_heads, self.head_dim = (
            cfg.num_heads, cfg.num_kv_heads, cfg.head_dim)
        self.implementation = attention_impl(cfg)
        self.q_chunk = cfg.attention_chunk

    def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array, mask: jax.Array,
                 cache: KVCache | None = None, layer: int = 0,
                 cache_index: jax.Array | int | None = None,
                 ) -> tuple[jax.Array, KVCache | None]:
        """x [B, T, H] -> ([B, T, H], cache). With `cache` (a KVCache of all layers) the new
        keys/values go into cache[layer] at slots [cache_index, cache_index + T)."""
        b, t, _ = x.shape
        q = self.q_proj(x).reshape(b, t, self.num_heads, self.head_dim)
        k = self.k_proj(x).reshape(b, t, self.num_kv_heads, self.head_dim)
        v = self.v_proj(x).reshape(b, t, self.num_kv_heads, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if cache is not None:
            cache, k, v = cache.write(layer, cache_index, k, v)
            k, v = k.astype(q.dtype), v.astype(q.dtype)
            out = attend(q, k, v, mask, self.implementation, self.q_chunk, heads_first=True)
            return self.o_proj(out), cache
        return self.o_proj(attend(q, k, v, mask, self.implementation, self.q_chunk)), cache


class DecoderLayer(nnx.Module):
    """Pre-norm block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg=cfg)
        self.self_attn = Attention(cfg, rngs=rngs)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg=cfg)
        self.mlp = MLP(cfg, rngs=rngs)

    def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array, mask: jax.Array,
                 cache: KVCache | None = None, layer: int = 0,
                 cache_index: jax.Array | int | None = None,
                 ) -> tuple[jax.Array, KVCache | None]:
        h, cache = self.self_attn(self.input_layernorm(x), cos, sin, mask, cache, layer,
                                  cache_index)
        x = x + h
        return x + self.mlp(self.post_attention_layernorm(x)), cache


class Transformer(nnx.Module):
    """Decoder-only causal LM (embed -> layers -> norm -> lm_head)."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.embed_tokens = Embed(cfg, rngs=rngs)
        self.layers = nnx.List([DecoderLayer(cfg, rngs=rngs) for _ in range(cfg.num_layers)])
        self.norm = RMSNorm(cfg.hidden_size, cfg=cfg)
        if cfg.tie_word_embeddings:
            self.lm_head = nnx.data(None)
        else:
            self.lm_head = Linear(cfg.hidden_size, cfg.vocab_size, bias=False, cfg=cfg,
                                  rngs=rngs)

    def __call__(self, tokens: jax.Array, positions: jax.Array, *,
                 attn_mask: jax.Array | None = None, cache: KVCache | None = None,
                 cache_index: jax.Array | int | None = None,
                 ) -> tuple[jax.Array, KVCache | None]:
        """tokens, positions: int32 [B, T].

        Without cache: attn_mask is bool [B, T, T] (True = may attend); None means plain
        causal. With cache: the T new keys/values are written into the cache at slots
        [cache_index, cache_index + T) (cache_index: int32 scalar, may be traced) and the
        queries attend over all max_len cache slots with attn_mask bool [B, T, max_len]
        (the caller supplies validity + causality; required with cache).
        Returns (logits float32 [B, T, vocab], new_cache or None).
        """
        hidden, cache = self.embed_and_hidden(tokens, positions, attn_mask=attn_mask,
                                              cache=cache, cache_index=cache_index)
        return self.logits(hidden), cache

    def embed_and_hidden(self, tokens: jax.Array, positions: jax.Array, *,
                         attn_mask: jax.Array | None = None, cache: KVCache | None = None,
                         cache_index: jax.Array | int | None = None,
                         ) -> tuple[jax.Array, KVCache | None]:
        """Same as __call__ but returns the final-normed hidden states [B, T, hidden] instead
        of logits (e.g. to compute log-probs in vocab chunks)."""
        _, t = tokens.shape
        if cache is None:
            if attn_mask is None:
                attn_mask = jnp.tril(jnp.ones((t, t), jnp.bool_))[None]
        elif attn_mask is None or cache_index is None:
            raise ValueError("Transformer: decoding with a cache needs attn_mask "
                             "[B, T, max_len] and cache_index")
        x = self.embed_tokens(tokens)
        cos, sin = rope_cos_sin(self.cfg, positions, x.dtype)
        if self.cfg.scan_layers:
            x, cache = self._scan_layers(x, cos, sin, attn_mask, cache, cache_index)
        elif self.cfg.remat == "none":
            for i, layer in enumerate(self.layers):
                x, cache = layer(x, cos, sin, attn_mask, cache, i, cache_index)
        else:
            for i, layer in enumerate(self.layers):
                graphdef, state = nnx.split(layer)
                # The layer index stays a Python int (it picks the layer's cache arrays).
                run = self._remat(_layer_fn(graphdef, i), prevent_cse=True)
                x, cache = run(state, x, cos, sin, attn_mask, cache, cache_index)
        return self.norm(x), cache

    def logits(self, hidden: jax.Array) -> jax.Array:
        """float32 logits [..., vocab] from final hidden states [..., hidden]."""
        dt = jnp.dtype(self.cfg.dtype)
        if self.lm_head is None:
            w = self.embed_tokens.embedding[...].astype(dt)
            return jnp.einsum("...h,vh->...v", hidden, w, preferred_element_type=jnp.float32)
        w = self.lm_head.kernel[...].astype(dt)
        return jnp.einsum("...h,hv->...v", hidden, w, preferred_element_type=jnp.float32)

    def _remat(self, fn, prevent_cse: bool):
        if self.cfg.remat == "none":
            return fn
        return jax.checkpoint(fn, policy=_REMAT_POLICIES[self.cfg.remat],
                              prevent_cse=prevent_cse)

    def _scan_layers(self, x, cos, sin, mask, cache, cache_index):
        """The layer stack as one lax.scan over parameters stacked here (stored parameters stay
        per layer). The whole cache is carried and each step writes its layer's slot in place,
        as the unrolled loop does.

        Without `layer_gather` the stack is in the compute dtype (the only copy of the layers'
        weights the function computes with). With it (set by `sharding.gathered_model` on a
        mesh) the stack is the gather's: kept as stored, the scan's body gathering one layer's
        weights when that layer runs, inside its rematerialised function (`LayerGather`), or
        gathered once before a decode loop (`GatheredLayers`).
        """
        dt = jnp.dtype(self.cfg.dtype)
        graphdef, _ = nnx.split(self.layers[0])
        states = [nnx.split(layer)[1] for layer in self.layers]
        gather = getattr(self, "layer_gather", None)
        layer = _layer_fn(graphdef)
        if gather is None:
            stacked = jax.tree.map(lambda *ws: jnp.stack([w.astype(dt) for w in ws]), *states)
        else:
            stacked = gather.stack(states)
            ungathered = layer

            def layer(state, *args):
                return ungathered(gather.layer(state), *args)

        # Inside a scan, CSE cannot merge the recomputation into the forward, so the
        # rematerialisation barrier is not needed (jax.checkpoint's documented advice).
        run = self._remat(layer, prevent_cse=False)

        def body(carry, xs):
            x, cache = carry
            state, i = xs
            return run(state, x, cos, sin, mask, cache, i, cache_index), None

        layer_ids = jnp.arange(self.cfg.num_layers, dtype=jnp.int32)
        (x, cache), _ = jax.lax.scan(body, (x, cache), (stacked, layer_ids))
        return x, cache


def _layer_fn(graphdef: nnx.GraphDef, layer: int | None = None):
    """A pure function of one decoder layer's state, for jax.checkpoint and lax.scan: of
    (state, x, cos, sin, mask, cache, layer, cache_index), or with `layer` given of the same
    without it."""

    def run(state, x, cos, sin, mask, cache, layer, cache_index):
        return nnx.merge(graphdef, state)(x, cos, sin, mask, cache, layer, cache_index)

    if layer is None:
        return run
    return lambda state, x, cos, sin, mask, cache, cache_index: run(
        state, x, cos, sin, mask, cache, layer, cache_index)


def cost_model(graphdef: nnx.GraphDef, params) -> Transformer:
    """The policy of `graphdef` with `params`, as XLA's cost analysis must see it (for FLOPs
    accounting only, never run): layers unrolled, because XLA counts a `lax.scan` body once
    whatever its trip count (a scanned model would be undercounted by about its layer count),
    and attention on XLA in one piece, because a device kernel (cuDNN's fused attention) has no
    lowering on the CPU backend the cost programs compile for, and a custom call has no FLOPs in
    the analysis. The stored parameters are per layer in both graphs, so `params` fit either."""
    cfg = nnx.merge(graphdef, params).cfg
    return nnx.merge(_cost_graphdef(cfg), params)


@functools.lru_cache(maxsize=16)
def _cost_graphdef(cfg: ModelConfig) -> nnx.GraphDef:
    return _abstract_params(dataclasses.replace(cfg, scan_layers=False, attention="xla",
                                                attention_chunk=0))[0]


def abstract_params(cfg: ModelConfig) -> tuple[nnx.GraphDef, nnx.State]:
    """(graphdef, parameter state of ShapeDtypeStructs) of `cfg`'s model; nothing allocated.
    Tracing the model's constructor costs ~50 ms even for a tiny model and every loader, export
    and weight sync needs it, so it is traced once per config; each call returns its own copy
    of the state (callers fill it in)."""
    graphdef, state = _abstract_params(cfg)
    return graphdef, jax.tree.map(lambda x: x, state)


@functools.lru_cache(maxsize=16)
def _abstract_params(cfg: ModelConfig) -> tuple[nnx.GraphDef, nnx.State]:
    return nnx.split(nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0))), nnx.Param)
