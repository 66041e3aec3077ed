"""A config section declared by the component that reads it: each field once, with its default,
the check it must pass and what is allowed, in one `Section`; the checks that read several
fields (`rule`); the sub-sections a registry adds (one per engine, loss or selector). config_lib
assembles the sections into `default_config()` and `validate()`.

  SECTION = (fields.Section("checkpoint", "Checkpoints: every `every` steps ...")
             .field("every", 25, fields.pos_int, "an integer >= 1")
             .field("max_to_keep", 3, lambda x: fields.pos_int(x) and x >= 2, "an integer >= 2"))

`defaults()` is the section's ConfigDict (fields in declaration order); `validate(cfg)` runs the
field checks and the rules in declaration order, so a rule may rely on the fields declared
before it. A bad value raises `ConfigError` naming the field, the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import ml_collections


class ConfigError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Field:
    """One field: `default`; `ok(value)` (None: any value) and `allowed`, the words a refusal
    quotes; `when(cfg)`: the check applies only then (e.g. a rejection bound with rejection
    on)."""

    name: str
    default: Any
    ok: Callable[[Any], bool] | None = None
    allowed: str = ""
    when: Callable[[Any], bool] | None = None


class Section:
    """A config section: its fields, rules and registry sub-sections, in declaration order."""

    def __init__(self, name: str, doc: str = "", *, optional: bool = False):
        self.name, self.doc, self.optional = name, doc, optional  # optional: a config may omit it
        self.origin = ""  # the module that declares it (config_lib.sections sets it)
        self._items: list[tuple[str, Any]] = []

    def field(self, name: str, default: Any, ok: Callable[[Any], bool] | None = None,
              allowed: str = "", *, when: Callable[[Any], bool] | None = None) -> Section:
        if ok is not None and not allowed:
            raise ValueError(f"{self.name}.{name}: a checked field says what is allowed")
        self._items.append(("field", Field(name, default, ok, allowed, when)))
        return self

    def rule(self, fn: Callable[[Any], None]) -> Section:
        """`fn(cfg)` raises ConfigError (`check`) when fields that read each other disagree."""
        self._items.append(("rule", fn))
        return self

    def sub(self, name: str, make: Callable[[], ml_collections.ConfigDict]) -> Section:
        """`self.name.<name>` is `make()` (a registry's sections, built when defaults are)."""
        self._items.append(("sub", (name, make)))
        return self

    def subs(self, make: Callable[[], dict[str, ml_collections.ConfigDict]]) -> Section:
        """Every (name, section) of `make()` (one per registered entry) under this section."""
        self._items.append(("subs", make))
        return self

    @property
    def fields(self) -> list[Field]:
        return [x for kind, x in self._items if kind == "field"]

    def defaults(self) -> ml_collections.ConfigDict:
        c = ml_collections.ConfigDict()
        for kind, x in self._items:
            if kind == "field":
                c[x.name] = x.default
            elif kind == "sub":
                c[x[0]] = x[1]()
            elif kind == "subs":
                for name, section in x().items():
                    c[name] = section
        return c

    def validate(self, cfg) -> None:
        if self.optional and self.name not in cfg:
            return
        for kind, x in self._items:
            if kind == "field" and x.ok is not None and (x.when is None or x.when(cfg)):
                check(cfg, f"{self.name}.{x.name}", x.ok, x.allowed)
            elif kind == "rule":
                x(cfg)


def check(cfg, field: str, ok: Callable[[Any], bool], allowed: str) -> None:
    """ConfigError "FIELD=VALUE is not allowed: ALLOWED" unless `ok(cfg's FIELD)`."""
    node: Any = cfg
    for part in field.split("."):
        node = node[part]
    if not passes(ok, node):
        raise ConfigError(f"{field}={node!r} is not allowed: {allowed}")


def passes(ok: Callable[[Any], bool], value: Any) -> bool:
    """`ok(value)`, a TypeError (a value of the wrong type) counting as a refusal."""
    try:
        return bool(ok(value))
    except TypeError:
        return False


def as_config_error(fn: Callable[[], Any]) -> Any:
    """`fn()`, its ValueError raised as a ConfigError (a registry's own validation)."""
    try:
        return fn()
    except ConfigError:
        raise
    except ValueError as e:
        raise ConfigError(str(e)) from None


def int_(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def pos_int(x) -> bool:
    return int_(x) and x >= 1


def nonneg_int(x) -> bool:
    return int_(x) and x >= 0


def nonneg(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def pos(x) -> bool:
    return nonneg(x) and x > 0


def one_of(*choices) -> Callable[[Any], bool]:
    return lambda x: x in choices


def boolean(x) -> bool:
    return isinstance(x, bool)


def top_k(x) -> bool:
    return pos_int(x) or (int_(x) and x == -1)


TOP_K_ALLOWED = "-1 (off) or an integer >= 1 (SGLang refuses 0)"
