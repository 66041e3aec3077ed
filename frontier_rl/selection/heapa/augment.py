"""On-policy query augmentation (HeaPA, arXiv 2601.22448): the current policy writes n_aug
candidate queries per sampled prompt through `ctx.generate`; each is parsed into a new problem and a
relative difficulty d (clamped to [d_min, d_max]), and gets the estimated statistic

    est = clip(r_p / d if r_p >= 0 else r_p * d, -1, 1)

from its parent's statistic r_p measured this step (keyed by record id; `est_fallback` if the
parent has none). Candidates then go to the teacher for an answer.

Two formats (config `aug_format`):

- "arith" (the embedded task). The policy is a character-level model over "0123456789+=" that
  was only trained to answer, so it cannot follow an instruction. It is given a truncated
  parent problem, a prefix ending in '+', and continues it; the child is what it wrote, closed
  with '='. With `arith_prefix`:
    "drop_last": the parent without its last operand ("73+5+218=" -> "73+5+"); the policy
                 writes the replacement operand(s): a sibling of similar size;
    "extend":    the whole parent and a '+' ("73+5+218+"); the policy writes extra operand(s):
                 a harder child;
    "mixed":     either, with probability 1/2 each (default).
  Generation stops at '=' (stop string), at EOS, or at the token cap. A warm-started policy
  usually writes digits and EOS (it believes it is answering), which makes one new operand.
  d = (digits of child) / (digits of parent), the ratio of digit additions the long sum needs,
  clamped to [d_min, d_max]. Rejected (counted): an empty continuation ("empty"), anything that
  is not digits(+digits)* ("ill_formed"), a continuation that filled the token cap without
  stopping ("token_cap").
- "template" (real corpora): the spec's tag prompt — the policy edits only the numbers of the
  ORIGINAL problem and writes <NEW> ... <DIFFICULTY> x <END>; generation is cut at the stop
  strings and capped at `aug_max_new_tokens` (400). Parsing: NEW = after the first <NEW> (or
  from the start, since the prompt ends with an open <NEW>) up to the next tag; difficulty from
  a JSON "difficulty": x, then "difficulty|diff [:=] x", then a bare number inside the
  DIFFICULTY field; 1.0 if none parses. Legacy "# New Problem #" / "# Difficulty #" headers
  are accepted. Deviation: the code's last fallback reads a bare number from the whole
  generation as the difficulty; here a bare number only counts inside the DIFFICULTY field.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

FORMATS = ("auto", "arith", "template")
ARITH_PREFIX = ("mixed", "drop_last", "extend")
ARITH_STOP = ("=",)
ARITH_MAX_NEW_TOKENS = 8
TEMPLATE_MAX_NEW_TOKENS = 400
_ARITH_BODY = re.compile(r"[0-9]+(?:\+[0-9]+)*")
_ARITH_PROMPT = re.compile(r"[0-9]+(?:\+[0-9]+)*=")

TEMPLATE = """You write new math problems for practice.
Below is an ORIGINAL problem. Write a NEW problem that is almost the same: keep the topic, the
setting, the variables and what is asked, and change only the numbers (constants, coefficients,
exponents, lengths, bounds) by small amounts so the NEW problem still has one exact answer.
Do not solve it, do not explain, and do not write code.
Use exactly this format:
<ORIGINAL> the original problem
<NEW> the new problem
<DIFFICULTY> one number: how hard the NEW problem is relative to the ORIGINAL (1.0 = same)
<END>

Example:
<ORIGINAL> A train travels 120 km in 2 hours. At the same speed, how far does it go in 5 hours?
<NEW> A train travels 150 km in 3 hours. At the same speed, how far does it go in 7 hours?
<DIFFICULTY> 1.02
<END>

