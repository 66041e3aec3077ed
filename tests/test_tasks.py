"""Tests for frontier_rl.tasks: arith generation, verifiers, tokenizer, corpora, reasoning-gym."""

import collections
import json
import sys
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontier_rl import tasks
from frontier_rl.tasks import arith, verify
from frontier_rl.tasks.base import REWARD_CORRECT, REWARD_INVALID, REWARD_WRONG

SMALL = {"train_size": 2000, "eval_per_bucket": 64}


@pytest.fixture(scope="module")
def arith_task():
    return tasks.make_task("arith", SMALL, seed=0)


def _unreverse_sum(text: str) -> int:
    """Independent decoding of a reversed-digit prompt: "73+5+218=" -> 37 + 5 + 812."""
    assert text.endswith("=")
    return sum(int(t[::-1]) for t in text[:-1].split("+"))


# ----------------------------------------------------------------------------- arith


def test_arith_deterministic_with_stable_ids(arith_task):
    again = tasks.make_task("arith", SMALL, seed=0)
    assert [(p.id, p.text, p.answer) for p in arith_task.train] == [
        (p.id, p.text, p.answer) for p in again.train]
    assert arith_task.eval == again.eval
    ids = [p.id for p in arith_task.train + arith_task.eval]
    assert len(set(ids)) == len(ids)
    assert all(p.id.startswith(f"arith/{p.bucket}/") for p in arith_task.train)
    # Another seed gives another pool; a fixed data_seed gives the same pool for any seed.
    other = tasks.make_task("arith", SMALL, seed=1)
    assert {p.text for p in other.train} != {p.text for p in arith_task.train}
    pinned = [tasks.make_task("arith", {**SMALL, "data_seed": 7}, seed=s) for s in (0, 5)]
    assert pinned[0].train == pinned[1].train
    # The resolved config rebuilds the very same task.
    assert tasks.make_task("arith", arith_task.config, seed=123).train == arith_task.train


def test_arith_prefix_stable_ids():
    # Growing the pool keeps the first problems of each bucket (same ids, same texts).
    small = tasks.make_task("arith", {"train_size": 400, "eval_per_bucket": 8}, seed=3)
    large = tasks.make_task("arith", {"train_size": 800, "eval_per_bucket": 8}, seed=3)
    by_id = {p.id: p.text for p in large.train}
    assert all(by_id[p.id] == p.text for p in small.train)


def test_arith_buckets_and_counts(arith_task):
    assert arith_task.buckets == ["2op", "3op", "4op", "5op"]
    assert collections.Counter(p.bucket for p in arith_task.train) == {
        b: 500 for b in arith_task.buckets}
    assert collections.Counter(p.bucket for p in arith_task.eval) == {
        b: 64 for b in arith_task.buckets}
    # Buckets are mixed, not sorted, so any prefix of the pool covers all of them.
    assert len({p.bucket for p in arith_task.train[:40]}) == 4
    weighted = tasks.make_task(
        "arith", {"train_size": 1000, "bucket_weights": [3, 1, 1, 0], "eval_per_bucket": 4}, 0)
    assert collections.Counter(p.bucket for p in weighted.train) == {
        "2op": 600, "3op": 200, "4op": 200}


def test_arith_eval_disjoint_from_train_and_warmstart(arith_task):
    train_texts = {p.text for p in arith_task.train}
    eval_texts = {p.text for p in arith_task.eval}
    assert len(train_texts) == len(arith_task.train)  # no repeats in the pool
    assert len(eval_texts) == len(arith_task.eval)
    assert not train_texts & eval_texts
    pairs = tasks.warmstart_examples(arith_task, ["2op", "3op"], 2000, seed=0)
    assert len(pairs) == 2000
    assert not {q for q, _ in pairs} & eval_texts
    counts = collections.Counter(q.count("+") + 1 for q, _ in pairs)
    assert counts == {2: 1000, 3: 1000}
    assert pairs == tasks.warmstart_examples(arith_task, ["2op", "3op"], 2000, seed=0)
    assert pairs != tasks.warmstart_examples(arith_task, ["2op", "3op"], 2000, seed=1)
    with pytest.raises(ValueError, match="warm-start buckets"):
        tasks.warmstart_examples(arith_task, ["9op"], 10)


