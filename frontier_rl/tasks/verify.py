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

    -1 if unfinished, if `require_boxed` and the response has no \\boxed{...}, or if nothing
    in it parses. Thread-safe: no signal-based timeouts (see module docstring).
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
