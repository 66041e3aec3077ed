"""One budget rule for the trainer and the synthetic learner (run/budget.py): the same budget and
per-step cost stop both at the same step."""

import copy
import os

import pytest

from frontier_rl import config_lib, train
from frontier_rl.run import budget, metrics
from frontier_rl.sim import run as sim_run


def test_the_rule_stops_at_the_boundary_nearest_the_budget():
    assert not budget.reached(100, 0, 64)  # no budget
    assert budget.reached(128, 128, 64)
    assert budget.reached(128, 150, 64)  # 22 left < 32: the next step would overshoot more
    assert not budget.reached(128, 170, 64)  # 42 left >= 32: one more step is nearer


def test_train_and_the_synthetic_learner_stop_at_the_same_step(tmp_path):
    """Uniform GRPO, B = 8 prompts x G = 8 a step, a budget of 150 rollouts: both stop after
    step 2 (128 spent; a third step would end 42 over, stopping now 22 short)."""
    c = config_lib.shrink_for_smoke(config_lib.default_config())
    c.log.progress = c.log.tensorboard = False
    c.eval.every = 0
    c.rl.num_steps, c.rl.rollout_budget = 50, 150
    assert c.rl.batch_size * c.rl.group_size == 64
    train.run(config_lib.validate(c), str(tmp_path))
    last = metrics.read(os.path.join(tmp_path, "metrics.jsonl"))[-1]

    s = sim_run.base_config()
    s.selector.name = "uniform"
    s.rl.batch_size, s.rl.group_size = 8, 8
    s.sim.num_prompts, s.sim.steps, s.sim.rollout_budget = 1000, 50, 150
    res = sim_run.run_sim(s)
    assert last["step"] == res["steps_run"] == 2
    assert last["rollout/total"] == res["counters"]["rollouts"] == 128


@pytest.mark.slow
def test_runs_record_their_compiles(tmp_path):
    """perf/compile_s and perf/compiles in every step record: what this run compiled (a run's
    jitted functions are its own, so a second run in the process compiles again, and records
    only that)."""
    def run(d):
        c = config_lib.shrink_for_smoke(config_lib.default_config())
        c.log.progress = c.log.tensorboard = False
        c.eval.every, c.rl.num_steps = 0, 2
        train.run(config_lib.validate(c), str(tmp_path / d))
        return metrics.read(os.path.join(tmp_path, d, "metrics.jsonl"))[-1]

    from frontier_rl.fit import compile_cache

    before = compile_cache.compile_log().metrics()["perf/compiles"]
    first, second = run("a"), run("b")
    assert first["perf/compiles"] > 0 and first["perf/compile_s"] > 0
    kinds = {k for k in first if k.startswith("perf/compiles/")}
    assert sum(first[k] for k in kinds) == first["perf/compiles"]
    # each run records its own compiles, not the process's running total
    total = compile_cache.compile_log().metrics()["perf/compiles"] - before
    assert 0 < second["perf/compiles"] <= first["perf/compiles"]
    assert total >= first["perf/compiles"] + second["perf/compiles"]


# ----------------------------------------------------------------------------- units


def test_a_meter_reads_its_unit_and_its_evaluation_period():
    counters = {"rollouts": 640, "response_tokens": 9_000}
    c = config_lib.default_config()
    assert budget.Meter.of(c) == budget.Meter("rollouts", 0.0, 0.0)  # no budget
    c.rl.token_budget, c.eval.every_budget = 20_000, 5_000.0
    m = budget.Meter.of(c)
    assert (m.unit, m.limit, m.eval_every) == ("tokens", 20_000.0, 5_000.0)
    assert m.read(counters, pflops=3.0) == 9_000
    assert m.eval_due(4_999, 5_000) and not m.eval_due(5_000, 9_999)
    assert m.reached(19_000, 2_400) and not m.reached(17_000, 2_400)
    assert m.describe() == "20,000 tokens"
    c.rl.token_budget, c.rl.pflops_budget = 0, 0.5
    p = budget.Meter.of(c)
    assert (p.unit, p.read(counters, pflops=0.25), p.describe()) == ("pflops", 0.25,
                                                                     "0.5 PFLOPs")
    c.rl.pflops_budget, c.rl.rollout_budget, c.eval.every_budget = 0.0, 600, 0.0
    c.eval.every_rollouts = 200  # a rollout budget keeps its own evaluation period
    assert budget.Meter.of(c) == budget.Meter("rollouts", 600.0, 200.0)


