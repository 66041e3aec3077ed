"""GRESO: pre-rollout probabilistic skipping (Zheng et al., "Act Only When It Pays",
arXiv 2506.02177; released code Infini-AI-Lab/GRESO, `filter_examples_all_probabilistic`).

Each prompt of each b_raw dataloader batch is skipped before rollout with a probability that
grows with its trailing run of zero-variance visits:
  c_e = trailing visits with all G responses correct; skip w.p. 1 - max(p_easy^c_e, ε_p);
  if not skipped and the last visit had no correct response, c_h = trailing such visits;
  skip w.p. 1 - max(p_hard^c_h, ε_p).
Survivors accumulate until the adaptive sampling batch (initially ⌈1.5 B⌉) is reached; they are
rolled out, zero-variance groups are dropped, and if fewer than B informative groups have
accumulated the next sampling batch is clamp(int(η (B - |R|) G / (1 - ρ_zv) / G), b_min(B),
⌈1.5 B⌉); when that estimate fits in one sampling batch the next round is the last, and the step
trains on whatever accumulated (possibly fewer than B groups; more are cut to B). Once per step
p_easy and p_hard move by Δp: down if that step's easy (hard) zero-variance ratio reached
α/3 (2α/3), up otherwise, within [p_min, p_max], and only after the first epoch.

Symbols -> config fields (`config.selector.greso.*`): p_easy, p_hard (initial values) -> p_easy,
p_hard; target_zero_variance α -> alpha; 0.01 -> delta_p; min_p, max_p -> p_min, p_max; the
0.01 floor -> eps_p; sampling_batch_size / real_train_batch_size -> sampling_ratio; dataloader
batch -> b_raw; the minimum batch 64 (at B = 256) -> b_min; 1.25 -> eta.

Classification follows the code, on raw verifier outcomes: easy = all correct (mean reward >=
0.98 with 1.0/0.1/0.0 rewards); the skip rule's "hard" = no correct response at all (mean <=
0.11), which includes mixed wrong/invalid groups; the logged hard ratio, which drives p_hard, is
all-wrong groups (rewards all 0.1), as in the code.

Deviations:
- The profiler keeps only the sufficient statistics of GRESO's unbounded reward lists: the
  trailing all-correct and no-correct counts per prompt (8 bytes per prompt).
- The sampling batch is not trimmed to a multiple of n_gpus_per_node (no such constraint here).
- GRESO divides by 1 - ρ_zv unguarded (an all-zero-variance round crashes it); here ρ_zv -> 1
  asks for a full sampling batch. Rounds are capped at max_rounds. A step whose rounds found no
  informative group at all trains on this step's zero-variance groups (zero advantage) up to B,
  since the trainer needs a batch (select/padded).
- The dataloader shuffle is seeded (GRESO seeds it from wall-clock time).
- b_min is GRESO's 64 for its batch of B = 256 and is scaled with the batch:
  b_min(B) = max(1, ⌈b_min B / 256⌉) (`scaled_b_min`, shared with HIVE), then capped at the
  sampling batch. GRESO's code floors every top-up at 64 whatever B is; at B = 64 that asks
  for 64 prompts where the estimate asks for 40, so a comparison at small B would charge
  GRESO rollouts the method does not call for, against DS, whose rounds do not have the floor.

Mechanism counters (`mechanisms()`, cumulative): pool_passes (completed passes of the
dataloader), skipped (prompts skipped by the probabilistic rule), topup_rounds (rollout rounds
of a step beyond the first), p_easy_moves / p_hard_moves (updates that changed p_easy / p_hard).
"""

from __future__ import annotations

import math

import numpy as np

from frontier_rl.selection.base import REWARD_CORRECT, Group, StepContext, register
from frontier_rl.selection.common import (
    MIXED,
    Checker,
    ExplorationSelector,
    PromptStream,
    StepStats,
    Tally,
    classify,
    decode_array,
    encode_array,
    is_int,
    is_num,
    make_rng,
    outcome_matrix,
    read_config,
    scaled_b_min,
)

