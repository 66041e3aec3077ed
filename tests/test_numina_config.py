"""arXiv 2608.17941 Table 1's comparison (configs/compare_numina.py, the "numina" protocol of
experiment/paper.py): the NuminaMath corpus rule on hand-written rows, its builders (the
launcher flag, the Hugging Face build), every arg's sources and the smoke plan."""

import hashlib
import importlib.util
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from frontier_rl import config_lib
from frontier_rl.data import benchmarks
from frontier_rl.evaluation import suite as eval_suite
from frontier_rl.experiment import compare, hub_fetch, paper, protocol

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# NuminaMath-CoT's schema: source, problem, solution (messages left out: not read)
NUMINA = [
    {"source": "synthetic_math", "problem": "What is $1/2 + 0$?",
     "solution": r"So it is $\boxed{\frac{1}{2}}$."},
    {"source": "olympiads", "problem": "Find $x$ if $x+1=3$.",
     "solution": r"First $\boxed{1}$ is wrong; so $x=\boxed{2}$."},
    {"source": "olympiads", "problem": "Prove that the sum of two odd numbers is even.",
     "solution": "Write them as 2a+1 and 2b+1; the sum is 2(a+b+1)."},  # no box: skipped
    {"source": "cn_k12", "problem": "Unclosed.", "solution": r"So $\boxed{\frac{1}{2}$."},
    {"source": "orca_math", "problem": "Find  $x$ if\n$x+1=3$. ",  # a duplicate by its text
     "solution": r"$x = \boxed{2}$"},
    {"source": "amc_aime", "problem": "", "solution": r"$\boxed{5}$"},  # no problem: skipped
    {"source": "synthetic_amc", "problem": "What is $7-4$?", "solution": r"Thus $\fbox{3}$."},
    {"source": "math", "problem": "What is $2^3$?", "solution": r"$2^3 = \boxed{8}$."},
]


def _config(name, arg):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "configs", name))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.get_config(arg)


def _answers(rows):
    return [(r["prompt"][0]["content"], r["reward_model"]["ground_truth"]) for r in rows]


def test_numina_rows_box_dedup_and_seeded_subset():
    rows, counts = benchmarks.numina_rows(NUMINA, "numina.parquet", n=0)
    assert _answers(rows) == [("What is $1/2 + 0$?", r"\frac{1}{2}"),
                              ("Find $x$ if $x+1=3$.", "2"), ("What is $7-4$?", "3"),
                              ("What is $2^3$?", "8")]
    assert [r["extra_info"]["index"] for r in rows] == ["0", "1", "6", "7"]
    assert rows[1]["extra_info"]["source"] == "olympiads" and rows[0]["data_source"] == (
        "numina_math")
    assert counts == {"rows": 8, "no_boxed_answer": 3, "duplicates": 1, "unique": 4, "kept": 4,
                      "rule": "every problem"}
    a, counts = benchmarks.numina_rows(NUMINA, "numina.parquet", n=2, seed=3)
    b, _ = benchmarks.numina_rows(NUMINA, "numina.parquet", n=2, seed=3)
    assert a == b and counts["kept"] == 2 and counts["rule"] == "seeded draw (seed 3)"
    order = [r for r in rows if r in a]
    assert a == order  # kept in file order
    draws = {tuple(r["extra_info"]["index"] for r in benchmarks.numina_rows(
        NUMINA, "n", n=2, seed=s)[0]) for s in range(8)}
    assert len(draws) > 1  # the seed picks the subset
    with pytest.raises(ValueError, match="4 boxed, distinct NuminaMath problems, fewer than the 5"):
        benchmarks.numina_rows(NUMINA, "numina.parquet", n=5)
    with pytest.raises(ValueError, match="no column.*'solution'"):
        benchmarks.numina_rows([{"problem": "x"}], "numina.parquet")
    assert benchmarks.NUMINA_SUBSET == 30000 and benchmarks.TRAIN_OUT["numina_math"] == (
        paper.DATASETS["numina_math"])


def test_prepare_benchmarks_flag_writes_the_corpus(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location(
        "prepare_benchmarks", os.path.join(ROOT, "launch", "prepare_benchmarks.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    src = tmp_path / "numina"
    src.mkdir()
    pq.write_table(pa.Table.from_pylist(NUMINA), str(src / "train-00000-of-00001.parquet"))
    out = tmp_path / "numina_math.parquet"
    assert mod.main([f"--numina={src}", "--numina_n=3", f"--numina_out={out}"]) == 0
    assert "wrote 3 rows" in capsys.readouterr().out
    rows = pq.read_table(str(out)).to_pylist()
    assert len(rows) == 3 and all(r["reward_model"]["style"] == "rule" for r in rows)


def test_the_corpus_builds_from_its_hub_id(tmp_path, monkeypatch):
    """hub_fetch.build_corpus dispatches numina_math to numina_rows, on an offline hub cache
    holding NuminaMath-CoT's train shard (and a test shard it must not read)."""
    from huggingface_hub.file_download import repo_folder_name

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (repo,) = paper.CORPUS_IDS["numina_math"]
    assert repo == "AI-MO/NuminaMath-CoT"
    folder = tmp_path / "hf" / "hub" / repo_folder_name(repo_id=repo, repo_type="dataset")
    commit = "c" * 40
    for path, rows in (("data/train-00000-of-00001.parquet", NUMINA),
                       ("data/test-00000-of-00001.parquet", NUMINA[:1])):
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pylist(rows), sink)
        content = sink.getvalue().to_pybytes()
        blob = folder / "blobs" / hashlib.sha256(content).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(content)
        link = folder / "snapshots" / commit / path
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blob, link.parent), link)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(commit)
    out = str(tmp_path / "numina_math.parquet")
    monkeypatch.setattr(benchmarks, "NUMINA_SUBSET", 0)  # every problem of the tiny shard
    _, counts, entries = hub_fetch.build_corpus("numina_math", (paper.hub_id(repo),), out)
    assert counts["rows"] == len(NUMINA) and counts["kept"] == 4  # the train shard only
    assert len(pq.read_table(out).to_pylist()) == 4 and len(entries) == 1


