"""The synthetic learner (sim/learner.py) and its runner (sim/run.py)."""

import json

import numpy as np
import pytest

from frontier_rl import selection
from frontier_rl.selection.base import Group
from frontier_rl.selection.heapa.augment import arith_difficulty
from frontier_rl.sim import run
from frontier_rl.sim.learner import SimContext, SimPrompt


def small_config(name="uniform", *, prompts=2000, steps=20, batch=32):
    c = run.base_config()
    c.selector.name = name
    c.rl.batch_size = batch
    c.sim.num_prompts = prompts
    c.sim.steps = steps
    c.sim.eval_every = 5
    c.sim.eval_per_band = 64
    return c


def _group(i: int, outcomes) -> Group:
    o = np.asarray(outcomes, np.int8)
    return Group(index=i, prompt_id=f"sim/{i}", outcomes=o, rewards=o.astype(np.float32),
                 lengths=np.full(o.size, 4, np.int32), mean_entropy=np.zeros(o.size, np.float32))


def test_same_seed_same_run_other_seed_differs():
    a = run.run_sim(small_config("hive"))
    b = run.run_sim(small_config("hive"))
    assert a["curve"]["acc_mean"] == b["curve"]["acc_mean"]
    assert a["counters"] == b["counters"]
    c = small_config("hive")
    c.seed = 1
    other = run.run_sim(c)
    assert other["curve"]["acc_mean"] != a["curve"]["acc_mean"]


def test_zero_variance_groups_teach_nothing():
    ctx = SimContext(num_prompts=100, batch_size=4, group_size=8, seed=0)
    before = ctx.state()
    stats = ctx.update([_group(0, [1] * 8), _group(1, [0] * 8), _group(2, [-1] * 8)])
    after = ctx.state()
    assert after["skill"] == before["skill"]
    np.testing.assert_array_equal(after["m"], before["m"] * (1 - ctx.c.forget))
    assert stats["informative"] == 0.0
    ctx.update([_group(3, [1, 0, 0, 1, 0, 0, 0, 0])])
    assert ctx.skill > before["skill"]
    assert ctx.memorisation[3] > 0 and ctx.memorisation[4] == 0


def test_skill_grows_and_eval_improves_with_training():
    ctx = SimContext(num_prompts=5000, batch_size=64, group_size=8, seed=0)
    acc0 = ctx.evaluate()["mean"]
    rng = np.random.default_rng(0)
    for _ in range(50):
        ctx.update(ctx.rollout(rng.choice(5000, 64, replace=False), 8))
    acc = ctx.evaluate()
    assert acc["mean"] > acc0 + 0.01
    assert acc["2op"] > acc["3op"] > acc["4op"] > acc["5op"]


def test_entropy_tracks_uncertainty():
    ctx = SimContext(num_prompts=20000, seed=0)
    idx = np.arange(20000)
    p = ctx.success(idx)
    v = ctx.prompt_entropy(idx)
    r = np.corrcoef(v, 4 * p * (1 - p))[0, 1]
    assert abs(r - ctx.c.entropy_corr) < 0.05
    assert ctx.counters["entropy_prompts"] == 20000
    exact = SimContext({"entropy_corr": 1.0}, num_prompts=1000, seed=0)
    q = exact.success(np.arange(1000))
    np.testing.assert_allclose(exact.prompt_entropy(np.arange(1000)), 4 * q * (1 - q),
                               rtol=1e-5)


def test_outcomes_follow_p():
    ctx = SimContext(num_prompts=3000, seed=0)
    groups = ctx.rollout(np.arange(3000), 64)
    rate = np.array([g.pass_rate for g in groups])
    assert np.corrcoef(rate, ctx.success(np.arange(3000)))[0, 1] > 0.95
    assert ctx.counters["rollouts"] == 3000 * 64
    assert ctx.prompts[0].bucket in ctx.c.band_names


