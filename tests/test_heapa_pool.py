"""HeaPA pool: boundary sampler, eviction order, recycling, and property-based invariants over
random sequences of sample / observe / insert / recycle / evict / checkpoint."""

import collections
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from frontier_rl.selection.heapa import records as rec_lib
from frontier_rl.selection.heapa.pool import ARCHIVE, COLD, HIGH, LOW, Pool, Record

STATS = st.sampled_from([-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0]) | st.floats(-1, 1)


def scored_pool(stats, **kw):
    """Incremental inserts: |low| ends within 1 of round(alpha * scored) (the spec's tolerance)."""
    p = Pool(**kw)
    p.add_many(Record(f"r{i}", stat=s) for i, s in enumerate(stats))
    return p


def exact_pool(stats, **kw):
    """bulk_load: |low| = round(alpha * scored) exactly."""
    p = Pool(**kw)
    p.bulk_load([Record(f"r{i}", stat=s) for i, s in enumerate(stats)])
    return p


def test_sortable_keys_order_like_floats():
    xs = [-2.0, -1.0, -0.5, -1e-300, -0.0, 0.0, 1e-300, 0.25, 1.0, 3.5]
    keys = [rec_lib.sortable(x) for x in xs]
    assert keys == sorted(keys)
    assert rec_lib.sortable(-0.0) == rec_lib.sortable(0.0)
    assert rec_lib.max_key(1.0, 1, 0) < rec_lib.max_key(0.5, 1, 0)  # max-heap: larger first
    assert rec_lib.min_key(0.5, 1, 0) < rec_lib.min_key(0.5, 2, 0)  # ties: older first


def test_partition_and_boundary_candidates():
    p = exact_pool([i / 10 for i in range(10)], alpha=0.5, seed=0)
    assert (p.n_low, p.n_high) == (5, 5)
    assert p.boundary() == (0.4, 0.5)
    got = p.sample(2)  # 4 candidates alternating min(high), max(low): 0.5, 0.4, 0.6, 0.3
    assert {r.stat for r in got} <= {0.3, 0.4, 0.5, 0.6}
    assert p.last["boundary"] == 2
    p.check(allow_out=True)
    assert p.n_scored == 8 and abs(p.n_low - 4) <= 1


def test_alpha_sets_the_boundary_quantile():
    p = exact_pool([i / 100 for i in range(100)], alpha=0.2)
    assert p.n_low == 20
    assert p.boundary() == (0.19, 0.2)


def test_cold_first_then_boundary_and_cold_cap():
    p = scored_pool([0.1, 0.9], alpha=0.5)
    p.add_many([Record("c0"), Record("c1"), Record("c2")])
    got = p.sample(4)
    assert [r.rid for r in got[:3]] == ["c0", "c1", "c2"] and p.last["cold"] == 3
    q = scored_pool([0.1, 0.2, 0.8, 0.9], alpha=0.5, max_cold_frac=0.25)
    q.add_many([Record(f"c{i}") for i in range(4)])
    got = q.sample(4)
    assert q.last["cold"] == 1 and q.last["boundary"] == 3


def test_mixed_sampling_takes_half_from_the_easy_end():
    p = exact_pool([i / 10 for i in range(10)], alpha=0.5, sampling="mixed")
    got = p.sample(4)
    assert p.last["easy"] == 2
    assert sorted(r.stat for r in got)[-2:] == [0.8, 0.9]


def test_uniform_sampling_draws_from_all_scored():
    p = scored_pool([i / 100 for i in range(100)], alpha=0.5, sampling="uniform", seed=3)
    got = p.sample(20)
    assert p.last["uniform"] == 20
    stats = [r.stat for r in got]
    assert min(stats) < 0.3 and max(stats) > 0.7  # not confined to the boundary
    p.check(allow_out=True)


