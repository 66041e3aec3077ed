"""HIVE: History-Informed and online-VErified prompt selection (Wu et al., arXiv 2603.25184).

Each step narrows a shuffled stream of prompts in two stages, rolls out the survivors, and
repeats until exactly B_t groups with non-zero reward variance are available:

- Stage 1 (history). Prompt i is accepted with probability P_S1 = λ s_rew + (1 - λ) s_ent, where
  s_rew = max(p_τ^z, ε_p): z is the length of the trailing run of zero-variance visits, τ the
  zero-variance type of the latest visit (easy: all G correct; hard: all G wrong), p_τ its
  exploration probability. An unseen prompt has z = 0, so s_rew = 1 (one free visit). s_ent is
  the min-max normalised mean response entropy of the prompt's latest group.
- Stage 2 (online verification). The current policy's prompt entropy V_t(x) (`ctx.prompt_entropy`)
  gates the Stage-1 survivors: the deployed entropy band drops the top k_off fraction by V and
  keeps the next k_keep fraction, rounded down to a multiple of G; the median gate keeps
  V >= median.
- Exact B_t. Candidates are rolled out in rounds; the first round asks for B_cand = 1.5 B_t
  candidates, later ones for max(b_min, min(B_cand, ⌈η (B_t - |R|) / (1 - ρ_zv)⌉)) where |R| is
  the number of surviving groups and ρ_zv the zero-variance fraction of the last round (b_min
  scaled with B_t, see the deviations).
- After the update, p_easy and p_hard move by Δp toward the targets α_easy = α/3 and
  α_hard = 2α/3: down when the step's easy (hard) zero-variance ratio reached its target, up
  otherwise, clipped to [p_min, p_max].

Symbols -> config fields (`config.selector.hive.*`):
  λ -> lam; p_easy^(0), p_hard^(0) -> p_easy, p_hard; Δp -> delta_p; p_min, p_max -> p_min,
  p_max; ε_p -> eps_p; α -> alpha; k_off, k_keep -> k_off, k_keep; B_cand / B_t -> cand_ratio;
  b_raw -> b_raw; b_min -> b_min; η -> eta. B_t and G are the trainer's rl.batch_size and
  rl.group_size (ctx.batch_size, ctx.group_size).

Zero-variance types come from the raw verifier outcomes (1 / 0 / -1), never from shaped rewards:
easy = all correct (the paper's all-1.0), hard = all wrong (the paper's all-0.1, an answer that
was extracted but is wrong), all invalid (the paper's all-0.0, no answer) = neither.

Deviations and reconstructions (no code was released; Table 4 coincides with GRESO's defaults,
so GRESO's code settles what the paper leaves open):
- [RECON] An all-invalid zero-variance visit uses p_default (0.5), as "the default p_e" of Alg. 1.
- z_mode="any" (default) is the paper's z: trailing zero-variance visits of any type, τ from the
  latest. z_mode="typed" counts only trailing visits of the latest visit's type (GRESO).
- [RECON] p_easy / p_hard are updated once per step, after all rounds, from counts over every
  group rolled out that step; ties (ratio == target) decrease p (GRESO's `>=`, where Eq. 4 would
  not move); and, as in GRESO's code, not while the dataloader is in its first epoch
  (skip_first_epoch; every prompt is unseen then, so p does not affect acceptance).
- [RECON] s_ent's min and max are taken over every prompt with a recorded response entropy,
  ε = 1e-8; a prompt without one gets s_ent = 1. Used only when lam < 1 (deployed λ = 1).
- Stage 2 scope. scope="raw_batch" (default) gates each b_raw raw batch's survivors, as App. B.3
  deploys it; scope="pooled" gates all of a round's survivors at once (Alg. 1). Deviation: under
  the band, a raw batch whose survivors are too few for a non-empty band (⌊N k_keep⌋ < G) is
  carried into the next raw batch instead of dropped, because the literal rule keeps nothing
  whenever fewer than G / k_keep prompts survive Stage 1 and can then stall.
- [RECON] Band integer semantics: drop = ⌊N k_off⌋, keep = G ⌊⌊N k_keep⌋ / G⌋ after sorting by
  (-V, prompt index). The median gate does not round to G (Alg. 1 does not).
- b_min is scaled with the batch: b_min(B_t) = max(1, ⌈b_min B_t / 256⌉) (`scaled_b_min`), then
  capped at B_cand. Table 4's b_min = 64 is for B_t = 256; kept at 64 for a small batch it
  dominates the adaptive formula (at B_t = 64 a top-up the formula sizes at 40 candidates
  would roll out 64), which would charge HIVE rollouts its rule does not call for in a comparison
  against DS at small B. At B_t = 256 this is the paper's 64.
- Safeguards [RECON, App. B.3 asks for them]: ρ_zv -> 1 uses B_cand; at most max_rounds
  rounds, after which the batch is topped up to B_t with this step's zero-variance groups (zero
  advantage; counted in select/padded); an assembly that inspects a whole pass of the pool
  without enough candidates rolls out what it has (select/guard). Every generated response is
  charged through ctx.rollout.
- Only the sufficient statistics of the unbounded history are kept: z (both kinds), the latest
  type, the visit count and the latest mean response entropy, ~17 bytes per prompt.
- One ctx.prompt_entropy call per round covers all its Stage-1 survivors: the band's kept counts
  depend only on survivor counts, so the raw batches a round needs are known before V is.

Ablations (config fields; the defaults run the method as above):
- stage1=False: no history filter; every raw prompt survives Stage 1 (no Stage-1 RNG draw) and
  stage1_rejected stays 0. Histories, p_easy and p_hard are still kept, and unused.
- stage2="random": each gated set keeps exactly as many Stage-1 survivors as the entropy gate
  would (the band's counts depend only on the set's size; for the median gate, ⌈n/2⌉, its count
  when no two V tie), chosen uniformly at random with the selector's seeded RNG. No prompt
  entropy is computed (no ctx.prompt_entropy call). The entropy arm differs from this one only
  in *which* survivors it keeps, so this pair is the test of the gate's information.

Mechanism counters (`mechanisms()`, cumulative): pool_passes (completed passes of the stream),
stage1_rejected (raw prompts Stage 1 rejected), stage2_dropped (Stage-1 survivors the Stage-2
gate dropped), topup_rounds (rollout rounds of a step beyond the first), p_easy_moves /
p_hard_moves (updates that changed p_easy / p_hard). stage2_dropped is non-zero by
construction (the band drops at least half of every gated set whatever the entropies are, and
the random ablation drops the same number), so it shows that the gate ran, not that entropy chose
well; likewise the p moves happen every step after the first epoch unless p sits at a clip
bound. `proof_counters` declares which counters are proof and which are information;
selection/mechanisms.py says why.
"""

