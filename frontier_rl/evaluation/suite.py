"""Benchmark suites: held-out evaluation on named benchmark files, as a per-benchmark table.

`config.eval.sets` maps a benchmark name to a local file (.jsonl or .parquet, the plain
{prompt, answer} or the verl format; `launch/prepare_benchmarks.py` writes them from downloaded
copies) or to a Hugging Face dataset id `org/name[@revision][:pattern]`, fetched into the hub's
cache and, for a benchmark frontier_rl/data/benchmarks.py knows by name, converted from its
public schema (frontier_rl/hub.py). Its questions are rendered exactly like the training
corpus's (the task's chat template, system prompt and instruction) and checked by the task's
verifier. With `eval.sets` set, the training run's periodic evaluation uses this suite instead
of the task's own held-out split (metrics `eval/avg@k/<benchmark>`, ..., and
`eval/avg@k/bench_mean`, the unweighted mean over benchmarks that both papers report), and so
does

  frontier-rl eval --config=configs/<exp>.py[:arg] --workdir=DIR [--step=N]   (a run's checkpoint)
  frontier-rl eval --config=configs/<exp>.py[:arg] --workdir=DIR --model=HF_DIR (any checkpoint;
  also a Hugging Face id org/name[@revision])

which writes DIR/eval/<step_N | model name>/eval.md and eval.json: per benchmark the questions,
Avg@k, pass@k (any correct of the k samples), the unbiased pass@j from them (j = `eval.pass_k`,
evaluation/passk.py), mean response length (tokens) and invalid rate, then the unweighted mean
row.
Protocols: HeaPA reports Avg@16 at T = 0.7, top-p = 0.7, top-k = 50 over the seven
HEAPA_BENCHMARKS; HIVE the best checkpoint's six-benchmark average (HIVE_BENCHMARKS; samples per
question unstated).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from frontier_rl import hub
from frontier_rl.data import benchmarks
from frontier_rl.evaluation import passk
from frontier_rl.run import statefile
from frontier_rl.tasks import base, corpus

HEAPA_BENCHMARKS = ("aime24", "aime25", "amc23", "math500", "minerva_math", "olympiadbench",
                    "gpqa_diamond")
# HIVE's AMC is GRESO's (its examples/data_preprocess/test_amc.py): AI-MO/aimo-validation-amc.
HIVE_BENCHMARKS = ("math500", "aime24", "aimo_amc", "minerva_math", "gaokao2023en",
                   "olympiadbench")
# arXiv 2608.17941 Table 1 (Avg@8 on each); which OlympiadBench subset it takes is not known
# here (its text was not read): this project's, the 675 English open-ended math problems.
NUMINA_BENCHMARKS = ("math500", "aime24", "aime25", "olympiadbench")


def _sets(sets) -> dict[str, str]:
    if sets is None:
        return {}
    if hasattr(sets, "to_dict"):
        sets = sets.to_dict()
    return {str(k): str(v) for k, v in dict(sets).items()}


def suite_task(task_name: str, task_cfg: Mapping, sets: Mapping[str, str]) -> base.Task:
    """A task whose eval set is the suite (bucket = benchmark name, in `sets` order) and whose
    verifier, scorer and prompt rendering are the corpus task's."""
    sets = _sets(sets)
    if task_name != "corpus":
        raise ValueError(f"eval.sets needs a corpus task (questions rendered and checked like "
                         f"the training corpus), not task.name={task_name!r}")
    cfg = corpus.resolve({k: v for k, v in dict(task_cfg).items() if k != "name"})
    render = corpus.prompt_renderer(cfg)
    prompts: list[base.Prompt] = []
    stats = corpus.new_stats()
    for name, path in sets.items():
        # benchmark files carry their own format (plain rows from prepare_benchmarks.py); a
        # Hugging Face id's rows are converted from the benchmark's schema (benchmark_rows)
        rows = benchmarks.benchmark_rows(name, path)  # None: a local path
        records = corpus.read_records({**cfg, "max_rows": None, "format": "auto",
                                       "prompt_key": "prompt", "answer_key": None}, path=path,
                                      rows=rows)
        stats["rows"] += len(records)
        got = corpus.to_prompts(records, cfg, f"eval/{name}", stats, set(), render, bucket=name)
        if not got:
            raise ValueError(f"eval.sets.{name}={path}: no row with a prompt and an answer")
        prompts += [p for p, _ in got]
    cfg["reward"] = cfg["eval_reward"] or cfg["reward"]  # e.g. HeaPA's evaluation matcher
    scorer = corpus.make_scorer(cfg)
    return base.Task(name="eval_suite", train=[], eval=prompts, buckets=list(sets),
                     verifier=corpus.make_verifier(cfg), stats=stats, config=cfg,
                     scorer=scorer, verify_workers=cfg["verify_workers"],
                     verify_timeout_s=float(cfg["verify_timeout_s"]))


