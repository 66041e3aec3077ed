"""HeaPA's bounded query pool: cold FIFO, low/high heaps around the boundary, archive.

Where each record lives (`Record.loc`), exactly one of:

- COLD: never rolled out (no pool statistic); a FIFO, sampled first.
- LOW: scored, the harder partition. HIGH: scored, the easier partition. The invariant is
  max(LOW) <= min(HIGH), and after every public operation |LOW| is within 1 of
  round(alpha * (|LOW| + |HIGH|)) (alpha = target fraction of scored items in LOW).
- ARCHIVE: rolled out and trained; waits there for recycling (not counted in the size).
- OUT: transiently, between `sample` and `observe` (or `restore`) within one step.
Evicted records leave `records` entirely (counted in `evicted`, reported to `on_evict`).

Each partition is a double-ended priority queue made of two `heapq` heaps (min and max) with
lazy deletion. A heap entry is one packed integer, (statistic as a sortable 64-bit pattern,
negated for max-heaps) << 72 | seq << 32 | handle, so heaps hold no tuples and no references
the garbage collector has to walk (a 10^6 pool would otherwise add ~5M tracked objects and
second-long collection pauses); ties break by seq, i.e. by arrival. An entry is live iff the
record at `handle` is in that partition with that seq. Every record entering a partition gets
a fresh seq; a heap is rebuilt only when its dead entries outnumber its live ones, so all work
is O(log N) per item, amortised.

Capacity N (size = |COLD| + |LOW| + |HIGH|) follows the released code: a cold arrival at a
full pool evicts max(HIGH), else max(LOW), else the oldest cold item; a scored arrival is
placed, then the hardest item overall (min(LOW), else min(HIGH), else the oldest cold) goes,
which can be the arrival itself (counted as `evicted_on_arrival`). Lowering N evicts in the
second order.

Pure Python + numpy: no jax.
"""

from __future__ import annotations

import collections
import heapq
import math
import struct
from collections.abc import Callable

import numpy as np

from frontier_rl.selection.common import rng_state, set_rng_state

COLD, LOW, HIGH, ARCHIVE, OUT = range(5)
LOC_NAMES = ("cold", "low", "high", "archive", "out")
SAMPLING = ("boundary", "mixed", "uniform")
_SLACK = 1024  # dead heap entries tolerated before a rebuild, on top of the live count
_H_MASK = (1 << 32) - 1
_SEQ_MASK = (1 << 40) - 1
_U64 = (1 << 64) - 1
_TOP = 1 << 63
_pack_d = struct.Struct(">d").pack
_unpack_q = struct.Struct(">Q").unpack


_SORTABLE: dict[float, int] = {}  # statistics repeat (means of G outcomes): memoised


def _sortable(x: float) -> int:
    """A 64-bit pattern whose integer order is the order of the float x (-0.0 as 0.0)."""
    b = _SORTABLE.get(x)
    if b is None:
        (b,) = _unpack_q(_pack_d(x + 0.0))
        b = b ^ _U64 if b & _TOP else b | _TOP
        if len(_SORTABLE) < 65536:
            _SORTABLE[x] = b
    return b


def min_key(stat: float, seq: int, h: int) -> int:
    return (_sortable(stat) << 72) | (seq << 32) | h


def max_key(stat: float, seq: int, h: int) -> int:
    return ((_U64 - _sortable(stat)) << 72) | (seq << 32) | h


