"""The baselines (DS, GRESO, Pre-filter, PCL, Reinforce-Ada), the scripted context, the shared
state round-trip and the selection bench, all driven by ScriptedContext."""

import copy
import json
import re

import ml_collections
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontier_rl import selection
from frontier_rl.bench import selection as bench_selection
from frontier_rl.selection import reinforce_ada as ra
from frontier_rl.selection.common import PromptStream
from frontier_rl.selection.scripted import ScriptedContext

G = 8


def make(name, num_prompts, seed=0, **fields):
    return selection.make(name, {name: fields}, num_prompts, seed=seed)


def step(sel, ctx, k=1):
    ctx.begin_step(k)
    groups = sel.build_batch(ctx)
    sel.after_update(ctx, groups)
    return groups


# ----------------------------------------------------------------------------- DS


def test_ds_refills_until_b_informative_groups_in_arrival_order():
    class Logged(ScriptedContext):
        def rollout(self, indices, n):
            groups = super().rollout(indices, n)
            self.log.append(groups)
            return groups

    p = np.where(np.arange(400) % 2 == 0, 1.0, 0.5)  # half the prompts always solved
    ctx = Logged(p, batch_size=16, group_size=G, seed=1)
    ctx.log, ctx.record_calls = [], True
    sel = make("ds", 400, gen_batch_size=10)
    groups = step(sel, ctx)
    rolled = [i for c in ctx.calls for i in c[1]]
    assert all(len(c[1]) == 10 and c[2] == G for c in ctx.calls)
    assert len(ctx.calls) >= 3  # ~5 informative groups per batch of 10
    informative = [g for batch in ctx.log for g in batch if not g.zero_variance]
    assert groups == informative[:16]  # the first B informative groups, in arrival order
    m = sel.metrics()
    assert m["gen_batches"] == len(ctx.calls) and m["rollouts"] == ctx.counters["rollouts"]
    assert m["rollouts"] == len(rolled) * G and m["effective_rollouts"] == 16 * G


def test_ds_error_names_the_field_and_counts():
    ctx = ScriptedContext(np.ones(100), batch_size=8, group_size=G)
    sel = make("ds", 100, gen_batch_size=12, max_num_gen_batches=3)
    with pytest.raises(RuntimeError, match=r"selector\.ds\.max_num_gen_batches=3 reached at step "
                       r"1: 0 of 8 informative groups after 3 generation batches of 12 prompts "
                       r"\(288 rollouts\)"):
        step(sel, ctx)
    assert ctx.counters["rollouts"] == 3 * 12 * G
    unlimited = make("ds", 100, gen_batch_size=12, max_num_gen_batches=0)
    ctx = ScriptedContext(np.where(np.arange(100) < 95, 1.0, 0.5), batch_size=4, group_size=G)
    assert len(step(unlimited, ctx)) == 4  # keeps drawing: only 5 prompts can be informative


# ----------------------------------------------------------------------------- GRESO


def test_greso_skip_probabilities_over_many_draws():
    script = {0: [[1] * G] * 2, 1: [[0] * G], 2: [[1] * G] * 30, 3: [[0, -1] * 4] * 2,
              4: [[1, 0] * 4]}
    ctx = ScriptedContext(np.full(5, 0.5), group_size=G, script=script)
    sel = make("greso", 5)
    sel.observe(ctx.rollout([0, 1, 2, 3, 4], G))
    sel.observe(ctx.rollout([0, 2, 3], G))
    for _ in range(28):
        sel.observe(ctx.rollout([2], G))
    assert sel.c_easy.tolist() == [2, 0, 30, 0, 0] and sel.c_hard.tolist() == [0, 1, 0, 2, 0]
    n = 20000
    easy, hard = sel.skip(np.repeat(np.arange(5), n))
    easy, hard = easy.reshape(5, n).mean(1), hard.reshape(5, n).mean(1)
    # 0: 1 - 0.5^2; 2: 1 - max(0.5^30, 0.01); 1: 1 - 0.5; 3 (no correct, mixed): 1 - 0.5^2
    np.testing.assert_allclose(easy, [0.75, 0, 0.99, 0, 0], atol=0.015)
    np.testing.assert_allclose(hard, [0, 0.5, 0, 0.75, 0], atol=0.015)
    sel.p_easy = 0.9
    easy, _ = sel.skip(np.zeros(n, np.int64))
    assert easy.mean() == pytest.approx(1 - 0.81, abs=0.015)


