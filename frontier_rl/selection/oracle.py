"""Controls, not methods: selectors that see each candidate prompt's **current** pass rate.

A null result says something only if the testbed could have shown an effect. These two arms
bound what prompt selection can do at a given budget, model and pool:

- *positive* (`mode="frontier"`): of the candidates, train on the B whose measured pass rate is
  nearest 0.5 (largest p(1 - p)). It bounds **pure selection over the pool at matched updates**:
  the same B groups of G per step as uniform, so at matched rollouts it takes uniform's steps
  and updates, and its gain over uniform (the headroom) is what choosing which prompts fill an
  update can buy. It does not bound what a method gains by other means: augmentation (new
  prompts), extra rollouts per step (DS's or HIVE's top-ups train more informative groups per
  step having spent more), or more updates.
- *negative* (`mode="extremes"`): train only on groups at zero reward variance, the groups
  GRPO learns nothing from. Measured on the training rollouts themselves (`measure="rollouts"`)
  every training group has zero reward variance, so every advantage is 0, the policy gradient
  is exactly 0, and the run is a floor (no update moves the policy; rl.weight_decay = 0).

How the pass rate is measured (`measure`):
- "rollouts": each step rolls out `candidates` x B prompts from the shuffled, epoch-cycling
  stream (the one uniform reads) with G responses through `ctx.control_rollout` (uncharged),
  scores each group by its own outcomes, keeps B and `ctx.charge`s only those: the training
  rollouts are the measured ones, so the choice is exact, and the discards are a control's
  privilege (counted in `control_samples`, never in the budget);
- "samples": each candidate's pass rate from k separate samples (`ctx.pass_rates`, the exact
  probability where the context has it, as in the synthetic learner), then the kept prompts
  are rolled out afresh with G responses (charged). Fresh rollouts can disagree with the
  measurement: at k = 8 a prompt at p = 0.14 reads 0 30% of the time, so a negative control
  measured this way trains on some informative groups (its leak, the effective share the
  report prints).

Which candidates are kept:
- frontier: the largest p(1 - p); with `fill` the batch is always B (zero-variance groups fill
  what too few informative candidates leave, so the updates match the reference's), without
  it only p(1 - p) > 0;
- extremes: the smallest p(1 - p), only where p(1 - p) <= `extreme_pq` (0: exactly 0 or 1;
  an exact pass rate is never exactly 0 or 1, so the synthetic learner's presets allow a small
  p(1 - p)); up to `max_rounds` draws of candidates until B qualify.

Fewer than B qualify after `max_rounds` draws: the step trains on those; none: a RuntimeError
naming the fields. The selector reads only measured outcomes: prompt texts, ids and bucket
labels never enter a decision (tests/test_controls.py shuffles the labels and gets the same
selections).

Config (`config.selector.oracle.*`): mode, measure, candidates, k, fill, extreme_pq,
max_rounds. Mechanism counters: pool_passes, candidates_measured, candidates_kept.
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
    is_int,
    is_num,
    outcome_matrix,
    read_config,
)

MODES = ("frontier", "extremes")
MEASURES = ("rollouts", "samples")

DEFAULTS = dict(
    mode="frontier",  # "frontier": nearest p = 0.5, never 0 or 1 (positive control);
    #                   "extremes": only p(1 - p) <= extreme_pq (negative control)
    measure="samples",  # "rollouts": by the candidates' own G training rollouts (exact);
    #                     "samples": k separate samples, then fresh training rollouts
    candidates=4,  # prompts measured per step, in units of B
    k=8,  # samples per candidate with measure="samples" (ignored where it is exact)
    fill=False,  # frontier: always B groups, zero-variance ones filling any shortfall
    extreme_pq=0.0,  # "extremes" keeps p(1 - p) <= this (0: measured exactly 0 or 1)
    max_rounds=4,  # draws of candidates per step while none qualifies, then an error
)


def validate(section) -> None:
    c = Checker("oracle", section, DEFAULTS)
    c("mode", lambda x: x in MODES, f"one of {MODES}")
    c("measure", lambda x: x in MEASURES, f"one of {MEASURES}")
    c("candidates", lambda x: is_num(x, 1.0), "a number >= 1 (prompts measured per step / B)")
    c("fill", lambda x: isinstance(x, bool), "True or False")
    c("k", lambda x: is_int(x, 2), "an integer >= 2 (samples per candidate)")
    c("extreme_pq", lambda x: is_num(x, 0.0, 0.25), "a number in [0, 0.25]")
    c("max_rounds", lambda x: is_int(x, 1), "an integer >= 1")


def choose(rates: np.ndarray, mode: str, want: int, extreme_pq: float = 0.0,
           fill: bool = False) -> np.ndarray:
    """Positions (into `rates`) of the candidates a control keeps, at most `want`, in candidate
    order: "frontier" the largest p(1 - p) > 0 (with `fill`, any p(1 - p) so that `want` are
    kept when there are that many candidates); "extremes" the smallest p(1 - p) <= extreme_pq.
    Ties go to the earlier candidate."""
    score = np.asarray(rates, np.float64) * (1.0 - np.asarray(rates, np.float64))
    if mode == "frontier":
        ok = np.arange(score.size) if fill else np.flatnonzero(score > 0)
        order = ok[np.argsort(-score[ok], kind="stable")]
    else:
        ok = np.flatnonzero(score <= extreme_pq)
        order = ok[np.argsort(score[ok], kind="stable")]
    return np.sort(order[:want])


def zero_variance(group: Group) -> bool:
    """The group's rewards are all equal: every advantage is 0, so is its policy gradient."""
    return bool(np.ptp(np.asarray(group.rewards, np.float64)) == 0)


