"""Task interface: prompts, verifiers and the task registry.

A task is a fixed training pool plus a held-out eval set of `Prompt`s and a verifier that maps
(prompt, response text, finished) to a reward in {1, 0, -1}. Tasks are plain data: they are
built once on the host by `make_task(name, cfg, seed)` and never touch the accelerator, so this
package must not import jax.

Names are either a registered family ("arith", "corpus") or "family:arg" ("gym:leg_counting");
the part after the colon is passed to the family's builder as `cfg["dataset"]`.

A config's task section may carry fields of another family left at that family's defaults
(`config_lib.default_config()` holds arith's, so `--config.task.name=gym:<dataset>` on an arith
config brings them along): `make_task` drops those, and any other field the family does not know
is an error naming it and its value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from frontier_rl.tasks.rewards import (  # noqa: F401 - re-exported: every task's outcomes
    REWARD_CORRECT,
    REWARD_INVALID,
    REWARD_WRONG,
)


@dataclasses.dataclass(frozen=True)
class Prompt:
    """One problem. `id` is stable for a given task config and data seed."""

    id: str  # e.g. "arith/4op/000123"
    text: str  # exactly what the policy is conditioned on
    answer: str  # canonical reference answer
    bucket: str  # difficulty bucket for per-bucket eval breakdowns, e.g. "4op"
    # Excluded from the hash so prompts can live in sets / dict keys despite holding a dict.
    meta: dict = dataclasses.field(default_factory=dict, hash=False)


# (prompt, response, finished) -> REWARD_CORRECT | REWARD_WRONG | REWARD_INVALID.
Verifier = Callable[[Prompt, str, bool], int]


@dataclasses.dataclass
class Task:
    """A training pool and a disjoint eval set with a verifier.

    `buckets` is ordered easy -> hard. `alphabet` is set for character-level tasks (build the
    tokenizer with `build_char_tokenizer(task.alphabet)`), None for text tasks. `config` is the
    fully resolved task config (including the data seed actually used), `stats` holds counters
    gathered while building (e.g. {"skipped_no_answer": 3}). `response_template` turns a
    reference answer into a response the verifier scores correct (`format_response`): what a
    supervised warm start teaches.
    """

    name: str
    train: list[Prompt]
    eval: list[Prompt]
    buckets: list[str]
    verifier: Verifier
    stats: dict = dataclasses.field(default_factory=dict)
    config: dict = dataclasses.field(default_factory=dict)
    alphabet: str | None = None
    response_template: str | None = "{answer}"
    # A picklable (response, reference answer, finished) -> reward that scores like `verifier`:
    # with it, `verify_many` checks responses in `verify_workers` processes, each response
    # bounded by `verify_timeout_s` (tasks/verify_pool.py). None: checked here, in order.
    scorer: Callable[[str, str, bool], int] | None = None
    verify_workers: int = 0
    verify_timeout_s: float = 10.0
    # How this task renders a new bare question: its prompt text with "{prompt}" standing for
    # the question (other braces doubled, for str.format). HeaPA's augmentation unwraps parents
    # and wraps children with it, so a child is rendered as the task renders its seeds.
    prompt_wrapper: str = "{prompt}"
    # The reward of a correct, a wrong and an invalid response (outcome 1 / 0 / -1): a corpus
    # task's named reward variant (tasks/corpus.py REWARDS), before any length shaping.
    reward_values: tuple[float, float, float] = (1.0, 0.0, -1.0)
    # A procedural task's fresh supervised examples, (buckets, n, seed) -> n (prompt text,
    # reference answer) pairs of those buckets drawn apart from the pool and the eval set: what
    # the warm start teaches instead of the pool's own prompts (arith, reasoning-gym). None: a
    # fixed corpus, whose warm start uses its training prompts.
    examples: Callable[[Sequence[str], int, int], list[tuple[str, str]]] | None = None

    def verify(self, prompt: Prompt, response: str, finished: bool = True) -> int:
        """Returns 1 (correct), 0 (well-formed but wrong) or -1 (unfinished / unparsable)."""
        return self.verifier(prompt, response, finished)

    def verify_many(self, prompts: Sequence[Prompt], responses: Sequence[str],
                    finished: Sequence[bool]) -> tuple[np.ndarray, int]:
        """(int8 rewards, responses whose check timed out or crashed) for parallel lists. A
        check that times out or crashes scores REWARD_WRONG; it never raises or hangs."""
        if self.scorer is None or not self.verify_workers:
            return np.array([self.verify(p, r, bool(f)) for p, r, f
                             in zip(prompts, responses, finished, strict=True)], np.int8), 0
        from frontier_rl.tasks.verify_pool import shared_pool

        pool = shared_pool(self.scorer, self.verify_workers, self.verify_timeout_s)
        res = pool.map([(r, p.answer, bool(f))
                        for p, r, f in zip(prompts, responses, finished, strict=True)])
        return res.rewards, res.timeouts + res.crashes

    def format_response(self, answer: str) -> str:
        """A response (EOS excluded) that the verifier scores correct for reference `answer`,
        e.g. "458" (arith), "<answer>458</answer>" (reasoning-gym) or "\\boxed{458}" (math
        corpora). A task whose verifier no fixed format satisfies has response_template None,
        and a warm start on it is refused."""
        if self.response_template is None:
            raise ValueError(f"task {self.name} has no response format a warm start could "
                             "teach (response_template is None)")
        return self.response_template.format(answer=answer)

    def empty_buckets(self, split: str) -> list[str]:
        """The buckets with no prompt in `split` ("train" or "eval"), in bucket order. A gym
        task's buckets come from both splits and its eval split drops every item also in
        train, so a bucket of few distinct items (the shortest sums) can be left with no eval
        prompts; its accuracy is then undefined, not 0 (evaluation/suite.py NO_PROMPTS)."""
        if split not in ("train", "eval"):
            raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
        have = {p.bucket for p in getattr(self, split)}
        return [b for b in self.buckets if b not in have]

    @property
    def easy_buckets(self) -> list[str]:
        """The easier half of the buckets (at least one): the default warm-start slice, which
        leaves the bucket just above it as RL's frontier (arith 2op..5op -> 2op, 3op)."""
        return self.buckets[: max(1, len(self.buckets) // 2)]


TaskBuilder = Callable[[dict, int], Task]
TASKS: dict[str, TaskBuilder] = {}
DEFAULTS: dict[str, dict] = {}  # family -> its config fields and their defaults
CHECKS: dict[str, Callable[[dict], None]] = {}  # family -> cheap check before building


def register_task(name: str, defaults: Mapping | None = None,
                  check: Callable[[dict], None] | None = None
                  ) -> Callable[[TaskBuilder], TaskBuilder]:
    """Decorator registering `builder(cfg: dict, seed: int) -> Task` under `name`.

    `defaults` are the family's config fields; `check(cfg)` (optional) raises on a config that
    cannot be built (a missing package, an unknown dataset) without building anything.
    """

    def deco(builder: TaskBuilder) -> TaskBuilder:
        if name in TASKS:
            raise ValueError(f"Task {name!r} is already registered.")
        TASKS[name] = builder
        if defaults is not None:
            DEFAULTS[name] = dict(defaults)
        if check is not None:
            CHECKS[name] = check
        return builder

    return deco


def to_dict(cfg: Any) -> dict:
    """Plain dict from None, a dict or an ml_collections ConfigDict (shallow copy)."""
    if cfg is None:
        return {}
    if hasattr(cfg, "to_dict"):  # ConfigDict / FrozenConfigDict.
        return dict(cfg.to_dict())
    if isinstance(cfg, Mapping):
        return dict(cfg)
    raise TypeError(f"Task config must be a mapping or ConfigDict, got {type(cfg).__name__}.")


def _family_config(name: str, cfg: Any) -> tuple[str, dict]:
    """(family, the fields its builder gets): another family's fields left at their defaults
    are dropped, the dataset after "family:" becomes cfg["dataset"]."""
    cfg = to_dict(cfg)
    family, _, arg = name.partition(":")
    if family not in TASKS:
        raise ValueError(
            f"Unknown task {name!r}; registered: {sorted(TASKS)} (gym tasks: 'gym:<name>')."
        )
    own = DEFAULTS.get(family, {})
    def foreign_default(k, v) -> bool:
        return k not in own and any(k in d and _same(v, d[k])
                                    for f, d in DEFAULTS.items() if f != family)

    cfg = {k: v for k, v in cfg.items() if not foreign_default(k, v)}
    if arg:
        cfg["dataset"] = arg
    return family, cfg


def _same(a, b) -> bool:
    # type-strict, so True does not pass for a default of 1
    return type(a) is type(b) and a == b


def check_config(name: str, cfg: Any = None) -> None:
    """Raises ValueError (or ImportError for a missing package) if `make_task(name, cfg)` would
    fail on its config: an unknown family, a field the family does not know, and the family's
    own cheap checks. Builds nothing; what `config_lib.validate` runs."""
    family, cfg = _family_config(name, cfg)
    if family in DEFAULTS:
        cfg = resolve_config(cfg, DEFAULTS[family], family)
    if family in CHECKS:
        CHECKS[family](cfg)


def make_task(name: str, cfg: Any = None, seed: int = 0) -> Task:
    """Builds a registered task. `cfg` is a dict / ConfigDict of that family's knobs."""
    family, cfg = _family_config(name, cfg)
    return TASKS[family](cfg, seed)


def resolve_config(cfg: Mapping, defaults: Mapping, family: str) -> dict:
    """Fills defaults and rejects unknown keys, so a typo in a config is an error, not a no-op.

    "name" is tolerated because configs usually keep the task name next to its knobs.
    """
    unknown = sorted(set(cfg) - set(defaults) - {"name"})
    if unknown:
        given = ", ".join(f"task.{k}={cfg[k]!r}" for k in unknown)
        raise ValueError(f"{given}: not a field of {family} tasks; {family} fields: "
                         f"{sorted(defaults)}.")
    out = dict(defaults)
    out.update({k: v for k, v in cfg.items() if k != "name"})
    return out


def data_seed(cfg: Mapping, seed: int) -> int:
    """Seed for data generation: `cfg["data_seed"]` if set (same pool for every run seed), else
    `seed + cfg["seed_offset"]`."""
    if cfg.get("data_seed") is not None:
        return int(cfg["data_seed"])
    return int(seed) + int(cfg.get("seed_offset", 0))


def rng(*keys: int) -> np.random.Generator:
    """Independent deterministic stream per key tuple (e.g. (seed, STREAM_EVAL, bucket)).

    The key count is mixed in because SeedSequence zero-pads short entropy, which would make
    (a, b) and (a, b, 0) the same stream.
    """
    return np.random.default_rng(np.random.SeedSequence([len(keys), *map(int, keys)]))


def split_counts(total: int, weights: Iterable[float]) -> list[int]:
    """Splits `total` into integer parts proportional to `weights` (largest remainder)."""
    w = np.asarray(list(weights), dtype=np.float64)
    if w.ndim != 1 or len(w) == 0 or (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"Bucket weights must be non-negative with a positive sum, got {w}.")
    exact = total * w / w.sum()
    counts = np.floor(exact).astype(int)
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[: total - counts.sum()]] += 1
    return counts.tolist()
