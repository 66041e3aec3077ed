"""HIVE (selector "hive": history-informed Stage 1 + prompt-entropy Stage 2, Table 4 values) on
DAPO+MATH in HIVE's setting: Qwen2.5-Math-1.5B / 7B (or App. B.1's other three models), B_t =
256 prompts x G = 8, AdamW lr 1e-6, no KL, temperature 1.0, responses <= 2,560 tokens (context
4,096), 1,000 steps, evaluated every 50 steps on HIVE's six benchmarks (math500, aime24,
aimo_amc, minerva_math, gaokao2023en, olympiadbench; 4 samples at T = 1.0, top-p 0.7). Settings
and deviations: frontier_rl/experiment/paper.py.

  frontier-rl train --config=configs/math_hive.py:qwen2.5-math-7b --workdir=runs/hive_7b
  frontier-rl train --config=configs/math_hive.py:qwen2.5-math-1.5b,math --workdir=runs/h15
  frontier-rl train --config=configs/math_hive.py:smoke --workdir=/tmp/math_hive_smoke

Args (comma-separated): qwen2.5-math-1.5b (default) | qwen2.5-math-7b |
deepseek-r1-distill-qwen-1.5b | qwen3-4b-base | llama3.2-3b-instruct (HIVE App. B.1's other
models, with the same settings: HIVE states no per-model ones; their micro-batch and sampler
slice sizes are not yet measured); optionally a corpus, dapo_math+math (default, HIVE's) |
openr1_math_30k (HIVE's Open-R1 runs: HIVE 46.6 / 1.5M rollouts on 1.5B, 55.3 / 2.5M on 7B) |
dapo_math | math; `smoke` (CPU, seconds, used by tests). Needs checkpoints/<Hugging Face name>
(e.g. checkpoints/Qwen2.5-Math-1.5B, checkpoints/DeepSeek-R1-Distill-Qwen-1.5B; or
--config.model.path=DIR), data/train/ and data/eval/ (launch/prepare_benchmarks.py).

Hardware: 8 x A100 (HIVE's), mesh fsdp=8. HIVE's numbers (six-benchmark average of the best
checkpoint / #rollouts over 1,000 steps / rollout hours / total hours), HIVE vs the DS baseline
(configs/math_dapo.py): Qwen2.5-Math-1.5B 48.8 / 3.1M / 42.1 / 59.5 vs 48.4 / 7.6M / 77.3 /
94.2; Qwen2.5-Math-7B 59.7 / 3.9M / 40.2 / 85.8 vs 57.8 / 13.1M / 153.7 / 198.4.
"""

from frontier_rl import config_lib
from frontier_rl.experiment import paper

MODELS = ("qwen2.5-math-1.5b", "qwen2.5-math-7b", "deepseek-r1-distill-qwen-1.5b",
          "qwen3-4b-base", "llama3.2-3b-instruct")


def get_config(arg: str | None = None):
    model, data, flags = paper.parse_args(arg, "math_hive.py", MODELS)
    c = paper.base(model, data)
    c.selector.name = "hive"
    paper.sources(c, model)
    if "smoke" in flags:
        paper.smoke(c, "qwen2")
    return config_lib.validate(c)
