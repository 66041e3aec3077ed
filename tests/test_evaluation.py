"""Held-out evaluation (frontier_rl/evaluation/) against a scripted engine and verifier: Avg@k,
pass@k (plain and unbiased), invalid@k, response length and greedy accuracy per bucket, worked
out by hand, with the prompts split over several chunks (each chunk's rows must land on their
own prompts)."""

import numpy as np
import pytest
from engine_testlib import ScriptedEngine

from frontier_rl import evaluation
from frontier_rl.rollout.engine import Sampling
from frontier_rl.tasks import Prompt

K = 3
# Five prompts with distinct answers, buckets interleaved (a, a, b, b, a), so a row scored
# against the wrong prompt or put in the wrong bucket changes the figures.
PROMPTS = [Prompt("p0", "1+1=", "2", "a"), Prompt("p1", "2+2=", "4", "a"),
           Prompt("p2", "3+3=", "6", "b"), Prompt("p3", "4+4=", "8", "b"),
           Prompt("p4", "5+5=", "01", "a")]
# (response, finished) of sample j of each prompt; "" is no answer, an unfinished row hit the cap.
SAMPLED = {"1+1=": [("2", True), ("3", True), ("2", True)],  # outcomes 1 0 1, lengths 2 2 2
           "2+2=": [("5", True), ("", True), ("444444", False)],  # 0 -1 -1, lengths 2 1 6
           "3+3=": [("6", True), ("6", True), ("6", True)],  # 1 1 1, lengths 2 2 2
           "4+4=": [("7", True), ("9", True), ("", True)],  # 0 0 -1, lengths 2 2 1
           "5+5=": [("10", True), ("01", True), ("01", True)]}  # 0 1 1, lengths 3 3 3
GREEDY = {"1+1=": ("2", True), "2+2=": ("4", True), "3+3=": ("5", True), "4+4=": ("", True),
          "5+5=": ("01", True)}  # 1 1 0 -1 1

# By hand. Bucket a = p0, p1, p4: 9 samples, 4 correct, 2 invalid; p0 and p4 pass; lengths
# 2+2+2 + 2+1+6 + 3+3+3 = 24; greedy 3 of 3. Bucket b = p2, p3: 6 samples, 3 correct,
# 1 invalid; p2 passes; lengths 6 + 5 = 11; greedy 0 of 2 (one wrong, one invalid).
EXPECTED = {
    "eval/avg@3/a": 400 / 9, "eval/pass@3/a": 200 / 3, "eval/invalid@3/a": 200 / 9,
    "eval/response_len/a": 24 / 9, "eval/greedy/a": 100.0,
    "eval/avg@3/b": 50.0, "eval/pass@3/b": 50.0, "eval/invalid@3/b": 100 / 6,
    "eval/response_len/b": 11 / 6, "eval/greedy/b": 0.0,
    "eval/avg@3/all": 700 / 15, "eval/pass@3/all": 60.0, "eval/invalid@3/all": 20.0,
    "eval/response_len/all": 35 / 15, "eval/greedy/all": 60.0,
    "eval/verify_timeouts": 0.0,
}
CORRECT_PER_PROMPT = [2, 0, 3, 0, 2]
# The unbiased pass@3 from 3 samples is the plain pass@3 (evaluation/passk.py).
EXPECTED.update({f"eval/pass@3_unbiased_n3/{b}": EXPECTED[f"eval/pass@3/{b}"]
                 for b in ("a", "b", "all")})


def verify(prompt, text, finished):
    """+1 for the prompt's own answer, -1 without one (empty, or cut at the cap), else 0."""
    if not finished or not text:
        return -1
    return 1 if text == prompt.answer else 0


def _engine(tokenizer):
    return ScriptedEngine(tokenizer, SAMPLED, GREEDY)


def _close(got, want):
    assert set(got) == set(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, abs=1e-9), key


# chunk rows -> the prompt offsets of the sampled calls (k = 3 rows per prompt) and of the
# greedy calls (1 row per prompt)
CHUNKINGS = {1024: ([0], [0]), 7: ([0, 2, 4], [0]), 2: ([0, 1, 2, 3, 4], [0, 2, 4])}


