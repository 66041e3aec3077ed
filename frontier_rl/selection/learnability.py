"""Learnability sampling (Foster, Sims, Forkel, Fellows and Foerster, "Learning to Reason at the
Frontier of Learnability", arXiv 2502.12272; NeurIPS 2025 as "LILO: Learnability Improves LLMs
Optimally"), the LLM form of Sampling For Learnability (SFL, Rutherford et al., "No Regrets",
arXiv 2408.15099). No code was released for the LLM paper.

A question's learnability is p(1 - p), p the policy's success probability on it: the variance
of its binary reward, which the paper shows the expected improvement of an advantage-based
update grows with (zero when the question is always or never solved). Each step:
  1. The next cand_ratio · B prompts of the shuffled stream are the candidate pool (the paper's
     larger sampled batch that the training batch is selected from).
  2. Each candidate is probed with n_probe responses, charged to the rollout budget through
     ctx.rollout like any other; p̂ is the share of correct ones.
  3. rule="topk": the B candidates with the highest p̂(1 - p̂) are kept (SFL keeps the top-K
     levels by learnability), ties at random; rule="proportional": B drawn without
     replacement with probability ∝ p̂(1 - p̂), topped up at random among the zero-score
     candidates when fewer than B score above 0.
  4. Each kept prompt gets a fresh group of G responses, the group it trains on; the probe
     responses only estimate p (reuse_probes=False). With reuse_probes=True the probes are the
     group's first n_probe responses and G - n_probe more are drawn (the SPEED-style split),
     so n_probe = G is "roll out the larger batch, train on its most learnable groups".
  If every candidate's p̂(1 - p̂) is 0 (all probes of every candidate agree), the B are drawn
  uniformly among the candidates and the step is counted (uniform_fallbacks).

Symbols -> config fields (`config.selector.learnability.*`): |pool| / |B| -> cand_ratio; the
rollouts per question that estimate p -> n_probe; the selection rule -> rule. B and G are
rl.batch_size and rl.group_size.

What is reconstructed ([RECON]: the defaults are this project's choices, not values read
from the paper's text):
- cand_ratio = 4: the pool of 4 |B| candidates the comparison asks for; the paper's summaries
  describe rejection sampling from a larger batch whose needed size grows during training.
- n_probe = 4: half of G = 8, so probing the default pool costs 2 B G rollouts, twice a
  step's trained rollouts; p̂ takes the values 0, 1/4, 1/2, 3/4, 1.
- rule = "topk": the training batch is the B most learnable candidates, SFL's top-K rule.
- reuse_probes = False: the probes estimate p and the trained group is drawn after the
  choice, as in a PPO pipeline whose training rollouts come after the batch is chosen; this
  also keeps the trained group's advantages free of the selection on its own responses.

Success is a correct raw verifier outcome (1); wrong and invalid are failures. select/zero_var*
and select/groups_rolled count the probe groups (one per candidate); select/batch_zero_var is
the share of trained groups with zero variance.

Mechanism counters (`mechanisms()`, cumulative): pool_passes (completed passes of the stream),
probed_prompts (candidates probed), probe_rollouts (responses spent on probes),
uniform_fallbacks (steps where every candidate scored 0), and the rule's decisions:
learnability_decided (topk: kept prompts whose p̂(1 - p̂) was strictly higher than that of
every candidate left out, so chosen by the estimate, not by the tie-break) or weighted_draws
(proportional: kept prompts drawn by their score in steps whose candidates' scores differed,
the zero-score ones never drawn). Either is 0 while every candidate scores the same, so it is
proof (with cand_ratio > 1); the others are non-zero by construction or count a fallback, so
information.
"""

from __future__ import annotations

import math

import numpy as np

from frontier_rl.selection.base import REWARD_CORRECT, Group, StepContext, register
from frontier_rl.selection.common import (
    MIXED,
    Checker,
    PromptStream,
    StepStats,
    StreamSelector,
    Tally,
    classify,
    concat_groups,
    is_int,
    is_num,
    make_rng,
    outcome_matrix,
    read_config,
)

DEFAULTS = dict(
    cand_ratio=4.0,  # [RECON] |pool| / |B|: candidates probed per step
    n_probe=4,  # [RECON] probe responses per candidate, the sample p̂ is estimated from
    rule="topk",  # [RECON] "topk": the B highest p̂(1 - p̂); "proportional": drawn ∝ p̂(1 - p̂)
    reuse_probes=False,  # [RECON] True: probes are the group's first n_probe responses
)
RULES = ("topk", "proportional")


def validate(section) -> None:
    c = Checker("learnability", section, DEFAULTS)
    c("cand_ratio", lambda x: is_num(x, 1), "a number >= 1 (candidates per step / B)")
    c("n_probe", lambda x: is_int(x, 2), "an integer >= 2 (one response gives p̂(1 - p̂) = 0)")
    c("rule", lambda x: x in RULES, f"one of {list(RULES)}")
    c("reuse_probes", lambda x: isinstance(x, bool), "True or False")


