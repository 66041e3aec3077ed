"""The training-corpus builders (frontier_rl/data/benchmarks.py, launch/prepare_benchmarks.py),
each run on tiny generated files in the corpus's public schema: MATH train, HIVE's DAPO+MATH,
HeaPA's CJK-free de-duplicated DAPO-Math subset, the Open-R1 subsets (GRESO's first rows, a
seeded draw, HeaPA's filter)."""

import importlib.util
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from frontier_rl.data import benchmarks
from frontier_rl.tasks import make_task

PREFIX = ("Solve the following math problem step by step. The last line of your response "
          "should be of the form Answer: $Answer (without quotes) where $Answer is the answer "
          "to the problem.\n\n")
SUFFIX = "\n\nRemember to put your answer on its own line after \"Answer:\"."


def _cli():
    path = os.path.join(os.path.dirname(__file__), "..", "launch", "prepare_benchmarks.py")
    spec = importlib.util.spec_from_file_location("prepare_benchmarks", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main


def _parquet(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), str(path))
    return str(path)


def _read(path):
    return pq.read_table(str(path)).to_pylist()


def _user(row):
    (msg,) = row["prompt"]
    assert msg["role"] == "user"
    return msg["content"]


# hendrycks MATH / lighteval MATH: problem, level, type, solution
MATH = [
    {"problem": "What is $1/2 + 0$?", "level": "Level 1", "type": "Prealgebra",
     "solution": r"It is $\boxed{\frac{1}{2}}$."},
    {"problem": "Find $x$ if $x+1=3$.", "level": "Level 2", "type": "Algebra",
     "solution": r"First $\boxed{1}$ is wrong; so $x=\boxed{2}$."},
    {"problem": r"Compute $2 \cdot 3$.", "level": "Level 1", "type": "Prealgebra",
     "solution": r"The product is $\boxed 6$."},
    {"problem": "What is $7-4$?", "level": "Level 1", "type": "Prealgebra",
     "solution": r"Thus $\fbox{3}$."},
    {"problem": "A proof with no box.", "level": "Level 5", "type": "Geometry",
     "solution": "Hence it holds."},
    {"problem": "Unclosed.", "level": "Level 3", "type": "Algebra",
     "solution": r"So $\boxed{\frac{1}{2}$."},
]


def _dapo(problem, answer, index):
    """A row of BytedTsinghua-SIA/DAPO-Math-17k's verl parquet."""
    return {"data_source": "math_dapo",
            "prompt": [{"role": "user", "content": PREFIX + problem + SUFFIX}],
            "ability": "MATH", "reward_model": {"style": "rule", "ground_truth": answer},
            "extra_info": {"index": index}}


def _openr1(i, problem=None, answer=None, source="olympiads"):
    """A row of open-r1/OpenR1-Math-220k (default config)."""
    return {"problem": problem if problem is not None else f"Problem {i}: find {i} + 1.",
            "solution": f"The answer is {i + 1}.",
            "answer": answer if answer is not None else str(i + 1),
            "problem_type": "Algebra", "question_type": "math-word-problem",
            "source": source, "uuid": f"uuid-{i:03d}", "is_reasoning_complete": [True],
            "generations": ["..."], "correctness_math_verify": [True],
            "correctness_llama": None, "finish_reasons": None, "correctness_count": 1,
            "messages": [{"role": "user", "content": "..."}]}


def test_last_boxed_by_hand():
    assert benchmarks.last_boxed(r"$\boxed{\frac{1}{2}}$") == r"\frac{1}{2}"
    assert benchmarks.last_boxed(r"\boxed{1} then \boxed{ 2 }") == "2"
    assert benchmarks.last_boxed(r"so $\boxed 6$.") == "6"
    assert benchmarks.last_boxed(r"$\fbox{3}$") == "3"
    assert benchmarks.last_boxed(r"\boxed{\{1, 2\}}") == r"\{1, 2\}"
    assert benchmarks.last_boxed(r"$\boxed{x$") is None
    assert benchmarks.last_boxed("no box") is None


def test_math_train_rows_from_a_parquet_and_from_the_hendrycks_tree(tmp_path, caplog):
    out = str(tmp_path / "train" / "math.parquet")
    assert _cli()([f"--math={_parquet(tmp_path / 'math.parquet', MATH)}",
                   f"--math_out={out}"]) == 0
    rows = _read(out)
    assert [_user(r) for r in rows] == [m["problem"] for m in MATH[:4]]
    assert [r["reward_model"]["ground_truth"] for r in rows] == [r"\frac{1}{2}", "2", "6", "3"]
    assert rows[1]["extra_info"] == {"index": "1", "split": "train", "level": "Level 2",
                                     "type": "Algebra"}
    assert {r["data_source"] for r in rows} == {"math"}
    assert "2 MATH rows without a problem or a closed" in caplog.text
    assert "6 MATH rows, the train split has 7500" in caplog.text
    # the original release: MATH/train/<type>/<n>.json, one problem a file
    for i, m in enumerate(MATH[:3]):
        d = tmp_path / "MATH" / "train" / m["type"].lower()
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{i}.json").write_text(json.dumps(m))
    tree = benchmarks.math_rows(benchmarks.read_tables(str(tmp_path / "MATH")), "MATH")
    assert sorted(r["reward_model"]["ground_truth"] for r in tree) == ["2", "6", r"\frac{1}{2}"]
    # the corpus reader takes the written file as it is
    task = make_task("corpus", {"path": out, "eval_fraction": 0.0, "verify_workers": 0}, 0)
    assert len(task.train) == 4 and task.stats["duplicates"] == 0


