"""MoPPS: Model Predictive Prompt Selection (Qu et al., "Can Prompt Difficulty be Online
Predicted for Accelerating RL Finetuning of Reasoning Models?", arXiv 2507.04632; released code
thu-rllab/MoPPS: the sampler `recipe/ours/mopps.py` (`PosteriorSampler.sample_batch`, `train`),
its place in the loop `recipe/ours/our_ray_trainer.py` (`fit`, `_create_dataloader`,
`our_group_reward`), defaults `recipe/ours/config/our_trainer.yaml` (`tasksampler`), settings
`recipe/ours/scripts/math/math_verl_1.5b_topk_noinit.sh`; the equations as `README.md` states
them).

Each prompt τ's success rate γ_τ has a Beta posterior, Beta(α_τ, β_τ), starting at the prior
Beta(α⁰, β⁰). Each step:
  1. The next B̂ = cand_ratio · B prompts of the shuffled stream are the candidates (the code's
     dataloader batch of min(ts_ratio · B, |D|) prompts), capped at the pool size.
  2. Thompson sampling: one draw γ̂_τ ~ Beta(α_τ, β_τ) per candidate.
  3. The B candidates with the smallest (γ̂_τ - γ*)² are rolled out, G responses each
     (README: Top-B of -‖γ̂ - γ*‖²; the code's 'topk' strategy).
  4. Each rolled-out prompt's posterior is updated from those same G responses, s_τ of them
     correct (no extra rollouts), with temporal discounting λ:
       α_τ <- λ α_τ + (1 - λ) α⁰ + s_τ,    β_τ <- λ β_τ + (1 - λ) β⁰ + (G - s_τ).
     After m visits with s_1 .. s_m successes this is α = α⁰ + Σ_j λ^(m-j) s_j (and likewise
     β), so λ = 1 keeps every observation and λ = 0 only the last.
Every rolled-out group is trained on, informative or not (the code's default recipe has
filter_groups off).

Symbols -> config fields (`config.selector.mopps.*`): B̂ / B (tasksampler.ts_ratio) ->
cand_ratio; γ* (bandit_target_mean) -> target; α⁰, β⁰ (PosteriorSampler prior_alpha,
prior_beta) -> alpha0, beta0; λ (bandit_decay_ratio) -> lam. B and G (k in the README) are
rl.batch_size and rl.group_size.

Defaults are those of the released MATH runs without an offline prior
(`math_verl_{1.5b,7b}_topk_noinit.sh`): ts_ratio = 16, λ = 1.0 (the yaml default, not
overridden there), γ* = 0.5, α⁰ = β⁰ = 1. The Countdown and Geometry3k scripts
(`recipe/ours/scripts/{countdown,geo3k}/*_topk_noinit.sh`) use ts_ratio = 8 and λ = 0.5.

Deviations from the code:
- Candidates come from the epoch stream, crossing epochs; the code's dataloader drops an
  epoch's last incomplete batch of ts_ratio · B prompts (drop_last=True), so some prompts of
  each epoch are never candidates there.
- The offline prior (bandit_init: α⁰ + 3 · successes from a file of pre-training rollouts,
  `recipe/ours/scripts/math/index_score.json`) is not reproduced: it spends rollouts before
  training that the file does not account for; the *_noinit runs are the method without it.
- Only the Top-B strategy; the code's 'threshold' (a band [0.3, 0.7] on γ̂) and 'uniform'
  strategies are not offered.
- Success is a correct raw verifier outcome (the code: acc >= 1). G is each group's own size;
  the code's n = 1 branch, which by operator precedence sets α and β to 8, is not reproduced.
- Duplicate prompts in one step's batch (only when the pool is smaller than B) are updated in
  turn, as the code's loop does; the posterior is kept by pool index (the code: by the row's
  `index` field, as a string).
- The draws come from the selector's seeded generator (the code: the global numpy one).

Mechanism counters (`mechanisms()`, cumulative): pool_passes (completed passes of the
stream), thompson_draws (posterior draws, one per candidate), posterior_updates (posterior
updates, one per rolled-out group), posterior_flips (chosen prompts that the same Thompson
draw, read under the prior instead of the prompt's posterior, would not have chosen: the draw's
quantile u = F_post(γ̂) is mapped to F_prior⁻¹(u), and the Top-B of those is the choice a
posterior-blind MoPPS makes with the same randomness). posterior_flips is 0 while no candidate
carries evidence (first pass, no revisits) or the evidence moves no choice, so it and
pool_passes are proof; draws and updates are non-zero by construction, so information.
Counting draws nothing from the generator and changes no choice.
"""

