"""Real question/answer corpora as a task: make_task("corpus", cfg, seed).

`cfg.path` is a local .jsonl or .parquet file, "tfds:<name>" for a corpus prepared with
`frontier-rl data prepare` (TensorFlow Datasets, array_record, read through `tfds.data_source`,
which needs no tensorflow; `as_dataset()` is never used), or a Hugging Face dataset id
`org/name[@revision][:pattern]`: its .parquet / .jsonl files (the train split's when the file
names mark one) fetched into the hub's cache and read here, without the `datasets` library
(frontier_rl/hub.py; a path that exists is always a path). Two row formats (`format="auto"`
tells them apart by the first row):

- verl: `prompt` is a list of chat messages ({"role", "content"}), the reference answer is
  `reward_model.ground_truth`, with `data_source` and `extra_info` beside them (DAPO-Math-17k,
  verl's MATH and DeepScaleR preprocessings);
- plain: `prompt` is the question text and `answer` the reference ({"prompt", "answer"}).

Each row becomes chat messages and then the prompt text (tasks/chat.py): `prompt_template` and
`instruction` wrap the question, `system_prompt` sets the system message, and with
`chat_template` (a local model or tokenizer directory, or a model's Hugging Face id: usually the
policy's, `model.path`) transformers' `apply_chat_template` renders them, ending with the
assistant's turn.

Rows without an answer (missing / None / empty) are skipped and counted in
task.stats["skipped_no_answer"]; rows without a prompt likewise in "skipped_no_prompt". Repeated
prompt texts are kept once. Eval is a seeded random `eval_fraction` of the rows (or, for TFDS,
`eval_split` if given), disjoint from train by text; `eval.sets` in the run config replaces it
with benchmark files (frontier_rl/evaluation/suite.py). GSM8K-style answers ("rationale #### 72")
are reduced to the part after the last "####".

The reward, a named variant (`reward`, `REWARDS`): how a response is scored and what each
outcome is worth (correct / extracted but wrong / invalid):

- "ternary": `verifier` scores, "math_verify" or "numeric"; rewards 1 / 0 / -1. "math_verify"
  is math-verify's extraction from the whole response against the reference, LaTeX-aware:
  correct exactly where verl's `math_verify.compute_score` is
  (tests/test_verl_reward_conformance.py); with `require_boxed` a response without a complete
  \\boxed{} is invalid. It does not read the last box alone: boxes that text joins (a comma,
  "and", "or", words between them) are read as one set, so "First \\boxed{3}, corrected:
  \\boxed{5}" is wrong for the answer 5; a box takes precedence over an "Answer:" line.
- "hive": GRESO's `latex_math` scorer, which HIVE trains and evaluates with (the last \\boxed{},
  math-verify); rewards 1.0 / 0.1 / 0.0 (HIVE App. B; GRESO's code).
- "heapa": HeaPA's released training reward (`math_dapo`: the last "Answer:" line of the final
  300 characters, Minerva-normalised, string equality); rewards +1 / -1 / -1 (HeaPA's code).
  HeaPA's `math_dapo` is verl 0.9.0's; verl 0.9.1 falls back to a \\boxed{} when no "Answer:"
  line is found, which this variant does not.
- "heapa_sympy": the same line and normalisation with sympy / float equality as a fallback:
  HeaPA's evaluation script (`eval_avg_at_k_multi.py`); for `eval_reward`.

`eval_reward` ("" = `reward`) scores the benchmark suite (eval.sets). Every scorer is picklable,
so the trainer checks responses in `verify_workers` processes with a `verify_timeout_s` bound
per response (tasks/verify_pool.py).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping

from frontier_rl import hub
from frontier_rl.tasks import base, chat
from frontier_rl.tasks.verify import (
    answer_line_reward,
    boxed_latex_reward,
    math_verify_reward,
    numeric_reward,
)

DEFAULTS = dict(
    path=None,  # .jsonl / .parquet file, "tfds:<name>" or a Hugging Face dataset id
    format="auto",  # "verl" (chat-message prompts), "plain" ({prompt, answer}) or "auto"
    prompt_key="prompt",  # dotted keys reach into nested rows ("question.text")
    answer_key=None,  # None = the format's: "reward_model.ground_truth" (verl) / "answer"
    eval_fraction=0.1,
    reward="ternary",  # the named reward variant (REWARDS): "ternary", "hive", "heapa"
    eval_reward="",  # the benchmark suite's variant; "" = reward's
    verifier="math_verify",  # reward "ternary": "math_verify" or "numeric"
    require_boxed=True,  # math_verify: a response without \boxed{} is invalid (-1)
    prompt_template="{prompt}",  # wraps the question, e.g. "Problem: {prompt}"
    instruction="",  # appended after the question, e.g. chat.BOXED_STEP_BY_STEP
    system_prompt=None,  # None keeps the row's system message (or the template's default)
    chat_template="",  # directory whose tokenizer's chat template renders the prompt
    # The response a warm start teaches for an answer ("{answer}" is replaced); None = what the
    # verifier needs: \boxed{<answer>} for math_verify, "Answer: <answer>" for numeric.
    response_template=None,
    bucket_key=None,  # field giving a difficulty bucket ("level", "data_source"); None = "all"
    id_prefix=None,  # ids are "<id_prefix>/<row>"; None = file stem or TFDS name
    max_rows=None,  # read at most this many rows per split (quick experiments)
    split="train",  # TFDS only
    eval_split=None,  # TFDS only: take eval from this split instead of eval_fraction
    data_dir=None,  # TFDS only (default: ~/tensorflow_datasets)
    download=False,  # TFDS only: never reach the network unless asked to
    verify_workers=2,  # processes checking answers (0 = in the trainer, no timeout)
    verify_timeout_s=10.0,  # a check running longer scores wrong (rollout/verify_timeouts)
    seed_offset=0,
    data_seed=None,
)

FORMATS = ("auto", "verl", "plain")
VERIFIERS = ("math_verify", "numeric")
# reward variant -> (reward of a correct, a wrong, an invalid response) (module docstring)
REWARDS = {"ternary": (1.0, 0.0, -1.0), "hive": (1.0, 0.1, 0.0), "heapa": (1.0, -1.0, -1.0),
           "heapa_sympy": (1.0, -1.0, -1.0)}
# What each verifier scores correct for a reference answer (format_response).
RESPONSE_TEMPLATES = {"math_verify": "\\boxed{{{answer}}}", "numeric": "Answer: {answer}"}
ANSWER_KEYS = {"verl": "reward_model.ground_truth", "plain": "answer"}


def _check(cfg: dict) -> None:
    if cfg["format"] not in FORMATS:
        raise ValueError(f"task.format={cfg['format']!r} is not one of {FORMATS}")
    if cfg["reward"] not in REWARDS:
        raise ValueError(f"task.reward={cfg['reward']!r} is not one of {list(REWARDS)}")
    if cfg["eval_reward"] and cfg["eval_reward"] not in REWARDS:
        raise ValueError(f"task.eval_reward={cfg['eval_reward']!r} is not '' (= task.reward) "
                         f"or one of {list(REWARDS)}")
    if cfg["verifier"] not in VERIFIERS:
        raise ValueError(f"task.verifier={cfg['verifier']!r} is not one of {VERIFIERS}")
    w = cfg["verify_workers"]
    if not (isinstance(w, int) and not isinstance(w, bool) and 0 <= w <= 256):
        raise ValueError(f"task.verify_workers={w!r} is not allowed: an integer in [0, 256]")
    t = cfg["verify_timeout_s"]
    if not (isinstance(t, int | float) and not isinstance(t, bool) and t > 0):
        raise ValueError(f"task.verify_timeout_s={t!r} is not allowed: a number > 0 (seconds)")
    template = cfg["response_template"]
    if template is not None and "{answer}" not in str(template):
        raise ValueError(f"task.response_template={template!r} has no '{{answer}}'")
    if "{prompt}" not in str(cfg["prompt_template"]):
        raise ValueError(f"task.prompt_template={cfg['prompt_template']!r} has no '{{prompt}}'")
    if not isinstance(cfg["chat_template"], str):
        raise ValueError(f"task.chat_template={cfg['chat_template']!r} is not allowed: a "
                         "directory path ('' = no chat template)")


# ----------------------------------------------------------------------------- reading


def _read_jsonl(path: str) -> list[dict]:
    rows = []
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not UTF-8 (byte {raw[e.start]:#04x} at "
                                 f"column {e.start + 1})") from None
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: invalid JSON ({e.msg})") from None
    return rows


def _read_tfds(name: str, split: str, cfg: Mapping) -> list[dict]:
    import tensorflow_datasets as tfds

    try:
        source = tfds.data_source(name, split=split, data_dir=cfg.get("data_dir") or None,
                                  download=cfg.get("download", False))
    except Exception as e:  # tfds raises many types; the caller needs name, split and cause
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"Could not open TFDS dataset {name!r} split {split!r} "
                         f"(data_dir={cfg.get('data_dir')}): {first_line}") from e
    n = len(source) if cfg.get("max_rows") is None else min(len(source), cfg["max_rows"])
    return [source[i] for i in range(n)]


def read_file(path: str, max_rows: int | None = None) -> list[dict]:
    """Raw rows of a local .jsonl or .parquet file."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Corpus file not found: {path}")
    if path.endswith(".jsonl"):
        rows = _read_jsonl(path)
    elif path.endswith(".parquet"):
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
    else:
        raise ValueError(f"Unsupported corpus file {path} (expected .jsonl or .parquet).")
    return rows if max_rows is None else rows[:max_rows]


