"""The reward variants of corpus tasks against the verl scorers they follow.

tests/fixtures/verl_reward_goldens.json holds the outputs of verl's own scorers on fixed
responses (its `meta` names the functions, the verl versions and math-verify's), made by
launch/verl_conformance.sh:

- "heapa" (HeaPA's training reward) follows verl 0.9.0's math_dapo.compute_score, the file
  HeaPA's code carries: score, acc and the normalised prediction must be equal on every case.
  verl 0.9.1 falls back to a \\boxed{} when no "Answer:" line is found; those cases are named
  below and are not what the protocol follows.
- "ternary" with verifier="math_verify" follows math_verify.compute_score (the same in both
  versions): correct exactly where verl scores 1.0. With require_boxed (the default) a response
  without a complete \\boxed{} is invalid instead; otherwise the outcome is the same.

"hive" (GRESO's latex_math) and the "heapa_sympy" evaluation scorer are not verl functions and
are pinned by tests/test_rewards.py. The last tests mutate the scorers and check that the goldens
catch each mutation.
"""

import functools
import importlib.metadata
import inspect
import json
import os
import types

import pytest

from frontier_rl.tasks import corpus, verify
from frontier_rl.tasks.base import REWARD_CORRECT, REWARD_INVALID

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDENS = json.load(open(os.path.join(ROOT, "tests", "fixtures", "verl_reward_goldens.json")))
CASES = GOLDENS["cases"]
MATH_DAPO = "verl.utils.reward_score.math_dapo.compute_score"
MATH_VERIFY = "verl.utils.reward_score.math_verify.compute_score"
HEAPA_VERL = "0.9.0"  # the math_dapo HeaPA's code carries (docs/methods.md)
# The cases verl 0.9.1's \boxed{} fallback scores +1 where 0.9.0 (and HeaPA) score -1.
SCORED_BY_0_9_1_FALLBACK = {
    "boxed", "boxed_in_dollars", "boxed_comma_then_box", "boxed_period_then_box",
    "boxed_then_box", "boxed_blank_line_then_box", "boxed_paragraph_and_box",
    "boxed_nested_frac", "boxed_nested_sqrt", "boxed_after_long_work"}


def scorer(reward: str, **fields):
    return corpus.make_scorer(dict(corpus.DEFAULTS, reward=reward, **fields))


def heapa_mismatches(score, version: str = HEAPA_VERL, module=verify) -> list[str]:
    """Cases where `score` (a "heapa" scorer) and math_dapo.compute_score disagree: the
    reward, acc or the normalised "Answer:" text (verl's pred, from `module`'s functions)."""
    values = corpus.REWARDS["heapa"]  # (correct, wrong, invalid)
    out = []
    for case, want in zip(CASES, GOLDENS["outputs"][version][MATH_DAPO], strict=True):
        outcome = score(case["response"], case["answer"])
        reward = values[{1: 0, 0: 1, -1: 2}[outcome]]
        line = module.answer_line(case["response"])
        pred = "[INVALID]" if line is None else module.minerva_normalize(line)
        got = {"score": reward, "acc": outcome == REWARD_CORRECT, "pred": pred}
        if got != want:
            out.append(case["case"])
    return out


def math_verify_mismatches(score) -> list[str]:
    """Cases where `score` is correct and math_verify.compute_score is not, or the reverse."""
    wants = GOLDENS["outputs"][GOLDENS["meta"]["verl_versions"][-1]][MATH_VERIFY]
    return [case["case"] for case, want in zip(CASES, wants, strict=True)
            if (score(case["response"], case["answer"]) == REWARD_CORRECT) != (want == 1.0)]


def test_reward_goldens_are_verls_and_were_scored_with_our_math_verify():
    meta = GOLDENS["meta"]
    assert meta["verl_versions"] == ["0.9.0", "0.9.1"] == meta["verl_dist_versions"]
    assert set(meta["functions"]) == {MATH_DAPO, MATH_VERIFY}
    for version in meta["verl_versions"]:
        assert set(GOLDENS["outputs"][version]) == {MATH_DAPO, MATH_VERIFY}
    # math-verify decides the ternary scorer: the goldens hold only for the same library
    dist = importlib.metadata.version
    here = {"math_verify": dist("math-verify"),
            "latex2sympy2_extended": dist("latex2sympy2_extended"),
            "antlr4_python3_runtime": dist("antlr4-python3-runtime"), "sympy": dist("sympy")}
    assert meta["libraries"] == here, "rerun launch/verl_conformance.sh with these versions"
    names = [c["case"] for c in CASES]
    assert len(names) == len(set(names)) >= 50


def test_heapa_reward_conformance_to_verl_0_9_0_math_dapo():
    assert heapa_mismatches(scorer("heapa")) == []


