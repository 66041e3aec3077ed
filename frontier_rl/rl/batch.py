"""Packs scored groups into the arrays of one train step, in one of three layouts
(`rl.packing`):

  "pad"   one sequence per row: [prompt, left-padded to P | response, right-padded to the
          token cap M], every row L = P + M tokens whatever the responses' lengths (the layout
          the embedded runs' published figures were measured with);
  "trim"  one sequence per row, left-aligned: [prompt | response | padding], every row
          `seq_bucket(longest prompt + response)` tokens: the batch is as long as its longest
          sequence, rounded up to an eighth of P + M;
  "pack"  several sequences per row (best fit, longest first) in rows of that same length:
          the batch holds about the tokens that exist, whatever the spread of lengths.

`valid` marks a row's tokens: 0 for padding, else the 1-based index of the sequence within
its row (1 everywhere in "pad" and "trim"), so attention stays within a sequence and positions
restart at each one (`train_step.sequence_logps`). Arrays over targets have L - 1 columns: the
target at column c is token c + 1, so response token j of a sequence starting at column s with
a prompt of p tokens sits at target column s + p + j - 1, and no target crosses from one
sequence into the next (the last token of a sequence predicts nothing that counts).

In "pack", advantages are per target token ([rows, L - 1]) and `seq_weight` holds 1 / (the
response's token count) on its tokens, which is what seq-mean-token-mean aggregation needs
(`losses.aggregate`); in the other layouts advantages are per row ([rows]).

A "pack" row holds at most MAX_SEGMENTS sequences, the static bound of cuDNN's packed
layout (models/transformer.py `SegmentMask.segments`: each row's segment lengths and offsets,
so cuDNN skips the tiles outside every sequence and no [L, L] bias or mask exists). XLA's
attention builds each block of queries' mask from the segment ids. So "pack" trains packed on
every backend; a sequence beyond the bound opens a new row (best fit).

Rows are padded (all-zero loss mask) to a multiple of the trainer's row multiple, after a row
bucket: `row_buckets` for "pad" and "trim" (the rows are the responses), `packed_rows` for
"pack". So the update compiles once per (rows, length) bucket: at most 8 lengths per prompt
bucket and token cap, and 8 row counts per octave of packed rows.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np

from frontier_rl.fit.shapes import bucket
from frontier_rl.rl.losses import group_advantages

LAYOUTS = ("pad", "trim", "pack")
LENGTH_STEPS = 8  # row lengths per (prompt bucket, token cap) in "trim" and "pack"


# The most sequences one "pack" row holds (models/transformer.py `SegmentMask.max_segments`):
# cuDNN's packed attention keeps softmax statistics per (row, segment), so the bound costs
# memory; rows of the papers' shapes hold a few sequences each.
MAX_SEGMENTS = 16


def layout_for(layout: str, attention: str) -> str:
    """The layout a train step runs for `rl.packing` = `layout` when the policy's attention
    resolved to `attention` ("xla" or "cudnn"): every layout runs as asked on both (the module
    docstring); the name is checked."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout={layout!r} is not one of {LAYOUTS} (rl.packing)")
    if attention not in ("xla", "cudnn"):
        raise ValueError(f"attention={attention!r} is not 'xla' or 'cudnn'")
    return layout


