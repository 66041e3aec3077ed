"""The policy-loss driver, the clipped surrogate (registered as "grpo" and "dapo"), and what
every registered loss shares: aggregation, KL estimators, rollout correction.

GRPO (Shao et al., 2024, arXiv 2402.03300) as run in verl: group-normalised advantages
A_i = (r_i - mean r) / (std r + eps) (rl/advantages.py), a PPO clipped surrogate, the loss
aggregated "seq-mean-token-mean" (mean over tokens within a response, then over responses) and
an optional KL penalty to a reference policy (`rl.kl_coef` = beta, estimator `rl.kl_estimator`).
`rl.adv_std_norm=False` drops the division by std r, one of Dr. GRPO's two changes (Liu et al.,
2025, arXiv 2503.20783); the other is the aggregation "seq_mean_token_sum_norm" below
(`rl.loss_agg`), so Dr. GRPO is both.

DAPO (Yu et al., 2025, arXiv 2503.14476): clip-higher (`rl.eps_low` = eps_low = 0.2,
`rl.eps_high` = eps_high = 0.28), "token-mean" aggregation over all response tokens of the
batch, overlong reward shaping (`rl.overlong_buffer` = L_cache, `rl.overlong_penalty`), no KL.

Both use the dual-clip bound of verl (`rl.clip_ratio_c` = c = 10): for negative advantages the
per-token loss is capped at -A * c so one stale token cannot dominate an update (c = 0: no dual
clip, as GRESO's verl). The clip range is the run's `rl.eps_low` / `rl.eps_high` for either loss
(HeaPA runs both at 0.2 / 0.28, GRESO at 0.2 / 0.2); the two entries differ in their own
aggregation, which `rl.loss_agg` may override (GRESO's GRPO is token-mean), and in DAPO's
refusal of a KL term. The log-ratio
log pi - log pi_old is clamped to [-20, 20] before exp (`rl.log_ratio_clamp`, verl's
compute_policy_loss_vanilla; 0 = no clamp). Other objectives: rl/gspo.py, rl/cispo.py.

Aggregations (`rl.loss_agg`, verl's loss_agg_mode with "_" for "-"), over the response tokens
of a minibatch, l_it the per-token loss of token t of response i, |o_i| its length, n the
responses:
  token_mean               sum_it l_it / sum_i |o_i|
  seq_mean_token_mean      (1/n) sum_i (1/|o_i|) sum_t l_it
  token_sum                sum_it l_it
  seq_mean_token_sum       (1/n) sum_i sum_t l_it
  seq_mean_token_sum_norm  (1/n) sum_i sum_t l_it / L, L a constant (`rl.loss_scale_factor`,
                           0 = rollout.max_new_tokens; Dr. GRPO's generation budget)

KL estimators (`rl.kl_estimator`; Schulman, "Approximating KL divergence", 2020), with
d = log pi_ref - log pi per token: k1 = -d, abs = |d|, k2 = d^2 / 2, k3 = e^d - d - 1 with d
clamped to [-20, 20] and the value to [-10, 10] (verl's low_var_kl). A "+" suffix (k1+, abs+,
k3+) keeps the estimator's value but takes the gradient of k2 (a straight-through estimator,
verl's kl_penalty): k1 and k3 are unbiased for the KL's value, k2's expected gradient is the
KL's.

Entropy bonus (`rl.entropy_coef` = c_H, verl's `entropy_coeff`): the loss less c_H times the
response tokens' entropy H_t = -sum_v pi(v) log pi(v) under the current parameters, aggregated
as the loss (GRESO's scripts run c_H = 0.001; verl's `policy_loss - entropy_loss * coeff`).

Rollout correction, for rollouts from another engine (SGLang, or a sampler in another
precision): `old_logp` is the trainer's recomputation and the tokens were drawn from the
engine's distribution, rho_t = exp(old_logp_t - rollout_logp_t) (verl's rollout_corr_helper):
  * truncated importance sampling (`rl.tis_cap` = C; Yao et al., 2025, "Your efficient RL
    framework secretly brings you off-policy RL training"): each token's policy loss is
    weighted by min(rho_t, C) (`rl.rollout_is="token"`) or by min(prod_t rho_t, C), the same
    for every token of a response (`rl.rollout_is="sequence"`), no gradient through the
    weight; the log of either is clamped to [-20, 20] before exp. C = 0 turns it off.
  * rejection (`rl.rollout_rs`): responses whose ratio prod_t rho_t ("sequence") or its
    geometric mean ("geometric") lies outside [`rl.rs_low`, `rl.rs_high`] are dropped from
    the loss (`rejection_keep`; the train step applies it to the loss mask before the
    minibatches are drawn, as verl replaces response_mask). Each token's log rho is clamped to
    [-20, 20] first. verl's seq_sum_k1 / seq_mean_k1 bound 1 / rho instead: its
    "lower_upper" is rs_low = 1 / upper, rs_high = 1 / lower here (the same for symmetric
    bounds such as its default 0.5_2.0).

Metrics: `ppo_kl` is verl's actor/ppo_kl, the mean over response tokens of log pi_old - log pi
(after the clamp); `approx_kl_old` is the mean of (log pi - log pi_old)^2 / 2, the k2 estimate
of the same KL, logged before `ppo_kl` existed.

All functions are pure jnp and shape-polymorphic; they are traced inside the jitted train step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from frontier_rl.rl.registry import loss as registered_loss
from frontier_rl.rl.registry import register_loss

AGGREGATIONS = ("token_mean", "seq_mean_token_mean", "token_sum", "seq_mean_token_sum",
                "seq_mean_token_sum_norm")
KL_ESTIMATORS = ("k1", "k1+", "abs", "abs+", "k2", "k3", "k3+")
ROLLOUT_IS = ("token", "sequence")
ROLLOUT_RS = ("", "sequence", "geometric")


@dataclasses.dataclass(frozen=True)
class LossConfig:
    """The loss of one RL update (`objectives.loss_config` builds it from `config.rl`);
    `LOSSES` holds the "grpo" and "dapo" presets."""

    aggregation: str = "seq_mean_token_mean"
    eps_low: float = 0.2
    eps_high: float = 0.28
    clip_ratio_c: float = 10.0
    kl_coef: float = 0.0
    tis_cap: float = 0.0  # truncated importance-sampling cap; 0 = off
    entropy_coef: float = 0.0  # entropy bonus c_H; 0 = off
    name: str = "grpo"  # the registered policy loss (rl.loss)
    kl_estimator: str = "k3"
    log_ratio_clamp: float = 20.0  # |log pi - log pi_old| bound before exp; 0 = none
    rollout_is: str = "token"  # level of the TIS weight (with tis_cap > 0)
    rollout_rs: str = ""  # rejection: "" (off), "sequence" or "geometric"
    rs_low: float = 0.5  # rejection bounds on the response's ratio
    rs_high: float = 2.0
    norm_len: int = 0  # L of seq_mean_token_sum_norm; 0 = the mask's width
    options: tuple[tuple[str, Any], ...] = ()  # the loss's own fields (rl.losses.<name>)

    def option(self, key: str) -> Any:
        """A field of the loss's own config section that is not a LossConfig field."""
        for k, v in self.options:
            if k == key:
                return v
        raise KeyError(f"loss {self.name!r} has no option {key!r} (rl.losses.{self.name})")


