"""The math benchmarks of HeaPA's and HIVE's tables, converted from local copies to eval files.

Nothing is fetched here: download each benchmark yourself (the public source is given below), then

  python launch/prepare_benchmarks.py --src_dir=DOWNLOADS --out_dir=data/eval

writes DATA/eval/<name>.jsonl, one row per question: {"id", "prompt", "answer", "data_source"},
the plain format the corpus reader and `eval.sets` take. `eval.sets` also takes a benchmark's
Hugging Face dataset id (experiment/paper.py BENCHMARK_IDS): its files are fetched into the
hub's cache and converted here at run time (frontier_rl/hub.py `benchmark_rows`). The question
is the benchmark's own text; the instruction ("put the final answer in \\boxed{}") and chat
template are added at run time by the task config, exactly as for training prompts. A file
whose row count differs from the expected one is converted with a warning (a different release
or a partial download).

| name | public source (file) | rows | columns read |
|---|---|---|---|
| aime24 | HuggingFaceH4/aime_2024 (train parquet) | 30 | problem, answer |
| aime25 | math-ai/aime25 (test.jsonl) | 30 | problem, answer |
| amc23 | math-ai/amc23 (test.jsonl) | 40 | question, answer |
| aimo_amc | AI-MO/aimo-validation-amc (train parquet) | 83 | problem, answer |
| math500 | HuggingFaceH4/MATH-500 (test.jsonl) | 500 | problem, answer |
| minerva_math | math-ai/minervamath (test.jsonl) | 272 | question, answer |
| olympiadbench | Hothan/OlympiadBench OE_TO_maths_en_COMP | 675 | question, final_answer[0] |
| gpqa_diamond | Idavidrein/gpqa (gpqa_diamond.csv) | 198 | Question, Correct/Incorrect Answer* |
| gaokao2023en | MARIO-Math-Reasoning/Gaokao2023-Math-En (test.jsonl) | 385 | question, answer |

GPQA-Diamond is multiple choice: the four options are shuffled with a fixed seed per question
(the correct one is not always A), written as "(A) ... (D) ..." under the question, and the
answer is the letter. Alternative column spellings (Problem/Question, Answer) are accepted.

Training corpora: `dapo_math` converts DAPO-Math-17k's verl parquet (BytedTsinghua-SIA/
DAPO-Math-17k) to verl rows whose user message is the bare problem: DAPO's own instruction
("... The last line of your response should be of the form Answer: $Answer ..." and its
reminder) is removed, so a config can add the boxed instruction of the paper it follows.
Every corpus below is written the same way (bare problem, `reward_model.ground_truth`), from a
local copy in its public schema (launch/prepare_benchmarks.py has one flag per corpus):

- `math` (data/train/math.parquet): MATH train in the hendrycks MATH / lighteval MATH schema
  (problem, level, type, solution), every row, the answer being the content of the last
  `\\boxed{...}` of `solution` with its braces balanced. Source: GRESO's
  `examples/data_preprocess/lighteval_math.py` (xDAN2099/lighteval-MATH, its 7,500 train rows,
  verl's `last_boxed_only_string`).
- `dapo_math+math` (data/train/dapo_math_plus_math.parquet): HIVE's DAPO+MATH. GRESO's scripts
  list the two files as one training set (`train_files` of `train-scripts/math_qwen_*.sh`,
  Infini-AI-Lab/GRESO@b277843); here the DAPO rows are de-duplicated by problem text and a
  MATH row whose problem text is a DAPO problem is dropped (ours; `dapo_plus_math_rows` says
  why). GRESO's DAPO part is haizhongzheng/DAPO-Math-17K-cleaned (its
  `examples/data_preprocess/dapo_math.py`: the bare problem in `prompt`, the answer in
  `target`); that schema, open-r1/DAPO-Math-17k-Processed's and the original verl parquet are
  all read.
- `dapo_math_14k` (data/train/dapo_math_14k.parquet): HeaPA's "14kdapo". Rows with a CJK
  character in the prompt are dropped, then the first row of each `extra_info.index` is kept:
  HeaPA's `data/prepare_DAPO_training_dataset.py` (horizon-rl/HeaPA@82becbe).
- `openr1_math_30k` (data/train/openr1_math_30k.parquet): HIVE's 30k Open-R1 math subset. HIVE's
  appendix names its size, not how it was drawn; HIVE follows GRESO's setup, and GRESO's
  `examples/data_preprocess/openr1_math_default.py` takes the first 30,000 rows of
  open-r1/OpenR1-Math-220k (default config, train split), the default here. With a seed the
  subset is a seeded uniform draw instead (ours).
- `openr1_math_heapa` (data/train/openr1_math_heapa.parquet): HeaPA's OpenR1-Math (Table 1),
  the same split without problems of >= 500 whitespace-separated words and without problems or
  answers holding a non-ASCII character: HeaPA's `data/prepare_OpenR1_training_dataset.py`.
- `numina_math` (data/train/numina_math.parquet): the NuminaMath of arXiv 2608.17941's Table 1,
  whose text (variant, filtering, subset) was not read; the rule is ours. From
  AI-MO/NuminaMath-CoT (train split; problem, solution, source), the answer is the last
  `\\boxed{...}` of `solution` (as for `math`); rows without a problem or a closed box are
  skipped and counted (`no_boxed_answer`), then each problem is kept once by problem text
  (the first copy), then `NUMINA_SUBSET` = 30,000 of them are drawn by numpy's
  default_rng(seed 0) without replacement and kept in file order (n = 0: every one). Why a
  subset: 1.5M rollouts at 256 x 8 are ~730 steps, ~190k prompt visits for uniform selection,
  so on the ~860k rows a prompt would be seen about once, and the history-based selectors
  (GRESO, HIVE's Stage 1: a prompt's estimate needs an earlier visit of it) would hardly act;
  30,000 problems (the size of HIVE's Open-R1 subset) are each seen about six times.

"Problem text" is the bare problem with runs of whitespace collapsed to one space
(`normalize_problem`). The corpus reader drops repeats of a rendered prompt anyway
(tasks/corpus.py), so a duplicate left in a file would be dropped at run time.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import os
import re

import numpy as np

from frontier_rl import hub

log = logging.getLogger("frontier_rl")


@dataclasses.dataclass(frozen=True)
class Benchmark:
    name: str
    source: str  # public source, for the user's download
    files: tuple[str, ...]  # file names looked for under the benchmark's folder
    rows: int  # expected questions
    question: tuple[str, ...]  # candidate column names, first present wins
    answer: tuple[str, ...]


BENCHMARKS = {b.name: b for b in (
    Benchmark("aime24", "HuggingFaceH4/aime_2024", ("train.parquet", "aime_2024.jsonl",
                                                    "test.jsonl"), 30,
              ("problem", "Problem", "question"), ("answer", "Answer")),
    Benchmark("aime25", "math-ai/aime25", ("test.jsonl", "aime25.jsonl", "train.parquet"), 30,
              ("problem", "Problem", "question"), ("answer", "Answer")),
    Benchmark("amc23", "math-ai/amc23", ("test.jsonl", "amc23.jsonl"), 40,
              ("question", "problem", "Problem"), ("answer", "Answer")),
    # GRESO's AMC (examples/data_preprocess/test_amc.py), hence HIVE's: AMC 12 2022-2023.
    Benchmark("aimo_amc", "AI-MO/aimo-validation-amc", ("train.parquet", "aimo_amc.jsonl",
                                                        "test.jsonl"), 83,
              ("problem", "question"), ("answer",)),
    Benchmark("math500", "HuggingFaceH4/MATH-500", ("test.jsonl", "math500.jsonl"), 500,
              ("problem", "question"), ("answer",)),
    Benchmark("minerva_math", "math-ai/minervamath", ("test.jsonl", "minerva_math.jsonl"), 272,
              ("question", "problem"), ("answer",)),
    Benchmark("olympiadbench", "Hothan/OlympiadBench (OE_TO_maths_en_COMP)",
              ("train.parquet", "OE_TO_maths_en_COMP.parquet", "test.jsonl",
               "olympiadbench.jsonl"), 675, ("question", "problem"),
              ("final_answer", "answer")),
    Benchmark("gpqa_diamond", "Idavidrein/gpqa (gpqa_diamond.csv)",
              ("gpqa_diamond.csv",), 198, ("Question",), ("Correct Answer",)),
    Benchmark("gaokao2023en", "MARIO-Math-Reasoning/Gaokao2023-Math-En",
              ("test.jsonl", "gaokao2023en.jsonl"), 385, ("question", "problem"), ("answer",)),
)}

DAPO_PREFIX = re.compile(r"^\s*Solve the following math problem step by step\..*?"
                         r"answer to the problem\.\s*", re.S)
DAPO_SUFFIX = re.compile(r"\s*Remember to put your answer on its own line after "
                         r"\"Answer:\"\.?\s*$", re.S)


def read_table(path: str) -> list[dict]:
    """Rows of a .jsonl, .json (a list), .parquet or .csv file."""
    if path.endswith(".jsonl"):
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    if path.endswith(".json"):  # a list of rows, or one row (hendrycks MATH: a file a problem)
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return [data] if isinstance(data, dict) else list(data)
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    if path.endswith(".csv"):
        with open(path, encoding="utf-8", newline="") as f:
            return list(csv.DictReader(f))
    raise ValueError(f"{path}: expected .jsonl, .json, .parquet or .csv")


def _pick(row: dict, keys: tuple[str, ...], what: str, where: str):
    for k in keys:
        if k in row and row[k] is not None:
            return row[k]
    raise ValueError(f"{where}: a row has none of the {what} columns {list(keys)} "
                     f"(columns: {sorted(row)})")


def _answer_text(value) -> str:
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list | tuple):  # OlympiadBench: a list of final answers
        value = value[0] if value else ""
    if isinstance(value, float) and value.is_integer():  # AMC files store 142 as 142.0
        value = int(value)
    text = str(value).strip()
    if len(text) > 1 and text.startswith("$") and text.endswith("$"):
        text = text.strip("$").strip()
    return text


def gpqa_row(row: dict, index: int) -> tuple[str, str]:
    """(question with lettered options, correct letter); options shuffled by the row index."""
    options = [row["Correct Answer"], row["Incorrect Answer 1"], row["Incorrect Answer 2"],
               row["Incorrect Answer 3"]]
    order = np.random.default_rng([198, index]).permutation(4)
    letters = "ABCD"
    lines = [str(row["Question"]).strip(), ""]
    correct = ""
    for slot, k in enumerate(order):
        lines.append(f"({letters[slot]}) {str(options[k]).strip()}")
        if k == 0:
            correct = letters[slot]
    return "\n".join(lines), correct


def convert(name: str, path: str | list[str], check_rows: bool = True) -> list[dict]:
    """The eval rows of benchmark `name` read from the downloaded file `path` (or the files, in
    order: a Hugging Face dataset's shards, frontier_rl/hub.py)."""
    b = BENCHMARKS[name]
    paths = [path] if isinstance(path, str) else list(path)
    rows = [row for p in paths for row in read_table(p)]
    path = paths[0] if len(paths) == 1 else f"{paths[0]} (+{len(paths) - 1} files)"
    out = []
    for i, row in enumerate(rows):
        if name == "gpqa_diamond":
            question, answer = gpqa_row(row, i)
        else:
            question = str(_pick(row, b.question, "question", path)).strip()
            answer = _answer_text(_pick(row, b.answer, "answer", path))
        if not question or not answer:
            continue
        out.append({"id": f"{name}-{i:04d}", "prompt": question, "answer": answer,
                    "data_source": name})
    if check_rows and len(out) != b.rows:
        log.warning("%s: %d questions in %s, expected %d (another release or a partial copy)",
                    name, len(out), path, b.rows)
    return out


def find(src_dir: str, name: str) -> str | None:
    """The downloaded file of `name`: one of its file names under SRC/<name>/, else
    SRC/<name>.jsonl (.parquet, .csv, .json)."""
    for f in BENCHMARKS[name].files:
        path = os.path.join(src_dir, name, f)
        if os.path.isfile(path):
            return path
    for ext in (".jsonl", ".parquet", ".csv", ".json"):
        path = os.path.join(src_dir, name + ext)
        if os.path.isfile(path):
            return path
    return None


def write_jsonl(rows: list[dict], path: str) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


def prepare(src_dir: str, out_dir: str, names: list[str] | None = None,
            check_rows: bool = True) -> dict[str, str]:
    """Converts every benchmark found under `src_dir`; returns name -> written file. A named
    benchmark that is missing is an error; with names=None the missing ones are skipped."""
    wanted = names or list(BENCHMARKS)
    unknown = sorted(set(wanted) - set(BENCHMARKS))
    if unknown:
        raise ValueError(f"unknown benchmarks {unknown}; known: {sorted(BENCHMARKS)}")
    written = {}
    for name in wanted:
        path = find(src_dir, name)
        if path is None:
            if names:
                raise FileNotFoundError(
                    f"{name}: none of {list(BENCHMARKS[name].files)} under {src_dir}/{name}/ "
                    f"(download it from {BENCHMARKS[name].source})")
            continue
        written[name] = write_jsonl(convert(name, path, check_rows),
                                    os.path.join(out_dir, f"{name}.jsonl"))
    return written


def dapo_math_rows(rows: list[dict]) -> list[dict]:
    """DAPO-Math-17k verl rows with the bare problem as the user message (see the module
    docstring); every other field is kept. A row whose `prompt` is text (GRESO's
    DAPO-Math-17K-cleaned, open-r1's DAPO-Math-17k-Processed) becomes a new verl row."""
    out = []
    for i, row in enumerate(rows):
        if isinstance(row.get("prompt"), str):
            problem, answer, index = dapo_problem(row, i, "DAPO-Math-17k")
            out.append(verl_row(problem, answer, "math_dapo", index))
            continue
        msgs = row["prompt"].tolist() if hasattr(row["prompt"], "tolist") else row["prompt"]
        new = []
        for m in msgs:
            m = dict(m)
            if m.get("role") == "user":
                m["content"] = strip_dapo_instruction(m["content"])
            new.append(m)
        out.append({**row, "prompt": new})
    return out


def strip_dapo_instruction(text: str) -> str:
    """The bare problem of a DAPO-Math-17k user message (unchanged if it has no instruction)."""
    return DAPO_SUFFIX.sub("", DAPO_PREFIX.sub("", text)).strip()


# ---- training corpora (the module docstring lists each one's rule and source) ----

TRAIN_OUT = {
    "dapo_math": "data/train/dapo_math_17k.parquet",
    "math": "data/train/math.parquet",
    "dapo_math+math": "data/train/dapo_math_plus_math.parquet",
    "dapo_math_14k": "data/train/dapo_math_14k.parquet",
    "openr1_math_30k": "data/train/openr1_math_30k.parquet",
    "openr1_math_heapa": "data/train/openr1_math_heapa.parquet",
    "numina_math": "data/train/numina_math.parquet",
}
MATH_TRAIN_ROWS = 7500  # hendrycks MATH's train split (GRESO's `--train_size` default)
OPENR1_SUBSET = 30000  # HIVE App. B.1's Open-R1 subset; GRESO's `select(range(30000))`
OPENR1_MAX_WORDS = 500  # HeaPA drops OpenR1 problems of this many whitespace-separated words
NUMINA_SUBSET = 30000  # ours (module docstring): NuminaMath-CoT problems drawn for 1.5M rollouts
NUMINA_SEED = 0
# HeaPA's CJK test (data/prepare_DAPO_training_dataset.py): CJK ideographs (the basic block and
# extensions A-G), CJK symbols and punctuation, and half-/full-width forms.
CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\u3000-\u303f\uff00-\uffef"
                 "\U00020000-\U0002a6df\U0002a700-\U0002ceaf]")
