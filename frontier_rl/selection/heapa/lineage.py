"""HeaPA's lineage graph and bottom-up re-estimation of pool statistics (HeaPA, arXiv 2601.22448;
the released code's ChildAgg / PathAgg refresh).

Nodes are record ids; each augmented record adds an edge parent -> child. The refresh visits
the internal nodes (those with children) in order of increasing depth (depth(leaf) = 0,
depth(u) = 1 + max over children), so children are refreshed before their parents:

    active(u) = stat(u) if finite, else est(u), else undefined
    v_c       = the value refreshed in this pass if c was refreshed, else active(c)
    ~v_c      = v_c / d_c if v_c >= 0 else v_c * d_c          (d_c: the child's difficulty;
                                                               1.0 if missing or invalid)
    ChildAgg  : a_u = mean_c ~v_c
    PathAgg   : a_u = sum_c w_c ~v_c, w_c = l(c)^(1/T) / sum l^(1/T), with leaf counts
                l(leaf) = 1, l(u) = sum_c max(1, l(c))            (T = path_weight_temp)
    new(u)    = clip(blend * active(u) + (1 - blend) * a_u, -1, 1)   (clip(a_u) if undefined)

Leaves never change. Only nodes with children are visited, so a refresh costs O(edges), not
O(pool). Evicted nodes are removed from the graph (their children become roots; an evicted
child stops contributing). A cycle (impossible for ids made here, but a loaded state could
hold one) is broken at the back edge found by the depth search: each node is still refreshed
exactly once and `cycle` is reported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

MODES = ("none", "child", "path")


def active(rec) -> float | None:
    for v in (rec.stat, rec.est):
        if v is not None and math.isfinite(v):
            return float(v)
    return None


def attenuate(v: float, d: float) -> float:
    """A child's value seen from its parent: harder children (d > 1) pull toward lower scores."""
    if not (d is not None and math.isfinite(d) and d > 0):
        d = 1.0
    return v / d if v >= 0 else v * d


class Lineage:
    """parent id -> tuple of child ids. Tuples of strings are not walked by the garbage
    collector, so a graph over 10^6 records adds no collection pauses."""

    def __init__(self):
        self.children: dict[str, tuple[str, ...]] = {}

    def add(self, rid: str, parent: str | None) -> None:
        if parent is not None:
            self.children[parent] = self.children.get(parent, ()) + (rid,)

    def remove(self, rid: str, parent: str | None) -> None:
        """Drops an evicted node: its out-edges and its edge from its parent."""
        self.children.pop(rid, None)
        kids = self.children.get(parent) if parent is not None else None
        if kids is not None:
            kids = tuple(k for k in kids if k != rid)
            if kids:
                self.children[parent] = kids
            else:
                del self.children[parent]

    def rebuild(self, records: Mapping) -> None:
        """Re-derives the edges from the records' parent fields (in record order)."""
        self.children = {}
        for rid, rec in records.items():
            if rec.parent is not None and rec.parent in records:
                self.add(rid, rec.parent)

    @property
    def num_edges(self) -> int:
        return sum(len(k) for k in self.children.values())

    def depths(self, records: Mapping) -> tuple[dict[str, int], bool]:
        """Depth of every live internal node (iterative DFS; back edges ignored)."""
        depth: dict[str, int] = {}
        state: dict[str, int] = {}  # 1 = on the stack, 2 = done
        cycle = False
        for root in self.children:
            if root in state or root not in records:
                continue
            state[root] = 1
            stack = [(root, iter(self.children[root]))]
            while stack:
                u, it = stack[-1]
                for c in it:
                    if c not in self.children or c not in records:
                        continue
                    st = state.get(c)
                    if st is None:
                        state[c] = 1
                        stack.append((c, iter(self.children[c])))
                        break
                    if st == 1:
                        cycle = True
                else:
                    stack.pop()
                    state[u] = 2
                    depth[u] = 1 + max((depth.get(c, 0) for c in self.children[u]
                                        if c in records), default=0)
        return depth, cycle

    def refresh(self, records: Mapping, *, mode: str = "path", temp: float = 1.0,
                blend: float = 0.5, lo: float = -1.0, hi: float = 1.0
                ) -> tuple[dict[str, float], dict[str, float]]:
        """Returns ({record_id: new value} for refreshed internal nodes, info)."""
        if mode not in MODES:
            raise ValueError(f"refresh mode {mode!r} is not one of {MODES}")
        if mode == "none" or not self.children:
            return {}, {"nodes": 0.0, "updated": 0.0, "cycle": 0.0, "depth": 0.0}
        depth, cycle = self.depths(records)
        order = sorted(depth, key=depth.__getitem__)  # stable: ties keep graph order
        new: dict[str, float] = {}
        leaves: dict[str, float] = {}
        inv_t = 1.0 / temp
        for u in order:
            kids = [c for c in self.children[u] if c in records]
            leaves[u] = float(sum(max(1.0, leaves.get(c, 1.0)) for c in kids))
            vals, weights = [], []
            for c in kids:
                v = new.get(c)
                if v is None:
                    v = active(records[c])
                if v is None:
                    continue
                vals.append(attenuate(v, records[c].d))
                weights.append(max(1.0, leaves.get(c, 1.0)) ** inv_t)
            if not vals:
                continue
            if mode == "child":
                agg = sum(vals) / len(vals)
            else:
                agg = sum(w * v for w, v in zip(weights, vals, strict=True)) / sum(weights)
            prev = active(records[u])
            value = agg if prev is None else blend * prev + (1.0 - blend) * agg
            new[u] = min(hi, max(lo, value))
        info = {"nodes": float(len(order)), "updated": float(len(new)),
                "cycle": float(cycle), "depth": float(max(depth.values(), default=0))}
        return new, info
