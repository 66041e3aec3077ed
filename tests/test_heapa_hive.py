"""The heapa_hive selector: HIVE's Stage-2 entropy band over HeaPA's candidates (cold and
boundary), exactly B groups per round, rejected candidates back in the pool unchanged,
checkpoint round trips, and a 30-step run with augmentation, on ScriptedContext."""

import copy
import importlib.util
import json
import os

import numpy as np
import pytest

from frontier_rl import config_lib, selection
from frontier_rl.selection.heapa.pool import ARCHIVE, COLD, HIGH, LOW
from frontier_rl.selection.scripted import ScriptedContext

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N, B, G = 64, 8, 4


def make(n=N, **over):
    cfg = dict(selection.defaults("heapa_hive"))
    cfg.update({"teacher_workers": 0, **over})
    return selection.make("heapa_hive", {"heapa_hive": cfg}, n, 0)


def scripted(n=N, seed=0, **kw):
    """A context whose prompt entropies are distinct (a permutation), so the band is unique."""
    v = np.random.default_rng(seed).permutation(n).astype(np.float32) / n
    ctx = ScriptedContext(np.linspace(0.05, 0.95, n), batch_size=B, group_size=G, entropy=v,
                          seed=seed, **kw)
    ctx.record_calls = True
    return ctx, v


def band(idx, v, k_off=0.25, k_keep=0.5):
    """Reference band: sort by V descending, drop ⌊M k_off⌋, keep the next ⌊M k_keep⌋."""
    order = sorted(range(len(idx)), key=lambda i: -v[idx[i]])
    m = len(idx)
    drop, keep = int(m * k_off), int(m * k_keep)
    return {idx[i] for i in order[drop:drop + keep]}


def step(sel, ctx, s):
    ctx.begin_step(s)
    ctx.calls.clear()
    before = ctx.counters["rollouts"]
    groups = sel.build_batch(ctx)
    charged = ctx.counters["rollouts"] - before
    sel.after_update(ctx, groups)
    return groups, charged, list(ctx.calls)


def in_pool(sel):
    """rid -> (loc, stat, est, step) for every record in the cold queue or the heaps."""
    out = {}
    for rid, rec in sel.pool.records.items():
        if rec.loc in (COLD, LOW, HIGH):
            out[rid] = (rec.loc, rec.stat, rec.est, rec.step)
    return out


# ----------------------------------------------------------------------------- the gate


