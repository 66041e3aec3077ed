"""The control arms (selection/oracle.py) and how the report treats them: the oracle reads
measured pass rates, never labels; headroom and harm come paired per seed; controls are never
rows of the main table or the claims."""

import dataclasses

import numpy as np
import pytest

from frontier_rl import selection
from frontier_rl.experiment import report, stats, table
from frontier_rl.selection import oracle
from frontier_rl.selection.scripted import ScriptedContext
from frontier_rl.sim import run as sim_run


def _pool(n=400, seed=0):
    """Pass rates of a pool: a quarter solved (1), a quarter unsolved (0), the rest spread."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.98, n)
    p[: n // 4] = 1.0
    p[n // 4: n // 2] = 0.0
    return rng.permutation(p)


def _selections(ctx, cfg, steps=6):
    sel = selection.make("oracle", cfg, num_prompts=ctx.num_base, seed=3)
    out = []
    for step in range(steps):
        ctx.begin_step(step)
        out.append([g.index for g in sel.build_batch(ctx)])
    return out, sel


class _RelabelledPrompts:
    """The context's prompts with their bucket labels permuted (texts and ids unchanged)."""

    def __init__(self, prompts, labels):
        self.prompts, self.labels = prompts, labels

    def __len__(self):
        return len(self.prompts)

    def __getitem__(self, i):
        return dataclasses.replace(self.prompts[i], bucket=self.labels[i])


@pytest.mark.parametrize("mode", ["frontier", "extremes"])
def test_oracle_uses_measured_pass_rates_not_bucket_labels(mode):
    cfg = {"oracle": {"mode": mode, "candidates": 2}}
    p = _pool()
    base, _ = _selections(ScriptedContext(p, batch_size=32, seed=1), cfg)
    ctx = ScriptedContext(p, batch_size=32, seed=1)
    labels = [ctx.prompts[i].bucket for i in range(len(p))]
    assert len(set(labels)) > 1  # the labels carry the difficulty this test scrambles
    ctx.prompts = _RelabelledPrompts(ctx.prompts, list(np.random.default_rng(0).permutation(
        labels)))
    assert _selections(ctx, cfg)[0] == base
    # ... and it does follow the pass rates: the same labels over other pass rates select
    # other prompts
    assert _selections(ScriptedContext(np.roll(p, 7), batch_size=32, seed=1), cfg)[0] != base


def test_frontier_control_never_trains_on_zero_or_one_and_prefers_one_half():
    p = _pool()
    sel_steps, sel = _selections(ScriptedContext(p, batch_size=32, seed=1),
                                 {"oracle": {"candidates": 3}})
    chosen = np.concatenate(sel_steps)
    assert np.all((p[chosen] > 0) & (p[chosen] < 1))
    assert np.mean(np.abs(p[chosen] - 0.5)) < np.mean(np.abs(p[(p > 0) & (p < 1)] - 0.5))
    mech = sel.mechanisms()
    assert mech["candidates_measured"] == 6 * 3 * 32 and mech["candidates_kept"] == 6 * 32


def test_negative_control_trains_only_on_zero_or_one():
    p = _pool()
    steps, _ = _selections(ScriptedContext(p, batch_size=32, seed=1),
                           {"oracle": {"mode": "extremes"}})
    chosen = np.concatenate(steps)
    assert chosen.size and np.all((p[chosen] == 0) | (p[chosen] == 1))


def test_measurement_is_not_charged_to_the_rollout_budget():
    ctx = ScriptedContext(_pool(), batch_size=32, group_size=8, seed=1)
    steps, _ = _selections(ctx, {"oracle": {"candidates": 2}}, steps=3)
    assert ctx.counters["rollouts"] == 8 * sum(len(s) for s in steps)
    assert ctx.counters["control_samples"] == 3 * 2 * 32


def test_no_qualifying_candidate_names_the_fields():
    ctx = ScriptedContext(np.ones(200), batch_size=16, seed=0)
    sel = selection.make("oracle", {"oracle": {"max_rounds": 2}}, num_prompts=200, seed=0)
    ctx.begin_step(0)
    with pytest.raises(RuntimeError, match="selector.oracle.max_rounds=2"):
        sel.build_batch(ctx)


def test_oracle_config_errors_name_the_field():
    with pytest.raises(ValueError, match=r"selector\.oracle\.mode='best'"):
        selection.validate("oracle", {"mode": "best"})
    with pytest.raises(ValueError, match=r"selector\.oracle\.k=1"):
        selection.validate("oracle", {"k": 1})


