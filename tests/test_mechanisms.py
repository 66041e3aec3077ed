"""Every comparison config exercises every method's mechanism within its budget, at every seed.

Each (method, seed) run of `configs/compare_arith.py` '', `claims` and `full` is played on the
synthetic learner (frontier_rl/sim: the same selector code behind a StepContext, with the run's
pool size, batch, group size, budget or step count and selector sections), and each proof
counter of the method (selection/mechanisms.py `required_mechanisms`: counters that would stay
at zero were the mechanism idle) must be non-zero: a HIVE whose Stage 1 never rejects, a GRESO
that never skips, a HeaPA whose boundary rule never passes a record over or whose children
never meet a full pool fails here. Counters non-zero by construction (`information_mechanisms`)
are not checked; the two lists must cover exactly what the selector reports. The embedded
comparison itself reports the same counters from the real runs (report.md,
results.json["mechanisms"]).
"""

import importlib.util
import os

import pytest

from frontier_rl.experiment import compare
from frontier_rl.selection.base import is_control
from frontier_rl.selection.mechanisms import information_mechanisms, required_mechanisms
from frontier_rl.sim import run as sim_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PLAYED: dict[str, dict] = {}  # config fingerprint -> sim result (the args share runs)


def _load(arg):
    spec = importlib.util.spec_from_file_location("compare_arith",
                                                  os.path.join(ROOT, "configs/compare_arith.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.get_config(arg)


def sim_config(cfg):
    """The run's config with a `sim` section: its pool, budget and step cap as the plan set
    them (a rollout budget, or a step count with rl.rollout_budget = 0)."""
    c = compare.copy.deepcopy(cfg)
    c.sim = sim_run.default_sim_config()
    c.sim.num_prompts = cfg.task.train_size
    c.sim.rollout_budget = cfg.rl.rollout_budget
    c.sim.steps = cfg.rl.num_steps
    c.sim.eval_every = cfg.rl.num_steps
    return sim_run.validate_sim(c)


def play(spec):
    key = compare.fingerprint(spec.config)
    if key not in _PLAYED:
        _PLAYED[key] = sim_run.run_sim(sim_config(spec.config))
    return _PLAYED[key]


@pytest.mark.parametrize("arg", ["", pytest.param("claims", marks=pytest.mark.slow),
                                 pytest.param("full", marks=pytest.mark.slow)])
def test_every_mechanism_runs_at_every_seed(arg):
    cfg = _load(arg)
    specs = compare.plan(cfg, "/nonexistent")  # nothing is written; one workdir for all args
    seeds = {int(s) for s in str(cfg.compare.seeds).split(",")}
    assert {s.seed for s in specs} == seeds
    missing, ran = {}, {}
    for spec in specs:
        res = play(spec)
        rl = spec.config.rl
        if rl.rollout_budget:
            assert res["final"]["rollouts"] >= 0.9 * rl.rollout_budget, spec.name
        else:
            assert res["steps_run"] == rl.num_steps, spec.name
        if is_control(spec.config.selector.name):
            continue  # a control arm: no method's mechanism to prove (selection/oracle.py)
        need = required_mechanisms(spec.config)
        info = information_mechanisms(spec.config)
        assert need, f"{spec.name}: no proof counters"
        assert not set(need) & set(info), spec.name
        assert set(need) | set(info) == set(res["mechanisms"]), (spec.name, res["mechanisms"])
        ran[spec.name] = {m: res["mechanisms"][m] for m in need}
        zero = [m for m in need if not res["mechanisms"][m]]
        if zero:
            missing[spec.name] = zero
    assert not missing, f"proof counters left at zero: {missing} (proof counters: {ran})"
