"""The one rule that ends a run at a rollout budget, shared by the trainer (`train.run`) and
the synthetic learner (`sim.run.run_sim`), so `fit`, which plays a run on the learner, predicts
the trainer's steps.

A step's rollouts are only known once it ran (a selector may top up), so a run stops at the
step boundary nearest the budget: after a step, it is done when the total has reached the
budget, or when what is left is less than half of what the step just spent (the next step,
expected to cost as much, would overshoot by more than stopping now falls short). Matched runs
therefore differ by at most about half a step's rollouts.
"""

from __future__ import annotations


def reached(total: int, budget: int, last_step: int) -> bool:
    """Whether a run that has spent `total` rollouts, `last_step` of them in its last step,
    stops at a budget of `budget` rollouts (0 = no budget: never)."""
    return bool(budget) and (total >= budget or budget - total < last_step / 2)
