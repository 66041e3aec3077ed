"""The named reward variants of corpus tasks (tasks/corpus.py REWARDS) on hand-written
responses: HIVE's (GRESO's latex_math, 1.0 / 0.1 / 0.0), HeaPA's (the last "Answer:" line,
Minerva-normalised, +-1; its evaluation's sympy fallback) and math-verify on \\boxed{} (1/0/-1),
and how each outcome becomes the trained reward."""

import json

import ml_collections
import numpy as np
import pytest

from frontier_rl import tasks
from frontier_rl.evaluation import suite
from frontier_rl.rl import update
from frontier_rl.selection import Group
from frontier_rl.selection.heapa import selector as heapa_selector
from frontier_rl.tasks import corpus, verify
from frontier_rl.tasks.base import REWARD_CORRECT, REWARD_INVALID, REWARD_WRONG

C, W, INV = REWARD_CORRECT, REWARD_WRONG, REWARD_INVALID


@pytest.mark.parametrize("response,answer,want", [
    ("So x = 1/2.\n\\boxed{\\frac{1}{2}}", "0.5", C),  # math-verify equivalence
    ("\\boxed{3} first, then \\boxed{4}", "4", C),  # the last box counts
    ("\\boxed{4} first, then \\boxed{3}", "4", W),  # extracted but wrong: 0.1
    ("The answer is 4.", "4", INV),  # nothing boxed: 0.0
    ("cut off inside \\boxed{4", "4", INV),  # unbalanced box
    ("The answer is \\boxed 7$ as shown", "7", C),  # the "\boxed x" form, up to '$'
    ("\\boxed{x^2+2x+1}", "(x+1)^2", C),
])
def test_hive_reward_is_gresos_latex_math(response, answer, want):
    assert verify.boxed_latex_reward(response, answer) == want


def test_hive_reward_scores_a_cut_off_response_as_it_is():
    # GRESO scores the decoded text of a truncated response; the ternary scorer calls it
    # invalid.
    assert verify.boxed_latex_reward("\\boxed{5} and more", "5", finished=False) == C
    assert verify.math_verify_reward("\\boxed{5} and more", "5", finished=False) == INV


@pytest.mark.parametrize("response,answer,want", [
    ("Work.\nAnswer: 42", "42", C),
    ("Answer: 41\nWait, recheck.\nanswer: 42", "42", C),  # the last, case-insensitive
    ("Answer: $42$ dollars", "42", C),  # Minerva: $...$ and units
    ("Answer: 1,000", "1000", C),  # thousands commas
    ("Answer: x = 3", "3", C),  # the part after the last '='
    ("Answer: \\frac12", "\\frac{1}{2}", C),  # shorthand \frac
    ("Answer: \\boxed{7}", "7", C),
    ("Answer: 0.5", "1/2", W),  # training matches strings only: -1
    ("Answer: 43", "42", W),
    ("The result is \\boxed{42}.", "42", INV),  # no "Answer:" line: -1
    ("Answer: 42\n" + "x" * 300, "42", INV),  # only the last 300 characters are read
])
def test_heapa_reward_is_the_answer_line_with_string_match(response, answer, want):
    assert verify.answer_line_reward(response, answer) == want


@pytest.mark.parametrize("response,answer,want", [
    ("Answer: 0.5", "1/2", C),  # sympy equality (HeaPA's evaluation script)
    ("Answer: 2/4", "0.5", C),
    ("Answer: 2*sqrt(2)", "sqrt(8)", W),  # Minerva rewrites "sqrt(" to "sqrt{(}" first
    ("Answer: 3.0", "3", C),  # float equality
    ("Answer: 0.3", "1/2", W),
    ("Answer: __import__('os')", "1", W),  # never handed to sympify
    ("Answer: exit()", "1", W),
])
def test_heapa_eval_reward_adds_sympy_equality(response, answer, want):
    assert verify.answer_line_reward(response, answer, sympy=True) == want


