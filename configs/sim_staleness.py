"""Every selector under staleness, on the synthetic learner: the controls study of
configs/sim_controls.py with all the methods, run once per rl.staleness.

  frontier-rl sim --config=configs/sim_staleness.py --workdir=runs/sim_staleness_k0
  frontier-rl sim --config=configs/sim_staleness.py --workdir=runs/sim_staleness_k1 \\
      --config.rl.staleness=1
  frontier-rl sim --config=configs/sim_staleness.py --workdir=runs/sim_staleness_k2 \\
      --config.rl.staleness=2

Each study runs the arms below for the same steps on the same seeds (the seed fixes the pool,
the held-out set and the learner's start), so an arm at k and the same arm at k = 0 pair by
seed. With rl.staleness = k every build, its prompt-entropy pass, screening and feedback read a
snapshot of the learner k updates old, and the update applies to the current one
(sim/run.py, the trainer's pipeline, rollout/pipeline.py); the learner's update has no
importance correction, as the trainer's has none with rl.tis_cap = 0.

Pre-registered (fixed here before the runs): the metric is the final exact held-out mean
accuracy in points at matched steps (`sim.steps`), the reference is uniform, the controls are
`oracle` (positive) and `oracle_negative` (negative) as in configs/sim_controls.py; the family
of methods is every arm but the reference and the controls; a method's effect is its paired
difference to uniform at each k, and its change from k = 0 the paired difference between
studies. The update rule is the one fitted to the trainer (ADAM, configs/sim_controls.py): a
model, whose response to staleness was not fitted to any trainer run. docs/results.md sets the
testbed's k = 1 comparison (uniform, oracle, HIVE, HeaPA) beside it as the check.

Args: '' (2 x 10^4 prompts x 300 steps, B = 256, G = 8, seeds 0-2, 10 arms: 30 runs a study,
one worker) or `smoke` (2,000 prompts x 30 steps, B = 32, 2 seeds: seconds).

Fields: `config.controls.*` in frontier_rl/sim/controls.py; `config.sim.*` in
frontier_rl/sim/run.py and frontier_rl/sim/learner.py; each selector's in selection/.
"""

import importlib.util
import os

from frontier_rl.sim import controls

VARIANTS = ("smoke",)
METHODS = ("hive", "heapa", "greso", "ds", "speed", "pcl", "mopps")


def _sim_controls():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sim_controls.py")
    spec = importlib.util.spec_from_file_location("sim_controls", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def get_config(arg: str | None = None):
    args = [a for a in (arg or "").split(",") if a]
    unknown = [a for a in args if a not in VARIANTS]
    if unknown:
        raise ValueError(f"configs/sim_staleness.py: unknown arg {unknown} (use any of "
                         f"{VARIANTS})")
    c = _sim_controls().get_config("smoke" if "smoke" in args else "")
    c.sim.num_prompts, c.sim.steps, c.sim.eval_every = 20_000, 300, 25
    c.controls.seeds, c.controls.workers = 3, 1
    if "smoke" in args:
        c.sim.num_prompts, c.sim.steps, c.sim.eval_every = 2000, 30, 10
        c.controls.seeds = 2
    for m in METHODS:
        c.controls.arms[m] = {"name": m}
    c.controls.run = ",".join(("uniform", "oracle", "oracle_negative") + METHODS)
    c.controls.method, c.controls.comparator = "hive", "ds"
    return controls.validate(c)
