"""The papers' math settings, shared by configs/math_{grpo,dapo,hive,heapa}.py,
configs/compare_math.py and configs/compare_numina.py (sources: docs/methods.md "Settings for
the papers' math experiments"; per setting: `frontier-rl protocol --config=...`).

Three protocols:

- HIVE (HIVE App. B.1 and Table 4, GRESO's scripts where HIVE is silent): Qwen2.5-Math-1.5B / 7B
  (and App. B.1's DeepSeek-R1-Distill-Qwen-1.5B, Qwen3-4B-Base, Llama-3.2-3B-Instruct, with the
  same settings, as HIVE states no others) on DAPO+MATH, B_t = 256 prompts x G = 8, AdamW lr
  1e-6, betas (0.9, 0.999), weight decay 0.01, no KL, temperature 1.0, mini-batch 512 responses
  (GRESO's 64 prompts x 8: 4 updates per step), GRESO's loss (token-mean, clip 0.2 / 0.2,
  entropy 0.001), 1,000 steps, context 4,096 = prompt <= 1,536 + response <= 2,560 (GRESO's
  split), evaluated every 50 steps on six benchmarks (best checkpoint reported), n = 4 samples
  at T = 1.0, top-p 0.7 (GRESO's validation; HIVE does not state it). 8 x A100.
- HeaPA (the released Qwen3 script, [H-sh]): Qwen3-0.6B..8B on the script's 14k de-duplicated,
  CJK-free subset of DAPO-Math-17k (the paper names the 17k), B = 512 x n = 16,
  PPO mini-batch 64 (8 updates per step), lr 1e-6, weight decay 0.1, KL loss 1e-6, clip
  0.2 / 0.28, overlong buffer 4,096 in both the GRPO and the DAPO recipe, prompt <= 2,048,
  response <= 20,480, 500 steps, temperature 1.0, evaluated every 10
  steps: Avg@16 at T = 0.7, top-p 0.7, top-k 50 (its eval_dataset_generation.py) on seven
  benchmarks, responses <= 20,480 (the `script_val` flag validates in the run as the released
  scripts do instead, SCRIPT_VAL, without top-k, and leaves the seven-benchmark table to
  `frontier-rl eval` with the flagless config). Hardware is not
  stated for these runs; the configs name 8 x H200. Qwen3-4B-Instruct-2507 (the model that
  script trains; non-thinking) takes the same settings; Qwen2.5-7B-Instruct (Table 1) its
  released 7B script's: lr 1.5e-6 after 20 warm-up steps, PPO mini-batch 128 (4 updates per
  step), 1,000 steps (QWEN25_7B_RECIPE).
- NuminaMath (arXiv 2608.17941 Table 1, the only part of that paper read here): Qwen2.5-Math-1.5B
  and Llama-3.2-1B-Instruct trained on NuminaMath for about 1.5M rollouts per run, pre-sampling
  included (rl.rollout_budget), evaluated by Avg@8 (eval.k = 8) on MATH500, AIME24, AIME25 and
  OlympiadBench. The paper's text was not available, so everything else is HIVE's protocol as
  above (ours, marked so in experiment/protocol.py; check against the paper before a paper
  run): B = 256 x 8, lr 1e-6, GRESO's loss, prompt <= 1,536 + response <= 2,560, 1,000 steps as
  an upper bound (uniform reaches 1.5M rollouts at step 733), evaluation at T = 1.0, top-p 0.7.
  Llama-3.2-1B-Instruct has a 128k context, so the 4,096 split that Qwen2.5-Math's context
  forces is not needed; it keeps 2,560 anyway, as HIVE App. B.1 trains Llama-3.2-3B-Instruct
  with the same settings as its Qwen models, and equal caps keep the two models' rollouts
  comparable at equal rollout counts. The corpus is ours: a seeded 30,000-problem subset of
  AI-MO/NuminaMath-CoT (data/benchmarks.py `numina_rows`). `base(model, protocol="numina")`
  builds a HIVE model (Qwen2.5-Math-1.5B) under it.

Reward and prompt, each protocol its paper's (task.reward, task.prompt_template):
- HIVE: GRESO's `latex_math` scorer (the last \\boxed{}, math-verify), 1.0 correct / 0.1
  extracted but wrong / 0.0 nothing boxed (HIVE App. B; GRESO's code), on GRESO's user message
  "Please solve the following math problem: ..." (its data preprocessing). NuminaMath: HIVE's
  (ours: 2608.17941's reward and prompt were not read).
- HeaPA: its `math_dapo` scorer (the last "Answer:" line of the final 300 characters,
  Minerva-normalised, string equality), +1 / -1, on DAPO-Math-17k's own user message ("...
  Answer: $Answer ..."); the benchmarks with its evaluation script's sympy / float fallback.
- The corpus rows hold the bare problem (launch/prepare_benchmarks.py strips DAPO-Math-17k's
  own instruction, and the template puts it back); the model's own chat template renders the
  conversation. The selectors classify groups by the outcomes correct / extracted but wrong /
  nothing extracted.
Deviations, for every config built here:
- Zero-variance groups are told apart by outcome: under HeaPA's +-1 a group of wrong answers
  and missing "Answer:" lines counts as mixed (its rewards are all -1, so it carries no
  gradient; HeaPA's group filter, on `acc`, drops it).
- Memory settings (bfloat16 compute, float32 master weights and Adam, full remat, scanned
  layers, micro-batches) do not change the update.
- HeaPA's evaluation top-k 50 with top-p 0.7 takes the nucleus within the renormalised top 50,
  as the vLLM of its evaluation does, on the embedded engine and `frontier-rl serve`; a real
  SGLang server (rollout.engine=sglang) cuts both on the full distribution instead
  (rollout/sampler.py): its kept set is never smaller, and the two differ only when a prefix
  of the sorted tokens holds between 0.7 x Z and 0.7 of the mass, Z the top 50's mass.
"""

