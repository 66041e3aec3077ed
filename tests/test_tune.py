"""compare.tune: every arm on the same grid on tuning seeds, the declared rule picks each arm's
setting, and the confirmation stage runs the chosen settings on disjoint seeds."""

import importlib.util
import os

import ml_collections
import numpy as np
import pytest

from frontier_rl import config_lib
from frontier_rl.experiment import compare, tune

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config(arg="tuned"):
    spec = importlib.util.spec_from_file_location(
        "compare_arith", os.path.join(ROOT, "configs", "compare_arith.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.get_config(arg)


def _run(method, seed, final):
    return {"method": method, "seed": seed, "final": final}


def test_the_tuning_stage_is_every_arm_at_every_point_on_the_tuning_seeds(tmp_path):
    cfg = _config()
    t = tune.tuning_config(cfg)
    specs = compare.plan(t, str(tmp_path))
    arms = cfg.compare.tune.arms.split(",")
    grid = tune.points(cfg.compare.tune.grid)
    assert len(grid) >= 3
    assert len(specs) == len(arms) * len(grid) * len(cfg.compare.tune.seeds.split(","))
    assert {s.seed for s in specs} == {int(x) for x in cfg.compare.tune.seeds.split(",")}
    for s in specs:
        arm, point = s.method.split("@")
        lr = s.config.rl.learning_rate
        assert point == tune.label({"rl.learning_rate": lr})
        assert s.config.selector.name == cfg.compare.methods[arm].selector.name
        assert s.config.warmstart.start  # every tuning run starts from a shipped start
    assert t.compare.target == "uniform@learning_rate=3e-04"  # the shared setting's reference


def test_the_rule_picks_the_best_mean_over_tuning_seeds_and_confirms_on_fresh_seeds():
    cfg = _config()
    lo, mid, hi = (tune.label(p) for p in tune.points(cfg.compare.tune.grid))
    runs = []
    for arm in cfg.compare.tune.arms.split(","):
        # seed 10 alone would pick `hi` (60); the mean over the tuning seeds picks `mid`
        finals = {lo: (40, 40), mid: (50, 52), hi: (60, 30)}
        if arm == "uniform":  # the reference's best is elsewhere
            finals = {lo: (55, 55), mid: (50, 50), hi: (40, 40)}
        if arm == "hive":  # a tie between lo and mid goes to the earlier point
            finals = {lo: (50, 50), mid: (50, 50), hi: (10, 10)}
        for point, vals in finals.items():
            runs += [_run(f"{arm}@{point}", s, v)
                     for s, v in zip((10, 12), vals, strict=True)]
    record = tune.choose({"runs": runs}, cfg)
    assert record["arms"]["uniform"]["chosen_label"] == lo
    assert record["arms"]["oracle"]["chosen_label"] == mid
    assert record["arms"]["hive"]["chosen_label"] == lo
    assert record["tuning_seeds"] == [10, 12]
    assert not set(record["confirmation_seeds"]) & set(record["tuning_seeds"])
    assert len(record["confirmation_seeds"]) >= 6
    # the power the confirmation stage needs, at the tuning stage's paired sd
    assert set(record["power"]["oracle"]["seeds_needed"]) == set(cfg.compare.effect_sizes)
    confirm = tune.confirmation_config(cfg, record)
    specs = compare.plan(confirm, "/nonexistent")
    chosen = {a: record["arms"][a]["chosen"]["rl.learning_rate"] for a in record["arms"]}
    for s in specs:
        assert s.seed in record["confirmation_seeds"]
        arm = s.method.split("@")[0]
        assert s.config.rl.learning_rate == chosen[arm]
        # an arm away from the shared setting runs under another name (another directory)
        assert (s.method == arm) == (chosen[arm] == 3e-4)
    assert confirm.compare.target == f"uniform@{lo}"
    assert f"hive@{lo}" in confirm.compare.confirmatory


def test_tuning_refuses_shared_seeds_a_short_grid_and_an_untuned_reference():
    cfg = _config()
    with cfg.compare.unlocked():
        cfg.compare.tune.seeds = "10,0"
    with pytest.raises(config_lib.ConfigError, match="must be fresh"):
        compare.validate(cfg)
    cfg = _config()
    cfg.compare.tune.grid = ml_collections.ConfigDict({"rl": {"learning_rate": (1e-4, 3e-4)}})
    with pytest.raises(config_lib.ConfigError, match="at least 3 values"):
        compare.validate(cfg)
    cfg = _config()
    cfg.compare.tune.arms = "hive,heapa"
    with pytest.raises(config_lib.ConfigError, match="leaves out the reference"):
        compare.validate(cfg)


def test_labels_hold_no_dots():
    assert tune.label({"rl.learning_rate": 1.5e-4}) == "learning_rate=1p5e-04"
    assert tune.label({"rl.batch_size": 64}) == "batch_size=64"


def test_the_curve_fit_recovers_known_parameters():
    from frontier_rl.experiment import curves

    x = np.array([0, 6400, 12800, 19200, 25600, 32000, 38400], float)
    for a, b, mid in ((48.0, 1.5, 9000.0), (40.0, 3.0, 20000.0)):
        y = curves.sigmoid(x, 31.0, a, b, mid)
        got = curves.fit(x, y)
        assert got["A"] == pytest.approx(a, rel=1e-3)
        assert got["B"] == pytest.approx(b, rel=1e-2)
        assert got["C_mid"] == pytest.approx(mid, rel=1e-2)
    assert curves.auc([0, 1, 2], [0, 1, 2]) == pytest.approx(1.0)
    assert curves.last_mean([1, 2, 3, 4]) == pytest.approx(3.0)
    assert curves.fit(x[:3], x[:3]) is None


@pytest.mark.slow
def test_a_tuned_comparison_runs_end_to_end(tmp_path):
    """The smoke comparison with a tuning section: every (arm, rate) on the tuning seed in
    DIR/tune, the choice recorded, the confirmation on the disjoint seed with its report in
    DIR/tuned, the shared-setting verdicts beside it."""
    cfg = _config("smoke")
    with cfg.compare.unlocked():
        cfg.compare.tune = ml_collections.ConfigDict(dict(
            grid={"rl": {"learning_rate": (1e-4, 3e-4, 1e-3)}}, arms="uniform,hive", seeds="1",
            rule="best_mean", rule_source="the test's", shared={"rl": {"learning_rate": 3e-4}}))
    results = compare.run(cfg, str(tmp_path))
    assert sorted(os.listdir(tmp_path / "tune" / "runs")) == sorted(
        f"{a}@learning_rate={v}-s1" for a in ("uniform", "hive")
        for v in ("1e-04", "3e-04", "1e-03"))
    record = results["tuning"]
    assert record["tuning_seeds"] == [1] and record["confirmation_seeds"] == [0]
    for arm in ("uniform", "hive"):
        cells = record["arms"][arm]["cells"]
        best = max(cells, key=lambda x: x["mean"])
        assert record["arms"][arm]["chosen_label"] == best["label"]
        run = next(r for r in results["runs"] if r["method"].split("@")[0] == arm)
        assert run["seed"] == 0
        assert run["method"] == (arm if best["label"] == "learning_rate=3e-04"
                                 else f"{arm}@{best['label']}")
    assert results["shared_setting"]["setting"] == "learning_rate=3e-04"
    text = (tmp_path / "tuned" / "report.md").read_text()
    assert "## Tuning: the same grid for every arm" in text
    assert (tmp_path / "tuned" / "results.json").exists()
