"""The built-in policy losses and advantage estimators, registered; what the train step and
config_lib use to pick and configure them.

Importing this module registers every built-in entry (rl/registry.py). `loss_config` turns
`config.rl` into the `LossConfig` the train step compiles; `estimate` gives a step's responses
their advantages with the configured estimator.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from frontier_rl.rl import (
    advantages,  # noqa: F401  (registers the estimators "grpo", "rloo", ...)
    cispo,  # noqa: F401  (registers "cispo")
    gspo,  # noqa: F401  (registers "gspo")
)
from frontier_rl.rl.losses import LossConfig  # (registers "grpo" and "dapo")
from frontier_rl.rl.registry import estimator, estimator_names, loss, loss_names

__all__ = ["estimate", "estimator", "estimator_names", "loss", "loss_config", "loss_names"]

_FIELDS = {f.name for f in dataclasses.fields(LossConfig)}


def loss_config(config) -> LossConfig:
    """The loss of `config.rl`: the run-wide fields, then the chosen loss's own section
    `rl.losses.<rl.loss>` (fields named like a LossConfig field replace the run-wide value,
    the others become `options`)."""
    r = config.rl
    entry = loss(r.loss)
    section = r.losses[r.loss].to_dict() if r.loss in r.losses else {}
    fields = dict(
        aggregation=r.loss_agg or entry.aggregation, eps_low=r.eps_low, eps_high=r.eps_high,
        clip_ratio_c=r.clip_ratio_c, kl_coef=r.kl_coef, tis_cap=r.tis_cap,
        entropy_coef=r.entropy_coef, name=r.loss, kl_estimator=r.kl_estimator,
        log_ratio_clamp=r.log_ratio_clamp, rollout_is=r.rollout_is, rollout_rs=r.rollout_rs,
        rs_low=r.rs_low, rs_high=r.rs_high,
        norm_len=r.loss_scale_factor or config.rollout.max_new_tokens)
    fields.update({k: v for k, v in section.items() if k in _FIELDS})
    options = tuple(sorted((k, v) for k, v in section.items() if k not in _FIELDS))
    return LossConfig(**fields, options=options)


def estimate(config, rewards: np.ndarray, group_size: int, lengths: np.ndarray) -> np.ndarray:
    """Advantages float32 [N] of a step's N responses (consecutive groups of `group_size`)
    with `config.rl.adv_estimator`."""
    r = config.rl
    opts = r.estimators[r.adv_estimator].to_dict() if r.adv_estimator in r.estimators else {}
    opts["std_norm"] = r.adv_std_norm
    return estimator(r.adv_estimator).fn(rewards, group_size, lengths, opts)
