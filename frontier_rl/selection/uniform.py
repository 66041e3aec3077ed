"""Uniform selection: the plain GRPO/DAPO baseline.

Each step takes the next B prompts of a shuffled pass over the training pool (sampling without
replacement within an epoch; a new permutation, seeded by (seed, epoch), each epoch) and rolls
out G responses for each. Every group is trained on, informative or not.
"""

from __future__ import annotations

import numpy as np

from frontier_rl.selection.base import Group, StepContext, register


@register("uniform")
class Uniform:
    def __init__(self, cfg, *, num_prompts: int, seed: int):
        if num_prompts < 1:
            raise ValueError("the training pool is empty")
        self.num_prompts = num_prompts
        self.seed = seed
        self.epoch = 0
        self.cursor = 0  # position in the current epoch's permutation
        self._perm = self._permutation(0)
        self._last: dict[str, float] = {}

    def _permutation(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.num_prompts)

    def next_indices(self, k: int) -> list[int]:
        """The next k prompts of the shuffled stream (crossing epochs as needed)."""
        out: list[int] = []
        while len(out) < k:
            take = min(k - len(out), self.num_prompts - self.cursor)
            out.extend(int(i) for i in self._perm[self.cursor:self.cursor + take])
            self.cursor += take
            if self.cursor == self.num_prompts:
                self.epoch += 1
                self.cursor = 0
                self._perm = self._permutation(self.epoch)
        return out

    def build_batch(self, ctx: StepContext) -> list[Group]:
        groups = ctx.rollout(self.next_indices(ctx.batch_size), ctx.group_size)
        self._last = {"epoch": float(self.epoch)}
        return groups

    def after_update(self, ctx: StepContext, groups: list[Group]) -> None:
        pass

    def metrics(self) -> dict[str, float]:
        return dict(self._last)

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "cursor": self.cursor}

    def load_state_dict(self, state: dict) -> None:
        self.epoch = int(state["epoch"])
        self.cursor = int(state["cursor"])
        self._perm = self._permutation(self.epoch)
