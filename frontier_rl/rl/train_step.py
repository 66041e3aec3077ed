"""One jitted, sharded RL update: PPO epochs x minibatches of the policy loss (`rl.loss`,
rl/losses.py and the registry of rl/objectives.py).

`Trainer.step` takes a packed batch of N sequences (prompt left-padded, response right-padded)
and runs `epochs` passes over `minibatches` shuffled minibatches, one optimizer update each, as
verl's `ppo_epochs` / `ppo_mini_batch_size` do. The whole thing is a single `jax.jit` with
explicit in/out shardings (parameters by `sharding.PARAM_RULES`, optimizer moments like their
parameters, rows along the mesh's ("data", "fsdp") axes), compiled once per padded row count.

Log-probabilities and entropies are those of softmax(logits / T) at the rollout temperature T
(`rollout.temperature`), as verl's actor computes them: the new, recomputed-old and reference
log-probs of the loss are then all of the distribution the responses were sampled from (before
top-p truncation), the one whose log-probs the sampler returns.

Memory at real sizes (vocab 151,936, 5k-token rows):
  * `sequence_logps` computes them from the final hidden states in chunks of `logits_chunk`
    positions, each chunk's logits rematerialised in the backward pass, so no [rows, L, vocab]
    array exists (verl's and MaxText's chunked/fused log-prob, for the same reason).
  * each optimizer update may run its minibatch as micro-batches of `micro_batch_size` rows
    (verl's `ppo_micro_batch_size`), accumulating float32 gradients in a `lax.scan`. The loss
    of each micro-batch is weighted by its share of the minibatch's normaliser (response tokens
    for token-mean, responses with tokens for the seq-mean modes, none for token-sum), so the
    accumulated gradient is the whole minibatch's, for every aggregation.
  * parameters stay split over `fsdp` between updates; each micro-batch gathers them in the
    compute dtype, 16-bit when the policy computes in 16 bits, and its gradient is
    reduce-scattered back in float32 (`sharding.map_rows`: each device computes its own rows'
    log-probs, so the partial gradients are summed after their cast to the float32 master
    weights, not in the matmul's dtype as XLA's partitioner would place the sum).
  * `lower_step` / `lower_logps` lower both programs for abstract parameters without placing
    anything, for `frontier-rl fit`'s ahead-of-time memory check.

Rollout rejection (`rl.rollout_rs`, losses.rejection_keep) depends on no parameter: it is
applied to the whole step's loss mask before the minibatches are drawn, so the loss, its
normalisers and the metrics all count only the kept responses (`rs_rejected_frac`).

A non-finite loss or gradient norm skips that update (parameters and optimizer state kept) and
is counted in the `skipped_updates` metric; the train loop decides when that is a divergence.
"""

from __future__ import annotations

import dataclasses
import logging

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh

from frontier_rl.fit.accounting import abstract, compiled_flops
from frontier_rl.models.transformer import SegmentMask, attention_of, cost_model
from frontier_rl.rl import batch as batch_lib
from frontier_rl.rl import (
    objectives,  # noqa: F401  (registers every built-in loss)
    sharding,
)
from frontier_rl.rl.losses import LossConfig, policy_loss, rejection_keep
from frontier_rl.run import distributed

log = logging.getLogger("frontier_rl")

BATCH_KEYS = ("tokens", "valid", "loss_mask", "old_logp", "advantages")
STEP_KEYS = BATCH_KEYS + ("ref_logp", "rollout_logp")
# policy_loss metrics normalised like the loss (by its aggregation's denominator); the others
# are means over response tokens.
_AGGREGATED_METRICS = ("pg_loss", "kl_ref", "entropy_bonus")


@dataclasses.dataclass(frozen=True)
class OptimConfig:
    learning_rate: float = 3e-4
    b1: float = 0.9
    b2: float = 0.99
    eps: float = 1e-8
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    warmup_steps: int = 0


