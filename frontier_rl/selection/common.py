"""Pieces shared by the selectors: config reading and checking, the shuffled prompt stream,
zero-variance classification of groups, per-step statistics, and compact state encoding.

Host-side numpy only, like the rest of `selection/`.
"""

from __future__ import annotations

import base64
import math
import time
import types
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from frontier_rl.run import fields
from frontier_rl.selection.base import REWARD_CORRECT, REWARD_INVALID, REWARD_WRONG, Group

# Zero-variance type of a group, from its raw verifier outcomes (never from shaped rewards).
MIXED, EASY, HARD, INVALID, OTHER = 0, 1, 2, 3, 4  # OTHER: all equal to an unknown outcome


# ----------------------------------------------------------------------------- config


def read_config(section: Any, defaults: dict) -> types.SimpleNamespace:
    """`defaults` overridden by whatever `section` (a ConfigDict, a dict or None) sets."""
    values = dict(defaults)
    if section is not None:
        items = section.items() if hasattr(section, "items") else vars(section).items()
        for k, v in items:
            if k not in defaults:
                raise ValueError(f"unknown selector field {k!r}; known: {sorted(defaults)}")
            values[k] = v
    return types.SimpleNamespace(**values)


class Checker:
    """Validation of one selector's config section with messages naming the field:
    `selector.hive.k_keep=1.5 is not allowed: a number in (0, 1]`."""

    def __init__(self, name: str, section: Any, defaults: dict):
        self.name = name
        self.cfg = read_config(section, defaults)

    def __call__(self, field: str, ok: Callable[[Any], bool], allowed: str) -> None:
        value = getattr(self.cfg, field)
        if not fields.passes(ok, value):
            raise ValueError(f"selector.{self.name}.{field}={value!r} is not allowed: {allowed}")


def is_int(x, lo: int | None = None) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool) and (lo is None or x >= lo)


def is_num(x, lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
           hi_open: bool = False) -> bool:
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        return False
    if not math.isfinite(x):
        return False
    if lo is not None and (x <= lo if lo_open else x < lo):
        return False
    return not (hi is not None and (x >= hi if hi_open else x > hi))


# ----------------------------------------------------------------------------- prompt stream


class PromptStream:
    """The shuffled, epoch-cycling dataloader over `size` items: each epoch is a permutation
    seeded by (seed, epoch). `uniform` and the stream-based selectors share it, so with one
    seed they see the prompts in the same order. Its state is (epoch, cursor)."""

    def __init__(self, size: int, seed: int):
        if size < 1:
            raise ValueError("the training pool is empty")
        self.size = size
        self.seed = seed
        self.epoch = 0
        self.cursor = 0
        self._perm = self._permutation(0)

    def _permutation(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.size)

    def next(self, k: int) -> np.ndarray:
        """The next k items (int64), crossing epochs as needed."""
        if self.cursor + k <= self.size:  # the common case: one slice
            out = self._perm[self.cursor:self.cursor + k]
            self.cursor += k
            if self.cursor == self.size:
                self._advance()
            return out
        parts = []
        while k > 0:
            take = min(k, self.size - self.cursor)
            parts.append(self._perm[self.cursor:self.cursor + take])
            self.cursor += take
            k -= take
            if self.cursor == self.size:
                self._advance()
        return np.concatenate(parts)

    def _advance(self) -> None:
        self.epoch += 1
        self.cursor = 0
        self._perm = self._permutation(self.epoch)

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "cursor": self.cursor}

    def load_state_dict(self, state: dict) -> None:
        self.epoch = int(state["epoch"])
        self.cursor = int(state["cursor"])
        self._perm = self._permutation(self.epoch)


# ----------------------------------------------------------------------------- groups


def outcome_matrix(groups: Sequence[Group]) -> np.ndarray:
    """Raw outcomes of equal-sized groups as an int8 [len(groups), G] array."""
    if not groups:
        return np.zeros((0, 0), np.int8)
    return np.stack([g.outcomes for g in groups]).astype(np.int8, copy=False)


