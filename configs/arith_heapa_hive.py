"""HeaPA-HIVE (HeaPA's pool and boundary candidates, verified by HIVE's Stage-2 prompt-entropy
band before rollout) with GRPO on the embedded arithmetic task.

  frontier-rl train --config=configs/arith_heapa_hive.py --workdir=runs/arith_heapa_hive

Args (comma-separated, e.g. `:median,smoke`):
  ''         2B candidates per B prompts (overdraw = 1 / k_keep), band k_off=0.25, k_keep=0.5,
             cold records gated too; augmentation, teacher and PathAgg as configs/arith_heapa.py
  heap_only  no augmentation (compare with configs/arith_heapa.py:heap_only)
  warm_only  gate only the boundary candidates (cold records drawn as HeaPA draws them)
  median     the median gate (keep V >= median) instead of the band
  dapo       the DAPO recipe: token-mean loss, overlong shaping, group filter (filter_groups)
  smoke      the same code paths in ~40 s (4 steps; a small archive threshold so recycling
             and the lineage refresh run)

Every step rolls out exactly rl.batch_size x rl.group_size responses, as HeaPA does, so a run
and configs/arith_heapa.py spend the same rollout budget per step; the gate adds one prompt-
entropy pass over the 2B candidates (counted in FLOPs). Selector fields:
config.selector.heapa_hive.* (selection/heapa_hive.py).

Hardware: 2 CPU cores. Expected: minutes, as configs/arith_heapa.py; select/gate_* metrics show
half of each step's candidates rejected and returned to the pool, and the band's edges on the
prompt entropy (select/gate_v_lo, select/gate_v_hi) moving as the policy learns.
"""

from frontier_rl import config_lib

VARIANTS = ("heap_only", "warm_only", "median", "dapo", "smoke")


def get_config(arg: str | None = None):
    args = [a for a in (arg or "").split(",") if a]
    unknown = [a for a in args if a not in VARIANTS]
    if unknown:
        raise ValueError(f"configs/arith_heapa_hive.py: unknown arg {unknown} "
                         f"(use any of {VARIANTS})")
    c = config_lib.default_config()
    c.rl.loss = "grpo"
    c.selector.name = "heapa_hive"
    config_lib.augment_on_arith(c)
    s = c.selector.heapa_hive
    s.capacity = 30000  # N, as configs/arith_heapa.py
    if "heap_only" in args:
        s.augment = False
    if "warm_only" in args:
        s.gate_cold = False
    if "median" in args:
        s.gate = "median"
    if "dapo" in args:
        c.rl.loss = "dapo"
        c.rl.overlong_buffer = 2
        s.filter_groups = True
        s.max_rounds = 4
    if "smoke" in args:
        config_lib.shrink_for_smoke(c)
        s.recycle_archive_max = 16
        s.capacity = 2048
    return config_lib.validate(c)
