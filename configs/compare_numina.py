"""The one public table that compares prompt selectors at equal rollouts, arXiv 2608.17941 (Liu,
Tian, Wang, Wen, Xiong, Lai, Li, "Efficient RLVR Scheduling via Graph-Structured Online
Difficulty Estimation", Aug 2026) Table 1: its baselines GRESO and PCL beside uniform GRPO and
this project's selectors, every run to the same 1.5M rollouts on NuminaMath, evaluated by Avg@8
on MATH500, AIME24, AIME25 and OlympiadBench (the "numina" protocol of
frontier_rl/experiment/paper.py).

  frontier-rl compare --config=configs/compare_numina.py --workdir=runs/compare_numina
  frontier-rl compare --config=configs/compare_numina.py:llama3.2-1b-instruct --workdir=runs/cn1b
  frontier-rl compare --config=configs/compare_numina.py:smoke --workdir=/tmp/compare_numina_smoke
  frontier-rl protocol --config=configs/compare_numina.py    # every setting and its source

Args (comma-separated): a model of Table 1, qwen2.5-math-1.5b (default; HIVE's model, built
under this protocol) | llama3.2-1b-instruct; optionally a corpus (default numina_math); `smoke`
(GRPO, GRESO and PCL on the generated fixtures at a 48-rollout budget, CPU, about 2 minutes for
the three runs on 2 shared cores; its plan is tested). Needs checkpoints/<Hugging Face name>
(meta-llama/Llama-3.2-1B-Instruct is gated: HF_TOKEN), data/train/numina_math.parquet
(launch/prepare_benchmarks.py --numina) and data/eval/ (launch/prepare_benchmarks.py), or
their Hugging Face ids fetched and the corpus built by `python -m
frontier_rl.experiment.hub_fetch fetch --config=configs/compare_numina.py --out=DIR`.

What is known of Table 1 (the only part of the paper read here): GVM, PCL and GRESO beside the
paper's own graph-based estimator, on Qwen2.5-Math-1.5B and Llama-3.2-1B-Instruct, trained on
NuminaMath, about 1.5M rollouts per run including pre-sampling, Avg@8 on the four benchmarks.
Its figures are not reproduced here. Everything its text would fix (learning rate, batch,
group size, response length, temperature, the NuminaMath variant and subset, evaluation
schedule, hardware) is HIVE's protocol (configs/math_hive.py) or, for the corpus, a seeded
30,000-problem subset of AI-MO/NuminaMath-CoT (frontier_rl/data/benchmarks.py numina_rows):
ours, marked so by `frontier-rl protocol`; check against the paper before a paper run.

compare.budget = "rollouts": every run stops at compare.rollout_budget = 1,500,000 rollouts
(every generated response counts, pre-sampling, screening and discarded groups included, as
Table 1 counts pre-sampling), is evaluated 20 times over it (every 75,000 rollouts), and the
report gives the four-benchmark mean of Avg@8 (compare.metric = bench_mean) against uniform
GRPO (compare.target). Every run starts from the same checkpoint with the same data order.

Methods (compare.methods; compare.run picks): grpo (uniform), greso, pcl (Table 1's baselines
that are selectors here), then this project's arms: hive, heapa (needs an OpenAI-compatible
teacher at selector.heapa.teacher_url) and, each when it is registered (selection.names()),
speed, hive_v2, mopps and learnability; ds (GRESO's dynamic sampling) is available but not run.
Left out: GVM (arXiv 2505.02391), which allocates each prompt's number of samples rather than
choosing prompts, so it is not a prompt selector of this project's registry and is not
implemented; and the paper's own graph-based estimator (its text was not read).

Hardware: not read: 2608.17941's text was not available; fit lines for 8 x A100-80GB and
8 x H100 (docs/results/fit/compare_numina-*, `frontier-rl fit --target`, mesh fsdp=8). On
8 x A100-80GB both models fit with the embedded sampler at a 0.9 share (71.3 GiB: sampler
calls of 1,536 rows 39.3 / 43.1 GiB, train step 12.8 / 14.8, HIVE's entropy pass 8.2 / 7.1 for
Qwen / Llama) and beside SGLang at 0.45 (README). On H100 every program but the eval sampler
compiles and fits; its top-p sort fails in XLA:GPU's compile-only build (invalid device
ordinal; at top-p 1.0 it compiles), a limit of compiling without the GPU. Time, not measured:
HIVE reports 94.2 h for DS's 7.6M rollouts and 59.5 h for HIVE's 3.1M on Qwen2.5-Math-1.5B
(8 x A100), so 1.5M rollouts are roughly 20-30 h a run there; the runs of compare.run x seeds
go one after another.
"""