from __future__ import annotations

import math

import numpy as np

from frontier_rl.selection.base import Group, StepContext, register
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
    lam=1.0,  # λ: weight of the reward-history score in P_S1 = λ s_rew + (1 - λ) s_ent
    p_easy=0.5,  # p_{e,easy}^(0): initial exploration probability after easy zero-variance
    p_hard=0.5,  # p_{e,hard}^(0): initial exploration probability after hard zero-variance
    p_default=0.5,  # [RECON] p_e after an all-invalid zero-variance visit (neither type)
    delta_p=0.01,  # Δp: step of the p_easy / p_hard updates
    p_min=0.05,  # p_min: lower clip of p_easy / p_hard
    p_max=0.95,  # p_max: upper clip of p_easy / p_hard
    eps_p=0.01,  # ε_p: floor of the reward-history score s_rew
    alpha=0.25,  # α: total target zero-variance ratio; α_easy = α/3, α_hard = 2α/3
    z_mode="any",  # z: "any" = trailing zero-variance visits (paper), "typed" = same type (GRESO)
    skip_first_epoch=True,  # [RECON, GRESO code] no p update during the dataloader's 1st epoch
    stage1=True,  # ablation: False = no history filter (every raw prompt survives Stage 1)
    stage2="entropy",  # ablation: "random" = drop as many survivors as the gate, at random
    gate="band",  # Stage 2: "band" (Table 4 / App. B.3, deployed) or "median" (Eq. 9 / Alg. 1)
    scope="raw_batch",  # Stage-2 gate per b_raw raw batch (App. B.3) or "pooled" (Alg. 1)
    k_off=0.25,  # k_off: top fraction by prompt entropy dropped by the band
    k_keep=0.5,  # k_keep: fraction kept by the band below the dropped top
    cand_ratio=1.5,  # B_cand / B_t: candidates asked for in the first round (384 for 256)
    b_raw=32,  # b_raw: dataloader micro-batch inspected by Stage 1
    b_min=64,  # b_min: floor of the adaptive top-up size at B_t = 256, scaled by B_t / 256
    eta=1.25,  # η: safety factor of the adaptive top-up size
    max_rounds=16,  # [RECON] cap on rollout rounds per step
)

