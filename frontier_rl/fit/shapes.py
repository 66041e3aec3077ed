"""The padded shapes the embedded programs compile for: one compile per bucket, never per size.

Plain Python, so the RL update (rl/), the sampler (rollout/sampler.py), the entropy pass and the
warm start agree on the buckets without importing each other.

- `PROMPT_BUCKETS`, `bucket`: prompt lengths (sampler, entropy pass, warm-start check) and, over
  `ROW_BUCKETS`, the rows of an update batch;
- `row_bucket`: the rows of one sampler call (under 10% padding above 1,024 rows);
- `decode_segments`: the sampler's decode-slot bounds for a token cap (rollout/sampler.py's
  docstring says why).
"""

from __future__ import annotations

from collections.abc import Sequence

# Prompt lengths and rows per update call (one compile per bucket used).
PROMPT_BUCKETS = (8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
ROW_BUCKETS = (64, 128, 256, 512, 1024, 2048)

# The embedded sampler's rows per call: at least this many, then `row_bucket`'s steps.
MIN_ROWS = 8

# Up to 1,024 rows. 16 and 32 rows are buckets of their own: a paper run's small calls (HeaPA's
# augmentation of a few prompts, HIVE's last top-up) ran padded to 64 rows, whose KV cache
# did not fit a TPU chip at 8B. (A bucket changes the draws of the calls it pads, since the
# sampler draws for the padded batch: results files record the commit they were made at.)
SMALL_BUCKETS = (MIN_ROWS, 16, 32, 64, 256, 512, 1024)

# Decode segments: the first segment's decode-slot bound, doubled per segment up to the token
# cap, and the most segments one generate program holds.
DECODE_BUCKET = 16
MAX_DECODE_SEGMENTS = 4


def bucket(n: int, buckets: Sequence[int]) -> int:
    """Smallest bucket >= n; beyond the largest, the next multiple of it."""
    for b in buckets:
        if n <= b:
            return b
    top = buckets[-1]
    return -(-n // top) * top


def row_bucket(n: int) -> int:
    """The rows a sampler call of `n` rows runs at (before the mesh's row multiple): up to
    1,024 rows the next of SMALL_BUCKETS; above, in each octave (2^k, 2^(k+1)] the next
    multiple of 2^k / 16 up to 1.25 x 2^k, beyond it the next multiple of 2^k / 8. Each step
    above 1,024 is at most a tenth of the bucket below it, so at the papers' sizes padding stays
    under 10% of the rows asked for (3,136 rows run as 3,328, not 4,096), with ten buckets per
    octave: a selector whose calls vary in size (HIVE's top-ups, DS's rounds) compiles a few more
    programs, each for at most ~10% more rows than it needs."""
    if n <= SMALL_BUCKETS[-1]:
        return next(b for b in SMALL_BUCKETS if b >= n)
    base = 1 << ((n - 1).bit_length() - 1)  # 2^k < n <= 2^(k+1)
    step = base // 16 if n <= base + base // 4 else base // 8
    return -(-n // step) * step


def decode_segments(max_new: int, first: int = DECODE_BUCKET,
                    most: int = MAX_DECODE_SEGMENTS) -> tuple[int, ...]:
    """The decode segments' bounds on the steps run (increasing, the last = `max_new`): the
    powers of two from `first` below `max_new`, then `max_new`, of which only the largest `most`
    are kept. Segment i runs steps [w_(i-1), w_i) over a cache of prompt + w_i slots. `first`
    <= 0 (or >= max_new): one segment, the full cache."""
    if first <= 0 or first >= max_new:
        return (max_new,)
    bounds = []
    w = first
    while w < max_new:
        bounds.append(w)
        w *= 2
    bounds.append(max_new)
    return tuple(bounds[-max(1, most):])


def config_section():
    """`fit`: the fit check (`frontier-rl fit`) plays the selector for `sim_steps` steps on the
    synthetic learner (frontier_rl/sim) to find the rows each program is called with, and
    compiles the programs at the longest prompt (`prompt_len` tokens). `entropy_rows` > 0
    sizes the prompt-entropy pass at that many rows instead of the selector's largest call;
    `every_bucket` sizes every sampler row bucket the selector uses, not only the largest."""
    from frontier_rl.run import fields

    return (fields.Section("fit", config_section.__doc__)
            .field("prompt_len", 32, fields.pos_int, "an integer >= 1 (tokens)")
            .field("entropy_rows", 0, fields.nonneg_int,
                   "an integer >= 0 (0 = the selector's largest call)")
            .field("sim_steps", 20, fields.pos_int, "an integer >= 1")
            .field("every_bucket", False, fields.boolean, "True or False"))
