"""Compile churn: the distinct programs a run compiles, the most its buckets allow, and the
padding they cost (printed by `frontier-rl fit`).

Every device program compiles once per padded shape (shapes.py, rl/batch.py): the sampler per
(rows, prompt bucket, token cap, greedy, top-p, top-k), each holding its decode segments
(`shapes.decode_segments`, up to 4 loops); the prompt-entropy pass per (rows, prompt bucket);
the train step and the log-prob pass (old policy and KL reference: one jitted function, so one
program per shape for both) per (rows, length) of the packed batch. At the papers' shapes a
train step takes 2-8 minutes to compile on XLA:GPU (README, `fit --target`), so each new shape
is minutes of idle accelerators. `count` replays the calls a run makes (`fit.simulate`: the
configured selector on the synthetic learner) through the run's own padding and returns, per
kind, the shapes met, the bound and the padding.

Lengths. The learner models outcomes, not text. Every prompt is taken at `fit.prompt_len`
tokens (the length `fit` compiles for), and each response's length is drawn geometric with
mean RESPONSE_MEAN x the token cap, clipped to it (the train-step bench's realistic lengths,
bench/__init__.py), from a random stream of its own, so the selection is unchanged. With
prompts of one length every call lands in one prompt bucket; real prompts in several buckets
multiply the sampler, entropy and train-step programs by the buckets a call's longest prompt
lands in (the trainer pads the whole batch to its longest prompt's bucket).

Bound: the most distinct programs the buckets allow at that prompt bucket for row counts
anywhere between the fewest and the most the run's calls asked for (the sampler's and entropy
pass's rows, the train batch's sequences) and for any response lengths (`train_bound`): the part
of the count that does not rest on the drawn lengths.

Padding: padded rows / real rows, and padded token slots / real tokens, summed over the calls.
Real rows are the sequences (for "pack": the rows best fit packs them into); the sampler's slots
are rows x (prompt bucket + decode steps run, i.e. the call's longest response), as
accounting.py counts them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from frontier_rl.fit.shapes import PROMPT_BUCKETS, ROW_BUCKETS, bucket, decode_segments
from frontier_rl.rl import batch as batch_lib

RESPONSE_MEAN = 1 / 3  # mean response length, as a share of the token cap (bench's model)


def draw_responses(rng: np.random.Generator, rows: int, cap: int) -> np.ndarray:
    """`rows` response lengths: geometric with mean RESPONSE_MEAN x `cap`, in [1, cap]."""
    p = min(1.0, 1.0 / max(1.0, RESPONSE_MEAN * cap))
    return np.minimum(rng.geometric(p, rows), cap).astype(np.int64)


def _up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def train_rows(n: int, layout: str, row_multiple: int) -> int:
    """Rows of a train batch of `n` real rows (sequences; for "pack" the rows best fit made), as
    rl/batch.py pads them: `ROW_BUCKETS` ("pad", "trim") or `packed_rows` ("pack"), then a
    multiple of the trainer's row multiple."""
    rows = batch_lib.packed_rows(n) if layout == "pack" else bucket(n, ROW_BUCKETS)
    return _up(rows, row_multiple)


def train_shape(prompt_lens: Sequence[int], response_lens: Sequence[int], *, max_new: int,
                layout: str, row_multiple: int) -> tuple[int, int, int]:
    """(rows, length, real rows) of the batch `batch_lib.pack` lays these sequences out in (one
    prompt length per sequence), computed without building it."""
    plen = bucket(int(max(prompt_lens)), PROMPT_BUCKETS)
    if layout == "pad":
        n = len(response_lens)
        return train_rows(n, layout, row_multiple), plen + max_new, n
    seqs = np.asarray(prompt_lens) + np.asarray(response_lens)
    length = batch_lib.seq_bucket(int(seqs.max()), plen + max_new)
    n = len(batch_lib.best_fit(seqs, length)) if layout == "pack" else len(seqs)
    return train_rows(n, layout, row_multiple), length, n


