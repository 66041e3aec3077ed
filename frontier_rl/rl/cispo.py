"""CISPO: a clipped, stop-gradient importance weight times the log-probability
(`rl.loss="cispo"`).

MiniMax, 2025, "MiniMax-M1" (arXiv 2506.13585), Eq. 4, as verl's compute_policy_loss_cispo runs
it: per token -sg(clip(rho_t, 1 - eps_low, 1 + eps_high)) A_t log pi_t with
rho_t = pi_t / pi_old,t. The weight carries no gradient, so every token keeps its REINFORCE
gradient -w A grad log pi, only scaled down where rho is large; PPO's clip would zero it.

Config: `rl.losses.cispo.eps_low` / `eps_high`, which replace `rl.eps_low` / `rl.eps_high` for
this loss: verl's example (examples/cispo_trainer) runs 10 / 0.2, that is no lower bound (the
paper clips only from above) and a weight of at most 1.2. The own aggregation is token-mean
(the paper normalises by the batch's tokens; `rl.loss_agg` overrides). The log-ratio is clamped
to [-`rl.log_ratio_clamp`, `rl.log_ratio_clamp`] before exp, as for the clipped surrogate.

The per-token value is -w A log pi, so `pg_loss` is not comparable with the ratio losses'
(it is not ~0 at rho = 1); `clip_frac` is the share of tokens whose weight was clipped. As
verl, no dual clip (`rl.clip_ratio_c` does not apply).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from frontier_rl.rl.losses import LossConfig, PolicyInputs, clamp_log_ratio
from frontier_rl.rl.registry import register_loss


def _validate(section, rl) -> None:
    if not section.eps_low > 0:
        raise ValueError(f"rl.losses.cispo.eps_low={section.eps_low!r} is not allowed: a "
                         "number > 0 (>= 1: no lower bound on the weight)")
    if not section.eps_high > 0:
        raise ValueError(f"rl.losses.cispo.eps_high={section.eps_high!r} is not allowed: a "
                         "number > 0")


@register_loss("cispo", aggregation="token_mean",
               defaults={"eps_low": 10.0, "eps_high": 0.2}, validate=_validate)
def cispo(x: PolicyInputs, cfg: LossConfig):
    """Per-token CISPO loss (the module docstring)."""
    ratio = jnp.exp(clamp_log_ratio(x.logp - x.old_logp, cfg))
    clipped = jnp.clip(ratio, 1.0 - cfg.eps_low, 1.0 + cfg.eps_high)
    n = jnp.maximum(jnp.sum(x.mask), 1.0)
    return -jax.lax.stop_gradient(clipped) * x.adv * x.logp, {
        "clip_frac": jnp.sum((ratio != clipped) * x.mask) / n,
    }
