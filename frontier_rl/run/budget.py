"""The one rule that ends a run at a budget, shared by the trainer (`train.run`) and the
synthetic learner (`sim.run.run_sim`), so `fit`, which plays a run on the learner, predicts
the trainer's steps.

A run has at most one budget, in one of three units (`Meter.of` reads which from the config):

  rollouts  `rl.rollout_budget` generated responses, every charged one (screening and probe
            rollouts included; a control arm's uncharged pass-rate samples are not);
  tokens    `rl.token_budget` generated response tokens of those same responses (a prompt is
            prefilled, not generated: its tokens are reported apart, `rollout/prompt_tokens`);
  pflops    `rl.pflops_budget` PFLOPs as XLA's cost analysis measures them over every program
            the run charged (generation, prompt-entropy passes, log-prob passes, training;
            `accounting.Accountant`, "perf/pflops"): selection's own forward passes count.

A step's spend is only known once it ran (a selector may top up), so a run stops at the step
boundary nearest the budget: after a step, it is done when the total has reached the budget, or
when what is left is less than half of what the step just spent (the next step, expected to
cost as much, would overshoot by more than stopping now falls short). Matched runs therefore
differ by at most about half a step's spend.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

# unit -> the rl field holding the budget in that unit
FIELDS = {"rollouts": "rl.rollout_budget", "tokens": "rl.token_budget",
          "pflops": "rl.pflops_budget"}


def reached(total: float, budget: float, last_step: float) -> bool:
    """Whether a run that has spent `total`, `last_step` of it in its last step, stops at a
    budget of `budget` (0 = no budget: never). One unit throughout."""
    return bool(budget) and (total >= budget or budget - total < last_step / 2)


def read(unit: str, counters: Mapping[str, float], pflops: float) -> float:
    """What a run has spent so far in `unit`, from its context's counters and the accountant's
    cumulative measured PFLOPs."""
    if unit == "rollouts":
        return float(counters["rollouts"])
    if unit == "tokens":
        return float(counters["response_tokens"])
    if unit == "pflops":
        return float(pflops)
    raise ValueError(f"budget unit {unit!r} is not one of {sorted(FIELDS)}")


@dataclasses.dataclass(frozen=True)
class Meter:
    """A run's budget: its unit, the amount (0 = none: the run ends after rl.num_steps) and
    the evaluation period in the same unit (`eval.every_budget`, or `eval.every_rollouts` for a
    rollout budget; 0 = off)."""

    unit: str = "rollouts"
    limit: float = 0.0
    eval_every: float = 0.0
    # evaluations at limit / 2, limit / 4, ... limit / 2^early besides the even ones
    # (`eval.early`): dense early, where a curve rises fastest and reaches a target first
    early: int = 0

    @classmethod
    def of(cls, config: Any) -> Meter:
        """The budget `config` sets (config_lib.validate allows at most one)."""
        rl = config.rl
        for unit, field in FIELDS.items():
            amount = rl.get(field.split(".")[1], 0) or 0
            if amount:
                every = config.eval.get("every_budget", 0) or 0
                if unit == "rollouts" and not every:
                    every = config.eval.get("every_rollouts", 0) or 0
                return cls(unit, float(amount), float(every),
                           int(config.eval.get("early", 0) or 0))
        return cls("rollouts", 0.0, float(config.eval.get("every_rollouts", 0) or 0))

    def read(self, counters: Mapping[str, float], pflops: float) -> float:
        return read(self.unit, counters, pflops)

    def reached(self, total: float, last_step: float) -> bool:
        return reached(total, self.limit, last_step)

    def eval_due(self, before: float, after: float) -> bool:
        """Whether the spend crossed a multiple of the evaluation period, or one of the early
        points limit / 2^j (j = 1 .. early), in this step."""
        e = self.eval_every
        if e and after // e > before // e:
            return True
        return any(before < self.limit / 2 ** j <= after for j in range(1, self.early + 1))

    def describe(self, amount: float | None = None) -> str:
        """'38,400 rollouts', '1.2e+05 tokens', '0.0023 PFLOPs'."""
        x = self.limit if amount is None else amount
        if self.unit == "pflops":
            return f"{x:.4g} PFLOPs"
        return f"{int(round(x)):,} {self.unit}"