def train_bound(fewest: int, most: int, prompt_len: int, *, max_new: int, layout: str,
                row_multiple: int) -> set[tuple[int, int]]:
    """Every (rows, length) a train batch of `fewest` to `most` sequences of a `prompt_len`-token
    prompt and 1 to `max_new` response tokens can be padded to. "pack" at a batch length of L
    holds at most L // (prompt_len + 1) sequences a row, so it has at least that share of the
    sequences as rows, and at most one row per sequence."""
    plen = bucket(prompt_len, PROMPT_BUCKETS)
    full = plen + max_new
    if layout == "pad":
        return {(train_rows(n, layout, row_multiple), full) for n in range(fewest, most + 1)}
    out = set()
    for length in sorted({batch_lib.seq_bucket(n, full)
                          for n in range(prompt_len + 1, prompt_len + max_new + 1)}):
        lo = fewest if layout == "trim" else -(-fewest // (length // (prompt_len + 1)))
        out |= {(train_rows(n, layout, row_multiple), length) for n in range(lo, most + 1)}
    return out


@dataclasses.dataclass
class _Kind:
    """The shapes met by one kind of program and the rows and tokens its calls padded."""

    shapes: set = dataclasses.field(default_factory=set)
    calls: int = 0
    rows: int = 0
    padded_rows: int = 0
    tokens: int = 0
    padded_tokens: int = 0

    def add(self, shape, rows, padded_rows, tokens, padded_tokens) -> None:
        self.shapes.add(shape)
        self.calls += 1
        self.rows += int(rows)
        self.padded_rows += int(padded_rows)
        self.tokens += int(tokens)
        self.padded_tokens += int(padded_tokens)

    def report(self, bound: int, **extra) -> dict:
        return {"programs": len(self.shapes), "bound": bound, "calls": self.calls,
                "shapes": sorted(self.shapes),
                "row_padding": self.padded_rows / self.rows if self.rows else 1.0,
                "token_padding": self.padded_tokens / self.tokens if self.tokens else 1.0,
                **extra}


def count(calls: Sequence[tuple[str, int, int]], variants: dict, *, prompt_len: int,
          max_new: int, layout: str, row_multiple: int,
          sampler_rows: Callable[[int], int] | None,
          entropy_shape: Callable[[Sequence[int]], tuple[int, int]],
          logps: bool, seed: int = 0,
          responses: Callable[[np.random.Generator, int, int], np.ndarray] = draw_responses,
          ) -> dict:
    """Per kind ("sampler", "entropy", "logps", "train_step"), the distinct programs a run
    compiles and their bound and padding (module docstring).

    `calls`: the run's device calls ((kind, prompts, n): `SimContext.calls`); `variants`: its
    sampler calls per (token cap, greedy, top-p, top-k) (`fit._sampler_variants`); `prompt_len`:
    every prompt's tokens; `max_new`: the rollouts' token cap; `layout`, `row_multiple`: the
    trainer's batch layout (as resolved for the device's attention) and row multiple;
    `sampler_rows`: `Sampler.padded_rows` (None: an external engine generates, no sampler
    program); `entropy_shape`: `PromptEntropy.padded_shape`; `logps`: whether the run computes
    log-probs at the trainer (old-policy recompute or KL reference); `responses(rng, rows, cap)`:
    the response lengths of a call (default `draw_responses`)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xC0DE]))
    plen = bucket(prompt_len, PROMPT_BUCKETS)
    out: dict = {"prompt_len": prompt_len, "prompt_bucket": plen, "layout": layout,
                 "response_mean": RESPONSE_MEAN,
                 "prompt_buckets": sum(1 for b in PROMPT_BUCKETS if b <= plen)}

    # The sampler: one program per (rows, prompt bucket) of each variant.
    sampler = _Kind()
    bound = 0
    segments = {}
    for key, v in (variants.items() if sampler_rows is not None else ()):
        cap = key[0]
        segments[cap] = len(decode_segments(cap))
        for r in v["rows"]:
            resp = responses(rng, r, cap)
            padded = sampler_rows(r)
            sampler.add((padded, plen, *key), r, padded, r * prompt_len + int(resp.sum()),
                        padded * (plen + int(resp.max())))
        bound += len({sampler_rows(r) for r in range(min(v["rows"]), max(v["rows"]) + 1)})
    out["sampler"] = sampler.report(
        bound, segments=sum(segments[s[2]] for s in sampler.shapes),
        segments_per_cap=segments, variants=len(variants) if sampler_rows else 0)

    # The prompt-entropy pass.
    entropy = _Kind()
    ent = [p for k, p, _ in calls if k == "entropy"]
    for p in ent:
        rows, e_len = entropy_shape([prompt_len] * p)
        entropy.add((rows, e_len), p, rows, p * prompt_len, rows * e_len)
    out["entropy"] = entropy.report(len({entropy_shape([prompt_len] * p)
                                         for p in range(min(ent), max(ent) + 1)}) if ent else 0)

    # The packed train batch: the train step, and the log-prob pass at the same shapes.
    train = _Kind()
    seqs = [p * g for k, p, g in calls if k == "update"]
    for n in seqs:
        resp = responses(rng, n, max_new)
        rows, length, real = train_shape([prompt_len] * n, resp, max_new=max_new,
                                         layout=layout, row_multiple=row_multiple)
        train.add((rows, length), real, rows, n * prompt_len + int(resp.sum()), rows * length)
    allowed = (train_bound(min(seqs), max(seqs), prompt_len, max_new=max_new, layout=layout,
                           row_multiple=row_multiple) if seqs else set())
    extra = {"row_buckets": len({r for r, _ in allowed}),
             "length_buckets": len({n for _, n in allowed})}
    out["train_step"] = train.report(len(allowed), **extra)
    out["logps"] = (train if logps else _Kind()).report(len(allowed) if logps else 0, **extra)
    return out


def print_churn(c: dict, say=print) -> None:
    """The churn table `fit` prints under its memory table."""
    say(f"compile churn over the run's calls (prompts at {c['prompt_len']} tokens, bucket "
        f"{c['prompt_bucket']}; responses geometric, mean {c['response_mean']:.2g} x the cap; "
        f"train batches \"{c['layout']}\"):")
    say(f"{'program':<12} {'calls':>6} {'programs':>8} {'bound':>6} {'rows padded':>11} "
        f"{'tokens padded':>13}")
    for kind in ("sampler", "entropy", "logps", "train_step"):
        k = c[kind]
        say(f"{kind:<12} {k['calls']:>6} {k['programs']:>8} {k['bound']:>6} "
            f"{k['row_padding']:>10.2f}x {k['token_padding']:>12.2f}x")
    s, t = c["sampler"], c["train_step"]
    say(f"(sampler: {s['segments']} decode-segment loops in its {s['programs']} programs; "
        f"train step and log-probs: the bound's shapes span {t['row_buckets']} row buckets "
        f"and {t['length_buckets']} lengths; prompts in k buckets multiply each kind by up to "
        f"k <= {c['prompt_buckets']})")