_ENT_EPS = 1e-8
_RHO_GUARD = 1e-6


def validate(section, name: str = "hive", defaults: dict = DEFAULTS) -> None:
    """Checks the config section of `hive`, or, given its name and defaults, of a selector
    that extends it (hive_v2), so that errors name that selector's fields."""
    c = Checker(name, section, defaults)
    c("lam", lambda x: is_num(x, 0, 1), "a number in [0, 1] (λ)")
    c("p_min", lambda x: is_num(x, 0, 1, lo_open=True), "a number in (0, 1]")
    c("p_max", lambda x: is_num(x, c.cfg.p_min, 1), f"a number in [p_min={c.cfg.p_min}, 1]")
    for f in ("p_easy", "p_hard"):
        c(f, lambda x: is_num(x, c.cfg.p_min, c.cfg.p_max),
          f"a number in [p_min={c.cfg.p_min}, p_max={c.cfg.p_max}]")
    c("p_default", lambda x: is_num(x, 0, 1), "a number in [0, 1]")
    c("delta_p", lambda x: is_num(x, 0, 1), "a number in [0, 1] (Δp)")
    c("eps_p", lambda x: is_num(x, 0, 1), "a number in [0, 1] (ε_p)")
    c("alpha", lambda x: is_num(x, 0, 1, lo_open=True, hi_open=True), "a number in (0, 1) (α)")
    c("z_mode", lambda x: x in ("any", "typed"), "'any' or 'typed'")
    c("skip_first_epoch", lambda x: isinstance(x, bool), "True or False")
    c("stage1", lambda x: isinstance(x, bool), "True or False")
    c("stage2", lambda x: x in ("entropy", "random"), "'entropy' or 'random'")
    c("gate", lambda x: x in ("band", "median"), "'band' or 'median'")
    c("scope", lambda x: x in ("raw_batch", "pooled"), "'raw_batch' or 'pooled'")
    c("k_off", lambda x: is_num(x, 0, 1, hi_open=True), "a number in [0, 1)")
    c("k_keep", lambda x: is_num(x, 0, 1, lo_open=True), "a number in (0, 1]")
    c("k_keep", lambda x: c.cfg.k_off + x <= 1 + 1e-12,
      f"a number with k_off + k_keep <= 1 (k_off={c.cfg.k_off})")
    c("cand_ratio", lambda x: is_num(x, 1), "a number >= 1 (B_cand / B_t)")
    c("b_raw", lambda x: is_int(x, 1), "an integer >= 1")
    c("b_min", lambda x: is_int(x, 1), "an integer >= 1")
    c("eta", lambda x: is_num(x, 0, lo_open=True), "a number > 0 (η)")
    c("max_rounds", lambda x: is_int(x, 1), "an integer >= 1")


def band_counts(n: int, k_off: float, k_keep: float, group_size: int) -> tuple[int, int]:
    """(drop, keep) of the entropy band over n candidates: ⌊n k_off⌋ and G ⌊⌊n k_keep⌋ / G⌋."""
    drop = int(math.floor(n * k_off + 1e-9))
    keep = int(math.floor(n * k_keep + 1e-9)) // group_size * group_size
    return drop, keep


