"""The collapse watch: stops a run whose policy has stopped learning, before it spends its
budget on a dead policy.

A non-finite loss is caught by the update's NaN guard (rl/update.py, `rl.max_bad_steps`); a
collapse is finite. Too high a learning rate can drive the policy to a point where the loss
has advantages to follow and its gradient is exactly 0 (measured: `rl.learning_rate=1000` on
the arith smoke run, gradient norm 0.0 from step 2 on, the policy uniform over the vocabulary);
a policy can also become certain of one wrong answer, so no group it samples ever has reward
variance again (measured at 0.1: every response invalid from step 3, the entropy from 0.18 to
7e-7 nats per token in five steps of zero gradient, Adam's momentum carrying it on). Neither
ends by itself, and neither shows in the exit status.

A step is *collapsed* when
  (a) its gradient norm (`train/grad_norm`) is exactly 0 although some trained group had
      non-zero reward variance (`rollout/zero_var_frac` < 1), or
  (b) every trained group had zero reward variance, no response was correct
      (`rollout/correct` = 0) and the policy's entropy (`train/entropy`) is below ENTROPY_EPS
      nats per token, or
  (c) every response was invalid (`rollout/invalid` = 1: the reward at its minimum, nothing
      correct) after an earlier step of this run had most of its responses in form
      (`rollout/invalid` <= ANSWERED): a policy that answered and no longer does (measured at
      0.1 on another machine's rounding: every reward -1 from step 3 to 12 with the entropy
      above ENTROPY_EPS). A policy that never mostly answered in form (an untrained one, a
      tiny test model) is not collapsed by it: it has not learnt yet.
A step with a zero gradient and none of these (every group of zero variance, some answers
right: a solved pool, the negative control's groups; or an entropy still above ENTROPY_EPS) is
*idle*: no evidence either way, it leaves the streak as it is. Any other step is *live* and
ends the streak. `rl.collapse_steps` collapsed steps in one streak stop the run (0 turns the
watch off); a run shorter than that is watched over its steps after the first (the window is
at most the run's steps minus one), and a run whose last step is collapsed by (a) or (b), both
exact conditions, stops at the end whatever the streak's length: a run that ends collapsed
never ends as finished. (c) needs the whole window: a few steps of invalid responses are
common in a small policy's noise.

A step's metrics are measured on the policy its update starts from, the one the step before
checkpointed. So at the stop every checkpoint from the step before the first of the steps that
were not live (idle or collapsed) on is moved into checkpoints/_collapsed/ (renamed, never
deleted): the newest one left, the one a resume restores, is the last good one, whose policy
still gave a live step. Once a collapsed step opens the streak the periodic checkpoints are
held (`open`: each would hold a collapsed policy); idle steps do not hold them (a solved pool
is idle for good), so when a collapse follows many idle steps the good checkpoint may have
been rotated out (checkpoint.max_to_keep), and the stop says there is none. (The streak is not
checkpointed: one cut by a preemption starts again when the run resumes.)
"""

from __future__ import annotations

from frontier_rl.run.errors import RunError

ENTROPY_EPS = 1e-4  # nats per token: a policy this certain samples one response per prompt
ANSWERED = 0.5  # rule (c) counts once a step had at most this share of invalid responses
COLLAPSED_SUBDIR = "_collapsed"  # under the checkpoint directory: the collapsed policy's steps


def collapsed(record: dict, answered: bool = False) -> str | None:
    """Why the step of `record` (its metrics) counts as collapsed: "gradient" (a), "entropy"
    (b), "invalid" (c: `answered` says an earlier step had a response in form); "idle" for a
    zero gradient with nothing to learn from; None for a live step."""
    grad = record.get("train/grad_norm")
    zero_var = record.get("rollout/zero_var_frac")
    if grad is None or zero_var is None:
        return None
    if grad == 0 and zero_var < 1:
        return "gradient"
    entropy = record.get("train/entropy")
    if (zero_var == 1 and record.get("rollout/correct") == 0 and entropy is not None
            and entropy < ENTROPY_EPS):
        return "entropy"
    if answered and record.get("rollout/invalid") == 1 and zero_var == 1:
        return "invalid"
    return "idle" if grad == 0 else None


