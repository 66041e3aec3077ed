"""The controls study on the synthetic learner (sim/controls.py, configs/sim_controls.py)."""

import importlib.util
import json
import os

import numpy as np
import pytest

from frontier_rl.sim import controls, learner
from frontier_rl.sim import run as sim_run
from frontier_rl.tasks import composition

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def preset_module():
    path = os.path.join(ROOT, "configs", "sim_controls.py")
    spec = importlib.util.spec_from_file_location("sim_controls", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def smoke_config(arg: str = "smoke"):
    return preset_module().get_config(arg)


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
        "selector.oracle.measure": "rollouts", "selector.oracle.candidates": 2,
        "selector.oracle.max_rounds": 8}
    # the learner's rule is the one calibrated to the trainer (sim calibrate)
    assert c.sim["update"] == "adam"


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


# ----------------------------------------------------------------------------- pool composition


def _start_classes(ctx) -> np.ndarray:
    """Class of every base prompt by its exact starting pass rate (the learner's thresholds)."""
    p = ctx.success(np.arange(ctx.num_base))
    return np.where(p >= learner.SOLVED_P, 0, np.where(p <= learner.UNSOLVED_P, 1, 2))


def test_composition_gives_the_asked_shares():
    spec = "solved=0.3,unsolved=0.2,frontier=0.5"
    ctx = learner.SimContext({"composition": spec}, num_prompts=3001, seed=4)
    want = composition.counts(composition.parse(spec), 3001)
    cls = _start_classes(ctx)
    assert [int(np.sum(cls == k)) for k in range(3)] == [want[c] for c in composition.CLASSES]
    pool = ctx.pool_composition
    assert pool["spec"] == spec and pool["candidates"] > 3001
    for k, c in enumerate(composition.CLASSES):
        assert pool["shares"][c] == pytest.approx(np.mean(cls == k))
    p = ctx.success(np.arange(ctx.num_base))
    g, r = ctx.group_size, ctx.c.invalid_rate
    zv = np.mean(p**g + ((1 - p) * (1 - r))**g + ((1 - p) * r)**g)
    assert pool["zero_variance"] == pytest.approx(zv)
    # the classes are mixed through the pool, not in blocks
    assert 0.3 < np.mean(cls[:300] == 2) < 0.7
    # deterministic by seed; another seed draws another pool; the held-out set is the seed's
    again = learner.SimContext({"composition": spec}, num_prompts=3001, seed=4)
    assert np.array_equal(again.difficulty, ctx.difficulty)
    assert np.array_equal(again._ops, ctx._ops)
    other = learner.SimContext({"composition": spec}, num_prompts=3001, seed=5)
    assert not np.array_equal(other.difficulty, ctx.difficulty)
    plain = learner.SimContext(None, num_prompts=3001, seed=4)
    assert all(np.array_equal(a, b) for a, b in zip(plain.eval_d, ctx.eval_d, strict=True))
    # every prompt at the frontier
    full = learner.SimContext({"composition": "frontier=1"}, num_prompts=2000, seed=0)
    assert np.all(_start_classes(full) == 2)
    assert full.pool_composition["shares"] == {"solved": 0.0, "unsolved": 0.0, "frontier": 1.0}


def test_empty_composition_leaves_the_pool_as_before():
    # the first draws of the default pool, as drawn before the field existed
    ctx = learner.SimContext(None, num_prompts=5, seed=0)
    assert ctx.difficulty.tolist() == pytest.approx(
        [1.8261197760608936, -0.7085326599305944, 3.450437147852279, 1.066566175774127,
         3.7044538425894995], abs=1e-12)
    assert ctx.band.tolist() == [2, 1, 3, 2, 3]
    assert ctx.pool_composition["spec"] == "" and ctx.pool_composition["candidates"] == 5
    # a run with sim.composition = "" is the run of a config without the field
    c = smoke_config()
    c.controls.seeds = 1
    c.selector.name = "uniform"
    with_field = sim_run.run_sim(c)
    del c.sim["composition"]
    without = sim_run.run_sim(c)
    for key in ("acc_mean", "rollouts", "zv_easy", "zv_hard", "skill"):  # not the timings
        assert with_field["curve"][key] == without["curve"][key]
    assert with_field["counters"] == without["counters"]