DEFAULTS = dict(
    p_easy=0.5,  # p_easy: initial exploration probability of all-correct prompts
    p_hard=0.5,  # p_hard: initial exploration probability of no-correct prompts
    alpha=0.25,  # α (target_zero_variance): targets α/3 (easy) and 2α/3 (hard)
    delta_p=0.01,  # Δp: step of the p updates
    p_min=0.05,  # min_p
    p_max=0.95,  # max_p
    eps_p=0.01,  # floor of p^c in the keep probability
    sampling_ratio=1.5,  # sampling_batch_size / B (384 for B = 256)
    b_raw=32,  # dataloader batch inspected by the skip rule
    b_min=64,  # minimum adaptive sampling batch at B = 256, scaled by B / 256 (floor 1)
    eta=1.25,  # safety factor of the adaptive sampling batch
    max_rounds=16,  # cap on rollout rounds per step (not in GRESO)
    skip_first_epoch=True,  # GRESO updates p only when epoch > 0
)

_RHO_GUARD = 1e-6


def validate(section) -> None:
    c = Checker("greso", section, DEFAULTS)
    c("p_min", lambda x: is_num(x, 0, 1, lo_open=True), "a number in (0, 1]")
    c("p_max", lambda x: is_num(x, c.cfg.p_min, 1), f"a number in [p_min={c.cfg.p_min}, 1]")
    for f in ("p_easy", "p_hard"):
        c(f, lambda x: is_num(x, c.cfg.p_min, c.cfg.p_max),
          f"a number in [p_min={c.cfg.p_min}, p_max={c.cfg.p_max}]")
    c("alpha", lambda x: is_num(x, 0, 1, lo_open=True, hi_open=True), "a number in (0, 1) (α)")
    c("delta_p", lambda x: is_num(x, 0, 1), "a number in [0, 1]")
    c("eps_p", lambda x: is_num(x, 0, 1), "a number in [0, 1]")
    c("sampling_ratio", lambda x: is_num(x, 1), "a number >= 1")
    c("b_raw", lambda x: is_int(x, 1), "an integer >= 1")
    c("b_min", lambda x: is_int(x, 1), "an integer >= 1")
    c("eta", lambda x: is_num(x, 0, lo_open=True), "a number > 0")
    c("max_rounds", lambda x: is_int(x, 1), "an integer >= 1")
    c("skip_first_epoch", lambda x: isinstance(x, bool), "True or False")


