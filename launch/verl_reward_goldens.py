"""Golden outputs of verl's own reward scorers on fixed responses, for
tests/test_verl_reward_conformance.py.

The scorers frontier_rl's reward variants (tasks/corpus.py REWARDS) are compared with:

- verl.utils.reward_score.math_dapo.compute_score: the "heapa" variant. HeaPA trains with its
  copy of this file (verl 0.6.1), which is verl 0.9.0's verbatim; verl 0.9.1 added a fallback
  to the last \\boxed{} of the final 100 characters when no "Answer:" line is found. Both
  versions are recorded.
- verl.utils.reward_score.math_verify.compute_score: the "ternary" variant with
  verifier="math_verify" (math-verify on the whole response, against \\boxed{ground truth}).

Each verl version runs in a child process of its own (PYTHONPATH puts a `pip install --target`
copy of an older verl ahead of the venv's), in the venv launch/verl_conformance.sh makes, with
math-verify pinned to frontier_rl's version; frontier_rl is not imported. The fixture holds the
cases, each version's outputs per function, and the versions of everything that scored them:

  launch/verl_conformance.sh          (makes the venv once, then runs this)
  python launch/verl_reward_goldens.py --out tests/fixtures/verl_reward_goldens.json \\
      --verl "" --verl .cache/verl-0.9.0
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import io
import json
import math
import os
import subprocess
import sys

MATH_DAPO = "verl.utils.reward_score.math_dapo.compute_score"
MATH_VERIFY = "verl.utils.reward_score.math_verify.compute_score"
# math_verify.compute_score scores a timeout as `timeout_score` (and an error as 0.0 after a
# print): NaN makes a timeout fail the dump, a generous bound makes one unlikely on a busy host.
MATH_VERIFY_ARGS = {"timeout": 300.0}

_PAD = "We check each step of the computation once more before concluding. " * 6  # 402 chars

# (name, response, ground truth)
CASES = [
    # an "Answer:" line, as DAPO-Math-17k's prompt asks for
    ("answer_line", "2 + 3 = 5.\nAnswer: 5", "5"),
    ("answer_line_wrong", "2 + 3 = 6.\nAnswer: 6", "5"),
    ("answer_line_lowercase", "so\nanswer : 12", "12"),
    ("answer_line_upper_negative", "ANSWER: -3", "-3"),
    ("answer_line_no_space", "Answer:7", "7"),
    ("answer_line_next_line", "Answer:\n7", "7"),
    ("answer_line_trailing_space", "Answer:   7   \n\n", "7"),
    ("answer_line_tab", "Answer:\t7\t", "7"),
    ("answer_line_crlf", "Work.\r\nAnswer: 7\r\n", "7"),
    ("answer_line_final", "Final Answer: $\\frac{1}{2}$", "\\frac{1}{2}"),
    ("answer_line_last_of_two", "Answer: 3\nHmm, recheck.\nAnswer: 4", "4"),
    ("answer_line_first_of_two", "Answer: 3\nHmm, recheck.\nAnswer: 4", "3"),
    ("answer_line_period", "Answer: 5.", "5"),
    ("answer_line_dollar_period", "Answer: $5$.", "5"),
    ("answer_line_units", "Answer: 5 dollars", "5"),
    ("answer_line_degrees", "Answer: 90^\\circ", "90"),
    ("answer_line_equation", "Answer: x = 3", "3"),
    ("answer_line_thousands", "Answer: 1,000", "1000"),
    ("answer_line_percent", "Answer: 10\\%", "10"),
    ("answer_line_boxed", "Answer: \\boxed{7}", "7"),
    ("answer_line_text_choice", "Answer: \\text{(B)}", "B"),
    ("answer_line_tuple_spaces", "Answer: (1, 2)", "(1,2)"),
    ("answer_line_frac_shorthand", "Answer: \\frac12", "\\frac{1}{2}"),
    ("answer_line_sqrt_shorthand", "Answer: \\sqrt2", "\\sqrt{2}"),
    ("answer_line_dfrac", "Answer: \\dfrac{3}{4}", "\\frac{3}{4}"),
    ("answer_line_decimal_vs_frac", "Answer: 0.5", "\\frac{1}{2}"),
    ("answer_line_pi", "Answer: \\pi/2", "\\frac{\\pi}{2}"),
    ("answer_line_fullwidth_colon", "Answer\uff1a5", "5"),
    ("answer_line_in_tail", _PAD + "\nAnswer: 5", "5"),
    ("answer_line_before_tail", "Answer: 5\n" + _PAD, "5"),
    ("answer_line_and_box_disagree", "So \\boxed{3}.\nAnswer: 5", "5"),
    ("answer_line_and_box_disagree_box", "So \\boxed{3}.\nAnswer: 5", "3"),
    # \boxed{} answers
    ("boxed", "2 + 3 = 5, so \\boxed{5}", "5"),
    ("boxed_wrong", "\\boxed{6}", "5"),
    ("boxed_spaces", "\\boxed{ 5 }", "5"),
    ("boxed_in_dollars", "The answer is $\\boxed{5}$.", "5"),
    ("boxed_comma_then_box", "First \\boxed{3}, corrected: \\boxed{5}", "5"),
    ("boxed_comma_then_box_first", "First \\boxed{3}, corrected: \\boxed{5}", "3"),
    ("boxed_period_then_box", "\\boxed{5}. Wait, no: \\boxed{3}", "3"),
    ("boxed_period_then_box_first", "\\boxed{5}. Wait, no: \\boxed{3}", "5"),
    ("boxed_then_box", "\\boxed{3} then \\boxed{5}", "5"),
    ("boxed_blank_line_then_box", "\\boxed{3}\n\nActually, \\boxed{5}", "5"),
    ("boxed_paragraph_and_box", "\\boxed{3} and then a new paragraph.\n\nSo \\boxed{5}.",
     "5"),
    ("boxed_two_answers", "\\boxed{1} and \\boxed{2}", "1, 2"),
    ("boxed_set", "\\boxed{1, 2}", "1,2"),
    ("boxed_nested_frac", "\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
    ("boxed_nested_sqrt", "\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt{3}}{2}"),
    ("boxed_decimal_vs_frac", "\\boxed{0.5}", "\\frac{1}{2}"),
    ("boxed_dfrac_pi", "\\boxed{\\dfrac{\\pi}{2}}", "\\frac{\\pi}{2}"),
    ("boxed_equivalent_radical", "\\boxed{2\\sqrt{3}}", "\\sqrt{12}"),
    ("boxed_polynomial", "$\\boxed{x^2+2x+1}$", "(x+1)^2"),
    ("boxed_percent", "\\boxed{10\\%}", "10"),
    ("boxed_float_vs_int", "\\boxed{5.0}", "5"),
    ("boxed_text_choice", "\\boxed{\\text{(C)}}", "C"),
    ("boxed_unbalanced", "so \\boxed{\\frac{1}{2}", "\\frac{1}{2}"),
    ("boxed_fbox", "\\fbox{5}", "5"),
    ("boxed_space_form", "The answer is \\boxed 5$.", "5"),
    ("boxed_before_tail", "\\boxed{5}\n" + _PAD, "5"),
    ("boxed_after_long_work", _PAD + "\nThus \\boxed{5}", "5"),
    # no answer marked
    ("empty", "", "5"),
    ("no_answer", "I am not sure how to solve this.", "5"),
    ("bare_sentence", "The answer is 5", "5"),
    ("bare_latex", "So we get $\\frac{1}{2}$", "\\frac{1}{2}"),
    ("gsm8k_hashes", "3 + 4 = 7\n#### 7", "7"),
    ("answer_tag", "<answer>5</answer>", "5"),
]


def versions() -> dict:
    dist = importlib.metadata.version
    return {"math_verify": dist("math-verify"),
            "latex2sympy2_extended": dist("latex2sympy2_extended"),
            "antlr4_python3_runtime": dist("antlr4-python3-runtime"), "sympy": dist("sympy")}


def emit() -> dict:
    """This process's verl scorers on CASES (run as a child: `--emit`)."""
    import verl
    from verl.utils.reward_score import math_dapo
    from verl.utils.reward_score import math_verify as mv

    dapo, verified = [], []
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for _, response, answer in CASES:
            dapo.append(math_dapo.compute_score(response, answer))
            verified.append(mv.compute_score(response, answer, timeout_score=math.nan,
                                             **MATH_VERIFY_ARGS))
    if printed.getvalue():  # math_verify.compute_score prints an error and scores it 0.0
        raise RuntimeError(f"verl printed while scoring: {printed.getvalue()[:500]}")
    if any(math.isnan(s) for s in verified):
        raise RuntimeError("math_verify.compute_score timed out; rerun on an idler host")
    return {"verl_version": verl.__version__,
            "verl_dist_version": importlib.metadata.version("verl"),
            "verl_path": os.path.dirname(verl.__file__),
            "libraries": versions(),
            "outputs": {MATH_DAPO: [{"score": r["score"], "acc": bool(r["acc"]),
                                     "pred": r["pred"]} for r in dapo],
                        MATH_VERIFY: [float(s) for s in verified]}}


