"""HeaPA's bounded query pool: cold FIFO, low/high heaps around the boundary, archive.

Where each record lives (its `loc`), exactly one of:

- COLD: never rolled out (no pool statistic); a FIFO, sampled first.
- LOW: scored, the harder partition. HIGH: scored, the easier partition. The invariant is
  max(LOW) <= min(HIGH), and after every public operation |LOW| is within 1 of
  round(alpha * (|LOW| + |HIGH|)) (alpha = target fraction of scored items in LOW).
- ARCHIVE: rolled out and trained; waits there for recycling (not counted in the size).
- OUT: transiently, between `sample` and `observe` (or `restore`) within one step.
Evicted records leave `records` entirely (counted in `evicted`, reported to `on_evict`).

Each partition is a double-ended priority queue made of two `heapq` heaps (min and max) with
lazy deletion. Ties break by seq, i.e. by arrival. An entry is live iff the record it names
is in that partition with that seq; every record entering a partition gets a fresh seq, and
a heap is rebuilt only when its dead entries outnumber its live ones, so all work is
O(log N) per item, amortised.

Storage is a column store: a record is an integer handle into flat arrays (statistic,
estimate, seq, location, ...) plus one tuple of its immutable fields, and a heap entry is one
packed integer, (statistic as a sortable 64-bit pattern, inverted for max-heaps) << 72 |
seq << 32 | handle. None of these is an object the garbage collector has to walk, so a 10^6
pool adds no full-collection pauses (one tracked object per record costs ~0.2-1 s per full
collection at that size). `records` maps record ids to `RecordView`s over the columns.

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
from array import array
from collections.abc import Callable, Iterator, Mapping

import numpy as np

from frontier_rl.selection.common import rng_state, set_rng_state
from frontier_rl.selection.heapa.records import (
    ARCHIVE,
    COLD,
    FREE,
    H_MASK,
    HIGH,
    LOC_NAMES,
    LOW,
    OUT,
    SEQ_MASK,
    U64,
    Record,
    max_key,
    min_key,
    opt_float,
    sortable,
)

__all__ = ["ARCHIVE", "COLD", "HIGH", "LOW", "OUT", "SAMPLING", "Pool", "Record", "RecordView"]

SAMPLING = ("boundary", "mixed", "uniform")
_SLACK = 1024  # dead heap entries tolerated before a rebuild, on top of the live count
_NAN = float("nan")


class RecordView:
    """A record of the pool, read from (and written to) its columns. Valid while the record is
    in the pool (a handle is reused after eviction)."""

    __slots__ = ("_p", "h")

    def __init__(self, pool: Pool, h: int):
        self._p = pool
        self.h = h

    rid = property(lambda self: self._p._rid[self.h])
    text = property(lambda self: self._p._info[self.h][0])
    answer = property(lambda self: self._p._info[self.h][1])
    aug = property(lambda self: self._p._info[self.h][2])
    parent = property(lambda self: self._p._info[self.h][3])
    d = property(lambda self: self._p._info[self.h][4])
    loc = property(lambda self: self._p._loc[self.h])
    seq = property(lambda self: self._p._seq[self.h])
    stat = property(lambda self: opt_float(self._p._stat[self.h]))
    est = property(lambda self: opt_float(self._p._est[self.h]))
    step = property(lambda self: self._p._step[self.h])

    @property
    def index(self) -> int:
        return self._p._index[self.h]

    @index.setter
    def index(self, value: int) -> None:
        self._p._index[self.h] = int(value)

    def __repr__(self) -> str:
        return (f"RecordView({self.rid!r}, stat={self.stat}, est={self.est}, "
                f"loc={LOC_NAMES[self.loc]})")


class RecordMap(Mapping):
    """record id -> RecordView."""

    def __init__(self, pool: Pool):
        self._p = pool

    def __getitem__(self, rid: str) -> RecordView:
        return RecordView(self._p, self._p._h[rid])

    def __contains__(self, rid) -> bool:
        return rid in self._p._h

    def __iter__(self) -> Iterator[str]:
        return iter(self._p._h)

    def __len__(self) -> int:
        return len(self._p._h)


class Pool:
    """The HeaPA pool (see module docstring). `rng` draws the boundary picks and recycling
    order; `on_evict(view)` is told about every eviction (lineage clean-up)."""

    def __init__(self, *, alpha: float = 0.5, capacity: int = 1_000_000,
                 candidate_factor: int = 2, sampling: str = "boundary",
                 rebalance_max_moves: int = 0, max_cold_frac: float = 1.0, seed: int = 0,
                 on_evict: Callable[[RecordView], None] | None = None):
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
        self.records = RecordMap(self)
        self.counters: collections.Counter = collections.Counter()
        self.last: dict[str, int] = {}
        self._clear()

    def _clear(self) -> None:
        self._h: dict[str, int] = {}  # record id -> handle
        self._rid: list[str | None] = []
        self._info: list[tuple | None] = []  # (text, answer, aug, parent, d): immutable
        self._stat = array("d")  # NaN = no statistic
        self._est = array("d")
        self._step = array("q")
        self._index = array("q")
        self._seq = array("q")
        self._pos = array("q")  # position in the uniform sampler's bag
        self._loc = bytearray()
        self._free: list[int] = []
        self.cold: collections.deque[int] = collections.deque()  # handles, oldest first
        self.archive: dict[str, int] = {}  # record id -> handle, in arrival order
        self._recycle: collections.deque[str] = collections.deque()
        self._lo_max: list[int] = []  # max-heap: top = easiest hard item
        self._lo_min: list[int] = []  # min-heap: top = hardest item (eviction)
        self._hi_min: list[int] = []  # min-heap: top = hardest easy item
        self._hi_max: list[int] = []  # max-heap: top = easiest item (mixing, eviction)
        self._bag: list[int] = []  # scored handles, for uniform sampling only
        self._taken: dict[int, int] = {}  # boundary candidates out in a gated draw -> side
        self.n_low = 0
        self.n_high = 0
        self._seq_n = 0

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
        return (None if lo < 0 else self._stat[lo]), (None if hi < 0 else self._stat[hi])

    def view(self, h: int) -> RecordView:
        return RecordView(self, h)

    def cold_ids(self) -> list[str]:
        return [self._rid[h] for h in self.cold]

    # ------------------------------------------------------------------ records

    def _register(self, rec: Record) -> int:
        if rec.rid in self._h:
            raise ValueError(f"record {rec.rid!r} is already in the pool")
        info = (rec.text, rec.answer, bool(rec.aug), rec.parent, float(rec.d))
        stat = _NAN if rec.stat is None else float(rec.stat)
        est = _NAN if rec.est is None else float(rec.est)
        if self._free:
            h = self._free.pop()
            self._rid[h], self._info[h] = rec.rid, info
            self._stat[h], self._est[h], self._step[h] = stat, est, rec.step
            self._index[h], self._seq[h], self._pos[h], self._loc[h] = rec.index, 0, -1, OUT
        else:
            h = len(self._rid)
            self._rid.append(rec.rid)
            self._info.append(info)
            self._stat.append(stat)
            self._est.append(est)
            self._step.append(rec.step)
            self._index.append(rec.index)
            self._seq.append(0)
            self._pos.append(-1)
            self._loc.append(OUT)
        self._h[rec.rid] = h
        return h

    def _row(self, h: int) -> list:
        text, answer, aug, parent, d = self._info[h]
        return [self._rid[h], text, answer, opt_float(self._stat[h]), opt_float(self._est[h]), aug,
                parent, d, self._step[h], -1 if aug else self._index[h], self._loc[h],
                self._seq[h]]

    # ------------------------------------------------------------------ heap primitives

    def _live(self, key: int, loc: int) -> int:
        """The handle an entry names if the entry is live, else -1."""
        h = key & H_MASK
        if self._loc[h] == loc and self._seq[h] == (key >> 32) & SEQ_MASK:
            return h
        return -1

    def _peek(self, heap: list, loc: int) -> int:
        locs, seqs = self._loc, self._seq
        while heap:
            key = heap[0]
            h = key & H_MASK
            if locs[h] == loc and seqs[h] == (key >> 32) & SEQ_MASK:
                return h
            heapq.heappop(heap)
        return -1

    def _enter(self, h: int, side: int) -> None:
        self._seq_n += 1
        seq = self._seq[h] = self._seq_n
        self._loc[h] = side
        b = sortable(self._stat[h])
        tail = (seq << 32) | h
        if side == LOW:
            heapq.heappush(self._lo_max, ((U64 - b) << 72) | tail)
            heapq.heappush(self._lo_min, (b << 72) | tail)
            self.n_low += 1
        else:
            heapq.heappush(self._hi_min, (b << 72) | tail)
            heapq.heappush(self._hi_max, ((U64 - b) << 72) | tail)
            self.n_high += 1

    def _pop(self, side: int, hardest: bool) -> int:
        """Removes the hardest or easiest record of a partition (loc becomes OUT, seq kept);
        returns its handle, or -1 if the partition is empty."""
        if side == LOW:
            heap = self._lo_min if hardest else self._lo_max
        else:
            heap = self._hi_min if hardest else self._hi_max
        loc, seq = self._loc, self._seq
        while heap:
            key = heapq.heappop(heap)
            h = key & H_MASK
            if loc[h] == side and seq[h] == (key >> 32) & SEQ_MASK:
                loc[h] = OUT
                if side == LOW:
                    self.n_low -= 1
                else:
                    self.n_high -= 1
                return h
        return -1

    def _revive(self, h: int, side: int) -> None:
        """Puts back a record just taken from the near end of `side` by the sampler.

        Its entry in the far-end heap still exists (nothing touches the far-end heaps while
        candidates are out, and heaps are rebuilt only between public calls), so restoring
        loc with the same seq revives it: one push instead of two.
        """
        self._loc[h] = side
        if side == LOW:
            heapq.heappush(self._lo_max, max_key(self._stat[h], self._seq[h], h))
            self.n_low += 1
        else:
            heapq.heappush(self._hi_min, min_key(self._stat[h], self._seq[h], h))
            self.n_high += 1

    # ------------------------------------------------------------------ placement

    def _insert_scored(self, h: int) -> None:
        """Places a scored record so that max(LOW) <= min(HIGH) still holds."""
        s = self._stat[h]
        lo = self._peek(self._lo_max, LOW)
        if lo >= 0 and s <= self._stat[lo]:
            side = LOW
        else:
            hi = self._peek(self._hi_min, HIGH)
            if hi >= 0 and s >= self._stat[hi]:
                side = HIGH
            else:  # strictly inside the boundary gap (or both sides empty): the short side
                side = LOW if self.n_low < self.target_low(self.n_scored + 1) else HIGH
        self._enter(h, side)
        if self.sampling == "uniform":
            self._pos[h] = len(self._bag)
            self._bag.append(h)

    def _place(self, h: int) -> None:
        """Puts a known record (new, restored or recycled) into the pool, evicting if full."""
        s = self._stat[h]
        scored = math.isfinite(s)
        if not scored:
            self._stat[h] = _NAN
        if len(self.cold) + self.n_low + self.n_high < self.capacity:
            if scored:
                self._insert_scored(h)
            else:
                self._loc[h] = COLD
                self.cold.append(h)
        elif not scored:
            self._evict_one(cold_arrival=True)
            self._loc[h] = COLD
            self.cold.append(h)
        else:
            rid = self._rid[h]
            self._insert_scored(h)
            if self._evict_one(cold_arrival=False) == rid:
                self.counters["evicted_on_arrival"] += 1

    def add(self, rec: Record) -> None:
        """Adds a new record: cold if it has no statistic, else into LOW/HIGH."""
        self._place(self._register(rec))
        self._rebalance()
        self._maintain()

    def add_many(self, recs) -> None:
        for rec in recs:
            self._place(self._register(rec))
            self._rebalance()
        self._maintain()

    # ------------------------------------------------------------------ eviction

    def _take_from_bag(self, h: int) -> None:
        pos = self._pos[h]
        if self.sampling != "uniform" or pos < 0:
            return
        last = self._bag.pop()
        if last != h:
            self._bag[pos] = last
            self._pos[last] = pos
        self._pos[h] = -1

    def _evict_one(self, *, cold_arrival: bool) -> str | None:
        """Evicts one record (see the module docstring); returns its id."""
        if cold_arrival:  # released code: the easiest scored item makes room for a cold one
            h = self._pop(HIGH, hardest=False)
            if h < 0:
                h = self._pop(LOW, hardest=False)
        else:  # the hardest item overall
            h = self._pop(LOW, hardest=True)
            if h < 0:
                h = self._pop(HIGH, hardest=True)
        if h < 0 and self.cold:
            h = self.cold.popleft()
        if h < 0:
            return None
        self._take_from_bag(h)
        rid = self._rid[h]
        self._loc[h] = OUT
        if self.on_evict is not None:
            self.on_evict(RecordView(self, h))
        del self._h[rid]
        self._rid[h] = self._info[h] = None
        self._loc[h] = FREE
        self._free.append(h)
        self.counters["evicted"] += 1
        return rid

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
            self._enter(self._pop(HIGH, hardest=True), LOW)
            moves += 1
        while self.n_low > target and moves < limit:
            self._enter(self._pop(LOW, hardest=False), HIGH)
            moves += 1
        self.counters["rebalance_moves"] += moves

    def _maintain(self) -> None:
        """Rebuilds a heap once its dead entries outnumber its live ones (amortised O(1))."""
        for heap, loc, live in ((self._lo_max, LOW, self.n_low), (self._lo_min, LOW, self.n_low),
                                (self._hi_min, HIGH, self.n_high),
                                (self._hi_max, HIGH, self.n_high)):
            if len(heap) > 2 * live + _SLACK:
                locs, seqs = self._loc, self._seq
                heap[:] = [k for k in heap if locs[k & H_MASK] == loc
                           and seqs[k & H_MASK] == (k >> 32) & SEQ_MASK]
                heapq.heapify(heap)
                self.counters["heap_rebuilds"] += 1

    # ------------------------------------------------------------------ sampling

    def sample(self, k: int) -> list[RecordView]:
        """Removes and returns up to k records: cold first, then boundary (or mixed/uniform).

        With max_cold_frac < 1, cold items fill at most that share of the batch while scored
        items remain. `last` counts this draw's records by source; boundary_selective counts
        the boundary draws made while the scored records outnumbered the candidate set (so the
        boundary rule passed records over), uniform_selective the uniform draws made while they
        outnumbered the draw.
        """
        k = min(int(k), self.size)
        out: list[int] = []
        self.last = {"cold": 0, "easy": 0, "boundary": 0, "uniform": 0,
                     "boundary_selective": 0, "uniform_selective": 0}
        if k <= 0:
            return []
        n_cold = self.cold_share(k)
        for _ in range(n_cold):
            h = self.cold.popleft()
            self._loc[h] = OUT
            out.append(h)
        self.last["cold"] = n_cold
        need = k - n_cold
        if need > 0:
            if self.sampling == "uniform":
                scored = self.n_scored
                out += self._uniform(need)
                if scored > need:  # the draw chose among more records than it took
                    self.last["uniform_selective"] = self.last["uniform"]
            else:
                if self.sampling == "mixed":  # optional easy mixing: half from the easy end
                    for _ in range(need // 2):
                        h = self._pop(HIGH, hardest=False)
                        if h < 0:
                            break
                        out.append(h)
                        self.last["easy"] += 1
                    need = k - len(out)
                out += self._medium(need)
            self._rebalance()
        self._maintain()
        return [RecordView(self, h) for h in out]

    def cold_share(self, k: int) -> int:
        """How many of a k-record draw `sample` takes from the cold queue (k <= size)."""
        return min(len(self.cold), max(math.ceil(self.max_cold_frac * k), k - self.n_scored))

    def take_candidates(self, n_cold: int, n_boundary: int
                        ) -> tuple[list[RecordView], list[RecordView]]:
        """Gated sampling, first half: removes the first n_cold cold records (FIFO order) and
        n_boundary boundary candidates (the sampler's alternating order), choosing nothing.

        Every candidate must then go back through `return_candidates` or be rolled out
        (`observe` / `restore`), and nothing else may change the pool in between: a boundary
        candidate goes back with the heap entry it left with, as `_medium` puts back its
        unpicked candidates.
        """
        cold = []
        for _ in range(min(n_cold, len(self.cold))):
            h = self.cold.popleft()
            self._loc[h] = OUT
            cold.append(h)
        hs, sides = self._pop_alternating(min(n_boundary, self.n_scored))
        self._taken = dict(zip(hs, sides, strict=True))
        return [RecordView(self, h) for h in cold], [RecordView(self, h) for h in hs]

    def return_candidates(self, recs: list[RecordView]) -> None:
        """Gated sampling, second half: puts back the candidates that were not chosen, with
        their statistics unchanged: a boundary candidate into the side it came from, a cold
        one at the back of the cold queue."""
        for rec in recs:
            h = rec.h
            if self._loc[h] != OUT:
                continue
            side = self._taken.get(h)
            if side is None:  # cold (no statistic): to the back of the FIFO
                self._place(h)
            else:
                self._revive(h, side)
        self._taken = {}
        self._rebalance()
        self._maintain()

    def _medium(self, k: int) -> list[int]:
        """k records drawn uniformly from the 2k boundary candidates (all if k >= scored)."""
        if k <= 0:
            return []
        scored = self.n_scored
        cands, sides = self._pop_alternating(min(self.candidate_factor * k, scored))
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
        if scored > len(cands):  # records away from the boundary were passed over
            self.last["boundary_selective"] += len(chosen)
        return chosen

    def _pop_alternating(self, t: int) -> tuple[list[int], list[int]]:
        """Pops t records alternating min(HIGH) ("hardest easy") and max(LOW) ("easiest
        hard"), starting with HIGH; when one side is empty, from the other."""
        out, sides = [], []
        side = HIGH
        while len(out) < t:
            if side == HIGH and self.n_high:
                got = HIGH
            elif side == LOW and self.n_low:
                got = LOW
            elif self.n_high:
                got = HIGH
            elif self.n_low:
                got = LOW
            else:
                break
            out.append(self._pop(got, hardest=got == HIGH))
            sides.append(got)
            side = LOW if side == HIGH else HIGH
        return out, sides

    def _uniform(self, k: int) -> list[int]:
        """k scored records uniformly at random (the augmentation-only ablation)."""
        k = min(k, len(self._bag))
        out = []
        for _ in range(k):
            h = self._bag[int(self.rng.integers(len(self._bag)))]
            self._take_from_bag(h)
            if self._loc[h] == LOW:
                self.n_low -= 1
            else:
                self.n_high -= 1
            self._loc[h] = OUT
            out.append(h)
        self.last["uniform"] = k
        return out

    # ------------------------------------------------------------------ after the rollout

    def observe(self, rec: RecordView, stat: float, step: int) -> None:
        """Records the realised pool statistic of a sampled record and archives it."""
        h = rec.h
        self._stat[h] = self._est[h] = float(stat)
        self._step[h] = int(step)
        self._loc[h] = ARCHIVE
        self.archive[self._rid[h]] = h

    def restore(self, rec: RecordView) -> None:
        """Returns a sampled record that was not rolled out (its statistic unchanged)."""
        if self._loc[rec.h] != OUT:
            return
        self._place(rec.h)
        self._rebalance()

    def restore_many(self, recs: list[RecordView]) -> None:
        """`restore` for each record, in order (a cold one goes to the back of the queue)."""
        for rec in recs:
            self.restore(rec)

    # ------------------------------------------------------------------ recycling

    def refresh_archive(self, values: dict[str, float]) -> int:
        """Sets statistic = estimate = value for the archived records among `values`; returns
        (and counts in `refreshed`) how many statistics changed."""
        changed = 0
        for rid, v in values.items():
            h = self.archive.get(rid)
            if h is not None:
                changed += self._stat[h] != float(v)
                self._stat[h] = self._est[h] = float(v)
        self.counters["refreshed"] += changed
        return changed

    def begin_recycle(self, values: dict[str, float] | None = None) -> int:
        """Queues the whole archive (shuffled) for reinsertion; `values` are refreshed
        statistics (lineage re-estimation) applied to the archived records first."""
        self.refresh_archive(values or {})
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
            h = self.archive.pop(self._recycle.popleft(), None)
            if h is None:
                continue
            self._place(h)
            moved += 1
        self._rebalance()
        self._maintain()
        self.counters["recycled"] += moved
        return moved

    # ------------------------------------------------------------------ checks and state

    def check(self, allow_out: bool = False) -> None:
        """Asserts every invariant (O(N); for tests)."""
        live = list(self._h.values())
        counts = collections.Counter(self._loc[h] for h in live)
        if not allow_out:
            assert counts[OUT] == 0, f"{counts[OUT]} records are out of the pool"
        assert all(self._rid[h] == rid for rid, h in self._h.items())
        assert len(self._rid) - len(self._free) == len(self._h)
        assert all(self._loc[h] == FREE for h in self._free)
        assert counts[COLD] == len(self.cold) == len(set(self.cold))
        assert all(self._loc[h] == COLD for h in self.cold)
        assert counts[LOW] == self.n_low and counts[HIGH] == self.n_high
        assert counts[ARCHIVE] == len(self.archive)
        assert all(self._loc[h] == ARCHIVE for h in self.archive.values())
        assert all(math.isfinite(self._stat[h]) for h in live
                   if self._loc[h] in (LOW, HIGH, ARCHIVE))
        for heap, loc, key in ((self._lo_max, LOW, max_key), (self._lo_min, LOW, min_key),
                               (self._hi_min, HIGH, min_key), (self._hi_max, HIGH, max_key)):
            hs = [(k, self._live(k, loc)) for k in heap]
            hs = [(k, h) for k, h in hs if h >= 0]
            assert len(hs) == counts[loc], f"{LOC_NAMES[loc]} heap has {len(hs)} live"
            assert len({h for _, h in hs}) == len(hs), "a record twice in one heap"
            assert all(k == key(self._stat[h], self._seq[h], h) for k, h in hs)
        lo, hi = self.boundary()
        if lo is not None and hi is not None:
            assert lo <= hi, f"max(low)={lo} > min(high)={hi}"
        assert self.size <= self.capacity, f"size {self.size} > capacity {self.capacity}"
        if self.sampling == "uniform":
            assert len(self._bag) == self.n_scored
            assert all(self._pos[h] == i for i, h in enumerate(self._bag))

    def state_dict(self) -> dict:
        rid = self._rid
        return {
            "records": [self._row(h) for h in self._h.values()],
            "cold": [rid[h] for h in self.cold],
            "archive": list(self.archive),
            "recycle": list(self._recycle),
            "bag": [rid[h] for h in self._bag],
            "seq": self._seq_n,
            "capacity": self.capacity,
            "counters": dict(self.counters),
            "rng": rng_state(self.rng),
        }

    def load_state_dict(self, state: dict) -> None:
        self._clear()
        for row in state["records"]:
            rec = Record.from_list(row)
            h = self._register(rec)
            self._loc[h], self._seq[h] = rec.loc, rec.seq
            if rec.loc == LOW:
                self._lo_max.append(max_key(rec.stat, rec.seq, h))
                self._lo_min.append(min_key(rec.stat, rec.seq, h))
                self.n_low += 1
            elif rec.loc == HIGH:
                self._hi_min.append(min_key(rec.stat, rec.seq, h))
                self._hi_max.append(max_key(rec.stat, rec.seq, h))
                self.n_high += 1
        for heap in (self._lo_max, self._lo_min, self._hi_min, self._hi_max):
            heapq.heapify(heap)
        hs = self._h
        self.cold = collections.deque(hs[r] for r in state["cold"])
        self.archive = {r: hs[r] for r in state["archive"]}
        self._recycle = collections.deque(state["recycle"])
        self._bag = [hs[r] for r in state.get("bag", [])]
        for i, h in enumerate(self._bag):
            self._pos[h] = i
        self._seq_n = int(state["seq"])
        self.capacity = int(state["capacity"])
        self.counters = collections.Counter(state["counters"])
        set_rng_state(self.rng, state["rng"])

    def bulk_load(self, recs: list[Record]) -> None:
        """Fills an empty pool with scored records in O(N log N) (benchmarks, big seeds)."""
        if self._h:
            raise ValueError("bulk_load needs an empty pool")
        recs = sorted(recs, key=lambda r: r.stat)
        n_low = min(self.target_low(len(recs)), len(recs))
        hs = [self._register(rec) for rec in recs]
        for i, h in enumerate(hs):
            self._seq_n += 1
            self._seq[h], self._loc[h] = self._seq_n, LOW if i < n_low else HIGH
        stat, seq = self._stat, self._seq
        self._lo_max = [max_key(stat[h], seq[h], h) for h in hs[:n_low]]
        self._lo_min = [min_key(stat[h], seq[h], h) for h in hs[:n_low]]
        self._hi_min = [min_key(stat[h], seq[h], h) for h in hs[n_low:]]
        self._hi_max = [max_key(stat[h], seq[h], h) for h in hs[n_low:]]
        for heap in (self._lo_max, self._lo_min, self._hi_min, self._hi_max):
            heapq.heapify(heap)
        self.n_low, self.n_high = n_low, len(hs) - n_low
        if self.sampling == "uniform":
            self._bag = list(hs)
            for i, h in enumerate(hs):
                self._pos[h] = i
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