def stage2(v: np.ndarray, tie: np.ndarray, *, gate: str, k_off: float, k_keep: float,
           group_size: int) -> tuple[np.ndarray, float]:
    """Stage 2 over one gated set with prompt entropies `v`: (positions kept, ascending;
    threshold on V, NaN if nothing is kept). The band sorts by (-V, tie) and keeps `keep` after
    dropping `drop` (`band_counts`); the median gate keeps V >= median(V). Also used by the
    heapa_hive selector, with the candidates' boundary order as `tie` and group_size=1.
    """
    if gate == "median":
        gamma = float(np.median(v))
        return np.flatnonzero(v >= gamma), gamma
    drop, keep = band_counts(v.size, k_off, k_keep, group_size)
    if keep == 0:
        return np.zeros(0, np.int64), float("nan")
    order = np.lexsort((tie, -v))  # V descending, ties by `tie`
    sel = np.sort(order[drop:drop + keep])
    return sel, float(v[sel].min())


class _Stats(StepStats):
    """StepStats plus HIVE's stage counts."""

    def __init__(self):
        super().__init__()
        self.inspected = 0  # raw prompts drawn for Stage 1
        self.accepted = 0  # Stage-1 survivors
        self.guard = 0  # assemblies that ran a whole pass of the pool short
        self.thresholds: list[float] = []  # Stage-2 threshold of each gated set


