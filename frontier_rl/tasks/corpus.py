"""Real question/answer corpora as a task: make_task("corpus", cfg, seed).

`cfg.path` is a local .jsonl or .parquet file, or "tfds:<name>" for a prepared TensorFlow
Datasets dataset. TFDS is read only through its data-source (array_record) API, which works
without tensorflow; `as_dataset()` would need tensorflow and is never used.

Rows without an answer (missing / None / empty) are skipped and counted in
task.stats["skipped_no_answer"]; rows without a prompt likewise in "skipped_no_prompt". Repeated
prompt texts are kept once. Eval is a seeded random `eval_fraction` of the rows (or, for TFDS,
`eval_split` if given), disjoint from train by text. GSM8K-style answers ("rationale #### 72")
are reduced to the part after the last "####".
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping

from frontier_rl.tasks import base
from frontier_rl.tasks.verify import math_verify_reward, numeric_reward

DEFAULTS = dict(
    path=None,  # .jsonl / .parquet file, or "tfds:<name>"
    prompt_key="prompt",  # dotted keys reach into nested rows ("question.text")
    answer_key="answer",
    eval_fraction=0.1,
    verifier="math_verify",  # or "numeric"
    require_boxed=True,  # math_verify: a response without \boxed{} is invalid (-1)
    prompt_template="{prompt}",  # e.g. "{prompt}\nPut the final answer in \\boxed{{}}."
    # The response a warm start teaches for an answer ("{answer}" is replaced); None = what the
    # verifier needs: \boxed{<answer>} for math_verify, "Answer: <answer>" for numeric.
    response_template=None,
    bucket_key=None,  # column giving a difficulty bucket (e.g. "level"); None = "all"
    id_prefix=None,  # ids are "<id_prefix>/<row>"; None = file stem or TFDS name
    max_rows=None,  # read at most this many rows per split (quick experiments)
    split="train",  # TFDS only
    eval_split=None,  # TFDS only: take eval from this split instead of eval_fraction
    data_dir=None,  # TFDS only
    download=False,  # TFDS only: never reach the network unless asked to
    seed_offset=0,
    data_seed=None,
)


# What each verifier scores correct for a reference answer (format_response).
RESPONSE_TEMPLATES = {"math_verify": "\\boxed{{{answer}}}", "numeric": "Answer: {answer}"}


def _read_jsonl(path: str) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: invalid JSON ({e.msg})") from None
    return rows


def _read_tfds(name: str, split: str, cfg: dict) -> list[dict]:
    import tensorflow_datasets as tfds

    try:
        source = tfds.data_source(name, split=split, data_dir=cfg["data_dir"],
                                  download=cfg["download"])
    except Exception as e:  # tfds raises many types; the caller needs name, split and cause
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"Could not open TFDS dataset {name!r} split {split!r} "
                         f"(data_dir={cfg['data_dir']}): {first_line}") from e
    n = len(source) if cfg["max_rows"] is None else min(len(source), cfg["max_rows"])
    return [source[i] for i in range(n)]


def load_rows(cfg: Mapping, split: str | None = None) -> list[dict]:
    """Raw rows of `cfg["path"]` (for TFDS, of `split`, default cfg["split"])."""
    path = cfg["path"]
    if not path:
        raise ValueError("corpus task needs cfg.path (.jsonl, .parquet or tfds:<name>).")
    if path.startswith("tfds:"):
        return _read_tfds(path[len("tfds:"):], split or cfg["split"], dict(cfg))
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Corpus file not found: {path}")
    if path.endswith(".jsonl"):
        rows = _read_jsonl(path)
    elif path.endswith(".parquet"):
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
    else:
        raise ValueError(f"Unsupported corpus file {path} (expected .jsonl or .parquet).")
    return rows if cfg["max_rows"] is None else rows[: cfg["max_rows"]]


def _get(row: Mapping, key: str):
    """row["a.b"] -> row["a"]["b"]; None if any part is missing. TFDS bytes become str."""
    value = row
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:  # numpy scalar
        value = value.item()
    return value


def _canonical_answer(value) -> str | None:
    if value is None:
        return None
    text = str(value)
    if "####" in text:
        text = text.rsplit("####", 1)[1]
    text = text.strip()
    return text or None


def _make_verifier(cfg: dict) -> base.Verifier:
    if cfg["verifier"] == "math_verify":
        reward = functools.partial(math_verify_reward, require_boxed=cfg["require_boxed"])
    elif cfg["verifier"] == "numeric":
        reward = numeric_reward
    else:
        raise ValueError(f"Unknown verifier {cfg['verifier']!r}; use 'math_verify' or 'numeric'.")

    def verifier(prompt: base.Prompt, response: str, finished: bool = True) -> int:
        return reward(response, prompt.answer, finished=finished)

    return verifier


def _to_prompts(rows: list[dict], cfg: dict, prefix: str, stats: dict,
                seen: set[str]) -> list[tuple[base.Prompt, object]]:
    """Valid, new rows as (prompt, raw bucket value); updates `stats` and `seen`."""
    out = []
    for i, row in enumerate(rows):
        prompt = _get(row, cfg["prompt_key"])
        answer = _canonical_answer(_get(row, cfg["answer_key"]))
        if prompt is None or not str(prompt).strip():
            stats["skipped_no_prompt"] += 1
            continue
        if answer is None:
            stats["skipped_no_answer"] += 1
            continue
        text = cfg["prompt_template"].format(prompt=prompt)
        if text in seen:
            stats["duplicates"] += 1
            continue
        seen.add(text)
        value = "all" if cfg["bucket_key"] is None else _get(row, cfg["bucket_key"])
        p = base.Prompt(id=f"{prefix}/{i:06d}", text=text, answer=answer, bucket=str(value),
                        meta={"row": i})
        out.append((p, value))
    return out


@base.register_task("corpus", DEFAULTS)
def make_corpus_task(cfg: dict, seed: int) -> base.Task:
    """Builds a task from a local corpus; see DEFAULTS for the knobs."""
    cfg = base.resolve_config(cfg, DEFAULTS, "corpus")
    cfg["data_seed"] = dseed = base.data_seed(cfg, seed)
    verifier = _make_verifier(cfg)
    path = str(cfg["path"] or "")
    is_tfds = path.startswith("tfds:")
    name = cfg["id_prefix"] or (path[len("tfds:"):] if is_tfds
                                else os.path.splitext(os.path.basename(path))[0])
    stats = {"rows": 0, "skipped_no_answer": 0, "skipped_no_prompt": 0, "duplicates": 0}
    seen: set[str] = set()

    rows = load_rows(cfg)
    stats["rows"] = len(rows)
    prefix = f"{name}/{cfg['split']}" if is_tfds else name
    train = _to_prompts(rows, cfg, prefix, stats, seen)
    if is_tfds and cfg["eval_split"]:
        eval_rows = load_rows(cfg, cfg["eval_split"])
        stats["rows"] += len(eval_rows)
        evals = _to_prompts(eval_rows, cfg, f"{name}/{cfg['eval_split']}", stats, seen)
    else:
        if not 0.0 <= cfg["eval_fraction"] < 1.0:
            raise ValueError(f"eval_fraction must be in [0, 1), got {cfg['eval_fraction']}.")
        n_eval = int(round(len(train) * cfg["eval_fraction"]))
        is_eval = set(base.rng(dseed).permutation(len(train))[:n_eval].tolist())
        evals = [x for i, x in enumerate(train) if i in is_eval]  # file order within each split
        train = [x for i, x in enumerate(train) if i not in is_eval]

    values = {}
    for p, value in train + evals:
        values.setdefault(p.bucket, value)
    numeric = all(isinstance(v, int | float) for v in values.values())
    buckets = sorted(values, key=lambda b: values[b] if numeric else b)
    template = cfg["response_template"] or RESPONSE_TEMPLATES[cfg["verifier"]]
    return base.Task(name=f"corpus:{name}", train=[p for p, _ in train],
                     eval=[p for p, _ in evals], buckets=buckets, verifier=verifier,
                     stats=stats, config=cfg, response_template=template)