def group_rates(groups: list[Group]) -> np.ndarray:
    """Each group's own pass rate; a zero-variance group reads exactly 0 or 1 whatever its
    reward values (all invalid reads 0), a group of mixed rewards strictly inside (0, 1)."""
    out = np.empty(len(groups), np.float64)
    for i, g in enumerate(groups):
        if zero_variance(g):
            out[i] = float(np.all(g.outcomes == REWARD_CORRECT))
        else:
            p = float(np.mean(g.outcomes == REWARD_CORRECT))
            out[i] = min(max(p, 0.5 / g.size), 1.0 - 0.5 / g.size)
    return out


@register("oracle", defaults=DEFAULTS, validate=validate, control=True)
class Oracle(StreamSelector):
    def __init__(self, cfg, *, num_prompts: int, seed: int):
        self.cfg = read_config(cfg, DEFAULTS)
        validate(vars(self.cfg))
        self.stream = PromptStream(num_prompts, seed)
        self.mech = Tally("candidates_measured", "candidates_kept")
        self._last: dict[str, float] = {}

    @classmethod
    def proof_counters(cls, cfg) -> tuple[list[str], list[str]]:
        return [], []  # a control arm: no method's mechanism to prove

    def build_batch(self, ctx: StepContext) -> list[Group]:
        c = self.cfg
        st = StepStats()
        big_b, g = ctx.batch_size, ctx.group_size
        n_cand = max(big_b, math.ceil(c.candidates * big_b))
        by_rollouts = c.measure == "rollouts"
        if by_rollouts and not hasattr(ctx, "control_rollout"):
            raise RuntimeError(f"selector.oracle.measure='rollouts' needs a context with "
                               f"control_rollout; {type(ctx).__name__} has none (use 'samples')")
        measured: list[np.ndarray] = []
        kept: list[int] = []
        kept_groups: list[Group] = []
        rounds = 0
        # frontier keeps one draw's best B; extremes draws until B qualify (or max_rounds)
        while len(kept) < big_b and (not kept or c.mode == "extremes"):
            if rounds == c.max_rounds:
                if kept:
                    break
                m = np.concatenate(measured)
                raise RuntimeError(
                    f"selector.oracle.max_rounds={c.max_rounds} reached at step {ctx.step}: none "
                    f"of {m.size} candidates qualified for mode={c.mode!r} (measured pass rates "
                    f"0: {np.mean(m == 0):.2f}, 1: {np.mean(m == 1):.2f}); raise "
                    "selector.oracle.max_rounds or selector.oracle.candidates"
                    + (", or selector.oracle.extreme_pq" if c.mode == "extremes" else ""))
            rounds += 1
            cand = self.stream.next(n_cand)
            if by_rollouts:
                groups = st.call(ctx.control_rollout, cand.tolist(), g)
                rates = group_rates(groups)
            else:
                rates = np.asarray(st.call(ctx.pass_rates, cand.tolist(), c.k), np.float64)
            measured.append(rates)
            pos = choose(rates, c.mode, big_b - len(kept), c.extreme_pq, c.fill)
            kept += cand[pos].tolist()
            if by_rollouts:
                kept_groups += [groups[i] for i in pos]
            self.mech.add("candidates_measured", int(cand.size))
        self.mech.add("candidates_kept", len(kept))
        if by_rollouts:
            st.call(ctx.charge, kept_groups)
            st.rounds += 1
            st.rollouts += g * len(kept_groups)
            batch = kept_groups
        else:
            batch = st.rollout(ctx, np.asarray(kept, np.int64), g)
        st.book(classify(outcome_matrix(batch)))
        m = np.concatenate(measured)
        self._last = st.metrics(batch)
        self._last.update({
            "control_rounds": float(rounds),
            "control_measured": float(m.size),
            "control_kept_share": len(kept) / m.size,
            "control_measured_zero_or_one": float(np.mean((m == 0) | (m == 1))),
            "control_train_nonzero_variance": (
                float(np.mean([not zero_variance(x) for x in batch])) if batch else 0.0),
            "epoch": float(self.stream.epoch)})
        st.pause()
        return batch
