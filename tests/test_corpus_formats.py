"""verl-format corpora, chat templates, prepared (TFDS) corpora and the benchmark converters."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from frontier_rl.data import benchmarks, fixtures
from frontier_rl.tasks import chat, make_task


@pytest.fixture(scope="module")
def smoke():
    return fixtures.math_smoke("qwen2")


def _verl(path, n=12):
    rows = [{"data_source": "math_dapo",
             "prompt": [{"role": "system", "content": "Be brief."},
                        {"role": "user", "content": f"What is {i} plus 1?"}],
             "ability": "MATH", "reward_model": {"style": "rule", "ground_truth": str(i + 1)},
             "extra_info": {"index": i, "split": "train"}} for i in range(n)]
    rows.append({**rows[0], "reward_model": {"style": "rule", "ground_truth": None}})
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_verl_rows_become_messages_not_their_repr(tmp_path):
    path = _verl(str(tmp_path / "c.parquet"))
    task = make_task("corpus", {"path": path, "eval_fraction": 0.25, "verify_workers": 0}, 0)
    assert task.stats["skipped_no_answer"] == 1 and len(task.train) + len(task.eval) == 12
    p = next(p for p in task.train + task.eval if p.meta["row"] == 3)
    assert p.text == "Be brief.\n\nWhat is 3 plus 1?" and p.answer == "4"
    assert p.meta["data_source"] == "math_dapo"
    assert task.verify(p, r"so \boxed{4}") == 1 and task.verify(p, "4") == -1


def test_chat_template_system_prompt_and_instruction(tmp_path, smoke):
    path = _verl(str(tmp_path / "c.parquet"))
    cfg = {"path": path, "chat_template": smoke["model"], "system_prompt": "Sys.",
           "instruction": chat.BOXED_STEP_BY_STEP, "prompt_template": "Q: {prompt}",
           "eval_fraction": 0.0, "verify_workers": 0}
    task = make_task("corpus", cfg, 0)
    assert task.train[0].text == (
        "<|im_start|>system\nSys.<|im_end|>\n<|im_start|>user\nQ: What is 0 plus 1? Let's "
        "think step by step and output the final answer within \\boxed{}.<|im_end|>\n"
        "<|im_start|>assistant\n")
    # system_prompt=None keeps the row's system message
    task = make_task("corpus", {**cfg, "system_prompt": None}, 0)
    assert task.train[0].text.startswith("<|im_start|>system\nBe brief.<|im_end|>")


def test_plain_jsonl_with_bucket_by_data_source(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"q{i}", "answer": str(i),
                                        "data_source": "a" if i % 2 else "b"}) + "\n"
                            for i in range(10)))
    task = make_task("corpus", {"path": str(path), "bucket_key": "data_source",
                                "eval_fraction": 0.0, "verify_workers": 0}, 0)
    assert task.buckets == ["a", "b"] and task.train[1].text == "q1"


def test_prepared_tfds_corpus_is_read_in_order_and_sharded(tmp_path, smoke):
    from frontier_rl import data

    out = data.prepare(smoke["train"], "smoke_corpus", str(tmp_path))
    assert out["rows"] == 160 and out["path"] == "tfds:smoke_corpus"
    cfg = {"path": "tfds:smoke_corpus", "data_dir": str(tmp_path), "eval_fraction": 0.0,
           "chat_template": smoke["model"], "verify_workers": 0}
    task = make_task("corpus", cfg, 0)
    direct = make_task("corpus", {**cfg, "path": smoke["train"]}, 0)
    assert [p.text for p in task.train] == [p.text for p in direct.train]
    assert [p.answer for p in task.train] == [p.answer for p in direct.train]
    import tensorflow_datasets as tfds

    halves = [tfds.data_source("smoke_corpus", split=data.shard_split("train", i, 2),
                               data_dir=str(tmp_path)) for i in range(2)]
    assert [len(h) for h in halves] == [80, 80] and halves[1][0]["row"] == 80


def test_benchmark_converters_read_the_real_schemas(smoke):
    for name in benchmarks.BENCHMARKS:
        rows = [json.loads(x) for x in open(smoke["eval_sets"][name])]
        assert len(rows) == 3 and all(r["prompt"] and r["answer"] for r in rows)
        assert rows[0]["data_source"] == name
    gpqa = [json.loads(x) for x in open(smoke["eval_sets"]["gpqa_diamond"])]
    assert all(r["answer"] in "ABCD" and "(D)" in r["prompt"] for r in gpqa)
    olymp = [json.loads(x) for x in open(smoke["eval_sets"]["olympiadbench"])]
    assert not any("$" in r["answer"] for r in olymp)
    # GRESO's (HIVE's) AMC: AI-MO/aimo-validation-amc, float answers written as integers
    amc = [json.loads(x) for x in open(smoke["eval_sets"]["aimo_amc"])]
    assert all(r["answer"].isdigit() for r in amc)
    assert benchmarks.BENCHMARKS["aimo_amc"].rows == 83


def test_dapo_instruction_is_stripped():
    content = ("Solve the following math problem step by step. The last line of your response "
               "should be of the form Answer: $Answer (without quotes) where $Answer is the "
               "answer to the problem.\n\nFind $x$ if $x+1=3$.\n\nRemember to put your answer "
               "on its own line after \"Answer:\".")
    rows = benchmarks.dapo_math_rows([{"prompt": [{"role": "user", "content": content}],
                                       "reward_model": {"ground_truth": "2"}}])
    assert rows[0]["prompt"][0]["content"] == "Find $x$ if $x+1=3$."


def test_warmstart_pairs_use_the_verifiers_format_or_are_refused(tmp_path):
    from frontier_rl import config_lib, policy, train, warmstart

    path = _verl(str(tmp_path / "c.parquet"), n=40)
    task = make_task("corpus", {"path": path, "eval_fraction": 0.0, "verify_workers": 0}, 0)
    ws = config_lib.default_config().warmstart
    ws.batch_size = 8
    pairs = warmstart.pairs_for(task, [], ws, 0)
    assert pairs[0][1] == "\\boxed{1}" and task.verify(task.train[0], pairs[0][1]) == 1
    numeric = make_task("corpus", {"path": path, "verifier": "numeric", "eval_fraction": 0.0,
                                   "verify_workers": 0}, 0)
    assert warmstart.pairs_for(numeric, [], ws, 0)[0][1] == "Answer: 1"
    task.response_template = None
    with pytest.raises(train.RunError, match="warmstart.enabled=False"):
        warmstart.pairs_for(task, [], ws, 0)
    assert "W" in policy.alphabet(task)  # an alphabet without a response format