def run_verl(path: str) -> dict:
    """emit() in a child whose `import verl` finds the copy at `path` ("" = the venv's)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if path:
        env["PYTHONPATH"] = os.path.abspath(path)
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--emit"], env=env,
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def build(paths: list[str]) -> dict:
    runs = sorted((run_verl(p) for p in paths), key=lambda r: r["verl_version"])
    libraries = {json.dumps(r["libraries"], sort_keys=True) for r in runs}
    assert len(libraries) == 1, f"the verl versions ran with different libraries: {libraries}"
    return {
        "meta": {
            "source": "verl's own reward scorers, run by launch/verl_reward_goldens.py",
            "verl_versions": [r["verl_version"] for r in runs],
            "verl_dist_versions": [r["verl_dist_version"] for r in runs],
            "functions": {MATH_DAPO: {"args": {}},
                          MATH_VERIFY: {"args": dict(MATH_VERIFY_ARGS, timeout_score="nan"),
                                        "note": "no case timed out (NaN would stop the script)"}},
            "libraries": runs[0]["libraries"],
        },
        "cases": [{"case": n, "response": r, "answer": a} for n, r, a in CASES],
        "outputs": {r["verl_version"]: r["outputs"] for r in runs},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--verl", action="append", default=[],
                    help="a directory holding a verl to import first ('' = the venv's own); "
                         "repeat for each version")
    ap.add_argument("--emit", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.emit:
        json.dump(emit(), sys.stdout)
        return
    if not args.out or not args.verl:
        ap.error("--out and at least one --verl are needed")
    out = build(args.verl)
    names = [c["case"] for c in out["cases"]]
    assert len(set(names)) == len(names), "case names repeat"
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, allow_nan=False)
        f.write("\n")
    print(f"verl {', '.join(out['meta']['verl_versions'])}, math-verify "
          f"{out['meta']['libraries']['math_verify']}: {len(names)} cases")


if __name__ == "__main__":
    main()