LOSSES = {
    "grpo": LossConfig(aggregation="seq_mean_token_mean", name="grpo"),
    "dapo": LossConfig(aggregation="token_mean", name="dapo"),
}
# verl's low_var_kl: the log-ratio is clamped before exp (no overflow), the k3 value after it.
KL_LOG_RATIO_CLAMP = 20.0
KL_CLAMP = 10.0


@dataclasses.dataclass(frozen=True)
class PolicyInputs:
    """What a registered loss sees: [B, T] arrays over target tokens.

    `adv` is per token (a response's advantage on each of its tokens); `seq_sum(x)` gives each
    token the sum of `x` over the response tokens of its own response (rows may hold several
    responses: rl/batch.py's "pack" layout)."""

    logp: jax.Array
    old_logp: jax.Array
    adv: jax.Array
    mask: jax.Array
    seq_sum: Callable[[jax.Array], jax.Array]


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


def sequence_sums(mask: jax.Array, segments: jax.Array | None = None
                  ) -> Callable[[jax.Array], jax.Array]:
    """x -> [B, T]: on each token, the sum of x x mask over its response's tokens.

    `segments` [B, T]: each target token's response index within its row (rl/batch.py's
    `valid` shifted by one: target c is token c + 1), for rows holding several responses; None
    when each row is one response."""
    if segments is None:
        return lambda x: jnp.broadcast_to(jnp.sum(x * mask, axis=-1, keepdims=True), x.shape)
    b, t = mask.shape
    stride = t + 2  # more than a row can hold responses
    ids = jnp.arange(b, dtype=jnp.int32)[:, None] * stride + segments.astype(jnp.int32)

    def seq_sum(x):
        sums = jax.ops.segment_sum((x * mask).reshape(-1), ids.reshape(-1),
                                   num_segments=b * stride)
        return sums[ids]

    return seq_sum