def test_base_under_numina_changes_only_what_table1_states():
    """Qwen2.5-Math-1.5B (a HIVE model) under the numina protocol: HIVE's config but for the
    corpus, the rollout budget, Avg@8 and the four benchmarks."""
    hive = paper.base("qwen2.5-math-1.5b", None).to_dict()
    numina = paper.base("qwen2.5-math-1.5b", None, "numina").to_dict()
    diff = {f"{s}.{k}" for s in hive for k in (hive[s] if isinstance(hive[s], dict) else {})
            if hive[s][k] != numina[s].get(k)}
    assert diff == {"task.path", "rl.rollout_budget", "eval.k", "eval.sets"}
    assert numina["task"]["path"] == "data/train/numina_math.parquet"
    assert (numina["rl"]["rollout_budget"], numina["eval"]["k"]) == (1_500_000, 8)
    assert set(numina["eval"]["sets"]) == set(eval_suite.NUMINA_BENCHMARKS) == {
        "math500", "aime24", "aime25", "olympiadbench"}
    llama = paper.base("llama3.2-1b-instruct", None)
    assert (llama.model.preset, llama.model.path) == ("llama3.2-1b",
                                                     "checkpoints/Llama-3.2-1B-Instruct")
    assert paper.MODEL_IDS["Llama-3.2-1B-Instruct"] == "meta-llama/Llama-3.2-1B-Instruct"
    assert (llama.rl.batch_size, llama.rl.group_size, llama.rollout.max_new_tokens) == (
        256, 8, 2560)
    with pytest.raises(ValueError, match="protocol='nope'"):
        paper.base("qwen2.5-math-1.5b", None, "nope")


@pytest.mark.parametrize("arg", ["", "qwen2.5-math-1.5b", "llama3.2-1b-instruct",
                                 "llama3.2-1b-instruct,numina_math"])
def test_every_arg_is_sourced_and_runs_table1_at_equal_rollouts(arg):
    c = _config("compare_numina.py", arg)
    assert protocol.check(c, tuple(protocol.SOURCES["numina"])) == []
    assert protocol.unsourced(c) == []
    assert "(missing)" not in protocol.table(c)
    assert c.protocol.rl.rollout_budget.startswith("paper: 2608.17941 Table 1")
    assert c.protocol.rl.learning_rate.startswith("ours: HIVE's")
    assert "2608.17941's text was not read" in c.protocol.rl.learning_rate
    assert c.protocol.task.path.startswith("ours: ") and "NuminaMath-CoT" in c.protocol.task.path
    assert c.protocol.compare.methods.startswith("paper: 2608.17941 Table 1")
    assert "GVM" in c.protocol.compare.methods
    cc = c.compare
    assert (cc.budget, cc.rollout_budget, cc.metric, cc.target) == (
        "rollouts", 1_500_000, "bench_mean", "grpo")
    assert (cc.token_budget, cc.pflops_budget, cc.seeds, cc.evals) == (0, 0.0, "0", 20)
    assert "gvm" not in cc.methods
    run = cc.run.split(",")
    assert run[:5] == ["grpo", "greso", "pcl", "hive", "heapa"]
    assert "ds" in cc.methods and "ds" not in run
    for name in ("speed", "hive_v2", "mopps", "learnability"):
        assert (name in run) == (name in cc.methods)
    specs = compare.plan(c, "/tmp/unused")
    assert [s.method for s in specs] == run
    assert {(s.config.rl.rollout_budget, s.config.eval.every_rollouts, s.config.eval.k)
            for s in specs} == {(1_500_000, 75_000, 8)}
    if arg.startswith("llama"):
        assert "Llama-3.2-1B-Instruct" in c.protocol.model.path
        assert "128k context" in c.protocol.rollout.max_new_tokens


def test_smoke_plans_every_method_at_smoke_size():
    c = _config("compare_numina.py", "smoke")
    assert "protocol" not in c
    specs = compare.plan(c, "/tmp/unused")
    assert [s.method for s in specs] == ["grpo", "greso", "pcl"]
    assert {(s.config.rl.rollout_budget, s.config.rl.batch_size) for s in specs} == {(48, 4)}
    c.compare.run = ",".join(c.compare.methods.keys())  # every arm validates at smoke size
    assert len(compare.plan(c, "/tmp/unused")) == len(c.compare.methods)
    c = _config("compare_numina.py", "llama3.2-1b-instruct,smoke")
    assert c.model.preset == "" and config_lib.validate(c)


def test_the_other_paper_configs_take_the_new_model():
    """math_grpo / math_dapo / math_heapa accept every paper.MODELS arg: the 1B Llama runs
    HIVE's DS under the numina protocol."""
    c = _config("math_dapo.py", "llama3.2-1b-instruct")
    assert (c.selector.ds.gen_batch_size, c.selector.ds.max_num_gen_batches) == (384, 0)
    assert c.rl.loss == "grpo" and c.protocol.selector.ds.gen_batch_size.startswith("ours: ")
    for name in ("math_grpo.py", "math_heapa.py"):
        c = _config(name, "llama3.2-1b-instruct")
        assert protocol.check(c, tuple(protocol.SOURCES["numina"])) == [], name
