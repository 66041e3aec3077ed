"""The matched-budget runner and its report: planning, budgets, skip-on-rerun, artefacts."""

import copy
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from frontier_rl import compare, config_lib, report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_config(arg="smoke"):
    import importlib.util

    spec = importlib.util.spec_from_file_location("compare_arith",
                                                  os.path.join(ROOT, "configs/compare_arith.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.get_config(arg)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("compare"))
    results = compare.run(_load_config(), workdir)
    return workdir, results


def test_plan_applies_deltas_and_shares_warm_start(tmp_path):
    cfg = _load_config()
    cfg.compare.run = "uniform,hive"
    cfg.compare.seeds = "0,3"
    specs = compare.plan(cfg, str(tmp_path))
    assert [s.name for s in specs] == ["uniform-s0", "uniform-s3", "hive-s0", "hive-s3"]
    assert {s.config.selector.name for s in specs} == {"uniform", "hive"}
    assert len({s.config.warmstart.cache_dir for s in specs}) == 1
    assert {s.config.warmstart.seed for s in specs} == {cfg.seed}
    assert {s.config.task.data_seed for s in specs} == {0}
    assert [s.config.seed for s in specs] == [0, 3, 0, 3]
    assert {s.config.rl.rollout_budget for s in specs} == {cfg.compare.rollout_budget}
    # same method + seed -> same fingerprint; another method -> another
    assert compare.fingerprint(specs[0].config) == compare.fingerprint(
        copy.deepcopy(specs[0].config))
    assert compare.fingerprint(specs[0].config) != compare.fingerprint(specs[2].config)


@pytest.mark.parametrize("field,value,words", [
    ("run", "uniform,nosuch", "compare.run names 'nosuch'"),
    ("run", "", "compare.run is empty"),
    ("seeds", "0,x", "compare.seeds='0,x'"),
    ("seeds", "1,1", "compare.seeds='1,1'"),
    ("rollout_budget", 0, "compare.rollout_budget=0"),
    ("target", "nosuch", "compare.target='nosuch'"),
])
def test_bad_compare_fields_are_named(field, value, words, tmp_path):
    cfg = _load_config()
    cfg.compare[field] = value
    with pytest.raises(config_lib.ConfigError, match=words.replace("(", r"\(")):
        compare.plan(cfg, str(tmp_path))


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
    text = open(os.path.join(workdir, "report.md")).read()
    assert "## Accuracy at equal rollout budget" in text and "| uniform | 1 |" in text
    assert "## The papers' claims, measured here" in text


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


def _fake_run(method, seed, final, rollouts_curve, metric_curve, hist, zv=(0.1, 0.3),
              shift=0.0):
    """A run result as compare.collect makes it; per-prompt counts at each eval point are
    binomial around the curve's value (+ shift points at the end), the same prompts per seed."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 1, size=256)  # per-prompt difficulty, shared by the methods of a seed
    noise = np.random.default_rng([seed, len(method)])
    counts = []
    for i, m in enumerate(metric_curve):
        q = np.clip(p + (m - 50) / 100 + (shift / 100 if i == len(metric_curve) - 1 else 0), 0, 1)
        counts.append(noise.binomial(8, q).tolist())
    return {"method": method, "seed": seed, "k": 8, "rollouts": rollouts_curve[-1],
            "effective_rollouts": rollouts_curve[-1] // 2, "pflops": 1.0, "pflops_formula": 0.9,
            "padding_ratio": 1.2, "final": final, "best": max(metric_curve),
            "final_buckets": {"4op": final}, "zero_var_easy": zv[0], "zero_var_hard": zv[1],
            "curve": {"rollouts": rollouts_curve, "pflops": [x / 1e5 for x in rollouts_curve],
                      "metric": metric_curve, "correct_counts": counts,
                      "buckets": {"4op": metric_curve}},
            "eval_buckets": ["4op"] * 256, "rolled_pass_hist": hist,
            "aug": {"aug_reward": []}, "time_s": {"generate": 1.0}}


def test_claims_follow_the_numbers():
    x = [0, 1000, 2000, 3000]
    medium = [0.1, 0.8, 0.1]
    tails = [0.45, 0.1, 0.45]
    runs = []
    for seed in (0, 1):
        runs += [_fake_run("uniform", seed, 40.0, x, [30, 35, 38, 40], tails),
                 _fake_run("ds", seed, 41.0, x, [30, 33, 37, 41], tails, zv=(0.2, 0.4)),
                 _fake_run("hive", seed, 41.0, x, [30, 41, 41, 41], tails, zv=(0.05, 0.1)),
                 _fake_run("heapa", seed, 30.0, x, [30, 30, 30, 30], medium)]
    res = {"methods": ["uniform", "ds", "hive", "heapa"], "runs": runs, "seeds": [0, 1], "k": 8,
           "eval_prompts": 256, "metric": "eval/avg@8/all", "target_method": "uniform"}
    by = {c["claim"].split(" (")[0]: c for c in report.claims(res)}
    # HIVE = DS at the budget (same curve end), reached earlier: accuracy not distinguishable
    hive = by["HIVE reaches DS's accuracy with fewer rollouts"]
    assert hive["held"] == "not distinguishable at this budget"
    assert "s0: DS final 41.0 at 3,000; HIVE 1,000" in hive["measured"]
    assert by["HeaPA beats uniform GRPO at equal rollouts"]["held"] == "worse"
    assert by["Heap sampling shifts mass to the medium band"]["held"] == "better"
    assert by["PathAgg >= ChildAgg"]["held"] == "n/a"
    zv = next(c for c in by.values() if c["claim"].startswith("HIVE has lower"))
    assert zv["held"] == "better" and "greso not run" in zv["note"]
    table = report.main_table(res)
    assert "| heapa | 2 |" in table and "| worse |" in table and "| reference |" in table
    gains = report.gain_table(res)
    assert "rose" in gains.split("| uniform |")[1].split("\n")[0]
    assert "n.d." in gains.split("| heapa |")[1].split("\n")[0]


def test_bench_mean_interval_is_the_unweighted_mean_over_benchmarks():
    # 3 prompts of benchmark "a" all right, 1 of "b" wrong, k = 2: pooled 75%, bench mean 50%
    labels = ["a", "a", "a", "b"]
    runs = [{"seed": s, "k": 2, "eval_buckets": labels,
             "curve": {"correct_counts": [[0, 0, 0, 0], [2, 2, 2, 0]]}} for s in (0, 1)]
    assert report.accuracy(runs, "all").mean == pytest.approx(75.0)
    acc = report.accuracy(runs, "bench_mean")
    assert acc.mean == pytest.approx(50.0)
    # resampled within benchmarks, so every bootstrap draw keeps the 3:1 split: no spread
    assert acc.lo == pytest.approx(50.0) and acc.hi == pytest.approx(50.0)
    gain = report.paired(runs, runs, "bench_mean", point_a=-1, point_b=0)
    assert gain.mean == pytest.approx(50.0)


def test_mechanisms_table_flags_a_counter_that_never_ran():
    res = {"methods": ["hive", "heapa"],
           "mechanisms": {"hive": {"stage1_rejected": 0, "stage2_dropped": 12},
                          "heapa": {"boundary_draws": 40, "cold_draws": 3}},
           "mechanisms_required": {"hive": ["stage1_rejected", "stage2_dropped"],
                                   "heapa": ["boundary_draws"]},
           "mechanisms_missing": {"hive": ["stage1_rejected"]}}
    text = report.mechanisms_table(res)
    row = text.split("| hive |")[1].split("\n")[0]
    assert "**0 (!)**" in row and "12" in row
    assert "3*" in text.split("| heapa |")[1]  # counted, not required
    assert "MECHANISMS THAT NEVER RAN: hive: stage1_rejected" in text


def test_required_mechanisms_follow_the_method_config():
    cfg = _load_config("")
    need = {m: compare.required_mechanisms(s.config)
            for m, s in ((s.method, s) for s in compare.plan(cfg, "/nonexistent"))}
    assert {"stage1_rejected", "stage2_dropped", "p_easy_moves"} <= set(need["hive"])
    assert {"boundary_draws", "children_trained", "recycled", "evicted",
            "parents_refreshed"} <= set(need["heapa"])
    cfg = _load_config("full")
    need = {s.method: compare.required_mechanisms(s.config)
            for s in compare.plan(cfg, "/nonexistent")}
    assert "children_rolled_out" not in need["heap_only"]
    assert "priority_draws" in need["ps"] and "children_rolled_out" in need["ps_aug"]
    assert "skipped" in need["greso"]


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


def test_start_table_without_a_held_out_check():
    # a warm start with target_acc = 0 has no check accuracy: stored as the string "nan"
    run = _fake_run("uniform", 0, 40.0, [0, 10], [30, 40], [0.5, 0.5])
    run["start"] = {"steps": 20, "loss": 1.25, "check_acc": "nan"}
    run["curve"]["step"] = [0, 10]
    text = report.start_table({"k": 8, "runs": [run], "seeds": [0]})
    assert "20 supervised steps, no held-out check" in text and "loss 1.2500" in text
    assert "| 0 | 30.0 |" in text