def test_arith_reversed_digit_format(arith_task):
    for p in arith_task.train[:500] + arith_task.eval:
        ops = p.text[:-1].split("+")
        assert len(ops) == arith.bucket_operands(p.bucket)
        assert all(1 <= len(t) <= 3 and t.isdigit() for t in ops)
        assert p.answer == str(_unreverse_sum(p.text))[::-1]
        assert p.meta["operands"] == [int(t[::-1]) for t in ops]
    # The documented example, and the plain (MSD-first) variant.
    assert arith.format_prompt([37, 5, 812]) == "73+5+218="
    assert arith.solve("73+5+218=") == "458"
    assert arith.solve("37+5+812=", reverse_digits=False) == "854"
    plain = tasks.make_task("arith", {"train_size": 40, "eval_per_bucket": 4,
                                      "reverse_digits": False}, 0)
    for p in plain.train:
        assert int(p.answer) == sum(int(t) for t in p.text[:-1].split("+"))


def test_arith_digit_counts_mix_within_problems(arith_task):
    lengths = [{len(t) for t in p.text[:-1].split("+")} for p in arith_task.train]
    assert sum(len(s) > 1 for s in lengths) > len(lengths) // 2


@pytest.mark.parametrize("response,finished,expected", [
    ("458", True, REWARD_CORRECT),
    ("4580", True, REWARD_CORRECT),  # zero padding is the same number
    ("459", True, REWARD_WRONG),
    ("854", True, REWARD_WRONG),  # not reversed
    ("", True, REWARD_INVALID),
    ("45+8", True, REWARD_INVALID),
    ("4a", True, REWARD_INVALID),
    ("458", False, REWARD_INVALID),  # never emitted EOS
])
def test_arith_verify(arith_task, response, finished, expected):
    p = tasks.Prompt(id="x", text="73+5+218=", answer="458", bucket="3op")
    assert arith_task.verify(p, response, finished=finished) == expected


def test_arith_verify_own_answers(arith_task):
    for p in arith_task.eval:
        assert arith_task.verify(p, p.answer) == REWARD_CORRECT
        assert arith_task.verify(p, p.answer + "1") == REWARD_WRONG


def test_config_handling():
    with pytest.raises(ValueError, match="max_operand"):
        tasks.make_task("arith", {"max_operand": 4}, 0)
    with pytest.raises(ValueError, match="Unknown task"):
        tasks.make_task("nope", {}, 0)
    with pytest.raises(ValueError, match="distinct problems"):
        tasks.make_task("arith", {"max_digits": 1, "max_operands": 2, "train_size": 200}, 0)
    import ml_collections

    cfg = ml_collections.ConfigDict({"name": "arith", "max_operands": 3, "train_size": 60,
                                     "eval_per_bucket": 4})
    task = tasks.make_task(cfg.name, cfg, seed=0)
    assert task.buckets == ["2op", "3op"] and len(task.train) == 60
    assert len({task.train[0], task.train[0]}) == 1  # prompts are hashable


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.integers(0, 10**9), min_size=1, max_size=8), reverse=st.booleans())
def test_solve_matches_generated_answer(ops, reverse):
    text = arith.format_prompt(ops, reverse)
    assert arith.solve(text, reverse) == arith.format_answer(sum(ops), reverse)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), max_digits=st.integers(1, 4))
def test_solve_matches_task_answers(seed, max_digits):
    cfg = {"train_size": 40, "eval_per_bucket": 4, "max_digits": max_digits}
    task = tasks.make_task("arith", cfg, seed)
    for p in task.train + task.eval:
        assert tasks.solve(p.text) == p.answer


@given(st.text(alphabet="0123456789+= x", max_size=12))
def test_solve_rejects_ill_formed(text):
    try:
        arith.solve(text)
    except ValueError:
        return
    # Anything accepted must be digits(+digits)*= exactly.
    body = text[:-1].split("+")
    assert text.endswith("=") and all(t.isdigit() for t in body)


# ----------------------------------------------------------------------------- tokenizer


