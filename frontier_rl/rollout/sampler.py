"""The embedded rollout engine: a jitted KV-cache sampler for the NNX policy.

Prompts are left-padded to a prompt-length bucket and the batch is padded to a row bucket
(`shapes.row_bucket`: under 10% padding above 1,024 rows; then to a multiple of the mesh's
row shards), so the generate function compiles once per (row bucket, prompt bucket, greedy,
top-p, top-k) and never again. Decoding stops as soon as every row has emitted a stop token (any of
`eos_ids`) or the token cap is reached, so short answers do not pay for the full cap.

Decode segments: the decode attends over the filled part of the KV cache only, in buckets. It
runs as a few `lax.while_loop`s in turn, each over a cache of static width plen + w_i slots
(prompt bucket + the segment's bound on the decode steps so far), which it grows by padding once
before the next. Bucket rule (`shapes.decode_segments`): the bounds w_i are the powers of two
from `decode_bucket` (16 by default) below the token cap, then the cap itself; when that makes
more than `max_decode_segments` (4) segments only the largest that many are kept (the first then
starts wider). So a cap of 256 decodes in 32 + 32 + 64 + 128 steps over plen + 32, + 64, + 128,
+ 256 slots; a cap of 32 in 16 + 16 steps over plen + 16, + 32; a cap of 16 or less in one
full-width loop as before; a cap of 4,096 in 512 + 512 + 1,024 + 2,048. Step t never attends
over more than plen + max(w_1, 2t) slots (w_1: the first segment's bound), where it attended
over all plen + cap before. Every loop stops as soon as every row is done (the later ones then
run no step; their one cache pad is still made). `decode_bucket=0` decodes in one full-width
loop. The same seed gives the same tokens, lengths and (up to float rounding of softmax sums
over fewer masked slots) the same log-probs whatever the segments: step t draws with
`fold_in(key, t)` either way. The price: each segment is its own copy of the decode step in the
compiled program (compile time grows with the segments, hence the bound), and at a boundary both
the old and the grown cache are live: the decode's peak holds the prompt + cap cache plus the
previous segment's (at most half the decode slots more than the one full cache plus the
prompt's, which the single loop held). `lower` compiles every segment, so `frontier-rl fit`
sizes that real peak.

Finished rows: a row that emitted its stop token keeps its slot in the batch and runs through
the model until every row is done (its outputs are masked). The batch's padding rows (up to the
row bucket) start done, so the loops end with the last real row (they used to run every call to
the cap: a padding row seldom draws a stop token); their draws and the real rows' are unchanged.
Compacting live rows would change the shapes mid-loop (a recompile per shape, or gathers of the
whole cache) and, on a mesh, unbalance the row shards: not done; the early loop exit is the only
saving on finished rows.

Per generated token it returns the log-probability and the entropy of softmax(logits / T) at the
sampling temperature T, before top-k / top-p truncation (T = 1 for greedy decoding). That is the
distribution verl's actor computes log-probs from (logits divided by the rollout temperature),
and what `Trainer` computes at `temperature=T`: the RL loss can take these as the old policy's
log-probs without a recompute. Determinism: the same parameters, prompts, n and seed give
the same tokens on CPU (one key per decode step, folded from the seed, samples every row),
whatever the mesh.

On a mesh, rows (prompts, every per-row carry, the KV cache) are split over ("data", "fsdp")
and the cache's KV heads over "model"; parameters follow `sharding.PARAM_RULES`. The prefill
computes logits for each row's last prompt position only. Top-p finds the nucleus among the
`top_k` largest logits when it lies there for every row (exactly the full sort's cutoff), and
sorts the vocabulary only when it does not.

Sampling top-k (`sample_top_k`, SGLang's `top_k`; -1 = off, as in SGLang, where 0 is refused;
k >= the vocabulary is off too) keeps the k largest logits (ties at the k-th kept) before the
draw. With top-p as well, the nucleus is taken from the renormalised top-k set (top-k first,
then top-p): the order of vLLM's `apply_top_k_top_p` and of HF's logits warpers, and so of the
vLLM engine HeaPA's released evaluation ran (eval_dataset_generation.py). Deviation: SGLang
samples the intersection of the two filters, both cut on the full distribution (its flashinfer
`filter_apply_order="joint"` and its torch fallback). The two differ only when the k largest
tokens hold less than all the mass Z: here the nucleus is cut at top_p x Z of the full mass,
there at top_p, so it is never larger here. `top_k` (the constructor's) is only the nucleus
search's candidate count, not a sampling parameter.

Each result also says what the device did (`SampleResult.shape`: the padded shape and the decode
steps the loop ran) and `cost_analysis` gives XLA's FLOPs of the prefill and of one decode step,
which is what fit/accounting.py charges. The step is costed at the full cache width (prompt + cap):
with decode segments the steps of the earlier segments attend over fewer slots, so the charge
is an upper bound on the attention FLOPs (exact for the rest of the step). `lower` lowers the
whole generate function for abstract parameters, for `frontier-rl fit`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from frontier_rl.fit.accounting import abstract, compiled_flops
from frontier_rl.fit.shapes import (
    DECODE_BUCKET,
    MAX_DECODE_SEGMENTS,
    bucket,
    decode_segments,
    row_bucket,
)
from frontier_rl.models import ModelConfig, init_cache
from frontier_rl.models.transformer import cost_model
from frontier_rl.rl import sharding
from frontier_rl.run import distributed

# Candidates the nucleus is looked for among before the full-vocabulary sort: a nucleus of a
# trained policy at top_p <= 0.95 rarely needs more than a few dozen tokens.
TOP_K = 64
# Prompt tokens per device in one prefill forward (rows run in groups of at most this many
# tokens; 0 = all rows at once): bounds the prefill's activations and [rows, heads, plen, plen]
# attention scores. An embedded run's rollouts (512 rows of <= 32 tokens) are one group.
PREFILL_TOKENS = 32768
# Positions of the generate function's static arguments (max_new, greedy, use_top_p,
# sample_top_k): jit takes no keyword arguments once it has in_shardings.
_STATIC = (7, 8, 9, 10)


@dataclasses.dataclass(frozen=True)
class SampleShape:
    """The padded shape one generate call ran at: what its compiled function cost."""

    rows: int  # batch bucket
    prompt_len: int  # prompt bucket
    max_new: int  # token cap (the cache holds prompt_len + max_new slots)
    steps: int  # decode-loop iterations actually run (<= max_new; fewer when all rows ended)
    greedy: bool
    use_top_p: bool
    sample_top_k: int = -1  # sampling top-k (-1 = off)


@dataclasses.dataclass(frozen=True)
class SampleResult:
    """Responses for len(prompts) * n rows, prompt-major (row i*n + j is sample j of prompt i)."""

    tokens: np.ndarray  # int32 [R, max_new]; after EOS (or the cap) filled with pad
    logps: np.ndarray  # float32 [R, max_new]; 0 after the end
    entropies: np.ndarray  # float32 [R, max_new]; 0 after the end
    lengths: np.ndarray  # int32 [R]; generated tokens including EOS
    finished: np.ndarray  # bool [R]; True when the row emitted EOS within the cap
    prompt_lens: np.ndarray | None = None  # int32 [R]; real prompt tokens of each row
    shape: SampleShape | None = None  # the padded work the device did, for FLOPs accounting
    parts: tuple[SampleResult, ...] = ()  # the calls this result joins (concat), else empty


def concat(parts: Sequence[SampleResult]) -> SampleResult:
    """One result of consecutive calls' rows, in order; each call stays in `parts` (its padded
    shape is what the FLOPs accounting charges). The calls share their token cap."""
    if len(parts) == 1:
        return parts[0]
    widths = {p.tokens.shape[1] for p in parts}
    if len(widths) != 1:
        raise ValueError(f"concat() of results with different token caps {sorted(widths)}")

    def cat(field):
        values = [getattr(p, field) for p in parts]
        return None if any(v is None for v in values) else np.concatenate(values)

    return SampleResult(tokens=cat("tokens"), logps=cat("logps"), entropies=cat("entropies"),
                        lengths=cat("lengths"), finished=cat("finished"),
                        prompt_lens=cat("prompt_lens"), parts=tuple(parts))


def left_pad(seqs: Sequence[Sequence[int]], length: int, rows: int,
             pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """int32 tokens and 0/1 mask [rows, length], each sequence right-aligned (left-padded)."""
    tokens = np.full((rows, length), pad_id, np.int32)
    mask = np.zeros((rows, length), np.int32)
    for i, seq in enumerate(seqs):
        tokens[i, length - len(seq):] = seq
        mask[i, length - len(seq):] = 1
    return tokens, mask


def _nucleus_cutoff_sorted(scaled, top_p):
    """The smallest logit of the nucleus (the fewest tokens whose probability mass reaches
    top_p), by a full sort of the vocabulary."""
    sorted_logits = jnp.sort(scaled, axis=-1)[:, ::-1]
    cum = jnp.cumsum(jax.nn.softmax(sorted_logits, axis=-1), axis=-1)
    cutoff_idx = jnp.sum(cum < top_p, axis=-1, keepdims=True)
    return jnp.take_along_axis(sorted_logits, cutoff_idx, axis=-1)


def _nucleus_cutoff(scaled, top_p, top_k: int):
    """`_nucleus_cutoff_sorted` without the sort when every row's nucleus lies within its
    top_k logits: those are the sorted vocabulary's head, and the cumulative mass of the
    sorted vocabulary first reaches top_p inside it, at the same index (the softmax
    denominator is the full vocabulary's either way)."""
    if top_k >= scaled.shape[-1]:
        return _nucleus_cutoff_sorted(scaled, top_p)
    top, _ = jax.lax.top_k(scaled, top_k)  # [B, top_k], descending
    shift = top[:, :1]
    denom = jnp.sum(jnp.exp(scaled - shift), axis=-1, keepdims=True)
    cum = jnp.cumsum(jnp.exp(top - shift) / denom, axis=-1)

    def head():
        return jnp.take_along_axis(top, jnp.sum(cum < top_p, axis=-1, keepdims=True), axis=-1)

    return jax.lax.cond(jnp.all(cum[:, -1] >= top_p), head,
                        lambda: _nucleus_cutoff_sorted(scaled, top_p))


def sample_top_k_on(sample_top_k: int, greedy: bool = False, vocab: int | None = None) -> int:
    """The sampling top-k a call runs with: k when it filters (1 <= k < vocab, not greedy),
    else -1 (one program for every k that keeps the whole vocabulary)."""
    filters = sample_top_k >= 1 and not greedy and (vocab is None or sample_top_k < vocab)
    return int(sample_top_k) if filters else -1


def _sample_token(logits, key, temperature, top_p, greedy: bool, use_top_p: bool,
                  top_k: int = TOP_K, sample_top_k: int = -1):
    """One token per row. `sample_top_k` (static; -1 = off) keeps the k largest logits, then
    `use_top_p` the nucleus of what is left; `top_k` is the nucleus search's candidate count."""
    if greedy:
        return jnp.argmax(logits, axis=-1).astype(jnp.int32)
    scaled = logits / temperature
    # Everything outside the top-k set and the nucleus is masked; the draw is over the full
    # vocabulary, so the random stream is the same whatever is kept (and, with neither filter,
    # the same as before either existed).
    if 0 < sample_top_k < scaled.shape[-1]:
        kth = jax.lax.top_k(scaled, sample_top_k)[0][:, -1:]
        scaled = jnp.where(scaled < kth, -jnp.inf, scaled)
    if use_top_p:
        # On the masked logits the softmax is the top-k set's renormalised distribution.
        cutoff = _nucleus_cutoff(scaled, top_p, top_k)
        scaled = jnp.where(scaled < cutoff, -jnp.inf, scaled)
    return jax.random.categorical(key, scaled, axis=-1).astype(jnp.int32)


class Sampler:
    """Generates responses from the current parameters; one instance per policy graph.

    `eos_id`: the stop token id, or a sequence of them (a sequence ends at the first of any);
    `self.eos_id` is the first, `self.eos_ids` all. `mesh`: the device mesh the rows and
    parameters are split over; None runs unconstrained, as a plain single-device jit.
    `decode_bucket`, `max_decode_segments`: the decode segments (`decode_segments`; 0 = one
    loop over the full cache).
    """

    def __init__(
        self,
        graphdef: nnx.GraphDef,
        cfg: ModelConfig,
        *,
        eos_id: int | Sequence[int],
        pad_id: int,
        prompt_buckets: Sequence[int] = (16, 32, 64, 128, 256, 512),
        batch_buckets: Sequence[int] | None = None,
        max_new_tokens: int = 16,
        mesh: Mesh | None = None,
        top_k: int = TOP_K,
        prefill_tokens: int = PREFILL_TOKENS,
        decode_bucket: int = DECODE_BUCKET,
        max_decode_segments: int = MAX_DECODE_SEGMENTS,
    ):
        ids = (eos_id,) if isinstance(eos_id, (int, np.integer)) else tuple(eos_id)
        if not ids:
            raise ValueError("Sampler: eos_id is an empty sequence (give at least one stop id)")
        self.graphdef = graphdef
        self.cfg = cfg
        self.eos_ids = tuple(int(i) for i in ids)
        self.eos_id = self.eos_ids[0]
        self.pad_id = pad_id
        self.prompt_buckets = tuple(sorted(prompt_buckets))
        # None: `row_bucket`; a sequence: `bucket` over it (fixed shapes for tests and benches)
        self.batch_buckets = None if batch_buckets is None else tuple(sorted(batch_buckets))
        self.max_new_tokens = max_new_tokens
        self.mesh = mesh
        self.top_k = top_k
        self.prefill_tokens = prefill_tokens
        self.decode_bucket = decode_bucket
        self.max_decode_segments = max_decode_segments
        self.compile_count = 0  # incremented at trace time only: a test pins it flat.
        self._built_for = ()
        self._param_shardings = None
        self._generate = None
        if mesh is None:
            self._generate = jax.jit(self._generate_impl, static_argnums=_STATIC)

    @property
    def row_multiple(self) -> int:
        """Padded row counts are a multiple of this (the mesh's row shards)."""
        return 1 if self.mesh is None else sharding.row_multiple(self.mesh)

    def padded_rows(self, num_rows: int) -> int:
        """The rows a call of `num_rows` rows runs at: its row bucket, then a multiple of the
        mesh's row shards (what `sample` compiles for)."""
        nb = (row_bucket(num_rows) if self.batch_buckets is None
              else bucket(num_rows, self.batch_buckets))
        return -(-nb // self.row_multiple) * self.row_multiple

    def _build(self, params) -> None:
        """The generate function jitted with the mesh's shardings for parameters shaped like
        `params` (arrays or ShapeDtypeStructs)."""
        struct = jax.tree.structure(params)
        if self.mesh is None or self._built_for == (struct,):
            return
        rows, rep = sharding.batch_sharding(self.mesh), sharding.replicated(self.mesh)
        self._param_shardings = sharding.param_shardings(params, self.mesh)
        self._generate = jax.jit(
            self._generate_impl, static_argnums=_STATIC,
            in_shardings=(self._param_shardings, rows, rows, rep, rep, rep, rep),
            out_shardings=(rows, rows, rows, rows, rows, rep))
        self._built_for = (struct,)

    # -- device side -------------------------------------------------------------------------

    def _generate_impl(self, params, prompt, prompt_mask, key, temperature, top_p, num_rows,
                       max_new: int, greedy: bool, use_top_p: bool, sample_top_k: int):
        """`num_rows` (traced): the rows before it are the call's, the rest batch padding,
        done from the start so that the loop's early exit waits for the real rows only."""
        self.compile_count += 1
        if self.mesh is None:
            model = nnx.merge(self.graphdef, params)
        else:
            # Weights gathered over fsdp once for the whole decode loop, not at every step; a
            # scanned model's layers into one stacked copy, which every step's scan reads.
            model = sharding.gathered_model(self.graphdef, params, self.mesh, self.cfg.dtype,
                                            once=True)
        bounds = self.segments(max_new)
        carry = self._prefill(model, prompt, prompt_mask, max_new, slots=bounds[0],
                              num_rows=num_rows)
        plen = prompt.shape[1]

        def body(carry):
            return self._decode_step(model, carry, key, temperature, top_p, plen=plen,
                                     greedy=greedy, use_top_p=use_top_p,
                                     sample_top_k=sample_top_k)

        for i, bound in enumerate(bounds):
            if i:
                carry = self._grow(carry, bound - bounds[i - 1])

            def cond(carry, bound=bound):
                t, _, _, _, _, _, done, _, _, _ = carry
                return (t < bound) & ~jnp.all(done)

            carry = jax.lax.while_loop(cond, body, carry)
        steps, _, _, out_tok, out_logp, out_ent, done, lengths, _, _ = carry
        return out_tok, out_logp, out_ent, lengths, done, steps

    def segments(self, max_new: int) -> tuple[int, ...]:
        """This sampler's decode segments for a token cap (`decode_segments`)."""
        return decode_segments(max_new, self.decode_bucket, self.max_decode_segments)

    def _grow(self, carry, extra: int):
        """The carry with `extra` more empty decode slots in the cache (and its valid mask):
        one copy of the cache, between two segments."""
        t, cache, logits, out_tok, out_logp, out_ent, done, lengths, key_valid, prompt_len = carry
        cache = cache.pad(extra)
        key_valid = jnp.pad(key_valid, ((0, 0), (0, extra)))
        return self._shard_carry((t, cache, logits, out_tok, out_logp, out_ent, done, lengths,
                                  key_valid, prompt_len), False)

    def _shard_carry(self, carry, cost: bool):
        """Rows of every per-row carry on the batch axes, the cache's heads on `model`."""
        if cost or self.mesh is None:
            return carry
        t, cache, logits, *per_row = carry
        rows = sharding.batch_sharding(self.mesh)
        cache = jax.lax.with_sharding_constraint(cache, jax.tree.map(
            lambda c: sharding.kv_cache_sharding(self.mesh, self.cfg.num_kv_heads, c.ndim),
            cache))
        return (t, cache, *jax.lax.with_sharding_constraint((logits, *per_row), rows))

    def _prefill_groups(self, rows: int, plen: int) -> int:
        """Row groups the prefill runs in: the fewest whose rows per device hold at most
        `prefill_tokens` prompt tokens (at least one row), dividing the rows evenly."""
        per_device = rows // self.row_multiple
        most = max(1, self.prefill_tokens // plen) if self.prefill_tokens else per_device
        return next(k for k in range(1, per_device + 1)
                    if per_device % k == 0 and per_device // k <= most)

    def _prefill_rows(self, model, prompt, prompt_mask):
        """The last prompt position's logits [B, V] and the prompt's keys/values (`KVCache`, plen
        slots). The prompt attends over its own plen slots only (not the empty decode slots after
        them): the attention scores are [B, heads, plen, plen]."""
        batch, plen = prompt.shape
        cache = init_cache(self.cfg, batch, plen, dtype=jnp.dtype(self.cfg.dtype))
        positions = jnp.maximum(jnp.cumsum(prompt_mask, axis=-1) - 1, 0).astype(jnp.int32)
        mask = jnp.tril(jnp.ones((plen, plen), bool))[None] & prompt_mask.astype(bool)[:, None]
        hidden, cache = model.embed_and_hidden(prompt, positions, attn_mask=mask, cache=cache,
                                               cache_index=jnp.int32(0))
        # Only the last position's logits are needed: [B, V], not [B, plen, V].
        return model.logits(hidden[:, -1]), cache

    def _prefill(self, model, prompt, prompt_mask, max_new: int, cost: bool = False,
                 slots: int | None = None, num_rows=None):
        """Runs the prompt through the model into a fresh cache; returns the decode carry.

        Rows run in groups (`prefill_tokens`) so that the prompt's activations and attention
        scores exist for one group at a time; `cost`: in one piece, unsharded (the logical
        computation, for cost analysis). The decode cache holds the prompt's slots, then
        `slots` empty ones (the first decode segment's; default max_new, the full cache); the
        outputs hold max_new tokens. Rows from `num_rows` on (batch padding) start done."""
        slots = max_new if slots is None else slots
        batch, plen = prompt.shape
        k = 1 if cost else self._prefill_groups(batch, plen)
        if k == 1:
            logits, cache = self._prefill_rows(model, prompt, prompt_mask)
        else:
            parts = sharding.split_rows((prompt, prompt_mask), k)
            if self.mesh is not None:
                parts = jax.lax.with_sharding_constraint(
                    parts, sharding.stacked_batch_sharding(self.mesh))
            logits, cache = jax.lax.map(lambda x: self._prefill_rows(model, *x), parts)
            logits = sharding.merge_rows(logits, k)
            # [k, (L,) B / k, K, ., .] -> [(L,) B, K, ., .], rows back in their order (as
            # merge_rows); the cache is per layer, or stacked [L, ...] with scan_layers.
            def merge(c):
                rows = c.ndim - 4
                return jnp.moveaxis(c, 0, rows).reshape(*c.shape[1:rows], batch,
                                                        *c.shape[rows + 1:])

            cache = jax.tree.map(merge, cache)
        # Padding the prompt's keys/values to the decode cache copies them once (a scan writing
        # each group into a preallocated cache instead cost XLA a second full cache).
        cache = cache.pad(slots)
        key_valid = jnp.concatenate(
            [prompt_mask.astype(bool), jnp.zeros((batch, slots), bool)], axis=1)
        prompt_len = jnp.sum(prompt_mask, axis=-1).astype(jnp.int32)
        out_tok = jnp.full((batch, max_new), self.pad_id, jnp.int32)
        out_logp = jnp.zeros((batch, max_new), jnp.float32)
        out_ent = jnp.zeros((batch, max_new), jnp.float32)
        done = (jnp.zeros((batch,), bool) if num_rows is None
                else jnp.arange(batch, dtype=jnp.int32) >= num_rows)
        lengths = jnp.zeros((batch,), jnp.int32)
        carry = (jnp.int32(0), cache, logits, out_tok, out_logp, out_ent, done, lengths,
                 key_valid, prompt_len)
        return self._shard_carry(carry, cost)

    def _decode_step(self, model, carry, key, temperature, top_p, *, plen: int, greedy: bool,
                     use_top_p: bool, sample_top_k: int = -1, cost: bool = False):
        """One iteration of the decode loop: sample token t, then feed it back."""
        t, cache, logits, out_tok, out_logp, out_ent, done, lengths, key_valid, prompt_len = carry
        tok = _sample_token(logits, jax.random.fold_in(key, t), temperature, top_p, greedy,
                            use_top_p, self.top_k, sample_top_k)
        dist = logits.astype(jnp.float32)
        if not greedy:
            dist = dist / temperature
        logp_all = jax.nn.log_softmax(dist, axis=-1)
        tok_logp = jnp.take_along_axis(logp_all, tok[:, None], axis=-1)[:, 0]
        ent = -jnp.sum(jnp.exp(logp_all) * logp_all, axis=-1)
        live = ~done
        out_tok = out_tok.at[:, t].set(jnp.where(live, tok, self.pad_id))
        out_logp = out_logp.at[:, t].set(jnp.where(live, tok_logp, 0.0))
        out_ent = out_ent.at[:, t].set(jnp.where(live, ent, 0.0))
        lengths = lengths + live.astype(jnp.int32)
        # One compare against all stop ids (an unrolled compare per id made the program grow
        # with their number).
        stop = jnp.asarray(self.eos_ids, jnp.int32)
        done = done | jnp.any(tok[:, None] == stop[None, :], axis=-1)
        # Feed the token back: it sits in slot plen + t at position prompt_len + t.
        key_valid = key_valid.at[:, plen + t].set(True)
        step_mask = key_valid[:, None, :]
        pos = (prompt_len + t)[:, None]
        new_logits, cache = model(tok[:, None], pos, attn_mask=step_mask, cache=cache,
                                  cache_index=plen + t)
        carry = (t + 1, cache, new_logits[:, 0, :], out_tok, out_logp, out_ent, done, lengths,
                 key_valid, prompt_len)
        return self._shard_carry(carry, cost)

    def cost_analysis(self, params, shape: SampleShape) -> tuple[float, float]:
        """XLA FLOPs of the prefill and of one decode step at a padded shape.

        The generate function's while loop is counted once by XLA's cost analysis whatever its
        trip count, so the two loop-free parts are compiled on their own (once per shape, for
        analysis only, never run, unsharded: the logical computation whatever the mesh;
        `shape.steps` is ignored) and the caller multiplies the step by the steps run. The step
        is the full-width one (cache of prompt + max_new slots), the last decode segment's: the
        earlier segments' steps attend over fewer slots, so steps x step is an upper bound on
        their attention FLOPs (the rest of a step does not depend on the cache width).
        """
        plen, max_new = shape.prompt_len, shape.max_new
        params = abstract(params)
        prompt = jax.ShapeDtypeStruct((shape.rows, plen), jnp.int32)

        def prefill(params, prompt, prompt_mask):
            return self._prefill(cost_model(self.graphdef, params), prompt, prompt_mask, max_new,
                                 cost=True)

        def step(params, carry, key, temperature, top_p):
            return self._decode_step(cost_model(self.graphdef, params), carry, key, temperature,
                                     top_p, plen=plen, greedy=shape.greedy,
                                     use_top_p=shape.use_top_p,
                                     sample_top_k=shape.sample_top_k, cost=True)

        carry = jax.eval_shape(prefill, params, prompt, prompt)
        scalar = jax.ShapeDtypeStruct((), jnp.float32)
        key = jax.eval_shape(jax.random.key, 0)
        return (compiled_flops(prefill, params, prompt, prompt),
                compiled_flops(step, params, carry, key, scalar, scalar))

    def lower(self, params, rows: int, prompt_len: int, max_new: int, *, greedy: bool = False,
              use_top_p: bool = True, sample_top_k: int = -1) -> jax.stages.Lowered:
        """The generate function lowered for `rows` prompts (padded up to the mesh's row
        multiple, as `sample` pads them) of `prompt_len` tokens and `max_new` new ones, with
        parameters shaped like `params` (ShapeDtypeStructs will do); nothing is allocated."""
        self._build(params)
        rows = -(-rows // self.row_multiple) * self.row_multiple
        prompt = jax.ShapeDtypeStruct((rows, prompt_len), jnp.int32)
        scalar = jax.ShapeDtypeStruct((), jnp.float32)
        key = jax.eval_shape(jax.random.key, 0)
        count = jax.ShapeDtypeStruct((), jnp.int32)
        return self._generate.lower(abstract(params), prompt, prompt, key, scalar, scalar, count,
                                    max_new, greedy, use_top_p and not greedy,
                                    sample_top_k_on(sample_top_k, greedy, self.cfg.vocab_size))

    # -- host side ---------------------------------------------------------------------------

    def sample(
        self,
        params,
        prompts: Sequence[Sequence[int]],
        n: int = 1,
        *,
        seed: int = 0,
        temperature: float = 1.0,
        top_p: float = 1.0,
        sample_top_k: int = -1,
        greedy: bool = False,
        max_new_tokens: int | None = None,
    ) -> SampleResult:
        """Samples n responses per prompt (token ids, BOS included by the caller).
        `sample_top_k`: draw among the k largest logits only (-1 = off; ignored when greedy)."""
        if not prompts:
            raise ValueError("sample() got no prompts")
        if temperature <= 0 and not greedy:
            raise ValueError(f"temperature={temperature} must be > 0 (or use greedy=True)")
        if sample_top_k != -1 and (isinstance(sample_top_k, bool) or sample_top_k < 1):
            raise ValueError(f"sample_top_k={sample_top_k} must be -1 (off) or an integer >= 1")
        max_new = max_new_tokens or self.max_new_tokens
        rows = [list(p) for p in prompts for _ in range(n)]
        num_rows = len(rows)
        plen = bucket(max(len(r) for r in rows), self.prompt_buckets)
        nb = self.padded_rows(num_rows)
        tok, msk = left_pad(rows, plen, nb, self.pad_id)
        msk[num_rows:, -1] = 1  # padding rows attend to one token so softmax stays finite
        use_top_p = top_p < 1.0 and not greedy
        sample_top_k = sample_top_k_on(sample_top_k, greedy, self.cfg.vocab_size)
        if self.mesh is not None:
            self._build(params)
            # A no-op for parameters already placed by the trainer on the same mesh.
            params = jax.device_put(params, self._param_shardings)
            rows_sharding = sharding.batch_sharding(self.mesh)
            tok = distributed.to_global(tok, rows_sharding)
            msk = distributed.to_global(msk, rows_sharding)
        else:
            tok, msk = jnp.asarray(tok), jnp.asarray(msk)
        out = self._generate(
            params, tok, msk, jax.random.key(seed),
            jnp.float32(max(temperature, 1e-6)), jnp.float32(top_p), jnp.int32(num_rows), max_new,
            greedy, use_top_p, sample_top_k)
        # Every process gets every row (run/distributed.py: one host program on identical inputs).
        out_tok, out_logp, out_ent, lengths, done, steps = distributed.to_host(out)
        return SampleResult(
            tokens=out_tok[:num_rows], logps=out_logp[:num_rows], entropies=out_ent[:num_rows],
            lengths=lengths[:num_rows], finished=done[:num_rows],
            prompt_lens=np.array([len(r) for r in rows], np.int32),
            shape=SampleShape(rows=nb, prompt_len=plen, max_new=max_new, steps=int(steps),
                              greedy=greedy, use_top_p=use_top_p, sample_top_k=sample_top_k),
        )