def test_eviction_order_follows_the_released_code():
    p = scored_pool([0.1, 0.2, 0.8, 0.9], alpha=0.5, capacity=4)
    evicted = []
    p.on_evict = lambda r: evicted.append(r.rid)
    p.add(Record("cold"))  # a cold arrival evicts the easiest scored item
    assert evicted == ["r3"]
    p.add(Record("s", stat=0.5))  # a scored arrival: then the hardest item goes
    assert evicted == ["r3", "r0"]
    p.add(Record("hardest", stat=-1.0))  # ... which can be the arrival itself
    assert evicted[-1] == "hardest" and p.counters["evicted_on_arrival"] == 1
    p.set_capacity(2)  # lowering N: low first, then high, then cold
    assert evicted[-2:] == ["r1", "s"]
    assert p.cold_ids() == ["cold"]
    p.check()


def test_recycling_reinserts_in_chunks_with_refreshed_values():
    p = scored_pool([0.0] * 10, alpha=0.5)
    for rec in p.sample(10):
        p.observe(rec, 0.5, step=1)
    assert p.size == 0 and len(p.archive) == 10
    assert p.begin_recycle({"r3": -0.75}) == 10
    assert p.recycle_some(chunk=4) == 4 and p.size == 4 and len(p.archive) == 6
    assert p.recycle_some(chunk=2, need=8) == 4  # more than the chunk: the batch needs 8
    p.recycle_some(chunk=0)
    assert p.size == 10 and not p.archive and not p.recycling
    assert p.records["r3"].stat == -0.75 and p.records["r3"].est == -0.75
    p.check()


def test_restore_returns_an_unrolled_record():
    p = scored_pool([0.1, 0.9])
    p.add(Record("c"))
    got = p.sample(3)
    for rec in got:
        p.restore(rec)
    p.check()
    assert p.size == 3 and p.cold_ids() == ["c"]


def test_bulk_load_matches_incremental_partition():
    stats = [((i * 37) % 17) / 17 for i in range(200)]
    p = Pool(alpha=0.3)
    p.bulk_load([Record(f"r{i}", stat=s) for i, s in enumerate(stats)])
    p.check()
    q = scored_pool(stats, alpha=0.3)
    assert p.n_low == round(0.3 * 200) and abs(q.n_low - p.n_low) <= 1
    q.check()


def test_alpha_outside_range_is_rejected():
    with pytest.raises(ValueError, match=r"alpha=1.3 is outside \[0.05, 0.95\]"):
        Pool(alpha=1.3)


