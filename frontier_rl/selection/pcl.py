"""PCL: Prompt Curriculum Learning (Gao et al., arXiv 2510.01135), host-side reconstruction.

Each step draws k·m candidate prompts from the shuffled, epoch-cycling stream (m = B), scores
each with a value estimate V(x) ≈ p_π(x), the current policy's success probability on x, keeps
the m with the smallest |V(x) - τ| (ties broken at random), rolls out G responses for each, and
then fits V on those same rollouts. V is fitted after the rollout and used at the next step, so
it lags the policy by one step, as in the paper.

How V is built [RECON: PCL's value model is a neural network (a linear head or a second LM;
the sources disagree) and no code was released; `selection/` runs no networks, so this is a
host-side stand-in with the same interface: predict p before the rollout, regress on its
outcomes after]. It is a shrinkage estimator of two parts:
  - a per-prompt estimate p̂_x: the mean success rate of x's own responses, where older evidence
    is discounted with a half-life of `half_life` steps (the policy moves), with weight
    w_x = (responses seen) · 2^(-(t - t_x) / half_life);
  - a prior π: the running mean of all observed success rates, updated once per step with step
    size `prior_lr` (an SGD step on the squared error of a constant), starting at τ. With
    `bucket_prior=True` it is per bucket instead, π_b(x) over the prompt's `prompt.bucket`
    (unseen buckets use the global one);
  V(x) = (w_x p̂_x + κ π) / (w_x + κ).
So an unseen prompt is scored by the prior, a prompt seen recently by its own outcomes, and a
stale one drifts back to the prior as its evidence decays.

bucket_prior is off by default: `prompt.bucket` is the task's ground-truth difficulty label
(the operand count on arith, a source/difficulty tag on corpora), information no other selector
is given and PCL's value model does not read (it sees the prompt, not a label). With it on, PCL
gets an oracle difficulty feature; use it only as a labelled ablation.

Success means a correct raw verifier outcome (1); the paper's binary reward.

Symbols -> config fields (`config.selector.pcl.*`): k -> k; τ -> tau; m and n are the trainer's
rl.batch_size and rl.group_size. kappa, half_life, prior_lr and bucket_prior are the
reconstruction's own.

Deviations: PCL's GRPO variant (no std normalisation, A = r - mean) is the trainer's loss choice,
not the selector's; the k·m candidates come from the epoch stream (without replacement within
an epoch), so candidates passed over are not offered again until the next epoch.

Mechanism counters (`mechanisms()`, cumulative): pool_passes (completed passes of the stream),
value_selected (prompts chosen by V out of a larger candidate set: m per step when k > 1),
value_decided (those of them strictly closer to τ than every candidate left out, so chosen by
V rather than by the random tie-break: 0 while V is the same for every candidate, e.g. all
unseen), value_fitted (rolled-out prompts whose p̂_x was fitted on their outcomes).
value_selected and value_fitted are non-zero by construction; value_decided is the one that
shows V told candidates apart.
"""

from __future__ import annotations

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
    is_int,
    is_num,
    make_rng,
    outcome_matrix,
    read_config,
)

DEFAULTS = dict(
    k=4,  # k: candidate multiplier; k·m prompts are scored, m = B are kept
    tau=0.5,  # τ: target success probability
    kappa=2.0,  # [RECON] κ: weight (in responses) of the bucket prior in V
    half_life=50.0,  # [RECON] steps after which a prompt's own evidence counts half
    prior_lr=0.1,  # [RECON] step size of the prior's running mean
    bucket_prior=False,  # [RECON] one prior per prompt.bucket (a ground-truth label: an oracle)
)


def validate(section) -> None:
    c = Checker("pcl", section, DEFAULTS)
    c("k", lambda x: is_int(x, 1), "an integer >= 1")
    c("tau", lambda x: is_num(x, 0, 1), "a number in [0, 1] (τ)")
    c("kappa", lambda x: is_num(x, 0, lo_open=True), "a number > 0")
    c("half_life", lambda x: is_num(x, 0, lo_open=True), "a number > 0 (steps)")
    c("prior_lr", lambda x: is_num(x, 0, 1, lo_open=True), "a number in (0, 1]")
    c("bucket_prior", lambda x: isinstance(x, bool), "True or False")


