"""DAPO (token-mean loss, clip-higher 0.2/0.28, overlong shaping, no KL) with uniform selection
on the embedded arithmetic task; otherwise as configs/arith_grpo.py.

  frontier-rl train --config=configs/arith_dapo.py --workdir=runs/arith_dapo

Hardware: 2 CPU cores; minutes. Dynamic sampling (DAPO's group filter) is a selector of its own.
"""

from frontier_rl import config_lib


def get_config(arg: str | None = None):
    c = config_lib.default_config()
    c.rl.loss = "dapo"
    c.rl.eps_low = 0.2
    c.rl.eps_high = 0.28
    c.rl.kl_coef = 0.0
    c.rl.overlong_buffer = 2
    c.rl.overlong_penalty = 1.0
    if arg == "smoke":
        config_lib.shrink_for_smoke(c)
    elif arg not in (None, ""):
        raise ValueError(f"configs/arith_dapo.py: unknown arg {arg!r} (use '' or 'smoke')")
    return config_lib.validate(c)
