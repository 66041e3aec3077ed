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


def config_section():
    """`selector`: the prompt selector; each registered selector's own fields live in
    selector.<name>."""
    import ml_collections

    from frontier_rl.run import fields

    def chosen(cfg) -> None:
        fields.as_config_error(lambda: validate(cfg.selector.name,
                                                cfg.selector.get(cfg.selector.name)))
        _check_teacher_url(cfg)

    return (fields.Section("selector", config_section.__doc__)
            .field("name", "uniform", lambda x: x in names(), f"one of {names()}")
            .subs(lambda: {n: ml_collections.ConfigDict(defaults(n)) for n in names()})
            .rule(chosen))


def _endpoint(url: str) -> tuple[str, int] | None:
    """(host, port) of an http(s) URL, every loopback spelling as one host; None if unparsable."""
    import urllib.parse

    try:
        u = urllib.parse.urlsplit(url)
        port = u.port or (443 if u.scheme == "https" else 80)
    except ValueError:
        return None
    host = (u.hostname or "").lower()
    if not host:
        return None
    if host in ("localhost", "0.0.0.0", "::", "::1") or host.startswith("127."):
        host = "loopback"
    return host, port


def _check_teacher_url(cfg) -> None:
    """An HTTP teacher must not be the rollout server: that one runs with --skip-tokenizer-init
    and answers no chat completions, so every teacher call would fail (counted, not raised) and
    augmentation would silently never happen."""
    from frontier_rl.run import fields

    name = cfg.selector.name
    s = cfg.selector.get(name)
    if (cfg.rollout.engine != "sglang" or s is None or not s.get("teacher_url")
            or not s.get("augment") or s.get("teacher") not in ("http", "auto")):
        return
    rollout = _endpoint(cfg.rollout.sglang.url)
    fields.check(cfg, f"selector.{name}.teacher_url",
                 lambda x: rollout is None or _endpoint(x) != rollout,
                 f"the teacher's host:port is the rollout server's (rollout.sglang.url="
                 f"{cfg.rollout.sglang.url!r}), which serves token ids to the trainer and "
                 "answers no chat completions; serve the teacher on another port "
                 "(launch/run_gpu.sh starts the rollout server on 31000)")
