"""Mechanism counters (`Selector.mechanisms`): every selector, on the scripted context, shows
each counter its configuration reports moving, the totals survive a checkpoint round trip, and
counting changed no selection (golden digests of the batches, taken before the counters
existed)."""

import copy
import hashlib
import json

import numpy as np
import pytest

from frontier_rl import selection
from frontier_rl.selection.scripted import ScriptedContext

G = 8
HEAPA = {"teacher_workers": 0}
HEAPA_AUG = ["cold_draws", "boundary_draws", "boundary_selective", "evicted",
             "evicted_after_fill", "recycled", "lineage_refreshes", "parents_refreshed",
             "children_rolled_out", "children_trained"]

# name, selector fields, expected counters. The pool (300 prompts, B = 32) is passed several
# times in 24 steps; a quarter of the prompts are always solved and a quarter never, so the
# zero-variance filters, skips and top-ups have work; HeaPA-family capacities bind.
CASES = {
    "uniform": ("uniform", {}, ["pool_passes"]),
    "ds": ("ds", {"max_num_gen_batches": 0}, ["pool_passes", "topup_rounds",
                                               "groups_discarded"]),
    "greso": ("greso", {}, ["pool_passes", "skipped", "topup_rounds", "p_easy_moves",
                            "p_hard_moves"]),
    "hive": ("hive", {}, ["pool_passes", "stage1_rejected", "stage2_dropped", "topup_rounds",
                          "p_easy_moves", "p_hard_moves"]),
    "pcl": ("pcl", {}, ["pool_passes", "value_selected", "value_decided", "value_fitted"]),
    "prefilter": ("prefilter", {"n": 8}, ["offline_rollouts", "prefiltered_out",
                                          "pool_passes"]),
    "reinforce_ada": ("reinforce_ada", {}, ["pool_passes", "extra_rounds",
                                            "resampled_prompts"]),
    "heapa": ("heapa", {**HEAPA, "capacity": 300, "recycle_archive_max": 64},
              HEAPA_AUG),
    "heapa_child": ("heapa", {**HEAPA, "refresh": "child", "capacity": 300,
                              "recycle_archive_max": 64}, HEAPA_AUG),
    "heapa_noisy_teacher": ("heapa", {**HEAPA, "capacity": 300, "recycle_archive_max": 64,
                                      "teacher_error_rate": 0.3},
                            HEAPA_AUG + ["teacher_wrong_labels"]),
    "heapa_heap_only": ("heapa", {**HEAPA, "augment": False, "capacity": 280,
                                  "recycle_archive_max": 64},
                        ["cold_draws", "boundary_draws", "boundary_selective", "evicted",
                         "recycled"]),
    "heapa_aug_only": ("heapa", {**HEAPA, "sampling": "uniform", "capacity": 300,
                                 "recycle_archive_max": 64},
                       ["cold_draws", "uniform_draws", "uniform_selective", "evicted",
                        "evicted_after_fill", "recycled", "lineage_refreshes",
                        "parents_refreshed", "children_rolled_out", "children_trained"]),
    "heapa_dapo": ("heapa", {**HEAPA, "filter_groups": True, "capacity": 300,
                             "recycle_archive_max": 64},
                   HEAPA_AUG + ["topup_rounds", "groups_discarded"]),
    "ps": ("ps", {**HEAPA, "capacity": 280}, ["cold_draws", "priority_draws",
                                               "priority_selective", "evicted"]),
    "ps_aug": ("ps", {**HEAPA, "augment": True, "aug_entry": "heap", "capacity": 300,
                      "aug_require_capacity": False},
               ["cold_draws", "priority_draws", "priority_selective", "evicted",
                "evicted_after_fill", "children_rolled_out", "children_trained"]),
    "heapa_hive": ("heapa_hive", {**HEAPA, "capacity": 300, "recycle_archive_max": 64},
                   HEAPA_AUG + ["stage2_dropped"]),
}
N, B, STEPS = 300, 32, 24


