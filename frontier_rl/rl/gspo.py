"""GSPO: the clipped surrogate on a sequence-level ratio (`rl.loss="gspo"`).

Zheng et al., 2025, "Group Sequence Policy Optimization" (arXiv 2507.18071), as verl's
compute_policy_loss_gspo runs it. The ratio of response i is the geometric mean of its token
ratios, s_i = exp((1/|o_i|) sum_t (log pi - log pi_old)), the same for all its tokens, and the
loss is max(-A_i s_i, -A_i clip(s_i, 1 - eps_low, 1 + eps_high)) per token. The token-level
form s_it = sg(s_i) pi_t / sg(pi_t) has the value of s_i and the gradient s_i grad log pi_t,
GSPO-token's, which for one advantage per response is GSPO's.

Config: `rl.losses.gspo.eps_low` / `eps_high` (the paper's 3e-4 / 4e-4, Sec. 5.1; verl's
examples/gspo_trainer), which replace `rl.eps_low` / `rl.eps_high` for this loss; the own
aggregation is seq-mean-token-mean (the paper's sequence-level mean; `rl.loss_agg` overrides).

As verl: no dual clip (`rl.clip_ratio_c` does not apply), and the sequence log-ratio is capped
at 10 before exp instead of the token log-ratio at +-20. `dual_clip_frac` is not logged.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from frontier_rl.rl.losses import LossConfig, PolicyInputs
from frontier_rl.rl.registry import register_loss

SEQ_LOG_RATIO_MAX = 10.0


def _validate(section, rl) -> None:
    if not 0 < section.eps_low < 1:
        raise ValueError(f"rl.losses.gspo.eps_low={section.eps_low!r} is not allowed: a number "
                         "in (0, 1)")
    if not section.eps_high > 0:
        raise ValueError(f"rl.losses.gspo.eps_high={section.eps_high!r} is not allowed: a "
                         "number > 0")


@register_loss("gspo", aggregation="seq_mean_token_mean",
               defaults={"eps_low": 3e-4, "eps_high": 4e-4}, validate=_validate)
def gspo(x: PolicyInputs, cfg: LossConfig):
    """Per-token GSPO loss (the module docstring)."""
    mask = x.mask
    lengths = jnp.maximum(x.seq_sum(jnp.ones_like(mask)), 1.0)
    seq_log_ratio = x.seq_sum(x.logp - x.old_logp) / lengths
    sg = jax.lax.stop_gradient
    log_ratio = jnp.minimum(x.logp - sg(x.logp) + sg(seq_log_ratio), SEQ_LOG_RATIO_MAX)
    ratio = jnp.exp(log_ratio)
    loss_unclipped = -x.adv * ratio
    loss_clipped = -x.adv * jnp.clip(ratio, 1.0 - cfg.eps_low, 1.0 + cfg.eps_high)
    n = jnp.maximum(jnp.sum(mask), 1.0)
    return jnp.maximum(loss_unclipped, loss_clipped), {
        "clip_frac": jnp.sum((loss_clipped > loss_unclipped) * mask) / n,
    }
