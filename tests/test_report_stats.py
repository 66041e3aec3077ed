"""Statistics that say only what they can: Holm's correction over the confirmatory family,
Fieller's interval for a share of the headroom, power only at pre-registered effects (at the sd
and at its chi-square upper bound), the TOST sample size, the eval-sampling floor of a paired
sd, and the report's labels and paired-difference curves built on them."""

import math
import os

import numpy as np
import pytest
from scipy import stats as sps

from frontier_rl.experiment import controls_report, report, stats, table

K, PROMPTS = 4, 200

# ----------------------------------------------------------------------------- Holm, p-values


def test_holm_on_a_known_family():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04, then the
    # running maximum: 0.02, 0.03, 0.06, 0.06
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert stats.holm([0.04]) == pytest.approx([0.04])
    assert stats.holm([]) == []
    with pytest.raises(ValueError, match="p-values in"):
        stats.holm([0.1, 1.5])


def test_holm_is_monotone_and_never_below_the_raw_p():
    rng = np.random.default_rng(0)
    for _ in range(200):
        p = rng.uniform(0, 1, rng.integers(1, 9)) ** 3
        adj = np.asarray(stats.holm(p))
        order = np.argsort(p)
        assert np.all(np.diff(adj[order]) >= -1e-15)  # same order as the raw p
        assert np.all(adj >= p - 1e-15) and np.all(adj <= 1)
        assert np.all(adj <= np.minimum(1, len(p) * p) + 1e-15)  # never worse than Bonferroni


def test_p_value_is_the_paired_t_test():
    d = [1.0, 2.5, 0.3, 1.7]
    iv = stats.seed_interval(d)
    assert stats.p_value(iv) == pytest.approx(sps.ttest_1samp(d, 0.0).pvalue)
    assert (stats.p_value(iv) < 0.05) == (stats.verdict(iv) == "better")
    assert stats.p_value(stats.seed_interval([1.0])) is None
    assert stats.p_value(stats.seed_interval([2.0, 2.0, 2.0])) == 0.0


def test_tost_p_agrees_with_the_equivalence_verdict():
    rng = np.random.default_rng(1)
    for _ in range(100):
        d = rng.normal(rng.uniform(-2, 2), rng.uniform(0.2, 2), rng.integers(3, 8))
        equivalent = stats.equivalence(d, 1.5).startswith(stats.EQUIVALENT)
        assert (stats.tost_p(stats.seed_interval(d), 1.5) < 0.05) == equivalent


# ----------------------------------------------------------------------------- Fieller


def test_fieller_with_an_exact_denominator_is_the_numerators_t_interval_over_it():
    # den has no spread: the interval is (mean(num) +- t * sd(num) / sqrt(n)) / 10
    r = stats.fieller([4.0, 5.0, 6.0], [10.0, 10.0, 10.0])
    half = 4.302653 * 1.0 / math.sqrt(3) / 10
    assert r.bounded and r.estimate == pytest.approx(0.5)
    assert (r.lo, r.hi) == pytest.approx((0.5 - half, 0.5 + half), rel=1e-6)


def test_fieller_bounds_are_where_the_paired_t_test_of_num_minus_rho_den_stops_rejecting():
    num, den = np.array([1.0, 2.5, 1.5, 3.0]), np.array([4.0, 5.5, 6.0, 7.5])
    r = stats.fieller(num, den)
    assert r.bounded and r.lo < r.estimate < r.hi
    for rho in (r.lo, r.hi):  # the t-interval of num - rho * den has an end at 0
        iv = stats.seed_interval(num - rho * den)
        assert min(abs(iv.lo), abs(iv.hi)) == pytest.approx(0.0, abs=1e-9)


def test_fieller_is_unbounded_when_the_headroom_includes_zero():
    den = [2.0, -1.5, 0.5]
    assert not stats.seed_interval(den).excludes_zero()
    r = stats.fieller([1.0, 0.0, 0.4], den)
    assert not r.bounded and r.lo == -math.inf and r.hi == math.inf
    assert math.isnan(stats.fieller([1.0], [2.0]).lo)


