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
