"""HIVE v2: Stage 1 with its response-entropy prior on (Wu et al., "Train at the Moving Edge:
Efficient RL for Large Reasoning Models via Rollout Selection", arXiv 2603.25184v2).

v2 states Stage 1 as a prior of historical reward statistics and response entropy (abstract;
§3.2, Eqs. 3-6; Alg. 1), for prompt i with the latest rollout group of G responses:
  s_rew(x_i) = max(p_{e,τ_i}^{z_i}, ε_p)                      (Eq. 3, the ε_p floor of Table 4)
  U_i^(r) = (1 / L_{i,r}) Σ_ℓ H(p_θ(· | x_i, o^(r)_{<ℓ})),   H_i = (1 / G) Σ_r U_i^(r)
  s_ent(x_i) = (H_i - H_min) / (H_max - H_min + ε)           (Eq. 5, min and max "within the
                                                              current metadata pool")
  P_S1(x_i) = λ s_rew(x_i) + (1 - λ) s_ent(x_i),   accept ~ Bernoulli(P_S1)      (Eq. 6)
Stage 2 (the prompt-entropy band), the exact-B_t rounds and the p_easy / p_hard updates are
those of `hive` (selection/hive.py), unchanged: this selector is `hive` with Stage 1 replaced.

Symbols -> config fields (`config.selector.hive_v2.*`): those of `hive`, plus ε of s_ent ->
eps_ent. U_i^(r) is the sampler's mean token entropy of response r (Group.mean_entropy).

What v2 fixes, and what it leaves open (chosen here, "ours"):
- λ. Table 4 deploys λ = 1.0 and reserves the (1 - λ) s_ent term for an ablation whose λ it
  does not report; at λ = 1.0 this selector is `hive` exactly (it draws the same Stage-1
  uniforms from the same RNG stream, so with one seed both make the same choices). The
  default here, λ = 0.5 (ours), gives the two scores of the prior the paper describes equal
  weight.
- ε of s_ent: "a small constant" in v2; 1e-8 (ours, hive's value).
- The metadata pool: every prompt with a recorded response entropy, its min and max refreshed
  after every rollout round (ours: the pool as it stands whenever Stage 1 scores; `hive`
  refreshes them once per step).
- A prompt without a recorded entropy (unseen) gets s_ent = 1 (ours): with s_rew = 1 its
  P_S1 is 1 at any λ, the free first visit v2's App. B.3 gives every unseen prompt.
- H_i is the latest group's (v2: "the most recent rollout group"); only it is kept, as in hive.
Through the SGLang engine response entropies are 0 unless the server sends them: every seen
prompt then has s_ent = 0 and λ < 1 only scales its P_S1 down by λ.

The mechanism counter entropy_prior_flips counts the Stage-1 decisions the entropy term
decided: prompts with a recorded entropy whose accept / reject outcome under their own s_ent
differs from the outcome, with the same uniform draw, under the pool's mean s_ent. It is 0 when
the term is idle (λ = 1, stage1=False) or carries no ranking (all recorded entropies equal),
so it is proof; counting draws nothing and changes no decision. hive's counters are kept, with
hive's split into proof and information (selection/mechanisms.py).
"""

from __future__ import annotations

import numpy as np

from frontier_rl.selection import hive
from frontier_rl.selection.base import Group, StepContext, register
from frontier_rl.selection.common import Checker, Tally, is_num, read_config

DEFAULTS = dict(
    hive.DEFAULTS,
    lam=0.5,  # λ: weight of s_rew in P_S1 = λ s_rew + (1 - λ) s_ent (1.0 = hive, Table 4)
    eps_ent=1e-8,  # ε: the stabiliser of s_ent's min-max normalisation
)


def validate(section) -> None:
    hive.validate(section, name="hive_v2", defaults=DEFAULTS)
    c = Checker("hive_v2", section, DEFAULTS)
    c("eps_ent", lambda x: is_num(x, 0, 1, lo_open=True), "a number in (0, 1] (ε of s_ent)")


@register("hive_v2", defaults=DEFAULTS, validate=validate)
class HiveV2(hive.Hive):
    def __init__(self, cfg, *, num_prompts: int, seed: int):
        full = read_config(cfg, DEFAULTS)
        validate(vars(full))
        super().__init__({k: getattr(full, k) for k in hive.DEFAULTS}, num_prompts=num_prompts,
                         seed=seed)
        self.cfg = full
        self.mech = Tally(*self.mech.counts, "entropy_prior_flips")
        self._s_bar = 0.0  # the pool's mean s_ent, the neutral score entropy_prior_flips uses
        self._flips = 0  # this step's

    @classmethod
    def proof_counters(cls, cfg) -> tuple[list[str], list[str]]:
        proof, info = super().proof_counters(cfg)
        active = cfg.stage1 and cfg.lam < 1.0  # else no decision ever reads s_ent
        return (proof + ["entropy_prior_flips"], info) if active else (
            proof, info + ["entropy_prior_flips"])

    # ------------------------------------------------------------------ Stage 1

    def _entropy_score(self, idx: np.ndarray) -> np.ndarray:
        h = self.resp_entropy[idx].astype(np.float64)
        lo, hi = self._h_range
        return np.where(np.isnan(h), 1.0, (h - lo) / (hi - lo + self.cfg.eps_ent))

    def _refresh_h_range(self) -> None:
        if self.cfg.lam >= 1.0:
            return
        h = self.resp_entropy[self.visits > 0].astype(np.float64)
        h = h[~np.isnan(h)]
        if not h.size:
            self._h_range, self._s_bar = (0.0, 0.0), 0.0
            return
        lo, hi = float(h.min()), float(h.max())
        self._h_range = (lo, hi)
        self._s_bar = float(np.mean((h - lo) / (hi - lo + self.cfg.eps_ent)))

    def stage1_accept(self, raw: np.ndarray) -> np.ndarray:
        u = self.rng.random(raw.size)
        p = self.stage1_prob(raw)
        accept = u < p
        if self.cfg.lam < 1.0:
            c = self.cfg
            neutral = u < c.lam * self.reward_score(raw) + (1.0 - c.lam) * self._s_bar
            flips = int(np.count_nonzero((accept != neutral) & ~np.isnan(self.resp_entropy[raw])))
            self.mech.add("entropy_prior_flips", flips)
            self._flips += flips
        return accept

    def observe(self, groups: list[Group]) -> np.ndarray:
        types_ = super().observe(groups)
        self._refresh_h_range()  # the pool is "current" for the next round's Stage 1
        return types_

    # ------------------------------------------------------------------ Selector

    def build_batch(self, ctx: StepContext) -> list[Group]:
        self._flips = 0
        batch = super().build_batch(ctx)
        self._last["entropy_prior_flips"] = float(self._flips)
        if self.cfg.lam < 1.0:
            self._last["s_ent_mean"] = self._s_bar
        return batch
