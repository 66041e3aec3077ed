"""The registry of rollout engines (`rollout.engine`).

`register_engine(name, ...)` makes a builder available under a name, with the config section it
reads (`defaults` become `config.rollout.<name>`, so every field can be set from the command
line; an engine without fields has no section), the checks that section must pass (`validate`,
run by `config_lib.validate` before anything compiles) and a reachability check (`check`, run
by `train` before the warm start, so a server that is not there fails in seconds).

A builder takes the `EngineParts` a run offers and returns an object with the `Engine`
interface (rollout/engine.py). An entry registers when its module is imported;
rollout/engines.py imports every built-in one (rollout/engine.py: "jax"; rollout/sglang.py:
"sglang"), and `train` and `config_lib` import that. A new engine is one file calling
`register_engine` plus its import there (docs/extending.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any


@dataclasses.dataclass(frozen=True)
class EngineParts:
    """What a run offers the engine it builds.

    `config`: the whole validated config (the engine reads `rollout.*` and its own
    `rollout.<name>` section); `sampler`: the in-process sampler over the trainer's arrays;
    `export_fn(params, path)`: writes the policy as a Hugging Face checkpoint (for an engine
    that loads weights from files); `probe_fn(params, [ids]) -> [log-probs]`: the trainer's own
    per-token log-probs, to check after a sync that the engine serves the right weights;
    `probe_ids`: one encoded prompt to probe with; `pad_id`, `stop_ids`: the tokenizer's."""

    config: Any
    workdir: str
    sampler: Any
    export_fn: Callable[[Any, str], None]
    probe_fn: Callable[..., Any]
    probe_ids: Sequence[int]
    pad_id: int
    stop_ids: Sequence[int]


@dataclasses.dataclass(frozen=True)
class EngineEntry:
    """A registered engine: `build(parts) -> Engine`; `defaults`: the fields of
    `rollout.<name>` (None: no section); `validate(section, config)` raises ValueError naming
    the bad field; `check(config)` raises (RunError) when the engine cannot be reached;
    `external`: its tokens come from another process or implementation (`fit` then sizes no
    sampler, and the trainer recomputes the old log-probs under rl.recompute_old_logp=auto)."""

    build: Callable[[EngineParts], Any]
    defaults: dict | None
    validate: Callable[[Any, Any], None] | None
    check: Callable[[Any], None] | None
    external: bool


_ENGINES: dict[str, EngineEntry] = {}


def register_engine(name: str, *, external: bool, defaults: dict | None = None,
                    validate: Callable[[Any, Any], None] | None = None,
                    check: Callable[[Any], None] | None = None):
    """Function decorator: makes an engine builder available as `rollout.engine = name`."""

    def wrap(build):
        if name in _ENGINES:
            raise ValueError(f"rollout engine {name!r} is registered twice")
        _ENGINES[name] = EngineEntry(build, None if defaults is None else dict(defaults),
                                     validate, check, external)
        return build

    return wrap


def names() -> list[str]:
    return sorted(_ENGINES)


def entry(name: str) -> EngineEntry:
    if name not in _ENGINES:
        raise ValueError(f"rollout.engine={name!r} is not allowed: one of {sorted(_ENGINES)}")
    return _ENGINES[name]
