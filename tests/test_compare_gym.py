"""The matched-budget comparison on a reasoning-gym dataset (configs/compare_gym.py:smoke)."""

import importlib.util
import json
import os

import pytest

from frontier_rl import config_lib
from frontier_rl.experiment import compare

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config(arg):
    spec = importlib.util.spec_from_file_location("compare_gym",
                                                  os.path.join(ROOT, "configs/compare_gym.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.get_config(arg)


@pytest.mark.slow  # CI runs it; the gym task and the comparison are covered by default elsewhere
def test_smoke_comparison_runs_on_gym_buckets(tmp_path):
    from frontier_rl import train

    config = _config("smoke")
    specs = compare.plan(config, str(tmp_path))
    for spec in specs:
        train.run(spec.config, spec.dir)
    runs = compare.collect(config, specs)["runs"]
    assert {r["method"] for r in runs} == {"uniform", "hive"}
    buckets = set(runs[0]["curve"]["buckets"]) - {"all"}
    # difficulty buckets of one task: no bench_mean (that is for suites of benchmarks)
    assert {"num_terms=3", "num_terms=4"} <= buckets <= {f"num_terms={n}" for n in range(3, 7)}
    for r in runs:
        assert r["rollouts"] > 0
    with open(tmp_path / "warmstart" / "s0" / "frontier_rl_warmstart_result.json") as f:
        assert json.load(f)["buckets"] == ["num_terms=3", "num_terms=4"]
    # rollouts are scored by the gym verifier: invalid (-1) is possible, the run still trains
    recs = [json.loads(x) for x in open(tmp_path / "runs" / "uniform-s0" / "metrics.jsonl")]
    assert any("rollout/invalid" in r for r in recs)


def test_unknown_dataset_arg_and_field_errors():
    with pytest.raises(ValueError, match="unknown arg 'nope'"):
        _config("nope")
    c = _config("")
    assert c.task.name == "gym:basic_arithmetic" and c.compare.seeds == "0,1,2"
    c.task.bucket_key = "num_termz"
    config_lib.validate(c)  # a metadata key is checked when the task is built
    with pytest.raises(config_lib.ConfigError, match="max_digits=4"):
        with c.task.unlocked():
            c.task.max_digits = 4
        config_lib.validate(c)


def test_gym_name_on_an_arith_config():
    spec = importlib.util.spec_from_file_location("arith_grpo",
                                                  os.path.join(ROOT, "configs/arith_grpo.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    c = mod.get_config()
    c.task.name = "gym:leg_counting"
    # the answer tags alone are 17 characters, each a token of the char-level policy
    with pytest.raises(config_lib.ConfigError, match="rollout.max_new_tokens=8"):
        config_lib.validate(c)
    c.rollout.max_new_tokens = 32
    config_lib.validate(c)  # the arith fields at their defaults travel along harmlessly
    c.task.eval_per_bucket = 64
    with pytest.raises(config_lib.ConfigError, match="task.eval_per_bucket=64"):
        config_lib.validate(c)
