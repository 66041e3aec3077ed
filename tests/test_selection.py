"""Selector registry and the uniform selector, driven by a scripted StepContext."""

import numpy as np
import pytest

from frontier_rl import selection
from frontier_rl.selection.base import Group


class ScriptedContext:
    """Answers rollouts with outcomes the test controls (not a model)."""

    def __init__(self, num_prompts, batch_size=4, group_size=2, outcome=1):
        self.prompts = list(range(num_prompts))
        self.batch_size = batch_size
        self.group_size = group_size
        self.outcome = outcome
        self.rolled = []
        self.step = 0

    def rollout(self, indices, n):
        self.rolled.append(list(indices))
        out = np.full(n, self.outcome, np.int8)
        return [Group(index=i, prompt_id=str(i), outcomes=out, rewards=out.astype(np.float32),
                      lengths=np.ones(n, np.int32), mean_entropy=np.zeros(n, np.float32))
                for i in indices]


def test_registry():
    assert "uniform" in selection.names()
    with pytest.raises(ValueError, match="selector.name='nope'"):
        selection.make("nope", None, 10, 0)


def test_uniform_is_an_epoch_permutation_and_resumes():
    ctx = ScriptedContext(10, batch_size=4)
    sel = selection.make("uniform", None, 10, seed=0)
    first = [i for _ in range(5) for i in (g.index for g in sel.build_batch(ctx))]
    assert sorted(first[:10]) == list(range(10))  # an epoch visits every prompt once
    assert sorted(first[10:20]) == list(range(10))
    assert first[:10] != first[10:20]  # reshuffled per epoch
    state = sel.state_dict()
    nxt = [g.index for g in sel.build_batch(ctx)]
    other = selection.make("uniform", None, 10, seed=0)
    other.load_state_dict(state)
    assert [g.index for g in other.build_batch(ctx)] == nxt


def test_group_zero_variance_uses_raw_outcomes():
    g = Group(index=0, prompt_id="0", outcomes=np.array([-1, -1], np.int8),
              rewards=np.array([-1.5, -1.0], np.float32), lengths=np.ones(2, np.int32),
              mean_entropy=np.zeros(2, np.float32))
    assert g.zero_variance and g.all_invalid and not g.all_wrong
