"""Answer extraction and binary verifiers for text tasks.

All rewards are REWARD_CORRECT (1), REWARD_WRONG (0) or REWARD_INVALID (-1, nothing gradable
was produced). Extraction always comes first, so partial matches never earn credit.

math-verify pitfall: its default timeouts use signal.alarm, which raises off the main thread
(rollout workers, threaded reward pools). We pass parsing_timeout=None / timeout_seconds=None;
callers that need a bound on pathological sympy inputs must enforce it themselves.
"""

from __future__ import annotations

import functools
import logging
import re
from fractions import Fraction

from frontier_rl.tasks.base import REWARD_CORRECT, REWARD_INVALID, REWARD_WRONG

_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?|[-+]?\.\d+")
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_ANSWER_LINE = re.compile(r"^\s*(?:final\s+)?answer\s*[:：]\s*(.+?)\s*$", re.IGNORECASE | re.M)
_HASHES = re.compile(r"####\s*(.+?)\s*$", re.M)


def extract_number(text: str) -> str | None:
    """Last number in `text` as a plain string ("1,234.50" -> "1234.50", "-3/4" stays).

    Handles signs, thousands commas, decimals and simple fractions a/b; None if no number.
    """
    matches = _NUMBER.findall(text or "")
    if not matches:
        return None
    return matches[-1].replace(",", "").lstrip("+")


def parse_number(s: str) -> Fraction | None:
    """Exact value of a plain number string (as returned by extract_number), else None."""
    try:
        return Fraction(s.replace(",", ""))
    except (ValueError, ZeroDivisionError, AttributeError):
        return None


def numbers_equal(a: str, b: str) -> bool:
    """Exact numeric equality ("0.50" == "1/2" == "0.5"); falls back to string equality."""
    x, y = parse_number(a), parse_number(b)
    if x is None or y is None:
        return a.strip() == b.strip()
    return x == y


