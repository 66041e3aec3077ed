"""Prompt rendering: chat messages -> the exact text the policy is conditioned on.

A corpus row becomes a list of chat messages ({"role", "content"}): a verl row carries them, a
plain {prompt, answer} row is one user message. The user's question is wrapped by
`prompt_template` ("{prompt}" is replaced) and followed by `instruction` (the papers' "put the
final answer in \\boxed{}" sentence, one space after the question, as verl's MATH preprocessing
writes it); `system_prompt` (when not None) replaces or adds the system message. Then:

- with a tokenizer that has a chat template (`chat_template` = a local model or tokenizer
  directory), transformers renders the messages with `apply_chat_template(...,
  add_generation_prompt=True)`, so the text ends where the assistant's answer begins. A leading
  BOS written by the template is dropped: `encode_prompt` adds the tokenizer's BOS itself.
- without one, the contents are joined by blank lines (system first): a base model or the
  char-level policy sees plain text.

This module never imports jax; transformers is imported only when a template directory is given.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence

Messages = list[dict[str, str]]

# The instructions the papers put after the question (verl's MATH preprocessing; Qwen2.5-Math's
# evaluation uses the second as its system prompt).
BOXED_STEP_BY_STEP = "Let's think step by step and output the final answer within \\boxed{}."
QWEN_MATH_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
# The papers' user messages, as `prompt_template`s ("{prompt}" = the problem, other braces
# doubled).
# GRESO's preprocessing (examples/data_preprocess/dapo_math.py, lighteval_math.py and the
# benchmarks' test_*.py), which HIVE trains and evaluates on; the trailing space is GRESO's.
GRESO_PROMPT = ("Please solve the following math problem: {prompt}. The assistant first thinks "
                "about the reasoning process step by step and then provides the user with the "
                "answer. Return the final answer in \\boxed{{}} tags, for example "
                "\\boxed{{1}}. Let's solve this step by step. ")
# DAPO-Math-17k's own user message, which HeaPA trains on and its benchmark preparation
# (data/prepare_eval_benchmarks.py) writes for every evaluation question.
DAPO_ANSWER_PROMPT = ("Solve the following math problem step by step. The last line of your "
                      "response should be of the form Answer: $Answer (without quotes) where "
                      "$Answer is the answer to the problem.\n\n{prompt}\n\nRemember to put "
                      "your answer on its own line after \"Answer:\".")


def to_messages(prompt) -> Messages:
    """A verl `prompt` field (list of {"role", "content"}; numpy arrays from parquet readers are
    lists too) or a plain string, as a list of message dicts. Raises ValueError otherwise."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if hasattr(prompt, "tolist"):  # numpy object array
        prompt = prompt.tolist()
    if isinstance(prompt, Sequence) and prompt and all(
            isinstance(m, Mapping) and "role" in m and "content" in m for m in prompt):
        return [{"role": _text(m["role"]), "content": _text(m["content"])} for m in prompt]
    raise ValueError(f"a prompt must be a string or a list of {{role, content}} messages, got "
                     f"{type(prompt).__name__} {str(prompt)[:80]!r}")


def _text(x) -> str:
    return x.decode("utf-8") if isinstance(x, bytes) else str(x)


def is_messages(prompt) -> bool:
    try:
        return not isinstance(prompt, str) and bool(to_messages(prompt))
    except ValueError:
        return False


def question(messages: Messages) -> str:
    """The last user message's content: the problem itself."""
    for m in reversed(messages):
        if m["role"] == "user":
            return m["content"]
    raise ValueError(f"no user message in {messages!r}")


def shape_messages(messages: Messages, *, prompt_template: str = "{prompt}",
                   instruction: str = "", system_prompt: str | None = None) -> Messages:
    """The messages with the template and instruction applied to the last user message and the
    system message replaced (system_prompt=None keeps the row's; "" removes it)."""
    out = [dict(m) for m in messages]
    last = max(i for i, m in enumerate(out) if m["role"] == "user")
    text = prompt_template.format(prompt=out[last]["content"])
    if instruction:
        text = f"{text} {instruction}"
    out[last]["content"] = text
    if system_prompt is not None:
        out = [m for m in out if m["role"] != "system"]
        if system_prompt:
            out.insert(0, {"role": "system", "content": system_prompt})
    return out


@functools.lru_cache(maxsize=8)
def load_chat_tokenizer(path: str):
    """The tokenizer in a local directory, which must carry a chat template."""
    from transformers import AutoTokenizer

    if not os.path.isdir(path):
        raise FileNotFoundError(f"chat_template: directory {path} does not exist")
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if not getattr(tok, "chat_template", None):
        raise ValueError(f"chat_template: the tokenizer in {path} has no chat template "
                         "(tokenizer_config.json 'chat_template' or chat_template.jinja)")
    return tok


def render(messages: Messages, tokenizer=None) -> str:
    """The prompt text: the chat template's rendering with the generation prompt, or the plain
    join when `tokenizer` is None."""
    if tokenizer is None:
        return "\n\n".join(m["content"] for m in messages)
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    bos = getattr(tokenizer, "bos_token", None)
    if bos and text.startswith(bos):
        text = text[len(bos):]
    return text