def evaluate(sampler, params, tokenizer, task: base.Task, eval_cfg, *, seed: int,
             max_new_tokens: int | None = None) -> tuple[dict[str, float], np.ndarray]:
    """(metrics, per-prompt correct counts) of `task.eval` under the `config.eval` protocol;
    for a suite of more than one benchmark (`eval.sets`), also the unweighted mean over them
    (`.../bench_mean`; a task's own difficulty buckets get none, their pooled `all` is it)."""
    from frontier_rl import evaluation

    cap = int(eval_cfg.get("max_new_tokens", 0) or 0) or max_new_tokens
    k, pass_k = eval_cfg.k, passk.resolve(eval_cfg)
    metrics, counts = evaluation.evaluate(
        sampler, params, tokenizer, task.eval, task.verify, k=k,
        temperature=eval_cfg.temperature, top_p=eval_cfg.top_p,
        top_k=eval_cfg.get("top_k", -1), greedy=eval_cfg.greedy,
        seed=seed, per_prompt=True, verify_many=task.verify_many, max_new_tokens=cap,
        pass_k=pass_k)
    buckets = list(dict.fromkeys(p.bucket for p in task.eval))
    if eval_cfg.get("sets") and len(buckets) > 1:
        for m in (f"avg@{k}", f"pass@{k}", passk.metric(pass_k, k), f"invalid@{k}",
                  "response_len"):
            metrics[f"eval/{m}/bench_mean"] = float(np.mean([metrics[f"eval/{m}/{b}"]
                                                             for b in buckets]))
    return metrics, counts


# How a bucket without eval prompts is shown. Its accuracy is undefined, not 0: `evaluate`
# records no metric for it (absent from metrics.jsonl), so it is in no average either (`all`
# pools the prompts there are, `bench_mean` the benchmarks that have prompts).
NO_PROMPTS = "no prompts"


def bucket_accuracy(metrics: Mapping[str, float], bucket: str, k: int, empty,
                    digits: int = 1) -> str:
    """A bucket's Avg@k as printed: NO_PROMPTS for a bucket in `empty` (the eval set has no
    prompt in it), else its value ("nan" before the first evaluation of a resumed run)."""
    if bucket in empty:
        return NO_PROMPTS
    return f"{metrics.get(f'eval/avg@{k}/{bucket}', float('nan')):.{digits}f}"


class Evaluator:
    """A run's held-out evaluation: when it is due and what it measures.

    `run(params, step)` makes the engine serve `params` (an external engine is synced: the
    evaluation measures the current policy, never a stale one), evaluates `task.eval` under
    `eval_cfg` and keeps the per-prompt correct counts in `counts` (what a comparison's
    intervals are computed from). `due` is true every `eval.every` steps, each time the
    cumulative rollouts cross a multiple of `eval.every_rollouts`, and at the last step.
    `empty`: the task's buckets with no eval prompt, which get no metric (NO_PROMPTS)."""

    def __init__(self, engine, tokenizer, task: base.Task, eval_cfg, *, seed: int):
        passk.resolve(eval_cfg)  # a bad eval.pass_k stops the run before it trains
        self.engine, self.tokenizer, self.task, self.cfg = engine, tokenizer, task, eval_cfg
        self.seed = seed
        self.counts: list[int] = []
        self.empty = task.empty_buckets("eval")

    def run(self, params, step: int) -> dict[str, float]:
        from frontier_rl.rollout.engine import EngineError
        from frontier_rl.run.errors import RunError

        try:
            self.engine.ensure(params, step)
        except EngineError as e:
            raise RunError(f"evaluation at step {step}: {e}") from None
        ev, counts = evaluate(self.engine, params, self.tokenizer, self.task, self.cfg,
                              seed=self.seed)
        self.counts = counts.tolist()
        return ev

    def due(self, step: int, rollouts_before: int, rollouts_after: int, last: bool) -> bool:
        every, every_r = self.cfg.every, self.cfg.every_rollouts
        crossed = every_r and rollouts_after // every_r > rollouts_before // every_r
        return bool((every and step % every == 0) or crossed or last)


def table(metrics: Mapping[str, float], task: base.Task, k: int, pass_k: int = 0) -> list[dict]:
    """One row per benchmark (in suite order), then the unweighted mean and the pooled row;
    `pass_k` is the j of the unbiased pass@j column (0 = k)."""
    pass_k = pass_k or k
    sizes: dict[str, int] = {}
    for p in task.eval:
        sizes[p.bucket] = sizes.get(p.bucket, 0) + 1
    rows = []
    names = list(sizes)
    for b in [*names, "bench_mean", "all"]:
        if f"eval/avg@{k}/{b}" not in metrics:
            continue
        rows.append({
            "benchmark": {"bench_mean": "mean (unweighted)", "all": "all (pooled)"}.get(b, b),
            "questions": sizes.get(b, len(task.eval) if b in ("all", "bench_mean") else 0),
            f"avg@{k}": metrics[f"eval/avg@{k}/{b}"],
            f"pass@{k}": metrics[f"eval/pass@{k}/{b}"],
            passk.label(pass_k, k): metrics[f"eval/{passk.metric(pass_k, k)}/{b}"],
            "response_len": metrics[f"eval/response_len/{b}"],
            "invalid": metrics[f"eval/invalid@{k}/{b}"],
        })
    return rows