def test_heapa_children_start_near_their_parent():
    # 500 seeds are used up in 8 steps; children then enter batches from the cold queue.
    c = small_config("heapa", prompts=500, steps=30, batch=64)
    ctx = run.make_context(c)
    sel = selection.make("heapa", run._selector_config(c), 500, 0)
    for step in range(1, 31):
        ctx.begin_step(step)
        groups = sel.build_batch(ctx)
        ctx.update(groups)
        sel.after_update(ctx, groups)
    children = [(i, p) for i, p in enumerate(ctx.prompts[500:], start=500)]
    assert len(children) > 50, "augmentation added too few children"
    d = ctx.difficulty
    resid = []
    for i, child in children:
        parent = ctx.index_of(child.meta["parent"])
        assert parent is not None
        ratio = arith_difficulty(ctx.prompts[parent].text, child.text)
        resid.append(d[i] - d[parent] - ctx.c.aug_size_slope * np.log(ratio))
    resid = np.asarray(resid)
    assert abs(resid.mean()) < 0.15 and 0.15 < resid.std() < 0.5  # ~ N(0, aug_sigma = 0.3)
    # The spread of children around their parents is far below the pool's.
    assert resid.std() < 0.25 * d[:500].std()
    assert ctx.counters["generated_texts"] > 0


def test_wrong_labels_make_children_unsolvable():
    ctx = SimContext(num_prompts=10, seed=0)
    parent = ctx.prompts[0]
    good, bad = ctx.add_prompts([
        SimPrompt("aug/0", parent.text, parent.answer, "aug", {"parent": parent.id}),
        SimPrompt("aug/1", parent.text, parent.answer + "1", "aug", {"parent": parent.id}),
    ])
    p = ctx.success([good, bad])
    assert p[0] > 0 and p[1] == 0
    assert ctx.add_prompts([SimPrompt("aug/0", "", "", "aug")]) == [good]


@pytest.mark.parametrize("name", selection.names())
def test_every_selector_runs_on_the_sim(name):
    res = run.run_sim(small_config(name))
    assert res["stopped"] == "", res["stopped"]
    assert res["steps_run"] == 20
    assert res["counters"]["rollouts"] >= 20 * 32 * 8 * 0.5
    assert res["curve"]["rollouts"][-1] == res["counters"]["rollouts"]
    assert np.isfinite(res["final"]["acc_mean"])


def test_rollout_budget_stops_the_run():
    c = small_config("uniform", steps=100)
    c.sim.rollout_budget = 32 * 8 * 10
    res = run.run_sim(c)
    assert res["steps_run"] == 10 and "budget" in res["stopped"]


def test_sweep_writes_report(tmp_path):
    c = small_config("uniform", prompts=1000, steps=10)
    c.sweep.grid = (("selector.hive.k_keep", (0.25, 0.5)), ("sim.eta_skill", (0.01, 0.05)))
    c.sweep.seeds = 2
    c.sweep.workers = 1
    out = run.main(c, str(tmp_path))
    # hive at 0.25 / base 0.5; uniform at 0.01 (base) / 0.05 -> 4 settings x 2 seeds
    assert len(out["runs"]) == 8
    text = (tmp_path / "sweep_report.md").read_text()
    assert "## selector.hive.k_keep" in text and "## sim.eta_skill" in text
    assert (tmp_path / "sweep_selector.hive.k_keep.png").stat().st_size > 1000
    data = json.loads((tmp_path / "sweep_results.json").read_text())
    fast = [r for r in data["runs"] if r["setting"].get("sim.eta_skill") == 0.05]
    slow = [r for r in data["runs"] if r["selector"] == "uniform" and r not in fast]
    assert min(r["final"]["skill"] for r in fast) > max(r["final"]["skill"] for r in slow)


def test_bad_sweep_key_is_named():
    c = small_config()
    c.sweep.grid = (("selector.heapa.alpah", (0.3,)),)
    with pytest.raises(ValueError, match="selector.heapa.alpah"):
        run.validate_sim(c)
    c.sweep.grid = (("selector.heapa.alpha", (1.5,)),)
    with pytest.raises(ValueError, match="alpha"):
        run.run_sweep(c, say=lambda s: None)


# ----------------------------------------------------------------------------- update rules


def test_sgd_rule_is_unchanged():
    # Recorded with the learner before sim.update existed (the same values to the last bit).
    for name, skill in (("uniform", 0.04098005582436476), ("hive", 0.07112959620314498)):
        assert run.run_sim(small_config(name))["final"]["skill"] == skill


def _batch(informative: int, size: int = 64) -> list[Group]:
    """`informative` groups at 3 of 8 correct, the rest all wrong (zero variance)."""
    return [_group(j, [1, 1, 1, 0, 0, 0, 0, 0] if j < informative else [0] * 8)
            for j in range(size)]