@register("pcl", defaults=DEFAULTS, validate=validate)
class PCL(StreamSelector):
    name = "pcl"

    def __init__(self, cfg, *, num_prompts: int, seed: int):
        self.cfg = read_config(cfg, DEFAULTS)
        validate(vars(self.cfg))
        self.num_prompts = num_prompts
        self.stream = PromptStream(num_prompts, seed)
        self.rng = make_rng(seed, 3)
        self.t = 0  # steps taken
        self.est = np.zeros(num_prompts, np.float32)  # p̂_x
        self.weight = np.zeros(num_prompts, np.float32)  # responses behind p̂_x at t_x
        self.last_t = np.zeros(num_prompts, np.int32)  # t_x
        self.prior: dict[str, float] = {}  # π_b by bucket name
        self.global_prior = float(self.cfg.tau)
        self._bucket_of = np.full(num_prompts, -1, np.int32)  # cache: index -> bucket id
        self._bucket_names: list[str] = []
        self._bucket_ids: dict[str, int] = {}
        self.mech = Tally("value_selected", "value_decided", "value_fitted")
        self._last: dict[str, float] = {}

    @classmethod
    def proof_counters(cls, cfg) -> tuple[list[str], list[str]]:
        # with k = 1 every candidate is rolled out: V decides nothing
        decided = ["value_decided"] if cfg.k > 1 else []
        return decided, (["value_decided"] if not decided else []) + [
            "value_selected", "value_fitted", "pool_passes"]

    # ------------------------------------------------------------------ V

    def _buckets(self, ctx: StepContext, idx: np.ndarray) -> np.ndarray:
        b = self._bucket_of[idx]
        for j in np.flatnonzero(b < 0):
            name = str(getattr(ctx.prompts[int(idx[j])], "bucket", "") or "")
            if name not in self._bucket_ids:
                self._bucket_ids[name] = len(self._bucket_names)
                self._bucket_names.append(name)
            b[j] = self._bucket_of[idx[j]] = self._bucket_ids[name]
        return b

    def _decayed_weight(self, idx: np.ndarray) -> np.ndarray:
        age = (self.t - self.last_t[idx]).astype(np.float64)
        return self.weight[idx] * np.exp2(-age / self.cfg.half_life)

    def value(self, ctx: StepContext, idx: np.ndarray) -> np.ndarray:
        """V(x) for prompts `idx`: the shrinkage estimate of the module docstring."""
        if self.cfg.bucket_prior:
            b = self._buckets(ctx, idx)
            prior_tab = np.array([self.prior.get(n, self.global_prior)
                                  for n in self._bucket_names] or [self.global_prior])
            prior = prior_tab[b]
        else:
            prior = self.global_prior
        w = self._decayed_weight(idx)
        return (w * self.est[idx] + self.cfg.kappa * prior) / (w + self.cfg.kappa)

    def observe(self, ctx: StepContext, groups: list[Group]) -> None:
        """Fits V on rolled-out groups: per-prompt means, then the prior (per bucket with
        bucket_prior)."""
        if not groups:
            return
        idx = np.array([g.index for g in groups], np.int64)
        outcomes = outcome_matrix(groups)
        n = outcomes.shape[1]
        rate = np.mean(outcomes == REWARD_CORRECT, axis=1)
        w = self._decayed_weight(idx)
        self.est[idx] = (w * self.est[idx] + n * rate) / (w + n)
        self.weight[idx] = w + n
        self.last_t[idx] = self.t
        self.mech.add("value_fitted", idx.size)
        lr = self.cfg.prior_lr
        if self.cfg.bucket_prior:
            b = self._buckets(ctx, idx)
            for bid in np.unique(b):
                name = self._bucket_names[int(bid)]
                mean = float(rate[b == bid].mean())
                old = self.prior.get(name, self.global_prior)
                self.prior[name] = old + lr * (mean - old)
        self.global_prior += lr * (float(rate.mean()) - self.global_prior)

    # ------------------------------------------------------------------ Selector

    def build_batch(self, ctx: StepContext) -> list[Group]:
        st = StepStats()
        m, g = ctx.batch_size, ctx.group_size
        self.t += 1
        cand = self.stream.next(self.cfg.k * m)
        v = self.value(ctx, cand)
        dist = np.abs(v - self.cfg.tau)
        order = np.lexsort((self.rng.random(cand.size), dist))[:m]
        chosen = cand[order]
        if cand.size > chosen.size:
            self.mech.add("value_selected", chosen.size)
            # chosen by V itself, not by the random tie-break: strictly closer to τ than every
            # candidate left out
            left = np.ones(cand.size, bool)
            left[order] = False
            self.mech.add("value_decided", int(np.count_nonzero(dist[order] < dist[left].min())))
        groups = st.rollout(ctx, chosen, g)
        outcomes = outcome_matrix(groups)
        st.book(classify(outcomes))
        self.observe(ctx, groups)
        rate = np.mean(outcomes == REWARD_CORRECT, axis=1)
        self._last = st.metrics(groups)
        self._last.update({
            "v_selected": float(v[order].mean()),
            "v_dist_tau": float(dist[order].mean()),
            "v_dist_tau_all": float(dist.mean()),
            "v_abs_err": float(np.abs(v[order] - rate).mean()),
            "pass_rate": float(rate.mean()),
            "epoch": float(self.stream.epoch),
        })
        st.pause()
        return groups

    def state_dict(self) -> dict:
        return {**super().state_dict(), "t": self.t, "prior": dict(self.prior),
                "global_prior": self.global_prior, "est": encode_array(self.est),
                "weight": encode_array(self.weight), "last_t": encode_array(self.last_t)}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.t = int(state["t"])
        self.prior = {str(k): float(v) for k, v in state["prior"].items()}
        self.global_prior = float(state["global_prior"])
        self.est = decode_array(state["est"])
        self.weight = decode_array(state["weight"])
        self.last_t = decode_array(state["last_t"])