NON_ASCII = re.compile(r"[^\x00-\x7f]")


def read_tables(path: str) -> list[dict]:
    """Rows of one file (read_table), or of every .parquet/.jsonl/.json/.csv file under a
    folder in sorted path order (a Hugging Face download's train-0000i-of-0000n shards, or the
    hendrycks MATH tree of one JSON file per problem)."""
    if not os.path.isdir(path):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such file or folder")
        return read_table(path)
    files = sorted(os.path.join(d, f) for d, _, names in os.walk(path) for f in names
                   if f.endswith((".parquet", ".jsonl", ".json", ".csv")))
    if not files:
        raise FileNotFoundError(f"{path}: no .parquet, .jsonl, .json or .csv file under it")
    return [row for f in files for row in read_table(f)]


def require_columns(rows: list[dict], columns: tuple[str, ...], path: str, what: str) -> None:
    """Raises, naming the file, the corpus and the row, when a row lacks one of `columns`."""
    if not rows:
        raise ValueError(f"{path}: no rows ({what})")
    for i, row in enumerate(rows):
        missing = [c for c in columns if c not in row]
        if missing:
            raise ValueError(f"{path}: row {i} has no column {missing} for {what} (expected "
                             f"{list(columns)}; columns: {sorted(row)})")


def normalize_problem(text: str) -> str:
    """The text duplicates are found by: the problem with runs of whitespace made one space."""
    return " ".join(str(text).split())


