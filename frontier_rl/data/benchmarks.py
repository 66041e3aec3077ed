"""The math benchmarks of HeaPA's and HIVE's tables, converted from local copies to eval files.

Nothing is fetched: download each benchmark yourself (the public source is given below), then

  python launch/prepare_benchmarks.py --src_dir=DOWNLOADS --out_dir=data/eval

writes DATA/eval/<name>.jsonl, one row per question: {"id", "prompt", "answer", "data_source"},
the plain format the corpus reader and `eval.sets` take. The question is the benchmark's own
text; the instruction ("put the final answer in \\boxed{}") and chat template are added at run
time by the task config, exactly as for training prompts. A file whose row count differs from
the expected one is converted with a warning (a different release or a partial download).

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
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import os
import re

import numpy as np

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
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            return list(json.load(f))
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


def convert(name: str, path: str, check_rows: bool = True) -> list[dict]:
    """The eval rows of benchmark `name` read from the downloaded file `path`."""
    b = BENCHMARKS[name]
    rows = read_table(path)
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
    docstring); every other field is kept."""
    out = []
    for row in rows:
        msgs = row["prompt"].tolist() if hasattr(row["prompt"], "tolist") else row["prompt"]
        new = []
        for m in msgs:
            m = dict(m)
            if m.get("role") == "user":
                m["content"] = DAPO_SUFFIX.sub("", DAPO_PREFIX.sub("", m["content"])).strip()
            new.append(m)
        out.append({**row, "prompt": new})
    return out
