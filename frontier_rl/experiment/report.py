"""The comparison report: markdown tables, PNG plots and the papers' claims checked.

`write(results, workdir)` turns `compare.collect`'s results into `report.md` and `plots/*.png`.

Statistics (stats.py). The unit of replication is the seed: a method's accuracy at one seed is
its mean over the eval prompts (each sampled k times, independently per run), and a method is
compared with the reference (`compare.target`) through the per-seed paired differences d_s on
the same seeds and eval prompts, with a 95% Student-t interval on the S values (S - 1 degrees
of freedom). The verdict is "better" or "worse" when the interval excludes 0 and there are at
least 3 seeds, "not distinguishable at this budget" when it does not, and "too few seeds for a
verdict" below 3 seeds. Every comparison states its minimum detectable difference (80% power,
two-sided 5%, at the measured sd of the d_s and at its 80% upper confidence bound), and the main
table puts that sd beside its eval-sampling floor (stats.eval_floor_sd). The same paired
t-interval gives the per-bucket table, the ablation effects, the change from step 0 and the
papers' claims, seed-level claims (zero-variance share, medium-band share) included.

The confirmatory family (compare.confirmatory) is the main table's verdicts against the
reference and the claims with a paired p-value, Holm-corrected; every other section is labelled
exploratory. Controls, a method's share of the headroom (Fieller) and power at the
pre-registered effect sizes (compare.effect_sizes, never the observed effect) are in
controls_report.py.

The primary metric is `compare.metric`, the eval bucket the config pre-registers (the frontier
bucket; "all" = every eval prompt); "all" is reported beside it when it is not the primary.

Rollouts-to-target is read off each run's accuracy curve on the primary bucket, linearly
interpolated between evaluation points (stats.to_target), against a pre-registered target
(`compare.target_value`, or per seed the reference's final accuracy minus
`compare.target_margin`). Ratios to a reference method (reference / method, > 1 = the method
needs less) get a t-interval on the per-seed log ratios. Rollouts-to-target is only defined
for a run that reaches the target: a run that never does is shown at its final rollouts
(PFLOPs), a lower bound, which makes the ratio a bound (≤ or ≥), and the ratio gets no verdict,
the report naming each arm and seed that fell short (stats.ratio_verdict).

HIVE's claim is equal accuracy with fewer rollouts; its accuracy half is tested for equivalence,
not difference: two one-sided tests at the margin `compare.equivalence_margin` (points), fixed
in the config before the run (stats.equivalence): "equivalent within ±δ" when the 90% paired
t-interval lies inside (−δ, δ).

A best-of group (compare.best_of, two_run.py: HIVE's two-run protocol) is one row holding the
arm with the higher mean over seeds of its final primary metric, chosen once over all seeds
after the results are seen; its differences and verdicts use that arm's per-seed values, each
arm keeps its own row, and the report says the choice favours the group. Runs matched to
another method's rollouts (compare.match_rollouts) are listed with their per-seed targets.

Other tables give mean ± std over seeds (sample std). The mechanism table has one row per
(method, seed): a counter of the method's proof list (selection.mechanisms.required_mechanisms)
left at zero in that run is flagged; other counters are shown as information.
"""

from __future__ import annotations

import math
import os
from typing import NamedTuple

import numpy as np

from frontier_rl.experiment import controls_report, curves, stats, table, two_run
from frontier_rl.experiment.controls_report import (  # noqa: F401  (the report's API)
    DEFAULT_EFFECT_SIZES,
    EXPLORATORY,
    control_effects,
    controls_table,
    controls_text,
    headroom_shares,
)
from frontier_rl.experiment.evalcells import POOLED, accuracy, equivalence, eval_floor, paired
from frontier_rl.experiment.evalcells import bucket_columns as _bucket_columns
from frontier_rl.experiment.evalcells import by_method as _by_method
from frontier_rl.experiment.evalcells import controls as _controls
from frontier_rl.experiment.evalcells import fmt_ms as _fmt
from frontier_rl.experiment.evalcells import mean_sd as _ms
from frontier_rl.experiment.evalcells import primary as _primary
from frontier_rl.experiment.stats import to_target


def _label(results: dict, row: str) -> str:
    """A row's name in the main table: a best-of group names its arms and the one it chose."""
    b = (results.get("best_of") or {}).get(row)
    if b is None:
        return row
    return f"{row} = best of {', '.join(b['arms'])}: **{b['chosen']}** †"


MDD_HEAD = f"MDD (80% power) at sd / sd's {round(100 * stats.SD_UPPER)}% upper bound"


def _diff_cells(d: stats.Interval | None, member: dict | None = None,
                control: bool = False) -> list[str]:
    """[difference [CI], verdict, MDD at the sd / at its upper bound] of a paired comparison;
    the verdict Holm-aware for a member of the confirmatory family (controls_report)."""
    if d is None:
        return ["—", "no common seeds with per-prompt eval counts", "—"]
    return [d.fmt(signed=True), controls_report.holm_verdict(d, member, control),
            d.fmt_mdd_both()]


def family(results: dict) -> list[dict]:
    """The confirmatory family with its Holm-adjusted p-values (controls_report.confirmatory)."""
    return controls_report.confirmatory(results, claims(results))


def _acc_cell(tab, m: str, rs: list[dict], bucket: str) -> str:
    acc = accuracy(tab, m, bucket)
    if acc is not None:
        return acc.fmt()
    return _fmt([r["final_buckets"].get(bucket) for r in rs])  # no per-prompt counts


def main_table(results: dict, controls: bool = False) -> str:
    """Per method: budget spent (steps, optimizer updates, rollouts, PFLOPs), accuracy on the
    primary bucket with its interval, the paired difference to the reference with verdict,
    MDD, its sd beside the eval-sampling floor and its place in the confirmatory family, the
    same on "all" when the primary is a bucket, the rolled-out groups' shares, and with a
    positive control the share of its headroom each method recovers.
    The control arms (`results["controls"]`) are never rows here; controls=True gives their
    table instead (the reference first, then the controls)."""
    k, metric = results["k"], _primary(results)
    ref = results["target_method"]
    ctl = _controls(results)
    by = {m: rs for m, rs in _by_method(results).items()
          if (m in ctl or m == ref if controls else m not in ctl)}
    pooled = [] if metric == "all" else ["all"]
    tab = table.of(results)
    fam = {} if controls else {x["name"]: x for x in family(results) if x["kind"] == "method"}
    shares = {} if controls else headroom_shares(results)
    head = (f"| method | seeds | steps | updates | rollouts | PFLOPs | Avg@{k} {metric} "
            f"[95% CI] | vs {ref} [95% CI] | verdict | {MDD_HEAD} | spread of the paired "
            "difference | confirmatory? | "
            + "".join(f"Avg@{k} {b} [95% CI] | {b} vs {ref} [95% CI] | {b} verdict | "
                      for b in pooled)
            + "zero-var easy / hard | effective share |"
            + (" share of the headroom [95% Fieller] |" if shares else ""))
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for m, rs in by.items():
        if not rs:
            continue
        eff = [r["effective_rollouts"] / r["rollouts"] if r["rollouts"] else None for r in rs]
        cells = [_label(results, m), str(len(rs)), _fmt([r.get("steps") for r in rs], 0),
                 _fmt([r.get("updates") for r in rs], 0), _fmt([r["rollouts"] for r in rs], 0),
                 _fmt([r["pflops"] for r in rs], 4)]
        for b in [metric, *pooled]:
            cells.append(_acc_cell(tab, m, rs, b))
            if m == ref or not by.get(ref):
                diff = ["—", "reference" if m == ref else f"{ref} not run", "—", "—"]
            else:
                d = paired(tab, m, ref, b)
                member = fam.get(m) if b == metric else None
                diff = _diff_cells(d, member, m in ctl) + [
                    "—" if d is None else controls_report.spread_text(
                        d.sd, eval_floor(tab, m, ref, b))]
            if b == metric:
                cells += diff + ["reference" if m == ref else "control" if m in ctl
                                 else controls_report.family_label(fam.get(m))]
            else:
                cells += diff[:2]
        cells += [f"{_fmt([r['zero_var_easy'] for r in rs], 2)} / "
                  f"{_fmt([r['zero_var_hard'] for r in rs], 2)}", _fmt(eff, 2)]
        if shares:
            cells.append(controls_report.share_text(shares[m], short=True) if m in shares
                         else "—")
        lines.append("| " + " | ".join(cells) + " |")
    if results.get("best_of"):
        lines += ["", "† " + SELECTION_NOTE]
    return "\n".join(lines)


def subset(results: dict, seeds) -> dict:
    """The comparison restricted to `seeds` (one start's replicates): its runs, and the controls'
    effects, power, headroom shares and confirmatory family computed again on them alone."""
    seeds = [s for s in results["seeds"] if s in set(seeds)]
    out = {**results, "seeds": seeds, "runs": [r for r in results["runs"] if r["seed"] in seeds]}
    out["control_effects"] = control_effects(out)
    out["power"] = power_rows(out)
    out["headroom_share"] = headroom_shares(out)
    out["confirmatory"] = family(out)
    return out


def starts_section(results: dict) -> str:
    """With several shipped starts (compare.starts): the main table of each start's seeds
    alone, so a conclusion that holds on one start says so; the main table above pools them
    over (start, seed). Empty with one start or none."""
    starts = results.get("testbed_starts") or {}
    if len(starts) < 2:
        return ""
    lines = ["## Verdicts per start", "",
             "The tables above pool every (start, seed) replicate, each seed paired with the "
             "reference's run at the same start and seed. Here each start alone: its seeds, its "
             "own Holm family. A verdict that holds pooled but not on every start is conditional "
             "on the start.", ""]
    for name, v in starts.items():
        sub = subset(results, v["seeds"])
        lines += [f"### Start `{name}` ({v['path']}, digest {v.get('digest') or '—'}; seeds "
                  f"{', '.join(map(str, sub['seeds']))})", "", main_table(sub), ""]
    return "\n".join(lines)


