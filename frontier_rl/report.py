"""The comparison report: markdown tables, PNG plots and the papers' claims checked.

`write(results, workdir)` turns `compare.collect`'s results into `report.md` and `plots/*.png`.
Accuracy is given as the mean over seeds with a 95% interval from a bootstrap over seeds and
eval prompts, and every method is compared with the reference (`compare.target`) paired on the
same seeds and prompts: "better", "worse" or "not distinguishable at this budget" (stats.py).
Other tables give mean ± std over seeds (sample std). The mechanisms table shows, per method,
the cumulative counters that prove its mechanism ran (a required one at zero is flagged).
Ratios:

- rollouts-to-target ratio = reference (DS) rollouts / method rollouts, as HIVE reports its
  "x fewer rollouts than DS" (> 1 = fewer rollouts);
- PFLOPs-to-target ratio = method PFLOPs / uniform-GRPO PFLOPs, as HeaPA reports "less compute"
  (< 1 = cheaper).

A method that never reaches the target within the budget has no X-to-target (shown as "—",
with how many seeds reached it).
"""

from __future__ import annotations

import math
import os

import numpy as np

from frontier_rl import stats
from frontier_rl.stats import first_reaching


def _by_method(results: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {m: [] for m in results["methods"]}
    for r in results["runs"]:
        out.setdefault(r["method"], []).append(r)
    return out


def _ms(values) -> tuple[float, float, int]:
    v = [x for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))]
    if not v:
        return float("nan"), float("nan"), 0
    return float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else 0.0, len(v)


def _fmt(values, digits: int = 1) -> str:
    m, s, n = _ms(values)
    if n == 0:
        return "—"
    if n == 1:
        return f"{m:,.{digits}f}"
    return f"{m:,.{digits}f} ± {s:,.{digits}f}"


# ----------------------------------------------------------------------------- tables


POOLED = ("bench_mean", "all")


def _bucket_columns(names, pooled: tuple[str, ...] = ()) -> list[str]:
    """Per-bucket columns in sorted order, then the pooled ones asked for that are present
    (`bench_mean`, the unweighted mean over benchmarks, only exists with an eval suite)."""
    names = set(names)
    return sorted(names - set(POOLED)) + [p for p in pooled if p in names or p == "all"]


def _cells(r: dict, point: int = -1, bucket: str = "all") -> np.ndarray | None:
    """Per-prompt accuracy (correct samples / k) of run r at eval `point`, in `bucket`."""
    counts = r["curve"].get("correct_counts") or []
    if not counts or counts[point] is None:
        return None
    c = np.asarray(counts[point], float)
    if bucket == "bench_mean":
        # The unweighted mean over benchmarks: weight each prompt by N / (B * n_its_bucket), so
        # the cells' plain mean is the mean of the per-benchmark means.
        labels = np.asarray(r.get("eval_buckets") or [])
        if labels.shape != c.shape:
            return None
        names, inverse, sizes = np.unique(labels, return_inverse=True, return_counts=True)
        return c * (len(c) / (len(names) * sizes[inverse]))
    if bucket != "all":
        keep = np.asarray([b == bucket for b in (r.get("eval_buckets") or [])], bool)
        if keep.shape != c.shape:
            return None
        c = c[keep]
    return c


def _matrix(rs: list[dict], seeds: list[int], point: int = -1, bucket: str = "all"
            ) -> np.ndarray | None:
    """[seeds, prompts] accuracy in points, rows in `seeds` order; None if any is missing."""
    by_seed = {r["seed"]: r for r in rs}
    rows = [_cells(by_seed[s], point, bucket) if s in by_seed else None for s in seeds]
    if not rows or any(x is None for x in rows) or len({x.shape for x in rows}) != 1:
        return None
    return 100.0 * np.stack(rows) / _k_of(rs)


def _k_of(rs: list[dict]) -> int:
    return int(rs[0]["k"])


def _strata(rs: list[dict], bucket: str) -> np.ndarray | None:
    """The eval prompts' buckets (resampled within) for the pooled metrics ("all" and the
    unweighted "bench_mean"); one stratum else."""
    b = rs[0].get("eval_buckets")
    return np.asarray(b) if bucket in ("all", "bench_mean") and b else None


def accuracy(rs: list[dict], bucket: str = "all") -> stats.Interval | None:
    """Mean final accuracy of a method's runs with its 95% interval (seeds x eval prompts)."""
    m = _matrix(rs, sorted(r["seed"] for r in rs), -1, bucket)
    return None if m is None else stats.interval(m, strata=_strata(rs, bucket))


