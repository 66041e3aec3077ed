"""Controls, not methods: selectors that see each candidate prompt's **current** pass rate.

A null result says something only if the testbed could have shown an effect. These two arms
bound what prompt selection can do at a given budget, model and pool:

- *positive* (`mode="frontier"`): of the candidates, train on those whose measured pass rate is
  nearest 0.5 (largest p(1 - p)), never one measured at 0 or 1. No practical method knows the
  current pass rate before rolling out, so at matched rollouts this is the ceiling of what
  choosing which prompts to roll out can buy. (At matched steps a method that rolls out more
  per step, DS or HIVE's top-ups, can train on more informative groups per step than the
  control's B and end above it, having spent more rollouts: compare at matched rollouts.)
- *negative* (`mode="extremes"`): train only on candidates measured at exactly 0 or 1, the
  groups GRPO learns nothing from. The floor.

Each step takes `candidates` x B prompts from the shuffled, epoch-cycling stream (the one
uniform and DS read), measures each one's pass rate through `ctx.pass_rates` (k samples each, or
the exact probability where the context has it, as in the synthetic learner), and trains on the
B that qualify best, rolled out afresh with G responses through `ctx.rollout`:

- frontier: the largest p(1 - p), only where p(1 - p) > 0;
- extremes: the smallest p(1 - p), only where p(1 - p) <= `extreme_pq` (0: measured at exactly
  0 or 1, right for k samples; an exact pass rate is never exactly 0 or 1, so the synthetic
  learner's presets allow a small p(1 - p)).

Fewer than B qualify: the step trains on those; none: up to `max_rounds` more draws of
candidates, then a RuntimeError naming the fields. Only the training rollouts are charged to
the budget; the measurement is a control's privilege, counted apart
(`counters["control_samples"]`) and reported, never charged.

The selector reads only measured pass rates: prompt texts, ids and bucket labels never enter a
decision (tests/test_controls.py shuffles the labels and gets the same selections).

Config (`config.selector.oracle.*`): mode, candidates, k, extreme_pq, max_rounds.
Mechanism counters: pool_passes, candidates_measured, candidates_kept.
"""

from __future__ import annotations

import math

import numpy as np

from frontier_rl.selection.base import Group, StepContext, register
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

DEFAULTS = dict(
    mode="frontier",  # "frontier": nearest p = 0.5, never 0 or 1 (positive control);
    #                   "extremes": only p(1 - p) <= extreme_pq (negative control)
    candidates=4,  # prompts measured per step, in units of B
    k=8,  # samples per candidate measuring its pass rate (ignored where it is exact)
    extreme_pq=0.0,  # "extremes" keeps p(1 - p) <= this (0: measured exactly 0 or 1)
    max_rounds=4,  # draws of candidates per step while none qualifies, then an error
)


def validate(section) -> None:
    c = Checker("oracle", section, DEFAULTS)
    c("mode", lambda x: x in MODES, f"one of {MODES}")
    c("candidates", lambda x: is_num(x, 1.0), "a number >= 1 (prompts measured per step / B)")
    c("k", lambda x: is_int(x, 2), "an integer >= 2 (samples per candidate)")
    c("extreme_pq", lambda x: is_num(x, 0.0, 0.25), "a number in [0, 0.25]")
    c("max_rounds", lambda x: is_int(x, 1), "an integer >= 1")


def choose(rates: np.ndarray, mode: str, want: int, extreme_pq: float = 0.0) -> np.ndarray:
    """Positions (into `rates`) of the candidates a control keeps, at most `want`, in candidate
    order: "frontier" the largest p(1 - p) > 0; "extremes" the smallest p(1 - p) <=
    extreme_pq. Ties go to the earlier candidate."""
    score = np.asarray(rates, np.float64) * (1.0 - np.asarray(rates, np.float64))
    if mode == "frontier":
        ok = np.flatnonzero(score > 0)
        order = ok[np.argsort(-score[ok], kind="stable")]
    else:
        ok = np.flatnonzero(score <= extreme_pq)
        order = ok[np.argsort(score[ok], kind="stable")]
    return np.sort(order[:want])


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
        measured: list[np.ndarray] = []
        kept = np.zeros(0, np.int64)
        rounds = 0
        while kept.size == 0:
            if rounds == c.max_rounds:
                m = np.concatenate(measured)
                raise RuntimeError(
                    f"selector.oracle.max_rounds={c.max_rounds} reached at step {ctx.step}: none "
                    f"of {m.size} candidates qualified for mode={c.mode!r} (measured pass rates "
                    f"0: {np.mean(m == 0):.2f}, 1: {np.mean(m == 1):.2f}); raise "
                    "selector.oracle.max_rounds or selector.oracle.candidates"
                    + (", or selector.oracle.extreme_pq" if c.mode == "extremes" else ""))
            rounds += 1
            cand = self.stream.next(n_cand)
            rates = np.asarray(st.call(ctx.pass_rates, cand.tolist(), c.k), np.float64)
            measured.append(rates)
            kept = cand[choose(rates, c.mode, big_b, c.extreme_pq)]
            self.mech.add("candidates_measured", int(cand.size))
        self.mech.add("candidates_kept", int(kept.size))
        batch = st.rollout(ctx, kept, g)
        st.book(classify(outcome_matrix(batch)))
        m = np.concatenate(measured)
        self._last = st.metrics(batch)
        self._last.update({
            "control_rounds": float(rounds),
            "control_measured": float(m.size),
            "control_kept_share": kept.size / m.size,
            "control_measured_zero_or_one": float(np.mean((m == 0) | (m == 1))),
            "epoch": float(self.stream.epoch)})
        st.pause()
        return batch
