"""MoPPS (selection/mopps.py) and learnability sampling (selection/learnability.py): golden
batches, resume, their mechanism counters at the comparison testbed's shape, the messages of
their checks, the behaviour each method claims, and a run on the synthetic learner."""

import copy
import hashlib
import json
import math

import numpy as np
import pytest

from frontier_rl import selection
from frontier_rl.selection import mopps
from frontier_rl.selection.base import REWARD_CORRECT
from frontier_rl.selection.scripted import ScriptedContext
from frontier_rl.sim import run

G = 8
NAMES = ("mopps", "learnability")


def make(name, num_prompts, seed=0, **fields):
    return selection.make(name, {name: fields}, num_prompts, seed=seed)


def step(sel, ctx, k=1):
    ctx.begin_step(k)
    groups = sel.build_batch(ctx)
    sel.after_update(ctx, groups)
    return groups


class Logged(ScriptedContext):
    """Keeps every rollout call's groups, so a test can see the probes a selector saw."""

    def rollout(self, indices, n):
        groups = super().rollout(indices, n)
        self.log.append(groups)
        return groups


# ----------------------------------------------------------------------------- golden batches

# sha256 (first 16 hex digits) of the prompt ids of 12 steps at the shape of
# tests/test_selection_mechanisms.py's GOLDEN (1,500 prompts, B = 256, G = 8), recorded when
# the selectors were added: a change of any choice or RNG stream moves them.
GOLDEN = {
    "mopps": ("mopps", {}, "ee2f141c5b1df437"),
    "mopps_decay": ("mopps", {"lam": 0.5, "cand_ratio": 4}, "3f73567dcbd46925"),
    "learnability": ("learnability", {}, "3a9cb703c9e54f69"),
    "learnability_proportional_reuse": (
        "learnability", {"rule": "proportional", "reuse_probes": True}, "59caa3a22a619dd2"),
}


def golden_digest(name, fields):
    n = 1500
    sel = make(name, n, seed=3, **fields)
    ctx = ScriptedContext(np.random.default_rng(11).beta(0.6, 0.6, n), batch_size=256,
                          group_size=G, seed=5)
    batches = [[g.prompt_id for g in step(sel, ctx, k)] for k in range(1, 13)]
    return hashlib.sha256(json.dumps(batches).encode()).hexdigest()[:16]


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_golden_batches(case):
    name, fields, digest = GOLDEN[case]
    assert golden_digest(name, fields) == digest


# ----------------------------------------------------------------------------- resume


@pytest.mark.parametrize("name,fields", [
    ("mopps", {}), ("mopps", {"lam": 0.5}), ("learnability", {}),
    ("learnability", {"rule": "proportional", "reuse_probes": True})])
def test_state_round_trip_makes_the_same_next_choices(name, fields):
    p = np.random.default_rng(7).beta(0.5, 0.5, 400)
    ctx = ScriptedContext(p, batch_size=16, group_size=G, seed=3)
    sel = make(name, 400, seed=1, **fields)
    for k in range(1, 8):  # 7 x 16 x 16 candidates: mopps passes the pool and sees revisits
        step(sel, ctx, k)
    state = json.loads(json.dumps(sel.state_dict()))
    ctx2 = copy.deepcopy(ctx)
    restored = make(name, 400, seed=1, **fields)
    restored.load_state_dict(state)
    assert restored.mechanisms() == sel.mechanisms()
    for k in range(8, 11):
        a, b = step(sel, ctx, k), step(restored, ctx2, k)
        assert [g.index for g in a] == [g.index for g in b]
        assert [g.outcomes.tolist() for g in a] == [g.outcomes.tolist() for g in b]
    ma, mb = sel.metrics(), restored.metrics()
    ma.pop("host_ms"), mb.pop("host_ms")
    assert ma == mb
    assert restored.mechanisms() == sel.mechanisms()
    with pytest.raises(ValueError, match=f"{name} state is for 400 prompts"):
        make(name, 401).load_state_dict(state)


# ----------------------------------------------------------------------------- counters


@pytest.mark.parametrize("name,fields", [("mopps", {}), ("learnability", {}),
                                         ("learnability", {"rule": "proportional"})])