# ----------------------------------------------------------------------------- power


def test_sd_upper_bound_matches_scipy_chi2():
    for n in (2, 3, 5, 10):
        for conf in (0.80, 0.95):
            want = 1.3 * math.sqrt((n - 1) / sps.chi2.ppf(1 - conf, n - 1))
            assert stats.sd_upper(1.3, n, conf) == pytest.approx(want, rel=1e-10)
    assert stats.SD_UPPER == 0.80
    assert math.isnan(stats.sd_upper(1.0, 1))


def test_power_never_reads_the_observed_mean():
    effects = {"heapa": {"points": 1.8, "source": "HeaPA Tables 1-2"}}
    d = np.array([0.4, 1.9, -0.7, 1.1])
    plans = [stats.power_plan(iv.sd, iv.n, effects)
             for iv in (stats.seed_interval(d), stats.seed_interval(d + 5.0),
                        stats.seed_interval(d - 3.0))]
    assert plans[0] == plans[1] == plans[2]
    p = plans[0]["heapa"]
    sd = float(np.std(d, ddof=1))
    assert p["seeds"] == stats.seeds_for_power(1.8, sd)
    assert p["seeds_at_sd_hi"] == stats.seeds_for_power(1.8, stats.sd_upper(sd, 4))
    assert p["seeds_at_sd_hi"] >= p["seeds"] and p["source"] == "HeaPA Tables 1-2"


def test_mdd_at_the_upper_bound_scales_by_the_chi2_factor():
    iv = stats.seed_interval([1.0, 3.0, 2.0, 6.0])
    assert iv.mdd_hi() == pytest.approx(iv.mdd() * stats.sd_upper(1.0, 4))
    assert iv.fmt_mdd_both() == f"{iv.mdd():.1f} / {iv.mdd_hi():.1f}"
    assert stats.seed_interval([1.0]).fmt_mdd_both() == "undefined (1 seed)"


def test_tost_power_matches_simulation_and_tost_seeds_is_the_smallest():
    rng = np.random.default_rng(3)
    for n in (3, 6):
        d = rng.normal(0.0, 1.0, size=(40_000, n))
        shown = [stats.equivalence_interval(x) for x in d[:4000]]
        sim = np.mean([-1.5 < lo and hi < 1.5 for lo, hi in shown])
        assert stats.tost_power(n, 1.0, 1.5) == pytest.approx(sim, abs=0.025)
    n = stats.tost_seeds(1.0, 1.5)
    assert stats.tost_power(n, 1.0, 1.5) >= 0.8 > stats.tost_power(n - 1, 1.0, 1.5)
    assert stats.tost_seeds(0.0, 1.5) == 2
    assert stats.tost_seeds(2.0, 1.5) > n  # more spread, more seeds


# ----------------------------------------------------------------------------- eval floor


def test_eval_floor_on_a_constructed_case():
    # k = 4, two prompts: arm a solves 2/4 and 1/4, arm b 2/4 and 2/4 (one seed)
    a, b = np.array([[50.0, 25.0]]), np.array([[50.0, 50.0]])
    var = ((0.25 + 0.1875) + (0.25 + 0.25)) / 3 / 2 ** 2
    assert stats.eval_floor_sd(a, b, 4) == pytest.approx(100 * math.sqrt(var))
    # a seed's variance is averaged, not its sd: two seeds, one all solved (floor 0)
    two = stats.eval_floor_sd(np.vstack([a, [[100.0, 100.0]]]),
                              np.vstack([b, [[100.0, 100.0]]]), 4)
    assert two == pytest.approx(100 * math.sqrt(var / 2))


def test_eval_floor_is_the_paired_sd_when_seeds_add_no_spread():
    rng = np.random.default_rng(4)
    p = rng.uniform(0.1, 0.9, size=(1, 300))
    a = rng.binomial(8, np.repeat(p, 400, axis=0)) / 8 * 100
    b = rng.binomial(8, np.repeat(p, 400, axis=0)) / 8 * 100
    sd = float(np.std(stats.seed_means(a) - stats.seed_means(b), ddof=1))
    assert stats.eval_floor_sd(a, b, 8) == pytest.approx(sd, rel=0.1)


