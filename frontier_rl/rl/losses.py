"""GRPO and DAPO policy losses.

GRPO (Shao et al., 2024, arXiv 2402.03300) as run in verl: group-normalised advantages
A_i = (r_i - mean r) / (std r + eps), a PPO clipped surrogate, the loss aggregated
"seq-mean-token-mean" (mean over tokens within a response, then over responses) and an optional
KL penalty to a reference policy (the k3 estimator, `rl.kl_coef` = beta, clamped to [-10, 10]
per token as verl's `low_var_kl` does). With `rl.adv_std_norm=False` the advantage is
A_i = r_i - mean r (no std normalisation: Dr. GRPO, and PCL's GRPO variant).

DAPO (Yu et al., 2025, arXiv 2503.14476): clip-higher (`rl.eps_low` = eps_low = 0.2,
`rl.eps_high` = eps_high = 0.28), "token-mean" aggregation over all response tokens of the
batch, overlong reward shaping (`rl.overlong_buffer` = L_cache, `rl.overlong_penalty`), no KL.

Both use the dual-clip bound of verl (`rl.clip_ratio_c` = c = 10): for negative advantages the
per-token loss is capped at -A * c so one stale token cannot dominate an update (c = 0: no dual
clip, as GRESO's verl). The clip range is the run's `rl.eps_low` / `rl.eps_high` for either loss
(HeaPA runs both at 0.2 / 0.28, GRESO at 0.2 / 0.2); the presets in `LOSSES` fix only the
aggregation, which `rl.loss_agg` may override (GRESO's GRPO is token-mean).

Entropy bonus (`rl.entropy_coef` = c_H, verl's `entropy_coeff`): the loss less c_H times the
response tokens' entropy H_t = -sum_v pi(v) log pi(v) under the current parameters, aggregated
as the loss (GRESO's scripts run c_H = 0.001; verl's `policy_loss - entropy_loss * coeff`).

Truncated importance sampling (`rl.tis_cap` = C, verl's `tis_imp_ratio_cap`; Yao et al., 2025,
"Your efficient RL framework secretly brings you off-policy RL training"): when rollouts come
from another engine (SGLang, or a sampler in another precision), `old_logp` is the trainer's
recomputation and the tokens were drawn from the engine's distribution; each token's loss is
weighted by min(exp(old_logp - rollout_logp), C) (no gradient through the weight) to correct the
train-inference mismatch. C = 0 turns it off.

All functions are pure jnp and shape-polymorphic; they are traced inside the jitted train step.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

AGGREGATIONS = ("token_mean", "seq_mean_token_mean")


@dataclasses.dataclass(frozen=True)
class LossConfig:
    """The loss of one RL update; `LOSSES[name]` gives each objective's aggregation."""

    aggregation: str = "seq_mean_token_mean"
    eps_low: float = 0.2
    eps_high: float = 0.28
    clip_ratio_c: float = 10.0
    kl_coef: float = 0.0
    tis_cap: float = 0.0  # truncated importance-sampling cap; 0 = off
    entropy_coef: float = 0.0  # entropy bonus c_H; 0 = off


LOSSES = {
    "grpo": LossConfig(aggregation="seq_mean_token_mean"),
    "dapo": LossConfig(aggregation="token_mean"),
}
# verl's low_var_kl: the log-ratio is clamped before exp (no overflow), the k3 value after it.
KL_LOG_RATIO_CLAMP = 20.0
KL_CLAMP = 10.0


