"""Packs scored groups into the fixed-shape arrays of one train step.

Row layout: [prompt, left-padded to P | response, right-padded to M]. Targets are the next
tokens, so arrays over targets have L - 1 = P + M - 1 columns and response token j sits at target
column P + j - 1. Rows are padded (with an all-zero loss mask) to a multiple of the trainer's
row multiple and to a bucket, so the update compiles once per bucket.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from frontier_rl.rl.losses import group_advantages
from frontier_rl.rollout.sampler import bucket


def pack(
    groups: Sequence,
    prompt_ids: Sequence[Sequence[int]],
    *,
    pad_id: int,
    prompt_buckets: Sequence[int],
    row_buckets: Sequence[int],
    row_multiple: int,
    std_norm: bool = True,
) -> dict[str, np.ndarray]:
    """Arrays for `Trainer.step`; `prompt_ids[i]` are the token ids of `groups[i]`'s prompt.

    Advantages are GRPO's within-group ones (`std_norm` = `rl.adv_std_norm`: divide by the
    group's std or not), unless a selector set its own baseline and scale on the group.
    """
    if not groups:
        raise ValueError("pack() got no groups")
    sizes = {g.size for g in groups}
    if len(sizes) != 1:
        raise ValueError(f"groups of different sizes {sorted(sizes)} cannot share a batch")
    group_size = sizes.pop()
    max_new = groups[0].tokens.shape[1]
    plen = bucket(max(len(p) for p in prompt_ids), prompt_buckets)
    rows = len(groups) * group_size
    nrows = bucket(rows, row_buckets)
    nrows = -(-nrows // row_multiple) * row_multiple
    length = plen + max_new

    tokens = np.full((nrows, length), pad_id, np.int32)
    valid = np.zeros((nrows, length), np.int32)
    loss_mask = np.zeros((nrows, length - 1), np.float32)
    old_logp = np.zeros((nrows, length - 1), np.float32)
    advantages = np.zeros((nrows,), np.float32)
    rewards = np.concatenate([g.rewards for g in groups])
    advantages[:rows] = group_advantages(rewards, group_size, std_norm=std_norm)
    for j, g in enumerate(groups):
        # Selectors that estimate the baseline from more responses than they return
        # (Reinforce-Ada's global statistics) set it on the group, with their own scale
        # (Reinforce-Ada's norm_adv_by_std): `std_norm` does not apply to them.
        if getattr(g, "adv_baseline", None) is not None:
            scale = g.adv_scale if g.adv_scale is not None else 1.0
            advantages[j * group_size:(j + 1) * group_size] = (
                (np.asarray(g.rewards, np.float32) - g.adv_baseline) / scale)

    r = 0
    for g, p in zip(groups, prompt_ids, strict=True):
        for k in range(group_size):
            n = int(g.lengths[k])
            tokens[r, plen - len(p):plen] = p
            valid[r, plen - len(p):plen + n] = 1
            tokens[r, plen:plen + n] = g.tokens[k, :n]
            loss_mask[r, plen - 1:plen - 1 + n] = 1.0
            old_logp[r, plen - 1:plen - 1 + n] = g.logps[k, :n]
            r += 1
    return {"tokens": tokens, "valid": valid, "loss_mask": loss_mask, "old_logp": old_logp,
            "advantages": advantages}