class Record:
    """One prompt-answer pair. `text`/`answer` are None for seeds (they live in ctx.prompts,
    at `index`); augmented records carry their own and get an index when first rolled out."""

    __slots__ = ("rid", "text", "answer", "stat", "est", "aug", "parent", "d", "step", "index",
                 "loc", "seq", "pos", "h")

    def __init__(self, rid: str, *, text: str | None = None, answer: str | None = None,
                 stat: float | None = None, est: float | None = None, aug: bool = False,
                 parent: str | None = None, d: float = 1.0, step: int = -1, index: int = -1):
        self.rid = rid
        self.text = text
        self.answer = answer
        self.stat = stat  # pool statistic: mean shaped reward of the last verified group
        self.est = est  # estimated statistic (augmented); mirrors stat once that is set
        self.aug = aug  # source: augmented (True) or seed
        self.parent = parent  # record_id of the parent (lineage), None for seeds
        self.d = d  # policy difficulty factor d_c, clamped to [d_min, d_max]; 1.0 for seeds
        self.step = step  # step last trained (-1: never)
        self.index = index  # index into ctx.prompts (-1: not registered with the context)
        self.loc = OUT
        self.seq = 0
        self.pos = -1  # slot in the uniform sampler's bag / PS sum tree
        self.h = -1  # handle: index in the pool's slot list (heap entries point here)

    def to_list(self) -> list:
        return [self.rid, self.text, self.answer, self.stat, self.est, self.aug, self.parent,
                self.d, self.step, -1 if self.aug else self.index, self.loc, self.seq]

    @classmethod
    def from_list(cls, row: list) -> Record:
        rid, text, answer, stat, est, aug, parent, d, step, index, loc, seq = row
        rec = cls(rid, text=text, answer=answer, stat=stat, est=est, aug=bool(aug),
                  parent=parent, d=float(d), step=int(step), index=int(index))
        rec.loc, rec.seq = int(loc), int(seq)
        return rec


