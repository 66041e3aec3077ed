"""Matched-budget comparison on a reasoning-gym dataset: uniform GRPO and HIVE (add DS, GRESO
or the heaps with `--config.compare.run`), each to the same rollout budget from each seed's own
warm start, over three seeds, verdicts on the frontier bucket num_terms=5.

  frontier-rl compare --config=configs/compare_gym.py --workdir=runs/compare_gym
  frontier-rl compare --config=configs/compare_gym.py:basic_arithmetic,smoke --workdir=/tmp/x
  frontier-rl compare --config=configs/compare_gym.py --workdir=runs/compare_gym \
      --config.compare.run=uniform,ds,greso,hive,heap_only --config.compare.seeds=0,1,2

Args (comma-separated): a dataset from PRESETS (default basic_arithmetic), `controls` (uniform
and the two control arms, `oracle` and `oracle_negative`, see configs/compare_arith.py: the
report opens with the testbed's selection headroom and harm), and `smoke` (the same code paths
in seconds, used by tests/test_compare_gym.py). Another reasoning-gym dataset
needs a preset: its difficulty knobs (create_dataset kwargs), the metadata field that names its
buckets and the buckets the warm start teaches. HeaPA's augmentation parses and solves arith
prompts only, so the HeaPA family runs here as its heaps alone (`heap_only`, `ps`).

The task (basic_arithmetic): reasoning-gym's `basic_arithmetic` with 3-6 one-digit terms (0-10)
joined by + and -, no parentheses, e.g. "Calculate 9 - 2 + 6 + 6 + 4." -> 23, bucketed by the
item's `num_terms` ("num_terms=3" .. "num_terms=6"). The policy is the embedded 2-layer d=64
char-level model (125k parameters, vocab 32); the warm start teaches num_terms=3,4 in the
format the gym verifier scores correct ("<answer>23</answer>", then EOS), with a 10% dose of
num_terms=5 items in every batch (warmstart.frontier_dose); RL's frontier bucket, and
the pre-registered metric, is num_terms=5.

Experiment settings, and why (no method's algorithm is changed):
- One-digit terms with + and -: the answer has at most two digits, so the tiny model can write
  it most-significant digit first, and difficulty grows smoothly with the number of terms. No
  two-term bucket: there are only 242 two-term sums, all of them in the training pool, so the
  eval set (disjoint from training by text) would hold none.
- prompt_template="{question}": reasoning-gym's 60-character instruction about the answer tags
  is dropped (every character is a token here); the warm start teaches the tags instead.
- 4,000 training items (3,902 after removing repeats) against 38,400 rollouts: uniform passes
  its pool 1.2 times, so the history-based mechanisms (HIVE's Stage 1) act; at 25,600 rollouts
  uniform never finished a pass and the report flagged `pool_passes` as never exercised.
  800 eval items (769 after removing those also in training, 194 of them in num_terms=5):
  the verdicts' bucket has 194 prompts here (a reasoning-gym eval set is drawn as a whole, not
  per bucket), so its intervals are wider than the arith comparison's 1,024.
- The warm start draws fresh items (its own seed range of the same generator, none of them a
  pool or eval question) for num_terms=3,4 and for the num_terms=5 dose: taught on the pool's
  1,637 num_terms=3,4 items it memorised them (training loss 0.05 at 20% held-out exact match)
  instead of learning to add. With fresh items, seeds 0-9 all reached the regime on their
  first attempt (one core each: 2,400 / 1,600 / 1,200 / 2,000 / 2,200 / 2,400 / 1,700 /
  2,800 / 2,100 / 2,300 steps, held-out easy 80.1 / 80.9 / 80.9 / 81.6 / 82.8 / 83.2 / 82.8
  / 82.4 / 82.8 / 86.7%, num_terms=5 32.8 / 64.5 / 68.8 / 52.7 / 48.0 / 47.3 / 58.2 / 18.4 /
  57.8 / 48.4%). On seeds 1 and 2 the
  frontier bucket starts near 60% (Avg@8 at step 0: 62.8 and 58.9), so there num_terms=5 is
  barely a frontier; num_terms=6 (27.8 and 13.5) is closer to one.
- Warm start per seed until 80% greedy exact match on 256 held-out num_terms=3,4 items and at
  least 10% on held-out num_terms=5 items (config_lib's targets).
- rollout.max_new_tokens=24: the longest response, "<answer>-40</answer>", is 20 characters.
- Evaluation: 6 evaluations per run plus step 0, Avg@8 at T=0.7, top-p 0.7, no greedy pass.

Controls (`:controls`: the embedded arith testbed's design, B = 32, 150 steps, lr 3e-4, one
shared warm start, the controls measured on their own rollouts; seeds 0-2, 75 minutes on 2
cores shared with other jobs): headroom +9.7 [+4.7, +14.7] points on num_terms=5 (better),
harm +1.8 [-4.1, +7.7] (not distinguishable: uniform itself does not improve num_terms=5 in
150 steps at this rate, 35.0 -> 33.2, so the exact floor cannot be below it).

Measured (`frontier-rl compare --config=configs/compare_gym.py`, a clean checkout, one core,
39 minutes with the three warm starts): uniform 62.5, HIVE 61.5 Avg@8 on num_terms=5, HIVE
minus uniform -1.1 [-5.7, +3.6] points (not distinguishable; MDD 5.8) with 45 +- 6 steps
against uniform's 75; HIVE's `topup_rounds` stayed at zero on seed 2 (the report flags it).

Hardware: 2 CPU cores; the measured time is in the README.
"""