def test_char_tokenizer_round_trip_and_reload(tmp_path):
    from transformers import PreTrainedTokenizerFast

    tok = tasks.build_char_tokenizer(tasks.ARITH_ALPHABET, str(tmp_path / "tok"))
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id, tok.unk_token_id) == (
        0, 1, 2, 3)
    assert len(tok) == 4 + len(tasks.ARITH_ALPHABET)
    text = "73+5+218=458"
    ids = tasks.encode(tok, text)
    assert len(ids) == len(text) and min(ids) >= 4  # no special tokens added
    assert tasks.decode(tok, [tok.bos_token_id, *ids, tok.eos_token_id]) == text
    loaded = PreTrainedTokenizerFast.from_pretrained(str(tmp_path / "tok"))
    assert tasks.encode(loaded, text) == ids
    assert tasks.decode(loaded, ids) == text
    assert loaded.eos_token_id == 2 and loaded.pad_token_id == 0
    # Spaces and newlines survive (no merging or inserted spaces).
    other = tasks.build_char_tokenizer("ab \n")
    assert tasks.decode(other, tasks.encode(other, "a b\n ba  ")) == "a b\n ba  "
    assert tasks.encode(other, "z") == [other.unk_token_id]
    with pytest.raises(ValueError):
        tasks.build_char_tokenizer("aa")


# ----------------------------------------------------------------------------- verifiers


def test_extractors():
    assert verify.extract_number("so 1,234.50 apples") == "1234.50"
    assert verify.extract_number("x = -3/4.") == "-3/4"
    assert verify.extract_number("no digits") is None
    assert verify.extract_final_answer("a <answer> 1 </answer> b <answer>2</answer>") == "2"
    assert verify.extract_final_answer("work\nAnswer: 17\n") == "17"
    assert verify.extract_final_answer(r"so \boxed{\frac{1}{2}}.") == r"\frac{1}{2}"
    assert verify.extract_final_answer("... #### 72") == "72"
    assert verify.extract_final_answer("17") is None
    assert verify.extract_final_answer("17", allow_bare=True) == "17"
    assert verify.numeric_reward("Answer: 0.50", "1/2") == REWARD_CORRECT
    assert verify.numeric_reward("the total is 73", "rationale #### 72") == REWARD_WRONG
    assert verify.numeric_reward("no idea", "72") == REWARD_INVALID
    assert verify.numeric_reward("72", "72", finished=False) == REWARD_INVALID


@pytest.mark.parametrize("response,answer,expected", [
    (r"so \boxed{1/2}", "0.5", REWARD_CORRECT),
    (r"\boxed{\frac{1}{2}}", "0.5", REWARD_CORRECT),
    (r"\boxed{0.5}", r"\frac{1}{2}", REWARD_CORRECT),
    (r"\boxed{x+1}", "1+x", REWARD_CORRECT),
    (r"\boxed{0.6}", "0.5", REWARD_WRONG),
    ("the answer is 0.5", "0.5", REWARD_INVALID),  # no boxed answer
    (r"\boxed{}", "0.5", REWARD_INVALID),
    ("", "0.5", REWARD_INVALID),
])
def test_math_verify_reward(response, answer, expected):
    assert verify.math_verify_reward(response, answer) == expected


def test_math_verify_reward_off_main_thread():
    # math-verify's default signal.alarm timeouts raise outside the main thread.
    results, errors = [], []

    def work():
        try:
            results.append(verify.math_verify_reward(r"so \boxed{\frac{2}{4}}", "0.5"))
            results.append(verify.math_verify_reward(r"\boxed{3}", "0.5"))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and sorted(results) == [0, 0, 1, 1]


# ----------------------------------------------------------------------------- corpora


