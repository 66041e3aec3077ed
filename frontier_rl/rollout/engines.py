"""Every built-in rollout engine, registered (rollout/registry.py), and the calls the run makes
on the one `rollout.engine` names: `sections()` for default_config, `validate` for
config_lib.validate, `check` before the warm start and `build` once the policy exists.

A new engine is one module calling `registry.register_engine` and its import below."""

from __future__ import annotations

import ml_collections

from frontier_rl.rollout import engine as _jax  # noqa: F401  registers "jax"
from frontier_rl.rollout import sglang as _sglang  # noqa: F401  registers "sglang"
from frontier_rl.rollout.registry import EngineParts, entry, names

__all__ = ["EngineParts", "build", "check", "names", "sections", "validate"]


def sections() -> dict[str, ml_collections.ConfigDict]:
    """`rollout.<name>` for each registered engine that has fields."""
    return {n: ml_collections.ConfigDict(entry(n).defaults) for n in names()
            if entry(n).defaults is not None}


def validate(config) -> None:
    """ValueError naming the field when `rollout.engine` is unknown or its section is bad."""
    e = entry(config.rollout.engine)
    if e.validate is None:
        return
    section = config.rollout.get(config.rollout.engine)
    if section is None:
        raise ValueError(f"rollout.{config.rollout.engine} is missing: the config has no section "
                         "for the chosen engine (default_config() builds one per engine)")
    e.validate(section, config)


def check(config) -> None:
    """Fails fast when the chosen engine cannot be reached (an SGLang server not answering)."""
    e = entry(config.rollout.engine)
    if e.check is not None:
        e.check(config)


def build(parts: EngineParts):
    return entry(parts.config.rollout.engine).build(parts)


def config_section():
    """`rollout`: how rollouts are generated, and by which registered engine."""
    from frontier_rl.run import fields

    def rows_per_call(cfg) -> None:
        fields.check(cfg, "rollout.rows_per_call", lambda x: fields.int_(x) and (
            x == 0 or x >= cfg.rl.group_size), f"0 (all at once) or an integer >= "
            f"rl.group_size={cfg.rl.group_size} (whole prompts)")

    def engine_rules(cfg) -> None:
        fields.as_config_error(lambda: validate(cfg))  # the engine's own rollout.<name>
        if cfg.mesh.get("rollout"):
            fields.check(cfg, "rollout.engine", lambda x: not entry(x).external,
                         f"an engine in this process with mesh.rollout={cfg.mesh.rollout} (an "
                         "external engine generates on devices of its own; set "
                         "mesh.rollout=0)")

    return (fields.Section("rollout", config_section.__doc__)
            .field("temperature", 1.0, fields.pos, "a number > 0")
            .field("top_p", 1.0, lambda x: fields.pos(x) and x <= 1, "a number in (0, 1]")
            # Sampling top-k: draw among the k most likely tokens only; -1 = off (SGLang's
            # convention, which refuses 0). With top_p < 1 the nucleus is taken within the k.
            .field("top_k", -1, fields.top_k, fields.TOP_K_ALLOWED)
            .field("max_new_tokens", 8, fields.pos_int, "an integer >= 1")
            # Longest prompt in tokens (verl's max_prompt_length): longer train and eval
            # prompts are dropped at load, with their count logged (task/overlong_*), never
            # sent to an engine. 0 = what the model can serve: its context
            # (max_position_embeddings) less max_new_tokens, the bound SGLang rejects a batch
            # over; a set value is capped there too.
            .field("max_prompt_len", 0, fields.nonneg_int, "an integer >= 0 (tokens; 0 = the "
                   "model's context less rollout.max_new_tokens)")
            # rows per prompt-entropy forward pass (HIVE Stage 2)
            .field("entropy_batch", 256, fields.pos_int, "an integer >= 1")
            # Rows the embedded sampler generates at once (whole prompts; 0 = a call's rows at
            # once). Its KV cache is dense, rows x (prompt + max_new_tokens): at the papers'
            # sizes this is what makes generation fit (`frontier-rl fit` compiles the sampler
            # for this many rows).
            .field("rows_per_call", 0).rule(rows_per_call)
            # Where tokens come from (rollout/engine.py): "jax" = the in-process sampler;
            # "sglang" = an HTTP server speaking SGLang's native API (real SGLang, or
            # `frontier-rl serve`).
            .field("engine", "jax", lambda x: x in names(), f"one of {names()}")
            # steps between weight syncs to an external engine (staleness)
            .field("sync_every", 1, fields.pos_int, "an integer >= 1 (steps)")
            # where the policy is exported for the server; "" = DIR/sync
            .field("sync_dir", "", lambda x: isinstance(x, str), "a directory ('' = DIR/sync)")
            # Largest |engine - trainer| mean token log-prob on the probe sequence after a
            # sync. A bf16 engine and trainer differ by ~0.011 nats/token with the right
            # weights (SGLang and vLLM against Megatron at step 0, vllm-project/vime#64); other
            # weights differ by ~0.1 and more. `frontier-rl serve` (the trainer's own sampler)
            # agrees to ~1e-6: tighten it there.
            .field("probe_tol", 0.05, fields.pos, "a number > 0 (nats per token)")
            # Each registered engine's own fields live in rollout.<name>; the SGLang client's
            # (rollout.sglang.url, timeouts, retries) are in rollout/sglang.py.
            .subs(sections)
            .rule(engine_rules))
