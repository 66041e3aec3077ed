"""A small scripted StepContext for the HeaPA tests: arith prompts, Bernoulli outcomes whose
success probability falls with the operand count, and a `generate` that writes what a
character-level policy might (digits, sometimes '+', EOS, or nothing useful)."""

from __future__ import annotations

import numpy as np

from frontier_rl import tasks
from frontier_rl.selection.base import Group

P_BY_OPERANDS = {2: 0.95, 3: 0.7, 4: 0.35, 5: 0.1}


class ArithCtx:
    def __init__(self, n: int = 120, *, batch_size: int = 8, group_size: int = 4,
                 seed: int = 0, junk: float = 0.2, allow_wrong: bool = False):
        task = tasks.make_task("arith", {"train_size": n, "eval_per_bucket": 1}, seed)
        self.prompts = list(task.train)
        self.batch_size = batch_size
        self.group_size = group_size
        self.step = 0
        self.junk = junk
        self.rng = np.random.default_rng(seed + 1)
        self.rolled: list[list[int]] = []
        self.generated = 0
        self.added = 0
        self.allow_wrong = allow_wrong  # a teacher_error_rate run: children may be mislabelled
        self.wrong = 0  # children added with an answer that is not their sum

    def p(self, index: int) -> float:
        return P_BY_OPERANDS.get(self.prompts[index].text.count("+") + 1, 0.05)

    def rollout(self, indices, n):
        indices = [int(i) for i in indices]
        self.rolled.append(indices)
        out = []
        for i in indices:
            u = self.rng.random(n)
            outcomes = np.where(u < self.p(i), 1, np.where(u > 0.97, -1, 0)).astype(np.int8)
            out.append(Group(index=i, prompt_id=self.prompts[i].id, outcomes=outcomes,
                             rewards=outcomes.astype(np.float32),
                             lengths=np.full(n, 3, np.int32),
                             mean_entropy=np.zeros(n, np.float32)))
        return out

    def generate(self, texts, *, max_new_tokens, temperature=1.0, stop=()):
        out = []
        for _ in texts:
            r = self.rng.random()
            if r < self.junk / 4:
                text = ""  # EOS at once
            elif r < self.junk / 2:
                text = "9" * max_new_tokens  # never stopped
            elif r < self.junk:
                text = "+5"  # '+' first: ill-formed
            elif r < self.junk + 0.1:
                text = f"{self.rng.integers(1, 99)}+{self.rng.integers(1, 9)}"
            else:
                text = str(self.rng.integers(0, 999))[::-1]
            for s in stop:
                text = text.split(s, 1)[0]
            out.append(text)
        self.generated += len(out)
        return out

    def add_prompts(self, prompts):
        idx = []
        known = {p.id: i for i, p in enumerate(self.prompts)}
        for p in prompts:
            if p.id in known:
                idx.append(known[p.id])
                continue
            if tasks.solve(p.text) != p.answer:
                assert self.allow_wrong, (p.text, p.answer)
                self.wrong += 1
            self.prompts.append(p)
            known[p.id] = len(self.prompts) - 1
            idx.append(len(self.prompts) - 1)
            self.added += 1
        return idx


def run_steps(selector, ctx, steps: int, start: int = 1) -> list[list[str]]:
    """Drives build_batch/after_update like the trainer; returns each step's prompt ids."""
    batches = []
    for step in range(start, start + steps):
        ctx.step = step
        groups = selector.build_batch(ctx)
        assert groups and all(g.size == ctx.group_size for g in groups)
        selector.after_update(ctx, groups)
        batches.append([g.prompt_id for g in groups])
    return batches
