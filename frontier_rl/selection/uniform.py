"""Uniform selection: the plain GRPO/DAPO baseline.

Each step takes the next B prompts of a shuffled pass over the training pool (sampling without
replacement within an epoch; a new permutation, seeded by (seed, epoch), each epoch) and rolls
out G responses for each. Every group is trained on, informative or not.

Mechanism counter (`mechanisms()`): pool_passes, the completed passes over the pool (the
stream's epoch, restored with it).
"""

from __future__ import annotations

from frontier_rl.selection.base import Group, StepContext, register
from frontier_rl.selection.common import PromptStream, StreamSelector, Tally


@register("uniform")
class Uniform(StreamSelector):
    def __init__(self, cfg, *, num_prompts: int, seed: int):
        self.stream = PromptStream(num_prompts, seed)
        self.mech = Tally()  # pool_passes, the stream's epoch, is its only counter
        self._last: dict[str, float] = {}

    @classmethod
    def proof_counters(cls, cfg) -> tuple[list[str], list[str]]:
        return ["pool_passes"], []

    def next_indices(self, k: int) -> list[int]:
        """The next k prompts of the shuffled stream (crossing epochs as needed)."""
        return self.stream.next(k).tolist()

    def build_batch(self, ctx: StepContext) -> list[Group]:
        groups = ctx.rollout(self.next_indices(ctx.batch_size), ctx.group_size)
        self._last = {"epoch": float(self.stream.epoch)}
        return groups

    # uniform's state is its place in the stream alone (the layout of its checkpoints)
    def state_dict(self) -> dict:
        return self.stream.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.stream.load_state_dict(state)
