"""A scripted StepContext for tests and benches (numpy only; not a model of learning).

Each of N prompts has a latent success probability p_i. `rollout(indices, n)` draws n Bernoulli
outcomes per prompt from a seeded generator (1 = correct; a failure is invalid, -1, with
probability `invalid_frac`, else wrong, 0), unless the test scripted that prompt's next visits
exactly (`script`). `prompt_entropy` answers a signal correlated with p(1 - p) (or exact values
given by the test), `generate` answers arithmetic prompts such as "12+7+30=", and every response
is counted in `counters["rollouts"]`, as the real context does.

Prompts are built lazily, so a pool of 10^6 costs only its probability array. Their text is an
arith-style sum whose operand count grows with difficulty (bucket "2op" for p near 1 ... "5op"
for p near 0), so bucket-level statistics carry signal, as they do on the real task.

`time_in_s` accumulates the time spent inside this context's methods, so a bench can subtract
it and time only the selector.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence

import numpy as np

from frontier_rl.selection.base import REWARD_CORRECT, REWARD_INVALID, REWARD_WRONG, Group

COUNTERS = ("rollouts", "response_tokens", "prompt_tokens", "entropy_prompts", "generated_texts",
            "control_samples")


@dataclasses.dataclass(frozen=True)
class ScriptedPrompt:
    """Duck-types `tasks.Prompt` (id, text, answer, bucket, meta)."""

    id: str
    text: str
    answer: str
    bucket: str
    meta: dict = dataclasses.field(default_factory=dict, hash=False)


def _operand_count(p: float) -> int:
    return 2 + min(3, int((1.0 - p) * 4))


def _arith(index: int, n_ops: int) -> tuple[str, str]:
    """A deterministic sum of `n_ops` operands for this index; digits written in plain order."""
    x = (index * 2654435761 + 12345) & 0xFFFFFFFF
    ops = []
    for _ in range(n_ops):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        digits = 1 + x % 3
        ops.append((x >> 8) % (10**digits))
    return "+".join(str(v) for v in ops) + "=", str(sum(ops))


class _LazyPrompts(Sequence):
    def __init__(self, ctx: ScriptedContext):
        self._ctx = ctx

    def __len__(self) -> int:
        return self._ctx.num_base + len(self._ctx.extra_prompts)

    def __getitem__(self, i):
        t0 = time.perf_counter()
        try:
            return self._get(i)
        finally:
            self._ctx.time_in_s += time.perf_counter() - t0

    def _get(self, i):
        if isinstance(i, slice):
            return [self._get(j) for j in range(*i.indices(len(self)))]
        i = int(i)
        if i < 0:
            i += len(self)
        if i >= self._ctx.num_base:
            return self._ctx.extra_prompts[i - self._ctx.num_base]
        if not 0 <= i < self._ctx.num_base:
            raise IndexError(i)
        n_ops = _operand_count(float(self._ctx.p[i]))
        text, answer = _arith(i, n_ops)
        return ScriptedPrompt(id=f"scripted/{i}", text=text, answer=answer, bucket=f"{n_ops}op")


class ScriptedContext:
    """StepContext over latent success probabilities `p` (see module docstring).

    Args:
      p: float array [N], the success probability of each prompt.
      batch_size, group_size: B and G, as the trainer's context exposes them.
      invalid_frac: probability that a failed response is invalid (-1) rather than wrong (0).
      entropy_noise: standard deviation of the noise on the prompt-entropy signal 4p(1-p).
      entropy: exact prompt entropies [N] to answer instead of the signal (tests).
      script: {prompt index: [outcomes of visit 1, outcomes of visit 2, ...]}; a visit takes the
        next entry (its first n values, tiled if shorter); later visits fall back to p.
      new_prompt_p: success probability of prompts added with `add_prompts` (None: uniform
        random), unless the prompt's `meta["p"]` gives one.
      seed: seeds every draw.
    """

    def __init__(self, p, *, batch_size: int = 256, group_size: int = 8,
                 invalid_frac: float = 0.0, entropy_noise: float = 0.05,
                 entropy: np.ndarray | None = None,
                 script: Mapping[int, Sequence[Sequence[int]]] | None = None,
                 new_prompt_p: float | None = None, seed: int = 0):
        self.p = np.asarray(p, np.float64).copy()
        if self.p.ndim != 1 or not np.all((self.p >= 0) & (self.p <= 1)):
            raise ValueError("p must be a 1-D array of probabilities in [0, 1]")
        self.num_base = int(self.p.size)
        self.batch_size = batch_size
        self.group_size = group_size
        self.invalid_frac = float(invalid_frac)
        self.entropy_noise = float(entropy_noise)
        self.entropy = None if entropy is None else np.asarray(entropy, np.float32)
        self.script = {int(k): [np.asarray(v, np.int8) for v in seqs]
                       for k, seqs in (script or {}).items()}
        self._visits: dict[int, int] = {}
        self.new_prompt_p = new_prompt_p
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 1]))
        self._entropy_rng = np.random.default_rng(np.random.SeedSequence([seed, 2]))
        self._gen_rng = np.random.default_rng(np.random.SeedSequence([seed, 3]))
        self.extra_prompts: list[ScriptedPrompt] = []
        self._index_by_id: dict[str, int] = {}
        self.prompts = _LazyPrompts(self)
        self.step = 0
        self.params = None
        self.counters = {k: 0 for k in COUNTERS}
        self.calls: list[tuple[str, list[int], int]] = []  # (method, indices, n), for tests
        self.record_calls = False
        self.time_in_s = 0.0

    # ------------------------------------------------------------------ trainer-side helpers

    def begin_step(self, step: int, params=None) -> None:
        self.step = step
        self.params = params

    # ------------------------------------------------------------------ StepContext

    def rollout(self, indices: Sequence[int], n: int) -> list[Group]:
        groups = self._groups(indices, n)
        self.charge(groups)
        return groups

    def _groups(self, indices: Sequence[int], n: int) -> list[Group]:
        """n scripted responses of each prompt as Groups, counted nowhere."""
        t0 = time.perf_counter()
        idx = np.asarray([int(i) for i in indices], np.int64)
        if self.record_calls:
            self.calls.append(("rollout", idx.tolist(), n))
        if idx.size == 0:
            return []
        u = self.rng.random((idx.size, n))
        correct = u < self.p[idx, None]
        outcomes = np.where(correct, REWARD_CORRECT, REWARD_WRONG).astype(np.int8)
        if self.invalid_frac > 0:
            inv = self.rng.random((idx.size, n)) < self.invalid_frac
            outcomes[inv & ~correct] = REWARD_INVALID
        if self.script:
            for row, i in enumerate(idx.tolist()):
                seq = self.script.get(i)
                if seq is None:
                    continue
                visit = self._visits.get(i, 0)
                self._visits[i] = visit + 1
                if visit < len(seq):
                    outcomes[row] = np.resize(seq[visit], n)
        pq = self.p[idx] * (1.0 - self.p[idx])
        ent = (0.2 + 2.0 * pq[:, None] + 0.05 * u).astype(np.float32)
        lengths = np.full(n, 4, np.int32)
        rewards = outcomes.astype(np.float32)
        groups = [Group(index=int(i), prompt_id=self._prompt_id(int(i)), outcomes=outcomes[r],
                        rewards=rewards[r], lengths=lengths, mean_entropy=ent[r])
                  for r, i in enumerate(idx.tolist())]
        self.time_in_s += time.perf_counter() - t0
        return groups

    def control_rollout(self, indices: Sequence[int], n: int) -> list[Group]:
        """Groups as `rollout` makes them, uncharged: counted in `control_samples` (control
        arms; they `charge` the groups they train on)."""
        groups = self._groups(indices, n)
        self.counters["control_samples"] += n * len(groups)
        return groups

    def charge(self, groups: Sequence[Group]) -> None:
        """Books `groups` as rollouts (4 tokens a response)."""
        n = sum(g.size for g in groups)
        self.counters["rollouts"] += n
        self.counters["response_tokens"] += 4 * n

    def pass_rates(self, indices: Sequence[int], k: int = 0) -> np.ndarray:
        """The scripted pass rate of each prompt, exact (control arms; never charged)."""
        idx = np.asarray([int(i) for i in indices], np.int64)
        if self.record_calls:
            self.calls.append(("pass_rates", idx.tolist(), k))
        self.counters["control_samples"] += int(idx.size)
        return np.asarray(self.p[idx], np.float64)

    def prompt_entropy(self, indices: Sequence[int]) -> np.ndarray:
        t0 = time.perf_counter()
        idx = np.asarray([int(i) for i in indices], np.int64)
        if self.record_calls:
            self.calls.append(("prompt_entropy", idx.tolist(), 0))
        if self.entropy is not None:
            out = self.entropy[idx].astype(np.float32)
        else:
            p = self.p[idx]
            noise = self._entropy_rng.standard_normal(idx.size) * self.entropy_noise
            out = (4.0 * p * (1.0 - p) + noise).astype(np.float32)
        self.counters["entropy_prompts"] += int(idx.size)
        self.time_in_s += time.perf_counter() - t0
        return out

    def generate(self, texts: Sequence[str], *, max_new_tokens: int = 32,
                 temperature: float = 1.0, stop: Sequence[str] = ()) -> list[str]:
        """One arith-style prompt per input text, e.g. "12+7+30=" (charged as rollouts)."""
        t0 = time.perf_counter()
        out = []
        for _ in texts:
            k = int(self._gen_rng.integers(2, 6))
            digits = self._gen_rng.integers(1, 4, size=k)
            ops = [int(self._gen_rng.integers(0, 10**int(d))) for d in digits]
            out.append("+".join(str(v) for v in ops) + "=")
        self.counters["rollouts"] += len(out)
        self.counters["generated_texts"] += len(out)
        self.time_in_s += time.perf_counter() - t0
        return out

    def _prompt_id(self, i: int) -> str:
        if i >= self.num_base:
            return self.extra_prompts[i - self.num_base].id
        return f"scripted/{i}"

    def add_prompts(self, prompts: Sequence) -> list[int]:
        """Makes new prompts rollable (as the trainer's context does); returns their indices."""
        t0 = time.perf_counter()
        out, new_p = [], []
        for pr in prompts:
            idx = self._index_by_id.get(pr.id)
            if idx is None:
                idx = self.num_base + len(self.extra_prompts)
                self.extra_prompts.append(pr)
                self._index_by_id[pr.id] = idx
                meta = getattr(pr, "meta", None) or {}
                if "p" in meta:
                    new_p.append(float(meta["p"]))
                elif self.new_prompt_p is not None:
                    new_p.append(float(self.new_prompt_p))
                else:
                    new_p.append(float(self._gen_rng.random()))
            out.append(idx)
        if new_p:
            self.p = np.concatenate([self.p, np.asarray(new_p)])
        self.time_in_s += time.perf_counter() - t0
        return out
