"""The Selector interface, the StepContext it talks through, and the selector registry.

A selector decides which prompts are rolled out and trained on at each step. It sees the device
world only through a `StepContext` (`ctx`):

- `ctx.rollout(indices, n)` generates n responses for each training prompt (by index into
  `ctx.prompts`) and returns one scored `Group` per prompt. Every response is charged to the
  rollout budget, including groups the selector later discards.
- `ctx.prompt_entropy(indices)` is the mean next-token entropy over each prompt's positions
  under the current parameters (HIVE Stage 2), charged to the FLOPs budget.
- `ctx.generate(texts, ...)` samples free text from the policy (HeaPA augmentation).

This package is host-side Python + numpy only (no jax, no model code), so the same selector runs
inside the trainer and inside the synthetic learner, and its cost is measurable in microseconds.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

REWARD_CORRECT, REWARD_WRONG, REWARD_INVALID = 1, 0, -1


@dataclasses.dataclass
class Group:
    """G responses to one prompt, scored by the verifier.

    `outcomes` are the raw verifier results in {1, 0, -1} (correct / wrong / invalid); zero-
    variance classification uses them, never a shaped reward. `rewards` are what the loss uses
    (outcomes plus any shaping such as DAPO's overlong penalty).
    """

    index: int  # into ctx.prompts
    prompt_id: str
    outcomes: np.ndarray  # int8 [G]
    rewards: np.ndarray  # float32 [G]
    lengths: np.ndarray  # int32 [G] response tokens (EOS included)
    mean_entropy: np.ndarray  # float32 [G] mean token entropy per response
    tokens: np.ndarray | None = None  # int32 [G, max_new]; None in the synthetic learner
    logps: np.ndarray | None = None  # float32 [G, max_new]
    texts: list[str] | None = None
    # Set by selectors that estimate the group baseline from more responses than they return
    # (Reinforce-Ada's global statistics): the advantage is then (rewards - adv_baseline) /
    # adv_scale instead of the within-group GRPO normalisation. None = within-group.
    adv_baseline: float | None = None
    adv_scale: float | None = None
    # The parameters' version (updates made) that generated it: step - 1 in the synchronous
    # loop, older with rl.staleness (rollout/pipeline.py). -1: not generated in a run's loop.
    version: int = -1

    @property
    def size(self) -> int:
        return int(self.outcomes.shape[0])

    @property
    def all_correct(self) -> bool:
        return bool(np.all(self.outcomes == REWARD_CORRECT))

    @property
    def all_wrong(self) -> bool:
        return bool(np.all(self.outcomes == REWARD_WRONG))

    @property
    def all_invalid(self) -> bool:
        return bool(np.all(self.outcomes == REWARD_INVALID))

    @property
    def zero_variance(self) -> bool:
        """All G raw outcomes equal: the group carries no GRPO gradient."""
        return bool(np.all(self.outcomes == self.outcomes[0]))

    @property
    def pass_rate(self) -> float:
        return float(np.mean(self.outcomes == REWARD_CORRECT))


class StepContext(Protocol):
    """The only door from selection logic to the device world (see module docstring)."""

    step: int
    prompts: Sequence[Any]  # objects with .id, .text, .answer, .bucket
    group_size: int  # G, from config.rl.group_size
    batch_size: int  # B, prompts per step, from config.rl.batch_size
    # Optional: the task's prompt text of a new question, "{prompt}" standing for it
    # (tasks.base.Task.prompt_wrapper); contexts without it render a question as itself.
    prompt_wrapper: str

    def rollout(self, indices: Sequence[int], n: int) -> list[Group]: ...

    def prompt_entropy(self, indices: Sequence[int]) -> np.ndarray: ...

    def pass_rates(self, indices: Sequence[int], k: int) -> np.ndarray:
        """Each prompt's current pass rate, for control arms only (selection/oracle.py): k
        samples each, or the exact probability where the context knows it. Never charged to
        the rollout budget; counted apart in `counters["control_samples"]`."""
        ...

    def generate(self, texts: Sequence[str], *, max_new_tokens: int, temperature: float,
                 stop: Sequence[str] = ()) -> list[str]: ...

    def add_prompts(self, prompts: Sequence[Any]) -> list[int]:
        """Makes new prompts (augmented queries) rollable; returns their indices."""
        ...

    def on_primary(self, fn: Callable[[], Any]) -> Any:
        """fn() run by process 0 alone, its result returned on every process (a collective:
        every process calls it): for what depends on the wall clock or on a service only
        process 0 talks to (HeaPA's teacher). Optional: a context of one process leaves it out
        and `on_primary(ctx, fn)` below calls fn itself. Keeps this package free of jax."""
        ...


def on_primary(ctx: StepContext, fn: Callable[[], Any]) -> Any:
    """fn() as process 0 computes it, on every process: `ctx.on_primary(fn)`, or fn() where
    the context has no such method (one process: the synthetic learner, scripted contexts)."""
    run = getattr(ctx, "on_primary", None)
    return fn() if run is None else run(fn)


class Selector(Protocol):
    """What the trainer calls, once per step, in this order."""

    def build_batch(self, ctx: StepContext) -> list[Group]:
        """Returns the groups to train on this step (rolled out through ctx)."""

    def after_update(self, ctx: StepContext, groups: list[Group]) -> None:
        """Runs after the parameter update (HeaPA augmentation, HIVE/GRESO p updates)."""

    def metrics(self) -> dict[str, float]:
        """`select/...` metrics of the last step."""

    def mechanisms(self) -> dict[str, int]:
        """Cumulative totals, since step 0, of the events that show this method's mechanism
        ran (logged as `mech/<name>`): e.g. `pool_passes` (completed passes of a stream over
        the training pool), `topup_rounds`, `stage2_dropped`, `boundary_draws`. Only counters
        the configuration can move are reported (augment=False has no `children_*`). They are
        part of `state_dict()`, so a resumed run continues the totals; counting never changes
        a selection or draws from an RNG."""

    def state_dict(self) -> dict:
        """Everything needed to resume, JSON-serialisable."""

    def load_state_dict(self, state: dict) -> None: ...

    @classmethod
    def proof_counters(cls, cfg: Any) -> tuple[list[str], list[str]]:
        """(proof, information): which `mechanisms()` counters a run with config section `cfg`
        (its fields, defaults filled in) must show non-zero to have exercised the method, and
        which it shows as information only (selection/mechanisms.py says which is which and
        why). Required: `register` refuses a selector that does not declare it."""


SelectorFactory = Callable[..., Selector]


@dataclasses.dataclass(frozen=True)
class Entry:
    factory: SelectorFactory
    defaults: dict  # config.selector.<name>.<field> defaults (paper symbols in the comments)
    validate: Callable[[Any], None] | None  # raises ValueError naming selector.<name>.<field>
    control: bool = False  # a control arm (reads measured pass rates), never a method


_REGISTRY: dict[str, Entry] = {}


def register(name: str, *, defaults: dict | None = None,
             validate: Callable[[Any], None] | None = None, control: bool = False
             ) -> Callable[[SelectorFactory], SelectorFactory]:
    """Class decorator: makes a selector available as `config.selector.name = name`.

    `defaults` become the config section `config.selector.<name>` (so every field can be
    overridden from the command line); `validate(section)` checks it before anything compiles.
    The factory is called as `factory(section, num_prompts=..., seed=...)`. `control=True`
    marks a control arm (it reads `ctx.pass_rates`): reports show it in the controls table,
    never among the methods whose claims are tested. The factory must declare its proof
    counters (`Selector.proof_counters`), so a new selector cannot enter a comparison with
    none by omission.
    """

    def wrap(factory: SelectorFactory) -> SelectorFactory:
        if name in _REGISTRY:
            raise ValueError(f"selector {name!r} is registered twice")
        if not callable(getattr(factory, "proof_counters", None)):
            raise TypeError(f"selector {name!r} declares no proof counters: give it a "
                            "classmethod proof_counters(cfg) -> (proof, information) "
                            "(selection/base.py Selector, selection/mechanisms.py)")
        _REGISTRY[name] = Entry(factory, dict(defaults or {}), validate, control)
        return factory

    return wrap


def names() -> list[str]:
    return sorted(_REGISTRY)


def is_control(name: str) -> bool:
    """Whether the selector registered as `name` is a control arm (selection/oracle.py)."""
    return name in _REGISTRY and _REGISTRY[name].control


def defaults(name: str) -> dict:
    return dict(_REGISTRY[name].defaults)


def validate(name: str, section: Any) -> None:
    entry = _REGISTRY[name]
    if entry.validate is not None:
        entry.validate(section)


def proof_counters(name: str, section: Any = None) -> tuple[list[str], list[str]]:
    """(proof, information) counters of the selector registered as `name` under its config
    section `config.selector.<name>` (a ConfigDict, a dict or None; unset fields take the
    registered defaults), as the selector declares them (`Selector.proof_counters`)."""
    if name not in _REGISTRY:
        raise ValueError(f"selector.name={name!r} is not one of {names()}")
    entry = _REGISTRY[name]
    values = dict(entry.defaults)
    if section is not None:
        values.update(section.items() if hasattr(section, "items") else vars(section).items())
    proof, info = entry.factory.proof_counters(types.SimpleNamespace(**values))
    return list(proof), list(info)


def make(name: str, cfg: Any, num_prompts: int, seed: int) -> Selector:
    """Builds the selector registered as `name` from `config.selector` (its own subsection)."""
    if name not in _REGISTRY:
        raise ValueError(f"selector.name={name!r} is not one of {names()}")
    section = cfg.get(name) if cfg is not None and hasattr(cfg, "get") else None
    return _REGISTRY[name].factory(section, num_prompts=num_prompts, seed=seed)
