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


def config_section():
    """`task`: prompts + verifier. "arith" is the embedded procedural task (tasks/arith.py);
    "gym:<dataset>" any reasoning-gym dataset; "corpus" a local jsonl/parquet/TFDS corpus.
    Every field but `name` goes to the task's builder; a config for another task replaces
    this section (e.g. c.task = ConfigDict(dict(name="corpus", path="data/math.jsonl"))).
    With only `name` changed (--config.task.name=gym:<dataset>), the arith fields below are
    ignored while they hold these defaults; one set to anything else is an error naming it."""
    from frontier_rl.run import fields
    from frontier_rl.tasks import arith

    def is_arith(cfg) -> bool:
        return cfg.task.name == "arith"

    def at_least(field: str, low: str):
        def rule(cfg) -> None:
            if is_arith(cfg):
                fields.check(cfg, f"task.{field}", lambda x: fields.pos_int(x)
                             and x >= cfg.task[low], f"an integer >= task.{low}={cfg.task[low]}")
        return rule

    def eval_sizes(cfg) -> None:
        if is_arith(cfg) and cfg.task.get("eval_sizes"):
            fields.as_config_error(lambda: arith.eval_sizes(dict(cfg.task),
                                                            arith.buckets_of(dict(cfg.task))))

    def family(cfg) -> None:
        if cfg.task.name == "corpus":
            fields.check(cfg, "task.path", lambda x: isinstance(x, str) and bool(x),
                         "a .jsonl/.parquet path or tfds:<name>")
        try:  # the registry: fields per family, cheap checks
            check_config(cfg.task.name, cfg.task)
        except (ValueError, ImportError) as e:
            raise fields.ConfigError(f"task.name={cfg.task.name!r}: {e}") from None
        if cfg.task.name.startswith("gym:") and not cfg.model.path:
            # Char-level policy: every character of the answer format is a generated token, so
            # a cap below the format's own length makes every rollout unfinished (-1).
            template = cfg.task.get("response_template", gym.DEFAULTS["response_template"])
            need = len(str(template).replace("{answer}", "")) + 2  # one answer character, EOS
            fields.check(cfg, "rollout.max_new_tokens", lambda x: x >= need,
                         f"an integer >= {need} for the task's response format {template!r} "
                         "(each character is a token; leave room for the answer)")

    return (fields.Section("task", config_section.__doc__)
            .field("name", "arith", lambda x: isinstance(x, str) and bool(x),
                   "'arith', 'gym:<reasoning-gym dataset>' or 'corpus'")
            .field("min_operands", 2, lambda x: fields.pos_int(x) and x >= 2, "an integer >= 2",
                   when=is_arith)
            .field("max_operands", 5).rule(at_least("max_operands", "min_operands"))
            .field("min_digits", 1, fields.pos_int, "an integer >= 1", when=is_arith)
            .field("max_digits", 3).rule(at_least("max_digits", "min_digits"))
            .field("reverse_digits", True)
            .field("train_size", 20000, fields.pos_int, "an integer >= 1", when=is_arith)
            .field("eval_per_bucket", 128, fields.pos_int, "an integer >= 1", when=is_arith)
            # per-bucket overrides of eval_per_bucket, e.g. "4op:1024"
            .field("eval_sizes", "").rule(eval_sizes)
            .rule(family))