def aggregate(per_token: jax.Array, mask: jax.Array, aggregation: str,
              seq_weight: jax.Array | None = None, norm_len: int = 0) -> jax.Array:
    """Reduce a [B, T] per-token loss over the response tokens selected by `mask` (the
    aggregations of the module docstring).

    `seq_weight` [B, T]: 1 / (its response's token count) on each response token, for rows that
    hold several responses (rl/batch.py's "pack" layout); seq-mean-token-mean is then
    sum(loss x weight) / sum(weight), each response's weights summing to 1, and the response
    count of the seq-mean-token-sum modes is sum(weight). Without it each row is one response.
    `norm_len`: the constant L of seq_mean_token_sum_norm (0: the mask's width, verl's default).
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
    if aggregation == "token_sum":
        return jnp.sum(per_token * mask)
    if aggregation in ("seq_mean_token_sum", "seq_mean_token_sum_norm"):
        if seq_weight is not None:
            responses = jnp.sum(seq_weight.astype(per_token.dtype) * mask)
        else:
            responses = jnp.sum((jnp.sum(mask, axis=-1) > 0).astype(per_token.dtype))
        loss = jnp.sum(per_token * mask) / jnp.maximum(responses, 1.0)
        if aggregation == "seq_mean_token_sum_norm":
            loss = loss / float(norm_len or mask.shape[-1])
        return loss
    raise ValueError(f"aggregation={aggregation!r} is not one of {AGGREGATIONS}")


def kl_penalty(logp: jax.Array, ref_logp: jax.Array, estimator: str = "k3") -> jax.Array:
    """Per-token estimate of KL(pi || pi_ref) from the sampled tokens' log-probabilities (the
    estimators of the module docstring)."""
    base = estimator[:-1] if estimator.endswith("+") else estimator
    if base == "k1":
        value = logp - ref_logp
    elif base == "abs":
        value = jnp.abs(logp - ref_logp)
    elif base == "k2":
        value = 0.5 * jnp.square(logp - ref_logp)
    elif base == "k3":
        # exp(ref - logp) - (ref - logp) - 1 >= 0, clamped as verl's low_var_kl so a token the
        # reference finds near-impossible cannot dominate.
        delta = jnp.clip(ref_logp - logp, -KL_LOG_RATIO_CLAMP, KL_LOG_RATIO_CLAMP)
        value = jnp.clip(jnp.exp(delta) - delta - 1.0, -KL_CLAMP, KL_CLAMP)
    else:
        raise ValueError(f"kl estimator {estimator!r} is not one of {KL_ESTIMATORS}")
    if not estimator.endswith("+") or base == "k2":
        return value
    k2 = 0.5 * jnp.square(logp - ref_logp)
    return k2 - jax.lax.stop_gradient(k2) + jax.lax.stop_gradient(value)


def clamp_log_ratio(log_ratio: jax.Array, cfg: LossConfig) -> jax.Array:
    """log pi - log pi_old clamped to [-cfg.log_ratio_clamp, cfg.log_ratio_clamp] (0: as is)."""
    if cfg.log_ratio_clamp > 0:
        return jnp.clip(log_ratio, -cfg.log_ratio_clamp, cfg.log_ratio_clamp)
    return log_ratio


def is_weights(old_logp: jax.Array, rollout_logp: jax.Array, cfg: LossConfig,
               seq_sum: Callable[[jax.Array], jax.Array]) -> tuple[jax.Array, jax.Array]:
    """(truncated weight, raw weight) [B, T] of the rollout correction at `cfg.rollout_is`;
    the truncated one carries no gradient."""
    if cfg.rollout_is == "token":
        raw = jnp.exp(jnp.clip(old_logp - rollout_logp, -KL_LOG_RATIO_CLAMP, KL_LOG_RATIO_CLAMP))
    elif cfg.rollout_is == "sequence":
        raw = jnp.exp(jnp.clip(seq_sum(old_logp - rollout_logp), -KL_LOG_RATIO_CLAMP,
                               KL_LOG_RATIO_CLAMP))
    else:
        raise ValueError(f"rollout_is={cfg.rollout_is!r} is not one of {ROLLOUT_IS}")
    return jax.lax.stop_gradient(jnp.minimum(raw, cfg.tis_cap)), raw


def rejection_keep(old_logp: jax.Array, rollout_logp: jax.Array, mask: jax.Array,
                   cfg: LossConfig, segments: jax.Array | None = None) -> jax.Array:
    """[B, T] 1.0 on the tokens of responses the rejection keeps, 0.0 on those it drops
    (`cfg.rollout_rs`; all ones when it is off)."""
    mask = mask.astype(jnp.float32)
    if not cfg.rollout_rs:
        return jnp.ones_like(mask)
    seq_sum = sequence_sums(mask, segments)
    log_rho = seq_sum(jnp.clip(old_logp - rollout_logp, -KL_LOG_RATIO_CLAMP, KL_LOG_RATIO_CLAMP))
    if cfg.rollout_rs == "geometric":
        log_rho = log_rho / jnp.maximum(seq_sum(jnp.ones_like(mask)), 1.0)
    elif cfg.rollout_rs != "sequence":
        raise ValueError(f"rollout_rs={cfg.rollout_rs!r} is not one of {ROLLOUT_RS}")
    keep = (log_rho >= float(np.log(cfg.rs_low))) & (log_rho <= float(np.log(cfg.rs_high)))
    return keep.astype(jnp.float32)


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
    segments: jax.Array | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The registered loss `cfg.name`, corrected, aggregated, with its KL and entropy terms.

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
      segments: [B, T] with several responses per row, each target token's response index in
        its row (`sequence_sums`); sequence-level terms need it there.

    Returns:
      (scalar loss, metrics) where metrics holds the loss's clip fractions, `ppo_kl` and
      `approx_kl_old` (the KL between the old and new policy, see the module docstring), the
      rollout correction's weights and, with a reference, the KL penalty.
    """
    entry = registered_loss(cfg.name)
    mask = mask.astype(jnp.float32)
    adv = (advantages[:, None] if advantages.ndim == 1 else advantages).astype(jnp.float32)
    seq_sum = sequence_sums(mask, segments)
    inputs = PolicyInputs(logp=logp, old_logp=old_logp,
                          adv=jnp.broadcast_to(adv, logp.shape), mask=mask, seq_sum=seq_sum)
    per_token, own_metrics = entry.fn(inputs, cfg)
    n = jnp.maximum(jnp.sum(mask), 1.0)
    tis_metrics = {}
    if cfg.tis_cap > 0.0:
        if rollout_logp is None:
            raise ValueError("tis_cap > 0 needs rollout_logp")
        weight, raw = is_weights(old_logp, rollout_logp, cfg, seq_sum)
        per_token = per_token * weight
        tis_metrics = {"tis_weight": jnp.sum(weight * mask) / n,
                       "tis_capped_frac": jnp.sum((raw > cfg.tis_cap) * mask) / n}
    loss = aggregate(per_token, mask, cfg.aggregation, seq_weight, cfg.norm_len)

    log_ratio = logp - old_logp
    metrics = {
        "pg_loss": loss,
        **own_metrics,
        "approx_kl_old": jnp.sum(0.5 * jnp.square(log_ratio) * mask) / n,
        "ppo_kl": jnp.sum(-clamp_log_ratio(log_ratio, cfg) * mask) / n,
        **tis_metrics,
    }
    if cfg.kl_coef > 0.0:
        if ref_logp is None:
            raise ValueError("kl_coef > 0 needs ref_logp")
        kl = kl_penalty(logp, ref_logp, cfg.kl_estimator)
        kl_term = aggregate(kl, mask, cfg.aggregation, seq_weight, cfg.norm_len)
        loss = loss + cfg.kl_coef * kl_term
        metrics["kl_ref"] = kl_term
    if cfg.entropy_coef > 0.0:
        if entropy is None:
            raise ValueError("entropy_coef > 0 needs entropy")
        entropy_term = aggregate(entropy, mask, cfg.aggregation, seq_weight, cfg.norm_len)
        loss = loss - cfg.entropy_coef * entropy_term
        metrics["entropy_bonus"] = entropy_term
    return loss, metrics