@register("hive", defaults=DEFAULTS, validate=validate)
class Hive(ExplorationSelector):
    name = "hive"

    def __init__(self, cfg, *, num_prompts: int, seed: int):
        self.cfg = read_config(cfg, DEFAULTS)
        validate(vars(self.cfg))
        self.num_prompts = num_prompts
        self.stream = PromptStream(num_prompts, seed)
        self.rng = make_rng(seed, 1)
        self.z_any = np.zeros(num_prompts, np.int32)  # trailing zero-variance visits
        self.z_typed = np.zeros(num_prompts, np.int32)  # trailing visits of the latest type
        self.last_type = np.zeros(num_prompts, np.int8)  # MIXED (or unseen), EASY, HARD, ...
        self.visits = np.zeros(num_prompts, np.int32)
        self.seen = 0  # prompts visited at least once
        self.resp_entropy = np.full(num_prompts, np.nan, np.float32)  # H_i of the latest group
        self.p_easy = float(self.cfg.p_easy)
        self.p_hard = float(self.cfg.p_hard)
        self._h_range = (0.0, 0.0)  # (H_min, H_max) of s_ent, refreshed each step if λ < 1
        self.mech = Tally("stage1_rejected", "stage2_dropped", "topup_rounds", "p_easy_moves",
                          "p_hard_moves")
        self._stats: _Stats | None = None
        self._last: dict[str, float] = {}

    @classmethod
    def proof_counters(cls, cfg) -> tuple[list[str], list[str]]:
        # stage1=False never rejects: stage1_rejected stays 0 by construction there
        stage1 = ["stage1_rejected"] if cfg.stage1 else []
        info = [] if stage1 else ["stage1_rejected"]
        return (["pool_passes", *stage1, "topup_rounds"],
                info + ["stage2_dropped", "p_easy_moves", "p_hard_moves"])

    # ------------------------------------------------------------------ Stage 1

    def reward_score(self, idx: np.ndarray) -> np.ndarray:
        """s_rew for prompts `idx` under the current history and p_easy / p_hard."""
        c = self.cfg
        z = (self.z_any if c.z_mode == "any" else self.z_typed)[idx]
        p_tab = np.array([1.0, self.p_easy, self.p_hard, c.p_default, c.p_default])
        return np.where(z > 0, np.maximum(p_tab[self.last_type[idx]] ** z, c.eps_p), 1.0)

    def stage1_prob(self, idx: np.ndarray) -> np.ndarray:
        """P_S1 for prompts `idx` under the current history and p_easy / p_hard."""
        c = self.cfg
        s_rew = self.reward_score(idx)
        if c.lam >= 1.0:
            return s_rew
        return c.lam * s_rew + (1.0 - c.lam) * self._entropy_score(idx)

    def _entropy_score(self, idx: np.ndarray) -> np.ndarray:
        h = self.resp_entropy[idx].astype(np.float64)
        lo, hi = self._h_range
        return np.where(np.isnan(h), 1.0, (h - lo) / (hi - lo + _ENT_EPS))

    def _refresh_h_range(self) -> None:
        if self.cfg.lam >= 1.0:
            return
        seen = self.resp_entropy[self.visits > 0]
        seen = seen[~np.isnan(seen)]
        self._h_range = (float(seen.min()), float(seen.max())) if seen.size else (0.0, 0.0)

    def stage1_accept(self, raw: np.ndarray) -> np.ndarray:
        """Stage 1 over one raw batch: one Bernoulli(P_S1) draw per prompt, the accepted mask."""
        return self.rng.random(raw.size) < self.stage1_prob(raw)

    # ------------------------------------------------------------------ Stage 2

    def _unit_keep(self, n: int, group_size: int) -> int:
        """How many of n gated candidates Stage 2 keeps (a lower bound for the median gate)."""
        if n == 0:
            return 0
        if self.cfg.gate == "band":
            return band_counts(n, self.cfg.k_off, self.cfg.k_keep, group_size)[1]
        return (n + 1) // 2

    def gate(self, unit: np.ndarray, v: np.ndarray, group_size: int) -> tuple[np.ndarray, float]:
        """Stage 2 over one gated set: (kept prompts in stream order, threshold on V)."""
        c = self.cfg
        sel, thr = stage2(v, unit, gate=c.gate, k_off=c.k_off, k_keep=c.k_keep,
                          group_size=group_size)
        return unit[sel], thr

    def random_gate(self, unit: np.ndarray, group_size: int) -> np.ndarray:
        """The stage2="random" ablation over one gated set: keeps as many prompts as the entropy
        gate would (`_unit_keep`: the band's count depends only on the set's size; the median
        gate's is ⌈n/2⌉, its count when no two V tie), chosen uniformly at random with the
        selector's RNG; returns them in stream order."""
        keep = self._unit_keep(unit.size, group_size)
        pos = np.sort(self.rng.choice(unit.size, size=keep, replace=False))
        return unit[pos]

    # ------------------------------------------------------------------ one round's candidates

    def _assemble(self, ctx: StepContext, target: int, st: _Stats) -> np.ndarray:
        """Stage 1 over raw batches, then Stage 2, until at least `target` candidates."""
        c, g = self.cfg, ctx.group_size
        units: list[np.ndarray] = []
        pending = np.zeros(0, np.int64)
        expected, inspected = 0, 0
        last_raw = pending
        while expected < target and inspected < max(self.num_prompts, c.b_raw):
            raw = self.stream.next(c.b_raw)
            last_raw = raw
            inspected += raw.size
            if c.stage1:
                surv = raw[self.stage1_accept(raw)]
            else:  # ablation: the history filter is off
                surv = raw
            st.accepted += surv.size
            self.mech.add("stage1_rejected", raw.size - surv.size)
            pending = np.concatenate([pending, surv]) if pending.size else surv
            if c.scope == "pooled":
                expected = self._unit_keep(pending.size, g)
            else:
                k = self._unit_keep(pending.size, g)
                if k > 0:
                    units.append(pending)
                    expected += k
                    pending = np.zeros(0, np.int64)
        st.inspected += inspected
        if c.scope == "pooled" and self._unit_keep(pending.size, g) > 0:
            units, pending = [pending], np.zeros(0, np.int64)
        kept: list[np.ndarray] = []
        if units and c.stage2 == "random":  # ablation: no entropy pass at all
            for unit in units:
                sel = self.random_gate(unit, g)
                kept.append(sel)
                self.mech.add("stage2_dropped", unit.size - sel.size)
        elif units:
            flat = np.concatenate(units)
            v = np.asarray(st.call(ctx.prompt_entropy, flat.tolist()), np.float64)
            start = 0
            for unit in units:
                sel, thr = self.gate(unit, v[start:start + unit.size], g)
                start += unit.size
                kept.append(sel)
                self.mech.add("stage2_dropped", unit.size - sel.size)
                if not math.isnan(thr):
                    st.thresholds.append(thr)
        out = np.concatenate(kept) if kept else np.zeros(0, np.int64)
        if expected < target:  # a full pass of the pool gave too few candidates
            st.guard += 1
            if out.size == 0:
                out = pending if pending.size else last_raw
        return out

    # ------------------------------------------------------------------ history

    def observe(self, groups: list[Group]) -> np.ndarray:
        """Appends one visit per group to the history; returns the groups' zero-variance types."""
        types_ = classify(outcome_matrix(groups))
        if groups:
            self._record(np.array([g.index for g in groups], np.int64), types_, groups)
        return types_

    def _record(self, idx: np.ndarray, types_: np.ndarray, groups: list[Group]) -> None:
        zv = types_ != MIXED
        same = zv & (types_ == self.last_type[idx])
        self.z_any[idx] = np.where(zv, self.z_any[idx] + 1, 0)
        self.z_typed[idx] = np.where(zv, np.where(same, self.z_typed[idx] + 1, 1), 0)
        self.last_type[idx] = types_
        self.seen += int(np.count_nonzero(self.visits[idx] == 0))
        self.visits[idx] += 1
        if groups:
            self.resp_entropy[idx] = np.stack([g.mean_entropy for g in groups]).mean(axis=1)

    # ------------------------------------------------------------------ Selector

    def build_batch(self, ctx: StepContext) -> list[Group]:
        c = self.cfg
        st = _Stats()
        self._stats = st
        big_b, g = ctx.batch_size, ctx.group_size
        b_cand = max(1, math.ceil(c.cand_ratio * big_b))
        b_min = min(scaled_b_min(c.b_min, big_b), b_cand)
        self._refresh_h_range()
        target = b_cand
        kept: list[Group] = []
        zero_var: list[Group] = []
        for _ in range(c.max_rounds):
            cand = self._assemble(ctx, target, st)
            groups = st.rollout(ctx, cand, g)
            types_ = self.observe(groups)
            st.book(types_)
            for grp, t in zip(groups, types_, strict=True):
                (kept if t == MIXED else zero_var).append(grp)
            if len(kept) >= big_b:
                break
            rho = float(np.mean(types_ != MIXED)) if types_.size else 1.0
            if rho >= 1.0 - _RHO_GUARD:
                target = b_cand
            else:
                est = math.ceil(c.eta * (big_b - len(kept)) / (1.0 - rho))
                target = max(b_min, min(b_cand, est))
        self.mech.add("topup_rounds", st.rounds - 1)
        batch = kept[:big_b]
        padded = 0
        if len(batch) < big_b:  # the round cap was hit
            fill = zero_var[:big_b - len(batch)]
            padded = len(fill)
            batch = batch + fill
        self._last = st.metrics(batch)
        self._last.update({
            "stage1_accept": st.accepted / st.inspected if st.inspected else 0.0,
            "raw_prompts": float(st.inspected),
            "padded": float(padded),
            "guard": float(st.guard),
            "epoch": float(self.stream.epoch),
            "seen_frac": self.seen / self.num_prompts,
        })
        if st.thresholds:
            self._last["stage2_threshold"] = float(np.mean(st.thresholds))
        st.pause()
        return batch

    def state_dict(self) -> dict:
        return {
            **super().state_dict(), "p_easy": self.p_easy, "p_hard": self.p_hard,
            "z_any": encode_array(self.z_any), "z_typed": encode_array(self.z_typed),
            "last_type": encode_array(self.last_type), "visits": encode_array(self.visits),
            "resp_entropy": encode_array(self.resp_entropy),
        }

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.p_easy = float(state["p_easy"])
        self.p_hard = float(state["p_hard"])
        self.z_any = decode_array(state["z_any"])
        self.z_typed = decode_array(state["z_typed"])
        self.last_type = decode_array(state["last_type"])
        self.visits = decode_array(state["visits"])
        self.seen = int(np.count_nonzero(self.visits))
        self.resp_entropy = decode_array(state["resp_entropy"])