# ----------------------------------------------------------------------------- the report


def _run(method, seed, acc, spread=0):
    """A run on one bucket ("all") at final accuracy `acc`%; `spread` moves solved samples
    between prompts (same mean) so the eval-sampling floor is not 0."""
    n_correct = round(acc / 100 * K * PROMPTS)
    counts = [n_correct // PROMPTS + (1 if i < n_correct % PROMPTS else 0)
              for i in range(PROMPTS)]
    for i in range(spread):
        if counts[2 * i] < K and counts[2 * i + 1] > 0:
            counts[2 * i] += 1
            counts[2 * i + 1] -= 1
    curve = {"rollouts": [0, 500, 1000], "pflops": [0.0, 0.005, 0.01],
             "updates": [0, 20, 40], "metric": [20.0, (20.0 + acc) / 2, acc],
             "correct_counts": [counts, counts, counts], "step": [0, 5, 10],
             "buckets": {"all": [20.0, (20.0 + acc) / 2, acc]}}
    return {"method": method, "seed": seed, "k": K, "final": acc, "curve": curve,
            "rollouts": 1000, "pflops": 0.01, "steps": 10, "updates": 40,
            "effective_rollouts": 500, "zero_var_easy": 0.1, "zero_var_hard": 0.2,
            "final_buckets": {"all": acc},
            "target": None, "rollouts_to_target": None, "pflops_to_target": None,
            "rolled_pass_hist": [0.2, 0.6, 0.2], "zero_var_curve": {
                "rollouts": [500, 1000], "easy": [0.1, 0.1], "hard": [0.2, 0.2]},
            "aug": {"aug_reward": []}, "time_s": {p: 1.0 for p in (
                "generate", "verify", "entropy", "update", "select", "eval")},
            "pflops_formula": 0.01, "padding_ratio": 1.0}


def _results(heapa=(2.0, 3.0, 2.5), oracle=(5.0, 6.0, 7.0), hive=(0.5, -0.5, 0.2)):
    runs = []
    for s in range(len(heapa)):
        runs += [_run("uniform", s, 30.0 + s, spread=40), _run("heapa", s, 30.0 + s + heapa[s]),
                 _run("hive", s, 30.0 + s + hive[s]),
                 _run("oracle", s, 30.0 + s + oracle[s])]
    return {"methods": ["uniform", "heapa", "hive", "oracle"], "runs": runs,
            "seeds": list(range(len(heapa))), "k": K, "metric": f"eval/avg@{K}/all",
            "target_method": "uniform", "rollout_reference": "uniform",
            "controls": {"oracle": "positive"}, "equivalence_margin": 1.5,
            "equivalence_margin_source": "below HeaPA's smallest gain (+1.8 points)"}


def test_share_of_the_headroom_is_fieller_on_the_per_seed_differences():
    res = _results()
    share = report.headroom_shares(res)["heapa"]
    x = np.array([2.0, 3.0, 2.5])
    o = np.array([5.0, 6.0, 7.0])
    want = stats.fieller(x, o)
    assert share["share"] == pytest.approx(2.5 / 6.0, abs=0.01)
    assert (share["lo"], share["hi"]) == pytest.approx((want.lo, want.hi), abs=0.01)
    text = controls_report.share_table(res)
    want = f"recovers {100 * share['share']:.0f}% [{100 * share['lo']:.0f}%, "
    assert f"| heapa | {want}" in text
    row = report.main_table(res).split("| heapa |")[1].split("\n")[0]  # the printed summary
    assert row.endswith(f" {want[len('recovers '):]}{100 * share['hi']:.0f}%] |")


def test_share_says_unbounded_when_the_headroom_includes_zero():
    res = _results(oracle=(2.0, -1.5, 0.5))
    share = report.headroom_shares(res)["heapa"]
    assert not share["bounded"] and share["lo"] is None and share["hi"] is None
    assert "unbounded (headroom not distinguishable from 0)" in controls_report.share_table(res)