from __future__ import annotations

import math

import numpy as np

from frontier_rl.selection.base import REWARD_CORRECT, Group, StepContext, register
from frontier_rl.selection.common import (
    Checker,
    PromptStream,
    StepStats,
    StreamSelector,
    Tally,
    classify,
    decode_array,
    encode_array,
    is_num,
    make_rng,
    outcome_matrix,
    read_config,
)

DEFAULTS = dict(
    cand_ratio=16.0,  # B̂ / B (tasksampler.ts_ratio): candidates Thompson-sampled per step
    target=0.5,  # γ* (bandit_target_mean): the success rate the Top-B is nearest to
    alpha0=1.0,  # α⁰ (prior_alpha): prior pseudo-successes
    beta0=1.0,  # β⁰ (prior_beta): prior pseudo-failures
    lam=1.0,  # λ (bandit_decay_ratio): weight of the old posterior in each update
)


def validate(section) -> None:
    c = Checker("mopps", section, DEFAULTS)
    c("cand_ratio", lambda x: is_num(x, 1), "a number >= 1 (candidates per step / B)")
    c("target", lambda x: is_num(x, 0, 1), "a number in [0, 1] (γ*)")
    for f in ("alpha0", "beta0"):
        c(f, lambda x: is_num(x, 0, lo_open=True), "a number > 0 (a Beta prior parameter)")
    c("lam", lambda x: is_num(x, 0, 1), "a number in [0, 1] (λ)")


# ----------------------------------------------------------------------------- Beta CDF

_lgamma = np.frompyfunc(math.lgamma, 1, 1)