def context(seed=1):
    p = np.random.default_rng(seed).permutation(np.r_[np.zeros(75), np.ones(75),
                                                      np.linspace(0.1, 0.9, 150)])
    return ScriptedContext(p, batch_size=B, group_size=G, seed=seed)


def run(sel, ctx, first, last):
    for k in range(first, last + 1):
        ctx.begin_step(k)
        groups = sel.build_batch(ctx)
        sel.after_update(ctx, groups)


def build(case):
    name, fields, _ = CASES[case]
    return selection.make(name, {name: dict(fields)}, N, seed=0)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_reported_counter_moves_and_survives_a_checkpoint(case):
    want = CASES[case][2]
    sel, ctx = build(case), context()
    run(sel, ctx, 1, STEPS)
    mech = sel.mechanisms()
    assert sorted(mech) == sorted(want)
    zero = [k for k, v in mech.items() if v <= 0]
    assert not zero, f"{case}: counters still at 0: {zero} ({mech})"
    assert all(isinstance(v, int) for v in mech.values())

    state = json.loads(json.dumps(sel.state_dict()))
    twin = build(case)
    twin.load_state_dict(state)
    assert twin.mechanisms() == mech
    ctx2 = copy.deepcopy(ctx)
    run(sel, ctx, STEPS + 1, STEPS + 3)
    run(twin, ctx2, STEPS + 1, STEPS + 3)
    after = sel.mechanisms()
    assert twin.mechanisms() == after  # the resumed run continues the same totals
    assert all(after[k] >= mech[k] for k in mech)  # cumulative: never decrease


@pytest.mark.parametrize("case", ["ds", "greso", "hive", "pcl", "reinforce_ada", "heapa",
                                  "ps_aug"])
def test_a_checkpoint_without_counters_loads_them_at_zero(case):
    sel, ctx = build(case), context()
    run(sel, ctx, 1, 6)
    state = json.loads(json.dumps(sel.state_dict()))
    del state["mechanisms"]  # written before the counters existed
    twin = build(case)
    twin.load_state_dict(state)
    derived = {"pool_passes", "evicted", "recycled", "parents_refreshed"}  # in other state
    assert all(v == 0 for k, v in twin.mechanisms().items() if k not in derived)
    assert {k: v for k, v in twin.mechanisms().items() if k in derived} == {
        k: v for k, v in sel.mechanisms().items() if k in derived}


def test_counts_against_the_context():
    """Counters that the context can see agree with what it saw."""
    sel, ctx = build("ds"), context()
    ctx.record_calls = True
    run(sel, ctx, 1, 5)
    calls = [c for c in ctx.calls if c[0] == "rollout"]
    assert sel.mechanisms()["topup_rounds"] == len(calls) - 5
    rolled = sum(len(c[1]) for c in calls)
    assert sel.mechanisms()["pool_passes"] == rolled // N
    sel, ctx = build("uniform"), context()
    run(sel, ctx, 1, 19)  # 19 * 32 = 608 prompts: two whole passes of 300
    assert sel.mechanisms() == {"pool_passes": 2}
    sel, ctx = build("prefilter"), context()
    run(sel, ctx, 1, 1)
    m = sel.mechanisms()
    assert m["offline_rollouts"] == N * 8
    # 75 always-solved and 75 never-solved prompts are certainly filtered out
    assert m["prefiltered_out"] == N - sel.kept.size >= 150


# ----------------------------------------------------------------------------- declarations


@pytest.mark.parametrize("case", sorted(CASES))
def test_declared_counters_split_the_reported_ones(case):
    """Each selector's `proof_counters` splits exactly the counters it reports under that
    configuration into proof and information (selection/mechanisms.py)."""
    name, fields, want = CASES[case]
    proof, info = selection.proof_counters(name, fields)
    assert proof and not set(proof) & set(info), (proof, info)
    assert sorted(proof + info) == sorted(want)