def test_early_evaluations_fall_at_halvings_of_the_budget():
    c = config_lib.default_config()
    c.rl.rollout_budget, c.eval.every_rollouts, c.eval.early = 6400, 1600, 3
    m = budget.Meter.of(c)
    assert m.early == 3
    due = [x for x in range(0, 6400, 100) if m.eval_due(x, x + 100)]
    # the even points 1,600 .. 6,400 and the early ones 3,200, 1,600 (shared) and 800
    assert due == [700, 1500, 3100, 4700, 6300]
    c.eval.early = 17
    with pytest.raises(config_lib.ConfigError, match=r"eval.early=17 is not allowed"):
        config_lib.validate(c)


def test_extra_evaluations_change_no_update(tmp_path):
    """A run evaluated at the early points trains exactly as one that is not: the evaluation
    samples with its own seed and leaves the training state alone."""
    def run(d, early):
        c = config_lib.shrink_for_smoke(config_lib.default_config())
        c.log.progress = c.log.tensorboard = False
        c.eval.every, c.rl.num_steps, c.rl.rollout_budget = 0, 50, 256
        c.eval.early = early
        train.run(config_lib.validate(c), str(tmp_path / d))
        return metrics.read(os.path.join(tmp_path, d, "metrics.jsonl"))

    plain, early = run("plain", 0), run("early", 2)
    evals = [r["step"] for r in early if any(k.startswith("eval/avg@") for k in r)]
    assert len(evals) > len([r for r in plain if any(k.startswith("eval/avg@") for k in r)])
    keys = [k for k in plain[-1] if k.startswith(("train/", "rollout/")) and "time" not in k]
    assert keys
    for a, b in zip(plain, early, strict=True):
        assert {k: a.get(k) for k in keys} == {k: b.get(k) for k in keys}, a["step"]
    final = next(k for k in plain[-1] if k.startswith("eval/avg@") and k.endswith("/all"))
    assert plain[-1][final] == early[-1][final]


def test_a_run_has_one_budget():
    c = config_lib.shrink_for_smoke(config_lib.default_config())
    c.rl.rollout_budget, c.rl.pflops_budget = 100, 1e-3
    with pytest.raises(config_lib.ConfigError,
                       match=r"rl.pflops_budget=0.001 is not allowed with "
                             r"rl.rollout_budget=100: a run has one budget"):
        config_lib.validate(c)
    c.rl.rollout_budget, c.rl.pflops_budget, c.rl.token_budget = 0, 0.0, -1
    with pytest.raises(config_lib.ConfigError, match=r"rl.token_budget=-1 is not allowed"):
        config_lib.validate(c)


@pytest.mark.parametrize("unit", [pytest.param("tokens", marks=pytest.mark.slow), "pflops"])
def test_train_stops_at_the_step_boundary_nearest_a_token_or_pflops_budget(tmp_path, unit):
    """The trainer ends at the boundary nearest a budget in generated tokens or measured PFLOPs
    by the same rule as rollouts, evaluating each time the spend crosses eval.every_budget."""
    c = config_lib.shrink_for_smoke(config_lib.default_config())
    c.log.progress = c.log.tensorboard = False
    c.eval.every, c.rl.num_steps = 0, 40
    key = {"tokens": "rollout/tokens", "pflops": "perf/pflops"}[unit]
    # one step's spend first, to set a budget of about three and a half steps
    probe = config_lib.validate(copy.deepcopy(c))
    probe.rl.num_steps = 1
    train.run(probe, str(tmp_path / "probe"))
    per_step = metrics.read(os.path.join(tmp_path, "probe", "metrics.jsonl"))[-1][key]
    amount = 3.5 * per_step
    if unit == "tokens":
        c.rl.token_budget = int(amount)
    else:
        c.rl.pflops_budget = float(amount)
    c.eval.every_budget = amount / 2
    train.run(config_lib.validate(c), str(tmp_path / "run"))
    recs = metrics.read(os.path.join(tmp_path, "run", "metrics.jsonl"))
    steps = [r for r in recs if r["step"] > 0]
    spent = [r[key] for r in steps]
    last_step = spent[-1] - (spent[-2] if len(spent) > 1 else 0.0)
    assert budget.reached(spent[-1], amount, last_step)  # it stopped by the rule ...
    before = spent[-2]  # ... and not a step earlier
    assert not budget.reached(before, amount, before - (spent[-3] if len(spent) > 2 else 0.0))
    assert 2 <= len(steps) < 40
    evals = [r["step"] for r in steps if "eval/avg@8/all" in r or any(
        k.startswith("eval/avg@") for k in r)]
    assert evals and evals[-1] == steps[-1]["step"]  # the last step is evaluated
    crossed = [r["step"] for r, a, b in zip(steps, [0.0, *spent[:-1]], spent, strict=True)
               if b // (amount / 2) > a // (amount / 2)]
    assert set(crossed) <= set(evals)
