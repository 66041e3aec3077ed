"""The comparison's tidy table (experiment/table.py): a row per run x eval point x bucket, the
per-prompt counts as an array column, report rows resolved to the methods they show, and a
table read once per results while its runs stay the same."""

import gzip
import json
import os

import numpy as np
import pytest

from frontier_rl.experiment import evalcells, table

PUBLISHED = os.path.join(os.path.dirname(__file__), "..", "docs", "results", "testbed")


def _run(method, seed, counts, labels=("a", "a", "b"), k=4):
    points = len(counts)
    return {"method": method, "seed": seed, "k": k, "eval_buckets": list(labels),
            "curve": {"step": list(range(0, 10 * points, 10)),
                      "rollouts": [100.0 * p for p in range(points)],
                      "buckets": {"all": [100.0 * np.mean(c) / k for c in counts]},
                      "correct_counts": counts}}


def _results(best_of=None):
    runs = [_run("u", 0, [[0, 1, 2], [1, 2, 4]]), _run("u", 1, [[1, 1, 1], [2, 2, 2]]),
            _run("h", 0, [[0, 0, 0], [4, 4, 0]]), _run("h", 1, [[0, 0, 0], [3, 3, 3]])]
    return {"methods": ["u", "h"], "runs": runs, "best_of": best_of or {}}


def test_every_run_point_and_bucket_is_a_row_with_its_prompts_counts():
    tab = table.read(_results())
    assert list(tab.columns) == list(table.COLUMNS)
    # 4 runs x 2 points x (all, bench_mean, a, b)
    assert len(tab) == 4 * 2 * 4
    assert set(tab["bucket"]) == {"all", "bench_mean", "a", "b"}
    row = tab[(tab["run"] == 0) & (tab["point"] == 1) & (tab["bucket"] == "a")].iloc[0]
    np.testing.assert_array_equal(row["counts"], [1, 2])
    assert row["from_end"] == -1 and row["step"] == 10 and row["rollouts"] == 100.0
    assert row["weights"] is None and np.isnan(row["accuracy"])  # "a" was not logged
    every = tab[(tab["run"] == 0) & (tab["point"] == 1) & (tab["bucket"] == "all")].iloc[0]
    assert every["accuracy"] == pytest.approx(100 * 7 / 12)
    bench = tab[(tab["run"] == 0) & (tab["point"] == 1) & (tab["bucket"] == "bench_mean")]
    # weights N / (B * n_bucket): 3 / (2 * 2) for a's prompts, 3 / (2 * 1) for b's
    np.testing.assert_allclose(bench.iloc[0]["weights"], [0.75, 0.75, 1.5])


def test_a_run_without_per_prompt_counts_has_rows_but_no_cells():
    res = _results()
    res["runs"][0]["curve"]["correct_counts"] = [None, None]
    tab = table.read(res)
    rows = tab[tab["run"] == 0]
    assert set(rows["bucket"]) == {"all"} and rows["counts"].isna().all()
    assert evalcells.matrix(tab, "u", [0, 1]) is None  # a seed without cells: no matrix
    assert evalcells.paired(tab, "h", "u") is None


def test_the_analyses_read_the_table_paired_by_seed():
    tab = table.read(_results())
    m = evalcells.matrix(tab, "h", [1, 0])  # rows in the order asked
    np.testing.assert_allclose(m, 25.0 * np.array([[3, 3, 3], [4, 4, 0]]))
    d = evalcells.paired(tab, "h", "u")
    per_seed = [25.0 * (8 - 7) / 3, 25.0 * (9 - 6) / 3]
    assert d.mean == pytest.approx(np.mean(per_seed)) and d.n == 2
    gain = evalcells.paired(tab, "u", "u", point_a=-1, point_b=0)
    assert gain.mean == pytest.approx(np.mean([25.0 * 4 / 3, 25.0 * 3 / 3]))
    # another comparison's table on the same seeds: b read from it
    other = table.read({"methods": ["u"], "runs": _results()["runs"][:2]})
    assert evalcells.paired(tab, "h", "u", other=other).mean == pytest.approx(d.mean)