def load_rows(cfg: Mapping, split: str | None = None) -> list[dict]:
    """Raw rows of `cfg["path"]` (for TFDS, of `split`, default cfg["split"])."""
    path = cfg["path"]
    if not path:
        raise ValueError("corpus task needs cfg.path (.jsonl, .parquet or tfds:<name>).")
    if path.startswith("tfds:"):
        return _read_tfds(path[len("tfds:"):], split or cfg["split"], cfg)
    files = hub.dataset_files(path, "task.path")  # None: a local path
    if files is not None:
        rows = [row for f in files for row in read_file(f)]
        return rows if cfg.get("max_rows") is None else rows[:cfg["max_rows"]]
    return read_file(path, cfg.get("max_rows"))


def _get(row: Mapping, key: str):
    """row["a.b"] -> row["a"]["b"]; None if any part is missing. TFDS bytes become str."""
    value = row
    for part in key.split("."):
        if isinstance(value, str) and value.startswith("{"):  # a JSON object stored as text
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                return None
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


def detect_format(rows: list[dict], prompt_key: str = "prompt") -> str:
    """"verl" if the first row's prompt is a list of chat messages (or a prepared corpus's
    `messages`), else "plain"."""
    if not rows:
        return "plain"
    row = rows[0]
    if "messages" in row and prompt_key not in row:
        return "verl"
    return "verl" if chat.is_messages(_get(row, prompt_key)) else "plain"