def make_optimizer(cfg: OptimConfig) -> optax.GradientTransformation:
    """Global-norm clipping then Adam(W), with an optional linear warmup."""
    lr = cfg.learning_rate
    if cfg.warmup_steps > 0:
        lr = optax.linear_schedule(0.0, cfg.learning_rate, cfg.warmup_steps)
    return optax.chain(
        optax.clip_by_global_norm(cfg.grad_clip),
        optax.adamw(lr, b1=cfg.b1, b2=cfg.b2, eps=cfg.eps, weight_decay=cfg.weight_decay),
    )


def sequence_logps(model, tokens: jax.Array, valid: jax.Array, temperature: float = 1.0,
                   chunk: int = 512, *, unroll: bool = False,
                   layout: str = "pad") -> tuple[jax.Array, jax.Array]:
    """Log-probability and entropy of each next token under softmax(logits / temperature):
    [B, L-1] each.

    `layout` is rl/batch.py's. "pad": rows are left-padded, `valid` is 0/1, positions count
    valid tokens only and padding is never attended to. "trim" and "pack": `valid` holds each
    token's sequence index within its row (0 = padding); positions restart at each sequence and
    attention stays within it (`SegmentMask`). The logits are computed from the final hidden
    states `chunk` target positions at a time (0: all at once); `unroll` unrolls the chunk
    loop, for XLA's cost analysis, which counts a loop body once.
    """
    if layout == "pad":
        valid = valid.astype(bool)
        positions = jnp.maximum(jnp.cumsum(valid, axis=-1) - 1, 0).astype(jnp.int32)
        length = tokens.shape[1]
        causal = jnp.tril(jnp.ones((length, length), bool))
        # Padding queries attend to themselves so their softmax stays finite; their loss is
        # masked.
        mask = (causal[None] & valid[:, None, :]) | jnp.eye(length, dtype=bool)[None]
    else:
        positions = segment_positions(valid)
        mask = SegmentMask(valid.astype(jnp.int32), packed=layout == "pack",
                           max_segments=batch_lib.MAX_SEGMENTS if layout == "pack" else 1)
    hidden, _ = model.embed_and_hidden(tokens, positions, attn_mask=mask)
    return next_token_stats(model, hidden, tokens, temperature, chunk, unroll=unroll)


def segment_positions(segment_ids: jax.Array) -> jax.Array:
    """Each token's position within its sequence, int32 [B, L], from segment ids [B, L]
    (0 = padding, which gets the position after its row's last token or 0)."""
    live = (segment_ids > 0).astype(jnp.int32)
    count = jnp.cumsum(live, axis=-1)  # live tokens up to and including this one
    prev = jnp.pad(segment_ids[:, :-1], ((0, 0), (1, 0)), constant_values=-1)
    # live tokens before the sequence this token belongs to: recorded at each sequence start,
    # carried forward (count never decreases, so a running max carries it)
    before = jax.lax.cummax(jnp.where(segment_ids != prev, count - live, 0), axis=1)
    return jnp.maximum(count - before - 1, 0).astype(jnp.int32)


