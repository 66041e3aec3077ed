"""HIVE, driven by the scripted StepContext: Stage 1 probabilities, p updates, the Stage-2 band,
the exact-B_t loop, accounting and resume."""

import copy
import json
import math

import ml_collections
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontier_rl import config_lib, selection
from frontier_rl.selection import common
from frontier_rl.selection import hive as hive_lib
from frontier_rl.selection.base import Group
from frontier_rl.selection.common import EASY, HARD, INVALID, MIXED, PromptStream, adjust_p
from frontier_rl.selection.scripted import ScriptedContext

G = 8
ALL_RIGHT, ALL_WRONG, ALL_INVALID = [1] * G, [0] * G, [-1] * G
MIXED_OUT = [1, 0] * (G // 2)


def make(num_prompts, **fields):
    return selection.make("hive", {"hive": fields}, num_prompts, seed=0)


def visit(sel, ctx, prompts):
    """One scripted visit of each prompt (outcomes from ctx.script), fed to the history."""
    return sel.observe(ctx.rollout(prompts, G))


HISTORIES = {  # prompt: its visits, oldest first
    0: [],
    1: [ALL_RIGHT, ALL_RIGHT],
    2: [ALL_WRONG, ALL_WRONG, ALL_WRONG],
    3: [MIXED_OUT, ALL_RIGHT],
    4: [ALL_RIGHT, MIXED_OUT],
    5: [ALL_INVALID, ALL_INVALID],
    6: [ALL_RIGHT] * 10,
    7: [ALL_RIGHT, ALL_WRONG],
}


def group(i, outcomes, h=0.5):
    """A group of prompt i with the given outcomes and mean response entropy h."""
    o = np.asarray(outcomes, np.int8)
    return Group(index=i, prompt_id=f"p{i}", outcomes=o, rewards=o.astype(np.float32),
                 lengths=np.full(o.size, 4, np.int32),
                 mean_entropy=np.full(o.size, h, np.float32))


def scripted_history(**fields):
    ctx = ScriptedContext(np.full(8, 0.5), group_size=G, script=HISTORIES)
    sel = make(8, **fields)
    for k in range(max(len(v) for v in HISTORIES.values())):
        visit(sel, ctx, [i for i, seq in HISTORIES.items() if len(seq) > k])
    return sel


def test_stage1_probability_after_histories():
    sel = scripted_history()
    want = [1.0, 0.5**2, 0.5**3, 0.5, 1.0, 0.5**2, 0.01, 0.5**2]  # "any": z=2, τ=hard for 7
    np.testing.assert_allclose(sel.stage1_prob(np.arange(8)), want)
    sel.p_easy, sel.p_hard = 0.3, 0.9
    want = [1.0, 0.09, 0.729, 0.3, 1.0, 0.25, 0.01, 0.81]
    np.testing.assert_allclose(sel.stage1_prob(np.arange(8)), want)


def test_stage1_typed_runs_and_types():
    sel = scripted_history(z_mode="typed", p_default=0.2, eps_p=0.001)  # 0.5^10 < ε_p
    want = [1.0, 0.25, 0.125, 0.5, 1.0, 0.04, 0.001, 0.5]  # 7: one trailing hard visit
    np.testing.assert_allclose(sel.stage1_prob(np.arange(8)), want)
    assert sel.last_type.tolist() == [MIXED, EASY, HARD, EASY, MIXED, INVALID, EASY, HARD]
    assert sel.visits.tolist() == [0, 2, 3, 2, 2, 2, 10, 2]


def test_stage1_entropy_mixing():
    # The same histories, each prompt's latest group with a known mean response entropy H.
    h_last = {1: 0.5, 2: 1.5, 3: 1.0, 4: 2.5, 5: 0.5, 6: 2.0, 7: 1.5}  # prompt 0: unseen
    sel = make(8, lam=0.25)
    for k in range(max(len(v) for v in HISTORIES.values())):
        sel.observe([group(i, seq[k], h_last[i]) for i, seq in HISTORIES.items()
                     if len(seq) > k])
    sel._refresh_h_range()  # as build_batch does at the start of a step
    # s_ent = (H - 0.5) / (2.5 - 0.5), 1 for the unseen prompt 0:
    #   [1, 0, 0.5, 0.25, 1, 0, 0.75, 0.5]
    # s_rew as in test_stage1_probability_after_histories:
    #   [1, 0.25, 0.125, 0.5, 1, 0.25, 0.01, 0.25]
    # P_S1 = 0.25 s_rew + 0.75 s_ent
    want = [1.0, 0.0625, 0.40625, 0.3125, 1.0, 0.0625, 0.565, 0.4375]
    np.testing.assert_allclose(sel.stage1_prob(np.arange(8)), want, rtol=1e-6)


def test_adjust_p_rule():
    assert adjust_p(0.5, 0.2, 0.25 / 3, 0.01, 0.05, 0.95) == pytest.approx(0.49)
    assert adjust_p(0.5, 0.25 / 3, 0.25 / 3, 0.01, 0.05, 0.95) == pytest.approx(0.49)  # tie: down
    assert adjust_p(0.5, 0.0, 0.25 / 3, 0.01, 0.05, 0.95) == pytest.approx(0.51)
    assert adjust_p(0.05, 1.0, 0.1, 0.01, 0.05, 0.95) == pytest.approx(0.05)  # clipped
    assert adjust_p(0.95, 0.0, 0.1, 0.01, 0.05, 0.95) == pytest.approx(0.95)


def _step(sel, ctx, step):
    ctx.begin_step(step)
    groups = sel.build_batch(ctx)
    sel.after_update(ctx, groups)
    return groups


def test_p_updates_once_per_step_from_the_step_ratios():
    # Half the pool always right (easy zero-variance), half mixed: easy ratio ~0.5 >= α/3 and
    # hard ratio 0 < 2α/3, so p_easy falls and p_hard rises by Δp each step.
    p = np.where(np.arange(256) % 2 == 0, 1.0, 0.5)
    ctx = ScriptedContext(p, batch_size=8, group_size=G, seed=1)
    sel = make(256, skip_first_epoch=False)
    for step in range(1, 4):
        _step(sel, ctx, step)
        m = sel.metrics()
        assert m["zero_var_easy"] >= 0.25 / 3 and m["zero_var_hard"] == 0.0
        assert m["p_easy"] == pytest.approx(0.5 - 0.01 * step)
        assert m["p_hard"] == pytest.approx(0.5 + 0.01 * step)
    frozen = make(256)  # default: no update while the dataloader is in its first epoch
    _step(frozen, ScriptedContext(p, batch_size=8, group_size=G, seed=1), 1)
    assert (frozen.p_easy, frozen.p_hard) == (0.5, 0.5) and frozen.stream.epoch == 0


@pytest.mark.parametrize("n,drop,keep", [(32, 8, 16), (31, 7, 8), (16, 4, 8), (15, 3, 0),
                                         (48, 12, 24), (0, 0, 0), (100, 25, 48)])
def test_band_counts(n, drop, keep):
    assert hive_lib.band_counts(n, 0.25, 0.5, 8) == (drop, keep)


@given(st.integers(0, 2000), st.floats(0, 0.9), st.floats(0.05, 1.0), st.integers(1, 16))
@settings(max_examples=300, deadline=None)
def test_band_counts_invariants(n, k_off, k_keep, g):
    k_keep = min(k_keep, 1.0 - k_off)
    drop, keep = hive_lib.band_counts(n, k_off, k_keep, g)
    assert drop <= n * k_off + 1e-6 < drop + 1  # ⌊n k_off⌋
    assert keep % g == 0 and drop + keep <= n
    assert keep > n * k_keep - g - 1e-6  # at most one group short of ⌊n k_keep⌋


def test_band_and_median_gates():
    sel = make(64)
    unit = np.arange(10, 42)  # 32 candidates
    v = np.linspace(3.0, 0.0, 32)  # V falls with position: the top 8 by V are the first 8
    v[20] = v[19]  # a tie, broken by prompt index
    kept, thr = sel.gate(unit, v, 8)
    assert kept.tolist() == list(range(18, 34))  # drop 8 highest, keep the next 16
    assert thr == pytest.approx(v[23])
    sel.cfg.gate = "median"
    kept, gamma = sel.gate(unit, v, 8)
    assert gamma == pytest.approx(np.median(v))
    assert kept.tolist() == unit[v >= gamma].tolist() and kept.size == 16


def test_stage2_band_on_the_first_raw_batch():
    n = 64
    entropy = np.random.default_rng(3).permutation(n).astype(np.float32)
    ctx = ScriptedContext(np.full(n, 0.5), batch_size=8, group_size=G, entropy=entropy)
    ctx.record_calls = True
    sel = make(n)
    raw = copy.deepcopy(sel.stream).next(32)  # the first raw batch the selector will draw
    groups = sel.build_batch(ctx)
    calls = list(ctx.calls)
    assert [c[0] for c in calls] == ["prompt_entropy", "rollout"]  # one round suffices
    assert sorted(calls[0][1]) == sorted(raw.tolist())  # all unseen: Stage 1 accepts all
    ranked = sorted(raw.tolist(), key=lambda i: (-entropy[i], i))
    band = set(ranked[8:24])  # ⌊32·0.25⌋ dropped, ⌊32·0.5⌋ = 16 kept
    assert set(calls[1][1]) == band and calls[1][2] == G
    assert len(groups) == 8 and all(not g.zero_variance for g in groups)
    assert sel.metrics()["stage2_threshold"] == pytest.approx(min(entropy[i] for i in band))


@pytest.mark.parametrize("scope", ["raw_batch", "pooled"])
def test_stage2_scope_gates_raw_batches_or_the_whole_round(scope):
    # b_raw = 8, B_t = 8, so B_cand = 12. Stage 1 accepts every (unseen) prompt; s_j is the
    # j-th prompt of the stream and V(s_j) = 32 - j falls along the stream.
    # raw_batch: 8 survivors keep ⌊8·0.5⌋ → 0 groups, so they are carried; at 16 the band keeps
    #   8 (drops ⌊16·0.25⌋ = 4): sets s0..s15 and s16..s31, kept s4..s11 and s20..s27.
    # pooled: keeps of 8, 16, 24 pending survivors are 0, 8, 8 < 12; at 32 it is 16, so one
    #   set s0..s31: drop s0..s7, keep s8..s23.
    n = 64
    sel = make(n, b_raw=8, scope=scope)
    order = copy.deepcopy(sel.stream).next(32).tolist()
    entropy = np.zeros(n, np.float32)
    entropy[order] = 32 - np.arange(32)
    ctx = ScriptedContext(np.full(n, 0.5), batch_size=8, group_size=G, entropy=entropy,
                          script={i: [MIXED_OUT] for i in range(n)})
    ctx.record_calls = True
    groups = sel.build_batch(ctx)
    calls = list(ctx.calls)
    assert [c[0] for c in calls] == ["prompt_entropy", "rollout"]
    assert sorted(calls[0][1]) == sorted(order)  # one entropy pass over all 32
    want = order[4:12] + order[20:28] if scope == "raw_batch" else order[8:24]
    assert sorted(calls[1][1]) == sorted(want)
    assert sel.mechanisms()["stage2_dropped"] == 16 and len(groups) == 8


def test_stage2_random_drops_as_many_as_the_entropy_gate():
    n = 64
    entropy = np.random.default_rng(3).permutation(n).astype(np.float32)

    def first_step(seed=0, **fields):
        ctx = ScriptedContext(np.full(n, 0.5), batch_size=8, group_size=G, entropy=entropy,
                              script={i: [MIXED_OUT] for i in range(n)})
        ctx.record_calls = True
        sel = selection.make("hive", {"hive": fields}, n, seed=seed)
        sel.build_batch(ctx)
        return sel, [c for c in ctx.calls if c[0] == "rollout"], ctx

    ent, ent_rolls, _ = first_step()
    rnd, rnd_rolls, rnd_ctx = first_step(stage2="random")
    # the same 32 Stage-1 survivors (the first raw batch); both keep 16 and drop 16
    assert ent.mechanisms()["stage2_dropped"] == rnd.mechanisms()["stage2_dropped"] == 16
    assert len(ent_rolls[0][1]) == len(rnd_rolls[0][1]) == 16
    assert set(rnd_rolls[0][1]) != set(ent_rolls[0][1])
    assert rnd_ctx.counters["entropy_prompts"] == 0  # no entropy pass at all
    assert "stage2_threshold" not in rnd.metrics()
    again, again_rolls, _ = first_step(stage2="random")
    assert again_rolls == rnd_rolls  # deterministic by seed
    other, other_rolls, _ = first_step(stage2="random", seed=1)
    assert set(other_rolls[0][1]) != set(rnd_rolls[0][1])


def test_random_gate_keeps_the_band_count_uniformly():
    sel = make(64, stage2="random")
    unit = np.arange(100, 132)
    counts = np.zeros(32, int)
    for _ in range(4000):
        kept = sel.random_gate(unit, G)
        assert kept.size == 16 and np.all(np.diff(kept) > 0)  # the band's count, stream order
        counts[kept - 100] += 1
    # each position is kept with probability 1/2: 2000 ± 5 sd (sd = √(4000/4) ≈ 31.6)
    assert counts.min() > 1840 and counts.max() < 2160
    sel.cfg.gate = "median"
    assert sel.random_gate(np.arange(31), G).size == 16  # ⌈31/2⌉, the median gate's count


def test_stage1_off_never_rejects():
    p = np.where(np.arange(128) % 2 == 0, 1.0, 0.5)  # half the pool always solved
    rejected = {}
    for stage1 in (True, False):
        ctx = ScriptedContext(p, batch_size=8, group_size=G, seed=1)
        sel = make(128, stage1=stage1)
        accept = []
        for step in range(1, 25):  # several passes of the pool: histories build up
            _step(sel, ctx, step)
            accept.append(sel.metrics()["stage1_accept"])
        rejected[stage1] = sel.mechanisms()["stage1_rejected"]
        if not stage1:
            assert accept == [1.0] * 24
    assert rejected[False] == 0 and rejected[True] > 0


def test_exact_batch_under_scripted_zero_variance():
    # 70% of prompts are always solved: most groups are zero-variance, so several rounds run.
    n, big_b = 4000, 32
    p = np.where(np.random.default_rng(0).random(n) < 0.7, 1.0, 0.5)
    ctx = ScriptedContext(p, batch_size=big_b, group_size=G, seed=2)
    ctx.record_calls = True
    sel = make(n)
    total = 0
    for step in range(1, 6):
        ctx.calls.clear()
        groups = _step(sel, ctx, step)
        m = sel.metrics()
        assert len(groups) == big_b and all(not g.zero_variance for g in groups)
        assert m["effective_rollouts"] == big_b * G and m["padded"] == 0
        rolls = [c for c in ctx.calls if c[0] == "rollout"]
        assert m["rounds"] == len(rolls) >= 2
        assert m["rollouts"] == sum(len(c[1]) * G for c in rolls)
        total += m["rollouts"]
        assert ctx.counters["rollouts"] == total  # every response, discarded ones too
        assert len(rolls[0][1]) >= math.ceil(1.5 * big_b)  # round 1 asks for B_cand
    # round 2's size follows from round 1's survivors and zero-variance fraction (last step)
    b_cand = math.ceil(1.5 * big_b)
    types1 = [sel.last_type[i] for i in rolls[0][1]]
    kept1 = sum(t == MIXED for t in types1)
    rho = 1 - kept1 / len(types1)
    b_min = 64 * big_b // 256  # Table 4's 64 is for B_t = 256
    want = max(b_min, min(b_cand, math.ceil(1.25 * (big_b - kept1) / (1 - rho))))
    assert want <= len(rolls[1][1]) < want + 16  # a raw batch adds at most 16 candidates


def first_round_short_by_two(n, big_b, cand):
    """A context whose first `cand` prompts in stream order leave the first round 2 groups
    short of B_t: big_b - 2 mixed, the rest always solved; every later prompt mixed."""
    first = PromptStream(n, 0).next(cand)
    p = np.full(n, 0.5)
    p[first[big_b - 2:]] = 1.0
    script = {int(i): [MIXED_OUT] for i in first[:big_b - 2]}
    ctx = ScriptedContext(p, batch_size=big_b, group_size=G, script=script)
    ctx.record_calls = True
    return ctx


def test_top_up_floor_b_min_scales_with_the_batch():
    # B_t = 64: round 1 asks for B_cand = 96 and gets 62 mixed groups, so ρ_zv = 34/96 and the
    # formula asks for ⌈1.25 · 2 / (1 - 34/96)⌉ = 4; the floor is b_min = 64 · 64/256 = 16
    # (the unscaled 64 would make round 2 roll out 64 prompts where the formula asks for 4)
    ctx = first_round_short_by_two(2000, 64, 96)
    sel = make(2000, b_raw=8, k_off=0.0, k_keep=1.0)  # no Stage-2 drop: counts are exact
    groups = _step(sel, ctx, 1)
    rolls = [c[1] for c in ctx.calls if c[0] == "rollout"]
    assert [len(r) for r in rolls] == [96, 16] and len(groups) == 64
    assert sel.mechanisms()["topup_rounds"] == 1
    assert [common.scaled_b_min(64, b) for b in (256, 64, 32, 8, 1)] == [64, 16, 8, 2, 1]


def test_round_cap_pads_with_zero_variance_groups():
    ctx = ScriptedContext(np.ones(500), batch_size=16, group_size=G)
    sel = make(500, max_rounds=3)
    groups = _step(sel, ctx, 1)
    m = sel.metrics()
    assert len(groups) == 16 and all(g.all_correct for g in groups)
    assert m["rounds"] == 3 and m["padded"] == 16 and m["effective_rollouts"] == 0
    assert m["zero_var_easy"] == 1.0
    # ρ = 1 asks for B_cand = 24 candidates each round: two raw batches of 16 band survivors
    assert ctx.counters["rollouts"] == m["rollouts"] == 3 * 32 * G


def test_guard_when_stage1_rejects_almost_everything():
    ctx = ScriptedContext(np.ones(64), batch_size=8, group_size=G)
    sel = make(64, max_rounds=2, p_easy=0.05, p_min=0.05, eps_p=0.0)
    sel.z_any[:] = 50  # a long easy history: P_S1 = 0.05^50 = 0
    sel.last_type[:] = EASY
    groups = _step(sel, ctx, 1)
    assert len(groups) == 8 and sel.metrics()["guard"] >= 1


def test_zero_variance_uses_raw_outcomes_not_shaped_rewards():
    class Shaped(ScriptedContext):
        def rollout(self, indices, n):
            groups = super().rollout(indices, n)
            for g in groups:  # a length penalty makes rewards differ inside the group
                g.rewards = g.rewards - 0.1 * np.arange(n, dtype=np.float32)
            return groups

    ctx = Shaped(np.ones(64), batch_size=4, group_size=G)
    sel = make(64, max_rounds=1)
    groups = _step(sel, ctx, 1)
    assert sel.metrics()["zero_var_easy"] == 1.0 and sel.metrics()["padded"] == 4
    assert all(g.zero_variance for g in groups)


def test_state_round_trip_makes_the_same_choices():
    p = np.random.default_rng(5).beta(0.5, 0.5, 300)
    ctx = ScriptedContext(p, batch_size=16, group_size=G, seed=4)
    sel = make(300, skip_first_epoch=False)
    for step in range(1, 4):
        _step(sel, ctx, step)
    state = json.loads(json.dumps(sel.state_dict()))
    ctx2 = copy.deepcopy(ctx)
    restored = make(300, skip_first_epoch=False)
    restored.load_state_dict(state)
    a, b = _step(sel, ctx, 4), _step(restored, ctx2, 4)
    assert [g.index for g in a] == [g.index for g in b]
    assert (sel.p_easy, sel.p_hard) == (restored.p_easy, restored.p_hard)
    np.testing.assert_array_equal(sel.z_any, restored.z_any)


@pytest.mark.parametrize("field,value,message", [
    ("k_keep", 1.5, "selector.hive.k_keep=1.5 is not allowed: a number in (0, 1]"),
    ("k_off", 0.75, "selector.hive.k_keep=0.5 is not allowed: a number with k_off + k_keep"),
    ("gate", "mean", "selector.hive.gate='mean' is not allowed: 'band' or 'median'"),
    ("p_easy", 0.01, "selector.hive.p_easy=0.01 is not allowed: a number in [p_min=0.05"),
    ("b_raw", 0, "selector.hive.b_raw=0 is not allowed: an integer >= 1"),
])
def test_validation_names_the_field(field, value, message):
    section = ml_collections.ConfigDict(selection.defaults("hive"))
    section[field] = value
    with pytest.raises(ValueError) as e:
        selection.validate("hive", section)
    assert message in str(e.value)
    c = config_lib.default_config()
    c.selector.name = "hive"
    c.selector.hive[field] = value
    with pytest.raises(config_lib.ConfigError):
        config_lib.validate(c)


def test_stage2_band_is_not_symmetric_in_v():
    # k_off = k_keep = 0.25 over 8: drop the 2 highest V, keep the next 2 (the default
    # 0.25 / 0.5 band keeps the same positions whichever way V is sorted, so it cannot tell)
    v = np.arange(8, dtype=np.float64)  # V rises with position
    sel, thr = hive_lib.stage2(v, np.arange(8), gate="band", k_off=0.25, k_keep=0.25,
                               group_size=1)
    assert sel.tolist() == [4, 5] and thr == 4.0
    # all V equal: the order is `tie`'s, ascending
    sel, _ = hive_lib.stage2(np.ones(8), np.array([7, 6, 5, 4, 3, 2, 1, 0]), gate="band",
                             k_off=0.25, k_keep=0.25, group_size=1)
    assert sel.tolist() == [4, 5]  # tie order 0, 1 dropped (positions 7, 6), 2, 3 kept


def test_stage2_band_keeps_one_and_none():
    # group_size 1 (heapa_hive): n = 4, drop ⌊1⌋ = 1, keep ⌊2⌋ = 2; n = 3: drop 0, keep 1
    v = np.array([0.5, 2.0, 1.0, 3.0])
    sel, thr = hive_lib.stage2(v, np.arange(4), gate="band", k_off=0.25, k_keep=0.5,
                               group_size=1)
    assert sel.tolist() == [1, 2] and thr == 1.0
    sel, thr = hive_lib.stage2(v[:3], np.arange(3), gate="band", k_off=0.25, k_keep=0.5,
                               group_size=1)
    assert sel.tolist() == [1] and thr == 2.0
    # keep = 0 (fewer than G / k_keep candidates): nothing kept, NaN threshold, usable index
    unit = np.arange(100, 107)
    sel, thr = hive_lib.stage2(np.arange(7.0), unit, gate="band", k_off=0.25, k_keep=0.5,
                               group_size=8)
    assert sel.dtype == np.int64 and sel.shape == (0,) and math.isnan(thr)
    assert unit[sel].tolist() == []


def test_median_gate_keeps_v_equal_to_the_median():
    v = np.array([3.0, 1.0, 2.0, 5.0, 0.0])  # median 2.0
    sel, gamma = hive_lib.stage2(v, np.arange(5), gate="median", k_off=0.25, k_keep=0.5,
                                 group_size=8)
    assert gamma == 2.0 and sel.tolist() == [0, 2, 3]


def test_unit_keep_counts():
    band, median = make(64), make(64, gate="median")
    ns = [0, 1, 2, 15, 16, 31, 32]
    assert [band._unit_keep(n, G) for n in ns] == [0, 0, 0, 0, 8, 8, 16]
    assert [median._unit_keep(n, G) for n in ns] == [0, 1, 1, 8, 8, 16, 16]  # ⌈n/2⌉
