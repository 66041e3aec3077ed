"""SPEED: selective prompting with efficient estimation of difficulty (Zhang, Arora, Mei and
Zanette, "SPEED-RL: Faster Training of Reasoning Models via Online Curriculum Learning",
arXiv 2506.09016; released code Zanette-Labs/speed-rl: the loop in
`recipe/dapo/src/fast_dapo_ray_trainer.py` (`RayFastDAPOTrainer.fit`), the buffer in
`verl/trainer/ppo/data_controller.py` (`DataController`), settings in `run_fast_rloo_7b.sh`).

Inference runs in two phases (Alg. 1). Screening: a candidate prompt gets N_init responses and
qualifies iff its pass rate, the share of correct responses, lies strictly inside
(p_low, p_high): with the defaults, neither all correct nor all wrong (Alg. 1: 0 < PassRate < 1;
the code keeps a prompt iff std(acc) > 0). Continuation: a qualified prompt gets
N_cont = G - N_init more responses and trains on all G, its screening responses first (the
code appends both to the training buffer under the prompt's uid; Alg. 1 line 14).

Rounds, as the code runs them. A generation round screens the next gen_ratio B prompts of the
stream and, in the same round, continues every prompt that qualified in an earlier round (the
code puts both phases in one call to the inference engine, `get_generation_inputs`). Continued
prompts join a buffer of ready groups. A step runs rounds until the buffer holds B groups,
trains on the first B in the order their prompts qualified, and leaves the rest, and the
qualified prompts still waiting for their continuation, to later steps (`get_training_data`
keeps the remainder); a step that finds B ready groups in the buffer runs no round. The first
step therefore runs at least two rounds (the first only screens).

Symbols -> config fields (`config.selector.speed.*`): N_init (rollout.n) -> n_init;
N_cont (rollout.n_continue) -> G - n_init, G being the trainer's rl.group_size; the pass-rate
band (0, 1) of Alg. 1 -> (p_low, p_high); data.gen_batch_size / data.train_batch_size ->
gen_ratio; algorithm.filter_groups.max_num_gen_batches -> max_gen_batches. B is rl.batch_size.

Deviations from the code:
- N_init + N_cont = G: every group the trainer packs has rl.group_size responses. The paper's
  runs use N_init + N_cont = 4 + 20 (`run_fast_rloo_7b.sh`) or 8 + 16
  (`recipe/rloo/test_fast_rloo_1.5b_math.sh`); at G = 8 the screening share is 1/2, not 1/6.
- The code requires n_continue to be a multiple of n (it repeats each continued prompt
  n_continue / n times at rollout.n = n, and tells the phases apart by response counts); here
  each phase is its own ctx.rollout call, so any 2 <= N_init < G works.
- The code continues only a multiple of the GPU count of the waiting prompts per round and
  holds the remainder; here every waiting prompt is continued in the next round.
- The code's loop takes one dataloader batch per iteration and uses none in an iteration that
  trains, so each training step skips gen_batch_size prompts of the epoch unscreened. Not
  reproduced: the stream moves only by the prompts screened. It changes which prompts an
  epoch visits, not what any round does.
- The cap: the code raises once its per-step count of generation batches reaches
  max_num_gen_batches (so at most max - 1 run); here a step may run max_gen_batches rounds
  and then raises a RuntimeError that names the field and the counts.
- Pass rates are read from raw outcomes: correct (1) counts, wrong (0) and invalid (-1) do not
  (the code's acc metric).
- As in the code, a prompt's screening and continuation can fall in different steps and a ready
  group can wait a step in the buffer, so a trained group may hold responses of an earlier
  policy; verl recomputes the old log-probs (rl.recompute_old_logp="always" does so here).
- Every response is charged through ctx.rollout, screening of rejected prompts included;
  groups still buffered when a run ends were charged and are never trained.
- select/zero_var* and select/groups_rolled count the screening groups (one per candidate);
  select/rounds counts generation rounds (a round is up to two ctx.rollout calls). SPEED
  draws no random numbers besides the shuffled stream.

Mechanism counters (`mechanisms()`, cumulative): pool_passes (completed passes of the stream),
screen_rollouts (responses spent on screening), screened_out (candidates whose screening pass
rate fell outside the band), continued (prompts given their continuation), carried (ready
groups a step left in the buffer for a later one, summed over steps). screened_out and carried
are proof; the others are non-zero whenever a step trains at all, so information.
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
    concat_groups,
    decode_array,
    encode_array,
    is_int,
    is_num,
    outcome_matrix,
    read_config,
)

DEFAULTS = dict(
    n_init=4,  # N_init: screening responses per candidate; N_cont = G - N_init
    p_low=0.0,  # a candidate qualifies iff p_low < screening pass rate < p_high (Alg. 1: 0, 1)
    p_high=1.0,
    gen_ratio=4.0,  # prompts screened per round / B (data.gen_batch_size / train_batch_size)
    max_gen_batches=50,  # max_num_gen_batches: generation rounds a step may run
)

_ARRAYS = ("outcomes", "rewards", "lengths", "mean_entropy")


def validate(section) -> None:
    c = Checker("speed", section, DEFAULTS)
    c("n_init", lambda x: is_int(x, 2), "an integer >= 2 (and < rl.group_size)")
    c("p_low", lambda x: is_num(x, 0, 1, hi_open=True), "a number in [0, 1)")
    c("p_high", lambda x: is_num(x, c.cfg.p_low, 1, lo_open=True),
      f"a number in (p_low={c.cfg.p_low}, 1]")
    c("gen_ratio", lambda x: is_num(x, 0, lo_open=True), "a number > 0 (prompts per round / B)")
    c("max_gen_batches", lambda x: is_int(x, 1), "an integer >= 1")


def pass_rates(groups: list[Group]) -> np.ndarray:
    """The share of correct responses of each group."""
    out = outcome_matrix(groups)
    return np.mean(out == REWARD_CORRECT, axis=1) if out.size else np.zeros(0)


def group_state(g: Group) -> dict:
    """A Group as JSON (its arrays via encode_array)."""
    state = {"index": g.index, "prompt_id": g.prompt_id, "texts": g.texts,
             "adv_baseline": g.adv_baseline, "adv_scale": g.adv_scale}
    for k in (*_ARRAYS, "tokens", "logps"):
        a = getattr(g, k)
        state[k] = None if a is None else encode_array(a)
    return state


def group_from_state(state: dict) -> Group:
    arrays = {k: None if state[k] is None else decode_array(state[k])
              for k in (*_ARRAYS, "tokens", "logps")}
    return Group(index=int(state["index"]), prompt_id=state["prompt_id"], texts=state["texts"],
                 adv_baseline=state["adv_baseline"], adv_scale=state["adv_scale"], **arrays)


@register("speed", defaults=DEFAULTS, validate=validate)
class Speed(StreamSelector):
    name = "speed"

    def __init__(self, cfg, *, num_prompts: int, seed: int):
        self.cfg = read_config(cfg, DEFAULTS)
        validate(vars(self.cfg))
        self.num_prompts = num_prompts
        self.stream = PromptStream(num_prompts, seed)
        self.waiting: list[Group] = []  # qualified screening groups awaiting continuation
        self.ready: list[Group] = []  # complete groups (N_init + N_cont), in qualifying order
        self.mech = Tally("screen_rollouts", "screened_out", "continued", "carried")
        self._last: dict[str, float] = {}

    @classmethod
    def proof_counters(cls, cfg) -> tuple[list[str], list[str]]:
        return ["screened_out", "carried"], ["pool_passes", "screen_rollouts", "continued"]

    def qualifies(self, groups: list[Group]) -> np.ndarray:
        """Whether each screening group's pass rate lies strictly inside (p_low, p_high)."""
        rate = pass_rates(groups)
        return (rate > self.cfg.p_low) & (rate < self.cfg.p_high)

    def build_batch(self, ctx: StepContext) -> list[Group]:
        c = self.cfg
        big_b, g = ctx.batch_size, ctx.group_size
        if c.n_init >= g:
            raise ValueError(f"selector.speed.n_init={c.n_init} is not allowed: an integer "
                             f"in [2, rl.group_size - 1] (rl.group_size={g}; the continuation "
                             "adds G - n_init >= 1 responses)")
        st = StepStats()
        gen_bs = max(1, math.ceil(c.gen_ratio * big_b - 1e-9))
        rounds = screened = qualified = continued = 0
        while len(self.ready) < big_b:
            if rounds >= c.max_gen_batches:
                raise RuntimeError(
                    f"selector.speed.max_gen_batches={c.max_gen_batches} reached at step "
                    f"{ctx.step}: {len(self.ready)} of {big_b} groups ready after {rounds} "
                    f"generation rounds of {gen_bs} screened prompts ({st.rollouts} rollouts); "
                    "raise it or make the task less uniformly easy/hard for the policy")
            rounds += 1
            waiting, self.waiting = self.waiting, []
            screen = st.rollout(ctx, self.stream.next(gen_bs), c.n_init)
            if waiting:  # the same round continues the earlier rounds' qualified prompts
                more = st.rollout(ctx, [w.index for w in waiting], g - c.n_init)
                self.ready += [concat_groups([w, m]) for w, m in zip(waiting, more, strict=True)]
                continued += len(waiting)
            ok = self.qualifies(screen)
            self.waiting = [grp for grp, k in zip(screen, ok, strict=True) if k]
            st.book(classify(outcome_matrix(screen)))
            screened += len(screen)
            qualified += len(self.waiting)
        batch, self.ready = self.ready[:big_b], self.ready[big_b:]
        self.mech.add("screen_rollouts", screened * c.n_init)
        self.mech.add("screened_out", screened - qualified)
        self.mech.add("continued", continued)
        self.mech.add("carried", len(self.ready))
        self._last = st.metrics(batch)
        self._last.update({
            "rounds": float(rounds),
            "screened": float(screened),
            "qualified": float(qualified),
            "qualify_rate": qualified / screened if screened else 0.0,
            "continued": float(continued),
            "screen_share": screened * c.n_init / st.rollouts if st.rollouts else 0.0,
            "buffer_ready": float(len(self.ready)),
            "buffer_waiting": float(len(self.waiting)),
            "epoch": float(self.stream.epoch),
        })
        st.pause()
        return batch

    def state_dict(self) -> dict:
        return {**super().state_dict(), "waiting": [group_state(w) for w in self.waiting],
                "ready": [group_state(r) for r in self.ready]}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.waiting = [group_from_state(s) for s in state["waiting"]]
        self.ready = [group_from_state(s) for s in state["ready"]]
