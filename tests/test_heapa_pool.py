"""HeaPA pool: boundary sampler, eviction order, recycling, and property-based invariants over
random sequences of sample / observe / insert / recycle / evict / checkpoint."""

import json

import pytest
from hypothesis import HealthCheck, settings
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
