"""HeaPA (heap boundary sampling over a bounded evolving pool, on-policy augmentation answered
by an asynchronous teacher, PathAgg lineage re-estimation) on DAPO-Math-17k, in the setting of
HeaPA's Qwen3 scaling table (Table 2): B = 512 x n = 16, PPO mini-batch 64, lr 1e-6, weight
decay 0.1, KL 1e-6, responses <= 20,480, 500 steps, Avg@16 (T = 0.7, top-p 0.7, top-k 50) on
seven benchmarks every 10 steps. Settings and deviations: frontier_rl/experiment/paper.py; the
selector's fields keep selector.heapa's defaults: N = 1,000,000 and alpha = 0.5 (the released
code's), the archive threshold A_max = 8,192 (ours: no source gives one; docs/methods.md).

  frontier-rl train --config=configs/math_heapa.py:qwen3-4b --workdir=runs/heapa_qwen3_4b
  frontier-rl train --config=configs/math_heapa.py:qwen3-8b,dapo --workdir=runs/heapa_dapo_8b
  frontier-rl train --config=configs/math_heapa.py:qwen2.5-7b-instruct --workdir=runs/t1_7b
  frontier-rl train --config=configs/math_heapa.py:smoke --workdir=/tmp/math_heapa_smoke

Args (comma-separated): a model, qwen3-0.6b | qwen3-1.7b | qwen3-4b (default) | qwen3-8b |
qwen3-4b-instruct-2507 (the model HeaPA's released Qwen3 script trains; non-thinking, its chat
template has no thinking switch and none is passed) | qwen2.5-7b-instruct (Table 1, with its
released 7B recipe: lr 1.5e-6, 20 warm-up steps, PPO mini-batch 128, 1,000 steps; the two
models' micro-batch and sampler slice sizes are not yet measured), or a model of HIVE's,
qwen2.5-math-1.5b / 7b | deepseek-r1-distill-qwen-1.5b | qwen3-4b-base | llama3.2-3b-instruct
(HIVE's protocol, for the matched comparison), or llama3.2-1b-instruct (arXiv 2608.17941's
NuminaMath protocol, configs/compare_numina.py); optionally a corpus (default dapo_math_14k, the
released script's; dapo_math for the paper's full 17k, openr1_math_heapa for Table 1's OpenR1);
`script_val` (the released scripts' in-run validation: AIME24, 32 samples at T 1.0, every 10
steps, every 1,000 for Qwen2.5-7B-Instruct; then `frontier-rl eval` with the config without the
flag gives the seven-benchmark Avg@16);
`childagg` (ChildAgg instead of PathAgg), `heap_only` (no augmentation), `dapo` (HeaPA's DAPO
recipe: token-mean, no KL, group filter; the overlong buffer is in both recipes; under HIVE's
protocol, whose loss is token-mean already, the group filter alone); `smoke` (CPU, seconds;
the teacher is a service, so the smoke runs the heaps, recycling and lineage without
augmentation).

The teacher: an OpenAI-compatible endpoint at selector.heapa.teacher_url (placeholder
http://127.0.0.1:30000/v1, e.g. SGLang or vLLM serving the teacher; HeaPA used an API model),
model selector.heapa.teacher_model; its calls run in selector.heapa.teacher_workers threads.

Hardware: 8 x H200 (HeaPA does not state its own). HeaPA's numbers: Avg@16 gains over GRPO
(configs/math_grpo.py) of +1.8 (Qwen3-0.6B), +2.0 (1.7B), +7.2 (4B), +4.9 (8B); on
Qwen2.5-7B-Instruct 51.1 vs 46.5 (GRPO recipe) and 49.3 vs 46.1 (DAPO recipe); +2.1% step time
and teacher service time ~13.1% of training time.
"""

from frontier_rl import config_lib
from frontier_rl.experiment import paper

MODELS = ("qwen3-4b", "qwen3-0.6b", "qwen3-1.7b", "qwen3-8b", "qwen3-4b-instruct-2507",
          "qwen2.5-7b-instruct", "qwen2.5-math-1.5b", "qwen2.5-math-7b",
          "deepseek-r1-distill-qwen-1.5b", "qwen3-4b-base", "llama3.2-3b-instruct",
          "llama3.2-1b-instruct")
FLAGS = ("childagg", "heap_only", "dapo", "script_val")


def get_config(arg: str | None = None):
    model, data, flags = paper.parse_args(arg, "math_heapa.py", MODELS, FLAGS)
    c = paper.base(model, data)
    c.selector.name = "heapa"
    paper.heapa_teacher(c)
    if "childagg" in flags:
        c.selector.heapa.refresh = "child"
    if "heap_only" in flags:
        c.selector.heapa.augment = False
    if "dapo" in flags:
        paper.to_dapo(c, paper.MODELS[model][2], model)
        c.selector.name = "heapa"
        c.selector.heapa.filter_groups = True
        c.selector.heapa.max_rounds = 20
    if "script_val" in flags:
        paper.script_val(c, model)
    paper.sources(c, model, flags)
    if "smoke" in flags:
        paper.smoke(c, "qwen3" if model.startswith("qwen3") else "qwen2")
    return config_lib.validate(c)