class PoolMachine(RuleBasedStateMachine):
    """Random operation sequences; every invariant is checked after every step."""

    @initialize(alpha=st.sampled_from([0.05, 0.3, 0.5, 0.8, 0.95]),
                capacity=st.integers(1, 40), factor=st.integers(1, 3),
                sampling=st.sampled_from(["boundary", "boundary", "mixed", "uniform"]),
                seed=st.integers(0, 3))
    def init(self, alpha, capacity, factor, sampling, seed):
        self.kw = dict(alpha=alpha, capacity=capacity, candidate_factor=factor,
                       sampling=sampling, seed=seed)
        self.pool = Pool(**self.kw)
        self.evicted = []
        self.pool.on_evict = lambda r: self.evicted.append(r.rid)
        self.added = 0
        self.out = []
        self.step = 0

    def _new(self, stat):
        self.added += 1
        return Record(f"x{self.added}", stat=stat)

    @rule(stats=st.lists(STATS | st.none(), min_size=1, max_size=6))
    def insert(self, stats):
        self.pool.add_many([self._new(s) for s in stats])

    @precondition(lambda self: not self.out)
    @rule(k=st.integers(0, 12))
    def sample(self, k):
        self.out = self.pool.sample(k)
        assert len(self.out) == min(k, self.pool.size + len(self.out))
        assert len({r.rid for r in self.out}) == len(self.out)

    @precondition(lambda self: self.out)
    @rule(stats=st.lists(STATS, min_size=12, max_size=12), keep=st.integers(0, 12))
    def observe(self, stats, keep):
        self.step += 1
        for rec, s in zip(self.out[:keep], stats, strict=False):
            self.pool.observe(rec, s, self.step)
        for rec in self.out[keep:]:
            self.pool.restore(rec)
        self.out = []

    @precondition(lambda self: not self.out)
    @rule(chunk=st.integers(0, 5), need=st.integers(0, 10),
          refresh=st.lists(STATS, max_size=5))
    def recycle(self, chunk, need, refresh):
        if not self.pool.recycling:
            ids = list(self.pool.archive)[: len(refresh)]
            self.pool.begin_recycle(dict(zip(ids, refresh, strict=False)))
        self.pool.recycle_some(chunk, need)

    @precondition(lambda self: not self.out)
    @rule(capacity=st.integers(1, 40))
    def set_capacity(self, capacity):
        self.pool.set_capacity(capacity)

    @precondition(lambda self: not self.out)
    @rule()
    def checkpoint(self):
        state = json.loads(json.dumps(self.pool.state_dict()))
        clone = Pool(**self.kw)
        clone.load_state_dict(state)
        assert clone.state_dict() == state
        clone.check()
        if self.pool.size:  # the restored sampler draws exactly what the original draws
            a, b = self.pool.sample(5), clone.sample(5)
            assert [r.rid for r in a] == [r.rid for r in b]
            for p, got in ((self.pool, a), (clone, b)):
                for rec in got:
                    p.restore(rec)
            assert self.pool.state_dict() == clone.state_dict()
        self.pool = clone
        self.pool.on_evict = lambda r: self.evicted.append(r.rid)

    @invariant()
    def invariants(self):
        p = self.pool
        p.check(allow_out=bool(self.out))
        locs = [r.loc for r in p.records.values()]
        assert all(loc in (COLD, LOW, HIGH, ARCHIVE) for loc in locs) or self.out
        # every record ever added is live in exactly one place, or counted as evicted
        assert len(p.records) + len(self.evicted) == self.added
        assert p.counters["evicted"] == len(self.evicted)
        assert not set(self.evicted) & set(p.records)
        lo, hi = p.boundary()
        if lo is not None and hi is not None:
            assert lo <= hi
        assert abs(p.n_low - round(p.alpha * p.n_scored)) <= 1
        assert p.size <= p.capacity


TestPoolMachine = PoolMachine.TestCase
TestPoolMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None,
                                    suppress_health_check=[HealthCheck.too_slow])


def test_records_module_does_not_import_the_pool():
    """The dependency reads one way: pool.py builds on records.py, never the reverse (not even
    under TYPE_CHECKING or inside a function)."""
    import ast

    tree = ast.parse(open(rec_lib.__file__).read())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
            imported |= {f"{node.module}.{a.name}" for a in node.names}
    assert not [m for m in imported if "heapa.pool" in m or m.endswith(".pool")
                or m == "pool"], imported


# ----------------------------------------------------------------------------- reference model