def _write_jsonl(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


ROWS = [{"prompt": f"What is {i} + {i}?", "answer": str(2 * i), "level": i % 3}
        for i in range(40)]


def test_jsonl_corpus_skips_rows_without_answer(tmp_path):
    rows = ROWS + [{"prompt": "no answer key"}, {"prompt": "null", "answer": None},
                   {"prompt": "blank", "answer": "  "}, {"answer": "1"}]
    _write_jsonl(tmp_path / "qa.jsonl", rows)
    cfg = {"path": str(tmp_path / "qa.jsonl"), "eval_fraction": 0.25, "verifier": "numeric",
           "bucket_key": "level"}
    task = tasks.make_task("corpus", cfg, seed=0)
    assert task.stats["skipped_no_answer"] == 3
    assert task.stats["skipped_no_prompt"] == 1
    assert len(task.train) == 30 and len(task.eval) == 10
    assert not {p.text for p in task.train} & {p.text for p in task.eval}
    assert task.buckets == ["0", "1", "2"]
    assert task.train[0].id.startswith("qa/")
    p = task.eval[0]
    assert task.verify(p, f"Answer: {p.answer}") == REWARD_CORRECT
    assert task.verify(p, "Answer: 1000") == REWARD_WRONG
    assert task.verify(p, "nothing") == REWARD_INVALID
    again = tasks.make_task("corpus", cfg, seed=0)
    assert [p.id for p in again.eval] == [p.id for p in task.eval]


def test_corpus_errors(tmp_path):
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        tasks.make_task("corpus", {"path": str(missing)}, 0)
    (tmp_path / "bad.jsonl").write_text('{"prompt": "a", "answer": "1"}\n{oops\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        tasks.make_task("corpus", {"path": str(tmp_path / "bad.jsonl")}, 0)


def test_parquet_corpus_with_math_verify(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"question": f"Half of {2 * i + 1}?", "solution": f"{2 * i + 1}/2"} for i in range(20)]
    rows.append({"question": "missing", "solution": None})
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "half.parquet")
    cfg = {"path": str(tmp_path / "half.parquet"), "prompt_key": "question",
           "answer_key": "solution", "eval_fraction": 0.2}
    task = tasks.make_task("corpus", cfg, seed=0)
    assert task.stats["skipped_no_answer"] == 1
    assert (len(task.train), len(task.eval)) == (16, 4)
    p = task.train[0]
    value = int(p.text.split()[2].rstrip("?")) / 2
    assert task.verify(p, rf"so \boxed{{{value}}}") == REWARD_CORRECT
    assert task.verify(p, rf"so \boxed{{{value + 1}}}") == REWARD_WRONG
    assert task.verify(p, f"{value}") == REWARD_INVALID


def test_tfds_corpus_via_data_source(tmp_path):
    import tensorflow_datasets as tfds

    class FrontierRlTinyQa(tfds.core.GeneratorBasedBuilder, skip_registration=True):
        """A 12-row question/answer set written as array_record (no tensorflow needed).

        Unregistered, so reruns in one process don't clash; data_source finds it on disk.
        """

        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            text = tfds.features.Text()
            return tfds.core.DatasetInfo(
                builder=self,
                features=tfds.features.FeaturesDict({"question": text, "answer": text}))

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples(10), "test": self._generate_examples(2)}

        def _generate_examples(self, n):
            for i in range(n):
                yield i, {"question": f"{n}: {i}+1?", "answer": "" if i == 3 else str(i + 1)}

    builder = FrontierRlTinyQa(data_dir=str(tmp_path), file_format="array_record")
    builder.download_and_prepare()
    cfg = {"path": "tfds:frontier_rl_tiny_qa", "data_dir": str(tmp_path),
           "prompt_key": "question", "eval_split": "test", "verifier": "numeric"}
    task = tasks.make_task("corpus", cfg, seed=0)
    assert "tensorflow" not in sys.modules
    assert task.stats["skipped_no_answer"] == 1  # row 3 of train has an empty answer
    assert (len(task.train), len(task.eval)) == (9, 2)
    assert task.eval[0].id.startswith("frontier_rl_tiny_qa/test/")
    p = task.train[0]
    assert task.verify(p, f"Answer: {p.answer}") == REWARD_CORRECT
    with pytest.raises(ValueError, match="no_such_dataset"):
        tasks.make_task("corpus", {"path": "tfds:no_such_dataset", "data_dir": str(tmp_path)}, 0)


# ----------------------------------------------------------------------------- reasoning-gym


def test_reasoning_gym_task():
    task = tasks.make_task("gym:leg_counting", {"train_size": 100, "eval_size": 30}, seed=0)
    assert task.name == "gym:leg_counting" and task.buckets == ["leg_counting"]
    assert len(task.train) == 100 - task.stats["train_duplicates"]
    assert not {p.text for p in task.train} & {p.text for p in task.eval}
    assert task.train[0].id == "gym/leg_counting/000000"
    q = task.train[0].meta["entry"]["question"]
    assert task.prompt_wrapper.format(prompt=q) == task.train[0].text  # augmentation's wrap
    for p in task.eval:
        assert task.verify(p, f"I count.\n<answer>{p.answer}</answer>") == REWARD_CORRECT
        assert task.verify(p, f"<answer>{int(p.answer) + 1}</answer>") == REWARD_WRONG
    p = task.eval[0]
    # Partial credit from the scorer never leaks: a longer string containing the answer is 0.
    assert task.verify(p, f"<answer>{p.answer} legs, or {p.answer}0</answer>") == REWARD_WRONG
    assert task.verify(p, "I don't know") == REWARD_INVALID
    assert task.verify(p, f"<answer>{p.answer}</answer>", finished=False) == REWARD_INVALID
    again = tasks.make_task("gym:leg_counting", {"train_size": 100, "eval_size": 30}, seed=0)
    assert [p.text for p in again.eval] == [p.text for p in task.eval]
    with pytest.raises(ValueError, match="leg_counting"):
        tasks.make_task("gym:leg_countin", {}, 0)