def noise_table(results: dict) -> str:
    """Per arm: the gradient noise scale B_noise in groups (rl/noise.py), the informative groups
    per optimizer update and their ratio, and Adam's update norm, over the seeds."""
    by = _by_method(results)
    lines = ["| arm | B_noise (groups) per seed | informative groups per update | B_noise / "
             "informative | Adam update norm |", "|---|---|---|---|---|"]
    for m, rs in by.items():
        bs = [r.get("b_noise") for r in rs]
        if not any(b is not None for b in bs):
            continue
        inf = [r.get("informative_groups") for r in rs]
        ratio = [b / i for b, i in zip(bs, inf, strict=True)
                 if b is not None and i and np.isfinite(b)]
        lines.append(f"| {m} | " + ", ".join("—" if b is None or not np.isfinite(b)
                                               else f"{b:.0f}" for b in bs)
                     + f" | {_fmt(inf, 1)} | {_fmt(ratio, 1) if ratio else '—'} | "
                     f"{_fmt([r.get('update_norm') for r in rs], 3)} |")
    if len(lines) == 2:
        return "(the runs did not measure the gradient noise scale: rl.noise_every = 0)"
    return ("B_noise = tr(Σ)/|G|² in groups (McCandlish et al. 2018), from the gradient norms "
            "of a quarter of the step's groups and of all of them at the same parameters, "
            "every rl.noise_every steps; the ratio of the two estimates' means over the run. "
            "Where an update's informative groups are well below B_noise, more informative "
            "groups per update lower its noise, the one way selection can pay under Adam; "
            "where they are near or above it, they cannot.\n\n" + "\n".join(lines))