class ReferencePool:
    """A brute-force model of the pool's eviction and boundary rules over plain lists, for
    distinct statistics (so no tie order is involved): the cold FIFO, the scored records by
    statistic, the archive and the recycling queue."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.cold: list[str] = []
        self.scored: dict[str, float] = {}
        self.archive: dict[str, float] = {}  # in arrival order, as the pool's
        self.queue: list[str] = []
        self.evicted: list[str] = []

    @property
    def size(self):
        return len(self.cold) + len(self.scored)

    def _evict_hardest(self):  # a scored arrival, or a lowered capacity
        if self.scored:
            rid = min(self.scored, key=self.scored.get)
            del self.scored[rid]
        else:
            rid = self.cold.pop(0)
        self.evicted.append(rid)

    def place(self, rid, stat):
        if stat is None:
            if self.size >= self.capacity:  # a cold arrival evicts the easiest scored record
                if self.scored:
                    gone = max(self.scored, key=self.scored.get)
                    del self.scored[gone]
                else:
                    gone = self.cold.pop(0)
                self.evicted.append(gone)
            self.cold.append(rid)
        else:
            full = self.size >= self.capacity
            self.scored[rid] = stat
            if full:
                self._evict_hardest()

    def set_capacity(self, capacity):
        self.capacity = capacity
        while self.size > capacity:
            self._evict_hardest()

    def boundary_candidates(self, n_low, t):
        """The t records the boundary sampler pops, in order: min(HIGH), max(LOW), ..."""
        by_stat = sorted(self.scored, key=self.scored.get)
        low, high = by_stat[:n_low][::-1], by_stat[n_low:]  # nearest the boundary first
        out, side = [], "high"
        while len(out) < t:
            if side == "high" and high:
                out.append(high.pop(0))
            elif side == "low" and low:
                out.append(low.pop(0))
            elif high:
                out.append(high.pop(0))
            else:
                out.append(low.pop(0))
            side = "low" if side == "high" else "high"
        return out

    def sample(self, k, n_low, factor, rng):
        """The ids `Pool.sample(k)` returns (max_cold_frac = 1), drawing picks from `rng`."""
        k = min(k, self.size)
        n_cold = min(len(self.cold), k)
        out, self.cold = self.cold[:n_cold], self.cold[n_cold:]
        need = k - n_cold
        if need > 0:
            cands = self.boundary_candidates(n_low, min(factor * need, len(self.scored)))
            if need < len(cands):
                cands = [cands[i] for i in rng.choice(len(cands), size=need,
                                                      replace=False).tolist()]
            out += cands
        for rid in out:
            self.scored.pop(rid, None)
        return out


def clone_rng(rng):
    twin = np.random.default_rng()
    twin.bit_generator.state = rng.bit_generator.state
    return twin


class ReferenceMachine(RuleBasedStateMachine):
    """The pool against `ReferencePool` over random operation sequences: every eviction (which
    record, in which order) and every boundary draw must be the model's."""

    @initialize(alpha=st.sampled_from([0.05, 0.3, 0.5, 0.8]), capacity=st.integers(1, 24),
                factor=st.integers(1, 3), seed=st.integers(0, 3))
    def init(self, alpha, capacity, factor, seed):
        self.factor = factor
        self.pool = Pool(alpha=alpha, capacity=capacity, candidate_factor=factor, seed=seed)
        self.pool.on_evict = lambda r: self.evicted.append(r.rid)
        self.evicted = []
        self.model = ReferencePool(capacity)
        self.n = 0
        self.out = []
        self.step = 0

    def _stat(self, x):
        """A statistic no other record has: x on a 1/1000 grid plus a unique offset < 1e-6."""
        self.n += 1
        return x / 1000 + self.n * 1e-9

    @precondition(lambda self: not self.out)
    @rule(xs=st.lists(st.integers(-1000, 1000) | st.none(), min_size=1, max_size=5))
    def add(self, xs):
        for x in xs:
            stat = None if x is None else self._stat(x)
            rid = f"x{self.n}-{len(self.model.evicted)}-{self.step}-{x}"
            self.n += 1
            self.pool.add(Record(rid, stat=stat))
            self.model.place(rid, stat)

    @precondition(lambda self: not self.out)
    @rule(k=st.integers(1, 10))
    def sample(self, k):
        want = self.model.sample(k, self.pool.n_low, self.factor, clone_rng(self.pool.rng))
        self.out = self.pool.sample(k)
        assert [r.rid for r in self.out] == want

    @precondition(lambda self: self.out)
    @rule(keep=st.integers(0, 10), xs=st.lists(st.integers(-1000, 1000), min_size=10,
                                               max_size=10))
    def observe_or_restore(self, keep, xs):
        self.step += 1
        for rec, x in zip(self.out[:keep], xs, strict=False):
            stat = self._stat(x)
            self.model.archive[rec.rid] = stat
            self.pool.observe(rec, stat, self.step)
        for rec in self.out[keep:]:
            stat = rec.stat
            self.pool.restore(rec)
            self.model.place(rec.rid, stat)
        self.out = []

    @precondition(lambda self: not self.out)
    @rule(chunk=st.integers(0, 4), need=st.integers(0, 8), x=st.integers(-1000, 1000))
    def recycle(self, chunk, need, x):
        if not self.pool.recycling:
            ids = list(self.model.archive)
            values = {ids[0]: self._stat(x)} if ids else {}
            self.model.archive.update(values)
            order = clone_rng(self.pool.rng).permutation(len(ids)).tolist()
            self.model.queue = [ids[i] for i in order]
            self.pool.begin_recycle(values)
        moved = 0
        while self.model.queue and (chunk <= 0 or moved < chunk or self.model.size < need):
            rid = self.model.queue.pop(0)
            self.model.place(rid, self.model.archive.pop(rid))
            moved += 1
        assert self.pool.recycle_some(chunk, need) == moved

    @precondition(lambda self: not self.out)
    @rule(capacity=st.integers(1, 24))
    def set_capacity(self, capacity):
        self.pool.set_capacity(capacity)
        self.model.set_capacity(capacity)

    @invariant()
    def agrees_with_the_model(self):
        p, m = self.pool, self.model
        assert self.evicted == m.evicted
        assert p.cold_ids() == m.cold
        assert list(p.archive) == list(m.archive)
        scored = {rid: r.stat for rid, r in p.records.items() if r.loc in (LOW, HIGH)}
        assert scored == m.scored
        # LOW holds exactly the n_low hardest scored records
        low = {rid for rid, r in p.records.items() if r.loc == LOW}
        assert low == set(sorted(m.scored, key=m.scored.get)[:p.n_low])


