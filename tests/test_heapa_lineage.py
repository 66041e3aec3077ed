"""Lineage re-estimation against hand-computed values (ChildAgg, PathAgg), cycles, evictions."""

import pytest

from frontier_rl.selection.heapa.lineage import Lineage, attenuate
from frontier_rl.selection.heapa.pool import Record


def graph():
    """R -> {A, B}; A -> {A1, A2}. A2 is cold (no stat) so its estimate stands in."""
    recs = {
        "R": Record("R", stat=0.2),
        "A": Record("A", stat=0.6, parent="R", d=1.2),
        "B": Record("B", stat=-0.4, parent="R", d=0.8),
        "A1": Record("A1", stat=0.9, parent="A", d=1.25),
        "A2": Record("A2", est=-0.5, parent="A", d=1.0),
    }
    lin = Lineage()
    lin.rebuild(recs)
    return recs, lin


def test_attenuation_pushes_harder_children_down():
    assert attenuate(0.9, 1.25) == pytest.approx(0.72)
    assert attenuate(-0.5, 1.2) == pytest.approx(-0.6)
    assert attenuate(0.5, float("nan")) == 0.5  # invalid d -> 1.0


def test_child_aggregation_by_hand():
    recs, lin = graph()
    new, info = lin.refresh(recs, mode="child")
    a_A = (0.9 / 1.25 + -0.5 * 1.0) / 2  # 0.11
    new_A = 0.5 * 0.6 + 0.5 * a_A  # 0.355
    a_R = (new_A / 1.2 + -0.4 * 0.8) / 2  # A's refreshed value feeds R
    assert new["A"] == pytest.approx(0.355)
    assert new["R"] == pytest.approx(0.5 * 0.2 + 0.5 * a_R)
    assert new["R"] == pytest.approx(0.0939583, abs=1e-7)
    assert set(new) == {"A", "R"}  # leaves never change
    assert info["depth"] == 2 and info["cycle"] == 0


def test_path_aggregation_by_hand():
    recs, lin = graph()
    new, _ = lin.refresh(recs, mode="path")
    assert new["A"] == pytest.approx(0.355)  # equal leaf counts: same as ChildAgg
    # leaf counts l(A) = 2, l(B) = 1 -> weights 2/3 and 1/3
    a_R = (2 / 3) * (0.355 / 1.2) + (1 / 3) * (-0.32)
    assert new["R"] == pytest.approx(0.5 * 0.2 + 0.5 * a_R)
    assert new["R"] == pytest.approx(0.1452778, abs=1e-7)
    new_t2, _ = lin.refresh(recs, mode="path", temp=2.0)  # w ~ l^(1/T)
    w = 2 ** 0.5
    a_R2 = (w * (0.355 / 1.2) + 1 * (-0.32)) / (w + 1)
    assert new_t2["R"] == pytest.approx(0.1 + 0.5 * a_R2)


def test_blend_clip_and_undefined_parent():
    recs = {"P": Record("P", stat=1.0), "Q": Record("Q"),
            "c1": Record("c1", stat=1.0, parent="P", d=0.75),
            "c2": Record("c2", stat=0.4, parent="Q", d=2.0)}
    lin = Lineage()
    lin.rebuild(recs)
    new, _ = lin.refresh(recs, mode="child")
    assert new["P"] == 1.0  # 0.5 + 0.5 * 1.333 clipped to 1
    assert new["Q"] == pytest.approx(0.2)  # no value of its own: the aggregate alone


def test_evicted_nodes_are_skipped():
    recs, lin = graph()
    lin.remove("A1", "A")
    del recs["A1"]
    new, _ = lin.refresh(recs, mode="child")
    assert new["A"] == pytest.approx(0.5 * 0.6 + 0.5 * -0.5)
    lin.remove("A", "R")  # A's children become roots; R keeps B only
    del recs["A"]
    new, _ = lin.refresh(recs, mode="child")
    assert set(new) == {"R"}
    assert new["R"] == pytest.approx(0.1 + 0.5 * -0.32)
    assert lin.children == {"R": ("B",)}  # A2's edge went with A


def test_cycles_terminate_and_are_reported():
    recs = {"X": Record("X", stat=0.5, parent="Y"), "Y": Record("Y", stat=-0.5, parent="X"),
            "Z": Record("Z", stat=0.3, parent="X")}
    lin = Lineage()
    lin.rebuild(recs)
    new, info = lin.refresh(recs, mode="path")
    assert info["cycle"] == 1 and set(new) == {"X", "Y"}
    assert all(-1 <= v <= 1 for v in new.values())


def test_none_mode_and_rebuild_matches_incremental():
    recs, lin = graph()
    assert lin.refresh(recs, mode="none")[0] == {}
    inc = Lineage()
    for rid, rec in recs.items():
        inc.add(rid, rec.parent)
    assert inc.children == lin.children
    with pytest.raises(ValueError, match="refresh mode"):
        lin.refresh(recs, mode="bogus")