def test_greso_rounds_p_updates_and_accounting():
    p = np.where(np.random.default_rng(0).random(300) < 0.6, 1.0, 0.5)
    ctx = ScriptedContext(p, batch_size=32, group_size=G, seed=3)
    sel = make("greso", 300, skip_first_epoch=False)
    total = 0
    for k in range(1, 6):
        groups = step(sel, ctx, k)
        m = sel.metrics()
        assert 0 < len(groups) <= 32 and all(not g.zero_variance for g in groups)
        if k == 1:  # 60% zero-variance and no history yet: one sampling batch of 48 is short
            assert m["rounds"] >= 2
        total += m["rollouts"]
        assert ctx.counters["rollouts"] == total
        assert m["p_easy"] == pytest.approx(0.5 - 0.01 * k)  # easy ratio ~0.6 >= α/3
        assert m["p_hard"] == pytest.approx(0.5 + 0.01 * k)  # hard ratio 0 < 2α/3
    assert m["skip_easy"] > 0  # the history now skips solved prompts it meets again


def test_greso_top_up_floor_b_min_scales_with_the_batch():
    # B = 64: the first sampling batch (96) gets 62 mixed groups; GRESO's estimate
    # int(2 G / (1 - 34/96) / G · 1.25) = 3 is under the floor b_min = 64 · 64/256 = 16 (the
    # unscaled 64 would roll out 64 prompts in the last round)
    n, big_b = 2000, 64
    first = PromptStream(n, 0).next(96)
    p = np.full(n, 0.5)
    p[first[big_b - 2:]] = 1.0
    ctx = ScriptedContext(p, batch_size=big_b, group_size=G,
                          script={int(i): [[1, 0] * (G // 2)] for i in first[:big_b - 2]})
    ctx.record_calls = True
    sel = make("greso", n, b_raw=8)
    step(sel, ctx)
    assert [len(c[1]) for c in ctx.calls] == [96, 16]
    assert sel.mechanisms()["topup_rounds"] == 1 and sel.mechanisms()["skipped"] == 0


def test_greso_all_zero_variance_guard_and_cap():
    ctx = ScriptedContext(np.ones(2000), batch_size=16, group_size=G)
    sel = make("greso", 2000, max_rounds=3)
    groups = step(sel, ctx)
    m = sel.metrics()
    assert m["rounds"] == 3 and m["padded"] == 16 and len(groups) == 16
    assert (sel.p_easy, sel.p_hard) == (0.5, 0.5)  # first epoch: no update


# ----------------------------------------------------------------------------- Pre-filter


def test_prefilter_band_and_charged_offline_rollouts():
    p = np.tile([0.0, 1.0, 0.5, 0.5], 25)  # 100 prompts; only p=0.5 can have 0 < p̂ < 1
    ctx = ScriptedContext(p, batch_size=10, group_size=G, seed=2)
    sel = make("prefilter", 100, n=16, chunk=30)
    step(sel, ctx, 1)
    assert sorted(sel.kept.tolist()) == [i for i in range(100) if p[i] == 0.5]
    m = sel.metrics()
    assert m["offline_rollouts"] == 100 * 16 and m["kept"] == 50
    assert ctx.counters["rollouts"] == m["rollouts"] == 100 * 16 + 10 * G
    ctx.record_calls = True
    for k in range(2, 6):  # with step 1: 5 steps of 10 = one pass over the 50 kept prompts
        step(sel, ctx, k)
        assert sel.metrics()["rollouts"] == 10 * G
    seen = [i for c in ctx.calls for i in c[1]]
    assert len(seen) == len(set(seen)) == 40 and set(seen) <= set(sel.kept.tolist())


def test_prefilter_pool_limit_band_edges_and_error():
    p = np.linspace(0, 1, 200)
    ctx = ScriptedContext(p, batch_size=4, group_size=G)
    sel = make("prefilter", 200, n=16, p_low=0.0, p_high=0.1875, pool_limit=50)
    step(sel, ctx)
    assert ctx.counters["rollouts"] == 50 * 16 + 4 * G and sel.metrics()["kept"] <= 50
    assert np.all(p[sel.kept] < 0.6)  # 0 < p̂ <= 3/16 keeps only low-p prompts
    with pytest.raises(RuntimeError, match=r"selector\.prefilter kept no prompt"):
        step(make("prefilter", 10), ScriptedContext(np.ones(10), batch_size=4, group_size=G))


# ----------------------------------------------------------------------------- PCL


def test_pcl_keeps_the_m_candidates_nearest_tau():
    # success rates 0, 1/8, ..., 1 (without 1/2) on the 8 prompts: mean 1/2, so with
    # prior_lr = 1 the prior is 1/2 and V - τ = 0.8 (rate - 1/2); the 4 nearest τ are 2..5
    rates = [0, 1, 2, 3, 5, 6, 7, 8]
    script = {i: [[1] * c + [0] * (G - c)] for i, c in enumerate(rates)}
    ctx = ScriptedContext(np.full(8, 0.5), batch_size=4, group_size=G, script=script)
    sel = make("pcl", 8, k=2, prior_lr=1.0)
    sel.observe(ctx, ctx.rollout(range(8), G))
    assert sel.global_prior == 0.5
    groups = step(sel, ctx)  # k·m = 8 candidates: the whole pool
    assert sorted(g.index for g in groups) == [2, 3, 4, 5]
    # |V - τ| = 0.2, 0.1, 0.1, 0.2 for the chosen, >= 0.3 for the rest: all four decided by V
    assert sel.mechanisms()["value_selected"] == sel.mechanisms()["value_decided"] == 4
    blind = make("pcl", 8, k=2)  # nothing observed: V = the prior for every candidate
    step(blind, ScriptedContext(np.full(8, 0.5), batch_size=4, group_size=G))
    assert blind.mechanisms()["value_selected"] == 4  # chosen, by construction...
    assert blind.mechanisms()["value_decided"] == 0  # ...but only by the random tie-break


def test_pcl_prefers_prompts_near_tau_once_it_has_seen_them():
    p = np.random.default_rng(1).random(200)
    ctx = ScriptedContext(p, batch_size=32, group_size=G, seed=5)
    sel = make("pcl", 200)
    for k in range(1, 13):  # 12 steps of 32 rollouts: most prompts have their own evidence
        step(sel, ctx, k)
    near, cands = [], []
    for k in range(13, 19):
        cand = copy.deepcopy(sel.stream).next(4 * 32)
        groups = step(sel, ctx, k)
        chosen = np.array([g.index for g in groups])
        assert len(chosen) == 32 and set(chosen.tolist()) <= set(cand.tolist())
        near.append(np.abs(p[chosen] - 0.5).mean())
        cands.append(np.abs(p[cand] - 0.5).mean())
        m = sel.metrics()
        assert m["v_dist_tau"] <= m["v_dist_tau_all"] and m["rollouts"] == 32 * G
    # uniform choice would match the candidates' mean distance (0.25 for p ~ U(0, 1))
    assert np.mean(near) < np.mean(cands) - 0.08


def test_pcl_value_fits_the_same_rollouts():
    ctx = ScriptedContext(np.full(4, 0.5), batch_size=4, group_size=G,
                          script={0: [[1] * G], 1: [[0] * G]})
    sel = make("pcl", 4, kappa=2.0, prior_lr=0.5, bucket_prior=True)
    sel.t = 1
    sel.observe(ctx, ctx.rollout([0, 1], G))
    bucket = ctx.prompts[0].bucket
    assert ctx.prompts[1].bucket == bucket
    prior = 0.5 + 0.5 * (0.5 - 0.5)  # bucket mean of rates 1 and 0 is 0.5
    assert sel.prior[bucket] == pytest.approx(prior)
    v = sel.value(ctx, np.array([0, 1, 2]))
    np.testing.assert_allclose(v, [(8 + 2 * prior) / 10, (2 * prior) / 10, prior])
    sel.t = 1 + 50  # one half-life later the prompts' own evidence counts half
    v = sel.value(ctx, np.array([0]))
    assert v[0] == pytest.approx((4 + 2 * prior) / 6)


def test_pcl_reads_the_difficulty_bucket_only_when_asked():
    # prompts 0, 1 in bucket "2op" (p = 0.95), 2, 3 in "5op" (p = 0.05); 0 solved, 2 not
    ctx = ScriptedContext(np.array([0.95, 0.95, 0.05, 0.05]), batch_size=2, group_size=G,
                          script={0: [[1] * G], 2: [[0] * G]})
    assert ctx.prompts[1].bucket == "2op" and ctx.prompts[3].bucket == "5op"
    default = make("pcl", 4, prior_lr=0.5)
    default.observe(ctx, ctx.rollout([0, 2], G))
    # the global prior: 0.5 + 0.5 (mean(1, 0) - 0.5) = 0.5 for both unseen prompts
    np.testing.assert_allclose(default.value(ctx, np.array([1, 3])), [0.5, 0.5])
    oracle = make("pcl", 4, prior_lr=0.5, bucket_prior=True)
    ctx = ScriptedContext(np.array([0.95, 0.95, 0.05, 0.05]), batch_size=2, group_size=G,
                          script={0: [[1] * G], 2: [[0] * G]})
    oracle.observe(ctx, ctx.rollout([0, 2], G))
    np.testing.assert_allclose(oracle.value(ctx, np.array([1, 3])), [0.75, 0.25])


# ----------------------------------------------------------------------------- Reinforce-Ada


SCRIPT = {
    0: [[1, 1, 1, 1, 0, 0, 0, 0]],  # balanced: finishes in round 1
    1: [[1] * 8, [0] * 8],  # finishes in round 2
    2: [[0] * 8] * 4,  # never finishes
    3: [[1, 0, 0, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0, 0], [1] * 8],  # round 3
}


def ada(choice):
    ctx = ScriptedContext(np.full(4, 0.5), batch_size=4, group_size=G, script=SCRIPT)
    ctx.record_calls = True
    sel = make("reinforce_ada", 4, choice=choice)
    groups = {g.index: g for g in step(sel, ctx)}
    return ctx, sel, groups


def test_reinforce_ada_balanced_rounds_and_kept_split():
    ctx, sel, groups = ada("balanced")
    assert [sorted(c[1]) for c in ctx.calls] == [[0, 1, 2, 3], [1, 2, 3], [2, 3], [2]]
    assert all(c[2] == 8 for c in ctx.calls)
    assert ctx.counters["rollouts"] == sel.metrics()["rollouts"] == (4 + 3 + 2 + 1) * 8
    assert all(g.size == G for g in groups.values())  # the packer's equal group size
    assert groups[0].outcomes.tolist() == [1, 1, 1, 1, 0, 0, 0, 0]
    assert groups[1].outcomes.tolist() == [1, 1, 1, 1, 0, 0, 0, 0]
    assert groups[2].outcomes.tolist() == [0] * 8  # fallback fills from the negatives
    assert groups[3].outcomes.tolist() == [1, 1, 1, 1, 0, 0, 0, 0]
    # global statistics: the mean over every response of every round, not just the kept 8
    assert groups[0].adv_baseline == pytest.approx(0.5)
    assert groups[1].adv_baseline == pytest.approx(0.5)
    assert groups[2].adv_baseline == pytest.approx(0.0)
    assert groups[3].adv_baseline == pytest.approx(11 / 24)
    assert groups[0].adv_scale == 1.0  # norm_adv_by_std=False, as the released script
    assert sel.metrics()["finished_frac"] == 0.75


def test_reinforce_ada_positive_focused():
    ctx, sel, groups = ada("positive_focused")
    assert [sorted(c[1]) for c in ctx.calls] == [[0, 1, 2, 3], [2], [2], [2]]
    assert groups[1].outcomes.tolist() == [1] * 8  # short of negatives: filled by positives
    assert groups[3].outcomes.tolist() == [1, 0, 0, 0, 0, 0, 0, 0]
    assert groups[2].outcomes.tolist() == [0] * 8


def test_reinforce_ada_split_rules():
    pos, neg = np.arange(3), np.arange(10, 20)
    assert ra.split_finished(pos, neg, 8).tolist() == [0, 1, 2, 10, 11, 12, 13, 14]
    # ⌈(3/13)·8⌉ = 2 positives
    assert ra.split_unfinished(pos, neg, 8, "positive_focused").tolist() == [0, 1, 10, 11, 12,
                                                                              13, 14, 15]
    assert ra.split_unfinished(pos, neg, 8, "balanced").tolist() == [0, 1, 2, 10, 11, 12, 13,
                                                                      14]
    assert ra.split_unfinished(np.arange(1), neg, 8, "positive_focused").tolist() == [
        0, 10, 11, 12, 13, 14, 15, 16]
    mean, std = ra.global_stats(np.array([4, 1]), np.array([1.0, 1.0]), np.array([1.0, 1.0]))
    assert mean.tolist() == [0.25, 0.0] and std[1] == 1.0
    assert std[0] == pytest.approx(np.std([1, 0, 0, 0], ddof=1))


def test_reinforce_ada_needs_round_repeat_at_least_g():
    sel = make("reinforce_ada", 10, round_repeat=4)
    with pytest.raises(ValueError, match=r"selector\.reinforce_ada\.round_repeat=4"):
        step(sel, ScriptedContext(np.full(10, 0.5), batch_size=2, group_size=G))


# ----------------------------------------------------------------------------- shared


@pytest.mark.parametrize("name", ["ds", "greso", "hive", "pcl", "prefilter", "reinforce_ada"])
def test_state_round_trip_makes_the_same_next_choices(name):
    p = np.random.default_rng(7).beta(0.5, 0.5, 400)
    ctx = ScriptedContext(p, batch_size=16, group_size=G, seed=3)
    fields = {"max_num_gen_batches": 0} if name == "ds" else {}
    sel = make(name, 400, seed=1, **fields)
    for k in range(1, 4):
        step(sel, ctx, k)
    state = json.loads(json.dumps(sel.state_dict()))
    ctx2 = copy.deepcopy(ctx)
    restored = make(name, 400, seed=1, **fields)
    restored.load_state_dict(state)
    for k in range(4, 6):
        a, b = step(sel, ctx, k), step(restored, ctx2, k)
        assert [g.index for g in a] == [g.index for g in b]
        assert [g.outcomes.tolist() for g in a] == [g.outcomes.tolist() for g in b]
    ma, mb = sel.metrics(), restored.metrics()
    ma.pop("host_ms"), mb.pop("host_ms")
    assert ma == mb


@pytest.mark.parametrize("name,field,value,message", [
    ("ds", "gen_batch_size", -1, "selector.ds.gen_batch_size=-1 is not allowed"),
    ("greso", "alpha", 1.0, "selector.greso.alpha=1.0 is not allowed: a number in (0, 1)"),
    ("pcl", "tau", 1.5, "selector.pcl.tau=1.5 is not allowed: a number in [0, 1]"),
    ("prefilter", "p_high", 0.0, "selector.prefilter.p_high=0.0 is not allowed"),
    ("reinforce_ada", "choice", "x", "selector.reinforce_ada.choice='x' is not allowed"),
])
def test_validation_names_the_field(name, field, value, message):
    section = ml_collections.ConfigDict(selection.defaults(name))
    section[field] = value
    with pytest.raises(ValueError) as e:
        selection.validate(name, section)
    assert message in str(e.value)


def test_scripted_context():
    ctx = ScriptedContext(np.array([0.0, 1.0, 0.5]), group_size=4, invalid_frac=1.0,
                          script={2: [[1, 0]]})
    g = ctx.rollout([0, 1, 2, 2], 4)
    assert g[0].outcomes.tolist() == [-1] * 4 and g[1].outcomes.tolist() == [1] * 4
    assert g[2].outcomes.tolist() == [1, 0, 1, 0]  # scripted first visit, tiled to n
    assert ctx.counters["rollouts"] == 16
    h = ctx.prompt_entropy([0, 1, 2])
    assert h[2] > max(h[0], h[1])  # peaks at p = 0.5
    prompt = ctx.prompts[2]
    assert re.fullmatch(r"[0-9]+(\+[0-9]+)+=", prompt.text) and prompt.bucket.endswith("op")
    assert sum(int(x) for x in prompt.text[:-1].split("+")) == int(prompt.answer)
    texts = ctx.generate(["a", "b"], max_new_tokens=8)
    assert all(re.fullmatch(r"[0-9]+(\+[0-9]+)+=", t) for t in texts)
    assert ctx.counters["rollouts"] == 18 and ctx.counters["generated_texts"] == 2
    new = ctx.add_prompts([type(prompt)(id="x", text="1+2=", answer="3", bucket="2op",
                                        meta={"p": 1.0})])
    assert new == [3] and ctx.rollout(new, 2)[0].outcomes.tolist() == [1, 1]


# name -> (rollouts per step: low, high; bytes per prompt the selector must hold at least):
# B = 256 prompts of G = 8; every selector keeps the int64 stream permutation (8 B / prompt);
# HIVE's history adds z (2 x int32), the latest type (int8), visits (int32) and the latest
# response entropy (float32): 17 B; Reinforce-Ada runs at most max_rounds = 4 rounds of 8.
BENCH = {"uniform": (2048, 2048, 8), "hive": (2048, 16 * 2048, 8 + 17),
         "reinforce_ada": (2048, 4 * 2048, 8)}


@pytest.mark.parametrize("name", sorted(BENCH))
def test_bench_selection(name, capsys):
    out = bench_selection.main(name, sizes=[2000], repeats=3, as_json=True)  # odd: a median step
    row = out["results"][0]
    lo, hi, mem = BENCH[name]
    assert row["pool"] == 2000 and out["batch_size"] == 256 and out["group_size"] == G
    assert lo <= row["rollouts_per_step"] <= hi and row["rollouts_per_step"] % G == 0
    assert mem <= row["mem_bytes_per_prompt"] < mem + 64
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == json.loads(
        json.dumps(out))


@given(st.integers(0, 12), st.integers(0, 12), st.sampled_from(["balanced", "positive_focused"]),
       st.integers(2, 8))
@settings(max_examples=200, deadline=None)
def test_reinforce_ada_keeps_min_g_available_distinct_responses(n_pos, n_neg, choice, keep):
    pos, neg = np.arange(n_pos), np.arange(100, 100 + n_neg)
    for kept in (ra.split_finished(pos, neg, keep), ra.split_unfinished(pos, neg, keep, choice)):
        assert kept.size == min(keep, n_pos + n_neg) == np.unique(kept).size
        assert set(kept.tolist()) <= set(pos.tolist()) | set(neg.tolist())
