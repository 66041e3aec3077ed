"""Small generated stand-ins for the paper configs' `:smoke` runs and the tests, in the real
formats: a Hugging Face model directory (a tiny random model of the paper's family, a BPE
tokenizer built here with a ChatML chat template, generation_config.json listing two EOS ids),
a verl-format training parquet (chat-message prompts, `reward_model.ground_truth`,
`data_source`, `extra_info`) and the benchmarks' eval files, converted by
frontier_rl/data/benchmarks.py from raw files in each benchmark's own schema.

`math_smoke(family)` builds them once under FRONTIER_RL_SMOKE_DIR (default:
<tmp>/frontier_rl_smoke) and returns the paths; concurrent callers (parallel tests) build into
private directories and the first rename wins. Nothing is downloaded.

The problems are one-step sums with one-digit answers ("What is 3 plus 4?" -> "7"); the model
is fitted for 150 supervised steps on responses in its protocol's answer format
("\\boxed{<answer>}" under HIVE's, "Answer: <answer>" under HeaPA's) to the prompts rendered
with that protocol's user message and the family's chat template (Qwen2.5-Math's, with its
default system message; Qwen3's, without one), so it answers in the reward's format, is right
some of the time, and GRPO groups have mixed outcomes without a warm start in the run.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import numpy as np

from frontier_rl.data import benchmarks
from frontier_rl.tasks import chat

VERSION = "4"  # bump when the generated files change
IM_START, IM_END, EOT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
# ChatML as the Qwen templates write it: the default system message when none is given, each
# turn framed by <|im_start|>role ... <|im_end|>, and the assistant's turn opened at the end.
CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] != 'system' %}"
    "{{- '<|im_start|>system\\n" + SYSTEM.replace("\\", "\\\\") + "<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for m in messages %}"
    "{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
# Qwen3's template in the same schema: a system turn only when one is given (no default), each
# turn framed as above, and the assistant's turn opened at the end, with an empty think block
# when the caller passes enable_thinking=False (the hybrid Qwen3 checkpoints' switch).
QWEN3_CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for m in messages %}"
    "{%- if m['role'] == 'user' or (m['role'] == 'system' and not loop.first) "
    "or m['role'] == 'assistant' %}"
    "{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}"
)
WORDS = ("plus", "added to", "and")
# family -> (chat template, user message, response) of the paper protocol that trains it
# (experiment/paper.py): Qwen2.5-Math under HIVE's, Qwen3 under HeaPA's.
FAMILIES = {"qwen2": (CHAT_TEMPLATE, chat.GRESO_PROMPT, "\\boxed{{{answer}}}"),
            "qwen3": (QWEN3_CHAT_TEMPLATE, chat.DAPO_ANSWER_PROMPT, "Answer: {answer}")}


def _problems(n: int, seed: int) -> list[tuple[str, str]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        a = int(rng.integers(0, 10))
        b = int(rng.integers(0, 10 - a))
        word = WORDS[int(rng.integers(len(WORDS)))]
        out.append((f"What is {a} {word} {b}?", str(a + b)))
    return out


def build_tokenizer(texts: list[str], path: str, vocab_size: int = 384,
                    chat_template: str = CHAT_TEMPLATE):
    """A byte-level BPE tokenizer trained on `texts`, with Qwen's special tokens and a ChatML
    template (Qwen2.5-Math's by default), saved as a Hugging Face tokenizer directory."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOT, IM_START, IM_END],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOT, pad_token=EOT,
                                 clean_up_tokenization_spaces=False)
    hf.chat_template = chat_template
    hf.save_pretrained(path)
    return hf