import ml_collections

from frontier_rl import config_lib
from frontier_rl.experiment import compare, launchers

# dataset -> (create_dataset kwargs, bucket metadata field, warm-start buckets)
PRESETS = {
    "basic_arithmetic": dict(
        dataset_kwargs=dict(min_terms=3, max_terms=6, min_digits=1, max_digits=1,
                            operators=("+", "-"), allow_parentheses=False),
        bucket_key="num_terms",
        warm="num_terms=3,num_terms=4",
    ),
}


# The controls of configs/compare_arith.py, measured on their own training rollouts: the
# positive control fills B from 4 B candidates, the negative one trains only on groups of zero
# reward variance (selection/oracle.py).
ORACLE = {"measure": "rollouts", "fill": True, "candidates": 4}
NEGATIVE = {"measure": "rollouts", "mode": "extremes", "candidates": 2, "max_rounds": 8}


def _methods() -> ml_collections.ConfigDict:
    # HeaPA's augmentation parses and solves arith prompts only; its heaps alone run anywhere.
    return ml_collections.ConfigDict({
        "uniform": {"selector": {"name": "uniform"}},
        "ds": {"selector": {"name": "ds"}},
        "greso": {"selector": {"name": "greso"}},
        "hive": {"selector": {"name": "hive"}},
        "heap_only": {"selector": {"name": "heapa", "heapa": {"augment": False}}},
        "ps": {"selector": {"name": "ps"}},
        # controls, not methods (selection/oracle.py; as configs/compare_arith.py's)
        "oracle": {"selector": {"name": "oracle", "oracle": dict(ORACLE)}},
        "oracle_negative": {"selector": {"name": "oracle", "oracle": dict(NEGATIVE)}},
    })