def test_gate_keeps_the_band_of_the_cold_candidates_and_requeues_the_rest():
    sel = make(augment=False, shuffle_seeds=False)
    ctx, v = scripted()
    groups, charged, calls = step(sel, ctx, 1)
    (kind, cand, _), (kind2, rolled, n) = calls
    assert (kind, kind2, n) == ("prompt_entropy", "rollout", G)
    assert cand == list(range(2 * B))  # 2B = B / k_keep cold records, FIFO order
    assert set(rolled) == band(cand, v) and len(rolled) == B
    assert sorted(g.index for g in groups) == sorted(rolled)
    rejected = [i for i in cand if i not in set(rolled)]
    top = sorted(cand, key=lambda i: -v[i])
    assert set(top[:B // 2]) <= set(rejected) and set(top[-B // 2:]) <= set(rejected)
    # back of the cold queue, in their order, never rolled out nor archived
    assert sel.pool.cold_ids()[-B:] == [f"scripted/{i}" for i in rejected]
    for i in rejected:
        rec = sel.pool.records[f"scripted/{i}"]
        assert rec.loc == COLD and rec.stat is None and rec.step == -1
    m = sel.metrics()
    assert m["gate_candidates"] == 2 * B and m["gate_rejected"] == B
    assert m["gate_returned"] == B and m["gate_topped_up"] == 0
    assert m["gate_v_lo"] == pytest.approx(min(v[i] for i in rolled))
    assert m["gate_v_hi"] == pytest.approx(max(v[i] for i in rolled))
    assert m["sampled_cold"] == B and m["sampled_boundary"] == 0
    sel.pool.check()


def test_gate_keeps_the_band_of_the_boundary_candidates():
    sel = make(augment=False, recycle_archive_max=0)
    ctx, v = scripted()
    gated_boundary = 0
    for s in range(1, 25):
        _, charged, calls = step(sel, ctx, s)
        assert charged == B * G
        ent = [c for c in calls if c[0] == "prompt_entropy"]
        rolled = [c[1] for c in calls if c[0] == "rollout"]
        assert len(rolled) == 1 and len(ent) <= 1
        if sel.metrics()["sampled_boundary"] == B and ent:  # unless the pool holds just B
            cand = ent[0][1]
            assert len(cand) == 2 * B and not set(cand) & set(sel.pool.cold_ids())
            assert set(rolled[0]) == band(cand, v)
            gated_boundary += 1
        sel.pool.check()
    assert gated_boundary >= 10


def test_top_up_from_out_of_band_candidates_in_boundary_order():
    # k_keep=0.25 with overdraw=2: the band keeps 4 of 16, the next 4 come in candidate order
    sel = make(augment=False, shuffle_seeds=False, k_keep=0.25, overdraw=2.0)
    ctx, v = scripted()
    _, charged, calls = step(sel, ctx, 1)
    cand, rolled = calls[0][1], calls[1][1]
    kept = band(cand, v, k_keep=0.25)
    assert len(kept) == 4 and charged == B * G
    assert set(rolled) == kept | set([i for i in cand if i not in kept][:4])
    assert sel.metrics()["gate_topped_up"] == 4 and sel.metrics()["gate_rejected"] == 12


def test_median_gate_and_ungated_cold():
    sel = make(augment=False, shuffle_seeds=False, gate="median", gate_cold=False)
    ctx, v = scripted()
    _, _, calls = step(sel, ctx, 1)
    assert [c[0] for c in calls] == ["rollout"]  # cold drawn as HeaPA draws it: no entropy
    assert calls[0][1] == list(range(B))
    sel = make(augment=False, shuffle_seeds=False, gate="median")
    ctx, v = scripted()
    _, _, calls = step(sel, ctx, 1)
    cand, rolled = calls[0][1], calls[1][1]
    med = np.median([v[i] for i in cand])
    assert set(rolled) == {i for i in cand if v[i] >= med}


# ----------------------------------------------------------------------------- the pool


def test_rejected_candidates_return_to_the_pool_unchanged():
    sel = make(augment=False, recycle_archive_max=0)
    ctx, _ = scripted()
    for s in range(1, 10):  # a cycle over the seeds; the archive is recycled at step 9
        step(sel, ctx, s)
    for s in range(10, 17):  # no recycling: the pool holds >= B at each step
        before = in_pool(sel)
        archived = set(sel.pool.archive)
        ctx.begin_step(s)
        groups = sel.build_batch(ctx)
        after = in_pool(sel)
        rolled = {g.prompt_id for g in groups}
        assert len(rolled) == B and rolled <= set(before)
        assert set(after) == set(before) - rolled  # nothing lost, nothing counted twice
        assert set(sel.pool.archive) == archived | rolled
        for rid in after:  # same statistic, estimate, last-trained step; cold stays cold
            loc, *rest = after[rid]
            assert rest == list(before[rid][1:])
            assert (loc == COLD) == (before[rid][0] == COLD)
        assert all(sel.pool.records[r].loc == ARCHIVE and sel.pool.records[r].step == s
                   for r in rolled)
        assert sel.metrics()["gate_returned"] == min(B, len(before) - B)
        sel.pool.check()
        sel.after_update(ctx, groups)


def test_state_round_trip_gives_identical_next_batches():
    sel = make(recycle_archive_max=48)
    ctx = ScriptedContext(np.linspace(0.05, 0.95, 200), batch_size=B, group_size=G, seed=1)
    for s in range(1, 13):
        step(sel, ctx, s)
    state = json.loads(json.dumps(sel.state_dict()))
    twin = make(recycle_archive_max=48)
    twin.load_state_dict(state)
    assert twin.state_dict() == state
    ctx2 = copy.deepcopy(ctx)
    a = [[g.prompt_id for g in step(sel, ctx, s)[0]] for s in range(13, 25)]
    b = [[g.prompt_id for g in step(twin, ctx2, s)[0]] for s in range(13, 25)]
    assert a == b
    assert sel.state_dict() == twin.state_dict()
    with pytest.raises(ValueError, match="'heapa_hive' selector state"):
        selection.make("heapa", {"heapa": {"teacher_workers": 0}}, 200, 0).load_state_dict(state)


def test_thirty_steps_with_augmentation_charge_exactly_b_times_g():
    ctx = ScriptedContext(np.linspace(0.05, 0.95, 300), batch_size=16, group_size=G, seed=0)
    sel = make(n=300, recycle_archive_max=64)
    rejected = 0
    for s in range(1, 31):
        groups, charged, _ = step(sel, ctx, s)
        assert len(groups) == 16 and charged == 16 * G
        assert len({g.prompt_id for g in groups}) == 16
        sel.pool.check()
        m = sel.metrics()
        rejected += m["gate_rejected"]
    assert rejected > 0 and len(ctx.extra_prompts) > 0
    assert ctx.counters["entropy_prompts"] > 0 and sel.pool.counters["recycles"] > 0


# ----------------------------------------------------------------------------- config


@pytest.mark.parametrize("field,value,message", [
    ("k_keep", 1.5, r"selector.heapa_hive.k_keep=1.5 is not allowed: a number in \(0, 1\]"),
    ("k_keep", 0.8, r"k_off \+ k_keep <= 1"),
    ("gate", "mean", r"selector.heapa_hive.gate='mean' is not allowed"),
    ("overdraw", 0.5, r"selector.heapa_hive.overdraw=0.5 is not allowed"),
    ("sampling", "mixed", r"selector.heapa_hive.sampling='mixed' is not allowed: 'boundary'"),
    ("alpha", 1.3, r"selector.heapa_hive.alpha=1.3 is outside \[0.05, 0.95\]"),
])
def test_validation_names_field_value_and_range(field, value, message):
    c = config_lib.default_config()
    c.selector.name = "heapa_hive"
    c.selector.heapa_hive[field] = value
    with pytest.raises(config_lib.ConfigError, match=message):
        config_lib.validate(c)


def test_section_is_heapa_fields_plus_the_gate():
    heapa = set(selection.defaults("heapa"))
    mine = set(selection.defaults("heapa_hive"))
    assert mine == (heapa - {"candidate_factor"}) | {"gate", "k_off", "k_keep", "overdraw",
                                                     "gate_cold"}
    with pytest.raises(ValueError, match="unknown selector field 'candidate_factor'"):
        make(candidate_factor=2)


@pytest.mark.parametrize("arg,check", [
    ("", lambda c: c.selector.name == "heapa_hive" and c.selector.heapa_hive.gate == "band"),
    ("median,heap_only", lambda c: c.selector.heapa_hive.gate == "median"
     and not c.selector.heapa_hive.augment),
    ("warm_only", lambda c: not c.selector.heapa_hive.gate_cold),
    ("dapo,smoke", lambda c: c.selector.heapa_hive.filter_groups and c.rl.num_steps == 4),
])
def test_config_variants(arg, check):
    spec = importlib.util.spec_from_file_location(
        "c", os.path.join(ROOT, "configs", "arith_heapa_hive.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert check(mod.get_config(arg))
    with pytest.raises(ValueError, match="unknown arg"):
        mod.get_config("huge")


def test_a_failed_entropy_call_loses_no_candidate():
    sel = make(augment=False)
    ctx, _ = scripted()

    def broken(indices):
        raise RuntimeError("no entropy function")

    ctx.prompt_entropy = broken
    with pytest.raises(RuntimeError, match="no entropy function"):
        sel.build_batch(ctx)
    assert len(in_pool(sel)) == N and not sel.pool.archive  # the 2B candidates went back
    sel.pool.check()