def last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} (or \\fbox{...}), with nested braces; None if none."""
    starts = [m.end() for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text or "")]
    if not starts:
        return None
    depth, start = 1, starts[-1]
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i].strip()
    return None  # unbalanced: the response was cut off inside the box


def extract_final_answer(text: str, allow_bare: bool = False) -> str | None:
    """The final answer of a free-form response, or None.

    Looks, in order, for the last <answer>...</answer>, the last "Answer: ..." (or "Final
    answer: ...") line, the last \\boxed{...} and the last "#### ..." (GSM8K). With
    `allow_bare`, a response with none of these is taken whole (for models trained to emit
    only the answer).
    """
    text = text or ""
    for find in (lambda: _ANSWER_TAG.findall(text), lambda: _ANSWER_LINE.findall(text)):
        found = find()
        if found:
            return found[-1].strip()
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    hashes = _HASHES.findall(text)
    if hashes:
        return hashes[-1].strip()
    if allow_bare and text.strip():
        return text.strip()
    return None


def numeric_reward(response: str, answer: str, finished: bool = True) -> int:
    """1/0/-1 comparing the response's final number with the reference's number.

    The final answer is extracted first (tags / "Answer:" / boxed / ####); without one the
    whole response is searched for its last number. -1 if unfinished or no number at all.
    """
    if not finished:
        return REWARD_INVALID
    final = extract_final_answer(response)
    got = extract_number(final if final is not None else response)
    if got is None:
        return REWARD_INVALID
    ref = extract_number(extract_final_answer(answer) or answer)
    if ref is None:  # non-numeric reference: only an exact match can be right
        return REWARD_CORRECT if (final or "").strip() == answer.strip() else REWARD_WRONG
    return REWARD_CORRECT if numbers_equal(got, ref) else REWARD_WRONG


def _quiet_math_verify() -> None:
    # math-verify warns on every call that its timeouts are off; here that is by design.
    logging.getLogger("math_verify").setLevel(logging.ERROR)


@functools.lru_cache(maxsize=65536)
def _parse_gold(answer: str) -> tuple:
    from math_verify import parse

    # A bare reference such as "\frac{1}{2}" or "x+1" parses reliably only inside math mode.
    text = answer if ("$" in answer or "\\boxed" in answer) else f"${answer}$"
    gold = parse(text, parsing_timeout=None) or parse(answer, parsing_timeout=None)
    return tuple(gold)


def math_verify_reward(response: str, answer: str, finished: bool = True,
                       require_boxed: bool = True) -> int:
    """1/0/-1 via math-verify: LaTeX-aware equivalence ("\\boxed{1/2}" vs "0.5" is correct).

    The whole response goes to math-verify's `parse`: without `require_boxed` it is correct
    exactly where verl's `math_verify.compute_score` scores 1
    (tests/test_verl_reward_conformance.py). That is not the last box alone: boxes joined by
    text ("\\boxed{3}, corrected: \\boxed{5}") parse as one set, which matches neither 3 nor 5.
    -1 if unfinished, if `require_boxed` and the response has no complete \\boxed{...}, or if
    nothing in it parses. Thread-safe: no signal-based timeouts (see module docstring).
    """
    from math_verify import parse, verify

    _quiet_math_verify()
    if not finished:
        return REWARD_INVALID
    if require_boxed and last_boxed(response) is None:
        return REWARD_INVALID
    target = parse(response, parsing_timeout=None)
    if not target:
        return REWARD_INVALID
    gold = _parse_gold(answer)
    if not gold:  # unparsable reference: fall back to comparing the boxed text verbatim
        return REWARD_CORRECT if last_boxed(response) == answer.strip() else REWARD_WRONG
    ok = verify(list(gold), target, timeout_seconds=None)
    return REWARD_CORRECT if ok else REWARD_WRONG


# ----------------------------------------------------------------------------- paper scorers
# The two papers' own scorers, as their released code runs them (tasks/corpus.py `REWARDS`
# names them and gives each its reward values).


def boxed_latex_reward(response: str, answer: str, finished: bool = True) -> int:
    """GRESO's `latex_math` scorer, which HIVE trains with (HIVE App. B: 1.0 correct, 0.1 an
    answer extracted but wrong, 0.0 none): the last \\boxed{...} (or "\\boxed x") of the
    response, compared with the reference by math-verify, each wrapped in $...$. 1 / 0 / -1
    (correct / extracted but wrong / nothing boxed). `finished` is ignored: the code scores a
    cut-off response's text as it is."""
    from math_verify import parse, verify

    _quiet_math_verify()
    response = response or ""
    if "\\boxed " in response:  # the code reads this form first: up to the next '$'
        got = response.split("\\boxed ")[-1].split("$")[0]
    else:
        got = last_boxed(response)
    if got is None:
        return REWARD_INVALID
    gold = parse(_in_math_mode(answer), parsing_timeout=None)
    pred = parse(_in_math_mode(got), parsing_timeout=None)
    ok = bool(gold) and bool(pred) and verify(gold, pred, timeout_seconds=None)
    return REWARD_CORRECT if ok else REWARD_WRONG


def _in_math_mode(text: str) -> str:
    text = str(text).strip()
    return text if text.startswith("$") and text.endswith("$") and len(text) > 1 \
        else f"${text.strip('$')}$"


# Minerva's answer normalisation (Lewkowycz et al. 2022, App. D), as DAPO's and HeaPA's
# `math_dapo` scorer applies it: these strings are replaced, then these words removed.
_MINERVA_SUBSTITUTIONS = (("an ", ""), ("a ", ""), (".$", "$"), ("\\$", ""), (r"\ ", ""),
                          (" ", ""), ("mbox", "text"), (",\\text{and}", ","),
                          ("\\text{and}", ","), ("\\text{m}", "\\text{}"))
_MINERVA_REMOVED = ("square", "ways", "integers", "dollars", "mph", "inches", "hours", "km",
                    "units", "\\ldots", "sue", "points", "feet", "minutes", "digits", "cents",
                    "degrees", "cm", "gm", "pounds", "meters", "meals", "edges", "students",
                    "childrentickets", "multiples", "\\text{s}", "\\text{.}", "\\text{\ns}",
                    "\\text{}^2", "\\text{}^3", "\\text{\n}", "\\text{}", r"\mathrm{th}",
                    r"^\circ", r"^{\circ}", r"\;", r",\!", "{,}", '"', "\\dots")
# (pattern, replacement) after the removals: keep the math of "$...$", unwrap \text{},
# \textbf{}, \overline{}, \boxed{}, and spell out shorthand \fracab and \sqrta.
_MINERVA_REWRITES = ((r"(.*?)(\$)(.*?)(\$)(.*)", "$\\3$"), (r"(\\text\{)(.*?)(\})", "\\2"),
                     (r"(\\textbf\{)(.*?)(\})", "\\2"), (r"(\\overline\{)(.*?)(\})", "\\2"),
                     (r"(\\boxed\{)(.*)(\})", "\\2"), (r"(frac)([^{])(.)", "frac{\\2}{\\3}"),
                     (r"(sqrt)([^{])", "sqrt{\\2}"))
_ANSWER_COLON = re.compile(r"(?i)Answer\s*:\s*([^\n]+)")
ANSWER_TAIL_CHARS = 300  # the scorer reads only the response's last 300 characters


def minerva_normalize(answer: str) -> str:
    """An answer string in Minerva's normal form: the part after the last '=', units and
    filler words removed, LaTeX wrappers and shorthand normalised, "1,000" -> "1000"."""
    s = str(answer).split("=")[-1]
    for before, after in _MINERVA_SUBSTITUTIONS:
        s = s.replace(before, after)
    for word in _MINERVA_REMOVED:
        s = s.replace(word, "")
    for pattern, repl in _MINERVA_REWRITES:
        s = re.sub(pattern, repl, s)
    s = s.replace("$", "")
    if s.replace(",", "").isdigit():
        s = s.replace(",", "")
    return s.strip()


def answer_line(response: str) -> str | None:
    """The text after the last "Answer:" in the response's last 300 characters, or None."""
    found = _ANSWER_COLON.findall((response or "")[-ANSWER_TAIL_CHARS:])
    return found[-1] if found else None


# What sympy may parse: numbers, operators, brackets, sqrt/pi and one-letter names. sympify
# evaluates its input as Python, so anything else (a model's free text) is never handed to it.
_SYMPY_SAFE = re.compile(r"[0-9A-Za-z+\-*/^().,\s]{1,100}")
_SYMPY_WORDS = {"sqrt", "pi"}


def _sympy_equal(a: str, b: str) -> bool:
    """HeaPA's evaluation fallback: equal as sympy expressions (or their numeric values), else
    as floats. Only for strings of the safe alphabet above."""
    for s in (a, b):
        if not _SYMPY_SAFE.fullmatch(s) or "__" in s or any(
                len(w) > 1 and w not in _SYMPY_WORDS for w in re.findall(r"[A-Za-z]+", s)):
            return False
    try:
        from sympy import sympify

        x, y = sympify(a), sympify(b)
        if x.equals(y):
            return True
        return float(x.evalf()) == float(y.evalf())
    except Exception:  # unparsable or not a number: fall through to floats
        pass
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def answer_line_reward(response: str, answer: str, finished: bool = True,
                       sympy: bool = False) -> int:
    """HeaPA's scorer (its `math_dapo.compute_score`, verl 0.9.0's, the reward of its released
    training runs): the last "Answer:" line in the response's final 300 characters and the
    reference, both Minerva-normalised, must be equal strings (no \\boxed{} fallback, which
    verl 0.9.1 added); with `sympy` (its evaluation script) equal sympy expressions or floats
    also count. 1 / 0 / -1 (correct / wrong / no "Answer:" line); `finished` is ignored, as in
    the code (a cut-off response is scored as it is)."""
    got = answer_line(response)
    if got is None:
        return REWARD_INVALID
    pred = minerva_normalize(got)
    gold = minerva_normalize(answer)
    ok = pred == gold or (sympy and _sympy_equal(pred, gold))
    return REWARD_CORRECT if ok else REWARD_WRONG