def test_a_best_of_group_row_shows_its_chosen_arm():
    best = {"u*": {"arms": ["u", "h"], "chosen": "h"}}
    res = _results(best)
    assert table.rows(res) == {"u*": "h", "u (arm)": "u", "h (arm)": "h"}
    assert table.rows(res, groups=False) == {"u": "u", "h": "h"}
    tab = table.of(res)
    assert table.method_of(tab, "u*") == "h" and table.method_of(tab, "u (arm)") == "u"
    assert evalcells.accuracy(tab, "u*").mean == evalcells.accuracy(tab, "h").mean
    assert [r["method"] for r in evalcells.by_method(res)["u*"]] == ["h", "h"]


def test_of_reads_once_and_again_when_a_run_changes():
    res = _results()
    tab = table.of(res)
    assert table.of(res) is tab
    before = evalcells.paired(tab, "h", "u").mean
    res["runs"][2] = _run("h", 0, [[0, 0, 0], [0, 0, 0]])  # a run replaced: read anew
    again = table.of(res)
    assert again is not tab and evalcells.paired(again, "h", "u").mean < before
    res["runs"][3]["curve"]["correct_counts"][1] = [0, 0, 0]  # a point's counts replaced
    assert table.of(res) is not again


def test_the_published_comparison_reads_into_one_row_per_run_point_and_bucket():
    with gzip.open(os.path.join(PUBLISHED, "default.results.json.gz"), "rt") as f:
        res = json.load(f)
    tab = table.read(res)
    want = sum(len(r["curve"]["step"]) * len(set(r["eval_buckets"]) | {"all", "bench_mean"})
               for r in res["runs"])
    assert len(tab) == want
    last = tab[(tab["from_end"] == -1) & (tab["bucket"] == "all")]
    for r, (_, row) in zip(res["runs"], last.iterrows(), strict=True):
        np.testing.assert_array_equal(row["counts"], r["curve"]["correct_counts"][-1])
        assert row["accuracy"] == pytest.approx(r["final_buckets"]["all"])


def test_finals_give_each_runs_last_spend_and_target_with_none_where_missing():
    res = _results()
    for r, t in zip(res["runs"], (50.0, 50.0, 50.0, None), strict=True):
        r.update(target=t, rollouts_to_target=None if t is None else 40.0,
                 tokens_to_target=None, pflops_to_target=None)
    res["runs"][2]["rollouts_to_target"] = None  # h at seed 0 never reached it
    tab = table.read(res)
    got = table.finals(tab, "h")
    assert [(f["seed"], f["rollouts"], f["target"], f["rollouts_to_target"]) for f in got] == [
        (0, 100.0, 50.0, None), (1, 100.0, None, None)]
    assert [s for s, _, _ in table.series(tab, "u", "rollouts")] == [0, 1]
    assert table.series(tab, "u", "tokens") == []  # not logged: no curve to read


def test_a_group_named_like_one_of_its_arms_resolves_by_what_the_caller_reads():
    # HIVE's two-run protocol: the group "u" is the better of u and h (h chosen)
    res = _results({"u": {"arms": ["u", "h"], "chosen": "h"}})
    grouped, as_run = table.of(res), table.of(res, groups=False)
    assert table.method_of(grouped, "u") == "h" and table.method_of(as_run, "u") == "u"
    assert table.of(res, groups=False) is as_run and table.of(res) is grouped
    assert evalcells.accuracy(as_run, "u").mean == pytest.approx(25.0 * (7 + 6) / 6)
    assert evalcells.accuracy(grouped, "u").mean == evalcells.accuracy(as_run, "h").mean


def test_a_bucket_label_all_keeps_the_pool_and_short_lists_read_as_missing():
    res = _results()
    res["runs"][0]["eval_buckets"] = ["all", "all", "b"]
    res["runs"][1]["curve"]["rollouts"] = [0.0]  # one value for two eval points
    tab = table.read(res)
    last = tab[(tab["run"] == 0) & (tab["from_end"] == -1) & (tab["bucket"] == "all")]
    np.testing.assert_array_equal(last.iloc[0]["counts"], [1, 2, 4])
    assert np.isnan(tab[(tab["run"] == 1) & (tab["point"] == 1)]["rollouts"]).all()


def test_of_sees_a_field_or_a_curve_list_replaced():
    res = _results()
    tab = table.of(res)
    res["runs"][0]["curve"]["metric"] = [0.0, 1.0]
    again = table.of(res)
    assert again is not tab and table.series(again, "u", "rollouts")[0][2].tolist() == [0, 1]
    res["runs"][0]["target"] = 50.0
    assert table.of(res) is not again and table.finals(table.of(res), "u")[0]["target"] == 50.0
