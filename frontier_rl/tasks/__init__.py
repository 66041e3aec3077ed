"""Tasks: prompt pools, held-out eval sets and verifiers (host-side; never imports jax).

    task = make_task("arith", {"max_operands": 5}, seed=0)
    task = make_task("gym:leg_counting", {"train_size": 500}, seed=0)
    task = make_task("corpus", {"path": "data/math.jsonl"}, seed=0)
    reward = task.verify(task.eval[0], response_text, finished=True)  # 1 / 0 / -1
    task.format_response(task.train[0].answer)  # a response the verifier scores 1 (warm start)

Importing this package registers "arith", "gym" and "corpus". Heavy dependencies
(reasoning_gym, math_verify, tensorflow_datasets, transformers) load only when used.

Layer "tasks": may import only the base layer and data; never jax.
"""

from frontier_rl.tasks import corpus, gym  # noqa: F401  (registers "corpus" and "gym")
from frontier_rl.tasks.arith import ARITH_ALPHABET, solve, warmstart_examples
from frontier_rl.tasks.base import (
    REWARD_CORRECT,
    REWARD_INVALID,
    REWARD_WRONG,
    TASKS,
    Prompt,
    Task,
    check_config,
    make_task,
    register_task,
)
from frontier_rl.tasks.tokenizer import build_char_tokenizer, decode, encode
from frontier_rl.tasks.verify import (
    extract_final_answer,
    extract_number,
    math_verify_reward,
    numeric_reward,
)

__all__ = [
    "ARITH_ALPHABET",
    "REWARD_CORRECT",
    "REWARD_INVALID",
    "REWARD_WRONG",
    "TASKS",
    "Prompt",
    "Task",
    "build_char_tokenizer",
    "check_config",
    "decode",
    "encode",
    "extract_final_answer",
    "extract_number",
    "make_task",
    "math_verify_reward",
    "numeric_reward",
    "register_task",
    "solve",
    "warmstart_examples",
]