# ----------------------------------------------------------------------------- any task


def test_reasoning_gym_buckets_from_metadata():
    cfg = {"train_size": 200, "eval_size": 60, "bucket_key": "num_terms",
           "dataset_kwargs": {"min_terms": 3, "max_terms": 5, "min_digits": 1, "max_digits": 1,
                              "operators": ["+", "-"], "allow_parentheses": False}}
    task = tasks.make_task("gym:basic_arithmetic", cfg, seed=0)
    assert task.buckets == ["num_terms=3", "num_terms=4", "num_terms=5"]
    assert task.easy_buckets == ["num_terms=3"]
    for p in task.train[:20]:
        assert p.bucket == f"num_terms={p.text.count(' + ') + p.text.count(' - ') + 1}"
    with pytest.raises(ValueError, match="no metadata field 'nope'"):
        tasks.make_task("gym:basic_arithmetic", {**cfg, "bucket_key": "nope"}, seed=0)


def test_fields_of_another_task_at_their_defaults_are_ignored():
    arith_section = {"name": "arith", **arith.DEFAULTS}
    task = tasks.make_task("gym:leg_counting", {**arith_section, "train_size": 30,
                                                "eval_size": 10}, seed=0)
    assert task.name == "gym:leg_counting" and "max_digits" not in task.config
    tasks.check_config("gym:leg_counting", arith_section)
    # A field the user really set is an error naming it and its value.
    with pytest.raises(ValueError, match=r"task.max_digits=4: not a field of gym tasks"):
        tasks.check_config("gym:leg_counting", {**arith_section, "max_digits": 4})
    with pytest.raises(ValueError, match=r"task.bucket_keys='x': not a field of gym tasks"):
        tasks.make_task("gym:leg_counting", {"bucket_keys": "x"}, seed=0)


def test_missing_reasoning_gym_is_one_clear_line(monkeypatch):
    # None in sys.modules makes `import reasoning_gym` raise ImportError, as when not installed.
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)
    monkeypatch.setitem(sys.modules, "reasoning_gym.factory", None)
    for call in (lambda: tasks.make_task("gym:leg_counting", {}, 0),
                 lambda: tasks.check_config("gym:leg_counting", {})):
        with pytest.raises(ImportError) as e:
            call()
        assert "install frontier_rl[tasks]" in str(e.value) and "\n" not in str(e.value)
        assert e.value.__cause__ is None and e.value.__suppress_context__


def _corpus_task(tmp_path, verifier):
    rows = [{"prompt": f"Half of {2 * i + 1}?", "answer": f"{2 * i + 1}/2"} for i in range(20)]
    if verifier == "math_verify":  # a text answer, compared verbatim inside \boxed{}
        rows += [{"prompt": "Capital of France?", "answer": "Paris"}]
    _write_jsonl(tmp_path / f"{verifier}.jsonl", rows)
    return tasks.make_task("corpus", {"path": str(tmp_path / f"{verifier}.jsonl"),
                                      "verifier": verifier, "eval_fraction": 0.1}, seed=0)


def _kinds(tmp_path):
    out = {"arith": tasks.make_task("arith", SMALL, seed=0),
           "corpus_math_verify": _corpus_task(tmp_path, "math_verify"),
           "corpus_numeric": _corpus_task(tmp_path, "numeric")}
    out["gym"] = tasks.make_task("gym:basic_arithmetic", {"train_size": 100, "eval_size": 10},
                                 seed=0)
    return out