from __future__ import annotations

import os

import ml_collections

from frontier_rl import config_lib
from frontier_rl.evaluation import suite as eval_suite
from frontier_rl.tasks import chat

# arg -> (preset, Hugging Face name, protocol)
MODELS = {
    "qwen2.5-math-1.5b": ("qwen2.5-math-1.5b", "Qwen2.5-Math-1.5B", "hive"),
    "qwen2.5-math-7b": ("qwen2.5-math-7b", "Qwen2.5-Math-7B", "hive"),
    # HIVE App. B.1's other three models, under the same protocol.
    "deepseek-r1-distill-qwen-1.5b": ("deepseek-r1-distill-qwen-1.5b",
                                      "DeepSeek-R1-Distill-Qwen-1.5B", "hive"),
    "qwen3-4b-base": ("qwen3-4b-base", "Qwen3-4B-Base", "hive"),
    "llama3.2-3b-instruct": ("llama3.2-3b-instruct", "Llama-3.2-3B-Instruct", "hive"),
    "qwen3-0.6b": ("qwen3-0.6b", "Qwen3-0.6B", "heapa"),
    "qwen3-1.7b": ("qwen3-1.7b", "Qwen3-1.7B", "heapa"),
    "qwen3-4b": ("qwen3-4b", "Qwen3-4B", "heapa"),
    "qwen3-8b": ("qwen3-8b", "Qwen3-8B", "heapa"),
    # HeaPA Table 1's policy (its released 7B recipe, QWEN25_7B_RECIPE) and the model its
    # released Qwen3 script trains: a non-thinking checkpoint, whose chat template has no
    # thinking switch (nothing here passes one: tasks/chat.py renders with the template's
    # defaults).
    "qwen2.5-7b-instruct": ("qwen2.5-7b-instruct", "Qwen2.5-7B-Instruct", "heapa"),
    "qwen3-4b-instruct-2507": ("qwen3-4b-instruct-2507", "Qwen3-4B-Instruct-2507", "heapa"),
    # 2608.17941 Table 1's second model (its first, Qwen2.5-Math-1.5B, is HIVE's: base(...,
    # protocol="numina")); Llama-3.2-1B-Instruct has the llama3.2-1b preset's architecture.
    "llama3.2-1b-instruct": ("llama3.2-1b", "Llama-3.2-1B-Instruct", "numina"),
}
# arg -> training corpus (verl parquet, bare problems; the names and paths of
# frontier_rl/data/benchmarks.py TRAIN_OUT, built by launch/prepare_benchmarks.py)
DATASETS = {
    "dapo_math": "data/train/dapo_math_17k.parquet",  # DAPO-Math-17k, every row
    "math": "data/train/math.parquet",  # MATH train, 7,500 problems
    "dapo_math+math": "data/train/dapo_math_plus_math.parquet",  # HIVE's DAPO+MATH
    # HeaPA's "14kdapo" (CJK rows dropped, one row per extra_info.index; HeaPA
    # data/prepare_DAPO_training_dataset.py)
    "dapo_math_14k": "data/train/dapo_math_14k.parquet",
    "openr1_math_30k": "data/train/openr1_math_30k.parquet",  # HIVE's Open-R1 30k subset
    "openr1_math_heapa": "data/train/openr1_math_heapa.parquet",  # HeaPA Table 1's OpenR1-Math
    # 2608.17941 Table 1's NuminaMath: a seeded subset of NuminaMath-CoT (the variant is ours)
    "numina_math": "data/train/numina_math.parquet",
}
# Hugging Face ids (`org/name@revision`, frontier_rl/hub.py) of what the papers name: each
# model (by its Hugging Face name, MODELS), the public sources each training corpus is built
# from (by DATASETS arg, by frontier_rl/data/benchmarks.py's rule for it) and each benchmark
# (frontier_rl/data/benchmarks.py BENCHMARKS, whose public schema it is converted from). The
# revisions are "main": no commit is known to be the one the papers used, so none is pinned
# here; a run records the commit each id resolved to (WORKDIR/hub_sources.json) and
# launch/paper.sh pins every id to the commit it fetched. The configs keep their local paths
# (checkpoints/<name>, data/train/, data/eval/): `local_defaults` maps a missing one to its id.
REVISION = "main"
MODEL_IDS = {
    "Qwen2.5-Math-1.5B": "Qwen/Qwen2.5-Math-1.5B",
    "Qwen2.5-Math-7B": "Qwen/Qwen2.5-Math-7B",
    "DeepSeek-R1-Distill-Qwen-1.5B": "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
    "Qwen3-4B-Base": "Qwen/Qwen3-4B-Base",
    "Llama-3.2-3B-Instruct": "meta-llama/Llama-3.2-3B-Instruct",  # gated: needs HF_TOKEN
    "Qwen3-0.6B": "Qwen/Qwen3-0.6B",
    "Qwen3-1.7B": "Qwen/Qwen3-1.7B",
    "Qwen3-4B": "Qwen/Qwen3-4B",
    "Qwen3-8B": "Qwen/Qwen3-8B",
    "Qwen2.5-7B-Instruct": "Qwen/Qwen2.5-7B-Instruct",
    "Qwen3-4B-Instruct-2507": "Qwen/Qwen3-4B-Instruct-2507",
    "Llama-3.2-1B-Instruct": "meta-llama/Llama-3.2-1B-Instruct",  # gated: needs HF_TOKEN
}
_DAPO = "BytedTsinghua-SIA/DAPO-Math-17k"  # the verl parquet HeaPA names
_MATH = "xDAN2099/lighteval-MATH"  # GRESO's lighteval_math.py source (train split)
_OPENR1 = "open-r1/OpenR1-Math-220k:data/*.parquet"  # its default config (GRESO's, HeaPA's)
_NUMINA = "AI-MO/NuminaMath-CoT"  # ours: 2608.17941's text, which would name the variant, unread
CORPUS_IDS = {
    "dapo_math": (_DAPO,),
    "math": (_MATH,),
    "dapo_math+math": (_DAPO, _MATH),
    "dapo_math_14k": (_DAPO,),
    "openr1_math_30k": (_OPENR1,),
    "openr1_math_heapa": (_OPENR1,),
    "numina_math": (_NUMINA,),
}
BENCHMARK_IDS = {
    "aime24": "HuggingFaceH4/aime_2024",
    "aime25": "math-ai/aime25",
    "amc23": "math-ai/amc23",
    "aimo_amc": "AI-MO/aimo-validation-amc",
    "math500": "HuggingFaceH4/MATH-500",
    "minerva_math": "math-ai/minervamath",
    "olympiadbench": "Hothan/OlympiadBench:*OE_TO_maths_en_COMP*",
    "gpqa_diamond": "Idavidrein/gpqa:gpqa_diamond.csv",  # gated: needs HF_TOKEN
    "gaokao2023en": "MARIO-Math-Reasoning/Gaokao2023-Math-En",
}