def build_model(path: str, tokenizer, family: str,
                pairs: list[tuple[str, str]] | None = None) -> None:
    """A tiny random decoder of `family` with the tokenizer's ids, fitted for a few steps on
    (prompt, response) `pairs` if given; generation_config.json lists <|im_end|> and
    <|endoftext|> as EOS, as Qwen's instruct checkpoints do."""
    from flax import nnx

    from frontier_rl.models import Transformer, hf
    from frontier_rl.models.config import family_preset

    im_end = tokenizer.convert_tokens_to_ids(IM_END)
    eot = tokenizer.convert_tokens_to_ids(EOT)
    cfg = family_preset(family, vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                        num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8,
                        tie_word_embeddings=True, bos_token_id=None, eos_token_id=eot,
                        pad_token_id=eot)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    if pairs:
        # A short supervised fit on boxed answers, so that a smoke run (warm start off, as
        # in the papers) starts from a policy whose rewards vary.
        from frontier_rl import warmstart

        graphdef, params = nnx.split(model, nnx.Param)
        res = warmstart.train(graphdef, params, tokenizer, pairs, steps=150, batch_size=16,
                              learning_rate=5e-3, warmup_steps=5, seed=0)
        model = nnx.merge(graphdef, res.params)
    hf.save_pretrained(model, cfg, path)
    with open(os.path.join(path, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": [im_end, eot], "pad_token_id": eot}, f)


def _verl_rows(problems, source: str, split: str) -> list[dict]:
    return [{"data_source": source, "prompt": [{"role": "user", "content": q}],
             "ability": "MATH", "reward_model": {"style": "rule", "ground_truth": a},
             "extra_info": {"split": split, "index": i}} for i, (q, a) in enumerate(problems)]


def _raw_benchmarks(src: str, seed: int, per_set: int = 3) -> None:
    """Raw files in each benchmark's own schema (benchmarks.BENCHMARKS), `per_set` rows each."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def jsonl(name, rows):
        benchmarks.write_jsonl(rows, os.path.join(src, name, benchmarks.BENCHMARKS[name].files[0]))

    for k, name in enumerate(benchmarks.BENCHMARKS):
        probs = _problems(per_set, seed + 100 + k)
        os.makedirs(os.path.join(src, name), exist_ok=True)
        if name == "aime24":
            table = pa.Table.from_pylist([{"id": i, "problem": q, "solution": f"So {a}.",
                                           "answer": a, "url": "", "year": "2024"}
                                          for i, (q, a) in enumerate(probs)])
            pq.write_table(table, os.path.join(src, name, "train.parquet"))
        elif name == "olympiadbench":
            table = pa.Table.from_pylist([{"id": i, "question": q, "final_answer": [f"${a}$"],
                                           "solution": [f"So {a}."], "is_multiple_answer": False,
                                           "unit": None, "answer_type": "Numerical",
                                           "subfield": "Algebra"}
                                          for i, (q, a) in enumerate(probs)])
            pq.write_table(table, os.path.join(src, name, "train.parquet"))
        elif name == "gpqa_diamond":
            with open(os.path.join(src, name, "gpqa_diamond.csv"), "w", newline="") as f:
                cols = ["Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2",
                        "Incorrect Answer 3", "Subdomain"]
                f.write(",".join(cols) + "\n")
                for q, a in probs:
                    wrong = [str((int(a) + d) % 10) for d in (1, 2, 3)]
                    f.write(",".join([f'"{q}"', a, *wrong, "Arithmetic"]) + "\n")
        elif name in ("aime25",):
            jsonl(name, [{"problem": q, "answer": a, "id": str(i)}
                         for i, (q, a) in enumerate(probs)])
        elif name == "math500":
            jsonl(name, [{"problem": q, "solution": f"$\\boxed{{{a}}}$", "answer": a,
                          "subject": "Prealgebra", "level": 1, "unique_id": f"test/{i}.json"}
                         for i, (q, a) in enumerate(probs)])
        elif name == "aimo_amc":
            table = pa.Table.from_pylist([{"id": i, "problem": q, "answer": float(a),
                                           "url": ""} for i, (q, a) in enumerate(probs)])
            pq.write_table(table, os.path.join(src, name, "train.parquet"))
        elif name == "amc23":
            jsonl(name, [{"id": i, "question": q, "answer": float(a), "url": ""}
                         for i, (q, a) in enumerate(probs)])
        else:  # minerva_math, gaokao2023en
            jsonl(name, [{"question": q, "answer": a} for q, a in probs])


def math_smoke(family: str = "qwen2", root: str | None = None) -> dict[str, object]:
    """Paths of the smoke fixtures of `family` ("qwen2" for Qwen2.5-Math, "qwen3"):
    {"model": dir, "train": parquet, "eval_sets": {benchmark: jsonl}, "raw": dir}."""
    root = root or os.environ.get("FRONTIER_RL_SMOKE_DIR") or os.path.join(
        tempfile.gettempdir(), "frontier_rl_smoke")
    final = os.path.join(root, f"math-{family}-v{VERSION}")
    paths = {"model": os.path.join(final, "model"), "train": os.path.join(final, "train.parquet"),
             "raw": os.path.join(final, "raw"),
             "eval_sets": {n: os.path.join(final, "eval", f"{n}.jsonl")
                           for n in benchmarks.BENCHMARKS}}
    if os.path.isfile(os.path.join(final, "done")):
        return paths
    os.makedirs(root, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".math-{family}-", dir=root)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq

        train = _problems(160, 0)
        rows = _verl_rows(train[:120], "math_dapo", "train") + _verl_rows(train[120:], "math",
                                                                          "train")
        pq.write_table(pa.Table.from_pylist(rows), os.path.join(tmp, "train.parquet"))
        _raw_benchmarks(os.path.join(tmp, "raw"), seed=1)
        benchmarks.prepare(os.path.join(tmp, "raw"), os.path.join(tmp, "eval"), check_rows=False)
        template, message, response = FAMILIES[family]
        texts = [q for q, _ in _problems(400, 7)] + [
            f"{IM_START}system\n{SYSTEM}{IM_END}\n{IM_START}user\n"
            f"{message.format(prompt=q)}{IM_END}\n{IM_START}assistant\n"
            f"{response.format(answer=a)}" for q, a in train]
        tok = build_tokenizer(texts, os.path.join(tmp, "model"), chat_template=template)
        pairs = [(chat.render(chat.shape_messages([{"role": "user", "content": q}],
                                                  prompt_template=message), tok),
                  response.format(answer=a)) for q, a in train]
        build_model(os.path.join(tmp, "model"), tok, family, pairs)
        open(os.path.join(tmp, "done"), "w").close()
        try:
            os.rename(tmp, final)
        except OSError:  # another process finished first
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return paths
