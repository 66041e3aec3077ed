"""Every comparison config exercises every method's mechanism within its budget.

Each (method, first seed) run of `configs/compare_arith.py` '', `claims` and `full` is played on
the synthetic learner (frontier_rl/sim: the same selector code behind a StepContext, with the
config's pool size, batch, group size, budget and selector sections), and each counter the
method requires (compare.required_mechanisms) must be non-zero: a HIVE whose Stage 1 never
rejects, a GRESO that never skips or a HeaPA that never leaves its cold queue fails here. The
embedded comparison itself reports the same counters from the real runs (report.md,
results.json["mechanisms"]).
"""

import importlib.util
import os

import pytest

from frontier_rl import compare
from frontier_rl.sim import run as sim_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(arg):
    spec = importlib.util.spec_from_file_location("compare_arith",
                                                  os.path.join(ROOT, "configs/compare_arith.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.get_config(arg)


def sim_config(cfg):
    """The run's config with a `sim` section: its pool, budget and step cap."""
    c = compare.copy.deepcopy(cfg)
    c.sim = sim_run.default_sim_config()
    c.sim.num_prompts = cfg.task.train_size
    c.sim.rollout_budget = cfg.rl.rollout_budget
    c.sim.steps = cfg.rl.num_steps
    c.sim.eval_every = cfg.rl.num_steps
    return sim_run.validate_sim(c)


@pytest.mark.parametrize("arg", ["", "claims", "full"])
def test_every_mechanism_runs_within_the_budget(arg, tmp_path):
    cfg = _load(arg)
    first_seed = int(str(cfg.compare.seeds).split(",")[0])
    missing, ran = {}, {}
    for spec in compare.plan(cfg, str(tmp_path)):
        if spec.seed != first_seed:
            continue
        res = sim_run.run_sim(sim_config(spec.config))
        assert res["final"]["rollouts"] >= 0.9 * cfg.compare.rollout_budget, spec.method
        need = compare.required_mechanisms(spec.config)
        assert need, f"{spec.method}: no mechanism counters are required"
        ran[spec.method] = res["mechanisms"]
        zero = [m for m in need if not res["mechanisms"].get(m)]
        if zero:
            missing[spec.method] = zero
    assert not missing, f"mechanisms that never ran: {missing} (counters: {ran})"