def curve_table(results: dict) -> str:
    """Whole-curve endpoints per arm (curves.py): area under the curve and the last-3 mean,
    each paired per seed against the reference (95% t-interval), and ScaleRL's fitted
    asymptote A, efficiency B and midpoint C_mid (mean ± sd over the seeds that fit)."""
    by, ref = _by_method(results), results["target_method"]
    ends = {m: {r["seed"]: curves.endpoints(r["curve"]) for r in rs} for m, rs in by.items()}
    lines = [f"| arm | AUC (mean accuracy over the budget) | AUC vs {ref} [95% CI] | last-3 mean "
             f"| last-3 vs {ref} [95% CI] | A (asymptote) | B (efficiency) | C_mid (rollouts) "
             "| seeds fitted |", "|---|---|---|---|---|---|---|---|---|"]
    for m, per in ends.items():
        cells = [m]
        for key in ("auc", "last3"):
            cells.append(_fmt([e[key] for e in per.values()], 1))
            if m == ref or ref not in ends:
                cells.append("—")
                continue
            d = [e[key] - ends[ref][s][key] for s, e in per.items() if s in ends[ref]]
            cells.append(stats.seed_interval(d).fmt(signed=True) if len(d) >= 2 else "—")
        fits = [e for e in per.values() if e["A"] is not None]
        for key, digits in (("A", 1), ("B", 2), ("C_mid", 0)):
            cells.append(_fmt([e[key] for e in fits], digits) if fits else "no fit")
        cells.append(f"{len(fits)} of {len(per)}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def tuning_section(results: dict, out_dir: str) -> str:
    """compare.tune (tune.py): each arm's sensitivity curve on the tuning seeds (the endpoint at
    every grid point, 95% t-interval), the chosen settings, the confirmation seeds' power, and
    the verdicts at the shared setting beside the tuned ones, with their scope. Empty without
    tuning."""
    t = results.get("tuning")
    if not t:
        return ""
    k, metric = results["k"], _primary(results)
    labels = [x["label"] for x in next(iter(t["arms"].values()))["cells"]]
    lines = [
        "## Tuning: the same grid for every arm, then fresh seeds", "",
        f"Every arm ran every grid point on the tuning seeds {t['tuning_seeds']}; the rule "
        f"`{t['rule']}` (declared before the runs: {t['rule_source']}) chose each arm's "
        f"setting; the confirmation stage runs the chosen settings on the seeds "
        f"{t['confirmation_seeds']}, which the rule never sees. Final Avg@{k} "
        f"`{metric}` per grid point, mean over the tuning seeds [95% t-interval]; **bold**: "
        "chosen.", "",
        "| arm | " + " | ".join(labels) + " | chosen |",
        "|---|" + "---|" * (len(labels) + 1)]
    for arm, a in t["arms"].items():
        cells = []
        for x in a["cells"]:
            text = ("—" if not np.isfinite(x["mean"]) else f"{x['mean']:.1f}"
                    + (f" [{x['lo']:.1f}, {x['hi']:.1f}]" if np.isfinite(x["lo"]) else ""))
            cells.append(f"**{text}**" if x["label"] == a["chosen_label"] else text)
        lines.append(f"| {arm} | " + " | ".join(cells) + f" | {a['chosen_label']} |")
    n_conf = len(t["confirmation_seeds"])
    lines += ["", f"Confirmation seeds for 80% power at the pre-registered effects, at the sd "
              f"of each method's paired difference to the reference on the tuning seeds "
              f"(both at their chosen settings); {n_conf} were run:", ""]
    for arm, pw in t["power"].items():
        need = ", ".join(f"{n}: {'more than ' + str(stats.MAX_SEEDS) if v is None else v}"
                         for n, v in pw["seeds_needed"].items())
        lines.append(f"- {arm}: sd {pw['sd']:.2f} over {pw['n']} tuning seeds; {need}")
    edge = [arm for arm, a in t["arms"].items()
            if a["chosen_label"] in (a["cells"][0]["label"], a["cells"][-1]["label"])]
    if edge:
        lines += ["", "At the grid's edge (the best setting may lie beyond it): "
                  + ", ".join(edge) + "."]
    path = _sensitivity_plot(t, k, metric, out_dir) if out_dir else None
    if path:
        lines += ["", f"![sensitivity](plots/{os.path.basename(path)})"]
    shared = results.get("shared_setting")
    if shared:
        sub = {**results, **shared, "best_of": {}}
        lines += ["", f"### At the shared setting ({shared['setting']}), tuning seeds", "",
                  "Scope: every arm at the one setting of the untuned comparison, on the tuning "
                  "seeds; a method that wins here but not tuned won where the reference was "
                  "mistuned.", "", main_table(sub)]
    return "\n".join(lines)


def _sensitivity_plot(t: dict, k: int, metric: str, out_dir: str) -> str | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    field = next(iter(t["grid"][0])) if t["grid"] else None
    if field is None or len(t["grid"][0]) != 1:
        return None  # one field: endpoint vs its value; a grid of several is in the table
    os.makedirs(out_dir, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    for arm, a in t["arms"].items():
        xs = [float(x["point"][field]) for x in a["cells"]]
        ys = np.asarray([x["mean"] for x in a["cells"]])
        lo = np.asarray([x["lo"] for x in a["cells"]])
        hi = np.asarray([x["hi"] for x in a["cells"]])
        ax.errorbar(xs, ys, yerr=[ys - lo, hi - ys], marker="o", capsize=3, label=arm)
    ax.set_xscale("log")
    ax.set_xlabel(field)
    ax.set_ylabel(f"final Avg@{k} {metric} (tuning seeds)")
    ax.legend(fontsize=7)
    path = os.path.join(out_dir, "sensitivity.png")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


BIAS_NOTE = ("Taking the better of several noisy runs favours the group (a selection effect, "
             "largest when the arms are close); each `<arm> (arm)` row is one pre-specified run "
             "without it.")
SELECTION_NOTE = (
    "Chosen after the results were seen (compare.best_of, HIVE's two-run protocol): the row is "
    "the arm with the higher mean over seeds of its final primary metric, and its differences "
    "and verdicts use that arm's per-seed values. " + BIAS_NOTE)


def best_of_section(results: dict) -> str:
    """Each best-of group's arms: the final primary metric per seed, its mean over seeds, the
    arm chosen, and the rule and its selection effect in words."""
    best = results.get("best_of") or {}
    if not best:
        return "None: compare.best_of names no group."
    k, metric = results["k"], _primary(results)
    by = _by_method(results, groups=False)
    lines = [f"Rule, fixed before the runs: {two_run.RULE}, on the final Avg@{k} `{metric}`. "
             "HIVE reports one number per method, so the choice is made once for all seeds, "
             "never per seed. The group's row, differences and verdicts are the chosen arm's. "
             "The choice is made after the results were seen, as HIVE makes it. " + BIAS_NOTE,
             "",
             f"| group | arm | final Avg@{k} {metric} per seed | mean over seeds | chosen |",
             "|---|---|---|---|---|"]
    for g, b in best.items():
        for a in b["arms"]:
            per = "; ".join(f"s{r['seed']} {r['final']:.1f}"
                            for r in sorted(by.get(a, []), key=lambda r: r["seed"]))
            mean = b["mean"].get(a, float("nan"))
            lines.append(f"| {g} | {a} | {per or '—'} | "
                         f"{'—' if math.isnan(mean) else f'{mean:.2f}'} | "
                         f"{'**chosen**' if a == b['chosen'] else ''} |")
    return "\n".join(lines)


def bucket_table(results: dict) -> str:
    """Every eval bucket (pooled ones last), every method: final accuracy and the paired
    difference to the reference with its interval, verdict and MDD."""
    k, metric = results["k"], _primary(results)
    by, tab = _by_method(results), table.of(results)
    ref = results["target_method"]
    buckets = _bucket_columns({b for r in results["runs"] for b in r["final_buckets"]},
                              POOLED)
    lines = [f"| bucket | method | Avg@{k} [95% CI] | vs {ref} [95% CI] | verdict | "
             f"{MDD_HEAD} |", "|---|---|---|---|---|---|"]
    for b in buckets:
        name = f"**{b}** (primary)" if b == metric else b
        for m, rs in by.items():
            if not rs:
                continue
            if m == ref or not by.get(ref):
                diff = ["—", "reference" if m == ref else f"{ref} not run", "—"]
            else:
                diff = _diff_cells(paired(tab, m, ref, b))
            lines.append("| " + " | ".join([name, m, _acc_cell(tab, m, rs, b), *diff]) + " |")
    return "\n".join(lines)


def ablation_table(results: dict) -> str:
    """Each `compare.ablations` pair: method minus ablation, paired per seed, on the primary
    bucket and on "all" (interval, verdict, MDD), or "not run"."""
    ablations = results.get("ablations") or {}
    if not ablations:
        return "(no ablations configured: compare.ablations is empty)"
    metric = _primary(results)
    by, tab = _by_method(results), table.of(results)
    pooled = [] if metric == "all" else ["all"]
    head = ("| ablation | question | method − ablation | "
            + " | ".join(f"{b}: effect [95% CI] | {b} verdict | {b} MDD at sd / upper bound"
                         for b in [metric, *pooled])
            + " |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, ab in ablations.items():
        m, a = ab["method"], ab["ablation"]
        cells = [name, ab["question"], f"{m} − {a}"]
        if not (by.get(m) and by.get(a)):
            absent = ", ".join(x for x in (m, a) if not by.get(x))
            cells += [f"not run (add {absent} to compare.run)", "—", "—"] * (1 + len(pooled))
        else:
            for b in [metric, *pooled]:
                cells += _diff_cells(paired(tab, m, a, b))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _num(x, default: float = float("nan")) -> float:
    """A number from a metrics record (non-finite values are stored as strings)."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return default


def _pct(x) -> str:
    v = _num(x)
    return "—" if math.isnan(v) else f"{100 * v:.1f}%"


def start_table(results: dict) -> str:
    """Every seed's warm start (its seed, attempts, supervised steps, held-out greedy exact
    match on the warm-start buckets and on the next-harder bucket, loss) and its step-0 held-out
    accuracy per bucket."""
    k = results["k"]
    runs = results["runs"]
    shared = results.get("shared_start", True)
    starts = results.get("starts") or {}
    buckets = _bucket_columns({b for r in runs for b in r["curve"]["buckets"]}, POOLED)
    lines = [
        ("One warm start serves every seed (compare.shared_start = True): every verdict in this "
         "report is conditional on that one starting point, and the spread over seeds leaves "
         "out the spread of warm starts." if shared else
         "Each seed has its own warm start (warmstart.seed = the seed, compare.shared_start = "
         "False), shared by the methods at that seed, so the spread over seeds includes the "
         "starting point."),
        "",
        "Warm-start accuracies are held-out greedy exact match; — = not recorded (a warm start "
        "with warmstart.target_acc = 0 has no held-out check).",
        ""]
    head = ("| seed | warm-start seed | attempts | supervised steps | easy buckets | frontier "
            "bucket | loss | " + " | ".join(f"Avg@{k} {b} at step 0" for b in buckets) + " |")
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    used = {}
    for seed in results["seeds"]:
        st = starts.get(str(seed)) or next(
            (r["start"] for r in runs if r["seed"] == seed and r.get("start")), {})
        r = next((x for x in runs if x["seed"] == seed and x["curve"].get("step")
                  and x["curve"]["step"][0] == 0), None)
        ws_seed = st.get("seed")
        if ws_seed is not None:
            used.setdefault(int(_num(ws_seed)), []).append(seed)
        step0 = [f"{r['curve']['buckets'].get(b, [float('nan')])[0]:.1f}" if r else "—"
                 for b in buckets]
        cells = [str(seed), "—" if ws_seed is None else str(int(_num(ws_seed))),
                 "—" if st.get("attempts") is None else str(int(_num(st["attempts"]))),
                 "—" if st.get("steps") is None else f"{int(_num(st['steps'])):,}",
                 _pct(st.get("check_acc")), _pct(st.get("frontier_acc")),
                 "—" if math.isnan(_num(st.get("loss"))) else f"{_num(st['loss']):.4f}", *step0]
        lines.append("| " + " | ".join(cells) + " |")
    same = {s: seeds for s, seeds in used.items() if len(seeds) > 1}
    if same and not shared:
        lines += ["", "THE SAME WARM-START SEED SERVED SEVERAL SEEDS (a retried attempt uses the "
                  "next seed): " + "; ".join(f"warm-start seed {s}: seeds {v}"
                                             for s, v in same.items())
                  + "; their starting points are not independent."]
    return "\n".join(lines)


def gain_table(results: dict) -> str:
    """Final minus step-0 accuracy per bucket, paired per seed, with 95% t-intervals."""
    by, tab = _by_method(results), table.of(results)
    buckets = _bucket_columns({b for r in results["runs"] for b in r["final_buckets"]}, POOLED)
    head = "| method | " + " | ".join(f"{b}: change [95% CI]" for b in buckets) + " |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    words = {"better": "rose", "worse": "fell", stats.TOO_FEW: "(too few seeds)"}
    for m, rs in by.items():
        if not rs:
            continue
        cells = []
        for b in buckets:
            d = paired(tab, m, m, b, point_a=-1, point_b=0)
            cells.append("—" if d is None else
                         f"{d.fmt(signed=True)} {words.get(stats.verdict(d), 'n.d.')}")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def mechanisms_table(results: dict) -> str:
    """Mechanism counters per (method, seed); a counter of the method's proof list
    (required_mechanisms) at zero in that run is shown as **0 (!)**."""
    mech = results.get("mechanisms", {})
    req = results.get("mechanisms_required", {})
    names = sorted({n for c in mech.values() for n in c} | {n for r in req.values() for n in r})
    if not names:
        return "(no run reported mechanism counters)"
    lines = ["| method | seed | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for m in results["methods"]:
        need = set(req.get(m, []))
        for seed in results["seeds"]:
            cells = []
            for n in names:
                v = mech.get(m, {}).get(n, {}).get("per_seed", {}).get(str(seed))
                if n in need and not v:
                    cells.append("**0 (!)**")
                elif v is None:
                    cells.append("·")
                else:
                    cells.append(f"{v:,}" + ("" if n in need else "*"))
            lines.append(f"| {m} | {seed} | " + " | ".join(cells) + " |")
    missing = results.get("mechanisms_missing") or []
    verdict = ("Every required counter is non-zero in every run: each method's mechanism ran "
               "at every seed." if not missing else "MECHANISMS THAT NEVER RAN: " + "; ".join(
                   f"{m} seed {s}: {n}" for m, s, n in missing))
    return "\n".join(lines) + (
        "\n\nCounts are cumulative at the end of each run; `·` = not counted by the method, "
        "`*` = information, not in the method's proof list. " + verdict)


# ----------------------------------------------------------------------------- to target


def _log_ratios(pairs) -> tuple[stats.Interval | None, str, int]:
    """The t-interval of per-seed log(reference / method) from (reference X-to-target, its
    censoring value, method X-to-target, its censoring value) per seed, with the censoring
    rule: a run that never reached the target (None) enters at its censoring value (its final
    X, a lower bound on its X-to-target), which makes that seed's ratio an upper bound (method
    censored) or a lower bound (reference censored); a seed where both were censored, or one
    reached the target at x = 0, is left out. Returns (interval or None, bound, seeds left
    out), `bound` the way the shown ratio is a bound: "upper", "lower", "both" or "" (none).
    A censored ratio is shown, never tested (stats.ratio_verdict)."""
    logs, upper, lower, dropped = [], False, False, 0
    for a, a_cap, b, b_cap in pairs:
        if a is None and b is None:
            dropped += 1
            continue
        if b is None:
            b, upper = b_cap, True
        if a is None:
            a, lower = a_cap, True
        if not (a > 0 and b > 0):
            dropped += 1
            continue
        logs.append(math.log(a / b))
    bound = "both" if upper and lower else "upper" if upper else "lower" if lower else ""
    return (stats.seed_interval(logs, log=True) if logs else None), bound, dropped


def _to_target_pairs(tab, ref: str, name: str, key: str, x: str) -> list[tuple]:
    """Per common seed: (ref's X-to-target, ref's final X, name's X-to-target, its final X)."""
    by_seed = {r["seed"]: r for r in table.finals(tab, ref)}
    return [(by_seed[r["seed"]][key], by_seed[r["seed"]][x], r[key], r[x])
            for r in table.finals(tab, name) if r["seed"] in by_seed]


def _reached(tab, ref: str, name: str, key: str) -> dict:
    """{seed: {ref: X-to-target, name: X-to-target}} (None = not reached) on the common
    seeds that have a target (stats.ratio_verdict); a seed without one (its target's reference
    did not run there) is left out of the ratio and counted, not an arm's shortfall."""
    by_seed = {r["seed"]: r for r in table.finals(tab, ref)}
    return {r["seed"]: {ref: by_seed[r["seed"]][key], name: r[key]}
            for r in table.finals(tab, name) if r["seed"] in by_seed and r["target"] is not None}


def _ratio_cells(iv: stats.Interval | None, bound: str, dropped: int, reached: dict
                 ) -> list[str]:
    """[ratio [CI] (bound), verdict] cells; `reached` as stats.ratio_verdict takes it."""
    left = f" ({dropped} seed(s) left out)" if dropped else ""
    verdict = stats.ratio_verdict(iv, reached)
    if iv is None:
        return ["—" + left, verdict]
    sign = {"upper": "≤ ", "lower": "≥ ", "both": "bounds both ways: "}.get(bound, "")
    return [f"{sign}{iv.fmt(2)}{left}", verdict]


def _per_seed_x(rs: list[dict], key: str, x: str) -> str:
    """Every seed's X-to-target: the value (marked "not resolved", with the evaluations around
    its crossing, where they are further apart than stats.RESOLUTION of it), "not reached
    (> final X)" or "no target" (the reference of the target did not run at that seed)."""
    digits = 4 if x == "pflops" else 0

    def one(r):
        if r.get("target") is None:
            return "no target"
        if r[key] is None:
            return f"not reached (> {r['curve'][x][-1]:,.{digits}f})"
        if x in r["curve"] and not stats.resolved(r["curve"], r["target"], x):
            lo, hi = stats.to_target_bracket(r["curve"], r["target"], x)
            return (f"{r[key]:,.{digits}f} not resolved (between evaluations at "
                    f"{lo:,.{digits}f} and {hi:,.{digits}f})")
        return f"{r[key]:,.{digits}f}"

    return "; ".join(f"s{r['seed']} {one(r)}" for r in rs)


def efficiency_table(results: dict) -> str:
    """Per method and seed: rollouts, generated tokens and PFLOPs to the target, and the ratios
    reference / method (> 1 = the method needs less) with t-intervals on the log ratios."""
    by, tab = _by_method(results), table.of(results)
    ref, tgt = results["rollout_reference"], results["target_method"]
    units = [("rollouts_to_target", "rollouts", ref, "rollouts")]
    if all("tokens" in r["curve"] for r in results["runs"]):  # results from before tokens
        units.append(("tokens_to_target", "tokens", tgt, "tokens"))
    units.append(("pflops_to_target", "pflops", tgt, "PFLOPs"))
    head = "| method | " + " | ".join(
        f"{name}-to-target per seed | ratio {other} / method [95% CI] | verdict"
        for _, _, other, name in units) + " |"
    lines = [head, "|" + "---|" * (1 + 3 * len(units))]
    for m, rs in by.items():
        if not rs:
            continue
        cells = [m]
        for key, x, other, _ in units:
            cells.append(_per_seed_x(rs, key, x))
            if m == other:
                cells += ["—", "reference"]
            elif not by.get(other):
                cells += ["—", f"{other} not run"]
            else:
                cells += _ratio_cells(*_log_ratios(_to_target_pairs(tab, other, m, key, x)),
                                      _reached(tab, other, m, key))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def time_table(results: dict) -> str:
    by = _by_method(results)
    parts = ("generate", "verify", "entropy", "update", "select", "eval")
    lines = ["| method | " + " | ".join(f"{p} (s)" for p in parts)
             + " | total (s) | compiling (s) | programs compiled |",
             "|---|" + "---|" * (len(parts) + 3)]
    for m, rs in by.items():
        if not rs:
            continue
        cells = [_fmt([r["time_s"][p] for r in rs], 1) for p in parts]
        total = _fmt([sum(r["time_s"].values()) for r in rs], 1)
        # compiles are per process: in one comparison process a later run reuses what an
        # earlier one compiled, so these are the new programs each run met
        compiled = [_fmt([r.get("compile_s") for r in rs], 1),
                    _fmt([r.get("compiles") for r in rs], 0)]
        lines.append(f"| {m} | " + " | ".join(cells) + f" | {total} | " + " | ".join(compiled)
                     + " |")
    return "\n".join(lines)


def flops_table(results: dict) -> str:
    by = _by_method(results)
    lines = ["| method | PFLOPs (cost analysis) | PFLOPs (formula) | PFLOPs (HeaPA's "
             "convention) | cost analysis / formula | HeaPA / formula | padding ratio | "
             "residual |", "|---|---|---|---|---|---|---|---|"]
    for m, rs in by.items():
        if not rs:
            continue
        ratio = [r["pflops"] / r["pflops_formula"] if r["pflops_formula"] else None for r in rs]
        heapa = [_num(r.get("pflops_heapa")) for r in rs]
        heapa_ratio = [h / r["pflops_formula"] if r["pflops_formula"] and math.isfinite(h)
                       else None for h, r in zip(heapa, rs, strict=True)]
        resid = [q / r["padding_ratio"] if q and r["padding_ratio"] else None
                 for q, r in zip(ratio, rs, strict=True)]
        lines.append(f"| {m} | {_fmt([r['pflops'] for r in rs], 4)} | "
                     f"{_fmt([r['pflops_formula'] for r in rs], 4)} | "
                     f"{_fmt([h if math.isfinite(h) else None for h in heapa], 4)} | "
                     f"{_fmt(ratio, 3)} | {_fmt(heapa_ratio, 3)} | "
                     f"{_fmt([r['padding_ratio'] for r in rs], 3)} | {_fmt(resid, 3)} |")
    return "\n".join(lines)


def spend_table(results: dict) -> str:
    """Every run's spend side by side, one row per (method, seed): steps, optimizer updates,
    rollouts, generated tokens (and the prompt tokens those rollouts prefilled) and PFLOPs,
    measured (cost analysis) and by the two formulas."""
    lines = ["| run | steps | updates | rollouts | generated tokens | prompt tokens | PFLOPs "
             "(cost analysis) | PFLOPs (formula) | PFLOPs (HeaPA's convention) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for m, rs in _by_method(results).items():
        for r in rs:
            heapa = _num(r.get("pflops_heapa"))
            lines.append(
                f"| {m}-s{r['seed']} | {r.get('steps', 0):,} | {r.get('updates', 0):,} | "
                f"{r['rollouts']:,} | {r.get('tokens', 0):,} | {r.get('prompt_tokens', 0):,} | "
                f"{r['pflops']:.4g} | {r['pflops_formula']:.4g} | "
                + (f"{heapa:.4g}" if math.isfinite(heapa) else "—") + " |")
    return "\n".join(lines)


# The units a comparison is re-read at: x in a run's curve, and its name in the report.
MATCHED_UNITS = (("rollouts", "rollouts"), ("tokens", "generated tokens"),
                 ("pflops", "PFLOPs (cost analysis)"))


def _value_at(xs: np.ndarray, ms: np.ndarray, at: float) -> float:
    """The primary metric at `at` along a run's spend xs, linearly interpolated between the
    evaluation points around it (the last point's value past the end)."""
    return float(np.interp(at, xs, ms))


def matched_rows(results: dict, x: str) -> list[dict]:
    """Each method against the reference (compare.target) at a matched spend in unit `x`:
    per seed, both runs read at the smaller of their two final spends (the metric interpolated
    between evaluations), the paired differences' t-interval and verdict. The same runs, read
    at another budget: a verdict that changes with the unit is a property of the budget."""
    by, tab = _by_method(results), table.of(results)
    ref = results["target_method"]
    ctl = _controls(results)
    rows = []
    if not by.get(ref):
        return rows
    ref_series = table.series(tab, ref, x)
    ref_by_seed = {s: (xs, ys) for s, xs, ys in ref_series}
    for m, rs in by.items():
        if m == ref or not rs:
            continue
        arm = table.series(tab, m, x)
        if len(arm) < len(rs) or len(ref_series) < len(by[ref]):  # a run without x
            continue
        diffs, at = [], []
        for s, xa, ya in arm:
            if s not in ref_by_seed:
                continue
            xb, yb = ref_by_seed[s]
            budget = min(xa[-1], xb[-1])
            at.append(budget)
            diffs.append(_value_at(xa, ya, budget) - _value_at(xb, yb, budget))
        iv = stats.seed_interval(diffs) if diffs else None
        rows.append({"method": m, "control": m in ctl, "seeds": len(diffs), "at": at,
                     "diff": None if iv is None else iv.mean, "interval": iv,
                     "verdict": stats.verdict(iv) if iv is not None else
                     "too few seeds for a verdict"})
    return rows


def matched_table(results: dict) -> str:
    """The comparison re-read at matched rollouts, generated tokens and PFLOPs (matched_rows):
    one row per method, the difference to the reference and its verdict in each unit."""
    ref = results["target_method"]
    units = [(x, name) for x, name in MATCHED_UNITS
             if all(x in r["curve"] for r in results["runs"])]
    per = {x: {row["method"]: row for row in matched_rows(results, x)} for x, _ in units}
    head = "| method | " + " | ".join(f"vs {ref} at matched {name} [95% CI] | verdict"
                                      for _, name in units) + " | verdict changes? |"
    lines = [head, "|" + "---|" * (2 + 2 * len(units))]
    methods = [m for m in _by_method(results) if m != ref and _by_method(results)[m]]
    for m in methods:
        cells, verdicts = [m + (" (control)" if m in _controls(results) else "")], []
        for x, _ in units:
            row = per[x].get(m)
            if row is None or row["interval"] is None:
                cells += ["—", "—"]
                continue
            cells += [row["interval"].fmt(signed=True), row["verdict"]]
            verdicts.append(row["verdict"])
        cells.append("**yes**" if len(set(verdicts)) > 1 else "no")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- claims


def _medium_share(r: dict) -> float | None:
    h = r["rolled_pass_hist"]
    return float(sum(h[1:-1])) if len(h) > 2 else None


class _Claim(NamedTuple):
    """One of the papers' claims as measured. test: its paired (p-value, seeds), which puts it
    in the confirmatory family; an accuracy comparison's adds its arms (`pair`), so that the
    family counts a claim that repeats a main-table verdict once."""

    claim: str
    source: str
    methods: str
    measured: str
    held: str
    note: str = ""
    test: tuple | None = None

    def record(self, seeds: str) -> dict:
        out = {"claim": self.claim, "source": self.source, "methods": self.methods,
               "measured": self.measured, "held": self.held, "note": self.note, "seeds": seeds}
        if self.test is not None:
            out["p"], out["n"] = self.test[:2]
            if len(self.test) > 2:
                out["pair"] = list(self.test[2])
        return out


def _have(by: dict, *ms: str) -> bool:
    return all(by.get(m) for m in ms)


def _mean(by: dict, m: str, key: str) -> float:
    return _ms([r[key] for r in by[m]])[0]


def _compare(tab, by: dict, metric: str, a: str, b: str) -> tuple:
    """Final accuracy of a vs b on the primary bucket: means, the verdict on "a above b",
    the paired interval with its MDD."""
    va, vb = _mean(by, a, "final"), _mean(by, b, "final")
    d = paired(tab, a, b, metric)
    if d is None:
        return va, vb, "n/a", "no per-prompt eval counts on common seeds", None
    return va, vb, stats.verdict(d), (f"{a} - {b} = {d.fmt(signed=True)} points on {metric} "
                                      f"(95% CI, MDD {d.fmt_mdd_both()} at the sd / its "
                                      "upper bound)"), (*_test(d), (a, b))


def _seedwise(by: dict, a: str, b: str, value, lower_is_better: bool = False
              ) -> tuple[stats.Interval | None, str]:
    """A per-run quantity of a vs b: the t-interval over the per-seed differences (signed
    so that > 0 is the claimed direction) and its verdict."""
    sa = {r["seed"]: value(r) for r in by[a]}
    sb = {r["seed"]: value(r) for r in by[b]}
    common = [x for x in sorted(sa) if x in sb and sa[x] is not None and sb[x] is not None]
    if not common:
        return None, "n/a"
    diff = np.array([sa[x] - sb[x] for x in common], float)
    d = stats.seed_interval(-diff if lower_is_better else diff)
    return d, stats.verdict(d)


def _zero_var(r: dict) -> float:
    return r["zero_var_easy"] + r["zero_var_hard"]


def _to_target_claim(tab, by: dict, metric: str) -> _Claim:
    """HIVE reaches DS's accuracy with fewer rollouts (HIVE Table 1): per seed, the target is
    DS's final accuracy on the primary bucket; ratio DS / HIVE rollouts-to-target."""
    if not _have(by, "hive", "ds"):
        return _Claim("HIVE reaches DS's accuracy with fewer rollouts", "HIVE Table 1",
                      "hive, ds", "not run", "n/a", "add hive and ds to compare.run")
    cells, pairs, reached = [], [], {}
    hive = {r["seed"]: r for r in by["hive"]}
    for r_ds in by["ds"]:
        r_h, t = hive.get(r_ds["seed"]), r_ds["final"]
        if r_h is None or not math.isfinite(t):
            continue
        x_ds = to_target(r_ds["curve"], t, "rollouts")
        x_h = to_target(r_h["curve"], t, "rollouts")
        pairs.append((x_ds, r_ds["curve"]["rollouts"][-1], x_h, r_h["curve"]["rollouts"][-1]))
        reached[r_ds["seed"]] = {"ds": x_ds, "hive": x_h}
        cells.append(f"s{r_ds['seed']}: DS final {t:.1f} at {x_ds:,.0f}; HIVE "
                     + (f"{x_h:,.0f}" if x_h is not None else
                        f"not reached (> {r_h['curve']['rollouts'][-1]:,.0f})"))
    iv, bound, dropped = _log_ratios(pairs)
    ratio, held = _ratio_cells(iv, bound, dropped, reached)
    a, b, _, note, _ = _compare(tab, by, metric, "hive", "ds")
    test = _test(None if held.startswith(stats.NO_VERDICT) else iv)  # censored: untested
    return _Claim(
        "HIVE reaches DS's accuracy with fewer rollouts", "HIVE Table 1", "hive, ds",
        "; ".join(cells) + f"; ratio DS / HIVE rollouts-to-target {ratio}; accuracy at the "
        f"budget: hive {a:.1f}, ds {b:.1f}", held,
        "t-interval on the per-seed log ratios; a seed where HIVE never reaches DS's final "
        "accuracy is shown at HIVE's final rollouts (its ratio an upper bound) and the "
        "ratio gets no verdict; " + note, test)


def _matched_steps_claim(results: dict, by: dict, other: str) -> _Claim:
    """The papers' own design (HIVE Table 1: DS, GRESO, HIVE for the same steps): at matched
    steps, the rollouts each spent; `other` / HIVE as a ratio, t-interval on the per-seed log
    ratios."""
    claim = f"HIVE spends fewer rollouts than {other.upper()} at matched steps"
    if results.get("budget_kind") != "steps":
        return _Claim(claim, "HIVE Table 1", f"hive, {other}", "not measured: this comparison "
                      "matched rollouts", "n/a", "the papers' design matches steps: run with "
                      "compare.budget=steps (configs/compare_arith.py:hive_steps)")
    if not _have(by, "hive", other):
        return _Claim(claim, "HIVE Table 1", f"hive, {other}", "not run", "n/a",
                      f"add hive and {other} to compare.run")
    iv, per_seed = rollout_ratio(by[other], by["hive"])
    if iv is None:
        return _Claim(claim, "HIVE Table 1", f"hive, {other}", "no common seeds", "n/a")
    return _Claim(
        claim, "HIVE Table 1", f"hive, {other}",
        f"{per_seed}; {other} / hive = {iv.fmt(2)} (95% CI, geometric mean over seeds)",
        stats.verdict(iv), "paired per seed at the same steps; t-interval on the per-seed "
        "log ratios; the paper reports 2.45x fewer rollouts than DS at 1.5B", _test(iv))


def _equivalence_claim(results: dict, by: dict, metric: str, other: str) -> _Claim:
    """... at equal accuracy: HIVE's final accuracy is equivalent to `other`'s, by two
    one-sided tests at the margin fixed before the run (a "not distinguishable" would not say
    it; a margin chosen after the results are seen would not test it)."""
    delta = results.get("equivalence_margin")
    claim = f"HIVE's accuracy is equivalent to {other.upper()}'s"
    if not _have(by, "hive", other):
        return _Claim(claim, "HIVE Table 1", f"hive, {other}", "not run", "n/a",
                      f"add hive and {other} to compare.run")
    a, b = _mean(by, "hive", "final"), _mean(by, other, "final")
    if delta is None:
        return _Claim(claim, "HIVE Table 1", f"hive, {other}", f"final {metric}: hive {a:.1f}, "
                      f"{other} {b:.1f}", "n/a", "no equivalence margin was set before the run "
                      "(compare.equivalence_margin; these results predate it)")
    tab = table.of(results)
    eq = equivalence(tab, "hive", other, metric, delta)
    if eq is None:
        return _Claim(claim, "HIVE Table 1", f"hive, {other}", f"final {metric}: hive {a:.1f}, "
                      f"{other} {b:.1f}", "n/a", "no per-prompt eval counts on common seeds")
    v, (lo, hi) = eq
    d = paired(tab, "hive", other, metric)
    ci90 = f"[{lo:+.1f}, {hi:+.1f}]" if d.n > 1 else "[—]"
    p = stats.tost_p(d, delta) if d.n >= stats.MIN_SEEDS else None
    return _Claim(
        claim, "HIVE Table 1", f"hive, {other}",
        f"final {metric}: hive {a:.1f}, {other} {b:.1f}; hive - {other} = "
        f"{d.fmt(signed=True)} points (95% CI), 90% CI {ci90}", v,
        f"two one-sided tests at ±{delta:g} points (compare.equivalence_margin, set before "
        f"the run; {_margin_source(results)}): equivalent when the 90% interval lies inside "
        f"(−{delta:g}, +{delta:g}); better / worse when the 95% interval excludes 0 and "
        f"equivalence is not shown; {tost_need(d, delta)}", (p, d.n))


def _zero_var_claim(by: dict) -> _Claim:
    """HIVE's zero-variance ratios are lower than DS's and GRESO's (HIVE Fig. 5)."""
    others = [m for m in ("ds", "greso") if by.get(m)]
    if not (by.get("hive") and others):
        return _Claim("HIVE has lower zero-variance ratios than DS and GRESO", "HIVE Fig. 5",
                      "hive, ds, greso", "not run", "n/a", "add hive, ds, greso to compare.run")
    zh = _mean(by, "hive", "zero_var_easy") + _mean(by, "hive", "zero_var_hard")
    zo = {m: _mean(by, m, "zero_var_easy") + _mean(by, m, "zero_var_hard") for m in others}
    res = {m: _seedwise(by, "hive", m, _zero_var, lower_is_better=True) for m in others}
    words = {v for _, v in res.values()}
    v = words.pop() if len(words) == 1 else "mixed: " + "; ".join(
        f"vs {m} {w}" for m, (_, w) in res.items())
    diffs = "; ".join(f"{m} - hive = {d.fmt(3, signed=True)} (MDD {d.fmt_mdd(3)})"
                      for m, (d, _) in res.items() if d is not None)
    ps = [_test(d) for d, _ in res.values()]
    test = (None if any(p is None for p, _ in ps) else max(p for p, _ in ps),
            min(n for _, n in ps))  # lower than both: the larger p (intersection-union)
    return _Claim(
        "HIVE has lower zero-variance ratios (easy + hard) than DS and GRESO", "HIVE Fig. 5",
        ", ".join(["hive"] + others),
        f"hive {zh:.3f}; " + "; ".join(f"{m} {x:.3f}" for m, x in zo.items()), v,
        f"paired t over seeds: {diffs}" + ("" if len(others) == 2 else "; greso not run"),
        test)


def _heapa_claims(results: dict, by: dict, metric: str) -> list[_Claim]:
    """HeaPA's accuracy claims: HeaPA beats uniform GRPO at equal rollouts (Tables 1-2); PS+PA
    is below HeaPA and PathAgg >= ChildAgg (the Table 3 ablations)."""
    out, tab = [], table.of(results)
    if _have(by, "heapa", "uniform"):
        a, b, v, note, test = _compare(tab, by, metric, "heapa", "uniform")
        out.append(_Claim(
            "HeaPA beats uniform GRPO at equal rollouts", "HeaPA Tables 1-2", "heapa, uniform",
            f"final Avg@{results['k']} {metric}: heapa {a:.1f}, uniform {b:.1f}", v, note, test))
    else:
        out.append(_Claim(
            "HeaPA beats uniform GRPO at equal rollouts", "HeaPA Tables 1-2", "heapa, uniform",
            "not run", "n/a", "add heapa and uniform to compare.run"))
    if _have(by, "heapa", "ps_aug"):
        a, b, v, note, test = _compare(tab, by, metric, "heapa", "ps_aug")
        out.append(_Claim("PS+PA is below HeaPA", "HeaPA Table 3", "heapa, ps_aug",
                          f"final {metric}: heapa {a:.1f}, ps_aug {b:.1f}", v, note, test))
    else:
        out.append(_Claim("PS+PA is below HeaPA", "HeaPA Table 3", "heapa, ps_aug", "not run",
                          "n/a", "add ps_aug to compare.run"))
    if _have(by, "heapa", "heapa_childagg"):
        a, b, v, note, test = _compare(tab, by, metric, "heapa", "heapa_childagg")
        same = [r["curve"]["metric"] for r in by["heapa"]] == [
            r["curve"]["metric"] for r in by["heapa_childagg"]]
        if same:
            v = "untested"
            note = ("identical curves in every seed: the aggregation only acts at a lineage "
                    "refresh (a recycle, or selector.heapa.refresh_every), and none changed a "
                    "selection within this budget")
        out.append(_Claim("PathAgg >= ChildAgg", "HeaPA Table 3", "heapa, heapa_childagg",
                          f"final {metric}: PathAgg {a:.1f}, ChildAgg {b:.1f}", v, note, test))
    else:
        out.append(_Claim("PathAgg >= ChildAgg", "HeaPA Table 3", "heapa, heapa_childagg",
                          "not run", "n/a", "add heapa_childagg to compare.run"))
    return out


def _medium_band_claim(by: dict) -> _Claim:
    """Heap sampling shifts mass to the medium band (HeaPA §3)."""
    if not _have(by, "heapa", "uniform"):
        return _Claim("Heap sampling shifts mass to the medium band", "HeaPA §3",
                      "heapa, uniform", "not run", "n/a", "add heapa and uniform to compare.run")
    sh = _ms([_medium_share(r) for r in by["heapa"]])[0]
    su = _ms([_medium_share(r) for r in by["uniform"]])[0]
    d, v = _seedwise(by, "heapa", "uniform", _medium_share)
    return _Claim(
        "Heap sampling shifts mass to the medium band (0 < pass rate < 1)", "HeaPA §3",
        "heapa, uniform", f"share of rolled-out groups in the medium band: heapa {sh:.3f}, "
        f"uniform {su:.3f}", v, "paired t over seeds" + (
            "" if d is None else f": heapa - uniform = {d.fmt(3, signed=True)} "
                                 f"(MDD {d.fmt_mdd(3)})"), _test(d))


def claims(results: dict) -> list[dict]:
    """The papers' qualitative claims, each with the measured numbers and whether it held, by
    the paired t-interval over seeds (no verdict below 3 seeds)."""
    by = _by_method(results)
    seeds = ",".join(str(s) for s in results["seeds"])
    metric = _primary(results)
    found = [
        _to_target_claim(table.of(results), by, metric),
        *(_matched_steps_claim(results, by, other) for other in ("ds", "greso")),
        *(_equivalence_claim(results, by, metric, other) for other in ("ds", "greso")),
        _zero_var_claim(by),
        *_heapa_claims(results, by, metric),
        _medium_band_claim(by),
    ]
    return [c.record(seeds) for c in found]


def _test(d: stats.Interval | None) -> tuple[float | None, int]:
    """A claim's (two-sided paired p-value, seeds): p None below stats.MIN_SEEDS seeds or
    without an interval (a claim's place in the confirmatory family)."""
    if d is None:
        return None, 0
    return (stats.p_value(d) if d.n >= stats.MIN_SEEDS else None), d.n


def _margin_source(results: dict) -> str:
    src = results.get("equivalence_margin_source")
    return f"why this margin: {src}" if src else "no rationale recorded for the margin"


def tost_need(d: stats.Interval, delta: float) -> str:
    """The seeds the two one-sided tests need for 80% power at a true difference of 0, at the
    measured sd of the per-seed differences and at its upper bound (stats.tost_seeds)."""
    if d.n < 2 or not math.isfinite(d.sd):
        return "seeds TOST needs: undefined (1 seed, no sd)"
    hi = stats.sd_upper(d.sd, d.n)
    need = [stats.tost_seeds(x, delta) for x in (d.sd, hi)]
    txt = [f"> {stats.MAX_SEEDS}" if n is None else str(n) for n in need]
    return (f"TOST needs {txt[0]} seeds for 80% power at a true difference of 0 at the measured "
            f"sd {d.sd:.2f}, {txt[1]} at its {round(100 * stats.SD_UPPER)}% upper bound "
            f"{hi:.2f}")


def rollout_ratio(ref: list[dict], rs: list[dict]) -> tuple[stats.Interval | None, str]:
    """Rollouts spent by `ref` over those spent by `rs`, paired per seed (the t-interval of the
    per-seed log ratios, stats.log_ratio), and the per-seed figures as text."""
    by_seed = {r["seed"]: r for r in ref}
    pairs = [(r["seed"], by_seed[r["seed"]]["rollouts"], r["rollouts"]) for r in rs
             if r["seed"] in by_seed and r["rollouts"] > 0 and by_seed[r["seed"]]["rollouts"] > 0]
    if not pairs:
        return None, ""
    text = "; ".join(f"s{s}: {a:,} vs {b:,} at {by_seed[s]['steps']} steps" for s, a, b in pairs)
    return stats.log_ratio([a / b for _, a, b in pairs]), text


# The effects the papers report, for the power analysis: (claim, source, arms (method,
# comparator), what is compared, the effect(s)). Points on the primary metric; "ratio" is a
# factor on rollouts (comparator / method).
PAPER_EFFECTS = (
    ("HeaPA beats uniform GRPO", "HeaPA Tables 1-2 (Qwen3 0.6B-8B)", ("heapa", "uniform"),
     "points", (1.8, 7.2)),
    ("HIVE needs fewer rollouts than DS", "HIVE Table 1 (1.5B)", ("hive", "ds"), "ratio",
     (2.45,)),
)


def power_rows(results: dict) -> list[dict]:
    """Per paper claim: the seeds a paired design needs for 80% power to detect the effect the
    paper reports (stats.seeds_for_power), at the per-seed spread measured here (accuracy
    differences in points; for the rollout ratio, the per-seed log ratios: at matched steps the
    rollouts spent, else rollouts-to-target), and at that sd's stats.SD_UPPER upper bound
    (`seeds_needed_at_sd_hi`, `sd_hi`)."""
    by, tab = _by_method(results), table.of(results)
    metric = _primary(results)
    steps = results.get("budget_kind") == "steps"
    out = []
    for claim, source, (a, b), unit, effects in PAPER_EFFECTS:
        row = {"claim": claim, "source": source, "arms": [a, b], "unit": unit,
               "paper_effects": list(effects), "sd": None, "sd_hi": None, "n": 0,
               "seeds_needed": {}, "seeds_needed_at_sd_hi": {}}
        if by.get(a) and by.get(b):
            if unit == "points":
                d = paired(tab, a, b, metric)
            elif steps:
                d = rollout_ratio(by[b], by[a])[0]
            else:
                d = _log_ratios(_to_target_pairs(tab, b, a, "rollouts_to_target",
                                                 "rollouts"))[0]
            if d is not None and d.n >= 2 and math.isfinite(d.sd):
                row["sd"], row["n"], row["sd_hi"] = d.sd, d.n, stats.sd_upper(d.sd, d.n)
                for key, sd in (("seeds_needed", d.sd), ("seeds_needed_at_sd_hi", row["sd_hi"])):
                    row[key] = {str(e): stats.seeds_for_power(
                        math.log(e) if unit == "ratio" else e, sd) for e in effects}
        out.append(row)
    return out


def power_table(results: dict) -> str:
    """power_rows as a table."""
    up = round(100 * stats.SD_UPPER)
    lines = [f"| claim | paper's effect | arms | per-seed sd here (its {up}% upper bound) | "
             "seeds for 80% power at sd / upper bound |", "|---|---|---|---|---|"]
    for r in power_rows(results):
        fx = ", ".join((f"{e:g}x" if r["unit"] == "ratio" else f"+{e:g} points")
                       for e in r["paper_effects"])
        if r["sd"] is None:
            sd, need = "not measured (arms not run on ≥ 2 common seeds)", "—"
        else:
            sd = (f"{r['sd']:.3f} ({r['sd_hi']:.3f}) (log ratio, {r['n']} seeds)"
                  if r["unit"] == "ratio" else
                  f"{r['sd']:.2f} ({r['sd_hi']:.2f}) points ({r['n']} seeds)")
            need = ", ".join(f"{e}: {_n(v)} / {_n(r['seeds_needed_at_sd_hi'][e])}"
                             for e, v in r["seeds_needed"].items())
        lines.append(f"| {r['claim']} ({r['source']}) | {fx} | {' vs '.join(r['arms'])} | "
                     f"{sd} | {need} |")
    return "\n".join(lines)


def _n(seeds: int | None) -> str:
    return f"> {stats.MAX_SEEDS}" if seeds is None else str(seeds)


def claims_table(results: dict) -> str:
    """One row per claim; the verdict is in the claim's direction ("better" = the claimed
    effect is there with 95% confidence, "worse" = the opposite is); an equivalence claim's is
    "equivalent within ±δ" when it holds (stats.equivalence); and its place in the
    confirmatory family (Holm-adjusted p) or "exploratory"."""
    fam = {x["name"]: x for x in family(results) if x["kind"] == "claim"}
    lines = ["| claim | source | measured | seeds | verdict here | confirmatory? |",
             "|---|---|---|---|---|---|"]
    for c in claims(results):
        note = f" ({c['note']})" if c["note"] else ""
        label = controls_report.family_label(fam.get(c["claim"])) if "p" in c else "—"
        lines.append(f"| {c['claim']} | {c['source']} | {c['measured']}{note} | {c['seeds']} | "
                     f"{c['held']} | {label} |")
    return "\n".join(lines)


def notes_section(results: dict) -> str:
    """compare.settings_notes: each method run at non-default settings, and why."""
    notes = results.get("settings_notes") or {}
    if not notes:
        return "None: compare.settings_notes names no method run at non-default settings."
    return "\n".join(f"- `{name}`: {why}" for name, why in notes.items())


# ----------------------------------------------------------------------------- plots


def plots(results: dict, out_dir: str) -> list[str]:
    """The report's figures, one after another, each written as a PNG in `out_dir`; returns
    their names. Long (about 100 lines) as a list of figures is: each block draws one, on the
    colours and runs set at the top, and none is called twice."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    by = {m: rs for m, rs in _by_method(results, groups=False).items() if rs}
    colors = {m: plt.cm.tab10(i % 10) for i, m in enumerate(by)}
    k, metric = results["k"], _primary(results)
    written = []

    def save(fig, name):
        path = os.path.join(out_dir, name)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    for x, label, name in (("rollouts", "cumulative rollouts", "accuracy_vs_rollouts.png"),
                           ("pflops", "cumulative PFLOPs (cost analysis)",
                            "accuracy_vs_pflops.png"),
                           ("updates", "optimizer updates", "accuracy_vs_updates.png")):
        if not all(r["curve"].get(x) for rs in by.values() for r in rs):
            continue  # results written before the curve had this axis
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for m, rs in by.items():
            for r in rs:  # each seed, thin
                ax.plot(r["curve"][x], r["curve"]["metric"], color=colors[m], alpha=0.35,
                        lw=0.8)
            band = mean_band([(r["curve"][x], r["curve"]["metric"]) for r in rs])
            if band is not None:
                gx, mean, lo, hi = band
                ax.plot(gx, mean, color=colors[m], lw=2,
                        label=f"{m} (mean of {len(rs)} seeds)")
                if len(rs) > 1:
                    ax.fill_between(gx, lo, hi, color=colors[m], alpha=0.18, lw=0)
        t = [r["target"] for r in results["runs"] if r.get("target") is not None]
        if t:
            ax.axhline(float(np.mean(t)), color="gray", ls="--", lw=1,
                       label="target (mean over seeds)")
        ax.set_xlabel(label)
        ax.set_ylabel(f"held-out Avg@{k} ({metric})")
        ax.set_title("thin: each seed; thick: mean; band: pointwise, unpaired 95% t-interval "
                     "over seeds (the paired_difference plots show the comparison)", fontsize=8)
        ax.legend(fontsize=7)
        save(fig, name)
        ref = results["target_method"]
        if by.get(ref) and len(by) > 1:
            fig, ax = plt.subplots(figsize=(6.4, 4.2))
            _plot_paired(ax, table.of(results, groups=False), by, ref, x, colors)
            ax.set_xlabel(label)
            ax.set_ylabel(f"Avg@{k} ({metric}): arm − {ref}, points")
            save(fig, name.replace("accuracy_vs", "paired_difference_vs"))

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for m, rs in by.items():
        for i, r in enumerate(rs):
            z = r["zero_var_curve"]
            for ax, kind in zip(axes, ("easy", "hard"), strict=True):
                ax.plot(z["rollouts"], _smooth(z[kind]), color=colors[m],
                        label=m if i == 0 else None)
    for ax, kind in zip(axes, ("easy (all correct)", "hard (all wrong)"), strict=True):
        ax.set_title(f"zero-variance ratio, {kind}")
        ax.set_xlabel("cumulative rollouts")
    axes[0].set_ylabel("share of rolled-out groups (smoothed)")
    axes[0].legend(fontsize=8)
    save(fig, "zero_variance.png")

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    g = results["group_size"]
    width = 0.8 / max(1, len(by))
    for i, (m, rs) in enumerate(by.items()):
        hs = [r["rolled_pass_hist"] for r in rs if r["rolled_pass_hist"]]
        if not hs:
            continue
        h = np.mean(np.asarray(hs), axis=0)
        ax.bar(np.arange(len(h)) + (i - len(by) / 2 + 0.5) * width, h, width, color=colors[m],
               label=m)
    ax.set_xticks(range(g + 1), [f"{j}/{g}" for j in range(g + 1)])
    ax.set_xlabel("correct responses in a rolled-out group (the prompt's observed pass rate)")
    ax.set_ylabel("share of rolled-out groups")
    ax.legend(fontsize=8)
    save(fig, "sampled_pass_rate.png")

    aug = {m: rs for m, rs in by.items() if any(r["aug"]["aug_reward"] for r in rs)}
    if aug:
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for m, rs in aug.items():
            for i, r in enumerate(rs):
                a = r["aug"]
                ax.plot(a["rollouts"], _smooth(a["aug_reward"]), color=colors[m],
                        label=f"{m} augmented" if i == 0 else None)
                # results files before "seed_rollouts" hold the seed rewards of the steps that
                # had both kinds only: drawn when they line up with the augmented steps
                xs = a.get("seed_rollouts", a["rollouts"])
                if len(xs) == len(a["seed_reward_at_aug"]):
                    ax.plot(xs, _smooth(a["seed_reward_at_aug"]), color=colors[m], ls="--",
                            label=f"{m} seed" if i == 0 else None)
        ax.set_xlabel("cumulative rollouts")
        ax.set_ylabel("mean reward of trained groups (smoothed)")
        ax.set_title("seed vs augmented prompts")
        ax.legend(fontsize=8)
        save(fig, "augmented_vs_seed_reward.png")
    return written


def paired_curves(tab, arm: str, ref: str, x: str) -> list[tuple]:
    """Per common seed, the arm's accuracy curve minus the reference's, (x, difference) at
    every evaluation point of either run within the span both reached (each run linearly
    interpolated between its evaluations)."""
    by_seed = {s: (xs, ys) for s, xs, ys in table.series(tab, ref, x)}
    out = []
    for s, xa, ya in table.series(tab, arm, x):
        if s not in by_seed:
            continue
        xb, yb = by_seed[s]
        lo, hi = max(xa[0], xb[0]), min(xa[-1], xb[-1])
        grid = np.unique(np.concatenate([xa, xb]))
        grid = grid[(grid >= lo) & (grid <= hi)]
        if grid.size:
            out.append((grid, np.interp(grid, xa, ya) - np.interp(grid, xb, yb)))
    return out


def _plot_paired(ax, tab, by: dict, ref: str, x: str, colors: dict) -> None:
    """Each arm minus the reference, paired per seed: thin per seed, thick the mean, band the
    pointwise 95% t-interval over seeds of the paired difference."""
    for m in by:
        if m == ref:
            continue
        curves = paired_curves(tab, m, ref, x)
        for gx, d in curves:
            ax.plot(gx, d, color=colors[m], alpha=0.35, lw=0.8)
        band = mean_band(curves)
        if band is not None:
            gx, mean, lo, hi = band
            ax.plot(gx, mean, color=colors[m], lw=2, label=f"{m} − {ref} ({len(curves)} seeds)")
            if len(curves) > 1:
                ax.fill_between(gx, lo, hi, color=colors[m], alpha=0.18, lw=0)
    ax.axhline(0.0, color="gray", lw=1)
    ax.set_title("paired per seed: thin: each seed; thick: mean; band: pointwise 95% "
                 "t-interval of the paired difference", fontsize=8)
    ax.legend(fontsize=7)


def mean_band(curves: list[tuple], points: int = 50):
    """Curves [(x, y)] of the seeds of one arm on a common x grid: (grid, mean, lo, hi), the
    mean over seeds with its 95% t-interval at each grid point (lo = hi = mean with one seed).
    The grid spans the x every seed reached (0 to the smallest final x), each seed linearly
    interpolated between its evaluations; None when the curves share no span."""
    curves = [(np.asarray(x, float), np.asarray(y, float)) for x, y in curves if len(x)]
    if not curves:
        return None
    lo_x = max(float(x[0]) for x, _ in curves)
    hi_x = min(float(x[-1]) for x, _ in curves)
    if hi_x <= lo_x:
        return None
    grid = np.linspace(lo_x, hi_x, points)
    ys = np.stack([np.interp(grid, x, y) for x, y in curves])
    mean = ys.mean(axis=0)
    if ys.shape[0] < 2:
        return grid, mean, mean, mean
    half = stats.t_quantile(1 - (1 - stats.LEVEL) / 2, ys.shape[0] - 1) * ys.std(
        axis=0, ddof=1) / math.sqrt(ys.shape[0])
    return grid, mean, mean - half, mean + half


def _smooth(y, w: int = 10) -> np.ndarray:
    y = np.asarray(y, float)
    if y.size < w:
        return y
    c = np.cumsum(np.insert(y, 0, 0.0))
    head = c[1:w] / np.arange(1, w)
    return np.concatenate([head, (c[w:] - c[:-w]) / w])


# ----------------------------------------------------------------------------- report


def _budget_text(results: dict) -> str:
    """What every run was matched on, and how closely."""
    runs = [r for r in results["runs"] if not r.get("rollout_target")]
    matched = _matched_text(results)
    rolls = [r["rollouts"] for r in runs]
    if results.get("budget_kind", "rollouts") == "steps":
        n = results["steps_budget"]
        exact = all(r.get("steps") == n for r in runs)
        return (f"Every run{' but the matched ones' if matched else ''}: {n:,} steps (matched "
                "updates; "
                + ("every run took them all" if exact else "SOME RUN TOOK ANOTHER NUMBER OF STEPS")
                + f"), spending {min(rolls):,}–{max(rolls):,} rollouts (each run's in the main "
                "table)" + matched)
    kind = results.get("budget_kind", "rollouts")
    if kind in ("tokens", "pflops"):
        amount = results["token_budget" if kind == "tokens" else "pflops_budget"]
        key = "tokens" if kind == "tokens" else "pflops"
        spent = [r[key] for r in runs]
        unit = "generated tokens" if kind == "tokens" else "PFLOPs (cost analysis)"
        fmt = (lambda v: f"{v:,.0f}") if kind == "tokens" else (lambda v: f"{v:.4g}")
        return (f"Every run{' but the matched ones' if matched else ''}: {fmt(amount)} {unit} "
                f"(ended at the step boundary nearest the budget; runs spent "
                f"{fmt(min(spent))}–{fmt(max(spent))}, and {min(rolls):,}–{max(rolls):,} "
                "rollouts)" + matched)
    budget = results["budget"]
    dev = max(abs(x - budget) for x in rolls)
    within = all(abs(r["rollouts"] - budget) <= r.get("max_step_rollouts", 0) for r in runs)
    step_max = results["batch_size"] * results["group_size"]
    return (f"Every run{' but the matched ones' if matched else ''}: {budget:,} rollouts (ended "
            f"at the step boundary nearest the budget; runs used {min(rolls):,}–{max(rolls):,}, "
            f"at most {dev:,} from the budget; B×G = {step_max:,}, and a step of DS, GRESO or "
            "HIVE rolls out one or more such rounds; "
            + ("every run ended within one of its own steps of the budget"
               if within else "SOME RUN ENDED MORE THAN ONE OF ITS STEPS FROM THE BUDGET") + ")"
            + matched)


def _matched_text(results: dict) -> str:
    """The runs read at another method's rollouts (compare.match_rollouts), per seed."""
    matched = [r for r in results["runs"] if r.get("rollout_target")]
    if not matched:
        return ""
    pairs = ", ".join(f"{m} at {v['reference']}'s"
                      for m, v in (results.get("match_rollouts") or {}).items())
    within = all(abs(r["rollouts"] - r["rollout_target"]) <= r.get("max_step_rollouts", 0)
                 for r in matched)
    per = "; ".join(f"{r['method']} s{r['seed']} {r['rollouts']:,} of {r['rollout_target']:,} "
                    f"in {r.get('steps', 0):,} steps" for r in matched)
    return (f". Matched runs (compare.match_rollouts: {pairs}): each went to the rollouts its "
            "reference spent at the same seed, ending at the step boundary nearest them (after "
            "the step that reaches them, or before a step when less than half of the last "
            f"step's rollouts remain), its steps whatever that came to: {per}; "
            + ("every matched run ended within one of its own steps of its target"
               if within else "SOME MATCHED RUN ENDED MORE THAN ONE OF ITS STEPS FROM ITS TARGET"))


def _target_text(results: dict) -> str:
    """The pre-registered rollouts-to-target target and the censoring rule, in words."""
    metric = _primary(results)
    if results.get("target_value", 0) > 0:
        what = f"{results['target_value']:.1f} points on {metric} (compare.target_value)"
    else:
        what = (f"per seed, `{results['target_method']}`'s final accuracy on {metric} minus "
                f"{results.get('target_margin', 0.0):.1f} points (compare.target_margin): its "
                "value at the budget, not its best evaluation")
    return (f"Target: {what}. A run reaches it at the rollouts (PFLOPs) where its accuracy "
            "curve, linearly interpolated between evaluation points, first reaches it. Every "
            "seed is listed; a run that never reaches it is \"not reached (> its final "
            "rollouts)\" and enters the ratio at its final rollouts (PFLOPs), a lower bound on "
            "its true cost, so the seed's ratio reference / method is an upper bound (≤, the "
            "method censored) or a lower bound (≥, the reference censored). The interval is the "
            "t-interval of the per-seed log ratios (shown as ratios). Rollouts-to-target is only "
            "defined for a run that reaches the target, so a ratio gets a verdict only when "
            "both arms reach it in every seed; otherwise its verdict is \"no verdict\", naming "
            "each arm and seed that fell short, and the censored ratio is shown as a bound. A "
            "seed where neither run reaches the target, or one reaches it at the start, is left "
            "out of the interval and counted.")


def _controls_lines(results: dict, metric: str) -> list[str]:
    """The title, the budget and what the control arms say this testbed can detect."""
    return [
        "# Matched-budget comparison",
        "",
        _budget_text(results) + f"; seeds {results['seeds']}.",
        "",
        "## What this testbed can detect (controls)",
        "",
        "Control arms are not methods: the positive control (`oracle`) trains on the B "
        "candidates whose **current** pass rate, measured each step on the candidates' own "
        "rollouts (only those it trains on are charged), is nearest 0.5; the negative control "
        "(`oracle_negative`) only on groups at zero reward variance (selection/oracle.py). The "
        "headroom bounds pure selection over the pool at matched updates, not augmentation or "
        "extra rollouts per step. Headroom = positive − reference and harm = negative − "
        f"reference, on `{metric}`, paired per seed (95% t-intervals), each beside the "
        "control's steps, optimizer updates and effective share (the share of its groups with "
        "non-zero reward variance: above 0 for the negative control is a leak). Neither ever "
        "appears in the main table or the claims.",
        "",
        *([controls_table(results), "", main_table(results, controls=True), ""]
          if _controls(results) else []),
        controls_text(results),
        "",
        "### Each method's effect as a share of the headroom",
        "",
        "(method − reference) / (positive control − reference), means over the seeds all three "
        "share, with Fieller's 95% interval for the ratio of the two paired means (t, S − 1 "
        "degrees of freedom); unbounded when the headroom itself is not distinguishable from 0.",
        "",
        controls_report.share_table(results),
        "",
    ]


def _statistics_lines(results: dict, k: int, metric: str) -> list[str]:
    """The primary metric, how every comparison is tested, and the confirmatory family."""
    return [
        f"Primary metric: held-out Avg@{k} on `{metric}` (at the eval temperature/top-p), the "
        "bucket pre-registered in the config (compare.metric)"
        + ("." if metric == "all" else "; `all` (every eval prompt) is secondary."),
        "",
        "Statistics: the unit is the seed. A method's accuracy at a seed is its mean over the "
        f"eval prompts (k = {k} samples each, drawn with the seed's evaluation sampling seed, "
        "the same for every arm at that seed: common random numbers, so two identical policies "
        "score identically), so each seed's value carries the eval set's sampling noise; a "
        "comparison takes the per-seed paired differences d_s (same seeds, same eval prompts, "
        "same sampling seed) and gives their mean with a 95% "
        "Student-t interval, S − 1 degrees of freedom. \"better\"/\"worse\" only when the "
        "interval excludes 0 with at least 3 seeds; \"too few seeds for a verdict\" below 3 (the "
        "interval is shown from 2 seeds on). MDD = the true difference these seeds would detect "
        "with 80% power at two-sided 5%, (t(0.975, S−1) + t(0.80, S−1)) · sd(d) / √S, given "
        "twice: at the measured sd of the d_s and at its one-sided "
        f"{round(100 * stats.SD_UPPER)}% upper confidence bound, sd · √((S−1) / "
        f"χ²({1 - stats.SD_UPPER:.2f}, S−1)) (an sd from a few seeds is often well below the "
        "true one); undefined with 1 seed. A \"not distinguishable\" bounds the effect by the "
        "MDD and no further. The spread column puts the seed sd of the d_s beside its "
        "eval-sampling floor, the sd that the k samples per eval prompt alone would give "
        "(binomial, both arms); a seed sd near its floor is eval noise, not run-to-run spread."
        + ("" if "equivalence_margin" not in results else
           " Nor is it equivalence: a claim of equal accuracy is tested by two one-sided tests "
           f"at ±{results['equivalence_margin']:g} points (compare.equivalence_margin, set "
           "before the run), \"equivalent\" when the 90% paired t-interval lies inside the "
           "margin."),
        "",
        controls_report.family_text(results, family(results)),
        "",
    ]


def _accuracy_lines(results: dict, ref: str) -> list[str]:
    """The settings, the starting point and the main table at the matched budget."""
    return [
        "## Settings chosen so mechanisms fire",
        "",
        notes_section(results),
        "",
        "## Starting point",
        "",
        start_table(results),
        "",
        "## Accuracy at equal " + {"steps": "steps (matched updates)",
                                    "tokens": "generated-token budget",
                                    "pflops": "PFLOPs budget"}.get(
            results.get("budget_kind", "rollouts"), "rollout budget")
        + (" (matched runs: at their reference's rollouts)" if _matched_text(results) else ""),
        "",
        f"Steps and optimizer updates (steps × PPO epochs × minibatches, less updates skipped on "
        f"a non-finite loss) beside rollouts. The difference to `{ref}` is paired per seed.",
        "",
        main_table(results),
        "",
        starts_section(results),
        "",
    ]


def _exploratory_lines(results: dict, workdir: str, ref: str, metric: str) -> list[str]:
    """The exploratory sections on accuracy: curve endpoints, noise scale, tuning, best-of
    groups, buckets, ablations, mechanisms and the change from the start."""
    return [
        "## Whole-curve endpoints",
        "",
        "Beside the pre-registered final value, which is a run's noisiest point: the mean "
        "accuracy over the budget (area under the curve), the mean of the last three "
        "evaluations, and ScaleRL's curve R(C) = R0 + (A − R0) / (1 + (C_mid / C)^B) fitted to "
        "each run (curves.py; R0 the step-0 value). " + EXPLORATORY,
        "",
        curve_table(results),
        "",
        "## Gradient noise scale: where selection can pay",
        "",
        noise_table(results),
        "",
        tuning_section(results, os.path.join(workdir, "plots")),
        "",
        *(["## Best-of groups (HIVE's two-run protocol)", "", EXPLORATORY, "",
           best_of_section(results), ""] if results.get("best_of") else []),
        f"## Per-bucket differences vs {ref}",
        "",
        EXPLORATORY + " The primary bucket's rows repeat the main table's verdicts, which are "
        "confirmatory there when declared.",
        "",
        bucket_table(results),
        "",
        "## Ablations: what each mechanism adds",
        "",
        "Each row: the method minus the same method with one mechanism removed or replaced, "
        f"paired per seed, on `{metric}`" + ("" if metric == "all" else " and on `all`") + ". "
        + EXPLORATORY,
        "",
        ablation_table(results),
        "",
        "## Did each method's mechanism run?",
        "",
        mechanisms_table(results),
        "",
        "## Change from the starting point (final minus step 0, paired per seed)",
        "",
        EXPLORATORY,
        "",
        gain_table(results),
        "",
    ]


def _spend_lines(results: dict, ref: str) -> list[str]:
    """What every run spent, the runs re-read at matched spends, the spend to the target, the
    FLOPs counts side by side and the wall time."""
    return [
        "## What every run spent",
        "",
        "Rollouts are every charged response (screening and probe rollouts included); generated "
        "tokens are those responses' tokens, the token budget's unit (compare.budget='tokens'); "
        "prompt tokens, prefilled and not generated, are shown apart. PFLOPs are measured by "
        "XLA's cost analysis over every program the run charged (generation, prompt-entropy "
        "passes, log-prob passes, training), beside the 2N/6N formula and HeaPA's analytic "
        "convention (fit/accounting.py).",
        "",
        spend_table(results),
        "",
        "## The same runs at matched rollouts, tokens and PFLOPs",
        "",
        f"Each method against `{ref}` at each seed, both read at the smaller of their two final "
        "spends in the unit, the primary metric interpolated linearly between evaluation points; "
        "paired per seed, 95% t-intervals. The runs are those of the budget above, re-read, not "
        "rerun: rerun at another budget with compare.budget='tokens' or 'pflops' from the same "
        "warm-start cache. " + EXPLORATORY,
        "",
        matched_table(results),
        "",
        "## Rollouts, tokens and PFLOPs to the target",
        "",
        EXPLORATORY,
        "",
        _target_text(results),
        "",
        efficiency_table(results),
        "",
        "## FLOPs: cost analysis, formula and HeaPA's convention",
        "",
        "Cost analysis counts the padded work the device did (padded rows and prompts, decode "
        "steps run to the longest response, attention over the whole cache); the formula counts "
        "real tokens with causal attention at half. The padding ratio is the formula at the "
        "padded shapes over the formula at the real ones; the residual (cost analysis / formula "
        "/ padding ratio) is what XLA counts beyond matmuls and attention (norms, softmax, "
        "sampling, Adam), a few percent at this model size. HeaPA's convention is the analytic "
        "count of its released trainer (fit/accounting.py says which terms and how it maps onto "
        "each program): the figure to set beside that paper's PFLOPs-to-target.",
        "",
        flops_table(results),
        "",
        "## Wall time by phase (seconds, whole run)",
        "",
        time_table(results),
        "",
    ]


def _plots_lines(plot_paths: list[str], ref: str) -> list[str]:
    return [
        "## Plots",
        "",
        "The accuracy curves' bands are pointwise and unpaired (each arm's own spread over "
        f"seeds); the paired_difference plots show each arm minus `{ref}` per seed with the "
        "pointwise t-band of that paired difference, the comparison the tables test. "
        + EXPLORATORY,
        "",
        *[f"![{os.path.basename(p)}](plots/{os.path.basename(p)})" for p in plot_paths],
        "",
    ]


def _claims_power_lines(results: dict) -> list[str]:
    """The papers' claims as measured here, and the seeds their effects would need."""
    return [
        "## The papers' claims, measured here",
        "",
        "A claim with a paired p-value is in the confirmatory family unless compare.confirmatory "
        "leaves it out (the last column).",
        "",
        claims_table(results),
        "",
        "## Power: seeds needed to see the papers' effects here",
        "",
        "Power is computed only at effect sizes fixed before the run with their source (the "
        "papers'; compare.effect_sizes), never at an effect measured here. For each, the seeds "
        "a paired design needs for 80% power (two-sided 5%), (t(0.975, S−1) + t(0.80, S−1)) · "
        "sd / √S ≤ effect solved for S, at the per-seed sd measured in this comparison and at "
        f"its {round(100 * stats.SD_UPPER)}% upper confidence bound. " + EXPLORATORY,
        "",
        power_table(results),
        "",
        controls_report.power_plan_table(results),
        "",
    ]


def write(results: dict, workdir: str) -> dict:
    """Write `report.md` and `plots/*.png` into `workdir`: {"text": the report, "plots": the
    plot paths}. The sections are built in reading order."""
    plot_paths = plots(results, os.path.join(workdir, "plots"))
    k, metric, ref = results["k"], _primary(results), results["target_method"]
    lines = [
        *_controls_lines(results, metric),
        *_statistics_lines(results, k, metric),
        *_accuracy_lines(results, ref),
        *_exploratory_lines(results, workdir, ref, metric),
        *_spend_lines(results, ref),
        *_plots_lines(plot_paths, ref),
        *_claims_power_lines(results),
    ]
    text = "\n".join(lines)
    with open(os.path.join(workdir, "report.md"), "w") as f:
        f.write(text)
    return {"text": text, "plots": plot_paths}
