"""HIVE's Table 1 as HIVE ran it: DS, Pre-filter, GRESO, PCL and HIVE in HIVE's setting
(DAPO+MATH, B_t = 256 x 8, lr 1e-6, responses <= 2,560, six benchmarks;
frontier_rl/experiment/paper.py), DS, GRESO and HIVE for the same 1,000 steps, Pre-filter and
PCL at GRESO's rollouts under HIVE's two-run protocol, the rollouts each spent reported.

  frontier-rl compare --config=configs/compare_math.py --workdir=runs/compare_math
  frontier-rl compare --config=configs/compare_math.py:qwen2.5-math-7b --workdir=runs/cm7
  frontier-rl compare --config=configs/compare_math.py:smoke --workdir=/tmp/compare_math_smoke
  frontier-rl compare --config=configs/compare_math.py:smoke,two_run --workdir=/tmp/cm_two_run

Args (comma-separated): a model of HIVE's, qwen2.5-math-1.5b (default) | qwen2.5-math-7b |
deepseek-r1-distill-qwen-1.5b | qwen3-4b-base | llama3.2-3b-instruct; optionally a corpus
(openr1_math_30k for HIVE's Open-R1 table); `smoke` (uniform and HIVE on the generated
fixtures, CPU, seconds; used by tests); `smoke,two_run` (GRESO, then PCL's two runs at the
rollouts GRESO spent and the row `pcl` the better of them, on the same fixtures, GRESO the
reference; CPU, about a minute of compute; used by a slow test).

compare.budget = "steps": DS, GRESO and HIVE take compare.steps = 1,000 steps (HIVE App. B.1)
and are evaluated every 50; the report gives each method's six-benchmark average, the rollouts
it spent (every generated response, discarded groups and offline passes included) and the
mechanism counters. Every run starts from the same checkpoint (no warm start) with the same
data order (task.data_seed). `--config.compare.budget=rollouts` reads DS, GRESO and HIVE at
compare.rollout_budget (HIVE's own #Rollout for the model) instead.

HIVE's two-run protocol (HIVE §4.1, App. B.2; frontier_rl/experiment/two_run.py): Pre-filter
and PCL run at a matched rollout budget, which Table 1 shows is GRESO's #Rollout, so
compare.match_rollouts runs each, after GRESO, to the rollouts GRESO spent at the same seed
(their steps follow from it; each is evaluated compare.evals = 20 times over it, as the others
are over their 1,000 steps). PCL runs twice, `pcl` at HIVE's common settings and `pcl_own` at
PCL's own (512 prompts x 16 responses, no std normalisation; k = 4 and tau = 0.5 are the
selector's defaults), and compare.best_of makes the row `pcl` the arm with the higher mean over
seeds of the final six-benchmark average, as HIVE reports the better run; the report shows
both arms and says that the choice, made after the results, favours PCL. Pre-filter runs once,
at HIVE's common settings: its own original settings are not known (neither HIVE nor PCL gives
its criterion, a reconstruction here, selection/prefilter.py), so there is no second run to
choose from. Not reproduced: HIVE takes each run's best checkpoint, the report its final
evaluation; PCL's value model is a host-side stand-in (selection/pcl.py).

Methods (compare.methods; compare.run picks): ds (GRESO's dynamic-sampling script: the same
loss, generation batches of 384), prefilter, greso, pcl, pcl_own, hive; also available: grpo
(uniform), heapa. A method left out of compare.run drops its match and group entries; a group
runs all its arms or none.

Hardware: 8 x A100 per run (HIVE's); the methods x seeds runs go one after another. HIVE's
Table 1, six-benchmark average of the best checkpoint / #Rollout over the run:

  model                  DS           Pre-filter   GRESO        PCL          HIVE
  Qwen2.5-Math-1.5B      48.4 / 7.6M  46.1 / 3.3M  48.1 / 3.3M  45.1 / 3.3M  48.8 / 3.1M
  R1-Distill-Qwen-1.5B   60.9 / 2.4M  49.6 / 1.6M  59.4 / 1.6M  53.3 / 1.6M  60.1 / 1.5M
  Llama-3.2-3B-Instruct  34.1 / 11.4M 24.5 / 5.9M  33.9 / 5.9M  30.4 / 5.9M  34.4 / 4.8M
  Qwen3-4B-Base          53.6 / 3.0M  50.0 / 1.6M  53.8 / 1.6M  49.5 / 1.6M  53.9 / 1.5M
  Qwen2.5-Math-7B        57.8 / 13.1M 50.5 / 6.3M  58.6 / 6.3M  51.4 / 6.3M  59.7 / 3.9M

On the Open-R1 30k subset (openr1_math_30k): Qwen2.5-Math-1.5B DS 46.7 / 3.8M, GRESO 46.8 /
1.6M, HIVE 46.6 / 1.5M; Qwen2.5-Math-7B DS 55.0 / 11.4M, GRESO 55.1 / 3.4M, HIVE 55.3 / 2.5M.
"""

