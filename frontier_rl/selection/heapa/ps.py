"""Prioritized Sampling (HeaPA's "PS" baseline, arXiv 2601.22448) as a pool with HeaPA's
interface, so augmentation, the teacher and checkpointing are shared ("PS+PA").

- Scored records keep a success rate s_i in [0, 1], the running mean of the normalised group
  statistic (stat + 1) / 2, and a visit count c_i; s <- (s c + s_new) / (c + 1).
- Sampling: cold records first (at most a max_cold_frac share of the batch while scored
  records remain, as HeaPA's sampler); the rest are drawn without replacement with probability
  proportional to ((1 - s_i) + epsilon)^(1/T), so the hardest items are favoured. Scored
  records are not removed when sampled (there is no archive and no recycling). With
  epsilon = 0 a record with s = 1 has weight 0; once only such records are left to draw, the
  draw is uniform over them (the distribution is otherwise undefined).
- A cold record sampled but not rolled out goes back to the front of the cold queue, in the
  order it was drawn.
- A full pool evicts the record with the highest s_i (a cold arrival included), else the
  oldest cold record.

Deviation from the released code (§8 audit): a record entering already scored (an augmented
item at its estimate) starts with c = `prior_count` (default 1) rather than 0, so its first
real rollout averages with the estimate instead of overwriting it; prior_count=0 is the code.

Draws use a sum tree over record slots (O(log N) per draw and update) instead of a pass over
all weights.
"""

from __future__ import annotations

import collections
import heapq
import math
from array import array
from collections.abc import Callable

import numpy as np

from frontier_rl.selection.common import rng_state, set_rng_state
from frontier_rl.selection.heapa.records import COLD, LOC_NAMES, OUT, Record

SCORED = 1  # the one scored partition (reported as "low")