def markdown(rows: list[dict], k: int, title: str, pass_k: int = 0) -> str:
    """The table: pass@k is any correct of the k samples, the unbiased column Chen et al.'s
    estimate of pass@j from them (evaluation/passk.py)."""
    unbiased = passk.label(pass_k or k, k)
    lines = [f"# {title}", "",
             f"| benchmark | questions | Avg@{k} | pass@{k} (any of {k}) | {unbiased} | mean "
             "response length (tokens) | invalid % |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['benchmark']} | {r['questions']} | {r[f'avg@{k}']:.1f} | "
                     f"{r[f'pass@{k}']:.1f} | {r[unbiased]:.1f} | {r['response_len']:.1f} | "
                     f"{r['invalid']:.1f} |")
    return "\n".join(lines) + "\n"


def write(rows: list[dict], out_dir: str, k: int, title: str, extra: dict,
          pass_k: int = 0) -> tuple[str, str]:
    """DIR/eval.md and DIR/eval.json."""
    os.makedirs(out_dir, exist_ok=True)
    md, js = os.path.join(out_dir, "eval.md"), os.path.join(out_dir, "eval.json")
    statefile.write_json(md, None, text=markdown(rows, k, title, pass_k))
    statefile.write_json(js, {"k": k, "pass_k": pass_k or k, "rows": rows, **extra}, indent=2)
    return md, js


# ----------------------------------------------------------------------------- the command


def run(config, workdir: str, *, step: int | None = None, model: str | None = None) -> dict:
    """`frontier-rl eval`: evaluates a run's checkpoint (or the HF checkpoint `model`) on the
    config's eval suite (or its task's held-out split) and writes the table."""
    from frontier_rl import config_lib, policy, tasks
    from frontier_rl.fit.shapes import PROMPT_BUCKETS
    from frontier_rl.rl import sharding
    from frontier_rl.rollout.sampler import Sampler
    from frontier_rl.run.errors import RunError

    if not workdir:
        raise RunError("--workdir is required (the run to evaluate, or with --model the "
                             "directory to write the table to)")
    workdir = os.path.abspath(workdir)
    if model:
        with config.unlocked():  # linked fields (chat_template) follow; an id stays an id
            config.model.path = model if hub.is_id(model) else os.path.abspath(model)
    config_lib.validate(config)
    mesh = sharding.meshes_of(config.mesh)[0]  # the trainer's (with mesh.rollout, its half)
    if model:
        model_dir = hub.model_dir(config.model.path, "--model")
        graphdef, params, mcfg = policy.load(model_dir, config, mesh)
        from frontier_rl.models import hf

        tokenizer = hf.load_tokenizer(model_dir)
        ref = hub.parse(model)
        label = (f"{ref.repo.split('/')[1]}@{os.path.basename(model_dir)[:12]}" if ref
                 else os.path.basename(os.path.normpath(model)))
    else:
        graphdef, params, mcfg, tokenizer, step = policy.restore(workdir, step, config)
        label = f"step_{step}"
    task_cfg = {k: v for k, v in config.task.items() if k != "name"}
    if config.eval.get("sets"):
        task = suite_task(config.task.name, task_cfg, config.eval.sets)
    else:
        task = tasks.make_task(config.task.name, task_cfg, config.seed)
    sampler = Sampler(graphdef, mcfg, eos_id=policy.stop_ids(mcfg, tokenizer),
                      pad_id=tokenizer.pad_token_id, prompt_buckets=PROMPT_BUCKETS,
                      max_new_tokens=config.rollout.max_new_tokens, mesh=mesh)
    metrics, _ = evaluate(sampler, params, tokenizer, task, config.eval, seed=config.seed + 7,
                          max_new_tokens=config.rollout.max_new_tokens)
    k, pass_k = config.eval.k, passk.resolve(config.eval)
    rows = table(metrics, task, k, pass_k)
    title = (f"Evaluation of {model or workdir} ({label}): Avg@{k} at T={config.eval.temperature}"
             f", top-p={config.eval.top_p}"
             + (f", top-k={config.eval.top_k}" if config.eval.top_k >= 1 else ""))
    md, js = write(rows, os.path.join(workdir, "eval", label), k, title,
                   {"label": label, "metrics": metrics, "model": model or "",
                    "workdir": workdir, "sets": _sets(config.eval.get("sets")),
                    "hub": hub.sources(config)},  # the ids read, at their commits
                   pass_k)
    print(markdown(rows, k, title, pass_k))
    print(f"wrote {md} and {js}")
    return {"rows": rows, "metrics": metrics, "markdown": md, "json": js}
