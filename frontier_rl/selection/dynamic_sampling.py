"""DS: DAPO dynamic sampling (Yu et al., arXiv 2503.14476; verl `recipe/dapo`), the full-cost
online baseline of GRESO and HIVE.

Each step rolls out generation batches of `gen_batch_size` prompts from the shuffled,
epoch-cycling stream, G responses each, keeps the groups whose raw outcomes are not all equal,
and refills until B informative groups have accumulated; the batch is the first B of them in
arrival order (whole groups). Nothing is kept across steps beyond the stream position.

Symbols -> config fields (`config.selector.ds.*`): verl's data.gen_batch_size -> gen_batch_size;
algorithm.filter_groups.max_num_gen_batches -> max_num_gen_batches. train_batch_size and n are
the trainer's rl.batch_size (B) and rl.group_size (G).

Deviations:
- The filter metric is always the raw verifier outcome (verl's filter_groups.metric="acc"); the
  shaped reward (e.g. DAPO's overlong penalty) never decides whether a group is informative.
- gen_batch_size=0 means ⌈1.5 B⌉, the 384-for-256 setting GRESO and HIVE run DS with; verl's
  docs example uses 3 B (1536 for 512).
- When max_num_gen_batches is reached without B informative groups, verl raises a bare error;
  here a RuntimeError names the field and the counts.
- Every generated response is charged through ctx.rollout (verl counts them too).

Mechanism counters (`mechanisms()`, cumulative): pool_passes (completed passes of the stream),
topup_rounds (generation batches of a step beyond the first), groups_discarded (zero-variance
groups dropped by the filter).
"""

from __future__ import annotations

import math

from frontier_rl.selection.base import Group, StepContext, register
from frontier_rl.selection.common import (
    MIXED,
    Checker,
    PromptStream,
    StepStats,
    StreamSelector,
    Tally,
    classify,
    is_int,
    outcome_matrix,
    read_config,
)

DEFAULTS = dict(
    gen_batch_size=0,  # prompts per generation batch (verl data.gen_batch_size); 0 = ⌈1.5 B⌉
    max_num_gen_batches=10,  # generation batches per step before giving up; <= 0 = unlimited
)


def validate(section) -> None:
    c = Checker("ds", section, DEFAULTS)
    c("gen_batch_size", lambda x: is_int(x, 0), "an integer >= 0 (0 = ⌈1.5 B⌉)")
    c("max_num_gen_batches", is_int, "an integer (<= 0 = unlimited)")


@register("ds", defaults=DEFAULTS, validate=validate)
class DynamicSampling(StreamSelector):
    def __init__(self, cfg, *, num_prompts: int, seed: int):
        self.cfg = read_config(cfg, DEFAULTS)
        validate(vars(self.cfg))
        self.stream = PromptStream(num_prompts, seed)
        self.mech = Tally("topup_rounds", "groups_discarded")
        self._last: dict[str, float] = {}

    @classmethod
    def proof_counters(cls, cfg) -> tuple[list[str], list[str]]:
        return ["pool_passes", "topup_rounds", "groups_discarded"], []

    def build_batch(self, ctx: StepContext) -> list[Group]:
        c = self.cfg
        st = StepStats()
        big_b, g = ctx.batch_size, ctx.group_size
        gen_bs = c.gen_batch_size or math.ceil(1.5 * big_b)
        kept: list[Group] = []
        num_gen_batches = 0
        while True:
            num_gen_batches += 1
            groups = st.rollout(ctx, self.stream.next(gen_bs), g)
            types_ = classify(outcome_matrix(groups))
            st.book(types_)
            # verl keeps a group iff std(metric) > 0 or it holds a single response
            n_kept = len(kept)
            kept.extend(grp for grp, t in zip(groups, types_, strict=True)
                        if t == MIXED or grp.size == 1)
            self.mech.add("groups_discarded", len(groups) - (len(kept) - n_kept))
            if len(kept) >= big_b:
                break
            if 0 < c.max_num_gen_batches <= num_gen_batches:
                raise RuntimeError(
                    f"selector.ds.max_num_gen_batches={c.max_num_gen_batches} reached at step "
                    f"{ctx.step}: {len(kept)} of {big_b} informative groups after "
                    f"{num_gen_batches} generation batches of {gen_bs} prompts "
                    f"({st.rollouts} rollouts); raise it (<= 0 = unlimited) or make the task "
                    "less uniformly easy/hard for the policy")
        batch = kept[:big_b]
        self.mech.add("topup_rounds", num_gen_batches - 1)
        self._last = st.metrics(batch)
        self._last.update({"gen_batches": float(num_gen_batches),
                           "epoch": float(self.stream.epoch)})
        st.pause()
        return batch