def _no_kl(section, rl) -> None:
    if rl.kl_coef != 0:
        raise ValueError(f"rl.kl_coef={rl.kl_coef!r} is not allowed: 0 with rl.loss='dapo' "
                         "(DAPO has no KL)")


@register_loss("grpo", aggregation="seq_mean_token_mean")
@register_loss("dapo", aggregation="token_mean", validate=_no_kl)
def clipped_surrogate(x: PolicyInputs, cfg: LossConfig):
    """PPO's clipped surrogate with clip-higher and verl's dual clip (the module docstring):
    max(-A rho, -A clip(rho, 1 - eps_low, 1 + eps_high)), capped at -A c where A < 0."""
    mask, adv = x.mask, x.adv
    ratio = jnp.exp(clamp_log_ratio(x.logp - x.old_logp, cfg))
    loss_unclipped = -adv * ratio
    loss_clipped = -adv * jnp.clip(ratio, 1.0 - cfg.eps_low, 1.0 + cfg.eps_high)
    loss_ppo = jnp.maximum(loss_unclipped, loss_clipped)
    if cfg.clip_ratio_c > 0:
        loss_dual = jnp.minimum(loss_ppo, -adv * cfg.clip_ratio_c)
        per_token = jnp.where(adv < 0, loss_dual, loss_ppo)
    else:
        per_token = loss_ppo
    n = jnp.maximum(jnp.sum(mask), 1.0)
    return per_token, {
        "clip_frac": jnp.sum((loss_clipped > loss_unclipped) * mask) / n,
        "dual_clip_frac": (jnp.sum((adv < 0) * (loss_ppo > -adv * cfg.clip_ratio_c) * mask) / n
                           if cfg.clip_ratio_c > 0 else jnp.zeros(())),
    }