def hub_id(name: str, revision: str = REVISION) -> str:
    """'org/name[:pattern]' at `revision`: 'org/name@revision[:pattern]'."""
    repo, _, pattern = name.partition(":")
    return f"{repo}@{revision}" + (f":{pattern}" if pattern else "")


def dataset_of(path: str) -> str:
    """The DATASETS arg whose file is `path` ("" if none)."""
    return {v: k for k, v in DATASETS.items()}.get(path, "")


def _paper_fields(c) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Per field of `c` holding a paper config's local default path (checkpoints/<name>, a
    DATASETS file, data/eval/<benchmark>.jsonl): (the path, the Hugging Face ids it stands for:
    a model's or a benchmark's id, a corpus's sources)."""
    out = {}
    path = str(c.model.get("path") or "")
    name = os.path.basename(path)
    if name in MODEL_IDS and path == os.path.join(CHECKPOINTS, name):
        out["model.path"] = (path, (hub_id(MODEL_IDS[name]),))
    if c.task.get("name") == "corpus":
        tpath = str(c.task.get("path") or "")
        if dataset_of(tpath):
            out["task.path"] = (tpath, tuple(hub_id(i) for i in CORPUS_IDS[dataset_of(tpath)]))
    sets = c.eval.get("sets") or {}
    for name, value in (sets.to_dict() if hasattr(sets, "to_dict") else dict(sets)).items():
        if name in BENCHMARK_IDS and value == os.path.join(EVAL_DIR, f"{name}.jsonl"):
            out[f"eval.sets.{name}"] = (value, (hub_id(BENCHMARK_IDS[name]),))
    return out


def local_defaults(c) -> dict[str, tuple[str, ...]]:
    """Per field of `c` holding a paper config's local default path that does not exist: the
    Hugging Face ids in its place (what experiment/hub_fetch.py's `fetch` fetches)."""
    return {field: ids for field, (path, ids) in _paper_fields(c).items()
            if not os.path.exists(path)}


def hub_ids(c) -> dict[str, tuple[str, ...]]:
    """Per field of `c`: the Hugging Face ids it stands for (a paper config's local default
    path, existing or not) or names (an id itself)."""
    from frontier_rl import hub

    out = {field: ids for field, (_, ids) in _paper_fields(c).items()}
    values = {"model.path": str(c.model.get("path") or "")}
    if c.task.get("name") == "corpus":
        values["task.path"] = str(c.task.get("path") or "")
    sets = c.eval.get("sets") or {}
    for name, value in (sets.to_dict() if hasattr(sets, "to_dict") else dict(sets)).items():
        values[f"eval.sets.{name}"] = str(value)
    for field, value in values.items():
        if field not in out and hub.is_id(value):
            out[field] = (value,)
    return out


# protocol -> its default corpus: HIVE's DAPO+MATH (App. B.1); for HeaPA the 14k subset, the
# TRAIN_FILE of its released Qwen3 script (dapo-math-14k-no_chinese-unique.parquet; the 7B
# scripts name a "fullset_14k-dapo-math" file), where the paper names DAPO-Math-17k; for
# 2608.17941 its NuminaMath (the subset ours)
DEFAULT_DATASET = {"hive": "dapo_math+math", "heapa": "dapo_math_14k", "numina": "numina_math"}
# protocol -> the reward variant (tasks/corpus.py REWARDS) of training and of the benchmarks,
# and the user message around the problem (tasks/chat.py); NuminaMath's are HIVE's (ours)
REWARD = {"hive": "hive", "heapa": "heapa", "numina": "hive"}
EVAL_REWARD = {"hive": "", "heapa": "heapa_sympy", "numina": ""}
PROMPT = {"hive": chat.GRESO_PROMPT, "heapa": chat.DAPO_ANSWER_PROMPT,
          "numina": chat.GRESO_PROMPT}
# The protocols built on HIVE's (GRESO's) settings: NuminaMath's takes them where 2608.17941's
# text, unread, would fix them.
GRESO_PROTOCOLS = ("hive", "numina")
# 2608.17941 Table 1: about 1.5M rollouts per run, pre-sampling included; Avg@8.
NUMINA_ROLLOUTS = 1_500_000
NUMINA_EVAL_K = 8
EVAL_DIR = "data/eval"  # launch/prepare_benchmarks.py --out_dir
CHECKPOINTS = "checkpoints"  # model.path = checkpoints/<Hugging Face name>

# Rows per forward/backward (whole mesh of 8 devices): two or one response per device, sized
# with `frontier-rl fit --target` at the share of each GPU launch/run_gpu.sh gives JAX beside
# SGLang (README). Qwen3-8B's train step at 16 rows (22.5k tokens) needed 65.3 GiB of the
# 63.4 an H200 gives JAX there (XLA:GPU's peak), so it runs one row per device;
# Qwen2.5-Math-7B's at 16 rows (4.6k tokens) needed 34.8 of the 35.7 GiB an A100-80GB gives
# JAX there, too close to plan on (cuDNN's workspace is not in a compile-only peak), so it
# does too.
MICRO_BATCH = {"qwen2.5-math-1.5b": 16, "qwen2.5-math-7b": 8, "qwen3-0.6b": 8,
               "qwen3-1.7b": 8, "qwen3-4b": 8, "qwen3-8b": 8,
               "deepseek-r1-distill-qwen-1.5b": 16, "qwen3-4b-base": 8,
               "llama3.2-3b-instruct": 8, "qwen2.5-7b-instruct": 8,
               "qwen3-4b-instruct-2507": 8, "llama3.2-1b-instruct": 16}
# Rows the embedded sampler generates at once (rollout.rows_per_call; 0 = a step's rows at
# once): its KV cache is dense, so HeaPA's 8,192 rows of up to 22.5k tokens go in slices (on
# GPUs, an SGLang server's paged cache is the faster path). Sized with `frontier-rl fit` for
# 8 x A100-80GB (HIVE's protocol: HIVE App. B.1) and 8 x H200 (HeaPA's: ours, as neither its
# paper nor its released scripts name hardware).
# The mesh (data, fsdp, model) where it is not accelerator_memory's (1, 8, 1). None since the
# train step gathers one layer at a time: Qwen2.5-Math-7B on 8 x 80 GB (HIVE's A100s) used to
# need 2-way tensor parallelism (at fsdp=8 its step needed 67.7 GiB per device, the whole
# gathered model being the bulk); it now runs at fsdp=8 with micro-batches of 16 in 37.2 GiB
# and sampler calls of 256 rows in 52.3 (`frontier-rl fit`, README).
MESH: dict[str, tuple[int, int, int]] = {}
# Qwen2.5-Math-1.5B: HIVE's first round of 3,072 rows in one call needed 66.8 of 67.1 GiB on
# an A100-80GB, too close to plan on, so it goes in two. Llama-3.2-1B-Instruct takes the 1.5B's
# sizes: on 8 x A100-80GB at a 0.9 share (71.3 GiB) its 1,536-row sampler call needed 43.1 GiB
# and its train step at micro-batches of 16 14.8 (docs/results/fit/compare_numina-*).
ROWS_PER_CALL = {"qwen2.5-math-1.5b": 1536, "qwen2.5-math-7b": 256, "qwen3-0.6b": 256,
                 "qwen3-1.7b": 256, "qwen3-4b": 64, "qwen3-8b": 64,
                 "deepseek-r1-distill-qwen-1.5b": 256, "qwen3-4b-base": 64,
                 "llama3.2-3b-instruct": 64, "qwen2.5-7b-instruct": 64,
                 "qwen3-4b-instruct-2507": 64, "llama3.2-1b-instruct": 1536}
# HeaPA Table 1's recipe for Qwen2.5-7B-Instruct, from its released script
# (recipe/dapo/HEAP-DAPO_14kdapo_*.sh): lr 1.5e-6 after 20 warm-up steps, PPO mini-batch 128
# prompts of 512 (4 updates per step), 1,000 steps; batch 512 x 16, weight decay 0.1 and the
# lengths are the Qwen3 script's. verl steps the lr scheduler once per training step, the
# optimizer here once per update, so the warm-up counts 20 x 4 updates.
QWEN25_7B_RECIPE = dict(learning_rate=1.5e-6, warmup_trainer_steps=20, mini_batch_prompts=128,
                        num_steps=1000)


def parse_args(arg: str | None, file: str, models: tuple[str, ...], extra: tuple[str, ...] = ()
               ) -> tuple[str, str | None, set[str]]:
    """(model, dataset or None, flags) from 'model,dataset,flag,...'; errors name the file."""
    args = [a for a in (arg or "").split(",") if a]
    allowed = set(models) | set(DATASETS) | {"smoke"} | set(extra)
    bad = [a for a in args if a not in allowed]
    if bad:
        raise ValueError(f"configs/{file}: unknown arg {bad} (models {list(models)}, datasets "
                         f"{list(DATASETS)}, flags {['smoke', *extra]})")
    chosen = [a for a in args if a in models] or [models[0]]
    data = [a for a in args if a in DATASETS]
    if len(chosen) > 1 or len(data) > 1:
        raise ValueError(f"configs/{file}: name one model and at most one dataset, got {args}")
    return chosen[0], (data[0] if data else None), {a for a in args if a in extra or
                                                    a == "smoke"}


def protocol_of(model: str, protocol: str | None = None) -> str:
    """The protocol `model` runs: `protocol` when given (checked), else its paper's (MODELS)."""
    if protocol is None:
        return MODELS[model][2]
    if protocol not in DEFAULT_DATASET:
        raise ValueError(f"protocol={protocol!r} is not one of {list(DEFAULT_DATASET)}")
    return protocol


def base(model: str, dataset: str | None, protocol: str | None = None
         ) -> ml_collections.ConfigDict:
    """The protocol of `model`'s paper (or `protocol`, e.g. a HIVE model under "numina") on
    `dataset` (default: the protocol's) with uniform GRPO."""
    preset, hf_name, _ = MODELS[model]
    protocol = protocol_of(model, protocol)
    dataset = dataset or DEFAULT_DATASET[protocol]
    c = config_lib.default_config()
    c.model.path = os.path.join(CHECKPOINTS, hf_name)
    c.model.preset = preset  # the same architecture: `fit` and random-init checks use it
    config_lib.accelerator_memory(c, MICRO_BATCH[model])
    c.mesh.data, c.mesh.fsdp, c.mesh.model = MESH.get(model, (c.mesh.data, c.mesh.fsdp,
                                                              c.mesh.model))
    c.rollout.rows_per_call = ROWS_PER_CALL[model]
    c.task = ml_collections.ConfigDict(dict(
        name="corpus", path=DATASETS[dataset], format="verl", verifier="math_verify",
        require_boxed=True, reward=REWARD[protocol], eval_reward=EVAL_REWARD[protocol],
        prompt_template=PROMPT[protocol], instruction="", eval_fraction=0.0,
        verify_workers=8, verify_timeout_s=10.0, data_seed=0,
        data_dir=""))  # a corpus from `frontier-rl data prepare --data_dir=DIR`: that DIR
    # The chat template is the policy's: it follows --config.model.path.
    c.task.chat_template = c.model.get_ref("path")
    c.warmstart.enabled = False  # the papers start RL from the released checkpoints
    c.rl.loss = "grpo"
    c.rl.learning_rate = 1e-6
    c.rl.b1, c.rl.b2 = 0.9, 0.999
    c.rl.grad_clip = 1.0
    c.rl.epochs = 1
    c.rollout.temperature = 1.0
    c.rollout.top_p = 1.0
    c.checkpoint.max_to_keep = 3
    c.log.tensorboard = True
    if protocol in GRESO_PROTOCOLS:
        _hive(c)
        names = eval_suite.HIVE_BENCHMARKS
        if protocol == "numina":  # what 2608.17941 Table 1 states; the rest stays HIVE's
            # the run ends at the rollout budget; HIVE's 1,000 steps only bound it (uniform
            # spends 2,048 rollouts a step, so it stops at step 733)
            c.rl.rollout_budget = NUMINA_ROLLOUTS
            c.eval.k = NUMINA_EVAL_K
            names = eval_suite.NUMINA_BENCHMARKS
    else:
        _heapa(c, model)
        names = eval_suite.HEAPA_BENCHMARKS
    c.eval.greedy = False
    c.eval.sets = ml_collections.ConfigDict({n: os.path.join(EVAL_DIR, f"{n}.jsonl")
                                             for n in names})
    return c


def _hive(c: ml_collections.ConfigDict) -> None:
    """HIVE's settings (App. B.1, Table 4; GRESO's scripts where HIVE is silent)."""
    c.rl.batch_size, c.rl.group_size = 256, 8
    # HIVE's mini-batch 512 is GRESO's ppo_mini_batch_size=64 prompts, which verl counts in
    # responses (x n = 8): 2,048 responses per step make 4 updates.
    c.rl.minibatches = 4
    c.rl.weight_decay = 0.01
    c.rl.kl_coef = 0.0
    # The loss HIVE leaves unsaid, from GRESO's verl: the token mean over the mini-batch,
    # clip 0.2 / 0.2 without a dual clip, entropy coefficient 0.001.
    c.rl.loss_agg = "token_mean"
    c.rl.eps_low, c.rl.eps_high, c.rl.clip_ratio_c = 0.2, 0.2, 0.0
    c.rl.entropy_coef = 0.001
    c.rl.num_steps = 1000
    c.rollout.max_new_tokens = 2560
    c.fit.prompt_len = 1536
    c.eval.every = 50
    c.eval.k, c.eval.temperature, c.eval.top_p = 4, 1.0, 0.7
    c.checkpoint.every = 50


def _heapa(c: ml_collections.ConfigDict, model: str) -> None:
    """HeaPA's settings (its released Qwen3 script; Qwen2.5-7B-Instruct its 7B script's)."""
    c.rl.batch_size, c.rl.group_size = 512, 16
    c.rl.minibatches = 8  # PPO mini-batch 64 prompts
    c.rl.weight_decay = 0.1
    c.rl.kl_coef = 1e-6
    c.rl.eps_low, c.rl.eps_high, c.rl.clip_ratio_c = 0.2, 0.28, 10.0
    # HeaPA's scripts keep the overlong buffer in both recipes (reward_model.overlong_buffer)
    c.rl.overlong_buffer, c.rl.overlong_penalty = 4096, 1.0
    c.rl.num_steps = 500
    c.rollout.max_new_tokens = 20480
    c.fit.prompt_len = 2048
    c.eval.every = 10
    c.eval.k, c.eval.temperature, c.eval.top_p = 16, 0.7, 0.7
    c.eval.top_k = 50  # eval_dataset_generation.py's TOP_K (HIVE's GRESO keeps none)
    c.eval.max_new_tokens = 20480
    c.checkpoint.every = 10
    if model == "qwen2.5-7b-instruct":
        r = QWEN25_7B_RECIPE
        c.rl.learning_rate = r["learning_rate"]
        c.rl.minibatches = c.rl.batch_size // r["mini_batch_prompts"]
        c.rl.warmup_steps = r["warmup_trainer_steps"] * c.rl.minibatches
        c.rl.num_steps = r["num_steps"]


# HeaPA DS generation batch (gen_prompt_bsz, prompts) per model, from the script that trains
# it: the Qwen3 script's 512, the Qwen2.5-7B-Instruct scripts' 2 x train_prompt_bsz = 1,024.
DS_GEN_PROMPTS = {"qwen2.5-7b-instruct": 1024}
HEAPA_DS_GEN_PROMPTS = 512

# The released scripts' in-run validation (flag `script_val`, HeaPA's protocol): verl validates
# on TEST_FILE aime-2024-960.parquet with val_kwargs.n = 1 at the rollout temperature 1.0,
# top-p 0.7 and no top-k (val_kwargs.top_k=-1); 960 rows of AIME24's 30 problems are 32 per
# problem, so Avg@32 on aime24. The Qwen3 script validates every 10 steps (test_freq=10), the
# Qwen2.5-7B scripts every 1,000 (once, at their last step). The seven-benchmark Avg@16 is
# evaluated offline (HeaPA eval_dataset_generation.py, with top-k 50), here `frontier-rl eval`
# with the config without the flag.
SCRIPT_VAL = dict(benchmark="aime24", k=32, temperature=1.0, top_p=0.7, top_k=-1, every=10)
SCRIPT_VAL_EVERY = {"qwen2.5-7b-instruct": 1000}


def script_val(c: ml_collections.ConfigDict, model: str) -> None:
    """In-run validation as the released HeaPA scripts run it (SCRIPT_VAL)."""
    if MODELS[model][2] != "heapa":
        raise ValueError(f"script_val is HeaPA's released scripts' validation; {model} runs "
                         f"the {MODELS[model][2]!r} protocol")
    v = SCRIPT_VAL
    c.eval.sets = ml_collections.ConfigDict({v["benchmark"]: os.path.join(
        EVAL_DIR, f"{v['benchmark']}.jsonl")})
    c.eval.k, c.eval.temperature, c.eval.top_p = v["k"], v["temperature"], v["top_p"]
    c.eval.top_k = v["top_k"]
    c.eval.every = SCRIPT_VAL_EVERY.get(model, v["every"])


def to_dapo(c: ml_collections.ConfigDict, protocol: str, model: str = "") -> None:
    """Dynamic sampling (selector "ds"), as each paper's baseline runs it.

    HIVE's DS is GRESO's dynamic-sampling script: the loss of every other method (GRPO,
    token-mean, clip 0.2 / 0.2, entropy 0.001, no overlong shaping), generation batches of 384
    for B_t = 256, as many as it takes (its loop has no cap). HeaPA's "original DAPO" is its
    DAPO recipe: token-mean loss, clip-higher 0.2 / 0.28, the 4,096-token overlong buffer it
    keeps in both recipes, no KL, generation batches of the model's script (DS_GEN_PROMPTS:
    512, or 1,024 for Qwen2.5-7B-Instruct), up to 20. The NuminaMath protocol takes HIVE's."""
    c.selector.name = "ds"
    if protocol in GRESO_PROTOCOLS:  # NuminaMath's: HIVE's DS (ours, 2608.17941 unread)
        c.selector.ds.gen_batch_size = 384
        c.selector.ds.max_num_gen_batches = 0
        return
    c.rl.loss = "dapo"
    c.rl.kl_coef = 0.0
    c.rl.eps_low, c.rl.eps_high = 0.2, 0.28
    c.selector.ds.gen_batch_size = DS_GEN_PROMPTS.get(model, HEAPA_DS_GEN_PROMPTS)
    c.selector.ds.max_num_gen_batches = 20


def heapa_teacher(c: ml_collections.ConfigDict, name: str = "heapa") -> None:
    """HeaPA's augmentation on text prompts: the policy edits a problem's numbers (the tag
    template) and an OpenAI-compatible teacher answers, asynchronously. `teacher_url` is a
    placeholder for a local server (e.g. SGLang or vLLM serving the teacher model)."""
    s = c.selector[name]
    s.augment = True
    s.aug_format = "template"
    s.teacher = "http"
    s.teacher_url = "http://127.0.0.1:30000/v1"
    s.teacher_workers = 8
    # prompt_template stays "": augmented questions are rendered as the task renders its
    # seeds (the policy's own chat template, Task.prompt_wrapper), and seeds unwrapped by it.


def sources(c: ml_collections.ConfigDict, model: str, flags: set[str] | frozenset = frozenset(),
            protocol: str | None = None) -> ml_collections.ConfigDict:
    """`c.protocol`: where each protocol setting comes from (experiment/protocol.py), for the
    protocol of `model`'s paper (or `protocol`, as given to `base`), its corpus (read back from
    task.path) and the flags that change sourced settings (`script_val`); `frontier-rl
    protocol --config=...` prints it."""
    from frontier_rl.experiment import protocol as sourced

    return sourced.attach(c, protocol_of(model, protocol), model,
                          dataset=dataset_of(c.task.path), script_val="script_val" in flags,
                          hub=hub_ids(c))


def smoke(c: ml_collections.ConfigDict, family: str) -> ml_collections.ConfigDict:
    """The same code paths on CPU in seconds: a tiny random model of the paper's family with a
    locally built ChatML tokenizer, a generated verl parquet, the benchmarks' generated
    stand-ins (frontier_rl/data/fixtures.py), whose model was fitted to answer in \\boxed{} once,
    when the fixtures were built; the run itself has no warm start, as the papers'."""
    from frontier_rl.data import fixtures

    if "protocol" in c:  # a smoke run is not the protocol: its sources would not hold
        del c["protocol"]
    f = fixtures.math_smoke(family)
    c.model.path = f["model"]  # the chat template follows
    c.model.preset = ""
    c.model.dtype = "float32"
    c.model.attention = "xla"
    c.model.remat = "none"
    c.model.scan_layers = False
    c.model.logits_chunk = 0
    c.task.path = f["train"]
    c.task.verify_workers = 1
    c.task.verify_timeout_s = 10.0
    c.task.eval_fraction = 0.1
    c.eval.sets = ml_collections.ConfigDict(dict(f["eval_sets"]))
    c.eval.k, c.eval.every, c.eval.max_new_tokens = 2, 2, 0
    c.rl.batch_size, c.rl.group_size = 4, 4
    c.rl.minibatches, c.rl.micro_batch_size = 1, 0
    c.rl.num_steps = 2
    c.rl.learning_rate = 1e-4
    c.rl.warmup_steps = 0  # a protocol's warm-up would hold a 2-step run near lr 0
    c.rl.rollout_budget = 0  # NuminaMath's 1.5M: the smoke's 2 steps end it
    c.rollout.max_new_tokens = 12
    c.fit.prompt_len = 64
    c.mesh.data, c.mesh.fsdp, c.mesh.model = -1, 1, 1
    c.checkpoint.every = 2
    c.log.tensorboard = False
    c.log.progress = False
    if c.rl.overlong_buffer:
        c.rl.overlong_buffer = 4
    if c.selector.name == "ds":
        c.selector.ds.gen_batch_size = 0
        c.selector.ds.max_num_gen_batches = 20  # a tiny model may never mix outcomes
    for name in ("heapa", "ps"):  # the teacher is a service: the smoke runs the heaps alone
        c.selector[name].augment = False
        c.selector[name].recycle_archive_max = 8
        c.selector[name].recycle_chunk = 4
    return c