TestReferenceMachine = ReferenceMachine.TestCase
TestReferenceMachine.settings = settings(max_examples=80, stateful_step_count=30,
                                         deadline=None,
                                         suppress_health_check=[HealthCheck.too_slow])


@given(stats=st.lists(st.integers(-1000, 1000), min_size=1, max_size=60, unique=True),
       alpha=st.sampled_from([0.1, 0.5, 0.9]), k=st.integers(1, 20), factor=st.integers(1, 3),
       seed=st.integers(0, 5))
@settings(max_examples=150, deadline=None)
def test_boundary_draw_matches_the_sorted_list(stats, alpha, k, factor, seed):
    p = scored_pool([s / 1000 for s in stats], alpha=alpha, candidate_factor=factor, seed=seed)
    model = ReferencePool(p.capacity)
    model.scored = {f"r{i}": s / 1000 for i, s in enumerate(stats)}
    want = model.sample(k, p.n_low, factor, clone_rng(p.rng))
    got = p.sample(k)
    assert [r.rid for r in got] == want
    chosen = min(k, len(stats))
    assert p.last["boundary"] == chosen
    # the rule passed records over only when the scored pool outnumbered its candidates
    assert p.last["boundary_selective"] == (chosen if len(stats) > factor * k else 0)


@given(stats=st.lists(st.integers(-1000, 1000), min_size=2, max_size=40, unique=True),
       capacity=st.integers(1, 39))
@settings(max_examples=150, deadline=None)
def test_lowering_capacity_evicts_the_hardest_first(stats, capacity):
    p = scored_pool([s / 1000 for s in stats], alpha=0.5)
    evicted = []
    p.on_evict = lambda r: evicted.append(r.stat)
    p.set_capacity(capacity)
    assert evicted == sorted(s / 1000 for s in stats)[:max(0, len(stats) - capacity)]


def test_uniform_draws_ignore_the_heap_order():
    """The same records, arriving in the same order with their statistics permuted, give the
    same uniform draws; every record is drawn about equally often, the extremes included."""
    stats = [i / 100 for i in range(100)]
    flipped = stats[::-1]
    draws = {}
    for name, ss in (("sorted", stats), ("flipped", flipped)):
        p = scored_pool(ss, alpha=0.5, sampling="uniform", seed=7)
        seq = []
        for _ in range(200):
            got = p.sample(10)
            seq += [r.rid for r in got]
            for r in got:
                p.restore(r)
        draws[name] = seq
        p.check()
    assert draws["sorted"] == draws["flipped"]
    counts = collections.Counter(draws["sorted"])
    # 2,000 draws over 100 records: 20 each, sd ≈ 4.4; ±4.5 sd
    assert len(counts) == 100 and min(counts.values()) >= 1 and max(counts.values()) <= 40


# ----------------------------------------------------------------------------- pinned details