def next_token_stats(model, hidden: jax.Array, tokens: jax.Array, temperature: float = 1.0,
                     chunk: int = 512, *, unroll: bool = False) -> tuple[jax.Array, jax.Array]:
    """(log p(tokens[:, t+1]), entropy) [B, L-1] from final hidden states [B, L, H].

    One chunk (chunk = 0 or >= L - 1) is the plain computation: logits [B, L, V], then
    log-softmax, op for op what this function computed before chunking (the embedded runs'
    seed-sensitive warm start was validated on its rounding). Several chunks run in a
    `lax.scan` whose body is rematerialised (`jax.checkpoint`), so the backward pass recomputes
    a chunk's logits instead of storing them; it uses the log-sum-exp form (log p = z_y - lse,
    H = lse - sum softmax(z) z, with z shifted by its max), which needs no [B, chunk, V] buffer
    besides the logits. The two forms agree to float32 rounding (~1e-6).
    """
    b, length = tokens.shape
    targets = tokens[:, 1:]
    n = length - 1
    if chunk <= 0 or chunk >= n:
        logits = model.logits(hidden)[:, :-1].astype(jnp.float32)
        if temperature != 1.0:
            logits = logits / temperature
        logp_all = jax.nn.log_softmax(logits, axis=-1)
        logp = jnp.take_along_axis(logp_all, targets[..., None], axis=-1)[..., 0]
        entropy = -jnp.sum(jnp.exp(logp_all) * logp_all, axis=-1)
        return logp, entropy

    chunks = -(-n // chunk)
    pad = chunks * chunk - n
    h = jnp.pad(hidden[:, :-1], ((0, 0), (0, pad), (0, 0)))
    t = jnp.pad(targets, ((0, 0), (0, pad)))
    h = h.reshape(b, chunks, chunk, h.shape[-1]).swapaxes(0, 1)  # [chunks, B, chunk, H]
    t = t.reshape(b, chunks, chunk).swapaxes(0, 1)

    @jax.checkpoint
    def one(h, t):
        z = model.logits(h).astype(jnp.float32)
        if temperature != 1.0:
            z = z / temperature
        z = z - jax.lax.stop_gradient(jnp.max(z, axis=-1, keepdims=True))
        e = jnp.exp(z)
        s = jnp.sum(e, axis=-1)
        lse = jnp.log(s)
        logp = jnp.take_along_axis(z, t[..., None], axis=-1)[..., 0] - lse
        entropy = lse - jnp.sum(e * z, axis=-1) / s
        return logp, entropy

    _, (logp, entropy) = jax.lax.scan(lambda c, x: (c, one(*x)), None, (h, t),
                                      unroll=bool(unroll))
    logp = logp.swapaxes(0, 1).reshape(b, chunks * chunk)[:, :n]
    entropy = entropy.swapaxes(0, 1).reshape(b, chunks * chunk)[:, :n]
    return logp, entropy


def _sequences(mb) -> jax.Array:
    """Responses with at least one loss token in a (micro-)batch: one per row, or, in the
    "pack" layout, the sum of `seq_weight` (1 / the response's tokens, on each of them)."""
    mask = mb["loss_mask"].astype(jnp.float32)
    if "seq_weight" in mb:
        return jnp.sum(mb["seq_weight"] * mask)
    return jnp.sum(jnp.sum(mask, axis=-1) > 0).astype(jnp.float32)


def compute_dtype(model):
    """The dtype a policy computes in (`ModelConfig.dtype`); None when it does not say."""
    cfg = getattr(model, "cfg", None)
    return getattr(cfg, "dtype", None)


class Trainer:
    """Holds the compiled update and log-prob functions for one policy graph and mesh."""

    def __init__(
        self,
        graphdef: nnx.GraphDef,
        loss_cfg: LossConfig,
        tx: optax.GradientTransformation,
        mesh: Mesh,
        *,
        epochs: int = 1,
        minibatches: int = 1,
        temperature: float = 1.0,
        micro_batch_size: int = 0,
        logits_chunk: int = 512,
        layout: str = "pad",
    ):
        if not temperature > 0:
            raise ValueError(f"temperature={temperature} must be > 0")
        if isinstance(micro_batch_size, bool) or not isinstance(micro_batch_size, int) \
                or micro_batch_size < 0:
            raise ValueError(f"micro_batch_size={micro_batch_size!r} must be an int >= 0 "
                             "(0 = the whole minibatch)")
        shards = sharding.row_multiple(mesh)
        if micro_batch_size % shards:
            raise ValueError(f"micro_batch_size={micro_batch_size} is not a multiple of the "
                             f"{shards} row shards of the mesh (mesh.data x mesh.fsdp)")
        if isinstance(logits_chunk, bool) or not isinstance(logits_chunk, int) \
                or logits_chunk < 0:
            raise ValueError(f"logits_chunk={logits_chunk!r} must be an int >= 0 (0 = the "
                             "whole sequence)")
        self.graphdef = graphdef
        self.loss_cfg = loss_cfg
        self.tx = tx
        self.mesh = mesh
        self.epochs = epochs
        self.minibatches = minibatches
        self.temperature = float(temperature)  # T of the rollouts (rollout.temperature)
        self.micro_batch_size = micro_batch_size
        self.logits_chunk = logits_chunk
        if layout not in batch_lib.LAYOUTS:
            raise ValueError(f"layout={layout!r} is not one of {batch_lib.LAYOUTS} "
                             "(rl.packing)")
        # The batches' layout (rl/batch.py), fixed per trainer: rl.packing as asked, checked
        # against the policy's attention kernel when the parameters show it (`_build`,
        # batch_lib.layout_for: every layout trains as asked on XLA and cuDNN).
        self.requested_layout = self.layout = layout
        self.compile_count = 0
        self._row_sharding = sharding.batch_sharding(mesh)
        self._built_for = ()  # the parameter tree structure the jitted functions are for
        self._step = None
        self._logps = None
        self._noise = None

    @property
    def row_multiple(self) -> int:
        """Row counts must be a multiple of this: minibatches x (micro-batch rows, or the mesh's
        data x fsdp row shards without micro-batching)."""
        return self.minibatches * (self.micro_batch_size or sharding.row_multiple(self.mesh))

    def _micro_batches(self, rows: int) -> int:
        """Micro-batches per minibatch of `rows` rows."""
        if not self.micro_batch_size or self.micro_batch_size >= rows:
            return 1
        if rows % self.micro_batch_size:
            raise ValueError(f"a minibatch of {rows} rows does not split into micro-batches "
                             f"of {self.micro_batch_size}")
        return rows // self.micro_batch_size

    # -- building -----------------------------------------------------------------------------

    def _build(self, params) -> None:
        """Shardings and jitted functions for parameters shaped like `params` (arrays or
        ShapeDtypeStructs); nothing is placed or compiled."""
        struct = jax.tree.structure(params)
        if self._built_for == (struct,):
            return
        attention = attention_of(nnx.merge(self.graphdef, abstract(params)))
        self.layout = batch_lib.layout_for(self.requested_layout, attention)
        mesh, rep = self.mesh, sharding.replicated(self.mesh)
        self.param_shardings = sharding.param_shardings(params, mesh)
        opt_state = jax.eval_shape(self.tx.init, abstract(params))

        # Moments (subtrees shaped like the parameters) inherit the parameters' shardings;
        # scalars (step counts) are replicated.
        def is_params(x):
            return jax.tree.structure(x) == struct

        self.opt_shardings = jax.tree.map(
            lambda x: self.param_shardings if is_params(x) else rep, opt_state,
            is_leaf=is_params)
        rows = self._row_sharding
        self._step = jax.jit(
            self._step_impl,
            # one sharding for every array of the batch (its keys depend on the layout)
            in_shardings=(self.param_shardings, self.opt_shardings, rows, rep),
            out_shardings=(self.param_shardings, self.opt_shardings, rep),
            donate_argnums=(0, 1),
        )
        self._logps = jax.jit(self._logps_impl,
                              in_shardings=(self.param_shardings, rows, rows),
                              out_shardings=rows)
        self._built_for = (struct,)

    def init(self, params):
        """Places params on the mesh and builds the optimizer state beside them."""
        self._build(params)
        params = jax.device_put(params, self.param_shardings)
        opt_state = jax.jit(self.tx.init, out_shardings=self.opt_shardings)(params)
        return params, opt_state

    def _abstract_batch(self, rows: int, length: int) -> dict:
        tok = jax.ShapeDtypeStruct((rows, length), jnp.int32)
        tgt = jax.ShapeDtypeStruct((rows, length - 1), jnp.float32)
        batch = {"tokens": tok, "valid": tok, "loss_mask": tgt, "old_logp": tgt,
                 "ref_logp": tgt, "rollout_logp": tgt,
                 "advantages": jax.ShapeDtypeStruct((rows,), jnp.float32)}
        if self.layout == "pack":
            batch.update(advantages=tgt, seq_weight=tgt)
        return batch

    def _check_rows(self, rows: int) -> None:
        if rows % self.row_multiple:
            raise ValueError(f"{rows} rows is not a multiple of {self.row_multiple}; "
                             "pad the batch")

    def lower_step(self, params, rows: int, length: int) -> jax.stages.Lowered:
        """The step (epochs x minibatches x micro-batches of updates) lowered for a padded
        batch of [rows, length] and parameters shaped like `params` (ShapeDtypeStructs will
        do), with the step's shardings and donation; nothing is allocated."""
        self._check_rows(rows)
        self._build(params)
        params = abstract(params)
        opt_state = jax.eval_shape(self.tx.init, params)
        key = jax.eval_shape(jax.random.key, 0)
        return self._step.lower(params, opt_state, self._abstract_batch(rows, length), key)

    def lower_logps(self, params, rows: int, length: int) -> jax.stages.Lowered:
        """`logps` lowered for [rows, length] (ShapeDtypeStruct parameters will do)."""
        self._check_rows(rows)
        self._build(params)
        x = jax.ShapeDtypeStruct((rows, length), jnp.int32)
        return self._logps.lower(abstract(params), x, x)

    # -- device side --------------------------------------------------------------------------

    def _model(self, params, cost: bool):
        """The policy for a device function: its weights gathered for compute on the mesh
        (`sharding.gather_params`), or as they are for cost analysis (`cost`: unsharded)."""
        if cost:
            return cost_model(self.graphdef, params)
        model = nnx.merge(self.graphdef, params)
        return sharding.gathered_model(self.graphdef, params, self.mesh, compute_dtype(model))

    def _loss(self, params, mb, cost: bool = False):
        def logps(model, tokens, valid):
            return sequence_logps(model, tokens, valid, self.temperature, self.logits_chunk,
                                  unroll=cost, layout=self.layout)

        if cost:
            logp, entropy = logps(self._model(params, cost), mb["tokens"], mb["valid"])
        else:  # each device on its own rows: the weight gradients are summed in float32
            dtype = compute_dtype(nnx.merge(self.graphdef, params))
            logp, entropy = sharding.map_rows(logps, self.graphdef, params, self.mesh, dtype,
                                              mb["tokens"], mb["valid"])
        mask = mb["loss_mask"]
        ref = mb["ref_logp"] if self.loss_cfg.kl_coef > 0 else None
        loss, metrics = policy_loss(logp, mb["old_logp"], mb["advantages"], mask, self.loss_cfg,
                                    ref_logp=ref, rollout_logp=mb["rollout_logp"],
                                    entropy=entropy if self.loss_cfg.entropy_coef > 0 else None,
                                    seq_weight=mb.get("seq_weight"),
                                    segments=self._segments(mb))
        metrics["entropy"] = jnp.sum(entropy * mask) / jnp.maximum(jnp.sum(mask), 1.0)
        return loss, metrics

    def _segments(self, mb):
        """Each target token's response index within its row, where rows hold several
        responses ("pack"); None otherwise (`losses.sequence_sums`)."""
        return mb["valid"][:, 1:] if self.layout == "pack" else None

    def _reject(self, batch):
        """(batch with the rejected responses out of its loss mask, their share of the
        responses) under `rl.rollout_rs`; the batch as it is when rejection is off."""
        if not self.loss_cfg.rollout_rs:
            return batch, None
        mask = batch["loss_mask"].astype(jnp.float32)
        keep = rejection_keep(batch["old_logp"], batch["rollout_logp"], mask, self.loss_cfg,
                              self._segments(batch))
        kept = dict(batch, loss_mask=mask * keep)
        return kept, 1.0 - _sequences(kept) / jnp.maximum(_sequences(batch), 1.0)

    def _step_impl(self, params, opt_state, batch, key):
        self.compile_count += 1
        batch, rejected = self._reject(batch)
        n = batch["tokens"].shape[0]
        m = self.minibatches

        def epoch_batches(k):
            perm = jax.random.permutation(k, n)
            return jax.tree.map(lambda x: x[perm].reshape((m, n // m) + x.shape[1:]), batch)

        keys = jax.random.split(key, self.epochs)
        batches = jax.vmap(epoch_batches)(keys)  # [epochs, m, n/m, ...]
        batches = jax.tree.map(lambda x: x.reshape((self.epochs * m,) + x.shape[2:]), batches)
        batches = jax.lax.with_sharding_constraint(
            batches, sharding.stacked_batch_sharding(self.mesh))

        def update(carry, mb):
            params, opt_state, metrics = self._update(*carry, mb)
            return (params, opt_state), metrics

        (params, opt_state), metrics = jax.lax.scan(update, (params, opt_state), batches)
        # Means over the updates applied (a skipped update's loss may be NaN); the count of
        # skipped ones is summed. A step whose updates were all skipped reports 0 for the rest.
        skipped = metrics.pop("skipped_updates")
        applied = jnp.sum(skipped == 0)

        def mean(v):
            total = jnp.sum(jnp.where(skipped == 0, v, 0.0))
            return jnp.where(applied > 0, total / jnp.maximum(applied, 1), 0.0)

        metrics = {k: mean(v) for k, v in metrics.items()}
        metrics["skipped_updates"] = jnp.sum(skipped)
        if rejected is not None:
            metrics["rs_rejected_frac"] = rejected
        return params, opt_state, metrics

    def _update(self, params, opt_state, mb, cost: bool = False):
        """One optimizer update on one minibatch (the body of the step's scan), in micro-batches
        when configured. `cost`: the logical computation for cost analysis (unsharded, in one
        piece: the same gradient and FLOPs, the logits' chunk loop unrolled)."""
        k = 1 if cost else self._micro_batches(mb["tokens"].shape[0])
        if k == 1:
            (loss, metrics), grads = jax.value_and_grad(
                lambda p: self._loss(p, mb, cost), has_aux=True)(params)
        else:
            loss, metrics, grads = self._accumulate(params, mb, k)
        grad_norm = optax.tree.norm(grads)
        new_params, new_opt_state, update_norm = self._apply(params, opt_state, grads)
        ok = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
        keep = lambda new, old: jnp.where(ok, new, old)  # noqa: E731
        params = jax.tree.map(keep, new_params, params)
        opt_state = jax.tree.map(keep, new_opt_state, opt_state)
        metrics = dict(metrics, loss=loss, grad_norm=grad_norm, update_norm=update_norm,
                       skipped_updates=(~ok).astype(jnp.float32))
        return params, opt_state, metrics

    def _apply(self, params, opt_state, grads):
        """(params, opt_state, the update's norm |delta params|: Adam's step size)."""
        updates, opt_state = self.tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, optax.tree.norm(updates)

    def _accumulate(self, params, mb, k: int):
        """Loss, metrics and gradient of a minibatch from k micro-batches (float32 sums).

        policy_loss normalises each micro-batch by its own denominator; rescaling by
        (micro-batch denominator / minibatch denominator) makes the sum the minibatch's.
        """
        mask = mb["loss_mask"].astype(jnp.float32)
        tokens = jnp.maximum(jnp.sum(mask), 1.0)
        seqs = jnp.maximum(_sequences(mb), 1.0)
        aggregation = self.loss_cfg.aggregation
        micro = jax.lax.with_sharding_constraint(
            sharding.split_rows(mb, k), sharding.stacked_batch_sharding(self.mesh))

        def weighted_loss(p, part):
            loss, metrics = self._loss(p, part)
            m = part["loss_mask"].astype(jnp.float32)
            w_tok = jnp.sum(m) / tokens
            if aggregation == "token_mean":
                w_agg = w_tok
            elif aggregation == "token_sum":  # sums add up
                w_agg = jnp.ones_like(w_tok)
            else:  # the seq-mean modes
                w_agg = _sequences(part) / seqs
            metrics = {key: v * (w_agg if key in _AGGREGATED_METRICS else w_tok)
                       for key, v in metrics.items()}
            return loss * w_agg, dict(metrics, loss=loss * w_agg)

        def body(carry, part):
            grads, metrics = carry
            (_, m), g = jax.value_and_grad(weighted_loss, has_aux=True)(params, part)
            grads = jax.tree.map(lambda a, b: a + b.astype(jnp.float32), grads, g)
            metrics = jax.tree.map(jnp.add, metrics, m)
            return (grads, metrics), None

        shapes = jax.eval_shape(weighted_loss, params, jax.tree.map(lambda x: x[0], micro))[1]
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, jnp.float32), shapes)
        grads = jax.tree.map(lambda p: jnp.zeros(p.shape, jnp.float32), params)
        grads = jax.lax.with_sharding_constraint(grads, self.param_shardings)
        (grads, metrics), _ = jax.lax.scan(body, (grads, zeros), micro)
        grads = jax.tree.map(lambda g, p: g.astype(p.dtype), grads, params)
        loss = metrics.pop("loss")
        return loss, metrics, grads

    def _logps_impl(self, params, tokens, valid):
        self.compile_count += 1
        model = self._model(params, cost=False)  # gathered once for all micro-batches

        def logps(tokens, valid):
            return sequence_logps(model, tokens, valid, self.temperature, self.logits_chunk,
                                  layout=self.layout)[0]

        k = self._micro_batches(tokens.shape[0])
        if k == 1:
            return logps(tokens, valid)
        parts = jax.lax.with_sharding_constraint(
            sharding.split_rows((tokens, valid), k), sharding.stacked_batch_sharding(self.mesh))
        return sharding.merge_rows(jax.lax.map(lambda x: logps(*x), parts), k)

    def _logps_fn(self, params, tokens, valid, cost: bool = False):
        return sequence_logps(self._model(params, cost), tokens, valid, self.temperature,
                              self.logits_chunk, unroll=cost, layout=self.layout)[0]

    # -- host side ----------------------------------------------------------------------------

    def step(self, params, opt_state, batch: dict[str, np.ndarray], seed: int):
        """One RL update. Returns (params, opt_state, metrics as Python floats)."""
        self._check_rows(batch["tokens"].shape[0])
        self._build(params)
        batch = dict(batch)
        batch.setdefault("ref_logp", np.zeros_like(batch["old_logp"]))
        batch.setdefault("rollout_logp", batch["old_logp"])  # no mismatch: TIS weight 1
        batch = self._place(batch)
        params, opt_state, metrics = self._step(params, opt_state, batch, jax.random.key(seed))
        return params, opt_state, {k: float(v) for k, v in jax.device_get(metrics).items()}

    def _place(self, batch: dict[str, np.ndarray]) -> dict[str, jax.Array]:
        keys = STEP_KEYS + (("seq_weight",) if self.layout == "pack" else ())
        missing = [k for k in keys if k not in batch]
        if missing:
            raise ValueError(f"the batch has no {missing} (layout {self.layout!r}: pack it with "
                             f"rl/batch.py's layout={self.layout!r})")
        return {k: distributed.to_global(batch[k], self._row_sharding) for k in keys}

    def gradient(self, params, batch: dict[str, np.ndarray]):
        """(loss, metrics, gradient) of one optimizer update's minibatch = `batch`, without
        updating anything (micro-batches as the step runs them). For checks and debugging;
        compiled on each call."""
        self._check_rows(batch["tokens"].shape[0])
        self._build(params)
        batch = dict(batch)
        batch.setdefault("ref_logp", np.zeros_like(batch["old_logp"]))
        batch.setdefault("rollout_logp", batch["old_logp"])
        batch = self._place(batch)

        def go(params, mb):
            mb, _ = self._reject(mb)
            k = self._micro_batches(mb["tokens"].shape[0])
            if k == 1:
                (loss, metrics), grads = jax.value_and_grad(
                    lambda p: self._loss(p, mb), has_aux=True)(params)
                return loss, metrics, grads
            return self._accumulate(params, mb, k)

        return jax.jit(go)(params, batch)

    def noise(self, params, batch: dict[str, np.ndarray], parts: int) -> tuple[float, float]:
        """(mean |g_i|^2 over the `parts` contiguous row chunks, |G|^2 of the whole batch), the
        gradients taken at `params` without updating anything: the two norms of McCandlish et
        al.'s gradient noise scale (arXiv 1812.06162, appendix A; rl/noise.py). Each chunk's
        gradient is its own loss's (normalised by its own denominator, as a batch of it would
        be); G is their aggregation as the minibatch's loss weighs them (`_accumulate`). One
        forward and backward pass over the batch, compiled once per batch shape."""
        rows = batch["tokens"].shape[0]
        if parts < 2 or rows % parts:
            raise ValueError(f"{rows} rows do not split into {parts} >= 2 noise chunks")
        self._check_rows(rows)
        self._build(params)
        batch = dict(batch)
        batch.setdefault("ref_logp", np.zeros_like(batch["old_logp"]))
        batch.setdefault("rollout_logp", batch["old_logp"])
        batch = self._place(batch)
        if self._noise is None:
            self._noise = jax.jit(self._noise_impl, static_argnums=2)
        small, big = self._noise(params, batch, parts)
        return float(small), float(big)

    def _noise_impl(self, params, batch, parts: int):
        mask = batch["loss_mask"].astype(jnp.float32)
        tokens, seqs = jnp.maximum(jnp.sum(mask), 1.0), jnp.maximum(_sequences(batch), 1.0)
        chunks = jax.tree.map(lambda x: x.reshape((parts, -1) + x.shape[1:]), batch)

        def body(carry, part):
            total, sq = carry
            g = jax.grad(lambda p: self._loss(p, part)[0])(params)
            m = part["loss_mask"].astype(jnp.float32)
            w = {"token_mean": jnp.sum(m) / tokens, "token_sum": jnp.ones(())}.get(
                self.loss_cfg.aggregation, _sequences(part) / seqs)
            total = jax.tree.map(lambda a, b: a + w * b.astype(jnp.float32), total, g)
            return (total, sq + optax.tree.norm(g, squared=True)), None

        zeros = jax.tree.map(lambda p: jnp.zeros(p.shape, jnp.float32), params)
        (total, sq), _ = jax.lax.scan(body, (zeros, jnp.zeros(())), chunks)
        return sq / parts, optax.tree.norm(total, squared=True)

    def logps(self, params, tokens: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """Per-token log-probabilities [N, L-1] at the trainer's temperature (old-policy
        recompute, reference policy)."""
        self._build(params)
        tokens = distributed.to_global(tokens, self._row_sharding)
        valid = distributed.to_global(valid, self._row_sharding)
        return np.asarray(distributed.to_host(self._logps(params, tokens, valid)))

    def response_logps(self, params, prompt: list[int], response: list[int], *,
                       pad_id: int) -> np.ndarray:
        """Log-probabilities [len(response)] of `response` after `prompt` (an engine's weight
        probe). The sequence runs left-aligned in rows padded to a multiple of 8 tokens, so
        probes of similar lengths share one compiled program."""
        plen = len(prompt)
        seq = np.array(list(prompt) + list(response), np.int32)
        length = -(-len(seq) // 8) * 8
        tokens = np.full((self.row_multiple, length), pad_id, np.int32)
        valid = np.zeros_like(tokens)
        tokens[:, :len(seq)], valid[:, :len(seq)] = seq, 1
        return self.logps(params, tokens, valid)[0, plen - 1:len(seq) - 1]

    # XLA cost analysis, for FLOPs accounting. The step's scan body is counted once by XLA
    # whatever the trip count, so one minibatch update is analysed on its own and the caller
    # multiplies by epochs x minibatches. Both are analysed as the logical computation: unsharded
    # (whatever the mesh), the minibatch in one piece (micro-batches sum to the same FLOPs) and
    # the logits' chunk loop unrolled (so the backward's recomputed chunk logits are counted).
    # They are compiled for analysis only and never run.

    def logps_cost(self, params, rows: int, length: int) -> float:
        """XLA FLOPs of one `logps` call on [rows, length]."""
        x = jax.ShapeDtypeStruct((rows, length), jnp.int32)
        return compiled_flops(lambda p, t, v: self._logps_fn(p, t, v, cost=True),
                              abstract(params), x, x)

    def update_cost(self, params, rows: int, length: int) -> float:
        """XLA FLOPs of one optimizer update on a minibatch of [rows, length] (loss, gradient,
        clipping and Adam)."""
        params = abstract(params)
        opt_state = jax.eval_shape(self.tx.init, params)
        return compiled_flops(lambda p, o, mb: self._update(p, o, mb, cost=True),
                              params, opt_state, self._abstract_batch(rows, length))
