"""GRPO with uniform prompt selection on the embedded arithmetic task.

Task: addition of 2-5 operands of 1-3 digits, digits written least-significant first; buckets
2op..5op. A 2-layer, d=64 Qwen3-style policy (~100k parameters) is warm-started on 2op/3op, then
trained with GRPO (G=8, B=64 prompts per step, seq-mean-token-mean, clip 0.2/0.28, no KL).

  frontier-rl train --config=configs/arith_grpo.py --workdir=runs/arith_grpo

Hardware: 2 CPU cores. Expected: see README (warm start + RL in minutes; the 4op bucket's
Avg@8 rises while 2op/3op hold).
"""

from frontier_rl import config_lib


def get_config(arg: str | None = None):
    c = config_lib.default_config()
    c.rl.loss = "grpo"
    if arg == "smoke":  # seconds: used by tests
        config_lib.shrink_for_smoke(c)
    elif arg not in (None, ""):
        raise ValueError(f"configs/arith_grpo.py: unknown arg {arg!r} (use '' or 'smoke')")
    return config_lib.validate(c)