import ml_collections

from frontier_rl import config_lib
from frontier_rl.experiment import launchers, paper

MODELS = ("qwen2.5-math-1.5b", "qwen2.5-math-7b", "deepseek-r1-distill-qwen-1.5b",
          "qwen3-4b-base", "llama3.2-3b-instruct")
# HIVE Table 1: HIVE's own #Rollout per model (the budget with compare.budget='rollouts')
BUDGET = {"qwen2.5-math-1.5b": 3_100_000, "qwen2.5-math-7b": 3_900_000,
          "deepseek-r1-distill-qwen-1.5b": 1_500_000, "qwen3-4b-base": 1_500_000,
          "llama3.2-3b-instruct": 4_800_000}
RUN = "ds,prefilter,greso,pcl,pcl_own,hive"  # HIVE Table 1's columns, PCL's two runs


def get_config(arg: str | None = None):
    model, data, flags = paper.parse_args(arg, "compare_math.py", MODELS, ("two_run",))
    c = paper.base(model, data)
    c.selector.name = "uniform"
    paper.heapa_teacher(c)
    c.compare = ml_collections.ConfigDict()
    # Selection the only difference: every method keeps the protocol's loss and batch.
    c.compare.methods = ml_collections.ConfigDict({
        "grpo": {"selector": {"name": "uniform"}},
        "ds": {"selector": {"name": "ds"}},
        "prefilter": {"selector": {"name": "prefilter"}},
        "greso": {"selector": {"name": "greso"}},
        "pcl": {"selector": {"name": "pcl"}},
        "pcl_own": {"selector": {"name": "pcl"},
                    "rl": {"batch_size": 512, "group_size": 16, "adv_std_norm": False}},
        "hive": {"selector": {"name": "hive"}},
        "heapa": {"selector": {"name": "heapa"}},
    })
    c.compare.run = RUN
    c.compare.seeds = "0"
    # where the runs execute (experiment/launchers.py): "slurm" submits each run as one SLURM
    # job of one 8-GPU node (docs/cluster.md); two days covers a run of about one
    c.compare.launcher = "local"
    c.compare.slurm = launchers.slurm_settings(time_min=2880)
    c.compare.budget = "steps"
    c.compare.steps = c.rl.num_steps  # HIVE App. B.1: 1,000
    c.compare.token_budget = 0  # per run when budget = "tokens"
    c.compare.pflops_budget = 0.0  # per run when budget = "pflops"
    c.compare.rollout_budget = BUDGET[model]
    c.compare.evals = c.compare.steps // c.eval.every  # every 50 steps
    c.compare.metric = "bench_mean"
    c.compare.target = "ds"
    c.compare.rollout_reference = "ds"
    # HIVE's two-run protocol: Pre-filter and PCL at GRESO's #Rollout, PCL's better run reported
    c.compare.match_rollouts = ml_collections.ConfigDict(
        {"prefilter": "greso", "pcl": "greso", "pcl_own": "greso"})
    c.compare.best_of = ml_collections.ConfigDict({"pcl": "pcl,pcl_own"})
    c.compare.settings_notes = ml_collections.ConfigDict({
        "prefilter": "criterion reconstructed (0 < p0 < 1 over 16 samples of the initial "
                     "policy; HIVE gives none); its offline rollouts count toward its total; "
                     "one run at GRESO's rollouts (its own settings are unknown)",
        "pcl": "value model is a host-side shrinkage estimator, not PCL's network; at GRESO's "
               "rollouts, HIVE's common settings (one arm of the best-of row pcl)",
        "pcl_own": "PCL's batch (512 x 16) and advantage (no std normalisation), from its "
                   "summaries; mini-batch count HIVE's; at GRESO's rollouts (one arm of the "
                   "best-of row pcl)",
        "greso": "at most 16 rollout rounds a step (GRESO's loop has no cap)",
    })
    c.selector.ds.gen_batch_size = 384
    c.selector.ds.max_num_gen_batches = 0  # GRESO's loop has no cap
    paper.sources(c, model)
    if "two_run" in flags and "smoke" not in flags:
        raise ValueError("configs/compare_math.py: `two_run` is a smoke variant; use "
                         "`smoke,two_run` (the full config runs the two-run protocol already)")
    if "smoke" in flags:
        paper.smoke(c, "qwen2")
        c.compare.run = "grpo,hive"
        c.compare.steps = 2
        c.compare.evals = 2
        c.compare.rollout_budget = 48
        if "two_run" in flags:  # the protocol's code paths: GRESO first, PCL's arms matched
            c.compare.run = "greso,pcl,pcl_own"
            c.compare.target = c.compare.rollout_reference = "greso"  # DS does not run
            c.compare.methods.pcl_own.rl.batch_size = 8  # PCL's larger batch, at smoke size
            c.compare.methods.pcl_own.rl.group_size = 8
            c.selector.greso.max_rounds = 2  # GRESO's budget, and so the arms', stays small
    return config_lib.validate(c)