def test_proof_counters_move_at_the_testbed_shape(name, fields):
    """Pool 1,500, B = 32, G = 8, p ~ Beta(0.6, 0.6), to the testbed's 38,400 rollouts (150
    uniform steps): every proof counter is non-zero, and the declared split covers exactly
    the counters the selector reports."""
    n, big_b = 1500, 32
    ctx = ScriptedContext(np.random.default_rng(2).beta(0.6, 0.6, n), batch_size=big_b,
                          group_size=G, seed=4)
    sel = make(name, n, seed=0, **fields)
    k = 0
    while ctx.counters["rollouts"] < 150 * big_b * G:
        k += 1
        step(sel, ctx, k)
    proof, info = selection.proof_counters(name, fields)
    mech = sel.mechanisms()
    assert proof and sorted(proof + info) == sorted(mech)
    assert all(mech[c] > 0 for c in proof), mech
    assert all(isinstance(v, int) for v in mech.values())


def test_declared_counters_follow_the_candidate_ratio():
    for name in NAMES:
        proof, info = selection.proof_counters(name, {"cand_ratio": 1})
        assert not set(proof) & set(info)
        assert "posterior_flips" not in proof and "learnability_decided" not in proof


# ----------------------------------------------------------------------------- checks


@pytest.mark.parametrize("name,field,value,message", [
    ("mopps", "cand_ratio", 0.5,
     "selector.mopps.cand_ratio=0.5 is not allowed: a number >= 1 (candidates per step / B)"),
    ("mopps", "target", 1.5, "selector.mopps.target=1.5 is not allowed: a number in [0, 1] (γ*)"),
    ("mopps", "alpha0", 0.0,
     "selector.mopps.alpha0=0.0 is not allowed: a number > 0 (a Beta prior parameter)"),
    ("mopps", "beta0", -1.0,
     "selector.mopps.beta0=-1.0 is not allowed: a number > 0 (a Beta prior parameter)"),
    ("mopps", "lam", 1.2, "selector.mopps.lam=1.2 is not allowed: a number in [0, 1] (λ)"),
    ("learnability", "cand_ratio", 0,
     "selector.learnability.cand_ratio=0 is not allowed: a number >= 1 (candidates per step / "
     "B)"),
    ("learnability", "n_probe", 1,
     "selector.learnability.n_probe=1 is not allowed: an integer >= 2 (one response gives "
     "p̂(1 - p̂) = 0)"),
    ("learnability", "rule", "softmax",
     "selector.learnability.rule='softmax' is not allowed: one of ['topk', 'proportional']"),
    ("learnability", "reuse_probes", 1,
     "selector.learnability.reuse_probes=1 is not allowed: True or False"),
])
def test_validation_names_the_field(name, field, value, message):
    section = {**selection.defaults(name), field: value}
    with pytest.raises(ValueError) as e:
        selection.validate(name, section)
    assert str(e.value) == message


def test_learnability_probes_longer_than_the_group_are_refused_when_reused():
    sel = make("learnability", 50, n_probe=12, reuse_probes=True)
    with pytest.raises(ValueError, match=r"selector\.learnability\.n_probe=12 is not allowed: "
                       r"an integer in \[2, rl\.group_size=8\]"):
        step(sel, ScriptedContext(np.full(50, 0.5), batch_size=4, group_size=G))


# ----------------------------------------------------------------------------- MoPPS


def test_mopps_beta_cdf_matches_the_binomial_tail():
    # I_x(a, b) = P(Binomial(a + b - 1, x) >= a) for integer a, b
    rng = np.random.default_rng(0)
    for a, b in [(1, 1), (2, 1), (1, 5), (7, 3), (40, 90), (300, 12)]:
        x = rng.random(40)
        n = a + b - 1
        tail = [sum(math.comb(n, j) * v**j * (1 - v) ** (n - j) for j in range(a, n + 1))
                for v in x]
        np.testing.assert_allclose(mopps.beta_cdf(x, a, b), tail, atol=1e-11)
    assert mopps.beta_cdf([0.0, 1.0], 2.5, 0.5).tolist() == [0.0, 1.0]