def _lbeta(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (_lgamma(a) + _lgamma(b) - _lgamma(a + b)).astype(np.float64)


def _beta_cf(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The continued fraction of the incomplete beta function (modified Lentz), converging
    for x < (a + 1) / (a + b + 2)."""
    tiny = 1e-300

    def guard(v):
        return np.where(np.abs(v) < tiny, tiny, v)

    c = np.ones_like(x)
    d = 1.0 / guard(1.0 - (a + b) * x / (a + 1.0))
    h = d.copy()
    for m in range(1, 501):
        num = m * (b - m) * x / ((a - 1.0 + 2 * m) * (a + 2 * m))
        d = 1.0 / guard(1.0 + num * d)
        c = guard(1.0 + num / c)
        h *= d * c
        num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 1.0 + 2 * m))
        d = 1.0 / guard(1.0 + num * d)
        c = guard(1.0 + num / c)
        h *= d * c
        if np.all(np.abs(d * c - 1.0) < 1e-13):
            break
    return h


def beta_cdf(x, a, b) -> np.ndarray:
    """The Beta(a, b) CDF at x (the regularized incomplete beta I_x(a, b)), elementwise."""
    x, a, b = (np.asarray(v, np.float64) for v in np.broadcast_arrays(x, a, b))
    out = np.where(x >= 1.0, 1.0, 0.0)
    inside = (x > 0.0) & (x < 1.0)
    if inside.any():
        x, a, b = x[inside], a[inside], b[inside]
        flip = x > (a + 1.0) / (a + b + 2.0)  # the fraction converges fast on this side
        xs, aa, bb = np.where(flip, 1.0 - x, x), np.where(flip, b, a), np.where(flip, a, b)
        front = np.exp(aa * np.log(xs) + bb * np.log1p(-xs) - _lbeta(aa, bb)) / aa
        v = np.clip(front * _beta_cf(xs, aa, bb), 0.0, 1.0)
        out[inside] = np.where(flip, 1.0 - v, v)
    return out


# ----------------------------------------------------------------------------- selector


@register("mopps", defaults=DEFAULTS, validate=validate)
class Mopps(StreamSelector):
    name = "mopps"

    def __init__(self, cfg, *, num_prompts: int, seed: int):
        self.cfg = read_config(cfg, DEFAULTS)
        validate(vars(self.cfg))
        self.num_prompts = num_prompts
        self.stream = PromptStream(num_prompts, seed)
        self.rng = make_rng(seed, 7)
        self.alpha = np.full(num_prompts, float(self.cfg.alpha0))  # α_τ
        self.beta = np.full(num_prompts, float(self.cfg.beta0))  # β_τ
        self.visits = np.zeros(num_prompts, np.int32)  # posterior updates per prompt
        # the prior's CDF on a grid: F_prior⁻¹ by interpolation (exact for Beta(1, 1))
        self._grid = np.linspace(0.0, 1.0, 4097)
        self._prior_cdf = beta_cdf(self._grid, self.cfg.alpha0, self.cfg.beta0)
        self.mech = Tally("thompson_draws", "posterior_updates", "posterior_flips")
        self._last: dict[str, float] = {}

    @classmethod
    def proof_counters(cls, cfg) -> tuple[list[str], list[str]]:
        info = ["thompson_draws", "posterior_updates"]
        if cfg.cand_ratio > 1:
            return ["pool_passes", "posterior_flips"], info
        # B̂ = B: every candidate is rolled out, the posterior decides nothing
        return ["pool_passes"], info + ["posterior_flips"]

    def num_candidates(self, batch_size: int) -> int:
        """B̂ = min(int(cand_ratio · B), pool), at least B (the code's dataloader batch)."""
        return max(batch_size, min(int(self.cfg.cand_ratio * batch_size + 1e-9),
                                   self.num_prompts))

    def top(self, draws: np.ndarray, k: int) -> np.ndarray:
        """Positions of the k draws nearest γ* (Top-B of -(γ̂ - γ*)²)."""
        return np.argsort((draws - self.cfg.target) ** 2, kind="stable")[:k]

    def flips(self, cand: np.ndarray, draws: np.ndarray, order: np.ndarray) -> int:
        """Chosen positions that the same draws, read under the prior, would not choose."""
        seen = self.visits[cand] > 0
        if not seen.any():
            return 0
        blind = draws.copy()
        u = beta_cdf(draws[seen], self.alpha[cand[seen]], self.beta[cand[seen]])
        blind[seen] = np.interp(u, self._prior_cdf, self._grid)
        return int(order.size - np.intersect1d(order, self.top(blind, order.size)).size)

    def observe(self, groups: list[Group]) -> None:
        """The discounted Beta update of each group's prompt from its responses."""
        c = self.cfg
        for grp in groups:
            s = float(np.count_nonzero(grp.outcomes == REWARD_CORRECT))
            i = grp.index
            self.alpha[i] = c.lam * self.alpha[i] + (1.0 - c.lam) * c.alpha0 + s
            self.beta[i] = c.lam * self.beta[i] + (1.0 - c.lam) * c.beta0 + (grp.size - s)
            self.visits[i] += 1
        self.mech.add("posterior_updates", len(groups))

    def build_batch(self, ctx: StepContext) -> list[Group]:
        st = StepStats()
        big_b, g = ctx.batch_size, ctx.group_size
        cand = self.stream.next(self.num_candidates(big_b))
        a, b = self.alpha[cand], self.beta[cand]
        draws = self.rng.beta(a, b)
        order = self.top(draws, big_b)
        flips = self.flips(cand, draws, order)
        chosen = cand[order]
        informed = float(np.mean(self.visits[chosen] > 0))
        mean_chosen = float(np.mean(a[order] / (a[order] + b[order])))
        self.mech.add("thompson_draws", cand.size)
        self.mech.add("posterior_flips", flips)
        groups = st.rollout(ctx, chosen, g)
        outcomes = outcome_matrix(groups)
        st.book(classify(outcomes))
        self.observe(groups)
        rate = np.mean(outcomes == REWARD_CORRECT, axis=1)
        self._last = st.metrics(groups)
        self._last.update({
            "candidates": float(cand.size),
            "thompson_chosen": float(draws[order].mean()),
            "thompson_dist": float(np.abs(draws[order] - self.cfg.target).mean()),
            "thompson_dist_all": float(np.abs(draws - self.cfg.target).mean()),
            "posterior_mean_chosen": mean_chosen,
            "pred_abs_err": float(np.abs(draws[order] - rate).mean()),
            "pass_rate": float(rate.mean()),
            "informed_share": informed,
            "posterior_flips": float(flips),
            "epoch": float(self.stream.epoch),
        })
        st.pause()
        return groups

    def state_dict(self) -> dict:
        return {**super().state_dict(), "alpha": encode_array(self.alpha),
                "beta": encode_array(self.beta), "visits": encode_array(self.visits)}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.alpha = decode_array(state["alpha"])
        self.beta = decode_array(state["beta"])
        self.visits = decode_array(state["visits"])