def test_heapa_reward_conformance_to_verl_0_9_1_differs_by_its_boxed_fallback():
    """0.9.1 changed only responses without an "Answer:" line (0.9.0's pred "[INVALID]"),
    and scored some of them +1: the protocol follows 0.9.0, so these are mismatches."""
    rows = list(zip(CASES, *(GOLDENS["outputs"][v][MATH_DAPO] for v in ("0.9.0", "0.9.1")),
                    strict=True))
    changed = {c["case"] for c, old, new in rows if old != new}
    assert changed and all(old["pred"] == "[INVALID]" for _, old, new in rows if old != new)
    assert {c["case"] for c, old, new in rows
            if old["score"] != new["score"]} == SCORED_BY_0_9_1_FALLBACK
    assert set(heapa_mismatches(scorer("heapa"), "0.9.1")) == changed


def test_math_verify_reward_conformance_same_in_both_verl_versions():
    assert len({json.dumps(o[MATH_VERIFY]) for o in GOLDENS["outputs"].values()}) == 1


def test_ternary_reward_conformance_to_verl_math_verify():
    assert math_verify_mismatches(scorer("ternary", require_boxed=False)) == []


def test_ternary_reward_conformance_with_require_boxed():
    """The default: invalid without a complete \\boxed{}, else as verl."""
    strict, loose = scorer("ternary"), scorer("ternary", require_boxed=False)
    for case in CASES:
        r, a = case["response"], case["answer"]
        want = REWARD_INVALID if verify.last_boxed(r) is None else loose(r, a)
        assert strict(r, a) == want, case["case"]


def test_ternary_reward_conformance_reads_a_corrected_box_as_a_set():
    """What docs/methods.md says: not the last box alone (math-verify joins boxes into a set)."""
    row = {c["case"]: i for i, c in enumerate(CASES)}["boxed_comma_then_box"]
    assert CASES[row]["response"] == "First \\boxed{3}, corrected: \\boxed{5}"
    assert GOLDENS["outputs"]["0.9.1"][MATH_VERIFY][row] == 0.0
    assert scorer("ternary")(CASES[row]["response"], "5") != REWARD_CORRECT


# ----------------------------------------------------------------------------- mutations
# Each mutation edits tasks/verify.py's source text (every `old` must occur once) and runs the
# edited module's scorer against the goldens, which must tell it apart.
_BOXED_TARGET = ('target = parse(response, parsing_timeout=None)',
                 'boxed = last_boxed(response)\n'
                 '    target = parse(response if boxed is None else f"\\\\boxed{{{boxed}}}", '
                 'parsing_timeout=None)')
MUTATIONS = {
    # HeaPA's "Answer:" line
    "heapa/first_answer_line": ("heapa", [("return found[-1] if found else None",
                                           "return found[0] if found else None")]),
    "heapa/whole_response_not_last_300": ("heapa", [('(response or "")[-ANSWER_TAIL_CHARS:]',
                                                     '(response or "")')]),
    "heapa/no_strip_after_normalising": ("heapa", [("    return s.strip()", "    return s")]),
    "heapa/no_minerva_normalisation": ("heapa", [("pred = minerva_normalize(got)",
                                                  "pred = got.strip()")]),
    "heapa/boxed_fallback_as_verl_0_9_1": ("heapa", [(
        "    if got is None:\n        return REWARD_INVALID\n    pred",
        "    if got is None:\n        got = last_boxed(response[-100:])\n"
        "    if got is None:\n        return REWARD_INVALID\n    pred")]),
    # math-verify on the response
    "ternary/last_box_only": ("ternary", [_BOXED_TARGET]),
    "ternary/first_box_only": ("ternary", [_BOXED_TARGET, ("start = 1, starts[-1]",
                                                           "start = 1, starts[0]")]),
    "ternary/reference_not_in_math_mode": ("ternary", [(
        'text = answer if ("$" in answer or "\\\\boxed" in answer) else f"${answer}$"',
        "text = answer")]),
}


def _mutant(edits: list[tuple[str, str]]) -> types.SimpleNamespace:
    src = inspect.getsource(verify)
    for old, new in edits:
        assert src.count(old) == 1, f"{old!r} is not in tasks/verify.py once"
        src = src.replace(old, new)
    namespace = {"__name__": "verify_mutant"}
    exec(compile(src, verify.__file__, "exec"), namespace)
    return types.SimpleNamespace(**namespace)


@pytest.mark.parametrize("name", MUTATIONS)
def test_reward_conformance_catches_a_mutated_scorer(name):
    variant, edits = MUTATIONS[name]
    mutant = _mutant(edits)
    if variant == "heapa":
        caught = heapa_mismatches(mutant.answer_line_reward, module=mutant)
    else:
        caught = math_verify_mismatches(
            functools.partial(mutant.math_verify_reward, require_boxed=False))
    assert caught, f"{name} passes every golden"