@pytest.mark.parametrize("lam", [1.0, 0.7, 0.0])
def test_mopps_posterior_is_the_discounted_closed_form(lam):
    # prompt 0: 5 visits with s = 3, 8, 0, 6, 2 successes of 8
    s = [3, 8, 0, 6, 2]
    script = {0: [[1] * k + [0] * (G - k) for k in s]}
    ctx = ScriptedContext(np.full(3, 0.5), batch_size=1, group_size=G, script=script)
    sel = make("mopps", 3, alpha0=2.0, beta0=0.5, lam=lam)
    for _ in s:
        sel.observe(ctx.rollout([0], G))
    m = len(s)
    weights = np.array([lam ** (m - j) for j in range(1, m + 1)])
    assert sel.alpha[0] == pytest.approx(2.0 + weights @ np.array(s), abs=1e-12)
    assert sel.beta[0] == pytest.approx(0.5 + weights @ (G - np.array(s)), abs=1e-12)
    assert sel.alpha[1] == 2.0 and sel.beta[1] == 0.5 and sel.visits.tolist() == [m, 0, 0]
    assert sel.mechanisms()["posterior_updates"] == m


def test_mopps_updates_the_chosen_prompts_from_their_own_rollouts():
    ctx = Logged(np.random.default_rng(1).random(200), batch_size=16, group_size=G, seed=2)
    ctx.log = []
    sel = make("mopps", 200, cand_ratio=4)
    groups = step(sel, ctx)
    assert len(ctx.log) == 1 and ctx.counters["rollouts"] == 16 * G  # no extra rollouts
    idx = np.array([g.index for g in groups])
    wins = np.array([np.count_nonzero(g.outcomes == REWARD_CORRECT) for g in groups])
    np.testing.assert_array_equal(sel.alpha[idx], 1.0 + wins)
    np.testing.assert_array_equal(sel.beta[idx], 1.0 + G - wins)
    untouched = np.setdiff1d(np.arange(200), idx)
    assert np.all(sel.alpha[untouched] == 1.0) and np.all(sel.visits[untouched] == 0)
    m = sel.mechanisms()
    assert m["thompson_draws"] == 64 and m["posterior_updates"] == 16
    assert m["posterior_flips"] == 0  # no candidate carried evidence yet


def test_mopps_prefers_prompts_near_the_target_once_observed():
    # 100 prompts never solved, 100 always, 100 at p = 0.5; B = 16 of 64 candidates per step
    p = np.repeat([0.0, 1.0, 0.5], 100)
    ctx = ScriptedContext(p, batch_size=16, group_size=G, seed=3)
    sel = make("mopps", 300, cand_ratio=4)
    for k in range(1, 41):  # about 8 passes of the candidate stream over the pool
        step(sel, ctx, k)
    mid = extreme = 0
    for k in range(41, 61):
        chosen = np.array([g.index for g in step(sel, ctx, k)])
        mid += int(np.count_nonzero(p[chosen] == 0.5))
        extreme += int(np.count_nonzero(p[chosen] != 0.5))
    # a posterior-blind choice takes a third of its picks at p = 0.5
    assert mid > 4 * extreme, (mid, extreme)
    assert sel.metrics()["zero_var"] < 0.2 and sel.mechanisms()["posterior_flips"] > 0
    # the posterior means of the prompts seen separate the three kinds
    mean, seen = sel.alpha / (sel.alpha + sel.beta), sel.visits > 0
    assert seen[:100].any() and seen[100:200].any()
    assert mean[:100][seen[:100]].max() < 0.35 and mean[100:200][seen[100:200]].min() > 0.65
    assert np.all(np.abs(mean[200:][sel.visits[200:] > 2] - 0.5) < 0.3)


# ----------------------------------------------------------------------------- learnability