def normalize(row: Mapping, cfg: Mapping, fmt: str) -> dict:
    """One row as {messages, answer, data_source, extra_info}: the schema every reader returns
    and `data prepare` stores. messages is None when the row has no usable prompt."""
    if "messages" in row and cfg.get("prompt_key", "prompt") not in row:  # a prepared corpus
        raw = _get(row, "messages")
        messages = chat.to_messages(json.loads(raw)) if raw else None
        extra = _get(row, "extra_info")
        return {"messages": messages, "answer": _canonical_answer(_get(row, "answer")),
                "data_source": _get(row, "data_source") or "",
                "extra_info": json.loads(extra) if isinstance(extra, str) and extra else {}}
    prompt = _get(row, cfg.get("prompt_key") or "prompt")
    answer_key = cfg.get("answer_key") or ANSWER_KEYS[fmt]
    try:
        messages = (chat.to_messages(prompt) if prompt is not None and str(prompt).strip()
                    else None)
    except ValueError:
        messages = None
    extra = row.get("extra_info") if isinstance(row, Mapping) else None
    return {"messages": messages, "answer": _canonical_answer(_get(row, answer_key)),
            "data_source": str(_get(row, "data_source") or ""),
            "extra_info": extra if isinstance(extra, Mapping) else {}}


def read_records(cfg: Mapping, path: str | None = None, split: str | None = None,
                 rows: list[dict] | None = None) -> list[dict]:
    """Normalized records of a file (`path`, default cfg["path"]), or of `rows` already read,
    each with its `row`."""
    c = dict(cfg)
    if path is not None:
        c["path"] = path
    if rows is None:
        rows = load_rows(c, split)
    fmt = cfg.get("format", "auto")
    if fmt == "auto":
        fmt = detect_format(rows, cfg.get("prompt_key") or "prompt")
    out = []
    for i, row in enumerate(rows):
        rec = normalize(row, c, fmt)
        rec["row"] = i
        rec["raw"] = row
        out.append(rec)
    return out


# ----------------------------------------------------------------------------- prompts


def prompt_renderer(cfg: Mapping):
    """messages -> prompt text, with the config's template, instruction, system prompt and
    chat template."""
    tok = (chat.load_chat_tokenizer(hub.model_dir(str(cfg["chat_template"]),
                                                  "task.chat_template"))
           if cfg.get("chat_template") else None)

    def render(messages: chat.Messages) -> str:
        shaped = chat.shape_messages(messages, prompt_template=cfg.get("prompt_template",
                                                                       "{prompt}"),
                                     instruction=cfg.get("instruction", ""),
                                     system_prompt=cfg.get("system_prompt"))
        return chat.render(shaped, tok)

    return render


def prompt_wrapper(render) -> str:
    """The prompt text `render` gives one user message, with "{prompt}" standing for its
    content and every other brace doubled: a template for str.format."""
    marker = "\x00QUESTION\x00"
    text = render([{"role": "user", "content": marker}])
    return text.replace("{", "{{").replace("}", "}}").replace(marker, "{prompt}")


