"""Matched-budget comparison on real math: HIVE vs HeaPA vs uniform GRPO vs DAPO dynamic
sampling (DS), each to the same rollout budget, in HIVE's setting (Qwen2.5-Math, DAPO+MATH,
B_t = 256 x 8, lr 1e-6, responses <= 2,560, six benchmarks; frontier_rl/experiment/paper.py).

  frontier-rl compare --config=configs/compare_math.py --workdir=runs/compare_math
  frontier-rl compare --config=configs/compare_math.py:qwen2.5-math-7b --workdir=runs/cm7
  frontier-rl compare --config=configs/compare_math.py:smoke --workdir=/tmp/compare_math_smoke

Args (comma-separated): qwen2.5-math-1.5b (default) | qwen2.5-math-7b; optionally a corpus;
`smoke` (uniform and HIVE on the generated fixtures, CPU, seconds; used by tests).

The budget is HIVE's own reported #Rollout (3.1M for 1.5B, 3.9M for 7B): HIVE runs about its
1,000 steps and every other method is read at the same cost; the report gives each method's
best six-benchmark average, rollouts- and PFLOPs-to-target (target: DS's best, the baseline
HIVE compares with) and the mechanism counters. Every run starts from the same checkpoint
(no warm start) with the same data order (task.data_seed).

Hardware: 8 x A100 per run (HIVE's); four methods x seeds runs, one after another. HIVE's
numbers at its own budgets: 1.5B HIVE 48.8 / DS 48.4 / GRESO 48.1 / PCL 45.1 / Pre-filter 46.1;
7B HIVE 59.7 / DS 57.8 / GRESO 58.6.
"""

import ml_collections

from frontier_rl import config_lib
from frontier_rl.experiment import paper

MODELS = ("qwen2.5-math-1.5b", "qwen2.5-math-7b")
BUDGET = {"qwen2.5-math-1.5b": 3_100_000, "qwen2.5-math-7b": 3_900_000}


def get_config(arg: str | None = None):
    model, data, flags = paper.parse_args(arg, "compare_math.py", MODELS)
    c = paper.base(model, data)
    c.selector.name = "uniform"
    paper.heapa_teacher(c)
    c.compare = ml_collections.ConfigDict()
    # HIVE's DS is GRESO's dynamic-sampling script: the loss of every other method.
    c.compare.methods = ml_collections.ConfigDict({
        "grpo": {"selector": {"name": "uniform"}},
        "ds": {"selector": {"name": "ds"}},
        "hive": {"selector": {"name": "hive"}},
        "heapa": {"selector": {"name": "heapa"}},
    })
    c.compare.run = "grpo,ds,hive,heapa"
    c.compare.seeds = "0"
    c.compare.rollout_budget = BUDGET[model]
    c.compare.evals = 20  # every 155k (1.5B) rollouts, about HIVE's every 50 steps
    c.compare.metric = "bench_mean"
    c.compare.target = "ds"
    c.compare.rollout_reference = "ds"
    c.selector.ds.gen_batch_size = 384
    c.selector.ds.max_num_gen_batches = 0  # GRESO's loop has no cap
    paper.sources(c, model)
    if "smoke" in flags:
        paper.smoke(c, "qwen2")
        c.compare.run = "grpo,hive"
        c.compare.rollout_budget = 48
        c.compare.evals = 2
    return config_lib.validate(c)
