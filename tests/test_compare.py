"""The matched-budget runner and its report: planning, budgets, skip-on-rerun, artefacts."""

import copy
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from frontier_rl import config_lib
from frontier_rl.experiment import compare, report, stats, table, two_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_config(arg="smoke", name="compare_arith"):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, f"configs/{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.get_config(arg)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("compare"))
    results = compare.run(_load_config(), workdir)
    return workdir, results


def test_plan_applies_deltas_and_gives_each_seed_its_warm_start(tmp_path):
    cfg = _load_config()
    cfg.compare.run = "uniform,hive"
    cfg.compare.seeds = "0,3"
    specs = compare.plan(cfg, str(tmp_path))
    assert [s.name for s in specs] == ["uniform-s0", "uniform-s3", "hive-s0", "hive-s3"]
    assert {s.config.selector.name for s in specs} == {"uniform", "hive"}
    # one warm start per seed, shared by the methods at that seed
    assert [s.config.warmstart.seed for s in specs] == [0, 3, 0, 3]
    assert [s.config.warmstart.cache_dir for s in specs] == [
        str(tmp_path / "warmstart" / f"s{x}") for x in (0, 3, 0, 3)]
    assert {s.config.task.data_seed for s in specs} == {0}
    assert [s.config.seed for s in specs] == [0, 3, 0, 3]
    assert {s.config.rl.rollout_budget for s in specs} == {cfg.compare.rollout_budget}
    assert {s.config.eval.every_rollouts for s in specs} == {
        cfg.compare.rollout_budget // cfg.compare.evals}
    # same method + seed -> same fingerprint; another method -> another
    assert compare.fingerprint(specs[0].config) == compare.fingerprint(
        copy.deepcopy(specs[0].config))
    assert compare.fingerprint(specs[0].config) != compare.fingerprint(specs[2].config)


def test_the_noise_pilot_plans_every_regime_from_both_shipped_starts(tmp_path):
    mod_cfg = _load_config("noise_pilot")
    specs = compare.plan(mod_cfg, str(tmp_path))
    regimes = {(s.config.rl.group_size, tuple(s.config.task.bucket_weights)) for s in specs}
    assert len(regimes) == 6 and {g for g, _ in regimes} == {4, 8, 16}
    assert {s.config.rl.learning_rate for s in specs} == {1e-4}
    assert {s.config.rl.noise_every for s in specs} == {2}
    assert {s.config.rl.num_steps for s in specs} == {40}
    # the tuning seeds, each from its shipped start: never a confirmation seed
    assert {(s.seed, s.config.warmstart.start) for s in specs} == {
        (10, "configs/starts/arith_s0"), (12, "configs/starts/arith_s1")}
    assert mod_cfg.compare.target == "g8_sparse"


def test_shared_start_keeps_one_warm_start(tmp_path):
    cfg = _load_config()
    cfg.compare.seeds = "0,3"
    cfg.compare.shared_start = True
    specs = compare.plan(cfg, str(tmp_path))
    assert {s.config.warmstart.cache_dir for s in specs} == {str(tmp_path / "warmstart")}
    assert {s.config.warmstart.seed for s in specs} == {cfg.warmstart.seed
                                                        if cfg.warmstart.seed >= 0 else cfg.seed}


@pytest.mark.parametrize("shared", [True, False])
def test_a_named_warm_start_cache_is_honoured(tmp_path, shared):
    """Two comparisons naming one warmstart.cache_dir start from the same policies; the
    starting point's record names the cache and a digest of its key."""
    cfg = _load_config()
    cfg.compare.seeds = "0,3"
    cfg.compare.shared_start = shared
    cfg.warmstart.cache_dir = str(tmp_path / "other" / "warmstart")
    specs = compare.plan(cfg, str(tmp_path / "this"))
    want = [str(tmp_path / "other" / "warmstart")] * 2 if shared else [
        str(tmp_path / "other" / "warmstart" / f"s{x}") for x in (0, 3)]
    assert [s.config.warmstart.cache_dir for s in specs][:2] == want
    first, again = (compare.start_cache(s.config) for s in (specs[0], copy.deepcopy(specs[0])))
    assert first == again and first["dir"] == want[0] and len(first["key"]) == 16
    other = copy.deepcopy(specs[0].config)
    other.warmstart.target_acc = 0.5
    assert compare.start_cache(other)["key"] != first["key"]


def test_steps_budget_matches_updates(tmp_path):
    cfg = _load_config()
    cfg.compare.budget = "steps"
    cfg.compare.steps = 7
    cfg.compare.evals = 3
    specs = compare.plan(cfg, str(tmp_path))
    assert {s.config.rl.num_steps for s in specs} == {7}
    assert {s.config.rl.rollout_budget for s in specs} == {0}
    assert {(s.config.eval.every, s.config.eval.every_rollouts) for s in specs} == {(2, 0)}


@pytest.mark.parametrize("field,value,words", [
    ("run", "uniform,nosuch", "compare.run names 'nosuch'"),
    ("run", "", "compare.run is empty"),
    ("seeds", "0,x", "compare.seeds='0,x'"),
    ("seeds", "1,1", "compare.seeds='1,1'"),
    ("rollout_budget", 0, "compare.rollout_budget=0"),
    ("target", "nosuch", "compare.target='nosuch'"),
    ("budget", "updates", "compare.budget='updates'"),
    ("steps", -1, "compare.steps=-1"),
    ("evals", 0, "compare.evals=0"),
    ("metric", "", "compare.metric=''"),
    ("target_value", -1.0, "compare.target_value=-1.0"),
    ("target_margin", "2", "compare.target_margin='2'"),
    ("shared_start", 1, "compare.shared_start=1"),
])
def test_bad_compare_fields_are_named(field, value, words, tmp_path):
    cfg = _load_config()
    del cfg.compare[field]  # a fresh field: any type, as a config written by hand may hold
    cfg.compare[field] = value
    with pytest.raises(config_lib.ConfigError, match=words.replace("(", r"\(")):
        compare.plan(cfg, str(tmp_path))


def test_steps_budget_needs_steps(tmp_path):
    cfg = _load_config()
    cfg.compare.budget = "steps"
    with pytest.raises(config_lib.ConfigError, match="compare.steps=0 is not allowed with "
                                                      "compare.budget='steps'"):
        compare.plan(cfg, str(tmp_path))
    cfg.compare.steps = 4
    cfg.compare.evals = 5
    with pytest.raises(config_lib.ConfigError, match=r"compare.evals=5 .* \[1, compare.steps\]"):
        compare.plan(cfg, str(tmp_path))


def test_bad_ablations_and_notes_are_named(tmp_path):
    cfg = _load_config()
    cfg.compare.ablations = {"x": {"method": "hive", "ablation": "nosuch", "question": "q?"}}
    with pytest.raises(config_lib.ConfigError,
                       match="compare.ablations.x.ablation='nosuch' is not in compare.methods"):
        compare.plan(cfg, str(tmp_path))
    cfg.compare.ablations = {"x": {"method": "hive", "ablation": "uniform"}}
    with pytest.raises(config_lib.ConfigError, match="compare.ablations.x is not allowed"):
        compare.plan(cfg, str(tmp_path))
    cfg.compare.ablations = {"x": {"method": "hive", "ablation": "uniform", "question": "q?"}}
    cfg.compare.settings_notes = {"hive": ""}
    with pytest.raises(config_lib.ConfigError, match="compare.settings_notes.hive=''"):
        compare.plan(cfg, str(tmp_path))
    cfg.compare.settings_notes = {"hive": "Stage 1 threshold lowered so it rejects"}
    compare.plan(cfg, str(tmp_path))


def test_sections_without_the_new_fields_get_defaults(tmp_path):
    cfg = _load_config()
    for field in compare.DEFAULTS:
        if field in cfg.compare:
            del cfg.compare[field]
    specs = compare.plan(cfg, str(tmp_path))
    assert specs[0].config.warmstart.cache_dir == str(tmp_path / "warmstart" / "s0")
    assert specs[0].config.rl.rollout_budget == cfg.compare.rollout_budget


def test_delta_with_unknown_field_names_its_path(tmp_path):
    cfg = _load_config()
    with cfg.compare.methods.unlocked():
        cfg.compare.methods["bad"] = {"selector": {"name": "hive", "hive": {"nosuch": 1}}}
    cfg.compare.run = "bad"
    with pytest.raises(config_lib.ConfigError, match=r"compare\.methods\.bad\.selector\.hive"
                                                      r"\.nosuch"):
        compare.plan(cfg, str(tmp_path))


def test_delta_with_bad_value_names_method(tmp_path):
    cfg = _load_config()
    with cfg.compare.methods.unlocked():
        cfg.compare.methods["bad"] = {"rl": {"learning_rate": -1.0}}
    cfg.compare.run = "bad"
    with pytest.raises(config_lib.ConfigError, match="method 'bad': rl.learning_rate=-1.0"):
        compare.plan(cfg, str(tmp_path))


def test_runs_match_budget_and_write_artefacts(smoke):
    workdir, results = smoke
    for name in ("results.json", "report.md"):
        assert os.path.getsize(os.path.join(workdir, name)) > 0
    plots = os.listdir(os.path.join(workdir, "plots"))
    assert {"accuracy_vs_rollouts.png", "accuracy_vs_pflops.png", "zero_variance.png",
            "sampled_pass_rate.png"} <= set(plots)
    on_disk = json.load(open(os.path.join(workdir, "results.json")))
    assert [r["method"] for r in on_disk["runs"]] == ["uniform", "hive"]
    budget = results["budget"]
    for r in results["runs"]:
        # within one step's rollouts of the budget (steps differ per method: HIVE tops up)
        recs = [json.loads(x) for x in open(os.path.join(workdir, "runs",
                                                         f"{r['method']}-s0", "metrics.jsonl"))]
        step_max = max(x.get("rollout/step", 0) for x in recs)
        assert abs(r["rollouts"] - budget) <= step_max
        assert r["max_step_rollouts"] == step_max
        assert r["curve"]["rollouts"][0] == 0 and r["curve"]["rollouts"][-1] == r["rollouts"]
        assert r["pflops"] > 0 and len(r["curve"]["metric"]) >= 2
        assert sum(r["rolled_pass_hist"]) == pytest.approx(1.0)
        # steps, optimizer updates (epochs x minibatches per step, none skipped here)
        cfg = _load_config()
        assert r["steps"] >= 1
        assert r["updates"] == r["steps"] * cfg.rl.epochs * cfg.rl.minibatches
        assert on_disk["runs"][results["runs"].index(r)]["updates"] == r["updates"]
        # the run's regime as its config set it, and its noise estimates' means for pooling
        assert r["regime"] == {"group_size": cfg.rl.group_size, "batch_size": cfg.rl.batch_size,
                               "learning_rate": cfg.rl.learning_rate,
                               "bucket_weights": list(cfg.task.get("bucket_weights") or [])}
        assert set(r["gns"]) == {"g2", "s", "n"} and r["gns"]["n"] >= 0
    # mechanisms: per method, each counter's total and per-seed value
    for counters in on_disk["mechanisms"].values():
        for c in counters.values():
            assert set(c) == {"total", "per_seed"} and c["total"] == sum(c["per_seed"].values())
            assert set(c["per_seed"]) == {"0"}
    assert isinstance(on_disk["mechanisms_missing"], list)
    assert os.path.isdir(os.path.join(workdir, "warmstart", "s0"))  # the seed's own warm start
    assert on_disk["starts"]["0"]["steps"] == cfg.warmstart.steps
    text = open(os.path.join(workdir, "report.md")).read()
    assert "## Accuracy at equal rollout budget" in text and "| uniform | 1 |" in text
    assert "## The papers' claims, measured here" in text
    for section in ("## Settings chosen so mechanisms fire", "## Per-bucket differences vs",
                    "## Ablations: what each mechanism adds", "## Starting point"):
        assert section in text
    # one seed: the interval is absent and no verdict is given
    hive = text.split("| hive | 1 |")[1].split("\n")[0]
    assert "too few seeds for a verdict" in hive and "undefined (1 seed)" in hive


def test_identical_policies_score_identically_common_random_numbers(smoke):
    """Every arm at a seed evaluates with the same sampling seed (common random numbers): at
    step 0, before any update, two methods' policies are the same warm start, and their
    per-prompt correct counts, so their paired difference, are exactly equal; evaluation noise
    cancels in a paired difference as far as the policies agree."""
    _, results = smoke
    first = {}
    for r in results["runs"]:
        first.setdefault(r["seed"], []).append((r["method"], r["curve"]["correct_counts"][0],
                                                r["curve"]["metric"][0]))
    assert any(len(v) >= 2 for v in first.values())
    for arms in first.values():
        (_, counts, acc), *others = arms
        for _, c, a in others:
            assert c == counts and a == acc
    # the sampling seed itself: tests/test_evaluation.py (identical policies, other seeds)


def test_rerun_skips_finished_runs(smoke, capsys):
    workdir, results = smoke
    mtimes = {d: os.path.getmtime(os.path.join(workdir, "runs", d, "metrics.jsonl"))
              for d in os.listdir(os.path.join(workdir, "runs"))}
    again = compare.run(_load_config(), workdir)
    out = capsys.readouterr().out
    assert out.count("finished earlier, skipped") == 2
    assert mtimes == {d: os.path.getmtime(os.path.join(workdir, "runs", d, "metrics.jsonl"))
                      for d in mtimes}
    def strip(runs):  # as JSON text, so NaN (e.g. no augmentation share) compares equal
        return json.dumps([{k: v for k, v in r.items() if k != "time_s"} for r in runs])

    assert strip(again["runs"]) == strip(results["runs"])


def test_changed_config_is_not_silently_skipped(smoke):
    workdir, _ = smoke
    cfg = _load_config()
    cfg.compare.rollout_budget = 200
    with pytest.raises(config_lib.ConfigError, match="finished run of another config"):
        compare.run(cfg, workdir)


BUCKETS = ["3op"] * 128 + ["4op"] * 128


def _fake_run(method, seed, rollouts_curve, metric_curve, hist, zv=(0.1, 0.3), steps=10,
              mech=None):
    """A run result as compare.collect makes it, metric "4op": per-prompt counts at each eval
    point are binomial around the curve's value (the 3op prompts 20 points easier), on eval
    prompts of the same difficulty at a seed."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 1, size=256) + np.where(np.asarray(BUCKETS) == "3op", 0.2, 0.0)
    noise = np.random.default_rng([seed, sum(map(ord, method))])
    counts = [noise.binomial(8, np.clip(p + (m - 50) / 100, 0, 1)).tolist()
              for m in metric_curve]

    def acc(c, bucket):
        keep = [b == bucket or bucket == "all" for b in BUCKETS]
        return float(100 * np.mean(np.asarray(c)[keep]) / 8)

    buckets = {b: [acc(c, b) for c in counts] for b in ("3op", "4op", "all")}
    return {"method": method, "seed": seed, "k": 8, "rollouts": rollouts_curve[-1],
            "steps": steps, "updates": 4 * steps,
            "effective_rollouts": rollouts_curve[-1] // 2, "pflops": 1.0, "pflops_formula": 0.9,
            "padding_ratio": 1.2, "final": metric_curve[-1], "best": max(metric_curve),
            "final_buckets": {b: v[-1] for b, v in buckets.items()},
            "zero_var_easy": zv[0], "zero_var_hard": zv[1],
            "curve": {"step": [steps * i // (len(metric_curve) - 1)
                               for i in range(len(metric_curve))],
                      "rollouts": rollouts_curve, "pflops": [x / 1e5 for x in rollouts_curve],
                      "metric": metric_curve, "correct_counts": counts, "buckets": buckets},
            "eval_buckets": BUCKETS, "rolled_pass_hist": hist, "mechanisms": mech or {},
            "mechanisms_required": [], "aug": {"aug_reward": []},
            "zero_var_curve": {"rollouts": rollouts_curve[1:], "easy": [zv[0]] * 3,
                               "hard": [zv[1]] * 3},
            "time_s": dict.fromkeys(("generate", "verify", "entropy", "update", "select",
                                     "eval"), 1.0),
            "start": {"steps": 20, "loss": 1.25, "check_acc": 0.81, "frontier_acc": 0.07}}


X = [0, 1000, 2000, 3000]
MEDIUM = [0.1, 0.8, 0.1]
TAILS = [0.45, 0.1, 0.45]


def _results(seeds=(0, 1, 2), metric="4op", **extra) -> dict:
    runs = []
    for seed in seeds:
        runs += [_fake_run("uniform", seed, X, [30, 35, 38, 40], TAILS),
                 _fake_run("ds", seed, X, [30, 33, 37, 41], TAILS, zv=(0.2, 0.4)),
                 _fake_run("hive", seed, X, [30, 39 + seed % 2, 42, 41], TAILS,
                           zv=(0.05, 0.1)),
                 _fake_run("heapa", seed, X, [30, 30, 30, 30], MEDIUM)]
    res = {"methods": ["uniform", "ds", "hive", "heapa"], "runs": runs, "seeds": list(seeds),
           "k": 8, "eval_prompts": 256, "metric": f"eval/avg@8/{metric}",
           "target_method": "uniform", "rollout_reference": "ds", "budget_kind": "rollouts",
           "budget": 3000, "steps_budget": 0, "batch_size": 8, "group_size": 8,
           "target_value": 0.0, "target_margin": 0.0, "shared_start": False}
    for r in runs:  # the targets compare.collect sets: uniform's final accuracy per seed
        r["target"] = 40.0
        r["rollouts_to_target"] = stats.to_target(r["curve"], 40.0, "rollouts")
        r["pflops_to_target"] = stats.to_target(r["curve"], 40.0, "pflops")
    res.update(extra)
    return res


def test_claims_follow_the_numbers():
    by = {c["claim"].split(" (")[0]: c for c in report.claims(_results())}
    # HIVE reaches DS's final accuracy (41) after 1,500-1,667 rollouts, DS after 3,000
    hive = by["HIVE reaches DS's accuracy with fewer rollouts"]
    assert hive["held"] == "better"
    assert "s0: DS final 41.0 at 3,000; HIVE 1,667" in hive["measured"]
    assert "s1: DS final 41.0 at 3,000; HIVE 1,500" in hive["measured"]  # 40 -> 42: halfway
    assert by["HeaPA beats uniform GRPO at equal rollouts"]["held"] == "worse"
    assert by["Heap sampling shifts mass to the medium band"]["held"] == "better"
    assert by["PathAgg >= ChildAgg"]["held"] == "n/a"
    zv = next(c for c in by.values() if c["claim"].startswith("HIVE has lower"))
    assert zv["held"] == "better" and "greso not run" in zv["note"]
    table = report.main_table(_results())
    assert "| heapa | 3 |" in table and "| worse |" in table and "| reference |" in table
    gains = report.gain_table(_results())
    assert "rose" in gains.split("| uniform |")[1].split("\n")[0]
    assert "n.d." in gains.split("| heapa |")[1].split("\n")[0]


def test_two_seeds_give_no_verdict_anywhere():
    res = _results(seeds=(0, 1))
    assert {c["held"] for c in report.claims(res)} <= {stats.TOO_FEW, "n/a"}
    row = report.main_table(res).split("| heapa | 2 |")[1].split("\n")[0]
    assert stats.TOO_FEW in row and "worse" not in row
    assert "(too few seeds)" in report.gain_table(res)


def test_a_hive_seed_that_never_reaches_ds_is_censored():
    res = _results()
    for r in res["runs"]:
        if r["method"] == "hive" and r["seed"] == 2:
            r["curve"]["metric"] = [30, 31, 32, 33]
    hive = next(c for c in report.claims(res) if c["claim"].startswith("HIVE reaches"))
    assert "s2: DS final 41.0 at 3,000; HIVE not reached (> 3,000)" in hive["measured"]
    assert "≤ " in hive["measured"]  # the ratio is an upper bound
    assert hive["held"] != "better"


def test_primary_bucket_and_all_in_the_main_and_bucket_tables():
    res = _results()
    head = report.main_table(res).split("\n")[0]
    assert "Avg@8 4op [95% CI]" in head and "Avg@8 all [95% CI]" in head
    assert "all vs uniform [95% CI]" in head and "MDD (80% power)" in head
    assert "| steps | updates | rollouts |" in head
    row = report.main_table(res).split("| heapa | 3 |")[1].split("\n")[0]
    assert row.startswith(" 10 ± 0 | 40 ± 0 | 3,000 ± 0 |")
    table = report.bucket_table(res)
    assert "| **4op** (primary) | heapa |" in table and "| 3op | heapa |" in table
    assert "| all | hive |" in table and "| all | uniform |" in table
    heapa_all = table.split("| all | heapa |")[1].split("\n")[0]
    assert "worse" in heapa_all
    # "all" as the primary: no secondary columns, the tables still work
    res = _results(metric="all")
    head = report.main_table(res).split("\n")[0]
    assert "Avg@8 all [95% CI]" in head and head.count("all") == 1  # no secondary columns
    assert "| **all** (primary) |" in report.bucket_table(res)


def test_ablation_effects_and_not_run():
    res = _results(ablations={
        "heap": {"method": "heapa", "ablation": "uniform", "question": "do heaps help?"},
        "stage2": {"method": "hive", "ablation": "hive_random_drop", "question": "entropy?"}})
    text = report.ablation_table(res)
    heap = text.split("| heap |")[1].split("\n")[0]
    assert "do heaps help?" in heap and "heapa − uniform" in heap and heap.count("worse") == 2
    assert "not run (add hive_random_drop to compare.run)" in text.split("| stage2 |")[1]
    assert "compare.ablations is empty" in report.ablation_table(_results())


def test_efficiency_table_states_every_seed_and_censoring():
    res = _results()
    for r in res["runs"]:
        if r["method"] == "heapa":
            assert r["rollouts_to_target"] is None
    text = report.efficiency_table(res)
    heapa = text.split("| heapa |")[1].split("\n")[0]
    assert "s0 not reached (> 3,000)" in heapa and "≤ " in heapa
    hive = text.split("| hive |")[1].split("\n")[0]
    assert "s1 1,000" in hive and "better" in hive  # ds / hive = 3000 / 1000-1667


def test_settings_notes_and_steps_budget_in_the_report(tmp_path):
    res = _results(settings_notes={"heapa": "capacity below the pool so eviction fires"},
                   budget_kind="steps", steps_budget=10)
    text = report.write(res, str(tmp_path))["text"]
    assert "- `heapa`: capacity below the pool so eviction fires" in text
    assert "Every run: 10 steps (matched updates; every run took them all)" in text
    assert "## Accuracy at equal steps (matched updates)" in text
    assert "linearly interpolated" in text and "censored" in text
    assert "None: compare.settings_notes" in report.notes_section(_results())


def test_bench_mean_interval_is_the_unweighted_mean_over_benchmarks():
    # 3 prompts of benchmark "a" all right, 1 of "b" wrong, k = 2: pooled 75%, bench mean 50%
    labels = ["a", "a", "a", "b"]
    runs = [{"method": "m", "seed": s, "k": 2, "eval_buckets": labels,
             "curve": {"correct_counts": [[0, 0, 0, 0], [2, 2, 2, 0]]}} for s in (0, 1)]
    tab = table.read({"methods": ["m"], "runs": runs})
    assert report.accuracy(tab, "m", "all").mean == pytest.approx(75.0)
    acc = report.accuracy(tab, "m", "bench_mean")
    assert acc.mean == pytest.approx(50.0)
    # both seeds give the same value: no spread
    assert acc.lo == pytest.approx(50.0) and acc.hi == pytest.approx(50.0)
    gain = report.paired(tab, "m", "m", "bench_mean", point_a=-1, point_b=0)
    assert gain.mean == pytest.approx(50.0)


def test_mechanisms_are_checked_per_method_and_seed():
    runs = [{"method": "hive", "seed": s, "mechanisms": {"stage1_rejected": v, "topup": 3},
             "mechanisms_required": ["stage1_rejected"]} for s, v in ((0, 5), (1, 0))]
    mech, missing = compare._mechanisms(runs)
    assert mech["hive"]["stage1_rejected"] == {"total": 5, "per_seed": {"0": 5, "1": 0}}
    assert missing == [["hive", 1, "stage1_rejected"]]  # the total (5) does not hide seed 1
    res = {"methods": ["hive", "heapa"], "seeds": [0, 1], "mechanisms": mech,
           "mechanisms_required": {"hive": ["stage1_rejected"], "heapa": ["boundary_draws"]},
           "mechanisms_missing": missing}
    text = report.mechanisms_table(res)
    assert "| hive | 0 | · | 5 | 3* |" in text and "| hive | 1 | · | **0 (!)** | 3* |" in text
    assert "| heapa | 0 | **0 (!)** | · | · |" in text  # required, never counted: flagged
    assert "MECHANISMS THAT NEVER RAN: hive seed 1: stage1_rejected" in text


def test_targets_are_pre_registered():
    cfg = _load_config()
    runs = [{"method": "uniform", "seed": 0, "final": 40.0, "best": 45.0},
            {"method": "uniform", "seed": 1, "final": 30.0, "best": 31.0},
            {"method": "hive", "seed": 0, "final": 50.0, "best": 50.0}]
    cfg.compare.target_value, cfg.compare.target_margin = 0.0, 0.0
    assert compare._per_seed_targets(cfg.compare, runs) == {0: 40.0, 1: 30.0}  # final, not best
    cfg.compare.target_margin = 2.0
    assert compare._per_seed_targets(cfg.compare, runs) == {0: 38.0, 1: 28.0}
    cfg.compare.target_value = 35.0
    assert compare._per_seed_targets(cfg.compare, runs) == {0: 35.0, 1: 35.0}


def test_required_mechanisms_follow_the_method_config():
    # the proof list is selection.mechanisms' for each planned run's config, deltas applied
    cfg = _load_config("full")
    need = {s.method: compare.required_mechanisms(s.config)
            for s in compare.plan(cfg, "/nonexistent")}
    assert "stage1_rejected" in need["hive"] and "stage1_rejected" not in need["hive_no_stage1"]
    assert "children_rolled_out" not in need["heap_only"]
    assert "children_rolled_out" in need["ps_aug"] and "skipped" in need["greso"]
    # the ablation pairs of `full` name methods it runs
    assert {m for a in cfg.compare.ablations.values() for m in (a.method, a.ablation)} <= set(need)


@pytest.mark.slow
def test_kill_then_rerun_resumes(tmp_path):
    """SIGKILL during the second run: the rerun skips the first and resumes the second."""
    workdir = str(tmp_path / "cmp")
    cmd = [sys.executable, "-m", "frontier_rl", "compare",
           "--config=configs/compare_arith.py:smoke", f"--workdir={workdir}",
           "--config.compare.rollout_budget=600", "--config.checkpoint.every=1",
           "--config.log.progress=True"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    ckpts = os.path.join(workdir, "runs", "hive-s0", "checkpoints")
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if os.path.isdir(ckpts) and any(d.isdigit() for d in os.listdir(ckpts)):
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the comparison ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert os.path.exists(os.path.join(workdir, "runs", "uniform-s0", compare.DONE))
    assert not os.path.exists(os.path.join(workdir, "runs", "hive-s0", compare.DONE))
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "uniform-s0: finished earlier, skipped" in out
    assert "resumed from step" in out
    assert os.path.exists(os.path.join(workdir, "results.json"))


def _timeless(x):
    """results.json without wall-clock figures, compile counts and its meta (the only fields a
    rerun may change: a resumed run compiles its programs again in its new process, and the
    meta names the rerun's date and command)."""
    if isinstance(x, dict):
        return {k: _timeless(v) for k, v in x.items()
                if not (k in ("time_s", "wall_s_this_invocation", "compile_s", "compiles",
                              "meta") or k.endswith("_time"))}
    if isinstance(x, list):
        return [_timeless(v) for v in x]
    return x


def _sigterm_once_checkpointed(proc: subprocess.Popen, run_dir: str) -> tuple[str, str]:
    """Sends SIGTERM to a running comparison once `run_dir` holds a checkpoint (a preemption
    mid-run); returns its (stdout, stderr) once it has stopped."""
    ckpts = os.path.join(run_dir, "checkpoints")
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if os.path.isdir(ckpts) and any(d.isdigit() for d in os.listdir(ckpts)):
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the comparison ended before it could be preempted"
    proc.send_signal(signal.SIGTERM)
    return proc.communicate(timeout=600)


@pytest.mark.slow
def test_sigterm_stops_the_comparison_and_the_rerun_ends_as_an_uninterrupted_one(tmp_path):
    """A cluster's preemption: SIGTERM during the third run (hive-s0). The run checkpoints, the
    comparison stops (non-zero, one line saying so, no report, the cut run not marked
    finished) and does not go on to later runs; the rerun resumes it and ends with the
    uninterrupted comparison's results.json."""
    cmd = [sys.executable, "-m", "frontier_rl", "compare",
           "--config=configs/compare_arith.py:smoke", "--config.compare.rollout_budget=600",
           "--config.checkpoint.every=1", "--config.compare.seeds=0,1",
           "--config.log.progress=True"]
    whole = str(tmp_path / "whole")
    subprocess.run(cmd + [f"--workdir={whole}"], cwd=ROOT, capture_output=True, text=True,
                   check=True)
    cut = str(tmp_path / "cut")
    proc = subprocess.Popen(cmd + [f"--workdir={cut}"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out, err = _sigterm_once_checkpointed(proc, os.path.join(cut, "runs", "hive-s0"))
    assert proc.returncode == 1, (out, err)
    assert "hive-s0 was stopped by SIGTERM before its budget" in err
    assert "Traceback" not in err
    assert not os.path.exists(os.path.join(cut, "runs", "hive-s0", compare.DONE))
    assert not os.path.exists(os.path.join(cut, "runs", "hive-s1"))  # stopped, not run on
    assert not os.path.exists(os.path.join(cut, "results.json"))
    rerun = subprocess.run(cmd + [f"--workdir={cut}"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout
    assert "uniform-s0: finished earlier, skipped" in rerun and "resumed from step" in rerun
    with open(os.path.join(whole, "results.json")) as f:
        want = _timeless(json.load(f))
    with open(os.path.join(cut, "results.json")) as f:
        got = _timeless(json.load(f))
    assert got == want


def test_start_table_gives_every_seed_its_warm_start():
    res = _results(seeds=(0, 1))
    res["runs"][0]["start"] = {"steps": 20, "loss": 1.25, "check_acc": "nan", "seed": 0,
                               "attempts": 2}
    res["runs"][4]["start"] = {"steps": 30, "loss": 1.5, "check_acc": 0.9, "seed": 1}
    text = report.start_table(res)
    assert "Each seed has its own warm start" in text
    assert "| 0 | 0 | 2 | 20 | — | — | 1.2500 |" in text  # no held-out check: —
    assert "| 1 | 1 | — | 30 | 90.0% | — | 1.5000 |" in text
    assert "SAME WARM-START SEED" not in text
    res["runs"][4]["start"]["seed"] = 0  # as if both warm starts had ended on seed 0
    assert "warm-start seed 0: seeds [0, 1]" in report.start_table(res)
    res["shared_start"] = True
    assert "conditional on that one starting point" in report.start_table(res)


# ----------------------------------------------------------------------------- two-run protocol


@pytest.mark.parametrize("field,value,run,words", [
    ("match_rollouts", "hive", "uniform,hive", "compare.match_rollouts='hive' is not allowed"),
    ("match_rollouts", {"nosuch": "uniform"}, "uniform,hive",
     "compare.match_rollouts.nosuch: 'nosuch' is not in compare.methods"),
    ("match_rollouts", {"hive": "nosuch"}, "uniform,hive",
     "compare.match_rollouts.hive='nosuch' is not allowed: a method of compare.methods"),
    ("match_rollouts", {"hive": "hive"}, "uniform,hive", "cannot be matched to itself"),
    ("match_rollouts", {"hive": "ds"}, "uniform,hive",
     "compare.match_rollouts.hive='ds' is not in compare.run='uniform,hive'"),
    ("match_rollouts", {"hive": "ds", "ds": "heapa", "heapa": "hive"}, "hive,ds,heapa",
     "compare.match_rollouts has a cycle: ds -> heapa -> hive -> ds"),
    ("best_of", {"g": "hive"}, "uniform,hive",
     "compare.best_of.g='hive' is not allowed: two or more distinct methods"),
    ("best_of", {"g": "hive,hive"}, "uniform,hive", "compare.best_of.g='hive,hive'"),
    ("best_of", {"g": "hive,nosuch"}, "uniform,hive",
     "compare.best_of.g names 'nosuch', which is not in compare.methods"),
    ("best_of", {"g": "hive,ds", "h": "ds,heapa"}, "uniform,hive,ds,heapa",
     "compare.best_of.h names 'ds', already an arm of compare.best_of.g"),
    ("best_of", {"heapa": "hive,ds"}, "uniform,hive,ds",
     "compare.best_of.heapa: the group's name is a method"),
    ("best_of", {"g": "hive,ds"}, "uniform,hive",
     r"compare.best_of.g names \['ds'\], not in compare.run='uniform,hive'"),
    ("best_of", {"g": "uniform,hive"}, "uniform,hive",
     "compare.target='uniform' is in compare.best_of.g"),
])
def test_two_run_config_errors_are_named(field, value, run, words, tmp_path):
    cfg = _load_config()
    cfg.compare.run = run
    with cfg.compare.unlocked():
        cfg.compare[field] = value
    with pytest.raises(config_lib.ConfigError, match=words):
        compare.plan(cfg, str(tmp_path))


def test_two_run_ablations_name_the_group_not_an_arm(tmp_path):
    cfg = _load_config()
    cfg.compare.run = "uniform,hive,heapa"
    cfg.compare.best_of = {"hive": "hive,heapa"}  # a group may be named as one of its arms
    cfg.compare.ablations = {"x": {"method": "heapa", "ablation": "uniform", "question": "q?"}}
    with pytest.raises(config_lib.ConfigError, match="compare.ablations.x.method='heapa' is an arm "
                                                      "of compare.best_of.hive; name the group"):
        compare.plan(cfg, str(tmp_path))
    cfg.compare.ablations = {"x": {"method": "hive", "ablation": "uniform", "question": "q?"}}
    compare.plan(cfg, str(tmp_path))
    cfg.compare.run = "uniform,ds"  # neither arm runs: the group is inactive, no error
    cfg.compare.ablations = {"x": {"method": "heapa", "ablation": "uniform", "question": "q?"}}
    compare.plan(cfg, str(tmp_path))


def test_two_run_order_puts_the_reference_first(tmp_path):
    assert two_run.order(["a", "b", "c"], {"a": "c"}) == ["c", "a", "b"]
    assert two_run.order(["a", "b", "c"], {"a": "b", "b": "c"}) == ["c", "b", "a"]  # a chain
    cfg = _load_config()
    cfg.compare.run = "hive,uniform,heapa"
    cfg.compare.seeds = "0,1"
    cfg.compare.match_rollouts = {"hive": "heapa", "ds": "uniform"}  # ds does not run: ignored
    specs = compare.plan(cfg, str(tmp_path))
    assert [s.name for s in specs] == ["heapa-s0", "heapa-s1", "hive-s0", "hive-s1",
                                       "uniform-s0", "uniform-s1"]
    assert [s.match for s in specs] == ["", "", "heapa", "heapa", "", ""]


def _finish(spec, rollouts):
    os.makedirs(spec.dir, exist_ok=True)
    with open(os.path.join(spec.dir, "final_metrics.json"), "w") as f:
        json.dump({"step": 9, "rollouts": rollouts}, f)


def test_two_run_matched_run_goes_to_the_references_spent_rollouts(tmp_path):
    cfg = _load_config()
    cfg.compare.seeds = "0,1"
    cfg.compare.budget, cfg.compare.steps, cfg.compare.evals = "steps", 7, 3
    cfg.compare.match_rollouts = {"hive": "uniform"}
    specs = compare.plan(cfg, str(tmp_path))
    by = {s.name: s for s in specs}
    with pytest.raises(config_lib.ConfigError, match="hive-s0 runs to the rollouts uniform-s0 "
                                                      "spent .* holds no finished run"):
        compare.resolve(by["hive-s0"], specs, cfg.compare)
    _finish(by["uniform-s0"], 1234)
    _finish(by["uniform-s1"], 999)
    for name, target in (("hive-s0", 1234), ("hive-s1", 999)):
        spec = by[name]
        compare.resolve(spec, specs, cfg.compare)
        c = spec.config
        # train.py ends the run at the step boundary nearest rl.rollout_budget; num_steps only
        # bounds it, and it is evaluated at every multiple of target / evals (>= evals times)
        assert spec.target == target and c.rl.rollout_budget == target
        assert c.rl.num_steps >= target and c.eval.every == 0
        assert c.eval.every_rollouts == target // 3
    # the unmatched runs keep the common budget
    assert (by["uniform-s0"].config.rl.num_steps, by["uniform-s0"].config.eval.every) == (7, 2)
    # the target is in the fingerprint: a rerun after the reference changed is not skipped
    before = compare.fingerprint(by["hive-s0"].config)
    _finish(by["uniform-s0"], 1300)
    compare.resolve(by["hive-s0"], specs, cfg.compare)
    assert compare.fingerprint(by["hive-s0"].config) != before


def _two_run_results(finals: dict[str, list[float]], **extra) -> dict:
    """_results() plus arms pcl / pcl_own, whose final accuracy per seed is `finals`."""
    res = _results(**extra)
    for arm, values in finals.items():
        res["methods"].append(arm)
        for seed, v in zip(res["seeds"], values, strict=True):
            r = _fake_run(arm, seed, X, [30, 32, 34, v], TAILS)
            r["target"], r["rollouts_to_target"], r["pflops_to_target"] = 40.0, None, None
            res["runs"].append(r)
    groups = {"pcl": list(finals)}
    res["best_of"] = two_run.choose(groups, res["runs"])
    return res


def test_two_run_best_of_row_is_the_higher_mean_arm_and_is_named():
    # pcl wins seeds 0 and 1 narrowly, pcl_own seed 2 by far: pcl_own has the higher mean, and
    # the choice is one over all seeds (not per seed)
    res = _two_run_results({"pcl": [41, 41, 30], "pcl_own": [40, 40, 48]})
    best = res["best_of"]["pcl"]
    assert best["chosen"] == "pcl_own" and best["arms"] == ["pcl", "pcl_own"]
    assert best["mean"] == {"pcl": pytest.approx(112 / 3), "pcl_own": pytest.approx(128 / 3)}
    table = report.main_table(res)
    group = table.split("| pcl = best of pcl, pcl_own: **pcl_own** † | 3 |")[1].split("\n")[0]
    arm = table.split("| pcl_own (arm) | 3 |")[1].split("\n")[0]
    assert group == arm  # the group's figures and verdicts are its chosen arm's per-seed values
    assert "| pcl (arm) | 3 |" in table  # both arms stay visible
    assert "selection effect" in table.split("†")[-1]
    text = report.best_of_section(res)
    assert "| pcl | pcl_own | s0 40.0; s1 40.0; s2 48.0 | 42.67 | **chosen** |" in text
    assert "| pcl | pcl | s0 41.0; s1 41.0; s2 30.0 | 37.33 |  |" in text
    assert "never per seed" in text and "after the results were seen" in text
    # a tie goes to the arm named first
    tie = _two_run_results({"pcl": [40, 40, 40], "pcl_own": [40, 40, 40]})
    assert tie["best_of"]["pcl"]["chosen"] == "pcl"
    # plots and mechanisms draw each arm once, under its own name
    assert set(report._by_method(res, groups=False)) == set(res["methods"])


def test_two_run_report_states_matched_budgets(tmp_path):
    res = _two_run_results({"pcl": [41, 41, 30], "pcl_own": [40, 40, 48]},
                           budget_kind="steps", steps_budget=10)
    res["match_rollouts"] = {"pcl": {"reference": "ds", "per_seed": {}},
                             "pcl_own": {"reference": "ds", "per_seed": {}}}
    for r in res["runs"]:
        if r["method"].startswith("pcl"):
            r["steps"], r["rollout_target"] = 17, 2900
            r["max_step_rollouts"] = 200
    text = report.write(res, str(tmp_path))["text"]
    assert "Every run but the matched ones: 10 steps (matched updates; every run took them all)" \
        in text
    assert "Matched runs (compare.match_rollouts: pcl at ds's, pcl_own at ds's)" in text
    assert "pcl s0 3,000 of 2,900 in 17 steps" in text
    assert "every matched run ended within one of its own steps of its target" in text
    assert "## Best-of groups (HIVE's two-run protocol)" in text


@pytest.mark.slow
def test_two_run_smoke_end_to_end(tmp_path, capsys):
    """compare_math.py:smoke,two_run: GRESO runs first, PCL's two arms then go to the rollouts
    it spent (each within one of its own steps), results.json keeps both arms, the targets and
    the arm the row `pcl` chose, the report names it, and a rerun skips every finished run."""
    workdir = str(tmp_path / "cmp")
    compare.run(_load_config("smoke,two_run", "compare_math"), workdir)
    out = capsys.readouterr().out
    assert out.index("greso-s0: greso") < out.index("pcl-s0: pcl") < out.index("pcl_own-s0")
    res = json.load(open(os.path.join(workdir, "results.json")))
    runs = {r["method"]: r for r in res["runs"]}
    spent = runs["greso"]["rollouts"]
    assert runs["greso"]["rollout_target"] is None
    for arm in ("pcl", "pcl_own"):
        r = runs[arm]
        assert (r["matched_to"], r["rollout_target"]) == ("greso", spent)
        assert res["match_rollouts"][arm] == {"reference": "greso", "per_seed": {"0": spent}}
        assert abs(r["rollouts"] - spent) <= r["max_step_rollouts"]  # the nearest step boundary
        assert r["curve"]["rollouts"][-1] == r["rollouts"]  # evaluated at its end
    best = res["best_of"]["pcl"]
    assert best["arms"] == ["pcl", "pcl_own"]
    assert best["chosen"] == max(best["arms"], key=lambda a: runs[a]["final"])
    text = open(os.path.join(workdir, "report.md")).read()
    assert f"| pcl = best of pcl, pcl_own: **{best['chosen']}** † | 1 |" in text
    assert "| pcl (arm) | 1 |" in text and "| pcl_own (arm) | 1 |" in text
    assert "Matched runs (compare.match_rollouts: pcl at greso's, pcl_own at greso's)" in text
    compare.run(_load_config("smoke,two_run", "compare_math"), workdir)
    assert capsys.readouterr().out.count("finished earlier, skipped") == 3


def test_workers_is_validated(tmp_path):
    cfg = _load_config()
    cfg.compare.workers = 0
    with pytest.raises(config_lib.ConfigError, match="compare.workers=0 is not allowed"):
        compare.plan(cfg, str(tmp_path))


def test_workers_wait_for_a_warm_start_cache_not_for_its_run(tmp_path):
    """The first run of a warm start trains it; the others of that warm start wait for the
    cache, not for that run; another seed's first run starts at once; a matched run waits for
    its reference."""
    from frontier_rl.experiment import workers

    cfg = _load_config()
    cfg.compare.seeds = "0,1"
    cfg.compare.run = "uniform,hive,ds"
    all_specs = compare.plan(cfg, str(tmp_path))
    specs = {s.name: s for s in all_specs}
    plan = compare._plan(cfg, str(tmp_path), all_specs)

    def ready(name, ended=()):  # a run that ended here has finished (its DONE record)
        at = dataclasses.replace(plan, finished=lambda spec: spec.name in ended)
        return workers._ready(specs[name], at, set(ended))

    assert ready("uniform-s0") and ready("uniform-s1")
    assert not ready("hive-s0") and not ready("ds-s0", ended=["hive-s0"])
    assert ready("hive-s0", ended=["uniform-s0"])  # it ended without caching: hive-s0 trains
    assert not ready("ds-s0", ended=["uniform-s0"])  # ... and ds-s0 waits for hive-s0
    cache = specs["hive-s0"].config.warmstart.cache_dir
    os.makedirs(cache)
    open(os.path.join(cache, "model.safetensors"), "w").close()
    assert ready("hive-s0") and not ready("hive-s1")
    matched = compare.RunSpec("late", 0, specs["hive-s0"].config, "", match="uniform")
    plan.specs.append(matched)
    specs[matched.name] = matched
    assert not ready("late-s0") and ready("late-s0", ended=["uniform-s0"])


@pytest.mark.slow
def test_two_workers_give_the_sequential_results(tmp_path):
    """compare.workers=2: the smoke comparison's results.json is the sequential one's but for
    timing and compile counts, and each child's lines come prefixed with its run's name. Both
    run as commands (at once), so both see the same devices: a worker is a process of its own,
    outside conftest's one-device mesh."""
    cmd = [sys.executable, "-m", "frontier_rl", "compare",
           "--config=configs/compare_arith.py:smoke", "--config.log.progress=True"]
    procs = {n: subprocess.Popen(cmd + [f"--workdir={tmp_path / str(n)}",
                                        f"--config.compare.workers={n}"],
                                 cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
             for n in (1, 2)}
    out = {n: p.communicate(timeout=900) for n, p in procs.items()}
    for n, p in procs.items():
        assert p.returncode == 0, out[n]
    assert "[uniform-s0] eval step 0: avg@2" in out[2][0]
    assert "[hive-s0] eval step 0: avg@2" in out[2][0]
    results = {}
    for n in (1, 2):
        with open(tmp_path / str(n) / "results.json") as f:
            results[n] = json.dumps(_timeless(json.load(f)), sort_keys=True)
    assert results[2] == results[1]


@pytest.mark.slow
def test_sigterm_stops_every_worker_and_the_rerun_ends_as_an_uninterrupted_one(tmp_path):
    """compare.workers=2 preempted while hive-s0 runs: every running child checkpoints, the
    comparison exits 1 with one line naming the cut runs, no run is marked finished that did
    not reach its budget, and the rerun ends with the sequential comparison's results.json."""
    cmd = [sys.executable, "-m", "frontier_rl", "compare",
           "--config=configs/compare_arith.py:smoke", "--config.compare.rollout_budget=600",
           "--config.checkpoint.every=1", "--config.compare.seeds=0,1",
           "--config.log.progress=True"]
    whole = str(tmp_path / "whole")
    subprocess.run(cmd + [f"--workdir={whole}"], cwd=ROOT, capture_output=True, text=True,
                   check=True)
    cut = str(tmp_path / "cut")
    two = cmd + [f"--workdir={cut}", "--config.compare.workers=2"]
    proc = subprocess.Popen(two, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    out, err = _sigterm_once_checkpointed(proc, os.path.join(cut, "runs", "hive-s0"))
    assert proc.returncode == 1, (out, err)
    line = [x for x in err.splitlines() if "stopped by SIGTERM" in x]
    assert len(line) == 1 and "hive-s0" in line[0] and "(no report written)" in line[0], err
    assert "Traceback" not in err
    assert not os.path.exists(os.path.join(cut, "runs", "hive-s0", compare.DONE))
    for run in os.listdir(os.path.join(cut, "runs")):
        d = os.path.join(cut, "runs", run)
        assert os.path.exists(os.path.join(d, compare.DONE)) == os.path.exists(
            os.path.join(d, compare.FINAL)), run
    assert not os.path.exists(os.path.join(cut, "results.json"))
    rerun = subprocess.run(two, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "[hive-s0] resumed from step" in rerun
    with open(os.path.join(whole, "results.json")) as f:
        want = _timeless(json.load(f))
    with open(os.path.join(cut, "results.json")) as f:
        got = _timeless(json.load(f))
    assert got == want


# ----------------------------------------------------------------------------- other budgets


@pytest.mark.parametrize("kind,amount,field", [("tokens", 9_000, "token_budget"),
                                               ("pflops", 2e-4, "pflops_budget")])
def test_token_and_pflops_budgets_plan_every_run_to_that_spend(tmp_path, kind, amount, field):
    cfg = _load_config()
    cfg.compare.budget = kind
    cfg.compare[field] = amount
    cfg.compare.evals = 3
    specs = compare.plan(cfg, str(tmp_path))
    for s in specs:
        rl = s.config.rl
        assert (rl.rollout_budget, rl[field]) == (0, amount)
        assert s.config.eval.every_rollouts == 0 and s.config.eval.every == 0
        assert s.config.eval.every_budget == pytest.approx(amount / 3, rel=1e-3)
    # the warm start is the rollout comparison's: a rerun at another budget starts there
    base = compare.plan(_load_config(), str(tmp_path))
    assert [s.config.warmstart.cache_dir for s in specs] == [
        s.config.warmstart.cache_dir for s in base]
    assert compare.fingerprint(specs[0].config) != compare.fingerprint(base[0].config)


@pytest.mark.parametrize("kind,field,value", [("tokens", "token_budget", 0),
                                              ("tokens", "token_budget", 2.5),
                                              ("pflops", "pflops_budget", -1.0)])
def test_a_token_or_pflops_budget_needs_its_amount(tmp_path, kind, field, value):
    cfg = _load_config()
    cfg.compare.budget = kind
    del cfg.compare[field]
    cfg.compare[field] = value
    with pytest.raises(config_lib.ConfigError,
                       match=rf"compare.{field}={value!r} is not allowed with "
                             rf"compare.budget='{kind}'"):
        compare.plan(cfg, str(tmp_path))


def test_matched_tokens_can_flip_a_verdict():
    """hive is ahead of uniform at the matched rollouts, but its responses are three times as
    long: at matched generated tokens its gain is gone. The re-read table says the verdict
    changes with the budget."""
    res = _results()
    for r in res["runs"]:
        scale = 3.0 if r["method"] == "hive" else 1.0
        r["curve"]["tokens"] = [scale * 10 * x for x in r["curve"]["rollouts"]]
        r["tokens"] = int(r["curve"]["tokens"][-1])
    rows = {x["method"]: x for x in report.matched_rows(res, "rollouts")}
    assert rows["hive"]["verdict"] == "better"  # 41 against 40 at 3,000 rollouts, every seed
    tok = {x["method"]: x for x in report.matched_rows(res, "tokens")}
    # at uniform's 30,000 tokens hive has spent 1,000 rollouts' worth: 39 or 40 against 40
    assert tok["hive"]["at"] == [30_000.0] * 3
    assert tok["hive"]["diff"] == pytest.approx(np.mean([39 - 40, 40 - 40, 39 - 40]))
    assert tok["hive"]["verdict"] == "not distinguishable at this budget"
    table = report.matched_table(res)
    line = next(x for x in table.splitlines() if x.startswith("| hive |"))
    assert line.endswith("| **yes** |")
    assert "| method | vs uniform at matched rollouts [95% CI] | verdict | vs uniform at " \
           "matched generated tokens" in table


def test_another_selectors_section_changes_no_fingerprint(tmp_path):
    """A run is its own selector's: a new selector registered (its defaults added to every
    config) or another selector's field changed leaves finished runs finished."""
    spec = compare.plan(_load_config(), str(tmp_path))[0]
    assert spec.config.selector.name == "uniform"
    other = copy.deepcopy(spec.config)
    other.selector.greso.p_easy = 0.3
    with other.selector.unlocked():
        other.selector["newly_registered"] = {"x": 1}
    assert compare.fingerprint(other) == compare.fingerprint(spec.config)
    other.selector.name = "greso"
    assert compare.fingerprint(other) != compare.fingerprint(spec.config)
