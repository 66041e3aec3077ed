"""Registries of policy losses (`rl.loss`) and advantage estimators (`rl.adv_estimator`).

A config string picks each: `register_loss` and `register_estimator` make a function available
under a name, with the config section it reads (`defaults` become `config.rl.losses.<name>` or
`config.rl.estimators.<name>`, so every field can be set from the command line) and the checks
that section must pass (`validate`, run by `config_lib.validate` before anything compiles).
`config_lib` only composes: it builds the sections from the registered defaults and asks the
chosen entry to check its own.

An entry registers when its module is imported; rl/objectives.py imports every built-in one
(rl/losses.py: "grpo", "dapo"; rl/gspo.py; rl/cispo.py; rl/advantages.py: "grpo", "rloo",
"reinforce_plus_plus_baseline"), and the train step and config_lib import it. A new loss is one
file calling `register_loss` plus its import there (docs/extending.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any


@dataclasses.dataclass(frozen=True)
class Loss:
    """A registered policy loss.

    `fn(x, cfg) -> (per-token loss [B, T], metrics)` with `x` a `losses.PolicyInputs` and `cfg`
    the run's `losses.LossConfig`; `aggregation` is the loss's own reduction, used when
    `rl.loss_agg` is ""; `defaults` are the fields of `rl.losses.<name>` (those named like a
    `LossConfig` field replace the run-wide value, the others reach `fn` as `cfg.option(...)`);
    `validate(section, rl)` raises ValueError naming the bad field."""

    fn: Callable[..., Any]
    aggregation: str
    defaults: dict
    validate: Callable[[Any, Any], None] | None


@dataclasses.dataclass(frozen=True)
class Estimator:
    """A registered advantage estimator.

    `fn(rewards [N], group_size, lengths [N], opts) -> advantages float32 [N]`, host-side numpy
    over a step's responses in consecutive groups; `opts` is `rl.estimators.<name>` as a dict
    plus `std_norm` (`rl.adv_std_norm`). `validate(section, rl)` as for losses."""

    fn: Callable[..., Any]
    defaults: dict
    validate: Callable[[Any, Any], None] | None


_LOSSES: dict[str, Loss] = {}
_ESTIMATORS: dict[str, Estimator] = {}


def register_loss(name: str, *, aggregation: str, defaults: dict | None = None,
                  validate: Callable[[Any, Any], None] | None = None):
    """Function decorator: makes a per-token policy loss available as `rl.loss = name`."""

    def wrap(fn):
        if name in _LOSSES:
            raise ValueError(f"policy loss {name!r} is registered twice")
        _LOSSES[name] = Loss(fn, aggregation, dict(defaults or {}), validate)
        return fn

    return wrap


def register_estimator(name: str, *, defaults: dict | None = None,
                       validate: Callable[[Any, Any], None] | None = None):
    """Function decorator: makes an advantage estimator available as `rl.adv_estimator =
    name`."""

    def wrap(fn):
        if name in _ESTIMATORS:
            raise ValueError(f"advantage estimator {name!r} is registered twice")
        _ESTIMATORS[name] = Estimator(fn, dict(defaults or {}), validate)
        return fn

    return wrap


def loss_names() -> list[str]:
    return sorted(_LOSSES)


def estimator_names() -> list[str]:
    return sorted(_ESTIMATORS)


def loss(name: str) -> Loss:
    if name not in _LOSSES:
        raise ValueError(f"rl.loss={name!r} is not allowed: one of {sorted(_LOSSES)}")
    return _LOSSES[name]


def estimator(name: str) -> Estimator:
    if name not in _ESTIMATORS:
        raise ValueError(f"rl.adv_estimator={name!r} is not allowed: one of "
                         f"{sorted(_ESTIMATORS)}")
    return _ESTIMATORS[name]