def test_warmstart_responses_are_scored_correct_by_each_task(tmp_path):
    """The warm start teaches responses the task's own verifier scores +1, for every kind."""
    from frontier_rl import config_lib, warmstart

    ws = config_lib.default_config().warmstart
    ws.steps, ws.batch_size = 4, 8
    kinds = _kinds(tmp_path)
    assert set(kinds) == {"arith", "corpus_math_verify", "corpus_numeric", "gym"}
    for kind, task in kinds.items():
        pairs = warmstart.pairs_for(task, [], ws, seed=0)  # [] = the task's easier half
        assert pairs, kind
        by_text = {p.text: p for p in task.train}
        # procedural tasks (arith, gym) draw fresh prompts outside the pool: their reference
        # answers come from the same stream
        fresh = dict(task.examples(task.easy_buckets, 32, 0)) if task.examples else {}
        for q, response in pairs[:50]:
            if q in by_text:
                p = by_text[q]
            else:
                assert kind in ("arith", "gym") and q not in {e.text for e in task.eval}
                p = tasks.Prompt("x", q, fresh[q], "", meta={"entry": {
                    "question": q, "answer": fresh[q], "metadata": {}}})
                if kind == "arith":
                    assert fresh[q] == tasks.solve(q)
            assert task.verify(p, response) == REWARD_CORRECT, (kind, q, response)
            assert response == task.format_response(p.answer)
    assert kinds["arith"].format_response("458") == "458"
    assert kinds["corpus_math_verify"].format_response("1/2") == r"\boxed{1/2}"
    assert kinds["gym"].format_response("7") == "<answer>7</answer>"
    # the bug this pins: a bare answer is invalid to the gym verifier
    p = kinds["gym"].train[0]
    assert kinds["gym"].verify(p, p.answer) == REWARD_INVALID


def test_warmstart_buckets_default_and_errors(arith_task, tmp_path):
    from frontier_rl import config_lib, train, warmstart

    ws = config_lib.default_config().warmstart
    ws.steps, ws.batch_size = 4, 8
    assert arith_task.easy_buckets == ["2op", "3op"]
    pairs = warmstart.pairs_for(arith_task, [], ws, seed=0)
    assert {q.count("+") + 1 for q, _ in pairs} == {2, 3}
    with pytest.raises(train.RunError, match=r"\['9op'\], not among"):
        warmstart.pairs_for(arith_task, ["9op"], ws, seed=0)
    # A format the verifier rejects stops the run before it trains on it.
    _write_jsonl(tmp_path / "bad.jsonl", [{"prompt": f"q{i}", "answer": str(i)}
                                          for i in range(10)])
    bad = tasks.make_task("corpus", {"path": str(tmp_path / "bad.jsonl"),
                                     "response_template": "{answer}"}, seed=0)
    with pytest.raises(train.RunError, match="not scored correct"):
        warmstart.pairs_for(bad, [], ws, seed=0)
    ws.batch_size = 128  # more than the slice holds: an error, not an endless batch loop
    with pytest.raises(train.RunError, match="fewer than warmstart.batch_size=128"):
        warmstart.pairs_for(_corpus_task(tmp_path, "numeric"), [], ws, seed=0)



def test_reasoning_gym_warmstart_examples_are_fresh_and_scored_correct():
    cfg = {"train_size": 300, "eval_size": 100, "bucket_key": "num_terms",
           "dataset_kwargs": {"min_terms": 3, "max_terms": 6, "min_digits": 1, "max_digits": 1,
                              "operators": ("+", "-"), "allow_parentheses": False}}
    task = tasks.make_task("gym:basic_arithmetic", cfg, seed=0)
    pairs = task.examples(["num_terms=3", "num_terms=4"], 500, 0)
    assert len(pairs) == 500
    pool = {p.text for p in task.train} | {p.text for p in task.eval}
    assert not pool & {q for q, _ in pairs}  # apart from the pool and the eval set
    assert {q.count(" + ") + q.count(" - ") + 1 for q, _ in pairs} == {3, 4}
    for q, a in pairs[:50]:  # the warm start's response for each is scored correct
        prompt = tasks.base.Prompt(id="x", text=q, answer=a, bucket="", meta={
            "entry": {"question": q, "answer": a, "metadata": {}}})
        assert task.verify(prompt, task.format_response(a)) == tasks.REWARD_CORRECT
    assert task.examples(["num_terms=3", "num_terms=4"], 500, 0) == pairs  # by seed
    assert task.examples(["num_terms=3", "num_terms=4"], 500, 1) != pairs
    assert tasks.make_task("arith", {}, seed=0).examples(["2op"], 10, 0)
