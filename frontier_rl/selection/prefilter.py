"""Pre-filter: a fixed offline selector, the static baseline of HIVE (arXiv 2603.25184, §4.1:
"prompts are filtered before RL training and the subset remains unchanged", "static filtering
based on the initial policy"); PCL (arXiv 2510.01135) describes the same baseline.

[RECON: neither paper gives the criterion.] Before the first update, the initial policy π_0
answers each prompt n times and p̂_0(x) is its success rate; the prompts with
p_low < p̂_0(x) < p_high are kept (default: 0 < p̂_0 < 1, i.e. not all-correct and not
all-failed), and training draws B prompts per step uniformly from that fixed subset (a shuffled
pass per epoch). Reinforce-Ada's data preparation (arXiv 2510.04996, `prompt_selection.py`) is a
concrete instance: n = 16 and 0 < p̂_0 <= 0.125 ("hard") or <= 0.3125 ("easy"), here
p_high = 0.1875 or 0.375 (p̂_0 moves in steps of 1/16).

The offline pass runs inside the first build_batch, through ctx.rollout at the current (initial)
parameters, so its rollouts are charged to the run's budget like any other (logged as
select/offline_rollouts on the first step and included in its select/rollouts).

Symbols -> config fields (`config.selector.prefilter.*`): the offline sample count n -> n; the
band -> p_low, p_high; pool_limit estimates a seeded random subset of that many prompts instead
of the whole pool (0 = all; the rest are never trained on); chunk is the prompts per offline
ctx.rollout call. Success is a correct raw verifier outcome (1).

Mechanism counters (`mechanisms()`, cumulative): offline_rollouts (responses of the offline
pass), prefiltered_out (estimated prompts the band removed), pool_passes (completed passes over
the kept subset).
"""

from __future__ import annotations

import numpy as np

from frontier_rl.selection.base import REWARD_CORRECT, Group, StepContext, register
from frontier_rl.selection.common import (
    Checker,
    PromptStream,
    StepStats,
    StreamSelector,
    classify,
    decode_array,
    encode_array,
    is_int,
    is_num,
    make_rng,
    outcome_matrix,
    read_config,
    rng_state,
    set_rng_state,
)

DEFAULTS = dict(
    n=16,  # n: offline rollouts per prompt under π_0 (p̂_0 = successes / n)
    p_low=0.0,  # keep iff p_low < p̂_0 < p_high
    p_high=1.0,
    pool_limit=0,  # prompts estimated offline (a seeded random subset); 0 = the whole pool
    chunk=256,  # prompts per offline ctx.rollout call
)


def validate(section) -> None:
    c = Checker("prefilter", section, DEFAULTS)
    c("n", lambda x: is_int(x, 1), "an integer >= 1")
    c("p_low", lambda x: is_num(x, 0, 1, hi_open=True), "a number in [0, 1)")
    c("p_high", lambda x: is_num(x, c.cfg.p_low, 1, lo_open=True),
      f"a number in (p_low={c.cfg.p_low}, 1]")
    c("pool_limit", lambda x: is_int(x, 0), "an integer >= 0 (0 = the whole pool)")
    c("chunk", lambda x: is_int(x, 1), "an integer >= 1")


@register("prefilter", defaults=DEFAULTS, validate=validate)
class Prefilter(StreamSelector):
    def __init__(self, cfg, *, num_prompts: int, seed: int):
        self.cfg = read_config(cfg, DEFAULTS)
        validate(vars(self.cfg))
        self.num_prompts = num_prompts
        self.seed = seed
        self.rng = make_rng(seed, 4)
        self.kept: np.ndarray | None = None  # prompt indices of the fixed subset
        self.stream: PromptStream | None = None
        self.offline = {"estimated": 0, "rollouts": 0}
        self._last: dict[str, float] = {}

    @classmethod
    def proof_counters(cls, cfg) -> tuple[list[str], list[str]]:
        # a fixed subset need not be passed whole within the budget
        return ["prefiltered_out"], ["offline_rollouts", "pool_passes"]

    def _offline_pass(self, ctx: StepContext, st: StepStats) -> None:
        c = self.cfg
        pool = np.arange(self.num_prompts)
        if 0 < c.pool_limit < self.num_prompts:
            pool = np.sort(self.rng.choice(self.num_prompts, c.pool_limit, replace=False))
        rates = np.empty(pool.size)
        for s in range(0, pool.size, c.chunk):
            groups = st.rollout(ctx, pool[s:s + c.chunk], c.n)
            rates[s:s + len(groups)] = np.mean(outcome_matrix(groups) == REWARD_CORRECT, axis=1)
        keep = (rates > c.p_low) & (rates < c.p_high)
        self.kept = pool[keep].astype(np.int64)
        self.offline = {"estimated": int(pool.size), "rollouts": int(st.rollouts)}
        if self.kept.size == 0:
            raise RuntimeError(
                f"selector.prefilter kept no prompt: none of {pool.size} has "
                f"p_low={c.p_low} < p̂_0 < p_high={c.p_high} over n={c.n} offline rollouts "
                f"(mean p̂_0 {rates.mean():.3f}); widen the band")
        self.stream = PromptStream(int(self.kept.size), self.seed)

    def build_batch(self, ctx: StepContext) -> list[Group]:
        st = StepStats()
        first = self.kept is None
        if first:
            self._offline_pass(ctx, st)
        st.rounds = 0
        idx = self.kept[self.stream.next(ctx.batch_size)]
        groups = st.rollout(ctx, idx, ctx.group_size)
        st.book(classify(outcome_matrix(groups)))
        self._last = st.metrics(groups)
        self._last.update({
            "kept": float(self.kept.size),
            "kept_frac": self.kept.size / max(self.offline["estimated"], 1),
            "epoch": float(self.stream.epoch),
        })
        if first:
            self._last["offline_rollouts"] = float(self.offline["rollouts"])
        st.pause()
        return groups

    # the stream and its subset exist only after the offline pass; no tally
    def mechanisms(self) -> dict[str, int]:
        kept = 0 if self.kept is None else int(self.kept.size)
        return {"offline_rollouts": self.offline["rollouts"],
                "prefiltered_out": self.offline["estimated"] - kept,
                "pool_passes": 0 if self.stream is None else self.stream.epoch}

    def state_dict(self) -> dict:
        return {"num_prompts": self.num_prompts, "rng": rng_state(self.rng),
                "offline": dict(self.offline),
                "kept": None if self.kept is None else encode_array(self.kept),
                "stream": None if self.stream is None else self.stream.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        if int(state["num_prompts"]) != self.num_prompts:
            raise ValueError(f"prefilter state is for {state['num_prompts']} prompts, the pool "
                             f"has {self.num_prompts}")
        set_rng_state(self.rng, state["rng"])
        self.offline = {k: int(v) for k, v in state["offline"].items()}
        if state["kept"] is None:
            self.kept, self.stream = None, None
            return
        self.kept = decode_array(state["kept"])
        self.stream = PromptStream(int(self.kept.size), self.seed)
        self.stream.load_state_dict(state["stream"])
