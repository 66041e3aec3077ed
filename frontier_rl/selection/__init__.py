"""Prompt selectors (host-side Python; no jax). Importing this package registers them all."""

from frontier_rl.selection import uniform  # noqa: F401  (registers "uniform")
from frontier_rl.selection.base import (
    Group,
    Selector,
    StepContext,
    defaults,
    make,
    names,
    register,
    validate,
)

__all__ = ["Group", "Selector", "StepContext", "defaults", "make", "names", "register", "validate"]