def paired(a: list[dict], b: list[dict], bucket: str = "all", point_a: int = -1,
           point_b: int = -1) -> stats.Interval | None:
    """Final accuracy of a minus b on their common seeds and the same eval prompts."""
    seeds = sorted({r["seed"] for r in a} & {r["seed"] for r in b})
    ma, mb = _matrix(a, seeds, point_a, bucket), _matrix(b, seeds, point_b, bucket)
    if ma is None or mb is None or ma.shape != mb.shape:
        return None
    return stats.paired(ma, mb, strata=_strata(a, bucket))


def main_table(results: dict) -> str:
    k, metric = results["k"], results["metric"].rsplit("/", 1)[1]
    by = _by_method(results)
    ref = results["target_method"]
    buckets = _bucket_columns({b for r in results["runs"] for b in r["final_buckets"]},
                              ("bench_mean",))
    head = (f"| method | seeds | rollouts | PFLOPs | Avg@{k} {metric} at budget [95% CI] | "
            f"vs {ref} [95% CI] | verdict | " + " | ".join(buckets)
            + " | zero-var easy / hard | effective share |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for m, rs in by.items():
        if not rs:
            continue
        eff = [r["effective_rollouts"] / r["rollouts"] if r["rollouts"] else None for r in rs]
        acc = accuracy(rs, metric)
        acc_txt = acc.fmt() if acc is not None else _fmt([r["final"] for r in rs])
        if m == ref or not by.get(ref):
            diff_txt, verdict = "—", "reference" if m == ref else "—"
        else:
            d = paired(rs, by[ref], metric)
            diff_txt = d.fmt(signed=True) if d is not None else "—"
            verdict = stats.verdict(d) if d is not None else "no common seeds"
        lines.append(
            f"| {m} | {len(rs)} | {_fmt([r['rollouts'] for r in rs], 0)} | "
            f"{_fmt([r['pflops'] for r in rs], 4)} | {acc_txt} | {diff_txt} | {verdict} | "
            + " | ".join(_fmt([r["final_buckets"].get(b) for r in rs]) for b in buckets)
            + f" | {_fmt([r['zero_var_easy'] for r in rs], 2)} / "
            f"{_fmt([r['zero_var_hard'] for r in rs], 2)} | {_fmt(eff, 2)} |")
    return "\n".join(lines)


def _num(x, default: float = float("nan")) -> float:
    """A number from a metrics record (non-finite values are stored as strings)."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return default


def start_table(results: dict) -> str:
    """Where every run started: the shared warm start and the step-0 held-out accuracy."""
    k = results["k"]
    runs = results["runs"]
    buckets = _bucket_columns({b for r in runs for b in r["curve"]["buckets"]}, POOLED)
    st = next((r["start"] for r in runs if r.get("start")), {})
    head = "| seed | " + " | ".join(f"Avg@{k} {b} at step 0" for b in buckets) + " |"
    lines = []
    if st:
        acc = _num(st.get("check_acc"))
        front = _num(st.get("frontier_acc"))
        check = ("no held-out check (warmstart.target_acc = 0)" if math.isnan(acc) else
                 f"held-out greedy exact match {100 * acc:.1f}% on the warm-start buckets"
                 + ("" if math.isnan(front) else
                    f" and {100 * front:.1f}% on the next-harder bucket, never trained on"))
        lines += [f"Warm start: {int(_num(st.get('steps'), 0)):,} supervised steps, {check} "
                  f"(loss {_num(st.get('loss')):.4f}); every method and seed starts from it.",
                  ""]
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for seed in results["seeds"]:
        r = next((x for x in runs if x["seed"] == seed and x["curve"]["step"]
                  and x["curve"]["step"][0] == 0), None)
        if r is None:
            continue
        lines.append(f"| {seed} | " + " | ".join(
            f"{r['curve']['buckets'].get(b, [float('nan')])[0]:.1f}" for b in buckets) + " |")
    return "\n".join(lines)


def gain_table(results: dict) -> str:
    """Final minus step-0 accuracy per bucket, paired on seeds and prompts, with 95% CIs."""
    by = _by_method(results)
    buckets = _bucket_columns({b for r in results["runs"] for b in r["final_buckets"]}, POOLED)
    head = "| method | " + " | ".join(f"{b}: change [95% CI]" for b in buckets) + " |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for m, rs in by.items():
        if not rs:
            continue
        cells = []
        for b in buckets:
            d = paired(rs, rs, b, point_a=-1, point_b=0)
            if d is None:
                cells.append("—")
                continue
            word = {"better": "rose", "worse": "fell"}.get(stats.verdict(d), "n.d.")
            cells.append(f"{d.fmt(signed=True)} {word}")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def mechanisms_table(results: dict) -> str:
    """Cumulative mechanism counters per method (summed over seeds); a counter the method
    requires (compare.required_mechanisms) that stayed at zero is shown as **0 (!)**."""
    mech = results.get("mechanisms", {})
    req = results.get("mechanisms_required", {})
    names = sorted({n for c in mech.values() for n in c} | {n for r in req.values() for n in r})
    if not names:
        return "(no run reported mechanism counters)"
    lines = ["| method | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for m in results["methods"]:
        c, need = mech.get(m, {}), set(req.get(m, []))
        cells = []
        for n in names:
            v = c.get(n)
            if n in need and not v:
                cells.append("**0 (!)**")
            elif v is None:
                cells.append("·")
            else:
                cells.append(f"{v:,}" + ("" if n in need else "*"))
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    missing = results.get("mechanisms_missing") or {}
    verdict = ("Every method's required counters are non-zero: each mechanism ran."
               if not missing else "MECHANISMS THAT NEVER RAN: " + "; ".join(
                   f"{m}: {', '.join(v)}" for m, v in missing.items()))
    return "\n".join(lines) + (
        "\n\nCounts are totals over seeds; `·` = not applicable to the method, `*` = counted but "
        "not required of it. " + verdict)


def _to_target(rs: list[dict], key: str) -> tuple[str, list]:
    vals = [r[key] for r in rs]
    reached = sum(v is not None for v in vals)
    digits = 0 if key == "rollouts_to_target" else 4
    return f"{_fmt(vals, digits)} ({reached}/{len(rs)})", vals


def efficiency_table(results: dict) -> str:
    by = _by_method(results)
    ref, tgt = results["rollout_reference"], results["target_method"]
    lines = [f"| method | rollouts-to-target (seeds reaching) | ratio {ref} / method | "
             f"PFLOPs-to-target | ratio method / {tgt} |", "|---|---|---|---|---|"]
    ref_r = {r["seed"]: r["rollouts_to_target"] for r in by.get(ref, [])}
    tgt_p = {r["seed"]: r["pflops_to_target"] for r in by.get(tgt, [])}
    for m, rs in by.items():
        if not rs:
            continue
        r_txt, _ = _to_target(rs, "rollouts_to_target")
        p_txt, _ = _to_target(rs, "pflops_to_target")
        ratio_r = [ref_r[r["seed"]] / r["rollouts_to_target"]
                   if r["rollouts_to_target"] and ref_r.get(r["seed"]) else None for r in rs]
        ratio_p = [r["pflops_to_target"] / tgt_p[r["seed"]]
                   if r["pflops_to_target"] and tgt_p.get(r["seed"]) else None for r in rs]
        lines.append(f"| {m} | {r_txt} | {_fmt(ratio_r, 2)} | {p_txt} | {_fmt(ratio_p, 2)} |")
    return "\n".join(lines)


def time_table(results: dict) -> str:
    by = _by_method(results)
    parts = ("generate", "verify", "entropy", "update", "select", "eval")
    lines = ["| method | " + " | ".join(f"{p} (s)" for p in parts) + " | total (s) |",
             "|---|" + "---|" * (len(parts) + 1)]
    for m, rs in by.items():
        if not rs:
            continue
        cells = [_fmt([r["time_s"][p] for r in rs], 1) for p in parts]
        total = _fmt([sum(r["time_s"].values()) for r in rs], 1)
        lines.append(f"| {m} | " + " | ".join(cells) + f" | {total} |")
    return "\n".join(lines)


def flops_table(results: dict) -> str:
    by = _by_method(results)
    lines = ["| method | PFLOPs (cost analysis) | PFLOPs (formula) | cost analysis / formula | "
             "padding ratio | residual |", "|---|---|---|---|---|---|"]
    for m, rs in by.items():
        if not rs:
            continue
        ratio = [r["pflops"] / r["pflops_formula"] if r["pflops_formula"] else None for r in rs]
        resid = [q / r["padding_ratio"] if q and r["padding_ratio"] else None
                 for q, r in zip(ratio, rs, strict=True)]
        lines.append(f"| {m} | {_fmt([r['pflops'] for r in rs], 4)} | "
                     f"{_fmt([r['pflops_formula'] for r in rs], 4)} | {_fmt(ratio, 3)} | "
                     f"{_fmt([r['padding_ratio'] for r in rs], 3)} | {_fmt(resid, 3)} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- claims


def _medium_share(r: dict) -> float | None:
    h = r["rolled_pass_hist"]
    return float(sum(h[1:-1])) if len(h) > 2 else None


def claims(results: dict) -> list[dict]:
    """The papers' qualitative claims, each with the measured numbers and whether it held."""
    by = _by_method(results)
    seeds = ",".join(str(s) for s in results["seeds"])

    def have(*ms):
        return all(by.get(m) for m in ms)

    def mean(m, key):
        return _ms([r[key] for r in by[m]])[0]

    out = []

    def add(claim, source, methods, measured, held, note=""):
        out.append({"claim": claim, "source": source, "methods": methods, "measured": measured,
                    "held": held, "note": note, "seeds": seeds})

    metric = results["metric"].rsplit("/", 1)[1]

    def compare(a, b):
        """Final accuracy of a vs b: means, the verdict on "a above b", the paired CI."""
        va, vb = mean(a, "final"), mean(b, "final")
        d = paired(by[a], by[b], metric)
        if d is None:
            return va, vb, "n/a", "no per-prompt eval counts on common seeds"
        return va, vb, stats.verdict(d), f"{a} - {b} = {d.fmt(signed=True)} points (95% CI)"

    def seedwise(a, b, value, lower_is_better=False):
        """A per-run quantity of a vs b, paired by seed; bootstrap over seeds."""
        sa = {r["seed"]: value(r) for r in by[a]}
        sb = {r["seed"]: value(r) for r in by[b]}
        common = [x for x in sorted(sa) if x in sb and sa[x] is not None and sb[x] is not None]
        if not common:
            return None, "n/a"
        diff = np.array([[sa[x] - sb[x]] for x in common], float)
        if lower_is_better:
            diff = -diff
        d = stats.interval(diff)
        return d, stats.verdict(d)

    def zv(r):
        return r["zero_var_easy"] + r["zero_var_hard"]

    # 1. HIVE reaches DS's accuracy with fewer rollouts (HIVE Table 1).
    if have("hive", "ds"):
        cells = []
        for r_ds in by["ds"]:
            r_h = next((r for r in by["hive"] if r["seed"] == r_ds["seed"]), None)
            if r_h is None:
                continue
            t = r_ds["final"]
            x_ds = first_reaching(r_ds["curve"], t, "rollouts")
            x_h = first_reaching(r_h["curve"], t, "rollouts")
            cells.append(f"s{r_ds['seed']}: DS final {t:.1f} at {x_ds:,.0f}; HIVE "
                         + (f"{x_h:,.0f}" if x_h is not None else "not reached"))
        a, b, v, note = compare("hive", "ds")
        add("HIVE reaches DS's accuracy with fewer rollouts", "HIVE Table 1", "hive, ds",
            "; ".join(cells) + f"; accuracy at equal rollouts: hive {a:.1f}, ds {b:.1f}", v,
            note + "; the verdict is on accuracy at the equal budget")
    else:
        add("HIVE reaches DS's accuracy with fewer rollouts", "HIVE Table 1", "hive, ds",
            "not run", "n/a", "add hive and ds to compare.run")
    # 2. HIVE's zero-variance ratios are lower than DS's and GRESO's (HIVE Fig. 5).
    others = [m for m in ("ds", "greso") if by.get(m)]
    if by.get("hive") and others:
        zh = mean("hive", "zero_var_easy") + mean("hive", "zero_var_hard")
        zo = {m: mean(m, "zero_var_easy") + mean(m, "zero_var_hard") for m in others}
        res = {m: seedwise("hive", m, zv, lower_is_better=True) for m in others}
        words = {v for _, v in res.values()}
        v = words.pop() if len(words) == 1 else "mixed: " + "; ".join(
            f"vs {m} {w}" for m, (_, w) in res.items())
        add("HIVE has lower zero-variance ratios (easy + hard) than DS and GRESO", "HIVE Fig. 5",
            ", ".join(["hive"] + others),
            f"hive {zh:.3f}; " + "; ".join(f"{m} {x:.3f}" for m, x in zo.items()), v,
            "paired by seed, bootstrap over seeds" + ("" if len(others) == 2 else
                                                      "; greso not run"))
    else:
        add("HIVE has lower zero-variance ratios than DS and GRESO", "HIVE Fig. 5",
            "hive, ds, greso", "not run", "n/a", "add hive, ds, greso to compare.run")
    # 3. HeaPA beats uniform GRPO at equal rollouts (HeaPA Table 1).
    if have("heapa", "uniform"):
        a, b, v, note = compare("heapa", "uniform")
        add("HeaPA beats uniform GRPO at equal rollouts", "HeaPA Tables 1-2", "heapa, uniform",
            f"final Avg@{results['k']}: heapa {a:.1f}, uniform {b:.1f}", v, note)
    else:
        add("HeaPA beats uniform GRPO at equal rollouts", "HeaPA Tables 1-2", "heapa, uniform",
            "not run", "n/a", "add heapa and uniform to compare.run")
    # 4. PS+PA is below HeaPA (HeaPA Table 3 ablation).
    if have("heapa", "ps_aug"):
        a, b, v, note = compare("heapa", "ps_aug")
        add("PS+PA is below HeaPA", "HeaPA Table 3", "heapa, ps_aug",
            f"final: heapa {a:.1f}, ps_aug {b:.1f}", v, note)
    else:
        add("PS+PA is below HeaPA", "HeaPA Table 3", "heapa, ps_aug", "not run", "n/a",
            "add ps_aug to compare.run")
    # 5. PathAgg >= ChildAgg (HeaPA Table 3).
    if have("heapa", "heapa_childagg"):
        a, b, v, note = compare("heapa", "heapa_childagg")
        same = [r["curve"]["metric"] for r in by["heapa"]] == [
            r["curve"]["metric"] for r in by["heapa_childagg"]]
        if same:
            v = "untested"
            note = ("identical curves in every seed: the aggregation only acts at a lineage "
                    "refresh (a recycle, or selector.heapa.refresh_every), and none changed a "
                    "selection within this budget")
        add("PathAgg >= ChildAgg", "HeaPA Table 3", "heapa, heapa_childagg",
            f"final: PathAgg {a:.1f}, ChildAgg {b:.1f}", v, note)
    else:
        add("PathAgg >= ChildAgg", "HeaPA Table 3", "heapa, heapa_childagg", "not run", "n/a",
            "add heapa_childagg to compare.run")
    # 6. Heap sampling shifts mass to the medium band (HeaPA §3).
    if have("heapa", "uniform"):
        sh = _ms([_medium_share(r) for r in by["heapa"]])[0]
        su = _ms([_medium_share(r) for r in by["uniform"]])[0]
        _, v = seedwise("heapa", "uniform", _medium_share)
        add("Heap sampling shifts mass to the medium band (0 < pass rate < 1)", "HeaPA §3",
            "heapa, uniform", f"share of rolled-out groups in the medium band: heapa {sh:.3f}, "
            f"uniform {su:.3f}", v, "paired by seed, bootstrap over seeds")
    else:
        add("Heap sampling shifts mass to the medium band", "HeaPA §3", "heapa, uniform",
            "not run", "n/a", "add heapa and uniform to compare.run")
    return out


def claims_table(results: dict) -> str:
    """One row per claim; the verdict is in the claim's direction ("better" = the claimed
    effect is there with 95% confidence, "worse" = the opposite is)."""
    lines = ["| claim | source | measured | seeds | verdict here |", "|---|---|---|---|---|"]
    for c in claims(results):
        note = f" ({c['note']})" if c["note"] else ""
        lines.append(f"| {c['claim']} | {c['source']} | {c['measured']}{note} | {c['seeds']} | "
                     f"{c['held']} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- plots


def plots(results: dict, out_dir: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    by = {m: rs for m, rs in _by_method(results).items() if rs}
    colors = {m: plt.cm.tab10(i % 10) for i, m in enumerate(by)}
    k, metric = results["k"], results["metric"].rsplit("/", 1)[1]
    written = []

    def save(fig, name):
        path = os.path.join(out_dir, name)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    for x, label, name in (("rollouts", "cumulative rollouts", "accuracy_vs_rollouts.png"),
                           ("pflops", "cumulative PFLOPs (cost analysis)",
                            "accuracy_vs_pflops.png")):
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for m, rs in by.items():
            for i, r in enumerate(rs):
                ax.plot(r["curve"][x], r["curve"]["metric"], color=colors[m], alpha=0.9,
                        marker="o", ms=3, label=m if i == 0 else None)
        t = [r["target"] for r in results["runs"] if r.get("target") is not None]
        if t:
            ax.axhline(float(np.mean(t)), color="gray", ls="--", lw=1,
                       label=f"target ({results['target_method']} best)")
        ax.set_xlabel(label)
        ax.set_ylabel(f"held-out Avg@{k} ({metric})")
        ax.legend(fontsize=8)
        save(fig, name)

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
                ax.plot(a["rollouts"], _smooth(a["seed_reward_at_aug"]), color=colors[m],
                        ls="--", label=f"{m} seed" if i == 0 else None)
        ax.set_xlabel("cumulative rollouts")
        ax.set_ylabel("mean reward of trained groups (smoothed)")
        ax.set_title("seed vs augmented prompts")
        ax.legend(fontsize=8)
        save(fig, "augmented_vs_seed_reward.png")
    return written


def _smooth(y, w: int = 10) -> np.ndarray:
    y = np.asarray(y, float)
    if y.size < w:
        return y
    c = np.cumsum(np.insert(y, 0, 0.0))
    head = c[1:w] / np.arange(1, w)
    return np.concatenate([head, (c[w:] - c[:-w]) / w])


# ----------------------------------------------------------------------------- report


def write(results: dict, workdir: str) -> dict:
    plot_paths = plots(results, os.path.join(workdir, "plots"))
    k = results["k"]
    budget = results["budget"]
    rolls = [r["rollouts"] for r in results["runs"]]
    dev = max(abs(x - budget) for x in rolls)
    within = all(abs(r["rollouts"] - budget) <= r.get("max_step_rollouts", 0)
                 for r in results["runs"])
    step_max = results["batch_size"] * results["group_size"]
    lines = [
        "# Matched-budget comparison",
        "",
        f"Every run: {budget:,} rollouts (ended at the step boundary nearest the budget; "
        f"runs used {min(rolls):,}–{max(rolls):,}, at most {dev:,} from the budget; B×G = "
        f"{step_max:,}, and a step of DS, GRESO or HIVE rolls out one or more such rounds; "
        + ("every run ended within one of its own steps of the budget"
           if within else "SOME RUN ENDED MORE THAN ONE OF ITS STEPS FROM THE BUDGET")
        + f"), seeds {results['seeds']}, the same warm start. "
        f"Metric: held-out {results['metric']} (Avg@{k} at the eval temperature/top-p); "
        f"target = the best value of `{results['target_method']}` in the same seed.",
        "",
        "## Starting point",
        "",
        start_table(results),
        "",
        "## Accuracy at equal rollout budget",
        "",
        "Mean over seeds with a 95% interval from a bootstrap over seeds and eval prompts "
        "(prompts resampled within their bucket); the "
        f"difference to `{results['target_method']}` is paired on the same seeds and prompts "
        "and called better/worse only when its interval excludes 0. Bucket columns are means.",
        "",
        main_table(results),
        "",
        "## Did each method's mechanism run?",
        "",
        mechanisms_table(results),
        "",
        "## Change from the starting point (final minus step 0, paired)",
        "",
        gain_table(results),
        "",
        "## Rollouts and PFLOPs to the target",
        "",
        efficiency_table(results),
        "",
        "## FLOPs: cost analysis vs formula",
        "",
        "Cost analysis counts the padded work the device did (padded rows and prompts, decode "
        "steps run to the longest response, attention over the whole cache); the formula counts "
        "real tokens with causal attention at half. The padding ratio is the formula at the "
        "padded shapes over the formula at the real ones; the residual (cost analysis / formula "
        "/ padding ratio) is what XLA counts beyond matmuls and attention (norms, softmax, "
        "sampling, Adam), a few percent at this model size.",
        "",
        flops_table(results),
        "",
        "## Wall time by phase (seconds, whole run)",
        "",
        time_table(results),
        "",
        "## Plots",
        "",
        *[f"![{os.path.basename(p)}](plots/{os.path.basename(p)})" for p in plot_paths],
        "",
        "## The papers' claims, measured here",
        "",
        claims_table(results),
        "",
    ]
    text = "\n".join(lines)
    with open(os.path.join(workdir, "report.md"), "w") as f:
        f.write(text)
    return {"text": text, "plots": plot_paths}
