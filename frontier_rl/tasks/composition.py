"""The training pool's composition by the starting policy's pass rate (`config.pool.*`).

Whether prompt selection can pay depends on how much of the pool the starting policy already
solves, cannot solve, or sits at the frontier of: with every prompt at the frontier there is
nothing to select, with none there is nothing to learn. The papers' corpora start with about
half their groups at zero variance. `pool.composition` fixes the shares instead of leaving
them to the task generator:

    pool.composition = "solved=0.25,unsolved=0.25,frontier=0.5"
    pool.size = 1500           # prompts kept (the task's train split is the candidates)
    pool.k = 8                 # samples per candidate

Before the first step, every candidate of the task's train split is sampled k times under the
starting policy (uncharged, like the warm start: it happens before the budget's first
rollout); a prompt is *solved* when all k are correct, *unsolved* when none is, *frontier*
otherwise. The pool keeps round(share x size) prompts of each class, drawn by the run's seed,
in candidate order. Ask the task for enough candidates (task.train_size); a class with too few
is an error naming it and the counts measured.

The choice is written to DIR/pool_composition.json (the ids kept, the measured shares of the
candidates and of the pool) and read back on a resume, so a resumed run trains on the same
pool without measuring again; the shares are also recorded at step 0 (`pool/*`). With
`pool.composition = ""` (the default) the task's pool is used as generated, and its
composition is stated by the report from the first step's rolled-out groups.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

from frontier_rl.run import statefile

CLASSES = ("solved", "unsolved", "frontier")
FILE = "pool_composition.json"


def parse(spec: str) -> dict[str, float]:
    """"solved=0.25,unsolved=0.25,frontier=0.5" -> shares (each class named once, summing to
    1); ValueError naming pool.composition otherwise."""
    shares: dict[str, float] = {}
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        name, _, value = part.partition("=")
        name = name.strip()
        if name not in CLASSES or name in shares:
            raise ValueError(f"pool.composition={spec!r}: {name!r} is not one of {CLASSES} "
                             "(each at most once)")
        try:
            shares[name] = float(value)
        except ValueError:
            raise ValueError(f"pool.composition={spec!r}: {part!r} is not class=share") from None
        if not 0.0 <= shares[name] <= 1.0:
            raise ValueError(f"pool.composition={spec!r}: share {shares[name]} of {name} is "
                             "not in [0, 1]")
    if not shares or abs(sum(shares.values()) - 1.0) > 1e-6:
        raise ValueError(f"pool.composition={spec!r}: the shares must sum to 1")
    return {c: shares.get(c, 0.0) for c in CLASSES}


def classify(rates: np.ndarray) -> np.ndarray:
    """Class index (into CLASSES) of each measured pass rate."""
    rates = np.asarray(rates, np.float64)
    return np.where(rates == 1.0, 0, np.where(rates == 0.0, 1, 2))


def counts(shares: dict[str, float], size: int) -> dict[str, int]:
    """Prompts per class: round(share x size), the rounding remainder to the largest share."""
    out = {c: int(round(shares[c] * size)) for c in CLASSES}
    out[max(CLASSES, key=lambda c: shares[c])] += size - sum(out.values())
    return out


def choose(rates: np.ndarray, shares: dict[str, float], size: int, seed: int) -> np.ndarray:
    """Indices (into the candidates, ascending) of a pool of `size` with the given shares."""
    cls = classify(rates)
    want = counts(shares, size)
    rng = np.random.default_rng([seed, 0xC0])
    keep = []
    for i, c in enumerate(CLASSES):
        have = np.flatnonzero(cls == i)
        if want[c] > have.size:
            measured = ", ".join(f"{n} {int(np.sum(cls == j))}" for j, n in enumerate(CLASSES))
            raise ValueError(
                f"pool.composition asks for {want[c]} {c} prompts of {size} (pool.size) but the "
                f"starting policy's measurement of the {rates.size} candidates found "
                f"{have.size} ({measured}): give the task more candidates (task.train_size) "
                "or change pool.composition")
        keep.append(rng.choice(have, size=want[c], replace=False))
    return np.sort(np.concatenate(keep)) if keep else np.zeros(0, np.int64)


def shares_of(rates: np.ndarray) -> dict[str, float]:
    cls = classify(rates)
    n = max(cls.size, 1)
    return {c: float(np.sum(cls == i)) / n for i, c in enumerate(CLASSES)}


def apply(pool_cfg, prompts: Sequence, measure: Callable[[list[int], int], np.ndarray],
          seed: int, workdir: str, say: Callable[[str], None] = print,
          primary: bool = True) -> tuple[list, dict[str, float]]:
    """The training pool `pool_cfg` asks for, from the candidates `prompts`, and the metrics to
    record (`pool/*`). `measure(indices, k)` samples the starting policy (the run's context).
    Reads DIR/pool_composition.json when a previous start of this run wrote one."""
    if not pool_cfg.composition:
        return list(prompts), {}
    shares = parse(pool_cfg.composition)
    path = os.path.join(workdir, FILE)
    if os.path.exists(path):
        saved = statefile.read_json(
            path, "the pool composition file",
            "delete it to measure the pool again (the same config and seed choose the same "
            "prompts)", keys=("composition", "k", "ids"))
        if saved.get("composition") != pool_cfg.composition or saved.get("k") != pool_cfg.k:
            raise ValueError(f"{path} was written for pool.composition="
                             f"{saved.get('composition')!r}, k={saved.get('k')}; this run asks "
                             f"for {pool_cfg.composition!r}, k={pool_cfg.k}: use a new workdir")
        by_id = {p.id: p for p in prompts}
        missing = [i for i in saved["ids"] if i not in by_id]
        if missing:
            raise ValueError(f"{path} names {len(missing)} prompts the task no longer has (e.g. "
                             f"{missing[0]!r}): the task changed since this run started")
        say(f"pool: {len(saved['ids'])} prompts as composed at the start ({path})")
        return [by_id[i] for i in saved["ids"]], _metrics(saved)
    size = pool_cfg.size or len(prompts)
    say(f"pool: measuring {len(prompts)} candidates x {pool_cfg.k} samples under the starting "
        f"policy for pool.composition={pool_cfg.composition!r} ({size} kept)")
    rates = np.asarray(measure(list(range(len(prompts))), pool_cfg.k), np.float64)
    keep = choose(rates, shares, size, seed)
    record = {"composition": pool_cfg.composition, "k": pool_cfg.k, "size": int(size),
              "candidates": len(prompts), "candidate_shares": shares_of(rates),
              "pool_shares": shares_of(rates[keep]),
              "ids": [prompts[int(i)].id for i in keep]}
    if primary:
        statefile.write_json(path, record)
    say("pool: candidates " + ", ".join(f"{c} {v:.2f}" for c, v in
                                          record["candidate_shares"].items())
        + "; kept " + ", ".join(f"{c} {v:.2f}" for c, v in record["pool_shares"].items()))
    return [prompts[int(i)] for i in keep], _metrics(record)


def _metrics(record: dict) -> dict[str, float]:
    out = {f"pool/{c}": v for c, v in record["pool_shares"].items()}
    out.update({f"pool/candidate_{c}": v for c, v in record["candidate_shares"].items()})
    out["pool/candidates"] = float(record["candidates"])
    return out


def config_section():
    """`pool`: the training pool's composition by the starting policy's pass rate:
    "solved=0.25,unsolved=0.25,frontier=0.5" keeps pool.size prompts of the task's train split
    in these shares, each candidate measured with pool.k samples before the first step.
    "" = the task's pool as generated."""
    from frontier_rl.run import fields

    def shares(cfg) -> None:
        if cfg.pool.composition:
            fields.as_config_error(lambda: parse(cfg.pool.composition))

    return (fields.Section("pool", config_section.__doc__, optional=True)
            .field("composition", "")
            .field("size", 0, fields.nonneg_int, "an integer >= 0")  # 0 = every candidate
            .field("k", 8, lambda x: fields.pos_int(x) and x >= 2, "an integer >= 2")
            .rule(shares))