def test_minerva_normalisation():
    assert verify.minerva_normalize("\\text{5 inches}") == "5"
    assert verify.minerva_normalize("$\\frac{3}{4}$.") == "\\frac{3}{4}"
    assert verify.minerva_normalize("y = \\sqrt2") == "\\sqrt{2}"
    assert verify.minerva_normalize("90^\\circ") == "90"


def _write(tmp_path, rows):
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.mark.parametrize("reward,values,response", [
    ("ternary", (1.0, 0.0, -1.0), "\\boxed{7}"),
    ("hive", (1.0, 0.1, 0.0), "\\boxed{7}"),
    ("heapa", (1.0, -1.0, -1.0), "Answer: 7"),
])
def test_variants_as_task_options(tmp_path, reward, values, response):
    cfg = {"path": _write(tmp_path, [{"prompt": "3 plus 4?", "answer": "7"}] * 1
                          + [{"prompt": "1 plus 1?", "answer": "2"}]),
           "eval_fraction": 0.0, "reward": reward, "verify_workers": 0}
    task = tasks.make_task("corpus", cfg, 0)
    assert task.reward_values == values
    p = task.train[0]
    assert task.format_response(p.answer) == response
    assert task.verify(p, task.format_response(p.answer)) == C
    # the trained reward of a correct, a wrong and an invalid outcome, before any shaping
    config = ml_collections.ConfigDict({"rl": {"loss": "grpo", "overlong_buffer": 0}})
    shape = update.reward_shaper(config, task.reward_values)
    got = shape(np.array([C, W, INV], np.float32), np.array([5, 5, 5]))
    np.testing.assert_allclose(got, values, rtol=0, atol=1e-7)


def test_unknown_variant_is_refused(tmp_path):
    cfg = {"path": _write(tmp_path, [{"prompt": "q", "answer": "1"}]), "reward": "pm1"}
    with pytest.raises(ValueError, match="task.reward='pm1' is not one of"):
        tasks.make_task("corpus", cfg, 0)
    with pytest.raises(ValueError, match="task.eval_reward='x'"):
        tasks.make_task("corpus", {**cfg, "reward": "heapa", "eval_reward": "x"}, 0)


def test_eval_reward_scores_the_benchmarks(tmp_path):
    bench = tmp_path / "b.jsonl"
    bench.write_text(json.dumps({"prompt": "half?", "answer": "1/2"}) + "\n")
    cfg = {"path": _write(tmp_path, [{"prompt": "q", "answer": "1"}]), "reward": "heapa",
           "eval_reward": "heapa_sympy", "verify_workers": 0}
    train = tasks.make_task("corpus", cfg, 0)
    bench_task = suite.suite_task("corpus", cfg, {"half": str(bench)})
    p = bench_task.eval[0]
    assert bench_task.verify(p, "Answer: 0.5") == C  # the evaluation script's matcher
    assert corpus.make_scorer(train.config)("Answer: 0.5", "1/2") == W  # training's


def test_heapa_pool_statistic_converts_the_task_scale():
    """The pool statistic is on the selector's reward_scheme whatever the task's variant: a
    group trained on HIVE's 1.0/0.1/0.0 with a -0.5 length penalty on one response."""
    outcomes = np.array([C, W, INV, C], np.int8)
    shaping = np.array([0.0, 0.0, 0.0, -0.5], np.float32)
    hive = np.array([1.0, 0.1, 0.0, 1.0], np.float32) + shaping
    g = Group(index=0, prompt_id="p", outcomes=outcomes, rewards=hive,
              lengths=np.ones(4, np.int32), mean_entropy=np.zeros(4, np.float32))
    for scheme, want in (("ternary", (1 + 0 - 1 + 1 - 0.5) / 4),
                         ("pm1", (1 - 1 - 1 + 1 - 0.5) / 4)):
        sel = heapa_selector.Heapa({"reward_scheme": scheme, "augment": False},
                                   num_prompts=4, seed=0)
        [stat] = sel._stats([g], corpus.REWARDS["hive"])
        assert stat == pytest.approx(want)
