"""Prompt selectors (host-side Python; no jax). Importing this package registers them all.

Layer "selection": host-side Python and numpy only (no jax, no model code); may import the
base layer, tasks and data.
"""

from frontier_rl.selection import (
    dynamic_sampling,  # noqa: F401  (registers "ds")
    greso,  # noqa: F401  (registers "greso")
    heapa,  # noqa: F401  (registers "heapa" and "ps")
    heapa_hive,  # noqa: F401  (registers "heapa_hive")
    hive,  # noqa: F401  (registers "hive")
    hive_v2,  # noqa: F401  (registers "hive_v2")
    learnability,  # noqa: F401  (registers "learnability")
    mopps,  # noqa: F401  (registers "mopps")
    oracle,  # noqa: F401  (registers the control "oracle")
    pcl,  # noqa: F401  (registers "pcl")
    prefilter,  # noqa: F401  (registers "prefilter")
    reinforce_ada,  # noqa: F401  (registers "reinforce_ada")
    speed,  # noqa: F401  (registers "speed")
    uniform,  # noqa: F401  (registers "uniform")
)
from frontier_rl.selection.base import (
    Group,
    Selector,
    StepContext,
    defaults,
    is_control,
    make,
    names,
    proof_counters,
    register,
    validate,
)

__all__ = ["Group", "Selector", "StepContext", "defaults", "is_control", "make", "names",
           "proof_counters", "register", "validate"]