<ORIGINAL> {original}
<NEW>"""

TEMPLATE_STOP = ("<END>", "<ORIGINAL>", "```", "Solution:", "Answer:", "\\boxed", "Step 1",
                 "To solve", "To compute", "To calculate", "To find")

_TAG = re.compile(r"<\s*(NEW|DIFFICULTY|END|ORIGINAL)\s*>", re.IGNORECASE)
_LEGACY_NEW = re.compile(r"#\s*New Problem\s*#", re.IGNORECASE)
_LEGACY_DIFF = re.compile(r"#\s*Difficulty\s*#", re.IGNORECASE)
_NUM = r"([-+]?\d+(?:\.\d+)?)"
_JSON_DIFF = re.compile(r'"difficulty"\s*:\s*' + _NUM, re.IGNORECASE)
_KEY_DIFF = re.compile(r"\b(?:difficulty|diff)\s*[:=]\s*" + _NUM, re.IGNORECASE)
_BARE = re.compile(_NUM)


@dataclasses.dataclass
class Candidate:
    """A policy-written query on its way to the teacher."""

    cid: int  # run-unique, in submission order
    parent: str  # parent record_id
    text: str  # the new problem as the policy wrote it (what the teacher annotates)
    original: str  # the parent problem (context for the teacher)
    d: float  # policy difficulty factor, clamped to [d_min, d_max]
    est: float  # estimated statistic of the child
    step: int

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Candidate:
        return cls(**d)


def clamp_d(d: float, d_min: float, d_max: float) -> float:
    """Clamps a difficulty factor to [d_min, d_max] (1.0 if not finite), floored at 0.01."""
    if d is None or not math.isfinite(d):
        d = 1.0
    return max(0.01, min(d_max, max(d_min, float(d))))


def estimate(r_p: float | None, d: float, fallback: float = 0.5) -> float:
    """est = clip(r_p / d if r_p >= 0 else r_p * d, -1, 1)."""
    if r_p is None or not math.isfinite(r_p):
        r_p = fallback
    r_p = min(1.0, max(-1.0, float(r_p)))
    return min(1.0, max(-1.0, r_p / d if r_p >= 0 else r_p * d))


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    for s in stop:
        text = text.split(s, 1)[0]
    return text


def is_arith_prompt(text: str) -> bool:
    return isinstance(text, str) and bool(_ARITH_PROMPT.fullmatch(text))


# ----------------------------------------------------------------------------- arith


def arith_prefix(parent_text: str, mode: str, rng: np.random.Generator) -> str:
    """The truncated parent the policy continues (see the module docstring)."""
    ops = parent_text.rstrip("=").split("+")
    if mode == "mixed":
        mode = "drop_last" if rng.random() < 0.5 else "extend"
    if mode == "drop_last" and len(ops) >= 2:
        ops = ops[:-1]
    return "+".join(ops) + "+"


def parse_arith(prefix: str, continuation: str, cap: int) -> tuple[str | None, str]:
    """(child problem, "") or (None, rejection reason).

    The context may already have cut the text at '=': a text shorter than the cap stopped (at
    '=' or EOS); one that reached the cap without a stop string ran out of tokens.
    """
    if len(continuation) >= cap and not any(s in continuation for s in ARITH_STOP):
        return None, "token_cap"
    cont = cut_at_stop(continuation, ARITH_STOP).strip()
    if not cont:
        return None, "empty"
    body = prefix + cont
    if not _ARITH_BODY.fullmatch(body):
        return None, "ill_formed"
    return body + "=", ""


def arith_difficulty(parent_text: str, child_text: str) -> float:
    """Ratio of digit counts (the long sum's digit additions), before clamping."""
    dp = sum(ch.isdigit() for ch in parent_text)
    dc = sum(ch.isdigit() for ch in child_text)
    return dc / dp if dp else 1.0


# ----------------------------------------------------------------------------- template


def unwrap(text: str, template: str) -> str:
    """The problem body of a prompt built as template.format(prompt=body). The template's
    other braces are doubled (str.format), so its head and tail are compared as rendered."""
    head, _, tail = template.format(prompt="\x00").partition("\x00")
    if head and text.startswith(head):
        text = text[len(head):]
    if tail and text.endswith(tail):
        text = text[: len(text) - len(tail)]
    return text.strip()


def parse_difficulty(text: str) -> float | None:
    for pattern in (_JSON_DIFF, _KEY_DIFF, _BARE):
        m = pattern.search(text)
        if m:
            try:
                return float(m.group(1))
            except ValueError:
                continue
    return None


def parse_template(generation: str) -> tuple[str, float | None]:
    """(NEW text, raw difficulty or None) from a template-format generation."""
    gen = generation
    tags = list(_TAG.finditer(gen))
    new_tag = next((m for m in tags if m.group(1).upper() == "NEW"), None)
    m_new = _LEGACY_NEW.search(gen) if new_tag is None else None
    d = None
    if m_new is not None:  # legacy "# New Problem #" / "# Difficulty #" headers
        m_diff = _LEGACY_DIFF.search(gen, m_new.end())
        new = gen[m_new.end(): m_diff.start() if m_diff else len(gen)]
        if m_diff is not None:
            d = parse_difficulty(gen[m_diff.end():])
    else:
        start = new_tag.end() if new_tag is not None else 0
        nxt = next((m for m in tags if m.start() >= start and m is not new_tag), None)
        new = gen[start: nxt.start() if nxt is not None else len(gen)]
        diff_tag = next((m for m in tags if m.group(1).upper() == "DIFFICULTY"), None)
        if diff_tag is not None:
            after = next((m for m in tags if m.start() >= diff_tag.end()), None)
            d = parse_difficulty(gen[diff_tag.end(): after.start() if after else len(gen)])
    if d is None:  # only labelled forms outside the DIFFICULTY field
        m = _JSON_DIFF.search(gen) or _KEY_DIFF.search(gen)
        d = float(m.group(1)) if m else None
    return new.strip(), d


# ----------------------------------------------------------------------------- the augmenter


class Augmenter:
    """Builds the generation prompts, calls ctx.generate, parses, and returns candidates."""

    def __init__(self, *, fmt: str, n_aug: int, max_new_tokens: int, temperature: float,
                 d_min: float, d_max: float, arith_mode: str, prompt_template: str,
                 est_fallback: float, rng: np.random.Generator):
        if fmt not in ("arith", "template"):
            raise ValueError(f"augmentation format {fmt!r} must be resolved to arith/template")
        self.fmt = fmt
        self.n_aug = n_aug
        self.max_new_tokens = max_new_tokens or (
            ARITH_MAX_NEW_TOKENS if fmt == "arith" else TEMPLATE_MAX_NEW_TOKENS)
        self.temperature = temperature
        self.d_min, self.d_max = d_min, d_max
        self.arith_mode = arith_mode
        self.prompt_template = prompt_template
        self.est_fallback = est_fallback
        self.rng = rng
        self.stop = ARITH_STOP if fmt == "arith" else TEMPLATE_STOP

    def prompts(self, parent_text: str) -> list[tuple[str, str]]:
        """n_aug (generation prompt, parent problem) pairs for one parent."""
        if self.fmt == "arith":
            return [(arith_prefix(parent_text, self.arith_mode, self.rng), parent_text)
                    for _ in range(self.n_aug)]
        body = unwrap(parent_text, self.prompt_template)
        return [(TEMPLATE.format(original=body), body)] * self.n_aug

    def propose(self, generate, parents: Sequence[tuple[str, str, float | None]], step: int,
                next_cid: int) -> tuple[list[Candidate], Counter]:
        """parents: (record_id, prompt text, statistic measured this step).

        `generate(texts)` is ctx.generate with this augmenter's cap, temperature and stops.
        Returns (candidates with cids from next_cid, rejection counts; "note_" keys count
        accepted oddities such as a missing difficulty).
        """
        jobs = []  # (parent rid, generation prompt, parent problem, r_p)
        for rid, text, r_p in parents:
            for gen_prompt, original in self.prompts(text):
                jobs.append((rid, gen_prompt, original, r_p))
        rejects: Counter = Counter()
        if not jobs:
            return [], rejects
        outs = generate([j[1] for j in jobs], max_new_tokens=self.max_new_tokens,
                        temperature=self.temperature, stop=self.stop)
        cands = []
        for (rid, gen_prompt, original, r_p), out in zip(jobs, outs, strict=True):
            out = out or ""
            if self.fmt == "arith":
                child, why = parse_arith(gen_prompt, out, self.max_new_tokens)
                if child is None:
                    rejects[why] += 1
                    continue
                d_raw = arith_difficulty(original, child)
            else:
                new, d_raw = parse_template(cut_at_stop(out, self.stop))
                if not new:
                    rejects["empty"] += 1
                    continue
                if d_raw is None:
                    rejects["note_no_difficulty"] += 1  # counted, not rejected: d = 1.0
                child = new
            d = clamp_d(d_raw, self.d_min, self.d_max)
            cands.append(Candidate(cid=next_cid + len(cands), parent=rid, text=child,
                                   original=original, d=d,
                                   est=estimate(r_p, d, self.est_fallback), step=step))
        return cands, rejects