def test_the_study_states_its_pool(smoke):
    study, data, text = smoke
    comp = data["composition"]
    assert comp["spec"] == "" and sum(comp["shares"].values()) == pytest.approx(1.0)
    assert set(comp["per_seed"]) == {str(s) for s in data["seeds"]}
    assert 0 < comp["zero_variance"] < 1
    for r in study["runs"]:
        assert r["composition"] == comp["per_seed"][str(r["seed"])]
    assert 'Training pool: sim.composition = "" (the mixture as drawn)' in text


def test_composition_preset():
    mod = preset_module()
    c = mod.get_config("composition")
    assert (c.sim.num_prompts, c.sim.steps, c.rl.batch_size, c.rl.group_size,
            c.controls.seeds) == (20_000, 300, 256, 8, 3)
    assert controls.arm_names(c) == ["uniform", "oracle", "oracle_negative"]
    fronts = [composition.parse(s)["frontier"] for s in c.controls.compositions]
    assert fronts == pytest.approx([0.1, 0.3, 0.5, 0.8, 1.0])
    for s in c.controls.compositions:
        shares = composition.parse(s)
        assert shares["solved"] == pytest.approx(shares["unsolved"])


def test_headroom_is_smaller_with_every_prompt_at_the_frontier(tmp_path):
    mod = preset_module()
    c = mod.get_config("composition,smoke")
    c.sim.steps = 60
    c.controls.compositions = (mod.composition_spec(0.1), mod.composition_spec(1.0))
    sweep = controls.main(c, str(tmp_path))
    low, full = (e["study"] for e in sweep["compositions"])
    assert low["composition"]["shares"]["frontier"] == pytest.approx(0.1)
    assert full["composition"]["shares"]["frontier"] == 1.0
    assert full["headroom"]["mean"] < low["headroom"]["mean"]
    assert all(a < b for a, b in zip(full["headroom"]["per_seed"], low["headroom"]["per_seed"],
                                     strict=True))
    # every run states the composition it used; the report has one row per composition
    for r in sweep["runs"]:
        assert r["setting"]["sim.composition"] == r["composition"]["spec"]
    with open(tmp_path / "sim_composition.json") as f:
        data = json.load(f)
    assert [e["spec"] for e in data["compositions"]] == list(c.controls.compositions)
    text = (tmp_path / "sim_composition.md").read_text()
    assert f"| {mod.composition_spec(1.0)} | solved 0.00 / unsolved 0.00 / frontier 1.00 |" \
        in text
    assert "every prompt starts at the frontier: there is nothing to select away" in text
    assert "Selection pays most at" in text


@pytest.mark.parametrize("spec,message", [
    ("solved=0.5,frontier=0.6", "sim.composition='solved=0.5,frontier=0.6' is not allowed"),
    ("easy=1", "sim.composition='easy=1' is not allowed: 'easy'"),
    ("frontier=lots", "sim.composition='frontier=lots' is not allowed"),
])
def test_bad_composition_is_named(spec, message):
    c = smoke_config()
    c.sim.composition = spec
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        controls.validate(c)
    c = smoke_config("composition,smoke")
    c.controls.compositions = (c.controls.compositions[0], spec)
    with pytest.raises(ValueError, match=r"controls\.compositions\[1\]: .*sim\.composition="):
        controls.validate(c)


def test_a_composition_the_mixture_cannot_fill_is_named_before_any_run():
    c = smoke_config()
    c.sim.band_weights = (0.0, 0.0, 1.0, 1.0)  # only the hard bands: nothing solved
    c.sim.composition = "solved=0.5,frontier=0.5"
    ran = []
    with pytest.raises(ValueError, match=r"sim\.composition='solved=0\.5,frontier=0\.5'.*solved"):
        controls.run_controls(c, say=ran.append)
    assert not any("[1/" in line for line in ran)