def _steps(model: dict, informative: int, draws: int = 1000) -> dict[str, np.ndarray]:
    """Update statistics of `draws` independent updates on the same batch from the start."""
    ctx = SimContext(model, num_prompts=100, batch_size=64, group_size=8, seed=0)
    batch = _batch(informative)
    out: dict[str, list] = {"step": [], "update_norm": [], "cos": []}
    for _ in range(draws):
        ctx.skill = ctx.c.skill0
        st = ctx.update(batch)
        for k in out:
            out[k].append(st[k])
    return {k: np.asarray(v) for k, v in out.items()}


ADAM = {"update": "adam", "adam_lr": 0.01, "adam_noise": 4.0}


def test_adam_step_size_does_not_shrink_with_dilution_sgd_does():
    sgd_few, sgd_all = _steps({}, 8, 1), _steps({}, 64, 1)
    assert sgd_all["step"][0] / sgd_few["step"][0] == pytest.approx(8.0, rel=1e-6)
    few, full = _steps(ADAM, 8), _steps(ADAM, 64)
    for s in (few, full):  # the update's root-mean-square size is adam_lr
        assert np.sqrt(np.mean(s["update_norm"] ** 2)) == pytest.approx(0.01, rel=0.03)
    # One skill direction (D = 1): the skill's own step has that size too.
    few1, full1 = _steps({**ADAM, "adam_dims": 1}, 8), _steps({**ADAM, "adam_dims": 1}, 64)
    ratio = np.sqrt(np.mean(full1["step"] ** 2) / np.mean(few1["step"] ** 2))
    assert ratio == pytest.approx(1.0, abs=0.06)


def test_adam_direction_improves_with_informative_groups():
    few, many = _steps(ADAM, 8), _steps(ADAM, 64)
    # more informative groups: a better direction and more expected skill progress, never a
    # larger update
    assert np.mean(many["cos"]) > 2 * np.mean(few["cos"]) > 0
    assert np.mean(many["step"]) > 2 * np.mean(few["step"]) > 0
    one = {**ADAM, "adam_dims": 1}  # in one dimension: the sign is wrong less often
    assert np.mean(_steps(one, 64)["step"] < 0) < np.mean(_steps(one, 8)["step"] < 0) - 0.05
    # without noise the direction is exact at any dilution: nothing for selection to buy
    clean = {**ADAM, "adam_noise": 0.0}
    np.testing.assert_allclose(_steps(clean, 8, 3)["step"], 0.01)
    np.testing.assert_allclose(_steps(clean, 64, 3)["step"], 0.01)


def test_adam_zero_variance_batch_takes_no_step_and_runs_repeat():
    ctx = SimContext(ADAM, num_prompts=100, batch_size=4, group_size=8, seed=0)
    assert ctx.update([_group(0, [1] * 8), _group(1, [0] * 8)])["step"] == 0.0
    assert ctx.skill == ctx.c.skill0
    for b2 in (0.0, 0.99):
        c = small_config("hive")
        c.sim.update, c.sim.adam_b2 = "adam", b2
        a, b = run.run_sim(c), run.run_sim(c)
        assert a["curve"]["skill"] == b["curve"]["skill"]
        assert a["final"]["skill"] != run.run_sim(small_config("hive"))["final"]["skill"]


def test_adam_keeps_the_other_random_streams():
    # The noise has a stream of its own: the first step's rollouts are the sgd run's.
    c = small_config("uniform", steps=1)
    sgd = run.make_context(c).rollout(np.arange(50), 8)
    c.sim.update = "adam"
    adam = run.make_context(c).rollout(np.arange(50), 8)
    assert all(np.array_equal(x.outcomes, y.outcomes) for x, y in zip(sgd, adam, strict=True))


@pytest.mark.parametrize("field,value,message", [
    ("update", "adamw", "sim.update='adamw' is not allowed: one of \\['sgd', 'adam'\\]"),
    ("adam_lr", -0.1, "sim.adam_lr"), ("adam_noise", float("nan"), "sim.adam_noise"),
    ("adam_b2", 1.0, "sim.adam_b2"), ("adam_dims", 0, "sim.adam_dims")])
def test_bad_update_fields_are_named(field, value, message):
    c = small_config()
    c.sim[field] = value
    with pytest.raises(ValueError, match=message):
        run.validate_sim(c)