@pytest.mark.parametrize("chunk_rows", sorted(CHUNKINGS))
def test_hand_computed_metrics_for_every_chunking(chunk_rows, tokenizer, monkeypatch):
    monkeypatch.setattr(evaluation, "CHUNK_ROWS", chunk_rows)
    eng = _engine(tokenizer)
    metrics, counts = evaluation.evaluate(eng, None, tokenizer, PROMPTS, verify, k=K,
                                          temperature=0.6, top_p=0.8, seed=100, per_prompt=True,
                                          max_new_tokens=5)
    _close(metrics, EXPECTED)
    assert counts.dtype == np.int32 and counts.tolist() == CORRECT_PER_PROMPT
    # The calls: sampled chunks at the eval temperature / top-p, seeded seed + offset, then the
    # greedy pass; every call with the eval token cap.
    sampled_at, greedy_at = CHUNKINGS[chunk_rows]
    per_chunk = [max(1, chunk_rows // K), max(1, chunk_rows // 1)]
    want = []
    for offsets, n, size, greedy in ((sampled_at, K, per_chunk[0], False),
                                     (greedy_at, 1, per_chunk[1], True)):
        for c in offsets:
            texts = [p.text for p in PROMPTS[c:c + size]]
            want.append((texts, n, Sampling(
                temperature=1.0 if greedy else 0.6, top_p=1.0 if greedy else 0.8,
                greedy=greedy, max_new_tokens=5, seed=100 + c)))
    assert eng.calls == want


def test_verify_many_gets_each_chunks_rows_and_its_timeouts_are_summed(tokenizer, monkeypatch):
    """A task's pool instead of one-by-one checks: the same figures, the rows of each chunk in
    order, and the checks it reports as timed out summed over every chunk and the greedy pass
    (here: the empty responses, two sampled and one greedy)."""
    monkeypatch.setattr(evaluation, "CHUNK_ROWS", 7)
    batches = []

    def verify_many(rows, texts, finished):
        batches.append([(p.id, t, f) for p, t, f in zip(rows, texts, finished, strict=True)])
        return [verify(p, t, f) for p, t, f in zip(rows, texts, finished, strict=True)], \
            sum(t == "" for t in texts)

    metrics, counts = evaluation.evaluate(_engine(tokenizer), None, tokenizer, PROMPTS, None,
                                          k=K, per_prompt=True, verify_many=verify_many)
    _close(metrics, {**EXPECTED, "eval/verify_timeouts": 3.0})
    assert counts.tolist() == CORRECT_PER_PROMPT
    rows = [(p.id, *SAMPLED[p.text][j]) for p in PROMPTS for j in range(K)]
    greedy = [(p.id, *GREEDY[p.text]) for p in PROMPTS]
    assert batches == [rows[0:6], rows[6:12], rows[12:15], greedy]


def test_without_greedy_no_greedy_pass(tokenizer):
    eng = _engine(tokenizer)
    metrics = evaluation.evaluate(eng, None, tokenizer, PROMPTS, verify, k=K, greedy=False)
    _close(metrics, {k: v for k, v in EXPECTED.items() if "/greedy/" not in k})
    assert [(n, s.greedy) for _, n, s in eng.calls] == [(K, False)]
    # evaluation's defaults: HeaPA's 0.7 / 0.7, seed 0, the engine's own cap
    assert eng.calls[0][2] == Sampling(temperature=0.7, top_p=0.7, seed=0)


def test_eval_top_k_reaches_the_sampled_calls_only(tokenizer):
    """config.eval.top_k (suite.evaluate) is the sampled calls' top-k; the greedy pass has none
    (and the figures are the engine's, whatever the top-k)."""
    import ml_collections

    from frontier_rl.evaluation import suite
    from frontier_rl.tasks import base

    eng = _engine(tokenizer)
    cfg = ml_collections.ConfigDict(dict(k=K, temperature=0.7, top_p=0.7, top_k=50,
                                         greedy=True, max_new_tokens=0))
    task = base.Task(name="t", train=[], eval=PROMPTS, buckets=["a", "b"], verifier=verify)
    metrics, _ = suite.evaluate(eng, None, tokenizer, task, cfg, seed=0)
    _close(metrics, EXPECTED)
    assert [(n, s.greedy, s.top_k) for _, n, s in eng.calls] == [(K, False, 50), (1, True, -1)]


def test_k_names_the_metrics_and_one_sample_is_avg_equals_pass(tokenizer):
    """k = 1: sample 0 of each prompt only (p0 right, p1 wrong, p2 right, p3 wrong, p4 wrong)."""
    metrics = evaluation.evaluate(_engine(tokenizer), None, tokenizer, PROMPTS, verify, k=1,
                                  greedy=False)
    _close(metrics, {"eval/avg@1/a": 100 / 3, "eval/pass@1/a": 100 / 3,
                     "eval/pass@1_unbiased_n1/a": 100 / 3,
                     "eval/invalid@1/a": 0.0, "eval/response_len/a": 7 / 3,
                     "eval/avg@1/b": 50.0, "eval/pass@1/b": 50.0,
                     "eval/pass@1_unbiased_n1/b": 50.0, "eval/invalid@1/b": 0.0,
                     "eval/response_len/b": 2.0, "eval/avg@1/all": 40.0,
                     "eval/pass@1/all": 40.0, "eval/pass@1_unbiased_n1/all": 40.0,
                     "eval/invalid@1/all": 0.0,
                     "eval/response_len/all": 11 / 5, "eval/verify_timeouts": 0.0})


def test_unbiased_pass_at_fewer_than_the_samples_drawn(tokenizer):
    """eval.pass_k = 1 and 2 of the K = 3 samples: correct counts 2 0 3 0 2 (of 3). pass@1 is
    c / n, each prompt's share correct, so it is Avg@3; pass@2 = 1 - C(3 - c, 2) / C(3, 2) is
    0 at c = 0 and 1 at c >= 2, so here it is pass@3. The other metrics do not move."""
    for pass_k, want in [(1, "avg@3"), (2, "pass@3")]:
        metrics = evaluation.evaluate(_engine(tokenizer), None, tokenizer, PROMPTS, verify, k=K,
                                      pass_k=pass_k)
        plain = {k: v for k, v in EXPECTED.items() if "_unbiased_" not in k}
        _close(metrics, {**plain, **{f"eval/pass@{pass_k}_unbiased_n3/{b}":
                                     EXPECTED[f"eval/{want}/{b}"] for b in ("a", "b", "all")}})
    with pytest.raises(ValueError, match=r"^pass_k=4 is not allowed: an integer in \[0, k=3\]"):
        evaluation.evaluate(_engine(tokenizer), None, tokenizer, PROMPTS, verify, k=K, pass_k=4)


def test_the_benchmark_table_has_both_pass_columns(tokenizer, tmp_path):
    """`frontier-rl eval`'s table (suite.table / markdown / write) under eval.pass_k = 2 of
    eval.k = 3, on a two-benchmark suite: the plain pass@3 and the unbiased pass@2 side by
    side, the unweighted mean of each; a pass_k above k is refused in the config's words."""
    import json

    import ml_collections

    from frontier_rl.evaluation import suite
    from frontier_rl.tasks import base

    # one correct of three for p1: pass@2 = 1 - C(2, 2) / C(3, 2) = 2/3
    sampled = {**SAMPLED, "2+2=": [("5", True), ("4", True), ("444444", False)]}
    eng = ScriptedEngine(tokenizer, sampled, GREEDY)
    cfg = ml_collections.ConfigDict(dict(k=K, pass_k=2, temperature=0.7, top_p=0.7, top_k=-1,
                                         greedy=False, max_new_tokens=0,
                                         sets={"a": "a.jsonl", "b": "b.jsonl"}))
    task = base.Task(name="t", train=[], eval=PROMPTS, buckets=["a", "b"], verifier=verify)
    metrics, counts = suite.evaluate(eng, None, tokenizer, task, cfg, seed=0)
    assert counts.tolist() == [2, 1, 3, 0, 2]
    # a: p0 (c 2), p1 (c 1), p4 (c 2) -> 1, 2/3, 1; b: p2 (c 3), p3 (c 0) -> 1, 0
    a, b = 100 * (1 + 2 / 3 + 1) / 3, 50.0
    assert metrics["eval/pass@2_unbiased_n3/a"] == pytest.approx(a)
    assert metrics["eval/pass@2_unbiased_n3/b"] == pytest.approx(b)
    assert metrics["eval/pass@2_unbiased_n3/all"] == pytest.approx(100 * (1 + 2 / 3 + 1 + 1) / 5)
    assert metrics["eval/pass@2_unbiased_n3/bench_mean"] == pytest.approx((a + b) / 2)
    assert metrics["eval/pass@3/a"] == 100.0  # the plain pass@3 unchanged beside it
    rows = suite.table(metrics, task, K, 2)
    assert [r["benchmark"] for r in rows] == ["a", "b", "mean (unweighted)", "all (pooled)"]
    assert rows[0]["pass@2 (unbiased, n=3)"] == pytest.approx(a) and rows[0]["pass@3"] == 100.0
    md, js = suite.write(rows, str(tmp_path), K, "t", {}, 2)
    text = open(md).read()
    assert "| benchmark | questions | Avg@3 | pass@3 (any of 3) | pass@2 (unbiased, n=3) |" in text
    assert "| a | 3 | 55.6 | 100.0 | 88.9 |" in text
    assert json.load(open(js))["pass_k"] == 2
    cfg.pass_k = 4
    with pytest.raises(ValueError, match=r"^eval.pass_k=4 is not allowed: an integer in "
                                         r"\[0, eval.k=3\]"):
        suite.evaluate(eng, None, tokenizer, task, cfg, seed=0)
    with pytest.raises(ValueError, match="eval.pass_k=4"):
        suite.Evaluator(eng, tokenizer, task, cfg, seed=0)


def test_needs_a_verifier(tokenizer):
    with pytest.raises(ValueError, match="^evaluate needs verify or verify_many$"):
        evaluation.evaluate(_engine(tokenizer), None, tokenizer, PROMPTS, None, k=K)


def test_default_k_is_eight(tokenizer):
    """HeaPA-style Avg@8 unless told: 8 samples per prompt, the metrics named @8."""
    eight = {p.text: SAMPLED[p.text] + SAMPLED[p.text][:2] + SAMPLED[p.text][:3]
             for p in PROMPTS}  # samples 0-2, 0-1, 0-2 again
    eng = ScriptedEngine(tokenizer, eight, GREEDY)
    metrics, counts = evaluation.evaluate(eng, None, tokenizer, PROMPTS, verify, greedy=False,
                                          per_prompt=True)
    assert [(n, s) for _, n, s in eng.calls] == [(8, Sampling(temperature=0.7, top_p=0.7))]
    # correct of 8: p0 2+1+2, p1 0, p2 8, p3 0, p4 2+1+2
    assert counts.tolist() == [5, 0, 8, 0, 5]
    assert metrics["eval/avg@8/all"] == pytest.approx(100 * 18 / 40)
    assert metrics["eval/pass@8/all"] == 60.0
    assert not any("@3" in key for key in metrics)


def test_a_sampler_is_evaluated_at_the_parameters_given(tiny_policy, tokenizer):
    """Through the in-process sampler (no engine of its own): the figures are those of the
    sampler's own samples at the parameters passed in, the eval seed and sampling, whatever
    it answers (a random policy; the verifier scores a response by its first character)."""
    from frontier_rl.rollout.context import decode_responses, encode_prompt
    from frontier_rl.rollout.sampler import Sampler

    cfg, graphdef, params = tiny_policy
    sampler = Sampler(graphdef, cfg, eos_id=tokenizer.eos_token_id,
                      pad_id=tokenizer.pad_token_id, max_new_tokens=4)

    def by_first_char(prompt, text, finished):
        if not text:
            return -1
        return 1 if text[0] in "02468+" else 0

    metrics, counts = evaluation.evaluate(sampler, params, tokenizer, PROMPTS, by_first_char,
                                          k=4, temperature=1.0, top_p=1.0, seed=5,
                                          per_prompt=True)
    ids = [encode_prompt(tokenizer, p.text) for p in PROMPTS]
    res = sampler.sample(params, ids, 4, seed=5, temperature=1.0, top_p=1.0)
    texts = decode_responses(tokenizer, res)
    outcomes = np.array([by_first_char(None, t, f) for t, f in zip(texts, res.finished,
                                                                    strict=True)]).reshape(5, 4)
    assert counts.tolist() == (outcomes == 1).sum(axis=1).tolist()
    assert metrics["eval/avg@4/all"] == pytest.approx(100 * np.mean(outcomes == 1))
    assert metrics["eval/invalid@4/all"] == pytest.approx(100 * np.mean(outcomes == -1))
    assert metrics["eval/response_len/all"] == pytest.approx(np.mean(res.lengths))
    greedy = sampler.sample(params, ids, 1, seed=5, greedy=True)
    scored = [by_first_char(None, t, f) for t, f in zip(decode_responses(tokenizer, greedy),
                                                        greedy.finished, strict=True)]
    assert metrics["eval/greedy/all"] == pytest.approx(100 * np.mean(np.array(scored) == 1))


def test_an_empty_bucket_is_no_prompts_never_zero(tokenizer, monkeypatch, caplog):
    """A task whose bucket "c" has no eval prompt (a gym task's eval split drops the items also
    in train, which can empty a bucket of few distinct items) and whose bucket "a" has no train
    prompt: the start warns of both, the evaluation records no metric for "c" (not 0.0), the
    averages pool "a" and "b" only, and "c" is printed as "no prompts" in the eval line and the
    progress bar."""
    import logging

    import ml_collections

    from frontier_rl import train
    from frontier_rl.evaluation import suite
    from frontier_rl.run.budget import Meter
    from frontier_rl.tasks import base

    task = base.Task(name="gym:toy", train=[Prompt("t0", "6+6=", "12", "b"),
                                            Prompt("t1", "7+7=", "14", "c")],
                     eval=PROMPTS, buckets=["a", "b", "c"], verifier=verify)
    assert task.empty_buckets("eval") == ["c"] and task.empty_buckets("train") == ["a"]
    monkeypatch.setattr(train.tasks, "make_task", lambda name, fields, seed: task)
    config = ml_collections.ConfigDict({"task": {"name": "gym:toy"}, "seed": 0})
    with caplog.at_level(logging.WARNING, logger="frontier_rl"):
        assert train._make_task(config, lambda *a, **k: None) is task
    warned = [r.getMessage() for r in caplog.records]
    assert any(w.startswith("task gym:toy: bucket c has no eval prompts: its accuracy is shown "
                            "as 'no prompts'") for w in warned), warned
    assert any(w.startswith("task gym:toy: bucket a has no train prompts") for w in warned)

    eng = _engine(tokenizer)
    eng.ensure = lambda params, step: None
    # eval.sets makes the suite's unweighted mean over buckets, which must skip "c" too
    cfg = ml_collections.ConfigDict(dict(k=K, temperature=0.7, top_p=0.7, top_k=-1,
                                         greedy=True, max_new_tokens=0, every=1,
                                         every_rollouts=0, sets={"a": "a.jsonl"}))
    evaluator = suite.Evaluator(eng, tokenizer, task, cfg, seed=0)
    assert evaluator.empty == ["c"]
    metrics = evaluator.run(None, 0)
    assert not any(key.endswith("/c") for key in metrics)  # no metric at all, so never 0.0
    assert metrics["eval/avg@3/all"] == pytest.approx(EXPECTED["eval/avg@3/all"])
    assert metrics["eval/avg@3/bench_mean"] == pytest.approx(
        (EXPECTED["eval/avg@3/a"] + EXPECTED["eval/avg@3/b"]) / 2)
    line = train._eval_line(0, metrics, task.buckets, K, evaluator.empty)
    assert line == "eval step 0: avg@3 a 44.4 | b 50.0 | c no prompts"
    # a resumed run before its first evaluation: nothing measured yet, "c" still has no prompts
    assert train._eval_line(5, {}, task.buckets, K, evaluator.empty) == \
        "eval step 5: avg@3 a nan | b nan | c no prompts"
    bar = train._progress(True, 0, 10, Meter())  # no budget: the bar counts steps
    bar.update(1, 15, 0.5, metrics, task.buckets, K, evaluator.empty)
    assert "avg@3 44/50/no prompts" in bar._bar.postfix
    bar.close()


def test_common_random_numbers_two_identical_policies_differ_by_exactly_zero(tiny_policy,
                                                                             tokenizer):
    """Every arm at a seed evaluates with that seed's sampling seed (train.py: run seed + 7),
    so two arms whose policies are identical draw the same samples: their per-prompt correct
    counts, hence their paired difference, are equal to the bit, while another seed's samples
    differ (the counts are real samples, not a constant)."""
    from frontier_rl.rollout.sampler import Sampler

    cfg, graphdef, params = tiny_policy
    prompts = PROMPTS * 8

    def counts(seed):
        sampler = Sampler(graphdef, cfg, eos_id=tokenizer.eos_token_id,
                          pad_id=tokenizer.pad_token_id, max_new_tokens=4)

        def by_first_char(prompt, text, finished):
            return 1 if text and text[0] in "02468+" else 0

        metrics, c = evaluation.evaluate(sampler, params, tokenizer, prompts, by_first_char,
                                         k=4, temperature=1.0, top_p=1.0, seed=seed,
                                         per_prompt=True)
        return metrics["eval/avg@4/all"], np.asarray(c)

    (acc_a, arm_a), (acc_b, arm_b) = counts(7), counts(7)  # two arms, one seed
    assert np.array_equal(arm_a, arm_b) and acc_a - acc_b == 0.0
    assert 0 < arm_a.sum() < arm_a.size * 4  # a score with sampling noise in it
    _, other = counts(8)
    assert not np.array_equal(arm_a, other)
