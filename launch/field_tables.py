"""Renders the tables of docs/results/superseded/field.md from the comparisons' results files.

  python launch/field_tables.py docs/results/superseded/field.results.json.gz \
      docs/results/superseded/field_pflops.results.json.gz

`field` is `compare_arith.py:field` (every arm to 38,400 rollouts), `field_pflops` the same arms
rerun from the same warm start to the PFLOPs uniform spent there (`:field_pflops`). Prints
markdown: each arm against uniform with its share of the headroom and its proof counters per
seed, the same runs re-read at matched rollouts, generated tokens and PFLOPs, the rerun at
matched PFLOPs, and one run's three FLOPs counts side by side.
"""

from __future__ import annotations

import gzip
import json
import sys

from frontier_rl.experiment import controls_report, report, table
from frontier_rl.experiment.evalcells import by_method, paired, primary


def load(path: str) -> dict:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def arms_table(results: dict) -> str:
    """Each arm against the reference on the primary bucket: steps, rollouts, the paired
    difference with its verdict and Holm-adjusted p, the share of the headroom, and every
    proof counter's value per seed."""
    ref, metric = results["target_method"], primary(results)
    by, tab = by_method(results), table.of(results)
    shares = controls_report.headroom_shares(results)
    fam = {x["name"]: x for x in report.family(results) if x["kind"] == "method"}
    lines = [f"| arm | steps | rollouts | vs {ref} on {metric} [95% CI] | verdict | Holm p | "
             "share of the headroom [95% Fieller] | proof counters, seeds "
             f"{', '.join(str(s) for s in results['seeds'])} |", "|---" * 8 + "|"]
    for m, rs in by.items():
        if m == ref or not rs or m in results.get("controls", {}):
            continue
        d = paired(tab, m, ref, metric)
        need = results["mechanisms_required"].get(m, [])
        counters = "; ".join(
            f"{c} " + "/".join(f"{results['mechanisms'][m][c]['per_seed'].get(str(s), 0):,}"
                               for s in results["seeds"]) for c in need)
        p = fam.get(m, {}).get("p_holm")
        lines.append(
            f"| {m} | {report._fmt([r['steps'] for r in rs], 0)} | "
            f"{report._fmt([r['rollouts'] for r in rs], 0)} | {d.fmt(signed=True)} | "
            f"{controls_report.holm_verdict(d, fam.get(m))} | {'—' if p is None else f'{p:.3f}'} | "
            f"{controls_report.share_text(shares[m], short=True) if m in shares else '—'} | "
            f"{counters} |")
    return "\n".join(lines)


def one_run_flops(results: dict, name: str) -> str:
    """The three FLOPs counts of one run (method-seed), each program kind summed."""
    r = next(x for x in results["runs"] if f"{x['method']}-s{x['seed']}" == name)
    return ("| run | PFLOPs, XLA's cost analysis | PFLOPs, 2N/6N formula | PFLOPs, HeaPA's "
            "convention | cost analysis / formula | HeaPA / formula |\n|---|---|---|---|---|---|\n"
            f"| {name} | {r['pflops']:.6f} | {r['pflops_formula']:.6f} | "
            f"{r['pflops_heapa']:.6f} | {r['pflops'] / r['pflops_formula']:.3f} | "
            f"{r['pflops_heapa'] / r['pflops_formula']:.3f} |")


def verdicts(results: dict) -> dict[str, str]:
    """Each arm's verdict against the reference on the primary bucket."""
    by, ref, metric = by_method(results), results["target_method"], primary(results)
    tab = table.of(results)
    return {m: report.stats.verdict(paired(tab, m, ref, metric)) for m, rs in by.items()
            if m != ref and rs}


SHORT = {"not distinguishable at this budget": "not distinguishable"}


def findings(field: dict, rerun: dict | None) -> str:
    """Where each arm's verdict changes with the budget, in words, from the tables' numbers."""
    at = {"rollouts": verdicts(field)}
    at["tokens (re-read)"] = {row["method"]: row["verdict"]
                              for row in report.matched_rows(field, "tokens")}
    at["PFLOPs (re-read at the smaller spend)"] = {
        row["method"]: row["verdict"] for row in report.matched_rows(field, "pflops")}
    if rerun is not None:
        at["PFLOPs (rerun to uniform's spend)"] = verdicts(rerun)
    lines = []
    for m in at["rollouts"]:
        seen = {budget: v.get(m) for budget, v in at.items() if v.get(m)}
        word = "changes" if len(set(seen.values())) > 1 else "holds"
        lines.append(f"- `{m}`: the verdict {word} with the budget: "
                     + "; ".join(f"{SHORT.get(v, v)} at matched {b}" for b, v in seen.items())
                     + ".")
    return "\n".join(lines)


HEADER = """# The field's 2026 baselines on the testbed

Rendered by `launch/docs.sh` (launch/field_tables.py) from the two comparisons' results
files; do not edit by hand. `field` is
`frontier-rl compare --config=configs/compare_arith.py:field --workdir=runs/compare` (every arm
to 38,400 rollouts), `field_pflops` is `frontier-rl compare
--config=configs/compare_arith.py:field_pflops --workdir=runs/field_pflops` (the same arms rerun
from the same cached warm start, each to the 0.00232 PFLOPs uniform spent in `field`). Both on 2
CPU cores, seeds 0, 1, 2; each file's `report.md` is beside it. The confirmatory family of each
comparison is every arm against uniform (Holm over all of them, `compare.confirmatory = "all"`),
so a larger family raises each p-value: HIVE's and HeaPA's Holm p are larger here than in the
default comparison of four arms.

Controls read against the PFLOPs: the positive control's candidate rollouts are uncharged
(a control, `selection/oracle.py`), so at matched PFLOPs it is no longer at uniform's updates
(it takes more steps); its headroom is still the yardstick of what selection over the pool
buys at that spend. The re-read reads both runs of a pair at the smaller of their final spends
(for PFLOPs: uniform read at the method's, about 60% of its run, before its late decline at this
learning rate); the rerun gives every arm uniform's whole spend. The two answer different
budgets.
"""


def main(argv: list[str]) -> None:
    field = load(argv[0])
    rerun = load(argv[1]) if len(argv) > 1 else None
    print(HEADER)
    print("## Where a verdict changes with the budget\n")
    print(findings(field, rerun) + "\n")
    print("## At matched rollouts (`field`)\n")
    print(report.controls_table(field) + "\n")
    print(arms_table(field) + "\n")
    print("## The same runs re-read at matched rollouts, tokens and PFLOPs\n")
    print(report.matched_table(field) + "\n")
    if rerun is not None:
        print("## Rerun to matched measured PFLOPs (`field_pflops`)\n")
        print(report.controls_table(rerun) + "\n")
        print(arms_table(rerun) + "\n")
    print("## One run's three FLOPs counts\n")
    print(one_run_flops(field, "uniform-s0") + "\n")
    print("## Every run's spend (`field`)\n")
    print(report.spend_table(field))


if __name__ == "__main__":
    main(sys.argv[1:])
