"""GRPO with uniform prompt selection on real math corpora, in the papers' settings: the
baseline both papers improve on (HeaPA Table 1-2 "original GRPO"; under HIVE's protocol, the
uniform counterpart of its DS baseline). Settings and deviations: frontier_rl/experiment/paper.py.

  frontier-rl train --config=configs/math_grpo.py:qwen3-4b --workdir=runs/math_grpo_qwen3_4b
  frontier-rl train --config=configs/math_grpo.py:qwen2.5-math-1.5b --workdir=runs/grpo_1.5b
  frontier-rl train --config=configs/math_grpo.py:smoke --workdir=/tmp/math_grpo_smoke

Args (comma-separated): a model, qwen2.5-math-1.5b (default) | qwen2.5-math-7b (HIVE's
protocol: B = 256 x 8, responses <= 2,560, 1,000 steps, six benchmarks) | qwen3-0.6b |
qwen3-1.7b | qwen3-4b | qwen3-8b (HeaPA's scaling table: B = 512 x 16, responses <= 20,480,
500 steps, Avg@16 on seven benchmarks); optionally a corpus, dapo_math | math | dapo_math+math
| dapo_math_14k | openr1_math_30k | openr1_math_heapa (default: DAPO+MATH for HIVE, HeaPA's
released script's 14k subset of DAPO-Math-17k for HeaPA); `script_val` (HeaPA's models: validate
in the run as its released scripts do, AIME24 x 32 samples at T 1.0 every 10 steps, every 1,000
for Qwen2.5-7B-Instruct; the seven-benchmark Avg@16 then comes from `frontier-rl eval` with the
config without the flag); `smoke` (the same code
paths on CPU in seconds with a tiny random model of the family, used by the tests).

Before a real run: the checkpoint in checkpoints/<Hugging Face name> (e.g.
checkpoints/Qwen3-4B; or --config.model.path=DIR), the corpus in data/train/ and the benchmark
files in data/eval/ (launch/prepare_benchmarks.py). `frontier-rl eval --config=<this>
--workdir=DIR --step=N` re-evaluates a checkpoint.

Hardware: 8 x H200 for Qwen3 (HeaPA does not state its hardware), 8 x A100 for Qwen2.5-Math
(HIVE); mesh fsdp=8. The paper's numbers to compare with (Avg@16 over seven benchmarks, GRPO on
DAPO-Math-17k, HeaPA Table 2 as gains of HeaPA over this baseline): HeaPA + PathAgg beats GRPO
by +1.8 (0.6B), +2.0 (1.7B), +7.2 (4B), +4.9 (8B); on Qwen2.5-7B-Instruct GRPO reaches 46.5.
"""

from frontier_rl import config_lib
from frontier_rl.experiment import paper


def get_config(arg: str | None = None):
    model, data, flags = paper.parse_args(arg, "math_grpo.py", tuple(paper.MODELS),
                                          ("script_val",))
    c = paper.base(model, data)
    c.selector.name = "uniform"
    if "script_val" in flags:
        paper.script_val(c, model)
    paper.sources(c, model, flags)
    if "smoke" in flags:
        paper.smoke(c, "qwen3" if model.startswith("qwen3") else "qwen2")
    return config_lib.validate(c)
