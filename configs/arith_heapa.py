"""HeaPA (heap boundary sampling + on-policy augmentation + lineage re-estimation) with GRPO on
the embedded arithmetic task, and its ablations.

  frontier-rl train --config=configs/arith_heapa.py --workdir=runs/arith_heapa
  frontier-rl train --config=configs/arith_heapa.py:childagg --workdir=runs/arith_heapa_child

Args (comma-separated, e.g. `:ps_aug,smoke`):
  ''         HeaPA + PathAgg (selector "heapa", refresh="path")
  childagg   HeaPA + ChildAgg
  heap_only  heap sampling only (no augmentation)
  aug_only   policy augmentation only (uniform draws from the pool)
  ps         Prioritized Sampling (selector "ps")
  ps_aug     Prioritized Sampling + policy augmentation (PS+PA)
  dapo       the DAPO recipe: token-mean loss, overlong shaping, group filter (filter_groups)
  smoke      the same code paths in ~40 s (4 steps; a small archive threshold so recycling
             and the lineage refresh run)

Augmentation on arith: the policy continues a truncated parent ("73+5+" or "73+5+218+") and
the programmatic teacher (tasks.arith.solve) answers; see selection/heapa/augment.py. The
teacher runs inline here (teacher_workers=0): it answers in microseconds and the run stays
bit-reproducible; set selector.heapa.teacher_workers=2 for the asynchronous path.

Hardware: 2 CPU cores. Expected: the warm start and 200 RL steps take minutes, as
configs/arith_grpo.py; select/* metrics show the cold queue draining, the boundary moving
up as the policy learns, and ~half of the policy's candidates accepted (rejections by reason).
"""

from frontier_rl import config_lib

VARIANTS = ("childagg", "heap_only", "aug_only", "ps", "ps_aug", "dapo", "smoke")


def get_config(arg: str | None = None):
    args = [a for a in (arg or "").split(",") if a]
    unknown = [a for a in args if a not in VARIANTS]
    if unknown:
        raise ValueError(f"configs/arith_heapa.py: unknown arg {unknown} (use any of {VARIANTS})")
    c = config_lib.default_config()
    c.rl.loss = "grpo"
    c.selector.name = "ps" if {"ps", "ps_aug"} & set(args) else "heapa"
    config_lib.augment_on_arith(c)
    for name in ("heapa", "ps"):
        c.selector[name].capacity = 30000  # N (code default): seeds + children overflow it late
    if "childagg" in args:
        c.selector.heapa.refresh = "child"
    if "heap_only" in args:
        c.selector.heapa.augment = False
    if "aug_only" in args:
        c.selector.heapa.sampling = "uniform"
    if "ps_aug" in args:
        c.selector.ps.augment = True
    if "dapo" in args:
        c.rl.loss = "dapo"
        c.rl.overlong_buffer = 2
        c.selector[c.selector.name].filter_groups = True
        c.selector[c.selector.name].max_rounds = 4
    if "smoke" in args:
        config_lib.shrink_for_smoke(c)
        for name in ("heapa", "ps"):
            c.selector[name].recycle_archive_max = 16
            c.selector[name].capacity = 2048
    return config_lib.validate(c)