def seq_bucket(n: int, full: int) -> int:
    """The row length of a "trim" or "pack" batch whose longest sequence has `n` tokens, when
    the "pad" layout's rows have `full` = P + M: the next multiple of full / 8 (rounded up to a
    multiple of 8 tokens), at most `full`."""
    step = -(-full // LENGTH_STEPS)
    step = -(-step // 8) * 8
    return min(full, -(-n // step) * step)


def packed_rows(n: int) -> int:
    """Rows of a "pack" batch holding `n` rows of sequences: at least 8, then in each octave
    (2^k, 2^(k+1)] the next multiple of 2^k / 8 (under 12.5% padding rows, 8 buckets per
    octave)."""
    if n <= 8:
        return 8
    base = 1 << ((n - 1).bit_length() - 1)
    step = max(1, base // 8)
    return -(-n // step) * step


def best_fit(lengths: Sequence[int], capacity: int,
             most: int = MAX_SEGMENTS) -> list[list[int]]:
    """Sequence indices per row: best fit over the sequences, longest first (ties in index
    order), into rows of `capacity` tokens and at most `most` sequences: each goes to the
    fullest row it fits in, else to a new row. Deterministic; O(n log n) with a sorted list of
    the rows' free room (a row that reaches `most` sequences leaves the list)."""
    order = sorted(range(len(lengths)), key=lambda i: (-int(lengths[i]), i))
    rows: list[list[int]] = []
    free: list[tuple[int, int]] = []  # (room, row), sorted
    for i in order:
        n = int(lengths[i])
        if n > capacity:
            raise ValueError(f"a sequence of {n} tokens does not fit rows of {capacity}")
        j = bisect.bisect_left(free, (n, -1))
        if j < len(free):
            room, r = free.pop(j)
        else:
            room, r = capacity, len(rows)
            rows.append([])
        rows[r].append(i)
        if len(rows[r]) < most:
            bisect.insort(free, (room - n, r))
    return rows


def _advantages(groups, group_size: int, std_norm: bool) -> np.ndarray:
    rewards = np.concatenate([g.rewards for g in groups])
    adv = group_advantages(rewards, group_size, std_norm=std_norm)
    for j, g in enumerate(groups):
        # Selectors that estimate the baseline from more responses than they return
        # (Reinforce-Ada's global statistics) set it on the group, with their own scale
        # (Reinforce-Ada's norm_adv_by_std): `std_norm` does not apply to them.
        if getattr(g, "adv_baseline", None) is not None:
            scale = g.adv_scale if g.adv_scale is not None else 1.0
            adv[j * group_size:(j + 1) * group_size] = (
                (np.asarray(g.rewards, np.float32) - g.adv_baseline) / scale)
    return adv.astype(np.float32)


def pack(
    groups: Sequence,
    prompt_ids: Sequence[Sequence[int]],
    *,
    pad_id: int,
    prompt_buckets: Sequence[int],
    row_buckets: Sequence[int],
    row_multiple: int,
    std_norm: bool = True,
    layout: str = "pad",
) -> dict[str, np.ndarray]:
    """Arrays for `Trainer.step`; `prompt_ids[i]` are the token ids of `groups[i]`'s prompt.

    Advantages are GRPO's within-group ones (`std_norm` = `rl.adv_std_norm`: divide by the
    group's std or not), unless a selector set its own baseline and scale on the group.
    `layout`: "pad", "trim" or "pack" (the module docstring).
    """
    if not groups:
        raise ValueError("pack() got no groups")
    if layout not in LAYOUTS:
        raise ValueError(f"layout={layout!r} is not one of {LAYOUTS} (rl.packing)")
    sizes = {g.size for g in groups}
    if len(sizes) != 1:
        raise ValueError(f"groups of different sizes {sorted(sizes)} cannot share a batch")
    group_size = sizes.pop()
    max_new = groups[0].tokens.shape[1]
    plen = bucket(max(len(p) for p in prompt_ids), prompt_buckets)
    advantages = _advantages(groups, group_size, std_norm)
    # (prompt, response tokens, response log-probs) of every sequence, group-major
    seqs = [(p, g.tokens[k, :int(g.lengths[k])], g.logps[k, :int(g.lengths[k])])
            for g, p in zip(groups, prompt_ids, strict=True) for k in range(group_size)]
    if layout == "pad":
        return _pad(seqs, advantages, plen, max_new, pad_id, row_buckets, row_multiple)
    length = seq_bucket(max(len(p) + len(r) for p, r, _ in seqs), plen + max_new)
    if layout == "trim":
        rows = [[i] for i in range(len(seqs))]
        nrows = bucket(len(rows), row_buckets)
    else:
        rows = best_fit([len(p) + len(r) for p, r, _ in seqs], length)
        nrows = packed_rows(len(rows))
    nrows = -(-nrows // row_multiple) * row_multiple
    tokens = np.full((nrows, length), pad_id, np.int32)
    valid = np.zeros((nrows, length), np.int32)
    loss_mask = np.zeros((nrows, length - 1), np.float32)
    old_logp = np.zeros((nrows, length - 1), np.float32)
    adv = np.zeros((nrows, length - 1), np.float32)
    seq_weight = np.zeros((nrows, length - 1), np.float32)
    for r, members in enumerate(rows):
        s = 0
        for seg, i in enumerate(members, start=1):
            p, resp, logp = seqs[i]
            n = len(resp)
            tokens[r, s:s + len(p)] = p
            tokens[r, s + len(p):s + len(p) + n] = resp
            valid[r, s:s + len(p) + n] = seg
            t = s + len(p) - 1  # the target column of the first response token
            loss_mask[r, t:t + n] = 1.0
            old_logp[r, t:t + n] = logp
            adv[r, t:t + n] = advantages[i]
            seq_weight[r, t:t + n] = 1.0 / n if n else 0.0
            s += len(p) + n
    out = {"tokens": tokens, "valid": valid, "loss_mask": loss_mask, "old_logp": old_logp}
    if layout == "trim":
        row_adv = np.zeros((nrows,), np.float32)
        row_adv[:len(seqs)] = advantages
        return dict(out, advantages=row_adv)
    return dict(out, advantages=adv, seq_weight=seq_weight)


def _pad(seqs, advantages, plen, max_new, pad_id, row_buckets, row_multiple):
    """The "pad" layout: prompts left-padded to `plen`, responses right-padded to `max_new`."""
    rows = len(seqs)
    nrows = bucket(rows, row_buckets)
    nrows = -(-nrows // row_multiple) * row_multiple
    length = plen + max_new
    tokens = np.full((nrows, length), pad_id, np.int32)
    valid = np.zeros((nrows, length), np.int32)
    loss_mask = np.zeros((nrows, length - 1), np.float32)
    old_logp = np.zeros((nrows, length - 1), np.float32)
    row_adv = np.zeros((nrows,), np.float32)
    row_adv[:rows] = advantages
    for r, (p, resp, logp) in enumerate(seqs):
        n = len(resp)
        tokens[r, plen - len(p):plen] = p
        valid[r, plen - len(p):plen + n] = 1
        tokens[r, plen:plen + n] = resp
        loss_mask[r, plen - 1:plen - 1 + n] = 1.0
        old_logp[r, plen - 1:plen - 1 + n] = logp
    return {"tokens": tokens, "valid": valid, "loss_mask": loss_mask, "old_logp": old_logp,
            "advantages": row_adv}