def test_confirmatory_family_is_holm_adjusted_and_the_rest_is_exploratory():
    res = _results()
    fam = report.family(res)
    methods = [x for x in fam if x["kind"] == "method"]
    assert [x["name"] for x in methods] == ["heapa", "hive"]  # never the controls
    # "HeaPA beats uniform" is heapa's main-table test again (uniform is the reference): it
    # takes heapa's adjusted p and is not counted twice
    same = next(x for x in fam if x["name"] == "HeaPA beats uniform GRPO at equal rollouts")
    assert same["same_as"] == "heapa" and same["p_holm"] == methods[0]["p_holm"]
    counted = [x for x in fam if "same_as" not in x]
    assert [x["name"] for x in counted] == [
        "heapa", "hive", "Heap sampling shifts mass to the medium band (0 < pass rate < 1)"]
    raw = [1.0 if x["p"] is None else x["p"] for x in counted]
    assert [x["p_holm"] for x in counted] == pytest.approx(stats.holm(raw))
    heapa = report.paired(table.of(res), "heapa", "uniform", "all")
    assert methods[0]["p"] == pytest.approx(stats.p_value(heapa))
    row = report.main_table(res).split("| heapa |")[1].split("\n")[0]
    assert f"confirmatory (Holm-adjusted p = {methods[0]['p_holm']:.3g}" in row
    assert "confirmatory (Holm-adjusted p = " in report.claims_table(res)
    # a declared family: only hive; heapa's verdict and the claims become exploratory
    res["confirmatory_declared"] = ["hive"]
    fam = report.family(res)
    assert [x["name"] for x in fam] == ["hive"]
    assert fam[0]["p_holm"] == pytest.approx(fam[0]["p"])
    assert "| exploratory |" in report.main_table(res).split("| heapa |")[1].split("\n")[0]


def test_family_label_says_what_holm_changed():
    assert controls_report.family_label(None) == "exploratory"
    lost = {"p": 0.03, "p_holm": 0.09}
    assert controls_report.family_label(lost) == (
        "confirmatory (Holm-adjusted p = 0.09; not significant after Holm)")
    assert "fewer than 3 seeds" in controls_report.family_label({"p": None, "p_holm": 1.0})


def test_main_table_puts_the_seed_sd_beside_its_eval_sampling_floor():
    res = _results()
    tab = table.of(res)
    d = report.paired(tab, "heapa", "uniform", "all")
    floor = report.eval_floor(tab, "heapa", "uniform", "all")
    assert floor > 0
    row = report.main_table(res).split("| heapa |")[1].split("\n")[0]
    assert f"seed sd {d.sd:.2f}, eval-sampling floor {floor:.2f}" in row
    assert f"{d.mdd():.1f} / {d.mdd_hi():.1f}" in row


def test_power_tables_give_seeds_at_the_sd_and_its_upper_bound():
    res = _results()
    rows = {r["claim"]: r for r in report.power_rows(res)}
    heapa = rows["HeaPA beats uniform GRPO"]
    assert heapa["seeds_needed_at_sd_hi"]["1.8"] == stats.seeds_for_power(1.8, heapa["sd_hi"])
    assert heapa["sd_hi"] == pytest.approx(stats.sd_upper(heapa["sd"], 3))
    table = controls_report.power_plan_table(res)
    assert "| heapa − uniform | 3 |" in table and "heapa +1.8: " in table
    res["effect_sizes"] = {"big": {"points": 5.0, "source": "a test"}}
    assert "big +5: " in controls_report.power_plan_table(res)


def test_tost_verdict_carries_the_margin_rationale_and_the_seeds_it_needs():
    res = _results(hive=(0.3, -0.2, 0.1))
    res["methods"].append("ds")
    res["runs"] += [dict(_run("ds", s, 30.0 + s), method="ds") for s in range(3)]
    eq = next(c for c in report.claims(res) if c["claim"] == "HIVE's accuracy is equivalent "
              "to DS's")
    assert "why this margin: below HeaPA's smallest gain (+1.8 points)" in eq["note"]
    assert "TOST needs" in eq["note"] and "80% upper bound" in eq["note"]
    assert "p" in eq


