"""Advantage estimators (`rl.adv_estimator`): one scalar advantage per response from the
outcome rewards of a step's groups, host-side numpy.

r_i is response i's reward, g its group of G responses to one prompt, |o_i| its tokens.

  grpo     A_i = (r_i - mean_g r) / (std_g r + eps), std with Bessel's correction;
           `rl.adv_std_norm=False` drops the division (Dr. GRPO). verl's
           compute_grpo_outcome_advantage; `rl.estimators.grpo.eps` = eps.
  rloo     A_i = r_i - (1 / (G - 1)) sum_{j in g, j != i} r_j = G / (G - 1) (r_i - mean_g r), the
           leave-one-out baseline (Ahmadian et al., 2024, arXiv 2402.14740; verl's
           compute_rloo_outcome_advantage).
  reinforce_plus_plus_baseline
           a_i = r_i - mean_g r, then whitened over the step's batch with each response weighted
           by its token count, as verl whitens the response tokens (masked_whiten):
           A_i = (a_i - mu) / sqrt(var + 1e-8), mu and var (Bessel's correction over the N
           tokens) of a over all response tokens (Hu et al., 2025, REINFORCE++, arXiv
           2501.03262; verl's compute_reinforce_plus_plus_baseline_outcome_advantage).

`update.py` gives the packed batch these advantages; a group whose selector set its own
baseline (`Group.adv_baseline`, Reinforce-Ada) keeps that one, and still counts in
reinforce_plus_plus_baseline's batch statistics.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from frontier_rl.rl.losses import group_advantages
from frontier_rl.rl.registry import register_estimator


def _groups(rewards: np.ndarray, group_size: int) -> np.ndarray:
    rewards = np.asarray(rewards, dtype=np.float64)
    if rewards.size % group_size:
        raise ValueError(f"{rewards.size} rewards do not split into groups of {group_size}")
    return rewards.reshape(-1, group_size)


def _check_eps(section, rl) -> None:
    eps = section.eps
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0:
        raise ValueError(f"rl.estimators.grpo.eps={eps!r} is not allowed: a number > 0")


@register_estimator("grpo", defaults={"eps": 1e-6}, validate=_check_eps)
def grpo(rewards: np.ndarray, group_size: int, lengths: np.ndarray,
         opts: Mapping[str, Any]) -> np.ndarray:
    """GRPO's group-normalised advantage (`losses.group_advantages`)."""
    return group_advantages(rewards, group_size, opts["eps"], std_norm=opts["std_norm"])


@register_estimator("rloo")
def rloo(rewards: np.ndarray, group_size: int, lengths: np.ndarray,
         opts: Mapping[str, Any]) -> np.ndarray:
    """Leave-one-out baseline: r_i less the mean of the group's other rewards."""
    r = _groups(rewards, group_size)
    if group_size < 2:
        return r.reshape(-1).astype(np.float32)
    adv = (r - r.mean(axis=1, keepdims=True)) * (group_size / (group_size - 1))
    return adv.reshape(-1).astype(np.float32)


@register_estimator("reinforce_plus_plus_baseline")
def reinforce_plus_plus_baseline(rewards: np.ndarray, group_size: int, lengths: np.ndarray,
                                 opts: Mapping[str, Any]) -> np.ndarray:
    """Group-mean baseline, then token-weighted whitening over the batch."""
    r = _groups(rewards, group_size)
    a = (r - r.mean(axis=1, keepdims=True)).reshape(-1)
    w = np.asarray(lengths, dtype=np.float64).reshape(-1)
    tokens = w.sum()
    if tokens <= 1:
        raise ValueError(f"reinforce_plus_plus_baseline whitens over response tokens: the batch "
                         f"has {tokens:g}, needs at least 2")
    mu = np.sum(w * a) / (tokens + 1e-8)
    var = np.sum(w * (a - mu) ** 2) / (tokens + 1e-8) * tokens / (tokens - 1)
    return ((a - mu) / np.sqrt(var + 1e-8)).astype(np.float32)