def classify(outcomes: np.ndarray) -> np.ndarray:
    """Zero-variance type per row of raw outcomes [n, G]: EASY (all correct), HARD (all wrong),
    INVALID (all invalid), OTHER (all equal, another value) or MIXED (non-zero variance)."""
    if outcomes.size == 0:
        return np.zeros(outcomes.shape[0], np.int8)
    first = outcomes[:, 0]
    zv = np.all(outcomes == first[:, None], axis=1)
    types_ = np.full(outcomes.shape[0], OTHER, np.int8)
    types_[first == REWARD_CORRECT] = EASY
    types_[first == REWARD_WRONG] = HARD
    types_[first == REWARD_INVALID] = INVALID
    types_[~zv] = MIXED
    return types_


def regroup(group: Group, keep: Sequence[int] | np.ndarray) -> Group:
    """The responses `keep` of a group (in that order) as a new group."""
    keep = np.asarray(keep, np.int64)
    return Group(
        index=group.index, prompt_id=group.prompt_id, outcomes=group.outcomes[keep],
        rewards=group.rewards[keep], lengths=group.lengths[keep],
        mean_entropy=group.mean_entropy[keep],
        tokens=None if group.tokens is None else group.tokens[keep],
        logps=None if group.logps is None else group.logps[keep],
        texts=None if group.texts is None else [group.texts[int(k)] for k in keep])


def concat_groups(parts: Sequence[Group]) -> Group:
    """Responses of several groups of one prompt (e.g. several rollout rounds) as one group.

    Token and log-prob arrays of different widths are right-padded with zeros (the packer reads
    only the first `lengths` entries of each row)."""
    first = parts[0]
    if len(parts) == 1:
        return first

    def cat(arrays):
        if any(a is None for a in arrays):
            return None
        width = max(a.shape[1] for a in arrays)
        return np.concatenate([np.pad(a, ((0, 0), (0, width - a.shape[1]))) for a in arrays])

    texts = None if any(p.texts is None for p in parts) else [t for p in parts for t in p.texts]
    return Group(
        index=first.index, prompt_id=first.prompt_id,
        outcomes=np.concatenate([p.outcomes for p in parts]),
        rewards=np.concatenate([p.rewards for p in parts]),
        lengths=np.concatenate([p.lengths for p in parts]),
        mean_entropy=np.concatenate([p.mean_entropy for p in parts]),
        tokens=cat([p.tokens for p in parts]), logps=cat([p.logps for p in parts]), texts=texts)


# ----------------------------------------------------------------------------- step statistics


