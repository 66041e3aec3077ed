"""Matched-budget comparison on the embedded arithmetic task: uniform GRPO, DAPO dynamic
sampling (DS), HIVE and HeaPA, each to the same rollout budget from the same warm start.

  frontier-rl compare --config=configs/compare_arith.py --workdir=runs/compare
  frontier-rl compare --config=configs/compare_arith.py:claims --workdir=runs/compare_claims
  frontier-rl compare --config=configs/compare_arith.py --workdir=runs/compare \
      --config.compare.run=uniform,hive --config.compare.seeds=0,1,2

Args:
  ''       uniform, ds, hive, heapa; seed 0; 76,800 rollouts each (150 uniform steps)
  claims   every method the report's claims table needs (adds greso, heapa_childagg, ps_aug and
           the composite heapa_hive); seeds 0,1,2
  full     every registered method; seeds 0,1,2
  smoke    two methods on the smoke-sized task, in seconds (used by tests)

Each method is a delta merged over the base config (configs/arith_grpo.py's GRPO run); the base
also carries the arith settings of HeaPA's augmentation and teacher, as configs/arith_heapa.py.
HeaPA runs with its children entering the heaps (`aug_entry="heap"`, the released code) and at
most half of a batch from the cold queue: with the paper's cold-queue entry the 20,000 seed
prompts are not all scored within this budget, so no augmented child would ever be trained on.

Hardware: 2 CPU cores. Expected: the warm start (2 min) once, then four runs of 1.3-2.5 min
each, ending with the report's main table printed: `launch/run.sh` from a fresh clone took
10m29s including installation (runs 279 s incl. the warm start, 79 s, 85 s, 130 s). Writes
DIR/results.json, DIR/report.md and DIR/plots/*.png; rerunning after a kill skips finished runs
and resumes the interrupted one. `:claims` (24 runs) takes about 50 minutes.
"""

import ml_collections

from frontier_rl import config_lib, selection

ARGS = ("", "claims", "full", "smoke")


def _methods() -> ml_collections.ConfigDict:
    m = {
        "uniform": {"selector": {"name": "uniform"}},
        "ds": {"selector": {"name": "ds"}},
        "greso": {"selector": {"name": "greso"}},
        "pcl": {"selector": {"name": "pcl"}},
        "prefilter": {"selector": {"name": "prefilter"}},
        "reinforce_ada": {"selector": {"name": "reinforce_ada"}},
        "hive": {"selector": {"name": "hive"}},
        "heapa": {"selector": {"name": "heapa"}},
        "heapa_childagg": {"selector": {"name": "heapa", "heapa": {"refresh": "child"}}},
        "heap_only": {"selector": {"name": "heapa", "heapa": {"augment": False}}},
        "ps": {"selector": {"name": "ps"}},
        "ps_aug": {"selector": {"name": "ps", "ps": {"augment": True}}},
    }
    if "heapa_hive" in selection.names():
        m["heapa_hive"] = {"selector": {"name": "heapa_hive"}}
    return ml_collections.ConfigDict(m)


def get_config(arg: str | None = None):
    arg = arg or ""
    if arg not in ARGS:
        raise ValueError(f"configs/compare_arith.py: unknown arg {arg!r} (use one of {ARGS})")
    c = config_lib.default_config()
    c.rl.loss = "grpo"
    with c.task.unlocked():
        c.task.data_seed = 0  # one task for every seed
    c.warmstart.seed = 0  # one warm start for every seed
    config_lib.augment_on_arith(c)
    for name in ("heapa", "ps", "heapa_hive"):
        if name not in c.selector:
            continue
        s = c.selector[name]
        s.capacity = 30000
        if name != "ps":
            s.aug_entry = "heap"
            s.max_cold_frac = 0.5
    c.log.tensorboard = False

    c.compare = ml_collections.ConfigDict()
    c.compare.methods = _methods()  # name -> delta over the base config
    c.compare.run = "uniform,ds,hive,heapa"  # methods to run, in this order
    c.compare.seeds = "0"
    c.compare.rollout_budget = 76800  # rollouts per run (every generated response counts)
    c.compare.evals = 8  # held-out evaluations per run, evenly spaced in rollouts (+ step 0)
    c.compare.metric = "all"  # the Avg@k bucket compared: "all" (every eval prompt) or "4op"...
    c.compare.target = "uniform"  # target = this method's best held-out Avg@k (per seed)
    c.compare.rollout_reference = "ds"  # rollouts-to-target ratios are against this method

    if arg == "claims":
        names = ["uniform", "ds", "greso", "hive", "heapa", "heapa_childagg", "ps_aug"]
        if "heapa_hive" in c.compare.methods:
            names.append("heapa_hive")
        c.compare.run = ",".join(names)
        c.compare.seeds = "0,1,2"
    elif arg == "full":
        c.compare.run = ",".join(c.compare.methods.keys())
        c.compare.seeds = "0,1,2"
    elif arg == "smoke":
        config_lib.shrink_for_smoke(c)
        for name in ("heapa", "ps", "heapa_hive"):
            if name in c.selector:
                c.selector[name].capacity = 2048
        c.compare.run = "uniform,hive"
        c.compare.rollout_budget = 96
        c.compare.evals = 2
        c.log.progress = False
    return config_lib.validate(c)