def test_paired_curves_are_differences_per_seed_at_every_evaluation():
    res = _results()
    curves = report.paired_curves(table.of(res), "heapa", "uniform", "rollouts")
    assert len(curves) == 3
    x, d = curves[1]
    assert x.tolist() == [0, 500, 1000]
    assert d.tolist() == pytest.approx([0.0, 1.5, 3.0])  # heapa +3 at seed 1, halfway at 500


def test_report_labels_sections_and_writes_the_paired_plots(tmp_path):
    res = _results()
    res.update(budget=1000, steps_budget=0, batch_size=8, group_size=K, target_value=0.0,
               target_margin=0.0, shared_start=False)
    out = report.write(res, str(tmp_path))
    text = out["text"]
    assert text.count("*Exploratory*") >= 5
    assert "Confirmatory family (all, the default compare.confirmatory)" in text
    assert "pointwise and unpaired" in text
    assert "### Each method's effect as a share of the headroom" in text
    assert "seeds for 80% power at this effect" not in text
    names = {os.path.basename(p) for p in out["plots"]}
    assert {"paired_difference_vs_rollouts.png", "paired_difference_vs_updates.png"} <= names


def _config():
    import importlib.util

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location(
        "compare_arith", os.path.join(root, "configs/compare_arith.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.get_config("smoke")


@pytest.mark.parametrize("field,value,words", [
    ("equivalence_margin_source", "", "compare.equivalence_margin_source=''"),
    ("effect_sizes", {}, "compare.effect_sizes={}"),
    ("effect_sizes", {"h": {"points": 1.8}}, "compare.effect_sizes.h is not allowed"),
    ("effect_sizes", {"h": {"points": -1.0, "source": "x"}}, "compare.effect_sizes.h.points=-1.0"),
    ("effect_sizes", {"h": {"points": 1.8, "source": " "}}, "compare.effect_sizes.h.source"),
    ("confirmatory", "some", "compare.confirmatory='some'"),
    ("confirmatory", [], r"compare.confirmatory=\[\]"),
])
def test_bad_statistics_fields_are_named(field, value, words):
    from frontier_rl import config_lib
    from frontier_rl.experiment import compare

    cfg = _config()
    if field in cfg.compare:
        del cfg.compare[field]
    cfg.compare[field] = value
    with pytest.raises(config_lib.ConfigError, match=words):
        compare.validate(cfg)


def test_statistics_fields_default_to_the_papers_effects():
    from frontier_rl.experiment import compare

    cfg = _config()
    for field in ("equivalence_margin_source", "effect_sizes", "confirmatory"):
        if field in cfg.compare:
            del cfg.compare[field]
    compare.validate(cfg)
    assert compare.DEFAULTS["effect_sizes"]["heapa"]["points"] == 1.8
    assert compare.DEFAULTS["confirmatory"] == "all"
    cfg.compare.confirmatory = ["heapa", "HeaPA beats uniform GRPO at equal rollouts"]
    cfg.compare.effect_sizes = {"heapa": {"points": 1.8, "source": "HeaPA Tables 1-2"}}
    compare.validate(cfg)


def test_the_signed_rank_check_beside_t_is_wilcoxons_exact_test():
    """Six differences of one sign: the exact two-sided p is 2 / 2^6; a seed far out moves the
    t-test's p but not the ranks'; fewer than six seeds give none."""
    same_sign = stats.seed_interval([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert stats.signed_rank_p(same_sign) == pytest.approx(2 / 64)
    outlier = stats.seed_interval([1.0, 2.0, 3.0, 4.0, 5.0, 600.0])
    assert stats.signed_rank_p(outlier) == pytest.approx(2 / 64)
    assert stats.p_value(outlier) > 0.3 > stats.p_value(same_sign)
    mixed = stats.seed_interval([1.0, -2.0, 3.0, -4.0, 5.0, -6.0])
    assert stats.signed_rank_p(mixed) > 0.5
    assert stats.signed_rank_p(stats.seed_interval([1.0, 2.0, 3.0, 4.0, 5.0])) is None
    assert stats.signed_rank_p(stats.seed_interval([0.0] * 6)) is None
