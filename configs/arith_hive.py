"""GRPO with HIVE prompt selection on the embedded arithmetic task; otherwise as
configs/arith_grpo.py (2-layer d=64 policy warm-started on 2op/3op, G=8, B=64 prompts per step).

HIVE (selector "hive", frontier_rl/selection/hive.py) narrows each step's prompts by their
zero-variance history (Stage 1) and by the current policy's prompt entropy (Stage 2, the
deployed entropy band k_off=0.25 / k_keep=0.5), then tops up rollout rounds until exactly B
informative groups are available. Its fields are config.selector.hive.* (Table 4 defaults).

  frontier-rl train --config=configs/arith_hive.py --workdir=runs/arith_hive
  frontier-rl train --config=configs/arith_hive.py --workdir=runs/arith_hive_median \
      --config.selector.hive.gate=median

Hardware: 2 CPU cores. Expected: minutes, like arith_grpo, with more rollouts per step (every
top-up round is charged: select/rollouts) and no zero-variance group in any batch
(select/effective_rollouts = B*G); the 4op bucket's Avg@8 rises while 2op/3op hold.
"""

from frontier_rl import config_lib


def get_config(arg: str | None = None):
    c = config_lib.default_config()
    c.rl.loss = "grpo"
    c.selector.name = "hive"
    if arg == "smoke":  # seconds: used by tests
        config_lib.shrink_for_smoke(c)
    elif arg not in (None, ""):
        raise ValueError(f"configs/arith_hive.py: unknown arg {arg!r} (use '' or 'smoke')")
    return config_lib.validate(c)
