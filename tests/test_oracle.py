"""The controls measured on their own training rollouts (selection/oracle.py, measure="rollouts"):
the positive control fills every batch, so it takes the reference's updates at matched
rollouts; the negative control trains only on groups of zero reward variance (an exact zero
policy gradient); only the trained groups are charged."""

import numpy as np
import pytest

from frontier_rl import selection
from frontier_rl.selection import oracle
from frontier_rl.selection.scripted import ScriptedContext


def _pool(n=600, informative=0.1, seed=0):
    """Pass rates: `informative` of the pool spread in (0.2, 0.8), the rest solved or unsolved."""
    rng = np.random.default_rng(seed)
    p = np.where(rng.random(n) < 0.5, 1.0, 0.0)
    k = int(informative * n)
    p[:k] = rng.uniform(0.2, 0.8, k)
    return rng.permutation(p)


def _run(p, cfg, steps=5, batch_size=32, group_size=8):
    ctx = ScriptedContext(p, batch_size=batch_size, group_size=group_size, seed=1)
    sel = selection.make("oracle", {"oracle": cfg}, num_prompts=ctx.num_base, seed=3)
    batches = []
    for step in range(steps):
        ctx.begin_step(step)
        batches.append(sel.build_batch(ctx))
    return batches, ctx, sel


def test_positive_control_fills_every_batch_and_is_charged_like_uniform():
    p = _pool(informative=0.1)
    batches, ctx, sel = _run(p, {"measure": "rollouts", "fill": True, "candidates": 4})
    assert [len(b) for b in batches] == [32] * 5
    # only the trained groups are charged: at matched rollouts its steps are uniform's
    assert ctx.counters["rollouts"] == 5 * 32 * 8
    assert ctx.counters["control_samples"] == 5 * 4 * 32 * 8
    # the candidates' informative groups are all kept (fewer than B exist at this share)
    informative = [np.ptp(g.rewards) > 0 for b in batches for g in b]
    assert 0 < np.mean(informative) < 1
    assert sel.metrics()["control_train_nonzero_variance"] > 0


def test_positive_control_prefers_groups_nearest_one_half_by_their_own_outcomes():
    p = _pool(informative=0.9)
    batches, _, _ = _run(p, {"measure": "rollouts", "fill": True, "candidates": 3})
    for b in batches:
        rates = oracle.group_rates(b)
        assert len(b) == 32 and np.all((rates > 0) & (rates < 1))
    # without fill a batch short of informative candidates trains on fewer groups
    short, _, _ = _run(_pool(informative=0.05), {"measure": "rollouts", "candidates": 2})
    assert min(len(b) for b in short) < 32


@pytest.mark.parametrize("informative", [0.1, 0.6])
def test_negative_control_trains_only_on_zero_variance_groups(informative):
    batches, ctx, sel = _run(_pool(informative=informative),
                             {"mode": "extremes", "measure": "rollouts", "candidates": 2,
                              "max_rounds": 8})
    groups = [g for b in batches for g in b]
    assert groups and all(np.ptp(g.rewards) == 0 for g in groups)
    assert all(len(b) == 32 for b in batches)
    assert sel.metrics()["control_train_nonzero_variance"] == 0.0
    assert ctx.counters["rollouts"] == len(groups) * 8


def test_measured_apart_from_its_rollouts_the_negative_control_leaks_and_says_so():
    """Measured apart from the training rollouts (here the exact pass rate with a tolerance, as
    the synthetic learner's presets use), a prompt at p = 0.1 qualifies as an extreme yet rolls
    out a mixed group afresh 57% of the time at G = 8: the leak the "rollouts" measure removes,
    visible in the step's metrics."""
    p = np.where(np.random.default_rng(0).random(600) < 0.5, 0.1, 0.9)
    batches, _, sel = _run(p, {"mode": "extremes", "measure": "samples", "extreme_pq": 0.1})
    leak = np.mean([np.ptp(g.rewards) > 0 for b in batches for g in b])
    assert 0.4 < leak < 0.75
    assert sel.metrics()["control_train_nonzero_variance"] > 0


def test_group_rates_read_zero_variance_as_zero_or_one():
    from frontier_rl.selection.base import Group

    def grp(outcomes):
        o = np.asarray(outcomes, np.int8)
        return Group(index=0, prompt_id="x", outcomes=o, rewards=o.astype(np.float32),
                     lengths=np.ones(o.size, np.int32), mean_entropy=np.zeros(o.size, np.float32))

    rates = oracle.group_rates([grp([1] * 8), grp([0] * 8), grp([-1] * 8), grp([0, -1] * 4),
                                grp([1, 0] * 4)])
    assert rates.tolist()[:3] == [1.0, 0.0, 0.0]
    assert 0 < rates[3] < 1 and rates[4] == 0.5  # wrong vs invalid is reward variance


def test_rollouts_measure_needs_a_context_that_can_roll_out_uncharged():
    sel = selection.make("oracle", {"oracle": {"measure": "rollouts"}}, num_prompts=600, seed=0)

    class NoDoor:
        batch_size, group_size, step = 8, 8, 0

    with pytest.raises(RuntimeError, match="selector.oracle.measure='rollouts'"):
        sel.build_batch(NoDoor())


def test_the_synthetic_learner_rolls_out_for_controls_uncharged():
    """The same control code in the synthetic learner: the negative control's training groups
    have zero reward variance and only they are charged; the positive control fills B."""
    from frontier_rl.sim.learner import SimContext

    for cfg, check in (
            ({"mode": "extremes", "measure": "rollouts", "max_rounds": 8},
             lambda b: all(np.ptp(g.rewards) == 0 for g in b)),
            ({"measure": "rollouts", "fill": True, "candidates": 4},
             lambda b: np.mean([np.ptp(g.rewards) > 0 for g in b]) > 0.5)):
        ctx = SimContext(num_prompts=2000, batch_size=32, group_size=8, seed=0)
        sel = selection.make("oracle", {"oracle": cfg}, num_prompts=ctx.size, seed=0)
        for step in range(3):
            ctx.begin_step(step)
            batch = sel.build_batch(ctx)
            assert len(batch) == 32 and check(batch)
            ctx.update(batch)
        assert ctx.counters["rollouts"] == 3 * 32 * 8
        assert ctx.counters["control_samples"] >= ctx.counters["rollouts"]
