"""The control arms (selection/oracle.py) and how the report treats them: the oracle reads
measured pass rates, never labels; headroom and harm come paired per seed; controls are never
rows of the main table or the claims."""

import dataclasses

import numpy as np
import pytest

from frontier_rl import selection
from frontier_rl.experiment import report, stats
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
    runs = []
    for s in range(3):
        runs += [_run("uniform", s, 30.0 + s), _run("hive", s, 30.5 + s),
                 _run("oracle", s, 30.0 + s + head[s]),
                 _run("oracle_negative", s, 30.0 + s + harm[s])]
    return {"methods": ["uniform", "hive", "oracle", "oracle_negative"], "runs": runs,
            "seeds": [0, 1, 2], "k": K, "metric": f"eval/avg@{K}/all",
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
    assert h["seeds_for_80_power"] == stats.seeds_for_power(h["mean"], h["sd"])


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


def test_a_null_headroom_says_every_null_is_uninformative():
    text = report.controls_text(_results(head=(2.0, -1.5, 0.5)))
    assert "every null verdict in this report is uninformative" in text
    assert "seeds would detect it" in text
    text = report.controls_text(_results())
    assert "testbed responds to selection" in text
    no_ctl = _results()
    no_ctl["controls"] = {}
    assert "No positive control was run" in report.controls_text(no_ctl)