@pytest.mark.parametrize("reuse", [False, True])
def test_learnability_probes_are_charged(reuse):
    ctx = Logged(np.random.default_rng(0).random(500), batch_size=10, group_size=G, seed=1)
    ctx.log, ctx.record_calls = [], True
    sel = make("learnability", 500, reuse_probes=reuse)
    groups = step(sel, ctx)
    probe_call, train_call = ctx.calls
    assert len(probe_call[1]) == 40 and probe_call[2] == 4
    assert len(train_call[1]) == 10 and train_call[2] == (G - 4 if reuse else G)
    assert set(train_call[1]) <= set(probe_call[1])
    trained = 10 * (G - 4 if reuse else G)
    assert ctx.counters["rollouts"] == 40 * 4 + trained == sel.metrics()["rollouts"]
    assert all(g.size == G for g in groups)
    m = sel.mechanisms()
    assert m["probe_rollouts"] == 160 and m["probed_prompts"] == 40
    probes = {g.index: g for g in ctx.log[0]}
    if reuse:  # the probes are each group's first responses
        for g in groups:
            assert g.outcomes[:4].tolist() == probes[g.index].outcomes.tolist()


def test_learnability_keeps_the_highest_estimates():
    ctx = Logged(np.random.default_rng(4).beta(0.6, 0.6, 2000), batch_size=32, group_size=G,
                 seed=6)
    ctx.log = []
    sel = make("learnability", 2000)
    true_chosen, true_all = [], []
    for k in range(1, 11):
        groups = step(sel, ctx, k)
        probes = ctx.log[-2]
        score = {g.index: g.pass_rate * (1 - g.pass_rate) for g in probes}
        kept = [g.index for g in groups]
        left = [i for i in score if i not in set(kept)]
        # top-k: no candidate left out scored above a kept one
        assert min(score[i] for i in kept) >= max(score[i] for i in left)
        true_chosen.append(np.mean([ctx.p[i] * (1 - ctx.p[i]) for i in kept]))
        true_all.append(np.mean([ctx.p[i] * (1 - ctx.p[i]) for i in score]))
    # the kept prompts are more learnable under their true p, not only under the probes
    assert np.mean(true_chosen) > np.mean(true_all) + 0.04, (true_chosen, true_all)
    assert sel.mechanisms()["learnability_decided"] > 0


def test_learnability_proportional_draws_follow_the_scores():
    # 200 candidates probed with 4 responses: 100 of p = 0.5 are mostly mixed, 100 of p = 1 never
    p = np.repeat([0.5, 1.0], 100)
    ctx = ScriptedContext(p, batch_size=20, group_size=G, seed=8)
    sel = make("learnability", 200, cand_ratio=10, rule="proportional")
    picks = np.concatenate([[g.index for g in step(sel, ctx, k)] for k in range(1, 11)])
    assert np.all(p[picks] == 0.5)  # a zero score is never drawn while enough score above 0
    m = sel.mechanisms()
    assert m["uniform_fallbacks"] == 0 and m["weighted_draws"] == 200
    assert "learnability_decided" not in m


def test_learnability_falls_back_to_uniform_when_nothing_is_learnable():
    p = np.where(np.arange(400) % 2 == 0, 0.0, 1.0)
    ctx = ScriptedContext(p, batch_size=16, group_size=G, seed=0)
    ctx.record_calls = True
    for rule in ("topk", "proportional"):
        sel = make("learnability", 400, rule=rule)
        for k in range(1, 4):
            groups = step(sel, ctx, k)
            cand = ctx.calls[-2][1]
            kept = [g.index for g in groups]
            assert len(set(kept)) == 16 and set(kept) <= set(cand)
            assert sel.metrics()["uniform_fallback"] == 1.0
        m = sel.mechanisms()
        decisions = "learnability_decided" if rule == "topk" else "weighted_draws"
        assert m["uniform_fallbacks"] == 3 and m[decisions] == 0


# ----------------------------------------------------------------------------- synthetic learner


def small_config(name, *, prompts=2000, steps=20, batch=32):
    c = run.base_config()
    c.selector.name = name
    c.rl.batch_size = batch
    c.sim.num_prompts = prompts
    c.sim.steps = steps
    c.sim.eval_every = 5
    c.sim.eval_per_band = 64
    return c


@pytest.mark.parametrize("name", NAMES)
def test_runs_on_the_synthetic_learner_with_its_mechanism(name):
    res = run.run_sim(small_config(name))
    assert res["stopped"] == "" and res["steps_run"] == 20
    proof, _ = selection.proof_counters(name)
    assert all(res["mechanisms"][c] > 0 for c in proof), res["mechanisms"]
    assert np.isfinite(res["final"]["acc_mean"])