def test_only_the_oracle_is_a_control():
    assert [n for n in selection.names() if selection.is_control(n)] == ["oracle"]


def test_choose_ranks_by_p_times_one_minus_p():
    rates = np.array([0.0, 0.5, 1.0, 0.25, 0.75, 0.125])
    assert oracle.choose(rates, "frontier", 3).tolist() == [1, 3, 4]
    assert oracle.choose(rates, "extremes", 5).tolist() == [0, 2]
    assert oracle.choose(rates, "extremes", 5, extreme_pq=0.11).tolist() == [0, 2, 5]


def test_synthetic_learner_headroom_and_harm_have_the_expected_signs():
    """On the synthetic learner (exact pass rates, so the oracle is free) the positive control
    ends above uniform and the negative one below it, at matched steps."""
    finals = {}
    for name, extra in [("uniform", {}), ("oracle", {}),
                        ("neg", {"mode": "extremes", "extreme_pq": 0.01})]:
        c = sim_run.base_config()
        c.sim.num_prompts, c.sim.steps, c.sim.eval_every = 5000, 60, 20
        c.rl.batch_size = 64
        c.selector.name = "uniform" if name == "uniform" else "oracle"
        for k, v in extra.items():
            c.selector.oracle[k] = v
        finals[name] = sim_run.run_sim(c)["final"]["acc_mean"]
    assert finals["oracle"] > finals["uniform"] + 0.01
    assert finals["neg"] < finals["uniform"] - 0.01


# ----------------------------------------------------------------------------- the report

K, PROMPTS = 4, 200


def _run(method, seed, acc):
    """A run as compare.collect makes it, on one bucket ("all"), final accuracy `acc`%."""
    n_correct = round(acc / 100 * K * PROMPTS)
    counts = [n_correct // PROMPTS + (1 if i < n_correct % PROMPTS else 0)
              for i in range(PROMPTS)]
    curve = {"rollouts": [0, 1000], "pflops": [0.0, 0.01], "metric": [20.0, acc],
             "correct_counts": [counts, counts], "steps": [0, 10], "updates": [0, 40]}
    return {"method": method, "seed": seed, "k": K, "final": acc, "curve": curve,
            "rollouts": 1000, "pflops": 0.01, "steps": 10, "updates": 40,
            "effective_rollouts": 500, "zero_var_easy": 0.1, "zero_var_hard": 0.2,
            "final_buckets": {"all": acc}, "target": None, "rollouts_to_target": None,
            "pflops_to_target": None}


def _results(head=(5.0, 6.0, 7.0), harm=(-3.0, -4.0, -3.5)):
    """uniform (the reference), hive, and the two controls at len(head) seeds: the positive
    control `head[s]` points above uniform at seed s, the negative one `harm[s]`."""
    runs = []
    for s in range(len(head)):
        runs += [_run("uniform", s, 30.0 + s), _run("hive", s, 30.5 + s),
                 _run("oracle", s, 30.0 + s + head[s]),
                 _run("oracle_negative", s, 30.0 + s + harm[s])]
    return {"methods": ["uniform", "hive", "oracle", "oracle_negative"], "runs": runs,
            "seeds": list(range(len(head))), "k": K, "metric": f"eval/avg@{K}/all",
            "target_method": "uniform", "rollout_reference": "ds",
            "controls": {"oracle": "positive", "oracle_negative": "negative"}}


def test_headroom_and_harm_are_paired_per_seed_with_intervals():
    eff = report.control_effects(_results())
    want = stats.seed_interval([5.0, 6.0, 7.0])
    h = eff["headroom"]
    assert h["control"] == "oracle" and h["reference"] == "uniform"
    assert h["mean"] == pytest.approx(want.mean, abs=0.01)
    assert (h["lo"], h["hi"]) == pytest.approx((want.lo, want.hi), abs=0.02)
    assert h["verdict"] == "better" and eff["harm"]["verdict"] == "worse"
    # power only at the pre-registered effect (the default: HeaPA's +1.8), never at the
    # measured one, at the sd and at its upper bound
    assert "seeds_for_80_power" not in h
    plan = h["power"]["heapa"]
    assert plan["points"] == 1.8 and "HeaPA" in plan["source"]
    assert plan["seeds"] == stats.seeds_for_power(1.8, h["sd"])
    assert plan["seeds_at_sd_hi"] == stats.seeds_for_power(1.8, stats.sd_upper(h["sd"], 3))
    assert h["steps"] == [10, 10, 10] and h["updates"] == [40, 40, 40]
    assert h["effective_share"] == [0.5, 0.5, 0.5]


