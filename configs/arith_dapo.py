"""DAPO (Yu et al., arXiv 2503.14476) on the embedded arithmetic task; otherwise as
configs/arith_grpo.py (2-layer d=64 policy warm-started on 2op/3op, G=8, B=64 prompts per step).

Args (comma-separated, e.g. `:no_ds,smoke`):
  ''     DAPO as the paper defines it: token-mean loss, clip-higher 0.2/0.28, overlong reward
         shaping (L_cache = 2 of the 8 new tokens), no KL, and dynamic sampling (selector "ds":
         generation batches of 1.5 B prompts until B groups with mixed outcomes have
         accumulated; every generated response counts toward the rollout budget).
  no_ds  the DAPO loss recipe only (token-mean, clip-higher, overlong shaping, no KL) with
         uniform prompt selection and no group filter: B x G responses per step.
  smoke  the same code paths in seconds (used by tests).

  frontier-rl train --config=configs/arith_dapo.py --workdir=runs/arith_dapo
  frontier-rl train --config=configs/arith_dapo.py:no_ds --workdir=runs/arith_dapo_no_ds

Hardware: 2 CPU cores; minutes, like arith_grpo. With dynamic sampling a step rolls out more
than B x G responses (rollout/step), and no trained group is zero-variance.
"""

from frontier_rl import config_lib

VARIANTS = ("no_ds", "smoke")


def get_config(arg: str | None = None):
    args = [a for a in (arg or "").split(",") if a]
    unknown = [a for a in args if a not in VARIANTS]
    if unknown:
        raise ValueError(f"configs/arith_dapo.py: unknown arg {unknown} (use any of {VARIANTS})")
    c = config_lib.default_config()
    c.rl.loss = "dapo"
    c.rl.eps_low = 0.2
    c.rl.eps_high = 0.28
    c.rl.kl_coef = 0.0
    c.rl.overlong_buffer = 2
    c.rl.overlong_penalty = 1.0
    c.selector.name = "uniform" if "no_ds" in args else "ds"
    if "smoke" in args:
        config_lib.shrink_for_smoke(c)
    return config_lib.validate(c)