def last_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` of `text` with its braces balanced (`\\fbox{...}`
    when there is no `\\boxed`, and MATH's few `\\boxed 5$` up to the next `$`, as verl's
    `last_boxed_only_string`); None when there is none or its braces do not close."""
    cmd = "\\boxed"
    start = text.rfind(cmd)
    if start < 0:
        cmd = "\\fbox"
        start = text.rfind(cmd)
        if start < 0:
            return None
    i = start + len(cmd)
    if text.startswith(" ", i):
        return text[i + 1:].split("$")[0].strip() or None
    if not text.startswith("{", i):
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1:j].strip()
    return None


def verl_row(problem: str, answer: str, data_source: str, index, **extra) -> dict:
    """One training row in the project's verl format: the bare problem as the user message."""
    return {"data_source": data_source, "prompt": [{"role": "user", "content": problem}],
            "ability": "math", "reward_model": {"style": "rule", "ground_truth": answer},
            "extra_info": {"index": str(index), "split": "train", **extra}}


def write_parquet(rows: list[dict], path: str) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not rows:
        raise ValueError(f"{path}: no rows to write")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    pq.write_table(pa.Table.from_pylist(rows), tmp)
    os.replace(tmp, path)
    return path


def math_rows(rows: list[dict], path: str) -> list[dict]:
    """MATH train rows (hendrycks MATH / lighteval MATH: problem, level, type, solution) as verl
    rows whose answer is the last `\\boxed{}` of the solution; level and type go to extra_info.
    A solution without a closed box is skipped with a warning (it could not be scored)."""
    require_columns(rows, ("problem", "solution"), path, "MATH")
    out, unboxed = [], 0
    for i, row in enumerate(rows):
        answer = last_boxed(str(row["solution"] or ""))
        problem = str(row["problem"] or "").strip()
        if not answer or not problem:
            unboxed += 1
            continue
        out.append(verl_row(problem, answer, "math", i, level=str(row.get("level") or ""),
                            type=str(row.get("type") or "")))
    if unboxed:
        log.warning("%s: %d MATH rows without a problem or a closed \\boxed{} answer skipped",
                    path, unboxed)
    if len(rows) != MATH_TRAIN_ROWS:
        log.warning("%s: %d MATH rows, the train split has %d (another split or a partial copy)",
                    path, len(rows), MATH_TRAIN_ROWS)
    return out


def _messages(prompt) -> list:
    return prompt.tolist() if hasattr(prompt, "tolist") else list(prompt)


def dapo_problem(row: dict, i: int, path: str) -> tuple[str, str, str]:
    """(bare problem, answer, index) of a DAPO-Math-17k row in any of its public schemas: the
    original verl parquet (chat-message `prompt`, `reward_model.ground_truth`,
    `extra_info.index`), GRESO's haizhongzheng/DAPO-Math-17K-cleaned (`prompt` text, `target`)
    or open-r1/DAPO-Math-17k-Processed (`prompt` text, `solution`). The index is the row
    number when the row has none."""
    if "prompt" not in row:
        raise ValueError(f"{path}: row {i} has no column 'prompt' for DAPO-Math-17k "
                         f"(columns: {sorted(row)})")
    prompt = row["prompt"]
    if isinstance(prompt, str):
        problem = strip_dapo_instruction(prompt)
    else:
        users = [m.get("content") or "" for m in _messages(prompt) if m.get("role") == "user"]
        if not users:
            raise ValueError(f"{path}: row {i}: the DAPO-Math-17k prompt has no user message")
        problem = strip_dapo_instruction(users[-1])
    answer = (row.get("reward_model") or {}).get("ground_truth")
    for key in ("target", "solution"):
        if answer is None and row.get(key) is not None:
            answer = row[key]
    if answer is None:
        raise ValueError(f"{path}: row {i} has no DAPO-Math-17k answer (reward_model."
                         f"ground_truth, target or solution; columns: {sorted(row)})")
    index = (row.get("extra_info") or {}).get("index")
    return problem, _answer_text(answer), str(i if index is None else index)


def dapo_plus_math_rows(dapo: list[dict], math: list[dict], dapo_path: str, math_path: str
                        ) -> tuple[list[dict], dict]:
    """HIVE's DAPO+MATH: the DAPO-Math-17k rows, each problem once, then the MATH train rows
    whose problem is not already there; (rows, counts).

    Duplicates are exact matches of `normalize_problem`, the first copy kept. GRESO trains on
    the two files as they are (verl concatenates them), but its DAPO file is already the
    de-duplicated 17k, while the original release repeats each problem about 100 times; and the
    corpus reader here drops a repeated prompt anyway. A MATH problem that is also a DAPO
    problem keeps the DAPO row; the ones whose answers differ are counted
    (`cross_answer_conflicts`)."""
    out, seen = [], {}
    for i, row in enumerate(dapo):
        problem, answer, index = dapo_problem(row, i, dapo_path)
        key = normalize_problem(problem)
        if not key or key in seen:
            continue
        seen[key] = answer
        out.append(verl_row(problem, answer, "math_dapo", index))
    counts = {"dapo_rows": len(dapo), "dapo_unique": len(out)}
    math_out = math_rows(math, math_path)
    cross = conflicts = 0
    for row in math_out:
        key = normalize_problem(row["prompt"][0]["content"])
        if key in seen:
            cross += 1
            conflicts += seen[key] != row["reward_model"]["ground_truth"]
            continue
        seen[key] = row["reward_model"]["ground_truth"]
        out.append(row)
    counts.update(math_rows=len(math), math_boxed=len(math_out), cross_duplicates=cross,
                  cross_answer_conflicts=conflicts, math_kept=len(math_out) - cross,
                  rows=len(out))
    return out, counts


def has_cjk(text: str) -> bool:
    return bool(CJK.search(text or ""))


def dapo_14k_rows(rows: list[dict], path: str) -> tuple[list[dict], dict]:
    """HeaPA's "14kdapo" subset of DAPO-Math-17k's verl parquet, by HeaPA's released rule
    (horizon-rl/HeaPA@82becbe `data/prepare_DAPO_training_dataset.py`): drop every row whose
    prompt (any message, instruction included) holds a CJK character (`CJK`), then keep the
    first row of each `extra_info.index`; the kept rows become bare-problem rows
    (`dapo_math_rows`). (rows, counts); `problem_duplicates` counts kept rows whose problem
    text repeats another's (kept, as HeaPA keeps them)."""
    require_columns(rows, ("prompt", "extra_info"), path, "DAPO-Math-17k (verl parquet)")
    no_cjk = []
    for i, row in enumerate(rows):
        prompt = row["prompt"]
        texts = ([prompt] if isinstance(prompt, str) else
                 [m.get("content") or "" for m in _messages(prompt)])
        if not any(has_cjk(t) for t in texts):
            no_cjk.append((i, row))
    kept, indices = [], set()
    for i, row in no_cjk:
        index = (row["extra_info"] or {}).get("index")
        if index is None:
            raise ValueError(f"{path}: row {i} has no extra_info.index, the key HeaPA "
                             f"de-duplicates DAPO-Math-17k by")
        if index not in indices:
            indices.add(index)
            kept.append(row)
    out = dapo_math_rows(kept)
    problems = {normalize_problem(r["prompt"][-1]["content"]) for r in out}
    counts = {"rows": len(rows), "cjk_removed": len(rows) - len(no_cjk),
              "index_duplicates_removed": len(no_cjk) - len(kept), "kept": len(out),
              "problem_duplicates": len(out) - len(problems)}
    return out, counts


def _openr1_row(row: dict, i: int) -> dict | None:
    problem, answer = str(row["problem"] or "").strip(), _answer_text(row["answer"] or "")
    if not problem or not answer:
        return None
    return verl_row(problem, answer, "openr1_math", row.get("uuid") or i,
                    source=str(row.get("source") or ""),
                    problem_type=str(row.get("problem_type") or ""),
                    question_type=str(row.get("question_type") or ""))


def openr1_rows(rows: list[dict], path: str, n: int = OPENR1_SUBSET, seed: int | None = None
                ) -> tuple[list[dict], dict]:
    """HIVE's Open-R1 math subset from OpenR1-Math-220k's rows (default config, train split, in
    file order): the first `n` rows, GRESO's rule, or with `seed` a uniform draw of `n` rows
    without replacement by numpy's default_rng(seed), kept in file order (ours). A selected row
    without a problem or an answer is dropped and counted. (rows, counts)."""
    require_columns(rows, ("problem", "answer"), path, "OpenR1-Math-220k")
    if n > len(rows):
        raise ValueError(f"{path}: {len(rows)} rows, fewer than the {n} to select")
    if seed is None:
        picked = range(n)
    else:
        picked = sorted(np.random.default_rng(seed).choice(len(rows), size=n, replace=False))
    out = [r for r in (_openr1_row(rows[int(i)], int(i)) for i in picked) if r is not None]
    return out, {"rows": len(rows), "selected": n, "no_answer": n - len(out), "kept": len(out),
                 "rule": "first" if seed is None else f"seeded draw (seed {seed})"}


def openr1_heapa_rows(rows: list[dict], path: str) -> tuple[list[dict], dict]:
    """HeaPA's OpenR1-Math corpus (horizon-rl/HeaPA@82becbe
    `data/prepare_OpenR1_training_dataset.py`): every OpenR1-Math-220k row except problems of
    `OPENR1_MAX_WORDS` or more whitespace-separated words and problems or answers with a
    non-ASCII character (HeaPA's test for "non-English"). (rows, counts)."""
    require_columns(rows, ("problem", "answer"), path, "OpenR1-Math-220k")
    out, long_, non_ascii, empty = [], 0, 0, 0
    for i, row in enumerate(rows):
        problem, answer = str(row["problem"] or ""), str(row["answer"] or "")
        if len(problem.split()) >= OPENR1_MAX_WORDS:
            long_ += 1
        elif NON_ASCII.search(problem) or NON_ASCII.search(answer):
            non_ascii += 1
        elif (r := _openr1_row(row, i)) is None:
            empty += 1
        else:
            out.append(r)
    return out, {"rows": len(rows), "too_long": long_, "non_ascii": non_ascii,
                 "no_answer": empty, "kept": len(out)}


def numina_rows(rows: list[dict], path: str, n: int | None = None,
                seed: int = NUMINA_SEED) -> tuple[list[dict], dict]:
    """NuminaMath-CoT rows (problem, solution, source) as verl rows, by the rule of the module
    docstring (`numina_math`, ours): the last closed `\\boxed{}` of the solution is the answer
    (rows without one, or without a problem, skipped), one row per problem text, then a
    seeded draw of `n` problems (None: NUMINA_SUBSET) kept in file order (n = 0: every one).
    (rows, counts)."""
    require_columns(rows, ("problem", "solution"), path, "NuminaMath-CoT")
    n = NUMINA_SUBSET if n is None else n
    if n < 0:
        raise ValueError(f"{path}: n={n} is not allowed: the problems to draw, 0 for every one")
    unique, seen, unboxed, duplicates = [], set(), 0, 0
    for i, row in enumerate(rows):
        problem = str(row["problem"] or "").strip()
        answer = last_boxed(str(row["solution"] or ""))
        if not problem or not answer:
            unboxed += 1
            continue
        key = normalize_problem(problem)
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        unique.append(verl_row(problem, answer, "numina_math", i,
                               source=str(row.get("source") or "")))
    if n > len(unique):
        raise ValueError(f"{path}: {len(unique)} boxed, distinct NuminaMath problems, fewer than "
                         f"the {n} to draw (n = 0 keeps every one)")
    if n:
        picked = sorted(np.random.default_rng(seed).choice(len(unique), size=n, replace=False))
        out = [unique[int(i)] for i in picked]
    else:
        out = unique
    return out, {"rows": len(rows), "no_boxed_answer": unboxed, "duplicates": duplicates,
                 "unique": len(unique), "kept": len(out),
                 "rule": f"seeded draw (seed {seed})" if n else "every problem"}


# ----------------------------------------------------------------------------- hub ids


def _benchmark_exts(name: str) -> tuple[str, ...]:
    return hub.TABLE_EXTS if name in BENCHMARKS else hub.CORPUS_EXTS


def benchmark_rows(name: str, value: str) -> list[dict] | None:
    """The rows of benchmark `name` from the dataset id `value` (None when it is a local path):
    converted from the benchmark's public schema when frontier_rl/data/benchmarks.py knows the
    name, else the files' rows as they are (plain or verl corpus rows)."""
    files = hub.dataset_files(value, f"eval.sets.{name}", _benchmark_exts(name),
                              hub.BENCHMARK_SPLITS)
    if files is None:
        return None
    if name in BENCHMARKS:
        return convert(name, files)
    from frontier_rl.tasks import corpus

    return [row for f in files for row in corpus.read_file(f)]