def test_boundary_reads_the_record_with_handle_zero():
    """The first record registered has handle 0; a boundary on it is still reported."""
    high = scored_pool([0.5], alpha=0.5)  # round(0.5 * 1) = 0 low: the record is HIGH
    assert (high.n_low, high.n_high) == (0, 1) and high.boundary() == (None, 0.5)
    low = scored_pool([0.5], alpha=0.95)  # round(0.95 * 1) = 1 low
    assert (low.n_low, low.n_high) == (1, 0) and low.boundary() == (0.5, None)
    both = exact_pool([0.3, 0.7], alpha=0.5)  # bulk_load registers by statistic: 0.3 is handle 0
    assert both.boundary() == (0.3, 0.7)


def test_recycling_counters_and_refresh_count():
    p = scored_pool([0.0] * 4, alpha=0.5)
    for rec in p.sample(4):
        p.observe(rec, 0.5, step=1)
    # r0 and r1 change, r2 is given its own value (no change), r9 is not archived
    assert p.refresh_archive({"r0": 0.25, "r1": -0.5, "r2": 0.5, "r9": 1.0}) == 2
    assert p.counters["refreshed"] == 2
    assert p.refresh_archive({"r0": 0.25}) == 0 and p.counters["refreshed"] == 2
    assert p.begin_recycle({"r3": 0.75}) == 4
    assert p.counters["refreshed"] == 3 and p.counters["recycles"] == 1
    assert p.recycle_some(chunk=3) == 3 and p.counters["recycled"] == 3
    assert p.recycle_some(chunk=3) == 1 and p.counters["recycled"] == 4
    for rec in p.sample(4):
        p.observe(rec, 0.5, step=2)
    assert p.begin_recycle() == 4 and p.counters["recycles"] == 2
    assert p.counters["refreshed"] == 3


def test_bulk_load_rejects_a_non_empty_pool():
    p = scored_pool([0.5])
    with pytest.raises(ValueError, match="bulk_load needs an empty pool"):
        p.bulk_load([Record("x", stat=0.1)])


def test_bulk_load_over_capacity_evicts_the_hardest():
    evicted = []
    p = Pool(alpha=0.5, capacity=3, on_evict=lambda r: evicted.append(r.rid))
    p.bulk_load([Record(f"r{i}", stat=s) for i, s in enumerate([0.4, 0.1, 0.9, 0.2, 0.6])])
    assert evicted == ["r1", "r3"]  # 0.1, then 0.2
    assert sorted(r.stat for r in p.records.values()) == [0.4, 0.6, 0.9]
    p.check()


def test_bulk_load_fills_the_uniform_sampler():
    p = Pool(alpha=0.5, sampling="uniform", seed=1)
    p.bulk_load([Record(f"r{i}", stat=i / 10) for i in range(10)])
    p.check()
    got = p.sample(10)
    assert sorted(r.rid for r in got) == [f"r{i}" for i in range(10)]
    assert p.last["uniform"] == 10


def test_checkpoint_keeps_estimates_aug_index_and_the_uniform_bag():
    p = Pool(alpha=0.5, sampling="uniform", seed=2)
    p.add_many([Record("s0", stat=0.2, est=0.3, index=7),
                Record("a0", stat=0.6, est=0.1, aug=True, index=5),
                Record("s1", stat=0.9, index=8)])
    state = json.loads(json.dumps(p.state_dict()))
    q = Pool(alpha=0.5, sampling="uniform", seed=2)
    q.load_state_dict(state)
    q.check()
    assert q.records["s0"].est == 0.3 and q.records["a0"].est == 0.1
    assert q.records["s0"].index == 7 and q.records["s1"].index == 8
    assert q.records["a0"].index == -1  # an augmented record is registered again on rollout
    assert [r.rid for r in q.sample(3)] == [r.rid for r in p.sample(3)]
    # a state written before the uniform sampler's bag existed still loads (no bag: empty)
    old = exact_pool([0.1, 0.9]).state_dict()
    del old["bag"]
    r = Pool()
    r.load_state_dict(old)
    r.check()
    assert r.boundary() == (0.1, 0.9)