def test_controls_appear_in_the_controls_table_never_in_the_main_table_or_claims():
    res = _results()
    main = report.main_table(res)
    assert "| hive |" in main and "| uniform |" in main
    assert "oracle" not in main
    ctl = report.main_table(res, controls=True)
    assert "| oracle |" in ctl and "| oracle_negative |" in ctl and "| hive |" not in ctl
    assert "oracle" in report.controls_table(res)
    for claim in report.claims(res):
        assert "oracle" not in claim["methods"] and "oracle" not in claim["measured"]


def test_controls_table_shows_steps_updates_effective_share_and_no_observed_power():
    res = _results()
    for r in res["runs"]:
        if r["method"] == "oracle_negative":
            r["effective_rollouts"] = 30 + 10 * r["seed"]  # a leak: 3%, 4%, 5% informative
    table = report.controls_table(res)
    harm = table.split("| harm |")[1].split("\n")[0]
    assert "| 10 ± 0 | 40 ± 0 | 0.04 ± 0.01 |" in harm
    assert "seed sd" in harm and "eval-sampling floor" in harm
    assert "heapa +1.8: " in harm
    assert "at this effect" not in table and "Pre-registered effect sizes" in table


def _text(head=(5.0, 6.0, 7.0), harm=(-3.0, -4.0, -3.5)):
    return report.controls_text(_results(head, harm))


def test_a_headroom_above_zero_says_the_testbed_responds():
    text = _text()
    assert "testbed responds to selection" in text and "INVALID" not in text


def test_a_headroom_below_zero_says_the_positive_control_is_invalid():
    assert report.control_effects(_results(head=(-5.0, -6.0, -7.0)))["headroom"][
        "verdict"] == "worse"
    text = _text(head=(-5.0, -6.0, -7.0))
    assert "THE POSITIVE CONTROL IS INVALID" in text
    assert "not distinguishable from 0" not in text.split("harm")[0]
    share = report.headroom_shares(_results(head=(-5.0, -6.0, -7.0)))["hive"]
    assert share["headroom_below_zero"]


def test_a_null_headroom_gives_a_bound_not_a_blanket_verdict():
    res = _results(head=(2.0, -1.5, 0.5))
    hi = report.control_effects(res)["headroom"]["hi"]
    text = report.controls_text(res)
    assert "uninformative" not in text
    assert f"gained at most {hi:+.1f} points here (upper end of its 95% interval)" in text
    mdd = report.paired(table.of(res), "hive", "uniform", "all").mdd()
    assert f"MDDs against the reference are hive {mdd:.1f} points" in text


def test_too_few_seeds_give_neither_control_a_verdict():
    text = _text(head=(5.0, 6.0), harm=(-3.0, -4.0))
    assert text.count("has no verdict: at least 3 seeds are needed") == 2
    assert "testbed responds" not in text and "costs" not in text


def test_a_harm_below_zero_says_the_instrument_sees_harm():
    assert "the instrument sees harm" in _text()


def test_a_harm_above_zero_says_the_negative_control_is_not_a_floor():
    res = _results(harm=(3.0, 4.0, 3.5))
    assert report.control_effects(res)["harm"]["verdict"] == "better"
    text = report.controls_text(res)
    assert "THE NEGATIVE CONTROL IS NOT A FLOOR" in text and "effective share" in text
    assert "not distinguishable from 0" not in text


def test_a_null_harm_gives_a_bound():
    res = _results(harm=(1.0, -1.0, 0.5))
    lo = report.control_effects(res)["harm"]["lo"]
    text = report.controls_text(res)
    assert f"lost at most {-lo:.1f} points here (lower end of its 95% interval)" in text


def test_no_positive_control_says_what_a_null_can_still_say():
    no_ctl = _results()
    no_ctl["controls"] = {}
    text = report.controls_text(no_ctl)
    assert "No positive control was measured" in text and "uninformative" not in text


def test_the_console_prints_headroom_harm_and_each_methods_share():
    from frontier_rl.experiment import controls_report

    lines = controls_report.console_lines(_results())
    assert lines[0].startswith("headroom (oracle − uniform): +6.0 [") and "better" in lines[0]
    assert lines[1].startswith("harm (oracle_negative − uniform): -3.5 [") and "worse" in lines[1]
    # hive is 0.5 points above uniform at every seed: 0.5 / 6 of the headroom
    assert lines[2].startswith("hive recovers 8% [")