def get_config(arg: str | None = None):
    args = [a for a in (arg or "").split(",") if a]
    smoke, controls = "smoke" in args, "controls" in args
    names = [a for a in args if a not in ("smoke", "controls")] or ["basic_arithmetic"]
    if len(names) > 1 or names[0] not in PRESETS:
        raise ValueError(f"configs/compare_gym.py: unknown arg {arg!r} (use one dataset of "
                         f"{sorted(PRESETS)}, and/or 'controls', 'smoke')")
    dataset = names[0]
    p = PRESETS[dataset]
    c = config_lib.default_config()
    c.task = ml_collections.ConfigDict(dict(
        name=f"gym:{dataset}", train_size=4000, eval_size=800, data_seed=0,
        dataset_kwargs=p["dataset_kwargs"], bucket_key=p["bucket_key"],
        prompt_template="{question}", response_template="<answer>{answer}</answer>"))
    c.rl.loss = "grpo"
    c.warmstart.buckets = p["warm"]
    c.rollout.max_new_tokens = 24
    c.eval.greedy = False
    c.log.tensorboard = False

    c.compare = ml_collections.ConfigDict()
    c.compare.methods = _methods()  # name -> delta over the base config
    c.compare.run = "uniform,hive"  # methods to run, in this order (add ds, greso, heap_only..)
    c.compare.seeds = "0,1,2"
    c.compare.budget = "rollouts"  # matched rollouts; "steps": matched updates (compare.steps)
    c.compare.rollout_budget = 38400  # 75 uniform steps of 64 x 8
    c.compare.steps = 0  # steps per run when budget = "steps"
    # generated response tokens / measured PFLOPs per run when budget = "tokens" / "pflops":
    # the same comparison rerun at another budget, from the same warm-start cache
    c.compare.token_budget = 0
    c.compare.pflops_budget = 0.0
    c.compare.evals = 6  # held-out evaluations per run, evenly spaced (+ step 0)
    c.compare.metric = "num_terms=5"  # the pre-registered primary (frontier) bucket
    c.compare.target = "uniform"
    c.compare.target_value = 0.0  # > 0: a fixed rollouts-to-target target (points on metric)
    c.compare.target_margin = 0.0  # target = compare.target's final accuracy minus this
    # HIVE vs DS / GRESO accuracy is "equivalent" when the 90% paired interval lies in
    # +-this many points (two one-sided tests, stats.equivalence); fixed before the runs.
    c.compare.equivalence_margin = 1.5
    # The margin's source and the pre-registered effects (the only ones power is computed at,
    # never the observed effect): the comparison's defaults, HeaPA's smallest reported gain.
    c.compare.equivalence_margin_source = compare.DEFAULTS["equivalence_margin_source"]
    c.compare.effect_sizes = ml_collections.ConfigDict(compare.DEFAULTS["effect_sizes"])
    c.compare.confirmatory = "all"  # Holm over every method's primary verdict and the claims
    c.compare.rollout_reference = "ds"
    c.compare.shared_start = False  # False: one warm start per seed; True: one for all seeds
    c.compare.workers = 1  # runs at once, each in its own process (experiment/workers.py)
    # where the runs execute (experiment/launchers.py): "local", or "slurm" (docs/cluster.md)
    c.compare.launcher = "local"
    c.compare.slurm = launchers.slurm_settings(gpus_per_node=0, cpus_per_task=2, time_min=60)
    c.compare.ablations = ml_collections.ConfigDict()  # name -> (method, ablation, question)
    c.compare.settings_notes = ml_collections.ConfigDict()  # method -> why non-default settings

    if controls:  # what this testbed can detect: headroom and harm (the report opens with them)
        # the arith testbed's design: B = 32 (150 uniform steps of the same 38,400 rollouts),
        # learning rate 3e-4, one shared warm start, two runs at once
        c.compare.run = "uniform,oracle,oracle_negative"
        c.rl.batch_size = 32
        c.rl.learning_rate = 3e-4
        c.compare.shared_start = True
        c.compare.workers = 2
    if smoke:
        c.task.train_size = 200
        c.task.eval_size = 24
        c.warmstart.steps = 20
        c.warmstart.batch_size = 32
        c.warmstart.target_acc = 0.0
        c.rl.batch_size = 8
        c.eval.k = 2
        c.checkpoint.every = 2
        c.compare.run = "uniform,hive"
        c.compare.seeds = "0"
        c.compare.rollout_budget = 96
        c.compare.evals = 2
        c.compare.metric = "all"
        c.log.progress = False
    return config_lib.validate(c)
