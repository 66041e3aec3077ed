"""Reinforce-Ada: multi-round adaptive sampling (Xiong et al., arXiv 2510.04996; released code
RLHFlow/Reinforce-Ada, `_generate_multi_round_adaptive_downsampling`).

Each step takes the next B prompts of the shuffled stream. In up to max_rounds rounds, every
still-active prompt gets round_repeat more responses; each response is positive if correct,
negative otherwise. A prompt finishes when
  balanced:          it has >= G//2 positives and >= G - G//2 negatives;
  positive_focused:  it has >= 1 positive.
A finished prompt keeps G responses: the first G//2 positives and then negatives (filling from
the positives first, then the negatives, if one side is short). A prompt still active after the
last round keeps min(G, available): balanced with the same split; positive_focused with
⌈pos_ratio · G⌉ positives clipped to [1, take - 1]. With global_stat_est the group's baseline is
the mean over ALL its responses from every round, not just the kept G, and the advantage is
r - mean (divided by the std of all responses if norm_adv_by_std).

Symbols -> config fields (`config.selector.reinforce_ada.*`): reinforce_ada_choice -> choice;
max_rounds, round_repeat, global_stat_est -> same names; norm_adv_by_std_in_grpo ->
norm_adv_by_std. final_keep_per_prompt is the trainer's G (rl.group_size), the prompt batch its
B (rl.batch_size).

Deviations:
- Positive = correct raw verifier outcome (1), where the code thresholds the shaped reward at
  positive_threshold = 0.7 on 0/1 rewards; the two agree on 0/1 rewards.
- Every returned group holds exactly G responses (the packer needs equal group sizes); the code
  tolerates fewer. So round_repeat must be >= G (checked at the first step), which makes any
  prompt's sample count reach G after one round.
- The global baseline is the mean of the rewards the trainer uses (outcomes plus shaping) over
  all of the prompt's responses; with the code's 0/1 rewards that is its positive fraction. The
  std is the unbiased one floored at 1e-6; with <= 1 response, mean 0 and std 1, as the code.
  It reaches the loss through Group.adv_baseline / adv_scale (None when global_stat_est is off).
- select/zero_var_* and select/groups_rolled count prompts, each over all of its responses from
  every round (a prompt is easy if every one of them was correct).
- The code pads each round to the data-parallel size and discards the padding rows; there is no
  padding here, so nothing to charge. Every generated response is charged through ctx.rollout.

Mechanism counters (`mechanisms()`, cumulative): pool_passes (completed passes of the stream),
extra_rounds (generation rounds of a step beyond the first), resampled_prompts (prompts given
more responses in a round beyond the first).
"""

from __future__ import annotations

import math

import numpy as np

from frontier_rl.selection.base import (
    REWARD_CORRECT,
    REWARD_INVALID,
    REWARD_WRONG,
    Group,
    StepContext,
    register,
)
from frontier_rl.selection.common import (
    EASY,
    HARD,
    INVALID,
    MIXED,
    Checker,
    PromptStream,
    StepStats,
    StreamSelector,
    Tally,
    concat_groups,
    is_int,
    outcome_matrix,
    read_config,
    regroup,
)

DEFAULTS = dict(
    choice="balanced",  # reinforce_ada_choice: "balanced" or "positive_focused"
    max_rounds=4,  # max_rounds: rounds of generation per step
    round_repeat=8,  # round_repeat: responses per active prompt per round (>= G)
    global_stat_est=True,  # global_stat_est: baseline from all rounds' responses
    norm_adv_by_std=False,  # norm_adv_by_std_in_grpo (False in the released script)
)

_STD_EPS = 1e-6


def validate(section) -> None:
    c = Checker("reinforce_ada", section, DEFAULTS)
    c("choice", lambda x: x in ("balanced", "positive_focused"),
      "'balanced' or 'positive_focused'")
    c("max_rounds", lambda x: is_int(x, 1), "an integer >= 1")
    c("round_repeat", lambda x: is_int(x, 1), "an integer >= 1 (and >= rl.group_size)")
    c("global_stat_est", lambda x: isinstance(x, bool), "True or False")
    c("norm_adv_by_std", lambda x: isinstance(x, bool), "True or False")


def finished(n_pos: int, n_neg: int, keep: int, choice: str) -> bool:
    if choice == "balanced":
        return n_pos >= keep // 2 and n_neg >= keep - keep // 2
    return n_pos >= 1