@pytest.mark.parametrize("name", selection.names())
def test_every_registered_selector_declares_its_counters(name):
    proof, info = selection.proof_counters(name)  # the registered defaults
    assert all(isinstance(m, str) for m in proof + info) and not set(proof) & set(info)
    if selection.is_control(name):  # a control arm has no method's mechanism to prove
        assert (proof, info) == ([], [])
        return
    fields = {"teacher_workers": 0} if "teacher_workers" in selection.defaults(name) else {}
    sel = selection.make(name, {name: fields}, N, seed=0)
    assert proof and sorted(proof + info) == sorted(sel.mechanisms())


def test_a_selector_without_declared_counters_is_refused():
    class Bare:
        def __init__(self, cfg, *, num_prompts, seed):
            pass

    with pytest.raises(TypeError, match="'bare' declares no proof counters"):
        selection.register("bare")(Bare)
    assert "bare" not in selection.names()


# ----------------------------------------------------------------------------- golden batches

# sha256 (first 16 hex digits) of the prompt ids of 12 steps, taken with the code as it was
# before the counters were added; the counters must not move any selection or RNG stream.
# hive and greso run at B = 256, where b_min(B) is the paper's 64; pcl with its bucket prior,
# which was the default then.
GOLDEN = {
    "uniform": ("uniform", {}, "04da920db6c5d9fc"),
    "ds": ("ds", {"max_num_gen_batches": 0}, "81286c3a956b4ebd"),
    "greso": ("greso", {"skip_first_epoch": False}, "84962fd0fe56ea3f"),
    "hive": ("hive", {"skip_first_epoch": False}, "87decfdc7577f1eb"),
    "pcl": ("pcl", {"bucket_prior": True}, "8c11c1cf6c19e192"),
    "prefilter": ("prefilter", {"pool_limit": 1000}, "609ea2b1e4aad030"),
    "reinforce_ada": ("reinforce_ada", {}, "04da920db6c5d9fc"),
    "heapa": ("heapa", {**HEAPA, "recycle_archive_max": 512, "capacity": 2200},
              "93ce4154a04c50bd"),
    "heapa_child": ("heapa", {**HEAPA, "refresh": "child", "recycle_archive_max": 512},
                    "ff96993182c62299"),
    "heapa_heap_only": ("heapa", {**HEAPA, "augment": False, "recycle_archive_max": 512},
                        "a3e32100ea0a6d8e"),
    "heapa_aug_only": ("heapa", {**HEAPA, "sampling": "uniform", "recycle_archive_max": 512},
                       "62d7ba54b7e135a3"),
    "heapa_dapo": ("heapa", {**HEAPA, "filter_groups": True, "recycle_archive_max": 512},
                   "23fcb4b3b29a59c6"),
    "ps": ("ps", HEAPA, "a76da3a05cc8cf2c"),
    "ps_aug": ("ps", {**HEAPA, "augment": True, "aug_entry": "heap"}, "5c0952d29001602b"),
    "heapa_hive": ("heapa_hive", {**HEAPA, "recycle_archive_max": 512}, "8b4b8c90c018ed17"),
}


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_counting_changes_no_selection(case):
    name, fields, digest = GOLDEN[case]
    n = 1500
    sel = selection.make(name, {name: dict(fields)}, n, seed=3)
    ctx = ScriptedContext(np.random.default_rng(11).beta(0.6, 0.6, n), batch_size=256,
                          group_size=G, seed=5)
    batches = []
    for k in range(1, 13):
        ctx.begin_step(k)
        groups = sel.build_batch(ctx)
        sel.after_update(ctx, groups)
        batches.append([g.prompt_id for g in groups])
    assert hashlib.sha256(json.dumps(batches).encode()).hexdigest()[:16] == digest
    assert any(sel.mechanisms().values())
