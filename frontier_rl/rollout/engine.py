"""One rollout-engine interface for every generation: rollouts (`ctx.rollout`), HeaPA's
augmentation (`ctx.generate`) and evaluation.

An engine answers three calls:
  generate(prompt_ids, n, sampling) -> SampleResult: token ids, per-token log-probs, lengths and
      whether each row stopped on a stop token (its finish reason; the rest hit the token cap),
      prompt-major (row i*n + j is sample j of prompt i);
  sync(params, step): make the engine sample from `params` from now on;
  health() -> bool.

Two implementations, picked by `rollout.engine`:
  "jax"    `JaxEngine`: the in-process sampler (sampler.py) over the trainer's own arrays; sync
           stores a reference, so results are exactly those of calling the sampler directly.
  "sglang" `rollout.sglang.SGLangEngine`: an HTTP client of SGLang's native API (real SGLang on
           GPUs, or `frontier-rl serve` on any JAX backend); sync exports the policy to disk and
           asks the server to reload it, then checks a probe's log-probs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol

from frontier_rl.rollout.sampler import Sampler, SampleResult


class EngineError(RuntimeError):
    """An engine could not produce what was asked (after its retries), or serves the wrong
    weights. The message says what, where, and what was tried."""


@dataclasses.dataclass(frozen=True)
class Sampling:
    """How to sample one generate call. `max_new_tokens=None`: the engine's default cap."""

    temperature: float = 1.0
    top_p: float = 1.0
    greedy: bool = False
    max_new_tokens: int | None = None
    seed: int = 0


class Engine(Protocol):
    external: bool  # True when tokens come from another process (old log-probs recomputed)

    def generate(self, prompt_ids: Sequence[Sequence[int]], n: int,
                 sampling: Sampling) -> SampleResult: ...

    def sync(self, params, step: int) -> None: ...

    def health(self) -> bool: ...

    def metrics(self) -> dict[str, float]: ...


class JaxEngine:
    """The embedded sampler behind the engine interface."""

    external = False

    def __init__(self, sampler: Sampler, params=None):
        self.sampler = sampler
        self.params = params
        self.step = 0

    def generate(self, prompt_ids, n: int, sampling: Sampling) -> SampleResult:
        if self.params is None:
            raise EngineError("generate() before sync(): the engine has no parameters")
        return self.sampler.sample(self.params, prompt_ids, n, seed=sampling.seed,
                                   temperature=sampling.temperature, top_p=sampling.top_p,
                                   greedy=sampling.greedy, max_new_tokens=sampling.max_new_tokens)

    def sync(self, params, step: int) -> None:
        self.params, self.step = params, step

    def health(self) -> bool:
        return True

    def metrics(self) -> dict[str, float]:
        return {}


def generate(engine, params, prompt_ids, n: int, sampling: Sampling) -> SampleResult:
    """`engine.generate`, or a bare Sampler's `sample` with `params` (the callers that hold a
    sampler and parameters of their own: `frontier-rl eval`, the warm start's check)."""
    if isinstance(engine, Sampler):
        return JaxEngine(engine, params).generate(prompt_ids, n, sampling)
    return engine.generate(prompt_ids, n, sampling)
