"""Procedural multi-operand addition, digits least-significant first ("arith").

Why this format: plain MSD-first multi-operand arithmetic has a cliff a ~100k-param model never
crosses. Writing operands and the sum least-significant digit first lets the model emit each
answer digit right after it has "seen" the carry it depends on. A 2-layer model warm-started on
2-3 operands solves 2/3 operands ~99/94%, 4 operands ~6%, 5 operands ~0%, and RL moves the
4-operand bucket: a graded frontier for prompt selection.

Format (reverse_digits=True; every number is written with its digits reversed):

    37 + 5 + 812 = 854    ->   prompt "73+5+218="   response "458"  then <eos>

The response is only the answer digits; the sampler stops at EOS, and the verifier is told
whether it did (`finished`). Buckets are named by operand count: "2op" .. "5op". Each operand
independently gets a digit count in [min_digits, max_digits] (so counts mix within a problem),
then a uniform value with exactly that many digits (0..9 for one digit).

Determinism: every (data seed, stream, bucket) has its own numpy stream consumed in fixed-size
chunks, so the first n problems of a bucket do not depend on how many are requested. Train ids
are "arith/<bucket>/<index>", eval ids "arith/<bucket>/eval/<index>".
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import numpy as np

from frontier_rl.tasks import base

ARITH_ALPHABET = "0123456789+="

DEFAULTS = dict(
    min_operands=2,
    max_operands=5,
    min_digits=1,
    max_digits=3,
    reverse_digits=True,
    train_size=20000,  # whole pool, split over buckets by `bucket_weights`
    eval_per_bucket=128,
    # Per-bucket eval sizes overriding eval_per_bucket, e.g. "4op:1024" (a comparison's
    # pre-registered frontier bucket gets the prompts its verdict needs).
    eval_sizes="",
    bucket_weights=None,  # one weight per bucket (easy -> hard); None = equal
    seed_offset=0,
    data_seed=None,  # set to fix the pool across run seeds; None = seed + seed_offset
)

# Stream ids: train, eval, pool shuffle and warm start never share random numbers.
_TRAIN, _EVAL, _SHUFFLE, _WARMSTART = 0, 1, 2, 3
_CHUNK = 1024  # rows drawn per rng call; fixed so generation is prefix-stable
_EXPR = re.compile(r"[0-9]+(?:\+[0-9]+)*=")


def bucket_name(n_operands: int) -> str:
    return f"{n_operands}op"


def bucket_operands(bucket: str) -> int:
    """"4op" -> 4."""
    if not re.fullmatch(r"[0-9]+op", bucket):
        raise ValueError(f"Not an arith bucket name: {bucket!r} (expected e.g. '4op').")
    return int(bucket[:-2])


def _write(value: int, reverse: bool) -> str:
    s = str(value)
    return s[::-1] if reverse else s


def _read(digits: str, reverse: bool) -> int:
    return int(digits[::-1] if reverse else digits)


def format_prompt(operands: Sequence[int], reverse_digits: bool = True) -> str:
    """[37, 5, 812] -> "73+5+218=" (reversed) or "37+5+812=" (plain)."""
    return "+".join(_write(int(v), reverse_digits) for v in operands) + "="


def format_answer(value: int, reverse_digits: bool = True) -> str:
    """854 -> "458" (reversed) or "854" (plain). The response text; EOS is appended as a token."""
    return _write(int(value), reverse_digits)


def solve(expression_text: str, reverse_digits: bool = True) -> str:
    """Answer of an arith prompt such as "73+5+218=" (-> "458"); for programmatic teachers.

    Raises ValueError unless the text is `digits(+digits)*=` exactly (ASCII digits, no spaces).
    """
    if not isinstance(expression_text, str) or not _EXPR.fullmatch(expression_text):
        raise ValueError(f"Ill-formed arith prompt: {expression_text!r}")
    total = sum(_read(t, reverse_digits) for t in expression_text[:-1].split("+"))
    return format_answer(total, reverse_digits)


def verify(prompt: base.Prompt, response: str, finished: bool = True,
           reverse_digits: bool = True) -> int:
    """1 if the response is the answer, 0 if a well-formed wrong number, -1 if invalid.

    Invalid: the response did not end with EOS, is empty, or has any non-digit character.
    Correctness is numeric, so harmless zero padding ("0210" for "021") still counts.
    """
    if not finished:
        return base.REWARD_INVALID
    text = response.strip()
    if not text or any(c not in "0123456789" for c in text):
        return base.REWARD_INVALID
    correct = _read(text, reverse_digits) == _read(prompt.answer, reverse_digits)
    return base.REWARD_CORRECT if correct else base.REWARD_WRONG


def _space_size(n_operands: int, min_digits: int, max_digits: int) -> int:
    """Number of distinct problems (ordered operand tuples) in a bucket."""
    low = 0 if min_digits <= 1 else 10 ** (min_digits - 1)
    return (10**max_digits - low) ** n_operands


def _chunks(gen: np.random.Generator, n_operands: int, min_digits: int, max_digits: int):
    """Endless stream of operand rows, drawn _CHUNK rows at a time."""
    while True:
        digits = gen.integers(min_digits, max_digits + 1, size=(_CHUNK, n_operands))
        low = np.where(digits == 1, 0, 10 ** (digits - 1))
        yield from gen.integers(low, 10**digits).tolist()


def _draw(gen: np.random.Generator, n: int, n_operands: int, cfg: dict, exclude: set[str],
          unique: bool) -> tuple[list[list[int]], int]:
    """n operand rows whose prompt text is not in `exclude` (nor repeated, if `unique`).

    Returns (rows, number of redrawn rows).
    """
    rows, seen, redrawn = [], set(), 0
    stream = _chunks(gen, n_operands, cfg["min_digits"], cfg["max_digits"])
    max_redraws = 100 * n + 10_000  # backstop; _check_space catches impossible requests
    while len(rows) < n:
        ops = next(stream)
        text = format_prompt(ops, cfg["reverse_digits"])
        if text in exclude or (unique and text in seen):
            redrawn += 1
            if redrawn > max_redraws:
                raise ValueError(f"Could not draw {n} new {n_operands}-operand problems; "
                                 "the digit range is too small for the requested sizes.")
            continue
        seen.add(text)
        rows.append(ops)
    return rows, redrawn


def eval_sizes(cfg: dict, buckets: list[str]) -> dict[str, int]:
    """Eval prompts per bucket: `eval_per_bucket`, overridden by `eval_sizes` ("4op:1024,...")."""
    sizes = dict.fromkeys(buckets, int(cfg["eval_per_bucket"]))
    for part in (x.strip() for x in str(cfg.get("eval_sizes") or "").split(",") if x.strip()):
        name, _, n = part.partition(":")
        if name not in sizes or not n.strip().isdigit() or int(n) < 1:
            raise ValueError(f"task.eval_sizes={cfg['eval_sizes']!r}: {part!r} is not "
                             f"BUCKET:N with BUCKET in {buckets} and N >= 1")
        sizes[name] = int(n)
    return sizes


def buckets_of(cfg: dict) -> list[str]:
    if not 1 <= cfg["min_operands"] <= cfg["max_operands"]:
        raise ValueError(f"Need 1 <= min_operands <= max_operands, got {cfg}.")
    if not 1 <= cfg["min_digits"] <= cfg["max_digits"] <= 18:  # int64 bounds in numpy
        raise ValueError(f"Need 1 <= min_digits <= max_digits <= 18, got {cfg}.")
    return [bucket_name(k) for k in range(cfg["min_operands"], cfg["max_operands"] + 1)]


def _prompt(ops: list[int], pid: str, bucket: str, reverse: bool) -> base.Prompt:
    return base.Prompt(id=pid, text=format_prompt(ops, reverse),
                       answer=format_answer(sum(ops), reverse), bucket=bucket,
                       meta={"operands": ops})


@base.register_task("arith", DEFAULTS)
def make_arith_task(cfg: dict, seed: int) -> base.Task:
    """Builds the arith task; see DEFAULTS for the knobs."""
    cfg = base.resolve_config(cfg, DEFAULTS, "arith")
    buckets = buckets_of(cfg)
    dseed = base.data_seed(cfg, seed)
    cfg["data_seed"] = dseed  # task.config then rebuilds exactly this task, whatever the seed
    weights = cfg["bucket_weights"] or [1.0] * len(buckets)
    if len(weights) != len(buckets):
        raise ValueError(f"bucket_weights has {len(weights)} entries for buckets {buckets}.")
    counts = base.split_counts(cfg["train_size"], weights)
    reverse = cfg["reverse_digits"]

    n_eval = eval_sizes(cfg, buckets)
    train, evals, stats = [], [], {"train_redrawn": 0, "eval_redrawn": 0}
    for bucket, n_train in zip(buckets, counts, strict=True):
        k = bucket_operands(bucket)
        space = _space_size(k, cfg["min_digits"], cfg["max_digits"])
        if n_train + n_eval[bucket] > space:
            raise ValueError(f"Bucket {bucket} has only {space} distinct problems; asked for "
                             f"{n_train} train + {n_eval[bucket]} eval.")
        rows, redrawn = _draw(base.rng(dseed, _TRAIN, k), n_train, k, cfg, set(), unique=True)
        stats["train_redrawn"] += redrawn
        bucket_train = [_prompt(ops, f"arith/{bucket}/{i:06d}", bucket, reverse)
                        for i, ops in enumerate(rows)]
        # Eval comes from its own stream; anything already in the pool is redrawn.
        seen = {p.text for p in bucket_train}
        rows, redrawn = _draw(base.rng(dseed, _EVAL, k), n_eval[bucket], k, cfg, seen,
                              unique=True)
        stats["eval_redrawn"] += redrawn
        evals += [_prompt(ops, f"arith/{bucket}/eval/{i:06d}", bucket, reverse)
                  for i, ops in enumerate(rows)]
        train += bucket_train

    # Mix buckets so any prefix of the pool covers all difficulties.
    order = base.rng(dseed, _SHUFFLE).permutation(len(train))
    train = [train[i] for i in order]
    task = base.Task(name="arith", train=train, eval=evals, buckets=buckets,
                     verifier=functools.partial(verify, reverse_digits=reverse), stats=stats,
                     config=cfg, alphabet=ARITH_ALPHABET)
    task.examples = functools.partial(warmstart_examples, task)
    return task


def warmstart_examples(task: base.Task, buckets: Sequence[str], n: int,
                       seed: int = 0) -> list[tuple[str, str]]:
    """n supervised (prompt, response) pairs from `buckets` (e.g. ["2op", "3op"]).

    Drawn from a stream separate from train and eval, with every eval text excluded, split
    equally over the buckets and shuffled. The response is the answer digits without EOS: the
    caller appends the EOS token (and prepends BOS).
    """
    if task.name != "arith":
        raise ValueError(f"warmstart_examples needs an arith task, got {task.name!r}.")
    unknown = [b for b in buckets if b not in task.buckets]
    if unknown or not buckets:
        raise ValueError(f"Unknown warm-start buckets {list(buckets)}; task has {task.buckets}.")
    cfg, reverse = task.config, task.config["reverse_digits"]
    eval_texts = {p.text for p in task.eval}
    pairs = []
    for bucket, count in zip(buckets, base.split_counts(n, [1.0] * len(buckets)), strict=True):
        k = bucket_operands(bucket)
        gen = base.rng(cfg["data_seed"], _WARMSTART, seed, k)
        # Repeats are fine for supervised data (and needed for tiny digit ranges).
        rows, _ = _draw(gen, count, k, cfg, eval_texts, unique=False)
        pairs += [(format_prompt(ops, reverse), format_answer(sum(ops), reverse)) for ops in rows]
    order = base.rng(cfg["data_seed"], _WARMSTART, seed).permutation(len(pairs))
    return [pairs[i] for i in order]
