"""What the comparison can say: the controls (headroom and harm), a method's effect as a share
of the headroom, the confirmatory family with Holm's correction, and power at the effect sizes
fixed in the config before the run.

- Headroom = positive control minus the reference, harm = negative control minus the
  reference, paired per seed on the primary bucket (evalcells.paired). Each of them reads one of
  four ways: better, worse, not distinguishable (then only a bound: the interval's end), or too
  few seeds (below stats.MIN_SEEDS, no verdict). A headroom below 0 means the positive control
  is invalid (an oracle of the current pass rate never loses to uniform at matched updates
  unless the control or the testbed is broken); a harm above 0 means the negative control is
  not a floor (its groups carried signal: its effective share says how much).
- Share of the headroom: for a method m, mean_s(m_s - ref_s) / mean_s(oracle_s - ref_s) on the
  seeds all three share, with Fieller's 95% interval for the ratio of the two paired means
  (stats.fieller), unbounded when the headroom is not distinguishable from 0.
- Confirmatory family (`compare.confirmatory`, default "all"): each non-control method's
  primary verdict against the reference and each paper claim with a paired p-value; Holm's
  step-down adjustment over the declared family (stats.holm; a member without a p-value, below
  stats.MIN_SEEDS seeds, counts as p = 1, so the family keeps its declared size). Every other
  verdict in the report is exploratory.
- Power only at `compare.effect_sizes` (points, with their source), at the measured sd and at
  its stats.SD_UPPER upper bound (stats.power_plan); never at an observed effect.
"""

from __future__ import annotations

import math

import numpy as np

from frontier_rl.experiment import stats, table
from frontier_rl.experiment.evalcells import (
    by_method,
    controls,
    eval_floor,
    fmt_ms,
    matrix,
    paired,
    primary,
    seeds_of,
)

# compare.effect_sizes when the config predates it: the smallest gain over uniform GRPO the
# papers report for a selection method
DEFAULT_EFFECT_SIZES = {"heapa": {"points": 1.8, "source": "HeaPA Tables 1-2 (Qwen3 0.6B-8B), "
                                                          "its smallest gain over uniform GRPO"}}
EFFECT_OF = {"positive": "headroom", "negative": "harm"}
EXPLORATORY = ("*Exploratory*: outside the confirmatory family (compare.confirmatory), so not "
               "corrected for multiplicity; read its verdicts as leads, not findings.")
UNBOUNDED = "unbounded (headroom not distinguishable from 0)"


def effect_sizes(results: dict) -> dict:
    """The pre-registered effect sizes ({name: {"points", "source"}}) power is computed at."""
    return dict(results.get("effect_sizes") or DEFAULT_EFFECT_SIZES)


def _per_run(rs: list[dict]) -> dict:
    """A control's per-seed budget: steps, optimizer updates and effective share (the share of
    its rolled-out groups with non-zero reward variance, as the main table's column)."""
    return {"steps": [r.get("steps") for r in rs], "updates": [r.get("updates") for r in rs],
            "effective_share": [r["effective_rollouts"] / r["rollouts"] if r.get("rollouts")
                                else None for r in rs]}


def control_effects(results: dict) -> dict[str, dict]:
    """The testbed's selection **headroom** (positive control minus the reference) and **harm**
    (negative control minus the reference) on the primary bucket, paired per seed: mean, 95%
    interval, sd of the per-seed differences and its upper bound, the eval-sampling floor of
    that sd, MDD (at both sds), verdict, power at the pre-registered effect sizes, and the
    control's steps, updates and effective share per seed. Keyed "headroom" / "harm" (with the
    control's name when a kind has several arms)."""
    by, tab = by_method(results, groups=False), table.of(results, groups=False)
    ref, metric = results["target_method"], primary(results)
    kinds = list(controls(results).values())
    out: dict[str, dict] = {}
    for m, kind in controls(results).items():
        name = EFFECT_OF[kind] if kinds.count(kind) == 1 else f"{EFFECT_OF[kind]} ({m})"
        entry = {"control": m, "kind": kind, "reference": ref, "bucket": metric,
                 **_per_run(by.get(m, []))}
        d = paired(tab, m, ref, metric) if by.get(m) and by.get(ref) else None
        if d is None:
            entry["verdict"] = "not measured (control or reference missing)"
        else:
            entry.update(mean=d.mean, lo=d.lo, hi=d.hi, n=d.n, sd=d.sd,
                         sd_hi=stats.sd_upper(d.sd, d.n), mdd=d.mdd(), mdd_hi=d.mdd_hi(),
                         verdict=stats.verdict(d), p=stats.p_value(d),
                         eval_floor_sd=eval_floor(tab, m, ref, metric),
                         power=stats.power_plan(d.sd, d.n, effect_sizes(results)))
        out[name] = entry
    return out


