"""One RL update from a step's groups: advantages, pack, old and reference log-probs, the
optimizer step, the FLOPs charge and the divergence guard.

`Updater.update(params, opt_state, groups, step)` gives the responses their advantages
(`rl.adv_estimator`, rl/objectives.py), packs the groups into the padded batch the train step
compiles for (rl/batch.py), recomputes the old policy's log-probs when the engine's
cannot serve (another implementation, or top-p truncation; `rl.recompute_old_logp`), adds the
KL reference's log-probs, runs the epochs x minibatches of the train step and charges every
device program to the accountant. A step whose every update was skipped for a non-finite loss
or gradient norm counts toward `rl.max_bad_steps`; `check_diverged` raises once that many come
in a row.
"""

from __future__ import annotations

import dataclasses
import logging

import jax
import jax.numpy as jnp
import numpy as np

from frontier_rl.fit.shapes import PROMPT_BUCKETS, ROW_BUCKETS
from frontier_rl.rl import batch as batch_lib
from frontier_rl.rl import losses, noise, objectives
from frontier_rl.rl.train_step import OptimConfig, Trainer, make_optimizer
from frontier_rl.run import distributed
from frontier_rl.run.errors import RunError

log = logging.getLogger("frontier_rl")


def make_trainer(config, graphdef, mesh) -> Trainer:
    """The train step of `config.rl` (loss, clip range, KL, optimizer, micro-batches)."""
    r = config.rl
    loss_cfg = objectives.loss_config(config)
    tx = make_optimizer(OptimConfig(
        learning_rate=r.learning_rate, b1=r.b1, b2=r.b2, weight_decay=r.weight_decay,
        grad_clip=r.grad_clip, warmup_steps=r.warmup_steps))
    return Trainer(graphdef, loss_cfg, tx, mesh, epochs=r.epochs, minibatches=r.minibatches,
                   temperature=config.rollout.temperature, micro_batch_size=r.micro_batch_size,
                   logits_chunk=config.model.logits_chunk, layout=r.packing)


def reward_shaper(config, values=(1.0, 0.0, -1.0)):
    """outcomes, lengths -> rewards: each outcome's value under the task's reward variant
    (`values` = reward of a correct, a wrong, an invalid response: Task.reward_values), plus
    DAPO's overlong penalty when rl.overlong_buffer > 0 (with either loss: HeaPA's GRPO recipe
    keeps it too)."""
    r = config.rl
    values = tuple(float(v) for v in values)

    def base(outcomes: np.ndarray) -> np.ndarray:
        if values == (1.0, 0.0, -1.0):
            return outcomes
        return np.where(outcomes > 0, values[0],
                        np.where(outcomes == 0, values[1], values[2])).astype(np.float32)

    if r.overlong_buffer > 0:
        def shape(outcomes: np.ndarray, lengths: np.ndarray) -> np.ndarray:
            return base(outcomes) + losses.overlong_penalty(
                lengths, config.rollout.max_new_tokens, r.overlong_buffer, r.overlong_penalty)
        return shape
    return lambda outcomes, lengths: base(outcomes)


def with_advantages(config, groups) -> list:
    """Copies of `groups` that carry `config.rl.adv_estimator`'s advantages for rl/batch.py.

    batch.pack computes a group's advantages as (rewards - adv_baseline) / adv_scale when a
    selector set a baseline, so each copy holds its advantages in place of its rewards, with
    baseline 0 and scale 1 (exact in float32). A group whose selector set its own baseline
    (Reinforce-Ada) is passed as it is. The selector's groups are not modified."""
    sizes = {g.size for g in groups}
    if len(sizes) != 1:
        return list(groups)  # batch.pack says what is wrong
    size = sizes.pop()
    rewards = np.concatenate([g.rewards for g in groups])
    lengths = np.concatenate([np.asarray(g.lengths) for g in groups])
    adv = objectives.estimate(config, rewards, size, lengths)
    return [g if getattr(g, "adv_baseline", None) is not None else dataclasses.replace(
        g, rewards=adv[j * size:(j + 1) * size], adv_baseline=0.0, adv_scale=1.0)
        for j, g in enumerate(groups)]


