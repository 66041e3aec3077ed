"""The StepContext of the real trainer: selectors' door to the sampler and the verifier.

It owns the rollout accounting: every response generated through it (for any purpose) is added
to `counters`, which the trainer logs and checkpoints, and, given an `accountant`
(accounting.Accountant), every generate call and prompt-entropy pass is charged to its FLOPs.
Each call's sampling seed is derived from (run seed, step, call number within the step), so a
resumed run draws the same samples as an uninterrupted one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from frontier_rl.rollout import engine as engine_lib
from frontier_rl.rollout.sampler import Sampler, SampleResult
from frontier_rl.run import distributed
from frontier_rl.selection.base import REWARD_CORRECT, REWARD_INVALID, REWARD_WRONG, Group

COUNTERS = ("rollouts", "response_tokens", "prompt_tokens", "entropy_prompts", "entropy_tokens",
            "generated_texts", "rollout_flops", "entropy_flops", "effective_rollouts",
            "verify_timeouts", "control_samples")


class PolicyContext:
    def __init__(
        self,
        *,
        sampler: Sampler,
        tokenizer,
        prompts: Sequence,
        verify: Callable[[object, str, bool], int],
        shape_rewards: Callable[[np.ndarray, np.ndarray], np.ndarray],
        group_size: int,
        batch_size: int,
        temperature: float,
        top_p: float,
        seed: int,
        top_k: int = -1,
        prompt_entropy_fn: Callable[[object, list[list[int]]], np.ndarray] | None = None,
        flops_per_token: float = 0.0,
        accountant=None,
        verify_many: Callable | None = None,
        engine=None,
        prompt_wrapper: str = "{prompt}",
        reward_values: tuple[float, float, float] = (1.0, 0.0, -1.0),
    ):
        self.sampler = sampler
        # Where generations come from (rollout/engine.py); a bare sampler samples `self.params`.
        self.engine = engine if engine is not None else sampler
        self.tokenizer = tokenizer
        self.prompts = prompts
        self.verify = verify
        # (prompts, texts, finished) -> (rewards, checks that timed out or crashed): a task's
        # process pool (tasks/verify_pool.py); such a response scores wrong and is counted
        # in counters["verify_timeouts"].
        self.verify_many = verify_many
        self.shape_rewards = shape_rewards
        # The task's rendering of a new question (tasks.base.Task.prompt_wrapper).
        self.prompt_wrapper = prompt_wrapper
        # What `shape_rewards` values a correct / wrong / invalid outcome at (Task.reward_values):
        # selectors that score prompts on another scale convert with it.
        self.reward_values = tuple(reward_values)
        self.group_size = group_size
        self.batch_size = batch_size
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k  # sampling top-k of rollouts, -1 = off (rollout.top_k)
        self.seed = seed
        self._entropy_fn = prompt_entropy_fn
        # Analytic forward cost, 2N per token (nanoGPT's estimate without attention): rollouts and
        # entropy passes are charged to the budget under `rollout_flops` / `entropy_flops`.
        self.flops_per_token = flops_per_token
        self.accountant = accountant
        self._ids: dict[int, list[int]] = {}
        self.params = None
        self.step = 0
        self._calls = 0
        self.counters = {k: 0 for k in COUNTERS}
        self.timers = {"generate": 0.0, "verify": 0.0, "entropy": 0.0}
        self.rolled = RolledGroups(group_size)

    def begin_step(self, step: int, params) -> None:
        self.step = step
        self.params = params
        self._calls = 0
        self.timers = {k: 0.0 for k in self.timers}
        self.rolled = RolledGroups(self.group_size)

    def _next_seed(self) -> int:
        self._calls += 1
        return int(np.random.SeedSequence([self.seed, self.step, self._calls]).generate_state(1)[0])

    def add_prompts(self, prompts: Sequence) -> list[int]:
        """Makes new prompts (e.g. augmented queries) rollable; returns their indices.

        A prompt whose id is already known gets its existing index. Indices last for the
        process: selectors checkpoint prompt ids and texts, and re-add them after a resume.
        """
        if not isinstance(self.prompts, list):
            self.prompts = list(self.prompts)
        if not hasattr(self, "_index_by_id"):
            self._index_by_id = {p.id: i for i, p in enumerate(self.prompts)}
        out = []
        for p in prompts:
            idx = self._index_by_id.get(p.id)
            if idx is None:
                idx = len(self.prompts)
                self.prompts.append(p)
                self._index_by_id[p.id] = idx
            out.append(idx)
        return out

    def encode(self, index: int) -> list[int]:
        ids = self._ids.get(index)
        if ids is None:
            ids = encode_prompt(self.tokenizer, self.prompts[index].text)
            self._ids[index] = ids
        return ids

    def _sample(self, indices: list[int], n: int):
        """n scored samples of each prompt: (ids, result, texts, outcomes [rows*n] int8)."""
        ids = [self.encode(i) for i in indices]
        t0 = time.perf_counter()
        res = engine_lib.generate(self.engine, self.params, ids, n, engine_lib.Sampling(
            temperature=self.temperature, top_p=self.top_p, top_k=self.top_k,
            seed=self._next_seed()))
        t1 = time.perf_counter()
        texts = decode_responses(self.tokenizer, res)
        rows = [self.prompts[indices[r // n]] for r in range(len(texts))]
        finished = [bool(f) for f in res.finished]
        # Rewards are decided once, by process 0, and broadcast: a verifier's timeout is wall
        # clock, so two hosts could score a borderline response differently.
        outcomes, timeouts = None, 0
        if distributed.is_primary():
            if self.verify_many is not None:
                outcomes, timeouts = self.verify_many(rows, texts, finished)
            else:
                outcomes = [self.verify(p, t, f) for p, t, f
                            in zip(rows, texts, finished, strict=True)]
            outcomes = np.asarray(outcomes, np.int8)
        outcomes, timeouts = distributed.broadcast_object((outcomes, int(timeouts)))
        self.counters["verify_timeouts"] += timeouts
        self.timers["generate"] += t1 - t0
        self.timers["verify"] += time.perf_counter() - t1
        return ids, res, texts, outcomes

    def rollout(self, indices: Sequence[int], n: int) -> list[Group]:
        groups, res = self._groups(indices, n)
        if groups:
            self.charge(groups)
            if self.accountant is not None:
                self.accountant.charge_generation(res)
        return groups

    def control_rollout(self, indices: Sequence[int], n: int) -> list[Group]:
        """n scored responses of each prompt, as `rollout` makes them, for control arms only
        (selection/oracle.py): counted in `control_samples`, never in `rollouts` or the FLOPs
        budget, until the control `charge`s the groups it trains on."""
        groups, _ = self._groups(indices, n)
        self.counters["control_samples"] += n * len(groups)
        return groups

    def charge(self, groups: Sequence[Group]) -> None:
        """Books `groups` (made by this context) as rollouts: responses, tokens, their analytic
        FLOPs and the step's tally. `rollout` charges its own groups; a control arm charges the
        ones it trains on (their XLA generation cost stays uncharged: it was one call with the
        control's discards)."""
        n_tok = sum(int(g.lengths.sum()) for g in groups)
        p_tok = sum(g.size * len(self.encode(g.index)) for g in groups)
        self.counters["rollouts"] += sum(g.size for g in groups)
        self.counters["response_tokens"] += n_tok
        self.counters["prompt_tokens"] += p_tok
        self.counters["rollout_flops"] += self.flops_per_token * (n_tok + p_tok)
        self.rolled.add(np.stack([g.outcomes for g in groups]))

    def _groups(self, indices: Sequence[int], n: int) -> tuple[list[Group], SampleResult]:
        """n scored responses of each prompt as Groups, counted nowhere."""
        indices = [int(i) for i in indices]
        if not indices:
            return [], None
        ids, res, texts, outcomes = self._sample(indices, n)
        rewards = self.shape_rewards(outcomes.astype(np.float32), res.lengths)
        lengths = np.maximum(res.lengths, 1)
        mean_ent = res.entropies.sum(axis=1) / lengths
        groups = []
        for j, idx in enumerate(indices):
            s = slice(j * n, (j + 1) * n)
            groups.append(Group(
                index=idx, prompt_id=self.prompts[idx].id, outcomes=outcomes[s],
                rewards=rewards[s], lengths=res.lengths[s], mean_entropy=mean_ent[s],
                tokens=res.tokens[s], logps=res.logps[s], texts=texts[s]))
        return groups, res

    def pass_rates(self, indices: Sequence[int], k: int) -> np.ndarray:
        """Each prompt's current pass rate from k samples, for control arms: sampled and
        verified as rollouts are, but counted in `control_samples`, never in `rollouts` or the
        FLOPs budget (the measurement is the control's privilege, reported apart)."""
        rates = self.measure_pass_rates(indices, k)
        self.counters["control_samples"] += rates.size * k
        return rates

    def measure_pass_rates(self, indices: Sequence[int], k: int, batch: int = 0
                           ) -> np.ndarray:
        """k samples of each prompt under the current parameters, scored: the share correct.
        Counted nowhere (the caller books it); `batch` > 0 samples that many prompts a call."""
        indices = [int(i) for i in indices]
        if not indices:
            return np.zeros(0, np.float64)
        step = batch or len(indices)
        out = []
        for a in range(0, len(indices), step):
            part = indices[a:a + step]
            _, _, _, outcomes = self._sample(part, k)
            out.append((outcomes.reshape(len(part), k) == REWARD_CORRECT).mean(axis=1))
        return np.concatenate(out)

    def prompt_entropy(self, indices: Sequence[int]) -> np.ndarray:
        if self._entropy_fn is None:
            raise NotImplementedError("this run was built without a prompt-entropy function")
        t0 = time.perf_counter()
        ids = [self.encode(int(i)) for i in indices]
        out = self._entropy_fn(self.params, ids)
        self.timers["entropy"] += time.perf_counter() - t0
        self.counters["entropy_prompts"] += len(indices)
        self.counters["entropy_tokens"] += sum(len(x) for x in ids)
        self.counters["entropy_flops"] += self.flops_per_token * sum(len(x) for x in ids)
        if self.accountant is not None and ids:
            self.accountant.charge_entropy([len(x) for x in ids])
        return out

    def generate(self, texts: Sequence[str], *, max_new_tokens: int, temperature: float = 1.0,
                 stop: Sequence[str] = ()) -> list[str]:
        """Free-text samples from the policy, cut at the first stop string; charged as rollouts."""
        ids = [encode_prompt(self.tokenizer, t) for t in texts]
        res = engine_lib.generate(self.engine, self.params, ids, 1, engine_lib.Sampling(
            temperature=temperature, max_new_tokens=max_new_tokens, seed=self._next_seed()))
        out = decode_responses(self.tokenizer, res)
        for s in stop:
            out = [o.split(s, 1)[0] for o in out]
        self.counters["rollouts"] += len(out)
        self.counters["generated_texts"] += len(out)
        self.counters["response_tokens"] += int(res.lengths.sum())
        self.counters["rollout_flops"] += self.flops_per_token * (
            int(res.lengths.sum()) + sum(len(x) for x in ids))
        if self.accountant is not None:
            self.accountant.charge_generation(res, scored=False)  # free text: no verifier
        return out

    def on_primary(self, fn):
        """fn()'s result on process 0, broadcast to every process (a collective)."""
        return distributed.broadcast_object(fn() if distributed.is_primary() else None)


class RolledGroups:
    """This step's rolled-out groups, every round and discarded ones included: zero-variance
    types (HIVE's "zero-variance ratio" is over these, not over the trained batch) and the
    histogram of correct responses per group, in G + 1 bins (groups of another size are binned
    by their pass rate).

    The types are those of `selection.common.classify`: easy = every outcome correct, hard =
    every outcome wrong, invalid = every outcome invalid (no answer); a group of wrong and
    invalid responses has non-zero reward variance and is none of them."""

    def __init__(self, group_size: int):
        self.group_size = group_size
        self.groups = 0
        self.easy = self.hard = self.invalid = 0
        self.hist = np.zeros(group_size + 1, np.int64)

    def add(self, outcomes: np.ndarray) -> None:
        correct = (outcomes == REWARD_CORRECT).sum(axis=1)
        n = outcomes.shape[1]
        self.groups += outcomes.shape[0]
        self.easy += int(np.count_nonzero(correct == n))
        self.hard += int(np.count_nonzero(np.all(outcomes == REWARD_WRONG, axis=1)))
        self.invalid += int(np.count_nonzero(np.all(outcomes == REWARD_INVALID, axis=1)))
        bins = np.rint(correct * self.group_size / n).astype(np.int64)
        self.hist += np.bincount(bins, minlength=self.group_size + 1)

    def metrics(self) -> dict[str, float]:
        if not self.groups:
            return {}
        out = {"rollout/rolled_groups": float(self.groups),
               "rollout/rolled_zero_var_easy": self.easy / self.groups,
               "rollout/rolled_zero_var_hard": self.hard / self.groups,
               "rollout/rolled_zero_var_invalid": self.invalid / self.groups}
        for k, v in enumerate(self.hist.tolist()):
            out[f"rollout/rolled_pass_hist/{k}"] = v / self.groups
        return out


def encode_prompt(tokenizer, text: str) -> list[int]:
    """BOS + the prompt's tokens (no EOS): the sampler continues from here."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    bos = tokenizer.bos_token_id
    return ([bos] if bos is not None else []) + list(ids)


def decode_responses(tokenizer, res: SampleResult) -> list[str]:
    """Response texts without EOS and padding."""
    out = []
    for row, length, fin in zip(res.tokens, res.lengths, res.finished, strict=True):
        keep = row[: int(length) - int(bool(fin))]
        out.append(tokenizer.decode(keep.tolist(), skip_special_tokens=True))
    return out
