"""The controls study on the synthetic learner (sim/controls.py, configs/sim_controls.py)."""

import importlib.util
import json
import os

import pytest

from frontier_rl.sim import controls

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def smoke_config():
    path = os.path.join(ROOT, "configs", "sim_controls.py")
    spec = importlib.util.spec_from_file_location("sim_controls", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.get_config("smoke")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """The smoke preset through the entry point `frontier-rl sim` routes it to: (study, JSON,
    markdown)."""
    workdir = tmp_path_factory.mktemp("sim_controls")
    study = controls.main(smoke_config(), str(workdir))
    with open(workdir / "sim_controls.json") as f:
        data = json.load(f)
    return study, data, (workdir / "sim_controls.md").read_text()


def test_paper_preset_is_paper_scale():
    path = os.path.join(ROOT, "configs", "sim_controls.py")
    spec = importlib.util.spec_from_file_location("sim_controls_paper", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    c = mod.get_config()
    assert (c.sim.num_prompts, c.sim.steps, c.rl.batch_size, c.rl.group_size) == \
        (100_000, 1000, 256, 8)
    assert c.controls.seeds >= 5 and c.seed == 0
    assert controls.arm_names(c) == ["uniform", "oracle", "oracle_negative", "hive", "ds"]
    assert controls.setting(c, "oracle_negative") == {
        "selector.name": "oracle", "selector.oracle.mode": "extremes",
        "selector.oracle.extreme_pq": 0.01}


def test_json_names_headroom_and_harm_with_intervals(smoke):
    _, data, text = smoke
    for name, control in (("headroom", "oracle"), ("harm", "oracle_negative")):
        e = data[name]
        assert e["control"] == control and e["reference"] == "uniform"
        assert e["n"] == 3 and len(e["per_seed"]) == 3
        assert e["lo"] < e["mean"] < e["hi"]
        assert e["verdict"] in ("better", "worse", "not distinguishable at this budget")
    assert "| headroom | oracle − uniform |" in text and "| harm | oracle_negative − uniform |" \
        in text
    # the per-seed differences are the arms' own per-seed accuracies, paired by seed
    arms = data["arms"]
    for k, seed in enumerate(data["seeds"]):
        d = arms["oracle"]["per_seed"][str(seed)]["accuracy"] - \
            arms["uniform"]["per_seed"][str(seed)]["accuracy"]
        assert data["headroom"]["per_seed"][k] == pytest.approx(d)


def test_headroom_is_positive_and_harm_negative(smoke):
    _, data, _ = smoke
    assert data["headroom"]["mean"] > 0 and data["headroom"]["verdict"] == "better"
    assert data["harm"]["mean"] < 0 and data["harm"]["verdict"] == "worse"
    # the controls read pass rates without paying for them; the negative one trains on fewer
    for arm in ("oracle", "oracle_negative"):
        for p in data["arms"][arm]["per_seed"].values():
            assert p["control_samples"] > 0
    assert data["arms"]["uniform"]["per_seed"]["0"]["control_samples"] == 0


def test_hive_ds_ratio_is_at_matched_steps(smoke):
    study, data, _ = smoke
    e = data["hive_vs_ds"]
    steps = data["steps"]
    assert all(pair == [steps, steps] for pair in e["matched_steps"].values())
    by = {(r["arm"], r["seed"]): r for r in study["runs"]}
    for k, seed in enumerate(data["seeds"]):
        hive, ds = by["hive", seed], by["ds", seed]
        assert hive["steps_run"] == ds["steps_run"] == steps
        assert hive["curve"]["step"][-1] == ds["curve"]["step"][-1] == steps
        ratio = ds["counters"]["rollouts"] / hive["counters"]["rollouts"]
        assert e["ratio"]["per_seed"][k] == pytest.approx(ratio)
    # DS rolls out 1.5 B prompts per generation batch and keeps B: it spends more
    assert e["ratio"]["geomean"] > 1 and e["ratio"]["lo"] > 1
    assert e["ratio"]["verdict"] == "better"
    assert e["accuracy_difference"]["verdict"].startswith("equivalent within ±1.5") or \
        e["accuracy_difference"]["verdict"] in ("better", "worse", "not shown equivalent")


def test_an_arm_that_stops_early_gets_no_verdict(smoke):
    study, _, _ = smoke
    runs = [dict(r) for r in study["runs"]]
    for r in runs:
        if r["arm"] == "ds" and r["seed"] == 1:
            r["steps_run"] -= 5
            r["stopped"] = "step 26: cap reached"
    data = controls.summarise(smoke_config(), runs)
    verdict = data["hive_vs_ds"]["ratio"]["verdict"]
    assert verdict.startswith("no verdict") and "ds stopped at step 25 in seed 1" in verdict
    assert data["headroom"]["verdict"] == "better"  # uniform and oracle ran every step


def test_same_seed_same_numbers(smoke):
    study, _, _ = smoke
    c = smoke_config()
    c.controls.run = "uniform,oracle,oracle_negative"
    c.controls.method = c.controls.comparator = ""
    again = controls.run_controls(c, say=lambda s: None)
    first = {(r["arm"], r["seed"]): r for r in study["runs"]}
    for r in again["runs"]:
        assert r["curve"]["acc_mean"] == first[r["arm"], r["seed"]]["curve"]["acc_mean"]
        assert r["counters"] == first[r["arm"], r["seed"]]["counters"]
    assert again["headroom"]["per_seed"] == study["headroom"]["per_seed"]
    assert again["harm"]["per_seed"] == study["harm"]["per_seed"]
    assert "hive_vs_ds" not in again
    # and a different seed gives different numbers
    c.seed = 7
    c.controls.seeds = 1
    c.controls.run = "uniform"
    c.controls.positive = c.controls.negative = ""
    other = controls.run_controls(c, say=lambda s: None)["runs"][0]
    assert other["curve"]["acc_mean"] != first["uniform", 0]["curve"]["acc_mean"]


@pytest.mark.parametrize("field,value,message", [
    ("run", "uniform,nope", "controls.run names arm 'nope'"),
    ("positive", "nope", "controls.positive='nope' is not one of the arms run"),
    ("equivalence_margin", 0.0, "controls.equivalence_margin=0.0"),
    ("seeds", 0, "controls.seeds=0"),
])
def test_bad_controls_fields_are_named(field, value, message):
    c = smoke_config()
    c.controls[field] = value
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        controls.validate(c)


def test_bad_arm_is_named_before_any_run():
    c = smoke_config()
    c.controls.arms.oracle.oracle.mode = "middle"
    with pytest.raises(ValueError, match="mode"):
        controls.run_controls(c, say=lambda s: None)
    c = smoke_config()
    c.controls.arms.hive.hive = {"k_kep": 0.5}
    with pytest.raises(ValueError, match="selector.hive.k_kep"):
        controls.validate(c)