class CollapseWatch:
    """Counts collapsed steps in a row (`observe` each step's record); `stop` gives the error
    to stop with once `rl.collapse_steps` of them came, the collapsed policy's checkpoints set
    aside."""

    def __init__(self, steps: int, workdir: str, run_steps: int = 0):
        # the window: rl.collapse_steps, at most the run's steps after the first
        self.steps = min(steps, max(run_steps - 1, 1)) if steps and run_steps else steps
        self.asked, self.workdir = steps, workdir
        self.quiet: int | None = None  # the first step of this run of steps that are not live
        self.since: int | None = None  # the streak's first collapsed step
        self.kinds: list[str] = []
        self.answered = False  # whether a step of this run had a response in form
        self.last: str | None = None  # the last observed step's kind

    def observe(self, step: int, record: dict) -> None:
        if not self.steps:
            return
        kind = self.last = collapsed(record, self.answered)
        if record.get("rollout/invalid", 1) <= ANSWERED:
            self.answered = True
        if kind is None:
            self.quiet = self.since = None
            self.kinds = []
            return
        if self.quiet is None:
            self.quiet = step
        if kind != "idle":
            if self.since is None:
                self.since = step
            self.kinds.append(kind)

    @property
    def open(self) -> bool:
        """Whether a streak is open: a periodic checkpoint now would hold a collapsed policy."""
        return self.since is not None

    def stop(self, step: int, checkpointer, final: bool = False) -> RunError | None:
        """The error to stop with at `step`, else None; `final`: the run's last step, where a
        collapsed last step stops it whatever the streak's length. Before returning it, the
        checkpoints of the collapsed policy are set aside in `checkpointer`
        (checkpoint.Checkpointer): every one from the step before the quiet steps on (module
        docstring)."""
        if not self.steps or not self.kinds:
            return None
        if len(self.kinds) < self.steps and not (final and self.last in ("gradient", "entropy")):
            return None
        checkpointer.wait()
        bad = [s for s in checkpointer.all_steps() if s >= self.quiet - 1]
        aside = checkpointer.set_aside(bad, COLLAPSED_SUBDIR) if bad else ""
        good = checkpointer.latest_step()
        n, since = len(self.kinds), self.since
        steps = f"{n} step{'s' if n > 1 else ''}"
        if all(k == "gradient" for k in self.kinds):
            what = f"gradient norm 0 for {steps} since step {since}"
        elif all(k == "entropy" for k in self.kinds):
            what = (f"policy entropy below {ENTROPY_EPS} and no correct response for {steps} "
                    f"since step {since}")
        elif all(k == "invalid" for k in self.kinds):
            what = f"every response invalid (the lowest reward) for {steps} since step {since}"
        else:
            what = (f"gradient norm 0, entropy below {ENTROPY_EPS} with no correct response, or "
                    f"every response invalid, for {steps} since step {since}")
        if self.quiet < since:
            what += f", no learning signal since step {self.quiet}"
        several = "s" if len(bad) > 1 else ""
        moved = (f" (the collapsed policy's checkpoint{several} of step{several} "
                 f"{', '.join(map(str, bad))} moved to {aside})" if bad else "")
        if good is None:
            kept = f"no checkpoint from before it{moved}; rerun with a lower rl.learning_rate"
        else:
            kept = (f"last good checkpoint: step {good}{moved}; rerun with a lower "
                    "rl.learning_rate and --allow_config_change to resume from it")
        window = (f"rl.collapse_steps={self.asked}" if self.steps == self.asked else
                  f"rl.collapse_steps={self.asked}, {self.steps} in a run of {self.steps + 1} "
                  "steps")
        end = ", at the run's last step" if n < self.steps else ""
        return RunError(f"run {self.workdir}: stopped at step {step}: {what} (policy collapsed"
                        f"{end}, {window}); {kept}")
