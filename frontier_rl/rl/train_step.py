"""One jitted, sharded RL update: PPO epochs x minibatches of the GRPO/DAPO loss.

`Trainer.step` takes a packed batch of N sequences (prompt left-padded, response right-padded)
and runs `epochs` passes over `minibatches` shuffled minibatches, one optimizer update each, as
verl's `ppo_epochs` / `ppo_mini_batch_size` do. The whole thing is a single `jax.jit` with
explicit in/out shardings (parameters by `sharding.PARAM_RULES`, rows along `data`), compiled
once per padded row count.

Log-probabilities and entropies are those of softmax(logits / T) at the rollout temperature T
(`rollout.temperature`), as verl's actor computes them: the new, recomputed-old and reference
log-probs of the loss are then all of the distribution the responses were sampled from (before
top-p truncation), the one whose log-probs the sampler returns.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh

from frontier_rl.accounting import abstract, compiled_flops
from frontier_rl.rl import sharding
from frontier_rl.rl.losses import LossConfig, policy_loss

BATCH_KEYS = ("tokens", "valid", "loss_mask", "old_logp", "advantages")


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


def sequence_logps(model, tokens: jax.Array, valid: jax.Array,
                   temperature: float = 1.0) -> tuple[jax.Array, jax.Array]:
    """Log-probability and entropy of each next token under softmax(logits / temperature):
    [B, L-1] each.

    Rows are left-padded: positions count valid tokens only and padding is never attended to.
    """
    valid = valid.astype(bool)
    positions = jnp.maximum(jnp.cumsum(valid, axis=-1) - 1, 0).astype(jnp.int32)
    length = tokens.shape[1]
    causal = jnp.tril(jnp.ones((length, length), bool))
    # Padding queries attend to themselves so their softmax stays finite; their loss is masked.
    mask = (causal[None] & valid[:, None, :]) | jnp.eye(length, dtype=bool)[None]
    logits, _ = model(tokens, positions, attn_mask=mask)
    logits = logits[:, :-1].astype(jnp.float32)
    if temperature != 1.0:
        logits = logits / temperature
    logp_all = jax.nn.log_softmax(logits, axis=-1)
    logp = jnp.take_along_axis(logp_all, tokens[:, 1:, None], axis=-1)[..., 0]
    entropy = -jnp.sum(jnp.exp(logp_all) * logp_all, axis=-1)
    return logp, entropy


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
    ):
        if not temperature > 0:
            raise ValueError(f"temperature={temperature} must be > 0")
        self.graphdef = graphdef
        self.loss_cfg = loss_cfg
        self.tx = tx
        self.mesh = mesh
        self.epochs = epochs
        self.minibatches = minibatches
        self.temperature = float(temperature)  # T of the rollouts (rollout.temperature)
        self.compile_count = 0
        self._row_sharding = sharding.batch_sharding(mesh)
        self._step = None
        self._logps = None

    @property
    def row_multiple(self) -> int:
        """Row counts must be a multiple of this (minibatches x data-parallel size)."""
        return self.minibatches * self.mesh.shape["data"]

    def init(self, params):
        """Places params on the mesh and builds the optimizer state beside them."""
        self.param_shardings = sharding.param_shardings(params, self.mesh)
        params = jax.device_put(params, self.param_shardings)
        opt_state = jax.jit(self.tx.init)(params)
        rep = sharding.replicated(self.mesh)
        # Moments inherit the parameters' shardings; scalars (step counts) are replicated.
        self.opt_shardings = jax.tree.map(
            lambda x: x.sharding if getattr(x.sharding, "mesh", None) == self.mesh else rep,
            opt_state)
        opt_state = jax.device_put(opt_state, self.opt_shardings)
        self._step = jax.jit(
            self._step_impl,
            in_shardings=(self.param_shardings, self.opt_shardings,
                          {k: self._row_sharding for k in BATCH_KEYS + ("ref_logp",)}, rep),
            out_shardings=(self.param_shardings, self.opt_shardings, rep),
            donate_argnums=(0, 1),
        )
        self._logps = jax.jit(
            self._logps_impl,
            in_shardings=(self.param_shardings, self._row_sharding, self._row_sharding),
            out_shardings=self._row_sharding,
        )
        return params, opt_state

    def _loss(self, params, mb):
        model = nnx.merge(self.graphdef, params)
        logp, entropy = sequence_logps(model, mb["tokens"], mb["valid"], self.temperature)
        mask = mb["loss_mask"]
        ref = mb["ref_logp"] if self.loss_cfg.kl_coef > 0 else None
        loss, metrics = policy_loss(logp, mb["old_logp"], mb["advantages"], mask, self.loss_cfg,
                                    ref_logp=ref)
        metrics["entropy"] = jnp.sum(entropy * mask) / jnp.maximum(jnp.sum(mask), 1.0)
        return loss, metrics

    def _step_impl(self, params, opt_state, batch, key):
        self.compile_count += 1
        n = batch["tokens"].shape[0]
        m = self.minibatches

        def epoch_batches(k):
            perm = jax.random.permutation(k, n)
            return jax.tree.map(lambda x: x[perm].reshape((m, n // m) + x.shape[1:]), batch)

        keys = jax.random.split(key, self.epochs)
        batches = jax.vmap(epoch_batches)(keys)  # [epochs, m, n/m, ...]
        batches = jax.tree.map(lambda x: x.reshape((self.epochs * m,) + x.shape[2:]), batches)

        def update(carry, mb):
            params, opt_state, metrics = self._update(*carry, mb)
            return (params, opt_state), metrics

        (params, opt_state), metrics = jax.lax.scan(update, (params, opt_state), batches)
        return params, opt_state, jax.tree.map(jnp.mean, metrics)

    def _update(self, params, opt_state, mb):
        """One optimizer update on one minibatch (the body of the step's scan)."""
        (loss, metrics), grads = jax.value_and_grad(self._loss, has_aux=True)(params, mb)
        updates, opt_state = self.tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        metrics = dict(metrics, loss=loss, grad_norm=optax.tree.norm(grads))
        return params, opt_state, metrics

    def _logps_impl(self, params, tokens, valid):
        self.compile_count += 1
        return self._logps_fn(params, tokens, valid)

    def _logps_fn(self, params, tokens, valid):
        return sequence_logps(nnx.merge(self.graphdef, params), tokens, valid,
                              self.temperature)[0]

    def step(self, params, opt_state, batch: dict[str, np.ndarray], seed: int):
        """One RL update. Returns (params, opt_state, metrics as Python floats)."""
        n = batch["tokens"].shape[0]
        if n % self.row_multiple:
            raise ValueError(f"{n} rows is not a multiple of {self.row_multiple}; pad the batch")
        batch = dict(batch)
        batch.setdefault("ref_logp", np.zeros_like(batch["old_logp"]))
        params, opt_state, metrics = self._step(params, opt_state, batch, jax.random.key(seed))
        return params, opt_state, {k: float(v) for k, v in jax.device_get(metrics).items()}

    def logps(self, params, tokens: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """Per-token log-probabilities [N, L-1] at the trainer's temperature (old-policy
        recompute, reference policy)."""
        return np.asarray(self._logps(params, tokens, valid))

    # XLA cost analysis, for FLOPs accounting. The step's scan body is counted once by XLA
    # whatever the trip count, so one minibatch update is analysed on its own and the caller
    # multiplies by epochs x minibatches. Both are unsharded (the logical computation, whatever
    # the mesh), compiled for analysis only and never run.

    def logps_cost(self, params, rows: int, length: int) -> float:
        """XLA FLOPs of one `logps` call on [rows, length]."""
        x = jax.ShapeDtypeStruct((rows, length), jnp.int32)
        return compiled_flops(self._logps_fn, abstract(params), x, x)

    def update_cost(self, params, rows: int, length: int) -> float:
        """XLA FLOPs of one optimizer update on a minibatch of [rows, length] (loss, gradient,
        clipping and Adam)."""
        params = abstract(params)
        opt_state = jax.eval_shape(self.tx.init, params)
        tok = jax.ShapeDtypeStruct((rows, length), jnp.int32)
        tgt = jax.ShapeDtypeStruct((rows, length - 1), jnp.float32)
        mb = {"tokens": tok, "valid": tok, "loss_mask": tgt, "old_logp": tgt, "ref_logp": tgt,
              "advantages": jax.ShapeDtypeStruct((rows,), jnp.float32)}
        return compiled_flops(self._update, params, opt_state, mb)
