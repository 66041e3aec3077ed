"""One budget rule for the trainer and the synthetic learner (budget.py): the same budget and
per-step cost stop both at the same step."""

import os

from frontier_rl import budget, config_lib, metrics, train
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

    from frontier_rl import compile_cache

    before = compile_cache.compile_log().metrics()["perf/compiles"]
    first, second = run("a"), run("b")
    assert first["perf/compiles"] > 0 and first["perf/compile_s"] > 0
    kinds = {k for k in first if k.startswith("perf/compiles/")}
    assert sum(first[k] for k in kinds) == first["perf/compiles"]
    # each run records its own compiles, not the process's running total
    total = compile_cache.compile_log().metrics()["perf/compiles"] - before
    assert 0 < second["perf/compiles"] <= first["perf/compiles"]
    assert total >= first["perf/compiles"] + second["perf/compiles"]
