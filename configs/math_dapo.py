"""Dynamic sampling (selector "ds": generation batches until B groups with mixed outcomes) as
each paper's baseline runs it: the "DS" of HIVE's table (GRESO's dynamic-sampling script: the
same loss as every other method, selection the only difference) and HeaPA's "original DAPO"
(token-mean loss, clip-higher 0.2/0.28, overlong reward shaping, no KL). Settings and
deviations: frontier_rl/experiment/paper.py.

  frontier-rl train --config=configs/math_dapo.py:qwen2.5-math-1.5b --workdir=runs/ds_1.5b
  frontier-rl train --config=configs/math_dapo.py:qwen3-8b --workdir=runs/dapo_qwen3_8b
  frontier-rl train --config=configs/math_dapo.py:smoke --workdir=/tmp/math_dapo_smoke

Args (comma-separated): a model, qwen2.5-math-1.5b (default) | qwen2.5-math-7b (HIVE's DS:
B_t = 256 x 8 from generation batches of 384, as many as it takes, responses <= 2,560, GRESO's
GRPO loss) | qwen3-0.6b .. qwen3-8b (HeaPA's DAPO recipe: 512 x 16, generation batches of 512,
up to 20 of them, responses <= 20,480 with a 4,096-token overlong buffer); optionally a corpus;
`script_val` (math_grpo.py says what it does); `smoke` (CPU, seconds). HeaPA's generation batch
is its model's script's: 512, 1,024 for Qwen2.5-7B-Instruct. Every generated response counts
toward the rollout budget.

Hardware: 8 x A100 (Qwen2.5-Math, HIVE's) or 8 x H200 (Qwen3). Numbers to compare with: HIVE's
DS row, Qwen2.5-Math-1.5B 48.4 (six-benchmark average) with 7.6M rollouts in 94.2 h, 7B 57.8
with 13.1M in 198.4 h; HeaPA's original DAPO on DAPO-Math-17k (Qwen2.5-7B-Instruct) 46.1 Avg@16.
"""

from frontier_rl import config_lib
from frontier_rl.experiment import paper


def get_config(arg: str | None = None):
    model, data, flags = paper.parse_args(arg, "math_dapo.py", tuple(paper.MODELS),
                                          ("script_val",))
    c = paper.base(model, data)
    paper.to_dapo(c, paper.MODELS[model][2], model)
    if "script_val" in flags:
        paper.script_val(c, model)
    paper.sources(c, model, flags)
    if "smoke" in flags:
        paper.smoke(c, "qwen3" if model.startswith("qwen3") else "qwen2")
    return config_lib.validate(c)
