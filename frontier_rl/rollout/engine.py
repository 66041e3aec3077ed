"""One rollout-engine interface for every generation: rollouts (`ctx.rollout`), HeaPA's
augmentation (`ctx.generate`) and evaluation.

An engine answers three calls:
  generate(prompt_ids, n, sampling) -> SampleResult: token ids, per-token log-probs, lengths and
      whether each row stopped on a stop token (its finish reason; the rest hit the token cap),
      prompt-major (row i*n + j is sample j of prompt i);
  sync(params, step): make the engine sample from `params` from now on;
  health() -> bool.

Two built-in implementations, registered under the names `rollout.engine` takes
(rollout/registry.py; rollout/engines.py lists them):
  "jax"    `JaxEngine`: the in-process sampler (sampler.py) over the trainer's own arrays; sync
           stores a reference, so results are exactly those of calling the sampler directly.
  "sglang" `rollout.sglang.SGLangEngine`: an HTTP client of SGLang's native API (real SGLang on
           GPUs, or `frontier-rl serve` on any JAX backend); sync pushes the policy through a
           weight transport (`rollout.sglang.WeightTransport`; the one implemented exports it,
           in memory where the host allows, and asks the server to load it), then checks a
           probe's log-probs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from frontier_rl.rollout.registry import EngineParts, register_engine
from frontier_rl.rollout.sampler import Sampler, SampleResult, concat


class EngineError(RuntimeError):
    """An engine could not produce what was asked (after its retries), or serves the wrong
    weights. The message says what, where, and what was tried."""


@dataclasses.dataclass(frozen=True)
class Sampling:
    """How to sample one generate call. `max_new_tokens=None`: the engine's default cap.
    `top_k`: draw among the k most likely tokens only, -1 = off (SGLang's convention); with
    top_p < 1 as well, the nucleus is taken within them (sampler.py)."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    greedy: bool = False
    max_new_tokens: int | None = None
    seed: int = 0


class Engine(Protocol):
    external: bool  # True when tokens come from another process (old log-probs recomputed)

    def generate(self, prompt_ids: Sequence[Sequence[int]], n: int,
                 sampling: Sampling) -> SampleResult: ...

    def sync(self, params, step: int) -> None: ...

    # The run loop's view: when the engine takes new weights and what it reports.
    def ensure(self, params, step: int) -> None:
        """Serve the policy `params` of `step` from now on (a no-op if it already does)."""

    def sync_due(self, step: int) -> bool:
        """Whether the policy updated at `step` goes to the engine now (its sync schedule)."""

    def begin_step(self, step: int) -> None: ...

    def step_metrics(self, step: int) -> dict[str, float]:
        """The engine's metrics for the step's record (staleness, counters); {} if none."""

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...

    def health(self) -> bool: ...

    def metrics(self) -> dict[str, float]: ...


class JaxEngine:
    """The embedded sampler behind the engine interface. With `rows_per_call` (> 0) a call's
    rows are generated in consecutive sampler calls of at most that many rows (whole prompts,
    so at least n rows each): the dense KV cache is rows x (prompt + cap), and this bounds it
    where the papers' batches (8,192 rows of 20k tokens) would not fit. The first call keeps the
    call's seed, so a call within the cap is exactly one sampler call."""

    external = False

    def __init__(self, sampler: Sampler, params=None, rows_per_call: int = 0):
        self.sampler = sampler
        self.params = params
        self.rows_per_call = int(rows_per_call)
        self.step = 0

    def generate(self, prompt_ids, n: int, sampling: Sampling) -> SampleResult:
        if self.params is None:
            raise EngineError("generate() before sync(): the engine has no parameters")
        per_call = len(prompt_ids)
        if self.rows_per_call:
            per_call = max(1, self.rows_per_call // n)
        parts = []
        for i, start in enumerate(range(0, len(prompt_ids), per_call)):
            seed = sampling.seed if i == 0 else int(
                np.random.SeedSequence([sampling.seed, i]).generate_state(1)[0])
            parts.append(self.sampler.sample(
                self.params, prompt_ids[start:start + per_call], n, seed=seed,
                temperature=sampling.temperature, top_p=sampling.top_p,
                sample_top_k=sampling.top_k, greedy=sampling.greedy,
                max_new_tokens=sampling.max_new_tokens))
        return concat(parts)

    def sync(self, params, step: int) -> None:
        self.params, self.step = params, step

    # In process, the sampler reads the trainer's parameters: every step's policy is served at
    # once, nothing is stale and there is nothing to report or checkpoint.
    def ensure(self, params, step: int) -> None:
        self.sync(params, step)

    def sync_due(self, step: int) -> bool:
        return True

    def begin_step(self, step: int) -> None:
        pass

    def step_metrics(self, step: int) -> dict[str, float]:
        return {}

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    def health(self) -> bool:
        return True

    def metrics(self) -> dict[str, float]:
        return {}


@register_engine("jax", external=False)
def _build_jax(parts: EngineParts) -> JaxEngine:
    """The in-process sampler; `rollout.rows_per_call` bounds its rows per sampler call."""
    return JaxEngine(parts.sampler, rows_per_call=parts.config.rollout.rows_per_call)


def recompute_old_logp(mode: str, top_p: float, engine, top_k: int = -1,
                       staleness: int = 0) -> bool:
    """Whether the trainer recomputes the old policy's log-probs (`rl.recompute_old_logp`):
    "always", "never", or "auto" = when the engine's cannot serve: generated by another
    implementation (an external engine), under top-p or top-k truncation, or by older
    parameters (rl.staleness >= 1: the engine's are then the behaviour policy's, which the
    rollout corrections weigh against the trainer's)."""
    truncated = top_p < 1.0 or top_k >= 1
    return {"always": True, "never": False}.get(mode, truncated or engine.external
                                                or staleness > 0)


def generate(engine, params, prompt_ids, n: int, sampling: Sampling) -> SampleResult:
    """Generation from `params` by a JaxEngine or a bare Sampler (the callers that hold
    parameters of their own: evaluation, `frontier-rl eval`, the warm start's check), or by an
    external engine, which serves the weights it was synced to. An in-process engine that
    already serves `params` (the run loop's calls) answers itself, so a subclass's own
    `generate` is what runs."""
    if isinstance(engine, Sampler):
        return JaxEngine(engine, params).generate(prompt_ids, n, sampling)
    if isinstance(engine, JaxEngine) and params is not engine.params:
        return JaxEngine(engine.sampler, params, engine.rows_per_call).generate(
            prompt_ids, n, sampling)
    return engine.generate(prompt_ids, n, sampling)