class Pool:
    """The HeaPA pool (see module docstring). `rng` draws the boundary picks and recycling
    order; `on_evict(record)` is told about every eviction (lineage clean-up)."""

    def __init__(self, *, alpha: float = 0.5, capacity: int = 1_000_000,
                 candidate_factor: int = 2, sampling: str = "boundary",
                 rebalance_max_moves: int = 0, max_cold_frac: float = 1.0, seed: int = 0,
                 on_evict: Callable[[Record], None] | None = None):
        if not 0.05 <= alpha <= 0.95:
            raise ValueError(f"alpha={alpha} is outside [0.05, 0.95]")
        if sampling not in SAMPLING:
            raise ValueError(f"sampling={sampling!r} is not one of {SAMPLING}")
        self.alpha = float(alpha)
        self.capacity = int(capacity)
        self.candidate_factor = int(candidate_factor)
        self.sampling = sampling
        self.rebalance_max_moves = int(rebalance_max_moves)
        self.max_cold_frac = float(max_cold_frac)
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 0x4EA9]))
        self.on_evict = on_evict
        self.records: dict[str, Record] = {}
        self.cold: collections.deque[Record] = collections.deque()
        self.archive: dict[str, Record] = {}
        self._recycle: collections.deque[str] = collections.deque()
        self._lo_max: list[int] = []  # max-heap: top = easiest hard item
        self._lo_min: list[int] = []  # min-heap: top = hardest item (eviction)
        self._hi_min: list[int] = []  # min-heap: top = hardest easy item
        self._hi_max: list[int] = []  # max-heap: top = easiest item (mixing, eviction)
        self._slots: list[Record | None] = []  # handle -> record
        self._free: list[int] = []
        self._bag: list[Record] = []  # scored records, for uniform sampling only
        self.n_low = 0
        self.n_high = 0
        self._seq = 0
        self.counters = collections.Counter()
        self.last: dict[str, int] = {}

    # ------------------------------------------------------------------ sizes

    @property
    def size(self) -> int:
        return len(self.cold) + self.n_low + self.n_high

    def __len__(self) -> int:
        return self.size

    @property
    def n_scored(self) -> int:
        return self.n_low + self.n_high

    def capacity_remaining(self) -> int:
        return max(0, self.capacity - self.size)

    @property
    def recycling(self) -> bool:
        return bool(self._recycle)

    def target_low(self, scored: int | None = None) -> int:
        return round(self.alpha * (self.n_scored if scored is None else scored))

    def boundary(self) -> tuple[float | None, float | None]:
        """(max of LOW, min of HIGH): the two sides of the boundary."""
        lo = self._peek(self._lo_max, LOW)
        hi = self._peek(self._hi_min, HIGH)
        return (None if lo is None else lo.stat), (None if hi is None else hi.stat)

    # ------------------------------------------------------------------ heap primitives

    def _live(self, key: int, loc: int) -> Record | None:
        rec = self._slots[key & _H_MASK]
        if rec is not None and rec.loc == loc and rec.seq == (key >> 32) & _SEQ_MASK:
            return rec
        return None

    def _peek(self, heap: list, loc: int) -> Record | None:
        while heap:
            rec = self._live(heap[0], loc)
            if rec is not None:
                return rec
            heapq.heappop(heap)
        return None

    def _enter(self, rec: Record, side: int) -> None:
        self._seq += 1
        seq = rec.seq = self._seq
        rec.loc = side
        b = _sortable(rec.stat)
        tail = (seq << 32) | rec.h
        if side == LOW:
            heapq.heappush(self._lo_max, ((_U64 - b) << 72) | tail)
            heapq.heappush(self._lo_min, (b << 72) | tail)
            self.n_low += 1
        else:
            heapq.heappush(self._hi_min, (b << 72) | tail)
            heapq.heappush(self._hi_max, ((_U64 - b) << 72) | tail)
            self.n_high += 1

    def _pop(self, side: int, hardest: bool) -> Record | None:
        """Removes the hardest or easiest record of a partition (loc becomes OUT, seq kept)."""
        if side == LOW:
            heap = self._lo_min if hardest else self._lo_max
        else:
            heap = self._hi_min if hardest else self._hi_max
        slots = self._slots
        while heap:
            key = heapq.heappop(heap)
            rec = slots[key & _H_MASK]
            if rec is not None and rec.loc == side and rec.seq == (key >> 32) & _SEQ_MASK:
                rec.loc = OUT
                if side == LOW:
                    self.n_low -= 1
                else:
                    self.n_high -= 1
                return rec
        return None

    def _revive(self, rec: Record, side: int) -> None:
        """Puts back a record just taken from the near end of `side` by the sampler.

        Its entry in the far-end heap still exists (nothing touches the far-end heaps while
        candidates are out, and heaps are rebuilt only between public calls), so restoring
        loc with the same seq revives it: one push instead of two.
        """
        rec.loc = side
        if side == LOW:
            heapq.heappush(self._lo_max, max_key(rec.stat, rec.seq, rec.h))
            self.n_low += 1
        else:
            heapq.heappush(self._hi_min, min_key(rec.stat, rec.seq, rec.h))
            self.n_high += 1

    # ------------------------------------------------------------------ placement

    def _insert_scored(self, rec: Record) -> None:
        """Places a scored record so that max(LOW) <= min(HIGH) still holds."""
        s = rec.stat
        lo = self._peek(self._lo_max, LOW)
        if lo is not None and s <= lo.stat:
            side = LOW
        else:
            hi = self._peek(self._hi_min, HIGH)
            if hi is not None and s >= hi.stat:
                side = HIGH
            else:  # strictly inside the boundary gap (or both sides empty): the short side
                side = LOW if self.n_low < self.target_low(self.n_scored + 1) else HIGH
        self._enter(rec, side)
        if self.sampling == "uniform":
            rec.pos = len(self._bag)
            self._bag.append(rec)

    def _place(self, rec: Record) -> None:
        """Puts a known record (new, restored or recycled) into the pool, evicting if full."""
        scored = rec.stat is not None and math.isfinite(rec.stat)
        if not scored:
            rec.stat = None
        if len(self.cold) + self.n_low + self.n_high < self.capacity:
            if scored:
                self._insert_scored(rec)
            else:
                rec.loc = COLD
                self.cold.append(rec)
        elif not scored:
            self._evict_one(cold_arrival=True)
            rec.loc = COLD
            self.cold.append(rec)
        else:
            self._insert_scored(rec)
            if self._evict_one(cold_arrival=False) is rec:
                self.counters["evicted_on_arrival"] += 1

    def _register(self, rec: Record) -> None:
        if rec.rid in self.records:
            raise ValueError(f"record {rec.rid!r} is already in the pool")
        self.records[rec.rid] = rec
        if self._free:
            rec.h = self._free.pop()
            self._slots[rec.h] = rec
        else:
            rec.h = len(self._slots)
            self._slots.append(rec)

    def add(self, rec: Record) -> None:
        """Adds a new record: cold if it has no statistic, else into LOW/HIGH."""
        self._register(rec)
        self._place(rec)
        self._rebalance()
        self._maintain()

    def add_many(self, recs) -> None:
        for rec in recs:
            self._register(rec)
            self._place(rec)
            self._rebalance()
        self._maintain()

    # ------------------------------------------------------------------ eviction

    def _take_from_bag(self, rec: Record) -> None:
        if self.sampling != "uniform" or rec.pos < 0:
            return
        last = self._bag.pop()
        if last is not rec:
            self._bag[rec.pos] = last
            last.pos = rec.pos
        rec.pos = -1

    def _evict_one(self, *, cold_arrival: bool) -> Record | None:
        if cold_arrival:  # released code: the easiest scored item makes room for a cold one
            rec = self._pop(HIGH, hardest=False) or self._pop(LOW, hardest=False)
        else:  # the hardest item overall
            rec = self._pop(LOW, hardest=True) or self._pop(HIGH, hardest=True)
        if rec is None and self.cold:
            rec = self.cold.popleft()
        if rec is None:
            return None
        self._take_from_bag(rec)
        self._drop(rec, "evicted")
        return rec

    def _drop(self, rec: Record, why: str) -> None:
        rec.loc = OUT
        del self.records[rec.rid]
        self._slots[rec.h] = None
        self._free.append(rec.h)
        rec.h = -1
        self.counters[why] += 1
        if self.on_evict is not None:
            self.on_evict(rec)

    def set_capacity(self, capacity: int) -> None:
        """Changes N; a lower N evicts hardest-first (LOW, then HIGH, then oldest cold)."""
        self.capacity = int(capacity)
        while self.size > self.capacity:
            self._evict_one(cold_arrival=False)
        self._rebalance()
        self._maintain()

    # ------------------------------------------------------------------ rebalancing

    def _rebalance(self) -> None:
        """Moves boundary items until |LOW| = round(alpha * scored) (nothing if within 1)."""
        target = round(self.alpha * (self.n_low + self.n_high))
        if -1 <= self.n_low - target <= 1:
            return
        limit = self.rebalance_max_moves or math.inf
        moves = 0
        while self.n_low < target and moves < limit:
            rec = self._pop(HIGH, hardest=True)
            self._enter(rec, LOW)
            moves += 1
        while self.n_low > target and moves < limit:
            rec = self._pop(LOW, hardest=False)
            self._enter(rec, HIGH)
            moves += 1
        self.counters["rebalance_moves"] += moves

    def _maintain(self) -> None:
        """Rebuilds a heap once its dead entries outnumber its live ones (amortised O(1))."""
        for heap, loc, live in ((self._lo_max, LOW, self.n_low), (self._lo_min, LOW, self.n_low),
                                (self._hi_min, HIGH, self.n_high),
                                (self._hi_max, HIGH, self.n_high)):
            if len(heap) > 2 * live + _SLACK:
                heap[:] = [k for k in heap if self._live(k, loc) is not None]
                heapq.heapify(heap)
                self.counters["heap_rebuilds"] += 1

    # ------------------------------------------------------------------ sampling

    def sample(self, k: int) -> list[Record]:
        """Removes and returns up to k records: cold first, then boundary (or mixed/uniform).

        With max_cold_frac < 1, cold items fill at most that share of the batch while scored
        items remain.
        """
        k = min(int(k), self.size)
        out: list[Record] = []
        self.last = {"cold": 0, "easy": 0, "boundary": 0, "uniform": 0}
        if k <= 0:
            return out
        n_cold = min(len(self.cold), max(math.ceil(self.max_cold_frac * k), k - self.n_scored))
        for _ in range(n_cold):
            rec = self.cold.popleft()
            rec.loc = OUT
            out.append(rec)
        self.last["cold"] = n_cold
        need = k - n_cold
        if need > 0:
            if self.sampling == "uniform":
                out += self._uniform(need)
            else:
                if self.sampling == "mixed":  # optional easy mixing: half from the easy end
                    for _ in range(need // 2):
                        rec = self._pop(HIGH, hardest=False)
                        if rec is None:
                            break
                        out.append(rec)
                        self.last["easy"] += 1
                    need = k - len(out)
                out += self._medium(need)
            self._rebalance()
        self._maintain()
        return out

    def _medium(self, k: int) -> list[Record]:
        """k records drawn uniformly from the 2k boundary candidates (all if k >= scored)."""
        if k <= 0:
            return []
        cands, sides = self._pop_alternating(min(self.candidate_factor * k, self.n_scored))
        if k >= len(cands):
            chosen = cands
        else:
            pick = self.rng.choice(len(cands), size=k, replace=False)
            keep = np.zeros(len(cands), bool)
            keep[pick] = True
            chosen = [cands[i] for i in pick.tolist()]
            for i in np.flatnonzero(~keep).tolist():
                self._revive(cands[i], sides[i])
        self.last["boundary"] += len(chosen)
        return chosen

    def _pop_alternating(self, t: int) -> tuple[list[Record], list[int]]:
        """Pops t records alternating min(HIGH) ("hardest easy") and max(LOW) ("easiest
        hard"), starting with HIGH; when one side is empty, from the other."""
        out, sides = [], []
        side = HIGH
        while len(out) < t:
            if side == HIGH and self.n_high:
                rec, got = self._pop(HIGH, hardest=True), HIGH
            elif side == LOW and self.n_low:
                rec, got = self._pop(LOW, hardest=False), LOW
            elif self.n_high:
                rec, got = self._pop(HIGH, hardest=True), HIGH
            elif self.n_low:
                rec, got = self._pop(LOW, hardest=False), LOW
            else:
                break
            out.append(rec)
            sides.append(got)
            side = LOW if side == HIGH else HIGH
        return out, sides

    def _uniform(self, k: int) -> list[Record]:
        """k scored records uniformly at random (the augmentation-only ablation)."""
        k = min(k, len(self._bag))
        out = []
        for _ in range(k):
            rec = self._bag[int(self.rng.integers(len(self._bag)))]
            self._take_from_bag(rec)
            if rec.loc == LOW:
                self.n_low -= 1
            else:
                self.n_high -= 1
            rec.loc = OUT
            out.append(rec)
        self.last["uniform"] = k
        return out

    # ------------------------------------------------------------------ after the rollout

    def observe(self, rec: Record, stat: float, step: int) -> None:
        """Records the realised pool statistic of a sampled record and archives it."""
        rec.stat = rec.est = float(stat)
        rec.step = int(step)
        rec.loc = ARCHIVE
        self.archive[rec.rid] = rec

    def restore(self, rec: Record) -> None:
        """Returns a sampled record that was not rolled out (its statistic unchanged)."""
        if rec.loc != OUT or rec.rid not in self.records:
            return
        self._place(rec)
        self._rebalance()

    # ------------------------------------------------------------------ recycling

    def begin_recycle(self, values: dict[str, float] | None = None) -> int:
        """Queues the whole archive (shuffled) for reinsertion; `values` are refreshed
        statistics (lineage re-estimation) applied to the archived records first."""
        for rid, v in (values or {}).items():
            rec = self.archive.get(rid)
            if rec is not None:
                rec.stat = rec.est = float(v)
        ids = list(self.archive)
        order = self.rng.permutation(len(ids)).tolist()
        self._recycle = collections.deque(ids[i] for i in order)
        self.counters["recycles"] += 1
        return len(ids)

    def recycle_some(self, chunk: int, need: int = 0) -> int:
        """Reinserts up to `chunk` queued records (all if chunk <= 0), and more while the
        pool holds fewer than `need`. Returns how many moved."""
        moved = 0
        while self._recycle and (chunk <= 0 or moved < chunk or self.size < need):
            rec = self.archive.pop(self._recycle.popleft(), None)
            if rec is None:
                continue
            self._place(rec)
            moved += 1
        self._rebalance()
        self._maintain()
        self.counters["recycled"] += moved
        return moved

    # ------------------------------------------------------------------ checks and state

    def check(self, allow_out: bool = False) -> None:
        """Asserts every invariant (O(N); for tests)."""
        counts = collections.Counter(rec.loc for rec in self.records.values())
        if not allow_out:
            assert counts[OUT] == 0, f"{counts[OUT]} records are out of the pool"
        assert counts[COLD] == len(self.cold), "cold queue and locations disagree"
        assert all(rec.loc == COLD for rec in self.cold)
        assert len({id(r) for r in self.cold}) == len(self.cold), "duplicate in cold"
        assert counts[LOW] == self.n_low and counts[HIGH] == self.n_high
        assert counts[ARCHIVE] == len(self.archive)
        assert all(rec.loc == ARCHIVE for rec in self.archive.values())
        assert all(self._slots[r.h] is r for r in self.records.values())
        assert len(self._slots) - len(self._free) == len(self.records)
        for heap, loc, key in ((self._lo_max, LOW, max_key), (self._lo_min, LOW, min_key),
                               (self._hi_min, HIGH, min_key), (self._hi_max, HIGH, max_key)):
            live = [(k, self._live(k, loc)) for k in heap]
            live = [(k, r) for k, r in live if r is not None]
            assert len(live) == counts[loc], f"{LOC_NAMES[loc]} heap has {len(live)} live"
            assert len({id(r) for _, r in live}) == len(live), "a record twice in one heap"
            assert all(k == key(r.stat, r.seq, r.h) for k, r in live)
        lo, hi = self.boundary()
        if lo is not None and hi is not None:
            assert lo <= hi, f"max(low)={lo} > min(high)={hi}"
        assert self.size <= self.capacity, f"size {self.size} > capacity {self.capacity}"
        if self.sampling == "uniform":
            assert len(self._bag) == self.n_scored
            assert all(self._bag[r.pos] is r for r in self._bag)

    def state_dict(self) -> dict:
        return {
            "records": [rec.to_list() for rec in self.records.values()],
            "cold": [rec.rid for rec in self.cold],
            "archive": list(self.archive),
            "recycle": list(self._recycle),
            "bag": [rec.rid for rec in self._bag],
            "seq": self._seq,
            "capacity": self.capacity,
            "counters": dict(self.counters),
            "rng": rng_state(self.rng),
        }

    def load_state_dict(self, state: dict) -> None:
        self.records, self._slots, self._free = {}, [], []
        for row in state["records"]:
            self._register(Record.from_list(row))
        recs = self.records
        self.cold = collections.deque(recs[r] for r in state["cold"])
        self.archive = {r: recs[r] for r in state["archive"]}
        self._recycle = collections.deque(state["recycle"])
        self._lo_max, self._lo_min, self._hi_min, self._hi_max = [], [], [], []
        self.n_low = self.n_high = 0
        for rec in recs.values():
            if rec.loc == LOW:
                self._lo_max.append(max_key(rec.stat, rec.seq, rec.h))
                self._lo_min.append(min_key(rec.stat, rec.seq, rec.h))
                self.n_low += 1
            elif rec.loc == HIGH:
                self._hi_min.append(min_key(rec.stat, rec.seq, rec.h))
                self._hi_max.append(max_key(rec.stat, rec.seq, rec.h))
                self.n_high += 1
        for heap in (self._lo_max, self._lo_min, self._hi_min, self._hi_max):
            heapq.heapify(heap)
        self._bag = [recs[r] for r in state.get("bag", [])]
        for i, rec in enumerate(self._bag):
            rec.pos = i
        self._seq = int(state["seq"])
        self.capacity = int(state["capacity"])
        self.counters = collections.Counter(state["counters"])
        set_rng_state(self.rng, state["rng"])

    def bulk_load(self, recs: list[Record]) -> None:
        """Fills an empty pool with scored records in O(N log N) (benchmarks, big seeds)."""
        if self.records:
            raise ValueError("bulk_load needs an empty pool")
        recs = sorted(recs, key=lambda r: r.stat)
        n_low = min(self.target_low(len(recs)), len(recs))
        for i, rec in enumerate(recs):
            self._register(rec)
            self._seq += 1
            rec.seq, rec.loc = self._seq, LOW if i < n_low else HIGH
        self._lo_max = [max_key(r.stat, r.seq, r.h) for r in recs[:n_low]]
        self._lo_min = [min_key(r.stat, r.seq, r.h) for r in recs[:n_low]]
        self._hi_min = [min_key(r.stat, r.seq, r.h) for r in recs[n_low:]]
        self._hi_max = [max_key(r.stat, r.seq, r.h) for r in recs[n_low:]]
        for heap in (self._lo_max, self._lo_min, self._hi_min, self._hi_max):
            heapq.heapify(heap)
        self.n_low, self.n_high = n_low, len(recs) - n_low
        if self.sampling == "uniform":
            self._bag = list(recs)
            for i, rec in enumerate(self._bag):
                rec.pos = i
        while self.size > self.capacity:
            self._evict_one(cold_arrival=False)

    def metrics(self) -> dict[str, float]:
        lo, hi = self.boundary()
        out = {"cold": float(len(self.cold)), "low": float(self.n_low),
               "high": float(self.n_high), "archive": float(len(self.archive)),
               "pool_size": float(self.size), "recycle_queue": float(len(self._recycle)),
               "evicted": float(self.counters["evicted"]),
               "evicted_on_arrival": float(self.counters["evicted_on_arrival"]),
               "recycles": float(self.counters["recycles"])}
        if lo is not None:
            out["boundary_low"] = lo
        if hi is not None:
            out["boundary_high"] = hi
        if lo is not None and hi is not None:
            out["boundary"] = 0.5 * (lo + hi)
        return out