class PSPool:
    def __init__(self, *, capacity: int = 1_000_000, epsilon: float = 0.1,
                 temperature: float = 1.0, prior_count: int = 1, max_cold_frac: float = 1.0,
                 seed: int = 0, on_evict: Callable[[Record], None] | None = None):
        self.capacity = int(capacity)
        self.epsilon = float(epsilon)
        self.temperature = float(temperature)
        self.prior_count = int(prior_count)
        self.max_cold_frac = float(max_cold_frac)
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 0x9550]))
        self.on_evict = on_evict
        self.records: dict[str, Record] = {}
        self.cold: collections.deque[Record] = collections.deque()
        self.archive: dict[str, Record] = {}  # always empty: sampled records stay in the pool
        self.n_scored = 0
        self._s = array("d")  # success rate per slot
        self._c = array("q")  # visits per slot
        self._slot_rec: list[Record | None] = []
        self._free: list[int] = []
        self._leaves = 1024
        self._tree = array("d", bytes(16 * self._leaves))
        self._max_s: list = []  # (-s, seq, rec): eviction of the easiest
        self._seq = 0
        self.counters = collections.Counter()
        self.last: dict[str, int] = {}

    # ------------------------------------------------------------------ sizes

    @property
    def size(self) -> int:
        return len(self.cold) + self.n_scored

    def __len__(self) -> int:
        return self.size

    def capacity_remaining(self) -> int:
        return max(0, self.capacity - self.size)

    recycling = False

    def begin_recycle(self, values=None) -> int:
        return 0

    def recycle_some(self, chunk: int, need: int = 0) -> int:
        return 0

    def refresh_archive(self, values) -> None:
        pass

    def success(self, rec: Record) -> float:
        return self._s[rec.pos]

    # ------------------------------------------------------------------ sum tree

    def _weight(self, s: float) -> float:
        return ((1.0 - s) + self.epsilon) ** (1.0 / self.temperature)

    def _set_weight(self, slot: int, w: float) -> None:
        tree = self._tree
        i = slot + self._leaves
        tree[i] = w
        i >>= 1
        while i:
            tree[i] = tree[2 * i] + tree[2 * i + 1]
            i >>= 1

    def _grow(self) -> None:
        self._leaves *= 2
        self._tree = array("d", bytes(16 * self._leaves))
        for slot, rec in enumerate(self._slot_rec):
            if rec is not None:
                self._tree[slot + self._leaves] = self._weight(self._s[slot])
        for i in range(self._leaves - 1, 0, -1):
            self._tree[i] = self._tree[2 * i] + self._tree[2 * i + 1]

    def _new_slot(self, rec: Record, s: float, c: int) -> None:
        if self._free:
            slot = self._free.pop()
            self._s[slot], self._c[slot] = s, c
            self._slot_rec[slot] = rec
        else:
            slot = len(self._slot_rec)
            if slot >= self._leaves:
                self._grow()
            self._s.append(s)
            self._c.append(c)
            self._slot_rec.append(rec)
        rec.pos = slot
        self._set_weight(slot, self._weight(s))

    def _free_slot(self, rec: Record) -> None:
        self._set_weight(rec.pos, 0.0)
        self._slot_rec[rec.pos] = None
        self._free.append(rec.pos)
        rec.pos = -1

    def _draw(self, u: float) -> int:
        tree, leaves = self._tree, self._leaves
        u *= tree[1]
        i = 1
        while i < leaves:
            left, right = tree[2 * i], tree[2 * i + 1]
            if right <= 0.0 or (u < left and left > 0.0):
                i = 2 * i
            else:
                u -= left
                i = 2 * i + 1
        return i - leaves

    # ------------------------------------------------------------------ placement

    def _score(self, rec: Record, s: float, c: int) -> None:
        self._seq += 1
        rec.loc, rec.seq = SCORED, self._seq
        if rec.pos < 0:
            self._new_slot(rec, s, c)
            self.n_scored += 1
        else:
            self._s[rec.pos], self._c[rec.pos] = s, c
            self._set_weight(rec.pos, self._weight(s))
        heapq.heappush(self._max_s, (-s, self._seq, rec))

    def _norm(self, stat: float) -> float:
        return min(1.0, max(0.0, 0.5 * (float(stat) + 1.0)))

    def add(self, rec: Record) -> None:
        if rec.rid in self.records:
            raise ValueError(f"record {rec.rid!r} is already in the pool")
        self.records[rec.rid] = rec
        if self.size >= self.capacity:
            self._evict_one()
        scored = rec.stat is not None and math.isfinite(rec.stat)
        if scored:
            self._score(rec, self._norm(rec.stat), self.prior_count)
        else:
            rec.stat = None
            rec.loc = COLD
            self.cold.append(rec)
        self._maintain()

    def add_many(self, recs) -> None:
        for rec in recs:
            self.add(rec)

    def _evict_one(self) -> Record | None:
        rec = None
        while self._max_s:
            _, seq, r = heapq.heappop(self._max_s)
            if r.loc == SCORED and r.seq == seq:
                rec = r
                break
        if rec is not None:
            self._free_slot(rec)
            self.n_scored -= 1
        elif self.cold:
            rec = self.cold.popleft()
        else:
            return None
        rec.loc = OUT
        del self.records[rec.rid]
        self.counters["evicted"] += 1
        if self.on_evict is not None:
            self.on_evict(rec)
        return rec

    def set_capacity(self, capacity: int) -> None:
        self.capacity = int(capacity)
        while self.size > self.capacity:
            self._evict_one()

    def _maintain(self) -> None:
        if len(self._max_s) > 2 * self.n_scored + 1024:
            self._max_s = [e for e in self._max_s if e[2].loc == SCORED and e[2].seq == e[1]]
            heapq.heapify(self._max_s)

    # ------------------------------------------------------------------ sampling

    def cold_share(self, k: int) -> int:
        """How many of a k-record draw come from the cold queue (k <= size): all of it, or at
        most ⌈max_cold_frac k⌉ while scored records can fill the rest."""
        return min(len(self.cold), max(math.ceil(self.max_cold_frac * k), k - self.n_scored))

    def sample(self, k: int) -> list[Record]:
        k = min(int(k), self.size)
        self.last = {"cold": 0, "prioritized": 0, "prioritized_selective": 0}
        out: list[Record] = []
        for _ in range(self.cold_share(k)):
            rec = self.cold.popleft()
            rec.loc = OUT
            out.append(rec)
        self.last["cold"] = len(out)
        need = min(k - len(out), self.n_scored)
        if need > 0:
            drawn: list[int] = []
            rest: list[int] | None = None  # live slots left when every weight left is 0
            for u in self.rng.random(need).tolist():
                if self._tree[1] > 0.0:
                    slot = self._draw(u)
                else:
                    if rest is None:
                        taken = set(drawn)
                        rest = [i for i, r in enumerate(self._slot_rec)
                                if r is not None and i not in taken]
                    slot = rest.pop(min(int(u * len(rest)), len(rest) - 1))
                drawn.append(slot)
                self._set_weight(slot, 0.0)  # without replacement within the batch
            for slot in drawn:
                self._set_weight(slot, self._weight(self._s[slot]))
                out.append(self._slot_rec[slot])
            self.last["prioritized"] = len(drawn)
            if self.n_scored > len(drawn):  # the priorities chose among more than they took
                self.last["prioritized_selective"] = len(drawn)
        return out

    def observe(self, rec: Record, stat: float, step: int) -> None:
        s_new = self._norm(stat)
        if rec.loc == SCORED:
            s, c = self._s[rec.pos], self._c[rec.pos]
            self._score(rec, (s * c + s_new) / (c + 1), c + 1)
        else:
            self._score(rec, s_new, 1)
        rec.stat = rec.est = float(stat)
        rec.step = int(step)
        self._maintain()

    def restore(self, rec: Record) -> None:
        """A cold record that was not rolled out goes back to the front of the queue."""
        self.restore_many([rec])

    def restore_many(self, recs: list[Record]) -> None:
        """`restore` for several records: they keep their order at the front of the queue."""
        back = [r for r in recs if r.loc == OUT and r.rid in self.records]
        for rec in back:
            rec.loc = COLD
        self.cold.extendleft(reversed(back))

    # ------------------------------------------------------------------ checks and state

    def check(self, allow_out: bool = False) -> None:
        counts = collections.Counter(r.loc for r in self.records.values())
        if not allow_out:
            assert counts[OUT] == 0
        assert counts[COLD] == len(self.cold) and all(r.loc == COLD for r in self.cold)
        assert counts[SCORED] == self.n_scored
        live = [r for r in self._slot_rec if r is not None]
        assert len(live) == self.n_scored and all(self._slot_rec[r.pos] is r for r in live)
        total = sum(self._weight(self._s[r.pos]) for r in live)
        assert math.isclose(total, self._tree[1], rel_tol=1e-9, abs_tol=1e-9)
        assert self.size <= self.capacity
        assert set(LOC_NAMES)  # locations share HeaPA's names

    def state_dict(self) -> dict:
        return {
            "records": [r.to_list() for r in self.records.values()],
            "pos": [r.pos for r in self.records.values()],
            "s": list(self._s), "c": list(self._c), "free": list(self._free),
            "slots": len(self._slot_rec), "leaves": self._leaves,
            "cold": [r.rid for r in self.cold], "seq": self._seq,
            "capacity": self.capacity, "counters": dict(self.counters),
            "rng": rng_state(self.rng),
        }

    def load_state_dict(self, state: dict) -> None:
        self.records = {}
        self._slot_rec = [None] * int(state["slots"])
        for row, pos in zip(state["records"], state["pos"], strict=True):
            rec = Record.from_list(row)
            rec.pos = int(pos)
            self.records[rec.rid] = rec
            if pos >= 0:
                self._slot_rec[pos] = rec
        self._s = array("d", state["s"])
        self._c = array("q", state["c"])
        self._free = [int(x) for x in state["free"]]
        self._leaves = int(state["leaves"])
        self._tree = array("d", bytes(16 * self._leaves))
        for slot, rec in enumerate(self._slot_rec):
            if rec is not None:
                self._tree[slot + self._leaves] = self._weight(self._s[slot])
        for i in range(self._leaves - 1, 0, -1):
            self._tree[i] = self._tree[2 * i] + self._tree[2 * i + 1]
        live = [r for r in self._slot_rec if r is not None]
        self.n_scored = len(live)
        self._max_s = [(-self._s[r.pos], r.seq, r) for r in live]
        heapq.heapify(self._max_s)
        self.cold = collections.deque(self.records[r] for r in state["cold"])
        self._seq = int(state["seq"])
        self.capacity = int(state["capacity"])
        self.counters = collections.Counter(state["counters"])
        set_rng_state(self.rng, state["rng"])

    def metrics(self) -> dict[str, float]:
        live = self.n_scored
        out = {"cold": float(len(self.cold)), "low": float(live), "high": 0.0, "archive": 0.0,
               "pool_size": float(self.size), "evicted": float(self.counters["evicted"])}
        if live:
            out["ps_weight_total"] = float(self._tree[1])
        return out
