"""`frontier-rl sim calibrate` (sim/calibrate.py) on a comparison the learner itself measured.

The fixture's "measured" curves come from the synthetic learner under the adam rule at known
parameters (TRUTH), written in the shape of a `frontier-rl compare` results.json; the fit must
find those parameters from uniform and the positive control alone and predict the held-out
negative control inside its measured interval.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from frontier_rl.sim import calibrate, run

TRUTH = {"update": "adam", "adam_lr": 0.02, "adam_noise": 1.0}
PROMPTS, BATCH, BUDGET = 400, 16, 16 * 8 * 30
METHODS = {"uniform": {"selector": {"name": "uniform"}},
           "oracle": {"selector": {"name": "oracle"}},
           "oracle_negative": {"selector": {"name": "oracle",
                                            "oracle": {"mode": "extremes", "extreme_pq": 0.01}}}}
QUIET = {"say": lambda s: None}
# a short search: the rate within a factor 2 of the truth, sigma on three values
SEARCH = {"grid": {"adam_noise": (0.5, 1.0, 2.0)}, "bracket": (0.01, 0.04), "refine": False}


def _measure(workdir, arms=tuple(METHODS), seeds=(100, 101, 102), evals=3):
    runs = []
    for arm in arms:
        sel = METHODS[arm]["selector"]
        for seed in seeds:
            c = run.base_config()
            c.rl.batch_size, c.sim.num_prompts, c.seed = BATCH, PROMPTS, seed
            c.sim.rollout_budget, c.sim.steps, c.sim.eval_every = BUDGET, 1000, 1
            c.sim.eval_per_band = 256
            for k, v in TRUTH.items():
                c.sim[k] = v
            c.selector.name = sel["name"]
            for k, v in sel.get(sel["name"], {}).items():
                c.selector[sel["name"]][k] = v
            cv = run.run_sim(c)["curve"]
            at = np.linspace(0, len(cv["step"]) - 1, evals + 1).round().astype(int)
            curve = {"step": [cv["step"][i] for i in at],
                     "rollouts": [float(cv["rollouts"][i]) for i in at],
                     "metric": [100 * cv["acc"]["4op"][i] for i in at],
                     "buckets": {**{b: [100 * v[i] for i in at] for b, v in cv["acc"].items()},
                                 "all": [100 * cv["acc_mean"][i] for i in at]}}
            runs.append({"method": arm, "seed": seed, "selector": sel["name"], "curve": curve,
                         "final": curve["metric"][-1]})
    results = {"metric": "eval/avg@4/4op", "target_method": "uniform",
               "budget_kind": "rollouts", "budget": BUDGET, "steps_budget": 0,
               "batch_size": BATCH, "group_size": 8, "methods": list(arms),
               "seeds": list(seeds), "runs": runs}
    with open(os.path.join(workdir, "results.json"), "w") as f:
        json.dump(results, f)
    with open(os.path.join(workdir, "compare_config.json"), "w") as f:
        json.dump({"task": {"train_size": PROMPTS}, "compare": {"methods": METHODS}}, f)
    return results


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    d = tmp_path_factory.mktemp("compare")
    _measure(str(d))
    return str(d)


@pytest.fixture(scope="module")
def adam_fit(measured):
    return calibrate.calibrate(measured, ["uniform", "oracle"], ["oracle_negative"], "adam", 3,
                               **SEARCH, **QUIET)


def test_testbed_matches_the_measured_start(measured):
    bed = calibrate.testbed(measured, ["uniform"])
    assert bed["buckets"] == ["2op", "3op", "4op", "5op"] and bed["prompts"] == PROMPTS
    ctx = run.make_context(bed["templates"]["uniform"])
    start = ctx.evaluate()
    for b in bed["buckets"]:  # the learner starts where the runs did (a point or so)
        assert 100 * start[b] == pytest.approx(bed["start"][b], abs=1.5)
    assert bed["templates"]["uniform"].sim.rollout_budget == BUDGET


def test_fit_recovers_the_truth_and_predicts_the_held_out_arm(adam_fit):
    p = adam_fit["params"]
    assert p["adam_noise"] == TRUTH["adam_noise"]
    assert p["adam_lr"] == pytest.approx(TRUTH["adam_lr"], rel=0.15)
    assert adam_fit["rmse_points"] < 0.5
    held = adam_fit["predictions"]["oracle_negative"]
    assert held["role"] == "held out" and held["contains"] is True
    assert held["measured"]["n"] == 3 and held["predicted"]["n"] == 3
    assert "model output" in adam_fit["label"]


def test_sgd_rule_overstates_the_positive_control(measured, adam_fit):
    sgd = calibrate.calibrate(measured, ["uniform", "oracle"], ["oracle_negative"], "sgd", 3,
                              bracket=(1e-3, 1.0), **QUIET)
    adam = adam_fit["predictions"]["oracle"]
    over = sgd["predictions"]["oracle"]
    # fitted to the same curves, sgd gives the oracle a larger step and so a larger headroom
    assert over["predicted"]["mean"] > over["measured"]["hi"]
    assert over["predicted"]["mean"] > adam["predicted"]["mean"] + 2.0
    assert adam["contains"] is True


def test_main_writes_both_rules_labelled(measured, monkeypatch, capsys):
    monkeypatch.setattr(calibrate, "GOLDEN_TOL", 1.0)
    monkeypatch.setattr(calibrate, "GRIDS", {"adam": {"adam_noise": (1.0,)}, "sgd": {}})
    calibrate.main(measured, ["uniform"], ["oracle"], ["sgd"], 2)
    calibrate.main(measured, ["uniform"], ["oracle"], ["adam"], 2)
    doc = json.loads(open(os.path.join(measured, "calibration.json")).read())
    assert set(doc["updates"]) == {"sgd", "adam"} and "model output" in doc["label"]
    assert doc["updates"]["adam"]["predictions"]["oracle"]["role"] == "held out"
    out = capsys.readouterr().out
    assert "model output" in out and "| oracle | held out |" in out


def test_missing_file_and_arm_are_named(tmp_path, measured):
    with pytest.raises(FileNotFoundError, match="results.json: no such file"):
        calibrate.calibrate(str(tmp_path), ["uniform"], ["hive"], **QUIET)
    with pytest.raises(ValueError, match=r"results.json: no runs of arm 'hive' in field "
                                         r"runs\[\].method \(arms there: oracle, "):
        calibrate.calibrate(measured, ["uniform"], ["hive"], **QUIET)
    with pytest.raises(ValueError, match="--predict names \\['oracle'\\]"):
        calibrate.calibrate(measured, ["uniform", "oracle"], ["oracle"], **QUIET)
    res = json.loads(open(os.path.join(measured, "results.json")).read())
    del res["metric"]
    (tmp_path / "results.json").write_text(json.dumps(res))
    with pytest.raises(ValueError, match="results.json: no field 'metric'"):
        calibrate.calibrate(str(tmp_path), ["uniform"], [], **QUIET)
    del res["runs"][0]["curve"]["buckets"]
    res["metric"] = "eval/avg@4/4op"
    (tmp_path / "results.json").write_text(json.dumps(res))
    with pytest.raises(ValueError, match=r"runs\[uniform-s100\]\.curve\.'buckets'"):
        calibrate.calibrate(str(tmp_path), ["uniform"], [], **QUIET)


def test_cli_error_is_one_line(measured):
    p = subprocess.run([sys.executable, "-m", "frontier_rl", "sim", "calibrate",
                        f"--workdir={measured}", "--predict=hive"], capture_output=True,
                       text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"}, timeout=120)
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "no runs of arm 'hive'" in lines[0], p.stderr