import ml_collections

from frontier_rl import config_lib, selection
from frontier_rl.experiment import launchers, paper

MODELS = ("qwen2.5-math-1.5b", "llama3.2-1b-instruct")
PROTOCOL = "numina"
TABLE1 = ("grpo", "greso", "pcl")  # Table 1's selector baselines here, uniform first
ARMS = ("hive", "heapa", "speed", "hive_v2", "mopps", "learnability")  # this project's
OPTIONAL = ("mopps", "speed", "learnability", "hive_v2")  # run when registered
EVALS = 20  # every 75,000 rollouts, as HIVE evaluates 20 times over its 1,000 steps


def _methods() -> ml_collections.ConfigDict:
    # Selection the only difference: every method keeps the protocol's loss and batch.
    m = {name: {"selector": {"name": sel}} for name, sel in (
        ("grpo", "uniform"), ("ds", "ds"), ("greso", "greso"), ("pcl", "pcl"), ("hive", "hive"),
        ("heapa", "heapa"))}
    m.update({name: {"selector": {"name": name}} for name in OPTIONAL
              if name in selection.names()})
    return ml_collections.ConfigDict(m)


def get_config(arg: str | None = None):
    model, data, flags = paper.parse_args(arg, "compare_numina.py", MODELS)
    c = paper.base(model, data, PROTOCOL)
    c.selector.name = "uniform"
    paper.heapa_teacher(c)
    c.selector.ds.gen_batch_size = 384  # HIVE's DS (GRESO's script), when ds is run
    c.selector.ds.max_num_gen_batches = 0  # GRESO's loop has no cap
    c.compare = ml_collections.ConfigDict()
    c.compare.methods = _methods()
    c.compare.run = ",".join(m for m in TABLE1 + ARMS if m in c.compare.methods)
    c.compare.seeds = "0"
    # where the runs execute (experiment/launchers.py): "slurm" submits each run as one SLURM
    # job of one 8-GPU node (docs/cluster.md); two days covers a run of about one
    c.compare.launcher = "local"
    c.compare.slurm = launchers.slurm_settings(time_min=2880)
    c.compare.budget = "rollouts"
    c.compare.steps = 0  # steps per run when budget = "steps"
    c.compare.token_budget = 0  # per run when budget = "tokens"
    c.compare.pflops_budget = 0.0  # per run when budget = "pflops"
    c.compare.rollout_budget = paper.NUMINA_ROLLOUTS
    c.compare.evals = EVALS
    c.compare.metric = "bench_mean"
    c.compare.target = "grpo"
    c.compare.rollout_reference = "grpo"
    c.compare.settings_notes = ml_collections.ConfigDict({
        "greso": "at most 16 rollout rounds a step (GRESO's loop has no cap); its pre-sampling "
                 "rollouts count toward the budget, as Table 1's do",
        "pcl": "value model is a host-side shrinkage estimator, not PCL's network; at the "
               "protocol's batch and advantage",
        "heapa": "its teacher is a local OpenAI-compatible server (HeaPA called OpenAI's API); "
                 "the teacher's generations are not policy rollouts",
    })
    paper.sources(c, model, protocol=PROTOCOL)
    if "smoke" in flags:
        paper.smoke(c, "qwen2")
        c.compare.run = ",".join(TABLE1)
        c.compare.rollout_budget = 48  # three steps of 4 x 4
        c.compare.evals = 2
        c.selector.greso.max_rounds = 2
    return config_lib.validate(c)