def split_finished(pos: np.ndarray, neg: np.ndarray, keep: int) -> np.ndarray:
    """Responses kept by a finished prompt: up to keep//2 positives, then negatives; a short
    side is made up from the positives first, then the negatives."""
    tp = min(keep // 2, pos.size)
    tn = min(keep - tp, neg.size)
    if tp + tn < keep:
        if pos.size > tp:
            tp += min(pos.size - tp, keep - tp - tn)
        elif neg.size > tn:
            tn += min(neg.size - tn, keep - tp - tn)
    return np.concatenate([pos[:tp], neg[:tn]])


def split_unfinished(pos: np.ndarray, neg: np.ndarray, keep: int, choice: str) -> np.ndarray:
    """Responses kept by a prompt still active after the last round."""
    take = min(keep, pos.size + neg.size)
    if choice == "positive_focused":
        ratio = pos.size / (pos.size + neg.size) if pos.size + neg.size else 0.0
        tp = max(min(math.ceil(ratio * keep), take - 1), 1)
        tn = take - tp
    else:
        tp, tn = keep // 2, keep - keep // 2
    ap, an = min(pos.size, tp), min(neg.size, tn)
    if ap + an < take:
        if pos.size > ap:
            ap += min(pos.size - ap, take - ap - an)
        elif neg.size > an:
            an += min(neg.size - an, take - ap - an)
    return np.concatenate([pos[:ap], neg[:an]])


def global_stats(n: np.ndarray, r_sum: np.ndarray, r_sq: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per prompt (mean, unbiased std floored at 1e-6) of all its responses' rewards, from the
    count, sum and sum of squares; (0, 1) with <= 1 response, as the code."""
    n = np.asarray(n, np.float64)
    many = n > 1
    safe = np.where(many, n, 2.0)
    mean = r_sum / safe
    var = np.maximum(r_sq - safe * mean * mean, 0.0) / (safe - 1.0)
    std = np.maximum(np.sqrt(var), _STD_EPS)
    return np.where(many, mean, 0.0), np.where(many, std, 1.0)


@register("reinforce_ada", defaults=DEFAULTS, validate=validate)
class ReinforceAda(StreamSelector):
    def __init__(self, cfg, *, num_prompts: int, seed: int):
        self.cfg = read_config(cfg, DEFAULTS)
        validate(vars(self.cfg))
        self.stream = PromptStream(num_prompts, seed)
        self.mech = Tally("extra_rounds", "resampled_prompts")
        self._last: dict[str, float] = {}

    @classmethod
    def proof_counters(cls, cfg) -> tuple[list[str], list[str]]:
        # many responses per prompt: the budget may end before the pool is passed
        return ["extra_rounds"], ["resampled_prompts", "pool_passes"]

    def build_batch(self, ctx: StepContext) -> list[Group]:
        c = self.cfg
        big_b, g = ctx.batch_size, ctx.group_size
        if c.round_repeat < g:
            raise ValueError(f"selector.reinforce_ada.round_repeat={c.round_repeat} is not "
                             f"allowed: an integer >= rl.group_size={g} (every returned group "
                             "holds G responses)")
        st = StepStats()
        idx = self.stream.next(big_b)
        parts: list[list[Group]] = [[] for _ in range(big_b)]
        # per prompt, over all rounds: responses by raw outcome, and reward sums for the baseline
        n_all = np.zeros(big_b, np.int64)
        n_pos, n_wrong, n_invalid = (np.zeros(big_b, np.int64) for _ in range(3))
        r_sum, r_sq = np.zeros(big_b), np.zeros(big_b)
        done_round = np.zeros(big_b, np.int32)  # the round a prompt finished in; 0 = never
        active = np.arange(big_b)
        for r in range(c.max_rounds):
            if active.size == 0:
                break
            groups = st.rollout(ctx, idx[active], c.round_repeat)
            if r:
                self.mech.add("extra_rounds")
                self.mech.add("resampled_prompts", active.size)
            out = outcome_matrix(groups)
            rew = np.stack([grp.rewards for grp in groups]).astype(np.float64)
            n_all[active] += out.shape[1]
            n_pos[active] += np.count_nonzero(out == REWARD_CORRECT, axis=1)
            n_wrong[active] += np.count_nonzero(out == REWARD_WRONG, axis=1)
            n_invalid[active] += np.count_nonzero(out == REWARD_INVALID, axis=1)
            r_sum[active] += rew.sum(axis=1)
            r_sq[active] += (rew * rew).sum(axis=1)
            for a, grp in zip(active.tolist(), groups, strict=True):
                parts[a].append(grp)
            pos, neg = n_pos[active], n_all[active] - n_pos[active]
            if c.choice == "balanced":
                fin = (pos >= g // 2) & (neg >= g - g // 2)
            else:
                fin = pos >= 1
            done_round[active[fin]] = r + 1
            active = active[~fin]
        base, scale = global_stats(n_all, r_sum, r_sq)
        batch = []
        for a in range(big_b):
            full = parts[a][0] if len(parts[a]) == 1 else concat_groups(parts[a])
            o = full.outcomes
            pos_i = np.flatnonzero(o == REWARD_CORRECT)
            neg_i = np.flatnonzero(o != REWARD_CORRECT)
            if done_round[a]:
                keep = split_finished(pos_i, neg_i, g)
            else:
                keep = split_unfinished(pos_i, neg_i, g, c.choice)
            grp = regroup(full, keep)
            if c.global_stat_est:
                grp.adv_baseline = float(base[a])
                grp.adv_scale = float(scale[a]) if c.norm_adv_by_std else 1.0
            batch.append(grp)
        # zero-variance type of each prompt's full response set (every round)
        all_types = np.full(big_b, MIXED, np.int8)
        all_types[n_pos == n_all] = EASY
        all_types[n_wrong == n_all] = HARD
        all_types[n_invalid == n_all] = INVALID
        st.book(all_types)
        self._last = st.metrics(batch)
        self._last.update({
            "finished_frac": float(np.mean(done_round > 0)),
            "responses_per_prompt": st.rollouts / big_b,
            "epoch": float(self.stream.epoch),
        })
        st.pause()
        return batch
