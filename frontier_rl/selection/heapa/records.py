"""Records of the HeaPA pool: the input row (`Record`), locations, and the packed integer heap
keys. The pool (pool.py) builds on these; nothing here knows the pool.

A heap key is (statistic as a sortable 64-bit pattern, inverted for max-heaps) << 72 |
seq << 32 | handle: one Python int, so heaps hold no tuples and nothing the garbage collector
walks, and ordering is by statistic, then arrival (seq).
"""

from __future__ import annotations

import struct

COLD, LOW, HIGH, ARCHIVE, OUT, FREE = range(6)
LOC_NAMES = ("cold", "low", "high", "archive", "out", "free")
H_MASK = (1 << 32) - 1
SEQ_MASK = (1 << 40) - 1
U64 = (1 << 64) - 1
_TOP = 1 << 63
_pack_d = struct.Struct(">d").pack
_unpack_q = struct.Struct(">Q").unpack
_SORTABLE: dict[float, int] = {}  # statistics repeat (means of G outcomes): memoised


def sortable(x: float) -> int:
    """A 64-bit pattern whose integer order is the order of the float x (-0.0 as 0.0)."""
    b = _SORTABLE.get(x)
    if b is None:
        (b,) = _unpack_q(_pack_d(x + 0.0))
        b = b ^ U64 if b & _TOP else b | _TOP
        if len(_SORTABLE) < 65536:
            _SORTABLE[x] = b
    return b


def min_key(stat: float, seq: int, h: int) -> int:
    return (sortable(stat) << 72) | (seq << 32) | h


def max_key(stat: float, seq: int, h: int) -> int:
    return ((U64 - sortable(stat)) << 72) | (seq << 32) | h


def opt_float(v: float) -> float | None:
    return None if v != v else v


class Record:
    """One prompt-answer pair, as handed to `add` (and stored by the PS pool as is).

    `text`/`answer` are None for seeds (they live in ctx.prompts, at `index`); augmented
    records carry their own and get an index when first rolled out."""

    __slots__ = ("rid", "text", "answer", "stat", "est", "aug", "parent", "d", "step", "index",
                 "loc", "seq", "pos")

    def __init__(self, rid: str, *, text: str | None = None, answer: str | None = None,
                 stat: float | None = None, est: float | None = None, aug: bool = False,
                 parent: str | None = None, d: float = 1.0, step: int = -1, index: int = -1):
        self.rid = rid
        self.text = text
        self.answer = answer
        self.stat = stat  # pool statistic: mean shaped reward of the last verified group
        self.est = est  # estimated statistic (augmented); mirrors stat once that is set
        self.aug = aug  # source: augmented (True) or seed
        self.parent = parent  # record_id of the parent (lineage), None for seeds
        self.d = d  # policy difficulty factor d_c, clamped to [d_min, d_max]; 1.0 for seeds
        self.step = step  # step last trained (-1: never)
        self.index = index  # index into ctx.prompts (-1: not registered with the context)
        self.loc = OUT
        self.seq = 0
        self.pos = -1  # PS sum-tree slot

    def to_list(self) -> list:
        return [self.rid, self.text, self.answer, self.stat, self.est, self.aug, self.parent,
                self.d, self.step, -1 if self.aug else self.index, self.loc, self.seq]

    @classmethod
    def from_list(cls, row: list) -> Record:
        rid, text, answer, stat, est, aug, parent, d, step, index, loc, seq = row
        rec = cls(rid, text=text, answer=answer, stat=stat, est=est, aug=bool(aug),
                  parent=parent, d=float(d), step=int(step), index=int(index))
        rec.loc, rec.seq = int(loc), int(seq)
        return rec