class StepStats:
    """What one step rolled out and how long the selector's own host work took.

    The clock runs from construction (the start of build_batch) until `pause()` (its end), and
    again between `resume()` and `pause()` (after_update), so the trainer's update in between is
    not counted. `call(fn, ...)` runs a ctx method and books its time as context time, so
    `host_s()` is the selector's own time with the sampler, verifier and entropy pass taken out.
    """

    def __init__(self):
        self._t0 = time.perf_counter()
        self._running = True
        self._active_s = 0.0
        self.ctx_s = 0.0
        self.rollouts = 0  # responses generated this step (every round, discarded ones too)
        self.groups = 0  # groups rolled out
        self.counts = np.zeros(5, np.int64)  # groups per zero-variance type (MIXED..OTHER)
        self.rounds = 0

    def pause(self) -> None:
        if self._running:
            self._active_s += time.perf_counter() - self._t0
            self._running = False

    def resume(self) -> None:
        if not self._running:
            self._t0 = time.perf_counter()
            self._running = True

    def call(self, fn: Callable, *args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.ctx_s += time.perf_counter() - t

    def rollout(self, ctx, indices, n: int) -> list[Group]:
        """ctx.rollout (n responses per prompt), counted in this step's rollouts and rounds."""
        indices = indices.tolist() if isinstance(indices, np.ndarray) else [int(i) for i in indices]
        groups = self.call(ctx.rollout, indices, n)
        self.rounds += 1
        self.rollouts += n * len(groups)
        return groups

    def book(self, types_: np.ndarray) -> None:
        """Counts rolled-out groups by zero-variance type."""
        self.groups += int(types_.size)
        self.counts += np.bincount(types_, minlength=5)[:5]

    def host_s(self) -> float:
        running = time.perf_counter() - self._t0 if self._running else 0.0
        return self._active_s + running - self.ctx_s

    def ratio(self, kind: int) -> float:
        return float(self.counts[kind]) / self.groups if self.groups else 0.0

    def metrics(self, batch: Sequence[Group]) -> dict[str, float]:
        """The shared `select/` metrics; `batch` is what the step returns to the trainer."""
        if batch and len({g.size for g in batch}) == 1:
            out = outcome_matrix(batch)
            effective = int(np.count_nonzero(classify(out) == MIXED)) * out.shape[1]
        else:
            effective = sum(g.size for g in batch if not g.zero_variance)
        return {
            "rollouts": float(self.rollouts),
            "effective_rollouts": float(effective),
            "groups_rolled": float(self.groups),
            "batch_groups": float(len(batch)),
            "zero_var": 1.0 - self.ratio(MIXED) if self.groups else 0.0,
            "zero_var_easy": self.ratio(EASY),
            "zero_var_hard": self.ratio(HARD),
            "zero_var_invalid": self.ratio(INVALID),
            "rounds": float(self.rounds),
            "host_ms": 1e3 * self.host_s(),
        }


class StreamSelector:
    """The Selector methods besides `build_batch` of a selector that reads the shuffled prompt
    stream (every selector but the HeaPA family): a subclass sets `self.stream` (PromptStream),
    `self.mech` (Tally) and `self._last` (the step's `select/` metrics), writes `build_batch`
    and `proof_counters`, and extends the state methods when it keeps more than its place in
    the stream and its tally. One whose state is per prompt sets `self.num_prompts` and one
    that draws sets `self.rng`: the state then holds both, and a restore into a pool of another
    size is refused, naming the selector by its `name`."""

    name = "selector"

    def after_update(self, ctx, groups: list[Group]) -> None:
        pass

    def metrics(self) -> dict[str, float]:
        return dict(self._last)

    def mechanisms(self) -> dict[str, int]:
        return {"pool_passes": self.stream.epoch, **self.mech.counts}

    def state_dict(self) -> dict:
        state = {"stream": self.stream.state_dict(), "mechanisms": self.mech.state_dict()}
        if hasattr(self, "num_prompts"):
            state["num_prompts"] = self.num_prompts
        if hasattr(self, "rng"):
            state["rng"] = rng_state(self.rng)
        return state

    def load_state_dict(self, state: dict) -> None:
        if hasattr(self, "num_prompts") and int(state["num_prompts"]) != self.num_prompts:
            raise ValueError(f"{self.name} state is for {state['num_prompts']} prompts, the pool "
                             f"has {self.num_prompts}")
        self.stream.load_state_dict(state["stream"])
        if hasattr(self, "rng"):
            set_rng_state(self.rng, state["rng"])
        self.mech.load_state_dict(state.get("mechanisms"))


class ExplorationSelector(StreamSelector):
    """A StreamSelector whose exploration probabilities p_easy and p_hard move after each
    update, the step GRESO and HIVE share (GRESO's code, HIVE Eq. 4). Besides StreamSelector's
    attributes a subclass sets `self.cfg` (alpha, delta_p, p_min, p_max, skip_first_epoch),
    `self.p_easy`, `self.p_hard`, and `self._stats` (the step's StepStats) in build_batch."""

    def after_update(self, ctx, groups: list[Group]) -> None:
        """Moves p_easy and p_hard by delta_p toward the targets alpha/3 and 2*alpha/3 of this
        step's easy / hard zero-variance ratios (not during the first epoch when
        `skip_first_epoch`), counting the updates that changed them in `mech`."""
        st, c = self._stats, self.cfg
        if st is None:
            return
        st.resume()
        if st.groups and not (c.skip_first_epoch and self.stream.epoch == 0):
            p_easy = adjust_p(self.p_easy, st.ratio(EASY), c.alpha / 3, c.delta_p, c.p_min,
                              c.p_max)
            p_hard = adjust_p(self.p_hard, st.ratio(HARD), 2 * c.alpha / 3, c.delta_p,
                              c.p_min, c.p_max)
            self.mech.add("p_easy_moves", p_easy != self.p_easy)
            self.mech.add("p_hard_moves", p_hard != self.p_hard)
            self.p_easy, self.p_hard = p_easy, p_hard
        self._last["p_easy"] = self.p_easy
        self._last["p_hard"] = self.p_hard
        st.pause()
        self._last["host_ms"] = 1e3 * st.host_s()


def adjust_p(p: float, ratio: float, target: float, step: float, p_min: float,
             p_max: float) -> float:
    """GRESO's exploration-probability rule: lower p (skip more) when the zero-variance ratio
    reached its target, raise it otherwise; clipped to [p_min, p_max]."""
    p = p - step if ratio >= target else p + step
    return float(min(max(p, p_min), p_max))


# ----------------------------------------------------------------------------- mechanisms


class Tally:
    """Cumulative event counts behind `Selector.mechanisms`, with a fixed set of names.

    Saved in the selector's state; a checkpoint from before a counter existed loads it as 0.
    """

    def __init__(self, *names: str):
        self.counts = dict.fromkeys(names, 0)

    def add(self, name: str, n: int = 1) -> None:
        self.counts[name] += int(n)

    def __getitem__(self, name: str) -> int:
        return self.counts[name]

    def state_dict(self) -> dict[str, int]:
        return dict(self.counts)

    def load_state_dict(self, state: dict | None) -> None:
        state = state or {}
        self.counts = {k: int(state.get(k, 0)) for k in self.counts}


# ----------------------------------------------------------------------------- state encoding


def encode_array(a: np.ndarray) -> dict:
    """A numpy array as JSON: dtype, shape and base64 of its zlib-compressed bytes."""
    a = np.ascontiguousarray(a)
    return {"dtype": a.dtype.str, "shape": list(a.shape),
            "zlib_b64": base64.b64encode(zlib.compress(a.tobytes(), 1)).decode("ascii")}


def decode_array(d: dict) -> np.ndarray:
    raw = zlib.decompress(base64.b64decode(d["zlib_b64"]))
    return np.frombuffer(raw, dtype=np.dtype(d["dtype"])).reshape(d["shape"]).copy()


def make_rng(seed: int, tag: int) -> np.random.Generator:
    """The selector's own generator: independent of the prompt stream's permutations."""
    return np.random.default_rng(np.random.SeedSequence([seed, 0x5E1EC7, tag]))


def rng_state(rng: np.random.Generator) -> dict:
    """bit_generator.state with its (128-bit) integers as strings, so any JSON reader keeps
    them exact."""
    return _stringify(rng.bit_generator.state)


def set_rng_state(rng: np.random.Generator, state: dict) -> None:
    rng.bit_generator.state = _intify(state)


def _stringify(x):
    if isinstance(x, dict):
        return {k: _stringify(v) for k, v in x.items()}
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return {"int": str(int(x))}
    return x


def _intify(x):
    if isinstance(x, dict):
        if set(x) == {"int"}:
            return int(x["int"])
        return {k: _intify(v) for k, v in x.items()}
    return x


B_REF = 256  # the batch GRESO's and HIVE's b_min = 64 was set for


def scaled_b_min(b_min: int, batch_size: int) -> int:
    """The top-up floor b_min, given for B_t = 256, at batch size B_t: max(1, ⌈b_min B_t / 256⌉)
    (64 at 256, 16 at 64)."""
    return max(1, math.ceil(b_min * batch_size / B_REF - 1e-9))