def learnability(groups: list[Group]) -> np.ndarray:
    """p̂(1 - p̂) of each group, p̂ its share of correct responses."""
    out = outcome_matrix(groups)
    p = np.mean(out == REWARD_CORRECT, axis=1) if out.size else np.zeros(0)
    return p * (1.0 - p)


@register("learnability", defaults=DEFAULTS, validate=validate)
class Learnability(StreamSelector):
    name = "learnability"

    def __init__(self, cfg, *, num_prompts: int, seed: int):
        self.cfg = read_config(cfg, DEFAULTS)
        validate(vars(self.cfg))
        self.num_prompts = num_prompts
        self.stream = PromptStream(num_prompts, seed)
        self.rng = make_rng(seed, 8)
        self.mech = Tally("probed_prompts", "probe_rollouts", "uniform_fallbacks",
                          self.decision_counter(self.cfg))
        self._last: dict[str, float] = {}

    @staticmethod
    def decision_counter(cfg) -> str:
        return "learnability_decided" if cfg.rule == "topk" else "weighted_draws"

    @classmethod
    def proof_counters(cls, cfg) -> tuple[list[str], list[str]]:
        info = ["pool_passes", "probed_prompts", "probe_rollouts", "uniform_fallbacks"]
        if cfg.cand_ratio > 1:
            return [cls.decision_counter(cfg)], info
        return [], info + [cls.decision_counter(cfg)]  # every candidate is kept

    def num_candidates(self, batch_size: int) -> int:
        """⌈cand_ratio · B⌉, at most the pool, at least B."""
        k = math.ceil(self.cfg.cand_ratio * batch_size - 1e-9)
        return max(batch_size, min(k, self.num_prompts))

    def choose(self, score: np.ndarray, k: int) -> tuple[np.ndarray, bool]:
        """Positions of the k candidates kept by the rule; whether it fell back to uniform."""
        n = score.size
        if not np.any(score > 0):
            return self.rng.choice(n, size=k, replace=False), True
        if self.cfg.rule == "topk":
            return np.lexsort((self.rng.random(n), -score))[:k], False
        positive = np.flatnonzero(score > 0)
        if positive.size >= k:
            return self.rng.choice(n, size=k, replace=False, p=score / score.sum()), False
        rest = self.rng.permutation(np.flatnonzero(score == 0))[:k - positive.size]
        return np.concatenate([positive, rest]), False

    def build_batch(self, ctx: StepContext) -> list[Group]:
        c = self.cfg
        big_b, g = ctx.batch_size, ctx.group_size
        if c.reuse_probes and c.n_probe > g:
            raise ValueError(f"selector.learnability.n_probe={c.n_probe} is not allowed: an "
                             f"integer in [2, rl.group_size={g}] with reuse_probes=True (the "
                             "probes are part of the group)")
        st = StepStats()
        cand = self.stream.next(self.num_candidates(big_b))
        probes = st.rollout(ctx, cand, c.n_probe)
        st.book(classify(outcome_matrix(probes)))
        score = learnability(probes)
        order, fallback = self.choose(score, big_b)
        left = np.ones(cand.size, bool)
        left[order] = False
        decided = 0
        if left.any() and not fallback:
            if c.rule == "topk":
                decided = int(np.count_nonzero(score[order] > score[left].max()))
            elif np.ptp(score) > 0:
                decided = int(np.count_nonzero(score[order] > 0))
        chosen = cand[order]
        if not c.reuse_probes:
            groups = st.rollout(ctx, chosen, g)
        elif c.n_probe < g:
            more = st.rollout(ctx, chosen, g - c.n_probe)
            groups = [concat_groups([probes[int(j)], m]) for j, m in zip(order, more, strict=True)]
        else:
            groups = [probes[int(j)] for j in order]
        self.mech.add("probed_prompts", cand.size)
        self.mech.add("probe_rollouts", cand.size * c.n_probe)
        self.mech.add("uniform_fallbacks", fallback)
        self.mech.add(self.decision_counter(c), decided)
        batch_zv = classify(outcome_matrix(groups)) if groups else np.zeros(0, np.int8)
        self._last = st.metrics(groups)
        self._last.update({
            "candidates": float(cand.size),
            "probe_share": cand.size * c.n_probe / st.rollouts if st.rollouts else 0.0,
            "score_chosen": float(score[order].mean()),
            "score_all": float(score.mean()),
            "uniform_fallback": float(fallback),
            "decided": float(decided),
            "batch_zero_var": float(np.mean(batch_zv != MIXED)) if batch_zv.size else 0.0,
            "epoch": float(self.stream.epoch),
        })
        st.pause()
        return groups