@register("greso", defaults=DEFAULTS, validate=validate)
class Greso(ExplorationSelector):
    name = "greso"

    def __init__(self, cfg, *, num_prompts: int, seed: int):
        self.cfg = read_config(cfg, DEFAULTS)
        validate(vars(self.cfg))
        self.num_prompts = num_prompts
        self.stream = PromptStream(num_prompts, seed)
        self.rng = make_rng(seed, 2)
        self.c_easy = np.zeros(num_prompts, np.int32)  # trailing all-correct visits
        self.c_hard = np.zeros(num_prompts, np.int32)  # trailing no-correct visits
        self.p_easy = float(self.cfg.p_easy)
        self.p_hard = float(self.cfg.p_hard)
        self.mech = Tally("skipped", "topup_rounds", "p_easy_moves", "p_hard_moves")
        self._stats: StepStats | None = None
        self._last: dict[str, float] = {}

    @classmethod
    def proof_counters(cls, cfg) -> tuple[list[str], list[str]]:
        return ["pool_passes", "skipped", "topup_rounds"], ["p_easy_moves", "p_hard_moves"]

    def skip(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(skipped as easy, skipped as hard) for prompts `idx`: one draw of the skip rule."""
        c = self.cfg
        ce, ch = self.c_easy[idx], self.c_hard[idx]
        u_easy, u_hard = self.rng.random(idx.size), self.rng.random(idx.size)
        easy = u_easy < 1.0 - np.maximum(self.p_easy ** ce, c.eps_p)
        hard = ~easy & (ch > 0) & (u_hard < 1.0 - np.maximum(self.p_hard ** ch, c.eps_p))
        return easy, hard

    def observe(self, groups: list[Group]) -> np.ndarray:
        """Appends one visit per group to the profiler; returns the zero-variance types."""
        outcomes = outcome_matrix(groups)
        if groups:
            self._record(np.array([g.index for g in groups], np.int64), outcomes)
        return classify(outcomes)

    def _record(self, idx: np.ndarray, outcomes: np.ndarray) -> None:
        all_correct = np.all(outcomes == REWARD_CORRECT, axis=1)
        none_correct = ~np.any(outcomes == REWARD_CORRECT, axis=1)
        self.c_easy[idx] = np.where(all_correct, self.c_easy[idx] + 1, 0)
        self.c_hard[idx] = np.where(none_correct, self.c_hard[idx] + 1, 0)

    def build_batch(self, ctx: StepContext) -> list[Group]:
        c = self.cfg
        st = StepStats()
        self._stats = st
        big_b, g = ctx.batch_size, ctx.group_size
        sampling_bs = max(1, math.ceil(c.sampling_ratio * big_b))
        b_min = min(scaled_b_min(c.b_min, big_b), sampling_bs)
        adaptive_bs, last_sampling = sampling_bs, False
        kept: list[Group] = []
        zero_var: list[Group] = []
        inspected = skipped_easy = skipped_hard = 0
        while True:
            cand: list[np.ndarray] = []
            n_cand = 0
            seen = 0
            while n_cand < adaptive_bs and seen < max(self.num_prompts, c.b_raw):
                raw = self.stream.next(c.b_raw)
                easy, hard = self.skip(raw)
                skipped_easy += int(easy.sum())
                skipped_hard += int(hard.sum())
                keep = raw[~(easy | hard)]
                cand.append(keep)
                n_cand += keep.size
                seen += raw.size
            inspected += seen
            idx = np.concatenate(cand) if cand else np.zeros(0, np.int64)
            if idx.size == 0:  # a whole pass skipped everything: explore the last raw batch
                idx = raw
            groups = st.rollout(ctx, idx, g)
            types_ = self.observe(groups)
            st.book(types_)
            for grp, t in zip(groups, types_, strict=True):
                (kept if t == MIXED else zero_var).append(grp)
            if len(kept) >= big_b or last_sampling or st.rounds >= c.max_rounds:
                break
            rho = float(np.mean(types_ != MIXED)) if types_.size else 1.0
            remaining = (big_b - len(kept)) * g
            if rho >= 1.0 - _RHO_GUARD:
                est = sampling_bs + 1
            else:
                est = int(remaining / (1.0 - rho) / g * c.eta)
            if est <= sampling_bs:
                last_sampling = True
            adaptive_bs = max(min(est, sampling_bs), b_min)
        self.mech.add("skipped", skipped_easy + skipped_hard)
        self.mech.add("topup_rounds", st.rounds - 1)
        batch = kept[:big_b]
        padded = 0
        if not batch:
            batch = zero_var[:big_b]
            padded = len(batch)
        self._last = st.metrics(batch)
        self._last.update({
            "raw_prompts": float(inspected),
            "skip_easy": skipped_easy / inspected if inspected else 0.0,
            "skip_hard": skipped_hard / inspected if inspected else 0.0,
            "padded": float(padded),
            "epoch": float(self.stream.epoch),
        })
        st.pause()
        return batch

    def state_dict(self) -> dict:
        return {**super().state_dict(), "p_easy": self.p_easy, "p_hard": self.p_hard,
                "c_easy": encode_array(self.c_easy), "c_hard": encode_array(self.c_hard)}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.p_easy = float(state["p_easy"])
        self.p_hard = float(state["p_hard"])
        self.c_easy = decode_array(state["c_easy"])
        self.c_hard = decode_array(state["c_hard"])