def test_dapo_plus_math_removes_duplicates_by_problem_text(tmp_path):
    dapo = [_dapo("Find $y$ if $2y=8$.", "4", "a"),
            _dapo("Find $y$ if $2y=8$.", "4", "a"),  # the release repeats each problem
            _dapo("Find $x$ if $x+1=3$.", "2", "b"),
            _dapo("What  is $7-4$?", "5", "c"),  # MATH's problem, other spacing and answer
            _dapo("Find $y$ if  $2y=8$.", "4", "d")]  # the same text, another index
    math_path = _parquet(tmp_path / "math.parquet", MATH)
    dapo_path = _parquet(tmp_path / "dapo.parquet", dapo)
    out = str(tmp_path / "dapo_math_plus_math.parquet")
    assert _cli()([f"--dapo_math={dapo_path}", f"--math={math_path}", "--dapo_plus_math",
                   f"--dapo_plus_math_out={out}", f"--train_out={tmp_path / 'd17k.parquet'}",
                   f"--math_out={tmp_path / 'm.parquet'}"]) == 0
    rows = _read(out)
    assert [(_user(r), r["reward_model"]["ground_truth"], r["data_source"]) for r in rows] == [
        ("Find $y$ if $2y=8$.", "4", "math_dapo"),
        ("Find $x$ if $x+1=3$.", "2", "math_dapo"),
        ("What  is $7-4$?", "5", "math_dapo"),
        ("What is $1/2 + 0$?", r"\frac{1}{2}", "math"),
        (r"Compute $2 \cdot 3$.", "6", "math")]
    assert [r["extra_info"]["index"] for r in rows[:3]] == ["a", "b", "c"]
    _, counts = benchmarks.dapo_plus_math_rows(dapo, MATH, "dapo", "math")
    assert counts == {"dapo_rows": 5, "dapo_unique": 3, "math_rows": 6, "math_boxed": 4,
                      "cross_duplicates": 2, "cross_answer_conflicts": 1, "math_kept": 2,
                      "rows": 5}
    # the 17k file the same command writes keeps the release's rows (the reader de-duplicates)
    assert len(_read(tmp_path / "d17k.parquet")) == 5
    # GRESO's DAPO file (haizhongzheng/DAPO-Math-17K-cleaned): bare `prompt` text, `target`
    cleaned = [{"prompt": "Find $y$ if $2y=8$.", "target": "4"},
               {"prompt": "Find $x$ if $x+1=3$.", "target": "2"}]
    rows, counts = benchmarks.dapo_plus_math_rows(cleaned, MATH, "cleaned", "math")
    assert [r["extra_info"]["index"] for r in rows[:2]] == ["0", "1"]
    assert counts["cross_duplicates"] == 1 and counts["rows"] == 2 + 3
    # open-r1/DAPO-Math-17k-Processed: bare `prompt` text, the answer in `solution`
    processed = benchmarks.dapo_math_rows([{"prompt": "Find $y$.", "solution": "4"}])
    assert _user(processed[0]) == "Find $y$." and processed[0]["reward_model"][
        "ground_truth"] == "4"


def test_heapa_14k_drops_cjk_then_duplicate_indices(tmp_path):
    dapo = [_dapo("Find $y$ if $2y=8$.", "4", "a"),
            _dapo("Find $y$ if $2y=8$.", "4", "a"),  # repeated index: dropped
            _dapo("求 $x$，使 $x+1=3$。", "2", "b"),  # Chinese
            _dapo("Find $x$，if $x+1=3$.", "2", "c"),  # a full-width comma is CJK to HeaPA
            _dapo("Find $x$ if $x+1=3$.", "2", "d"),
            _dapo("Find $x$ if $x+1=3$.", "2", "e"),  # same text, new index: kept
            _dapo("Compute $3^2$.", "9", "f")]
    path = _parquet(tmp_path / "dapo.parquet", dapo)
    out = str(tmp_path / "dapo_math_14k.parquet")
    assert _cli()([f"--dapo_math={path}", "--dapo_14k", f"--dapo_14k_out={out}",
                   f"--train_out={tmp_path / 'd17k.parquet'}"]) == 0
    rows = _read(out)
    assert [(_user(r), r["extra_info"]["index"]) for r in rows] == [
        ("Find $y$ if $2y=8$.", "a"), ("Find $x$ if $x+1=3$.", "d"),
        ("Find $x$ if $x+1=3$.", "e"), ("Compute $3^2$.", "f")]
    assert rows[0]["data_source"] == "math_dapo" and rows[0]["ability"] == "MATH"
    _, counts = benchmarks.dapo_14k_rows(dapo, path)
    assert counts == {"rows": 7, "cjk_removed": 2, "index_duplicates_removed": 1, "kept": 4,
                      "problem_duplicates": 1}
    assert benchmarks.has_cjk("한국어") is False and benchmarks.has_cjk("日本")
    # HeaPA's key is extra_info.index: a row without one is an error, not a guess
    no_index = [{**dapo[0], "extra_info": {"split": "train"}}]
    with pytest.raises(ValueError, match=r"no extra_info.index"):
        benchmarks.dapo_14k_rows(no_index, "dapo.parquet")


