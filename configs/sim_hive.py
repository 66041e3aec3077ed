"""HIVE on the synthetic learner: 10^5 prompts x 1000 steps (B = 256, G = 8), no model needed.

  frontier-rl sim --config=configs/sim_hive.py --workdir=runs/sim_hive
  frontier-rl sim --config=configs/sim_hive.py --config.selector.name=uniform  # the baseline

The policy is the model of frontier_rl/sim/learner.py (latent difficulty per prompt, a skill
that grows only from groups with reward variance, per-prompt memorisation, prompt entropy
correlated with p(1 - p)); HIVE's code is the trainer's, unchanged. Writes
DIR/sim_results.json (curves per eval point: rollouts, exact held-out accuracy per band,
zero-variance easy / hard ratios, effective rollouts, selector host time).

Args: '' (the run above) or `smoke` (10^4 prompts x 50 steps, a second).

Hardware: 1 CPU core. Expected: about 6 s (HIVE's own host time ~3 ms/step is half of it);
prints "100,000 prompts x 1000 steps: 5.5 s (182.7 steps/s)". Held-out mean accuracy
0.42 -> ~0.93 in 3.3M rollouts (uniform, with --config.selector.name=uniform: 0.73 in 2.05M
rollouts, 2.2 s).

Fields: `config.sim.*` are documented in frontier_rl/sim/run.py (RUN_DEFAULTS: the run) and
frontier_rl/sim/learner.py (MODEL_DEFAULTS: the learner); HIVE's in selection/hive.py.
"""

from frontier_rl import config_lib
from frontier_rl.sim import run

VARIANTS = ("smoke",)


def get_config(arg: str | None = None):
    args = [a for a in (arg or "").split(",") if a]
    unknown = [a for a in args if a not in VARIANTS]
    if unknown:
        raise ValueError(f"configs/sim_hive.py: unknown arg {unknown} (use any of {VARIANTS})")
    c = run.base_config()
    c.selector.name = "hive"
    c.sim.num_prompts = 100_000
    c.sim.steps = 1000
    c.sim.eval_every = 25
    c.sim.progress_every = 100
    if "smoke" in args:
        c.sim.num_prompts = 10_000
        c.sim.steps = 50
        c.sim.eval_every = 10
        c.sim.progress_every = 0
    return run.validate_sim(config_lib.validate(c))