class Updater:
    def __init__(self, config, trainer: Trainer, params, *, accountant, encode, pad_id: int,
                 recompute_old: bool, seed: int):
        self.trainer, self.accountant, self.encode = trainer, accountant, encode
        self.pad_id, self.recompute_old, self.seed = pad_id, recompute_old, seed
        self.config = config
        self.std_norm = config.rl.adv_std_norm
        self.gap_tol = config.rollout.probe_tol  # largest engine-vs-trainer gap, nats/token
        self.max_bad_steps = config.rl.max_bad_steps
        # A copy: the update donates `params`' buffers, which may be the ones init returned.
        self.ref_params = jax.tree.map(jnp.copy, params) if config.rl.kl_coef > 0 else None
        self.bad_steps = 0

    def update(self, params, opt_state, groups, step: int, lag: int = 0):
        """(params, opt_state, train metrics, engine log-prob gap or None) after one step.
        `lag`: updates between the parameters that generated `groups` and `params`
        (rl.staleness); the gap then measures the policy's drift over them, not an engine
        serving the wrong weights, and is recorded, not checked."""
        trainer, accountant = self.trainer, self.accountant
        batch = batch_lib.pack(with_advantages(self.config, groups),
                               [self.encode(g.index) for g in groups],
                               pad_id=self.pad_id, prompt_buckets=PROMPT_BUCKETS,
                               row_buckets=ROW_BUCKETS, row_multiple=trainer.row_multiple,
                               std_norm=self.std_norm, layout=trainer.layout)
        engine_diff = None
        if self.recompute_old:
            engine_logp = batch["rollout_logp"] = batch["old_logp"]
            batch["old_logp"] = trainer.logps(params, batch["tokens"], batch["valid"])
            accountant.charge_logps(batch)
            # the train-inference mismatch, over response tokens
            mask = batch["loss_mask"] > 0
            engine_diff = float(np.abs(batch["old_logp"] - engine_logp)[mask].mean())
            if not lag and (not np.isfinite(engine_diff) or engine_diff > self.gap_tol):
                # checked every step, not only at a sync's probe: a server that another
                # trainer reloaded between syncs serves other weights from then on
                raise RunError(
                    f"step {step}: the rollout engine's log-probs of this step's responses "
                    f"differ from the trainer's by {engine_diff:.3g} nats/token "
                    f"(rollout.probe_tol={self.gap_tol}): the engine did not serve this run's "
                    "policy (another trainer on the same server, stale weights); stopped "
                    "before the update, the newest checkpoint is intact")
        if self.ref_params is not None:
            batch["ref_logp"] = trainer.logps(self.ref_params, batch["tokens"], batch["valid"])
            accountant.charge_logps(batch)
        distributed.check_agree("the packed batch", batch, step)
        measured = self._noise(params, batch, groups, step)
        params, opt_state, metrics = trainer.step(
            params, opt_state, batch,
            seed=int(np.random.SeedSequence([self.seed, step, 99]).generate_state(1)[0]))
        accountant.charge_train(batch)
        metrics.update(measured)
        # Adam's step size is a diagnostic: an update that overflows it (a diverging rate) is
        # recorded at float32's largest value, and the NaN guard below decides what to do
        if not np.isfinite(metrics.get("update_norm", 0.0)):
            metrics["update_norm"] = float(np.finfo(np.float32).max)
        # informative groups (reward variance > 0) per optimizer update: a minibatch's share
        metrics["informative_groups"] = sum(not g.zero_variance for g in groups) / max(
            self.config.rl.minibatches, 1)
        # NaN guard: the trainer skipped every update whose loss or gradient norm was not
        # finite (params unchanged); a run of such steps means the run has diverged.
        if metrics.get("skipped_updates", 0) > 0:
            self.bad_steps += 1
            log.warning("step %d: %d update(s) skipped on a non-finite loss or gradient norm",
                        step, int(metrics["skipped_updates"]))
        else:
            self.bad_steps = 0
        return params, opt_state, metrics, engine_diff

    def _noise(self, params, batch, groups, step: int) -> dict[str, float]:
        """The gradient noise scale's norms at this step's parameters (rl/noise.py), every
        `rl.noise_every` steps (from step 1), else {}."""
        every, parts = self.config.rl.noise_every, self.config.rl.noise_parts
        if (not every or (step - 1) % every or len(groups) < 2 * parts
                or batch["tokens"].shape[0] % parts):
            return {}
        small, big = self.trainer.noise(params, batch, parts)
        return noise.metrics(small, big, len(groups) / parts, float(len(groups)))

    def diverged(self, step: int) -> RunError | None:
        """The error to stop with after `rl.max_bad_steps` skipped steps in a row, else None."""
        if self.bad_steps < self.max_bad_steps:
            return None
        return RunError(f"step {step}: non-finite loss or gradient norm in {self.bad_steps} "
                        f"steps in a row (rl.max_bad_steps={self.max_bad_steps}); the "
                        "parameters were left at their last finite values, which the newest "
                        "checkpoint holds. Lower rl.learning_rate or check the rewards")