def group_advantages(rewards: np.ndarray, group_size: int, eps: float = 1e-6, *,
                     std_norm: bool = True) -> np.ndarray:
    """A_i = (r_i - mean_g r) / (std_g r + eps) within consecutive groups of `group_size`;
    A_i = r_i - mean_g r with `std_norm=False`.

    The standard deviation is the unbiased one (Bessel's correction), as verl's
    `compute_grpo_outcome_advantage` computes it with `torch.std`. Zero-variance groups get
    A = 0 exactly.
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    if rewards.size % group_size:
        raise ValueError(f"{rewards.size} rewards do not split into groups of {group_size}")
    r = rewards.reshape(-1, group_size)
    mean = r.mean(axis=1, keepdims=True)
    if not std_norm:
        return (r - mean).reshape(-1).astype(np.float32)
    std = r.std(axis=1, ddof=1, keepdims=True) if group_size > 1 else np.zeros_like(mean)
    return ((r - mean) / (std + eps)).reshape(-1).astype(np.float32)


def overlong_penalty(
    lengths: np.ndarray, max_len: int, buffer: int, factor: float = 1.0
) -> np.ndarray:
    """DAPO soft overlong punishment, added to the reward.

    0 for lengths <= max_len - buffer, then falling linearly to -factor at max_len:
    min(0, -(L - (max_len - buffer)) / buffer * factor).
    """
    lengths = np.asarray(lengths, dtype=np.float64)
    if buffer <= 0:
        return np.zeros_like(lengths, dtype=np.float32)
    expected = max_len - buffer
    return np.minimum(0.0, -(lengths - expected) / buffer * factor).astype(np.float32)


def aggregate(per_token: jax.Array, mask: jax.Array, aggregation: str,
              seq_weight: jax.Array | None = None) -> jax.Array:
    """Reduce a [B, T] per-token loss over the response tokens selected by `mask`.

    `seq_weight` [B, T]: 1 / (its response's token count) on each response token, for rows that
    hold several responses (rl/batch.py's "pack" layout); seq-mean-token-mean is then
    sum(loss x weight) / sum(weight), each response's weights summing to 1. Without it each row
    is one response.
    """
    mask = mask.astype(per_token.dtype)
    if aggregation == "token_mean":
        return jnp.sum(per_token * mask) / jnp.maximum(jnp.sum(mask), 1.0)
    if aggregation == "seq_mean_token_mean" and seq_weight is not None:
        w = seq_weight.astype(per_token.dtype) * mask
        return jnp.sum(per_token * w) / jnp.maximum(jnp.sum(w), 1.0)
    if aggregation == "seq_mean_token_mean":
        per_seq = jnp.sum(per_token * mask, axis=-1) / jnp.maximum(jnp.sum(mask, axis=-1), 1.0)
        has_tokens = (jnp.sum(mask, axis=-1) > 0).astype(per_token.dtype)
        return jnp.sum(per_seq * has_tokens) / jnp.maximum(jnp.sum(has_tokens), 1.0)
    raise ValueError(f"aggregation={aggregation!r} is not one of {AGGREGATIONS}")


def policy_loss(
    logp: jax.Array,
    old_logp: jax.Array,
    advantages: jax.Array,
    mask: jax.Array,
    cfg: LossConfig,
    ref_logp: jax.Array | None = None,
    rollout_logp: jax.Array | None = None,
    entropy: jax.Array | None = None,
    seq_weight: jax.Array | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Clipped-surrogate policy loss.

    Args:
      logp: [B, T] log-probabilities of the taken tokens under the current parameters.
      old_logp: [B, T] the same under the parameters that generated the responses.
      advantages: [B] one advantage per response (a row), broadcast over its tokens, or [B, T]
        per token (rows holding several responses: rl/batch.py's "pack" layout).
      mask: [B, T] 1 for response tokens that count, 0 for prompt and padding.
      cfg: the loss configuration.
      ref_logp: [B, T] reference-policy log-probabilities, needed when cfg.kl_coef > 0.
      rollout_logp: [B, T] the rollout engine's log-probabilities of the same tokens, needed
        when cfg.tis_cap > 0 (truncated importance sampling, see the module docstring).
      entropy: [B, T] each position's entropy under the current parameters (differentiable),
        needed when cfg.entropy_coef > 0.
      seq_weight: [B, T] with several responses per row, 1 / (the response's token count) on
        its tokens (`aggregate`).

    Returns:
      (scalar loss, metrics) where metrics holds clip fractions, the approximate KL between the
      old and new policy and, with a reference, the KL penalty.
    """
    mask = mask.astype(jnp.float32)
    adv = (advantages[:, None] if advantages.ndim == 1 else advantages).astype(jnp.float32)
    log_ratio = logp - old_logp
    ratio = jnp.exp(log_ratio)
    loss_unclipped = -adv * ratio
    loss_clipped = -adv * jnp.clip(ratio, 1.0 - cfg.eps_low, 1.0 + cfg.eps_high)
    loss_ppo = jnp.maximum(loss_unclipped, loss_clipped)
    if cfg.clip_ratio_c > 0:
        loss_dual = jnp.minimum(loss_ppo, -adv * cfg.clip_ratio_c)
        per_token = jnp.where(adv < 0, loss_dual, loss_ppo)
    else:
        per_token = loss_ppo
    n = jnp.maximum(jnp.sum(mask), 1.0)
    tis_metrics = {}
    if cfg.tis_cap > 0.0:
        if rollout_logp is None:
            raise ValueError("tis_cap > 0 needs rollout_logp")
        raw = jnp.exp(jnp.clip(old_logp - rollout_logp, -KL_LOG_RATIO_CLAMP, KL_LOG_RATIO_CLAMP))
        weight = jax.lax.stop_gradient(jnp.minimum(raw, cfg.tis_cap))
        per_token = per_token * weight
        tis_metrics = {"tis_weight": jnp.sum(weight * mask) / n,
                       "tis_capped_frac": jnp.sum((raw > cfg.tis_cap) * mask) / n}
    loss = aggregate(per_token, mask, cfg.aggregation, seq_weight)

    metrics = {
        "pg_loss": loss,
        "clip_frac": jnp.sum((loss_clipped > loss_unclipped) * mask) / n,
        "dual_clip_frac": (jnp.sum((adv < 0) * (loss_ppo > -adv * cfg.clip_ratio_c) * mask) / n
                           if cfg.clip_ratio_c > 0 else jnp.zeros(())),
        "approx_kl_old": jnp.sum(0.5 * jnp.square(log_ratio) * mask) / n,
        **tis_metrics,
    }
    if cfg.kl_coef > 0.0:
        if ref_logp is None:
            raise ValueError("kl_coef > 0 needs ref_logp")
        # k3 estimator of KL(pi || pi_ref): exp(ref - logp) - (ref - logp) - 1 >= 0, clamped as
        # verl's low_var_kl so a token the reference finds near-impossible cannot dominate.
        delta = jnp.clip(ref_logp - logp, -KL_LOG_RATIO_CLAMP, KL_LOG_RATIO_CLAMP)
        kl = jnp.clip(jnp.exp(delta) - delta - 1.0, -KL_CLAMP, KL_CLAMP)
        kl_term = aggregate(kl, mask, cfg.aggregation, seq_weight)
        loss = loss + cfg.kl_coef * kl_term
        metrics["kl_ref"] = kl_term
    if cfg.entropy_coef > 0.0:
        if entropy is None:
            raise ValueError("entropy_coef > 0 needs entropy")
        entropy_term = aggregate(entropy, mask, cfg.aggregation, seq_weight)
        loss = loss - cfg.entropy_coef * entropy_term
        metrics["entropy_bonus"] = entropy_term
    return loss, metrics