def _effect_text(e: dict) -> str:
    if "mean" not in e:
        return e["verdict"]
    return stats.Interval(e["mean"], e["lo"], e["hi"], e["n"], e["sd"]).fmt(signed=True)


def _num(x, digits: int = 1) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def _seeds(n) -> str:
    return f"> {stats.MAX_SEEDS}" if n is None else str(n)


def spread_text(sd, floor) -> str:
    """`seed sd 1.2, eval-sampling floor 0.4`: the paired sd beside what eval sampling alone
    would give (a seed sd near its floor is eval noise, not run-to-run spread)."""
    return f"seed sd {_num(sd, 2)}, eval-sampling floor {_num(floor, 2)}"


def power_cell(plan: dict) -> str:
    """`heapa +1.8: 12 / 40` per effect size: seeds at the sd / at its upper bound."""
    return "; ".join(f"{name} +{p['points']:g}: " + (
        "—" if p["sd"] is None else f"{_seeds(p['seeds'])} / {_seeds(p['seeds_at_sd_hi'])}")
        for name, p in plan.items()) or "—"


def controls_table(results: dict) -> str:
    """Headroom and harm, one row each, beside each control's steps, updates and effective
    share (mean ± sd over seeds)."""
    sizes = ", ".join(f"{n} +{e['points']:g} points ({e['source']})"
                      for n, e in effect_sizes(results).items())
    up = round(100 * stats.SD_UPPER)
    lines = ["| effect | control − reference | paired difference [95% CI] | verdict | spread | "
             f"MDD (80% power) at sd / sd's {up}% upper bound | seeds for 80% power at the "
             "pre-registered effects, at sd / upper bound | control steps | control updates | "
             "control effective share |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, e in control_effects(results).items():
        has = "mean" in e
        lines.append(
            f"| {name} | {e['control']} − {e['reference']} | {_effect_text(e)} | "
            f"{e['verdict']} | {spread_text(e.get('sd'), e.get('eval_floor_sd')) if has else '—'}"
            f" | {_num(e.get('mdd'))} / {_num(e.get('mdd_hi'))} | "
            f"{power_cell(e['power']) if has else '—'} | {fmt_ms(e['steps'], 0)} | "
            f"{fmt_ms(e['updates'], 0)} | {fmt_ms(e['effective_share'], 2)} |")
    return "\n".join(lines) + f"\n\nPre-registered effect sizes (compare.effect_sizes): {sizes}."


def _mdds(results: dict) -> dict[str, float]:
    """Each non-control method's MDD against the reference on the primary bucket."""
    by, ref, metric = by_method(results), results["target_method"], primary(results)
    out, tab = {}, table.of(results)
    for m, rs in by.items():
        if m == ref or m in controls(results) or not rs or not by.get(ref):
            continue
        d = paired(tab, m, ref, metric)
        if d is not None and d.mdd() is not None:
            out[m] = d.mdd()
    return out


def _headroom_text(head: dict | None, results: dict) -> str:
    metric = primary(results)
    if head is None or "mean" not in head:
        return ("No positive control was measured, so nothing here shows that prompt "
                "selection could have moved the primary metric at this budget: a \"not "
                "distinguishable\" below bounds a method's effect by its MDD and says nothing "
                "about whether any method could have done better (run the `:controls` preset "
                "on the same budget, pool and seeds).")
    v, fx = head["verdict"], _effect_text(head)
    if v == stats.TOO_FEW:
        return (f"The headroom ({fx} points on `{metric}`, {head['n']} seed(s)) has no verdict: "
                f"at least {stats.MIN_SEEDS} seeds are needed.")
    if v == "worse":
        return (f"THE POSITIVE CONTROL IS INVALID: it is below the reference ({fx} points on "
                f"`{metric}`, 95% CI wholly below 0). An oracle of each prompt's current pass "
                "rate should never lose to the reference at matched updates; something is "
                "wrong with the control (its steps or updates, its measurement) or the testbed, "
                "and no verdict here can be read against it.")
    if v == "better":
        return (f"Knowing each prompt's current pass rate buys {fx} points on `{metric}` at "
                "this budget: the testbed responds to selection, and the headroom is what "
                "choosing the prompts of an update could gain here. A method \"not "
                "distinguishable\" from the reference rules out effects above its MDD, not "
                "below.")
    mdds = _mdds(results)
    out = (f"The headroom ({fx} points on `{metric}`) is not distinguishable from 0: the "
           f"positive control gained at most {head['hi']:+.1f} points here (upper end of its "
           "95% interval).")
    if not mdds:
        return out + " No method was compared with the reference here."
    mdd_txt = "; ".join(f"{m} {x:.1f}" for m, x in mdds.items())
    return out + (
        f" This comparison's MDDs against the reference are {mdd_txt} points; where an MDD "
        f"exceeds {head['hi']:+.1f}, even the oracle's largest plausible gain was below what the "
        "design could detect, so that method's \"not distinguishable\" bounds its effect by the "
        "MDD and cannot tell it from no selection at all.")


def _harm_text(harm: dict | None) -> str:
    if harm is None or "mean" not in harm:
        return ""
    v, fx = harm["verdict"], _effect_text(harm)
    share = fmt_ms(harm["effective_share"], 2)
    if v == stats.TOO_FEW:
        return (f"The harm ({fx} points, {harm['n']} seed(s)) has no verdict: at least "
                f"{stats.MIN_SEEDS} seeds are needed.")
    if v == "better":
        return (f"THE NEGATIVE CONTROL IS NOT A FLOOR: it is above the reference ({fx} points, "
                "95% CI wholly above 0). Training only on zero-variance groups should give no "
                f"gradient; its effective share ({share}) shows how many of its groups carried "
                "signal (a leak), or the reference itself loses ground over training.")
    if v == "worse":
        return (f"Training only on zero-reward-variance groups costs {fx} points (effective "
                f"share {share}): the instrument sees harm, so a method that wasted its "
                "updates on such groups would show as worse.")
    return (f"The harm ({fx} points, effective share {share}) is not distinguishable from 0: "
            f"the negative control lost at most {-harm['lo']:.1f} points here (lower end of its "
            "95% interval), so the policy moves little in this many steps whatever it trains "
            "on; a method that wastes updates could not be shown worse by more than that.")


def controls_text(results: dict) -> str:
    """What the other verdicts can mean given the headroom and harm, in words: a verdict for
    each (better / worse / not distinguishable / too few seeds), bounds where there is none."""
    eff = control_effects(results)
    head = next((e for e in eff.values() if e["kind"] == "positive"), None)
    harm = next((e for e in eff.values() if e["kind"] == "negative"), None)
    return " ".join(t for t in (_headroom_text(head, results), _harm_text(harm)) if t)


# ----------------------------------------------------------------------------- share


def _seed_means(tab, method: str, seeds: list[int], bucket: str) -> np.ndarray | None:
    m = matrix(tab, method, seeds, -1, bucket)
    return None if m is None else stats.seed_means(m)


def headroom_shares(results: dict) -> dict[str, dict]:
    """Per non-control method: the share of the positive control's headroom it recovers on the
    primary bucket, mean_s(m_s - ref_s) / mean_s(oracle_s - ref_s) over the seeds all three
    share, with its 95% Fieller interval (stats.fieller; lo and hi None when it is unbounded,
    `bounded` False); empty without a positive control."""
    ctl = controls(results)
    pos = next((m for m, kind in ctl.items() if kind == "positive"), None)
    by, ref, metric = by_method(results), results["target_method"], primary(results)
    if pos is None or not by.get(pos) or not by.get(ref):
        return {}
    tab = table.of(results)
    out = {}
    for m, rs in by.items():
        if m == ref or m in ctl or not rs:
            continue
        seeds = sorted(set(seeds_of(tab, m)) & set(seeds_of(tab, pos)) & set(seeds_of(tab, ref)))
        x, o, b = (_seed_means(tab, v, seeds, metric) for v in (m, pos, ref))
        if not seeds or x is None or o is None or b is None:
            continue
        r = stats.fieller(x - b, o - b)
        head = stats.seed_interval(o - b)
        out[m] = {"control": pos, "reference": ref, "bucket": metric, "n": r.n,
                  "share": r.estimate, "lo": r.lo if r.bounded else None,
                  "hi": r.hi if r.bounded else None, "bounded": r.bounded,
                  "headroom_below_zero": bool(head.n >= stats.MIN_SEEDS and head.hi < 0)}
    return out


def share_text(s: dict, short: bool = False) -> str:
    """`recovers 40% [12%, 75%] of the oracle's headroom`, or why no interval; short: the
    numbers alone (`40% [12%, 75%]`), for a table column."""
    est = "—" if not math.isfinite(s["share"]) else f"{100 * s['share']:.0f}%"
    what = "" if short else " of the oracle's headroom"
    if s["headroom_below_zero"]:
        return f"not read: the positive control is below the reference (share {est})"
    if s["n"] < 2:
        return f"{est} [—] (1 seed)" if short else f"recovers {est}{what} [—] (1 seed)"
    if not s["bounded"]:
        return (f"{est}, {UNBOUNDED}" if short else
                f"recovers {est}{what}, 95% interval {UNBOUNDED}")
    body = f"{est} [{100 * s['lo']:.0f}%, {100 * s['hi']:.0f}%]"
    return body if short else f"recovers {body}{what}"


def console_lines(results: dict) -> list[str]:
    """What the console prints after the main table: each control's effect with its verdict,
    and each method's share of the headroom (the yardstick of the other verdicts)."""
    out = []
    for name, e in control_effects(results).items():
        fx = f"{e['mean']:+.1f} [{e['lo']:+.1f}, {e['hi']:+.1f}]" if "mean" in e else "—"
        out.append(f"{name} ({e['control']} − {e['reference']}): {fx} points on "
                   f"{e['bucket']}, {e['verdict']}")
    out += [f"{m} {share_text(s)}" for m, s in headroom_shares(results).items()]
    return out


def share_table(results: dict) -> str:
    """headroom_shares as a table, or why there is none."""
    shares = headroom_shares(results)
    if not shares:
        return "(no share of the headroom: no positive control, or no reference, was run)"
    lines = ["| method | share of the headroom (95% Fieller interval) | seeds |", "|---|---|---|"]
    lines += [f"| {m} | {share_text(s)} | {s['n']} |" for m, s in shares.items()]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- family


def _declared(results: dict, name: str) -> bool:
    spec = results.get("confirmatory_declared", "all")
    return spec == "all" or name in spec


def confirmatory(results: dict, claims: list[dict]) -> list[dict]:
    """The confirmatory family: every non-control method's primary verdict against the
    reference, then every claim (report.claims) with a paired p-value ("p" in it), each kept
    when compare.confirmatory names it (or is "all"); with its p-value (None below
    stats.MIN_SEEDS seeds, counted as 1) and its Holm-adjusted p-value over the family. A claim
    that is the same paired test as a method's verdict (its `pair` is that method and the
    reference) is listed last, `same_as` the method, and not counted twice."""
    by, ref, metric = by_method(results), results["target_method"], primary(results)
    out, tab = [], table.of(results)
    for m, rs in by.items():
        if m == ref or m in controls(results) or not rs or not by.get(ref):
            continue
        if _declared(results, m):
            d = paired(tab, m, ref, metric)
            ok = d is not None and d.n >= stats.MIN_SEEDS
            out.append({"name": m, "kind": "method", "n": 0 if d is None else d.n,
                        "p": stats.p_value(d) if ok else None,
                        "p_rank": stats.signed_rank_p(d) if d is not None else None})
    tested = {frozenset((x["name"], ref)): x for x in out}
    repeats = []
    for c in claims:
        if "p" in c and _declared(results, c["claim"]):
            same = tested.get(frozenset(c.get("pair") or ()))
            (repeats if same else out).append(
                {"name": c["claim"], "kind": "claim", "n": c.get("n", 0), "p": c["p"],
                 **({"same_as": same["name"]} if same else {})})
    adj = stats.holm([1.0 if x["p"] is None else x["p"] for x in out]) if out else []
    for x, a in zip(out, adj, strict=True):
        x["p_holm"] = a
    for x in repeats:  # the same paired test as a method's verdict: counted once
        x["p_holm"] = next(y["p_holm"] for y in out if y["name"] == x["same_as"])
    return out + repeats


def holm_verdict(d, member: dict | None, control: bool = False) -> str:
    """The verdict a paired difference `d` earns where it stands: in the confirmatory family
    (`member`, from `confirmatory`) "better" / "worse" only when its Holm-adjusted p-value is
    below the family-wise level, else "not distinguishable after Holm" (or at this budget);
    outside it, the unadjusted verdict marked exploratory (a control's marked as a control)."""
    if d is None:
        return "—"
    v = stats.verdict(d)
    if member is None:
        return f"{v} (control)" if control else f"{v} (exploratory)"
    if v == stats.TOO_FEW or member.get("p_holm") is None:
        return v
    if member["p_holm"] < 1 - stats.LEVEL:
        return v
    return ("not distinguishable after Holm" if v in ("better", "worse")
            else stats.NOT_DISTINGUISHABLE)


def family_label(member: dict | None) -> str:
    """`confirmatory (Holm-adjusted p = 0.012)`, with what Holm changed; `exploratory` for a
    verdict outside the family."""
    if member is None:
        return "exploratory"
    if member["p"] is None:
        return f"confirmatory (no p-value: fewer than {stats.MIN_SEEDS} seeds; counted as 1)"
    lost = member["p"] < 1 - stats.LEVEL <= member["p_holm"]
    rank = member.get("p_rank")
    return (f"confirmatory (Holm-adjusted p = {member['p_holm']:.3g}"
            + ("; not significant after Holm" if lost else "")
            + ("" if rank is None else f"; Wilcoxon signed-rank p = {rank:.3g}") + ")")


def family_text(results: dict, family: list[dict]) -> str:
    """The declared family in words: its members, and any name the config declared that
    nothing measured."""
    spec = results.get("confirmatory_declared", "all")
    names = {x["name"] for x in family}
    missing = [] if spec == "all" else [n for n in spec if n not in names]
    tests = sum("same_as" not in x for x in family)
    return (f"Confirmatory family ({'all, the default' if spec == 'all' else 'declared'} "
            f"compare.confirmatory): {tests} tests, Holm's step-down correction at "
            f"family-wise {1 - stats.LEVEL:g}: "
            + ("; ".join(f"{x['name']} ({family_label(x)}"
                         + (f", the same test as {x['same_as']}'s verdict" if "same_as" in x
                            else "") + ")" for x in family) or "none")
            + "." + (f" Declared but not measured: {'; '.join(missing)}." if missing else "")
            + " Every other verdict in this report is exploratory.")


# ----------------------------------------------------------------------------- power


def power_plan_table(results: dict) -> str:
    """Per comparison against the reference on the primary bucket (methods and controls): the
    seeds needed for 80% power at each pre-registered effect size, at the measured sd and at its
    upper bound (stats.power_plan); the measured mean never enters."""
    by, ref, metric = by_method(results), results["target_method"], primary(results)
    up, tab = round(100 * stats.SD_UPPER), table.of(results)
    lines = [f"| comparison | seeds | sd (its {up}% upper bound) | seeds for 80% power at sd / "
             "upper bound |", "|---|---|---|---|"]
    for m, rs in by.items():
        if m == ref or not rs or not by.get(ref):
            continue
        d = paired(tab, m, ref, metric)
        if d is None or d.n < 2:
            lines.append(f"| {m} − {ref} | {0 if d is None else d.n} | — | — |")
            continue
        plan = stats.power_plan(d.sd, d.n, effect_sizes(results))
        lines.append(f"| {m} − {ref} | {d.n} | {d.sd:.2f} ({stats.sd_upper(d.sd, d.n):.2f}) | "
                     f"{power_cell(plan)} |")
    return "\n".join(lines)