def to_prompts(records: list[dict], cfg: Mapping, prefix: str, stats: dict, seen: set[str],
               render=None, bucket: str | None = None) -> list[tuple[base.Prompt, object]]:
    """Valid, new records as (prompt, raw bucket value); updates `stats` and `seen`. `bucket`
    fixes every prompt's bucket (an eval suite's benchmark name)."""
    render = render or prompt_renderer(cfg)
    out = []
    for rec in records:
        if rec["messages"] is None:
            stats["skipped_no_prompt"] += 1
            continue
        if rec["answer"] is None:
            stats["skipped_no_answer"] += 1
            continue
        text = render(rec["messages"])
        if text in seen:
            stats["duplicates"] += 1
            continue
        seen.add(text)
        if bucket is not None:
            value = bucket
        elif cfg.get("bucket_key") is None:
            value = "all"
        elif cfg["bucket_key"] == "data_source":
            value = rec["data_source"]
        else:
            value = _get(rec["raw"], cfg["bucket_key"])
        i = rec["row"]
        p = base.Prompt(id=f"{prefix}/{i:06d}", text=text, answer=rec["answer"],
                        bucket=str(value),
                        meta={"row": i, "data_source": rec["data_source"],
                              "question": chat.question(rec["messages"])})
        out.append((p, value))
    return out


def new_stats() -> dict:
    return {"rows": 0, "skipped_no_answer": 0, "skipped_no_prompt": 0, "duplicates": 0}


# ----------------------------------------------------------------------------- verifiers


def make_scorer(cfg: Mapping):
    """The picklable (response, answer, finished) -> outcome of cfg["reward"] (and, for
    "ternary", cfg["verifier"])."""
    if cfg["reward"] == "hive":
        return boxed_latex_reward
    if cfg["reward"] in ("heapa", "heapa_sympy"):
        return functools.partial(answer_line_reward, sympy=cfg["reward"] == "heapa_sympy")
    if cfg["verifier"] == "math_verify":
        return functools.partial(math_verify_reward, require_boxed=cfg["require_boxed"])
    if cfg["verifier"] == "numeric":
        return numeric_reward
    raise ValueError(f"Unknown verifier {cfg['verifier']!r}; use 'math_verify' or 'numeric'.")


def response_template(cfg: Mapping) -> str:
    """What the reward scores correct for "{answer}": a box, or an "Answer:" line."""
    if cfg["reward"] == "hive":
        return RESPONSE_TEMPLATES["math_verify"]
    if cfg["reward"] in ("heapa", "heapa_sympy"):
        return "Answer: {answer}"
    return RESPONSE_TEMPLATES[cfg["verifier"]]


def make_verifier(cfg: Mapping) -> base.Verifier:
    reward = make_scorer(cfg)

    def verifier(prompt: base.Prompt, response: str, finished: bool = True) -> int:
        return reward(response, prompt.answer, finished=finished)

    return verifier


def resolve(cfg: Mapping) -> dict:
    """The corpus fields with defaults filled in and checked."""
    cfg = base.resolve_config(cfg, DEFAULTS, "corpus")
    _check(cfg)
    return cfg


@base.register_task("corpus", DEFAULTS, check=_check)
def make_corpus_task(cfg: dict, seed: int) -> base.Task:
    """Builds a task from a local corpus; see DEFAULTS for the knobs."""
    cfg = resolve(cfg)
    cfg["data_seed"] = dseed = base.data_seed(cfg, seed)
    path = str(cfg["path"] or "")
    is_tfds = path.startswith("tfds:")
    ref = hub.parse(path)
    name = cfg["id_prefix"] or (path[len("tfds:"):] if is_tfds else ref.repo.split("/")[1]
                                if ref else os.path.splitext(os.path.basename(path))[0])
    stats = new_stats()
    seen: set[str] = set()
    render = prompt_renderer(cfg)

    records = read_records(cfg)
    stats["rows"] = len(records)
    prefix = f"{name}/{cfg['split']}" if is_tfds else name
    train = to_prompts(records, cfg, prefix, stats, seen, render)
    if is_tfds and cfg["eval_split"]:
        eval_records = read_records(cfg, split=cfg["eval_split"])
        stats["rows"] += len(eval_records)
        evals = to_prompts(eval_records, cfg, f"{name}/{cfg['eval_split']}", stats, seen, render)
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
    template = cfg["response_template"] or response_template(cfg)
    return base.Task(name=f"corpus:{name}", train=[p for p, _ in train],
                     eval=[p for p, _ in evals], buckets=buckets, verifier=make_verifier(cfg),
                     stats=stats, config=cfg, response_template=template,
                     scorer=make_scorer(cfg), verify_workers=cfg["verify_workers"],
                     verify_timeout_s=float(cfg["verify_timeout_s"]),
                     prompt_wrapper=prompt_wrapper(render), reward_values=REWARDS[cfg["reward"]])