def test_openr1_subset_first_rows_seeded_draw_and_heapa_filter(tmp_path):
    rows = [_openr1(i) for i in range(12)]
    rows[3] = _openr1(3, answer="")  # no answer: dropped, counted
    d = tmp_path / "OpenR1-Math-220k" / "data"
    d.mkdir(parents=True)
    # two shards, read in name order
    _parquet(d / "train-00001-of-00002.parquet", rows[6:])
    _parquet(d / "train-00000-of-00002.parquet", rows[:6])
    out = str(tmp_path / "openr1_math_30k.parquet")
    assert _cli()([f"--openr1={d}", "--openr1_30k", "--openr1_n=8",
                   f"--openr1_out={out}"]) == 0
    got = _read(out)
    assert [r["extra_info"]["index"] for r in got] == [
        f"uuid-{i:03d}" for i in (0, 1, 2, 4, 5, 6, 7)]
    assert _user(got[0]) == "Problem 0: find 0 + 1." and got[0]["reward_model"][
        "ground_truth"] == "1"
    assert got[0]["extra_info"] == {"index": "uuid-000", "split": "train",
                                    "source": "olympiads", "problem_type": "Algebra",
                                    "question_type": "math-word-problem"}
    assert got[0]["data_source"] == "openr1_math"
    table = benchmarks.read_tables(str(d))
    _, counts = benchmarks.openr1_rows(table, "d", n=8)
    assert counts == {"rows": 12, "selected": 8, "no_answer": 1, "kept": 7, "rule": "first"}
    # a seeded draw: n rows without replacement, in file order, the same for the same seed
    picked = sorted(np.random.default_rng(5).choice(12, size=5, replace=False))
    a, _ = benchmarks.openr1_rows(table, "d", n=5, seed=5)
    b, _ = benchmarks.openr1_rows(table, "d", n=5, seed=5)
    c, _ = benchmarks.openr1_rows(table, "d", n=5, seed=6)
    assert a == b and a != c
    assert [r["extra_info"]["index"] for r in a] == [
        f"uuid-{int(i):03d}" for i in picked if i != 3]
    with pytest.raises(ValueError, match="fewer than the 13"):
        benchmarks.openr1_rows(table, "d", n=13)
    # HeaPA's OpenR1-Math: < 500 whitespace-separated words, ASCII problem and answer
    heapa = [_openr1(0), _openr1(1, problem="x " * 498 + "?"),
             _openr1(2, problem="y " * 500), _openr1(3, problem="Find x ≥ 0."),
             _openr1(4, answer="√2"), _openr1(5, answer="")]
    out = str(tmp_path / "openr1_heapa.parquet")
    assert _cli()([f"--openr1={_parquet(tmp_path / 'o.parquet', heapa)}", "--openr1_heapa",
                   f"--openr1_heapa_out={out}"]) == 0
    assert [r["extra_info"]["index"] for r in _read(out)] == ["uuid-000", "uuid-001"]
    _, counts = benchmarks.openr1_heapa_rows(heapa, "o")
    assert counts == {"rows": 6, "too_long": 1, "non_ascii": 2, "no_answer": 1, "kept": 2}


def test_missing_columns_and_flags_are_errors_naming_the_file(tmp_path):
    no_solution = _parquet(tmp_path / "math.parquet", [{"problem": "p", "level": "Level 1"}])
    with pytest.raises(ValueError, match=r"math\.parquet: row 0 has no column \['solution'\]"):
        _cli()([f"--math={no_solution}", f"--math_out={tmp_path / 'm.parquet'}"])
    no_answer = [{k: v for k, v in _openr1(0).items() if k != "answer"}]
    with pytest.raises(ValueError, match=r"o\.jsonl: row 0 has no column \['answer'\] for "
                                         r"OpenR1-Math-220k"):
        path = tmp_path / "o.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in no_answer))
        benchmarks.openr1_rows(benchmarks.read_tables(str(path)), str(path))
    with pytest.raises(ValueError, match=r"dapo: row 0 has no DAPO-Math-17k answer"):
        benchmarks.dapo_plus_math_rows([{"prompt": "p"}], MATH, "dapo", "math")
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        benchmarks.read_tables(str(tmp_path / "absent"))
    for argv in (["--dapo_plus_math", f"--math={no_solution}"], ["--dapo_14k"],
                 ["--openr1_30k"], [f"--openr1={no_solution}"], []):
        with pytest.raises(SystemExit):
            _cli()(argv)
