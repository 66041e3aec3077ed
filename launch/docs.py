"""Regenerates every marked block of the README and docs/ from the results files under
docs/results/, so a published figure is never typed.

  launch/docs.sh             rewrite every block in place
  launch/docs.sh --check     exit 1 naming each block that differs from what its file renders

A block in a Markdown page is

  <!-- docs:begin NAME -->
  ...
  <!-- docs:end NAME -->

where NAME is `table:PATH` (a table record, PATH under docs/results/) or one of RENDERERS
below. What is between the two markers is replaced by the rendering and a provenance line
naming the results files and their `meta` (machine, date, commit, command). A table record is
JSON: {"meta": {...}, "columns": [...], "rows": [[...], ...]}, written by the tool that
measured it (or, for figures measured before results were kept, from the commit and the
command that measured them, with the raw output noted as not kept).
"""

from __future__ import annotations

import argparse
import glob
import gzip
import importlib.util
import json
import math
import os
import re
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "docs", "results")
BLOCK = re.compile(r"(<!-- docs:begin (\S+) -->\n)(.*?)(<!-- docs:end \2 -->)", re.S)


def _launch_module(name: str, where: str = "launch"):
    """The module ROOT/where/name.py (a launch script, or a config file with where="configs")."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, where,
                                                                     f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load(rel: str) -> dict:
    """A results file under docs/results/ (gzip when it ends in .gz)."""
    path = os.path.join(RESULTS, rel)
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            return json.load(f)
    except FileNotFoundError:
        raise SystemExit(f"docs: results file docs/results/{rel} is missing") from None
    except (json.JSONDecodeError, OSError, EOFError) as e:
        raise SystemExit(f"docs: results file docs/results/{rel} is damaged: {e}") from None


def table(columns: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# --- renderers: NAME -> (results files, function of the loaded files -> markdown) -------------

def _arms(results: dict) -> str:
    """Each arm against the reference on the primary bucket: the paired difference, verdict,
    Holm-adjusted p, the distribution-free signed-rank p beside it and share of the headroom
    (the comparison report's own figures)."""
    from frontier_rl.experiment import controls_report, report, stats
    from frontier_rl.experiment import table as tidy
    from frontier_rl.experiment.evalcells import by_method, paired, primary

    ref, metric = results["target_method"], primary(results)
    by, tab = by_method(results), tidy.of(results)
    shares = controls_report.headroom_shares(results)
    fam = {x["name"]: x for x in report.family(results) if x["kind"] == "method"}
    controls = results.get("controls", {})
    rows = []
    for m, rs in by.items():
        if m == ref or not rs:
            continue
        d = paired(tab, m, ref, metric)
        p = fam.get(m, {}).get("p_holm")
        rank = stats.signed_rank_p(d)
        label = f"{m} ({controls[m]} control)" if m in controls else m
        rows.append([label, report._fmt([r["rollouts"] for r in rs], 0), d.fmt(signed=True),
                     controls_report.holm_verdict(d, fam.get(m), m in controls),
                     "—" if p is None else f"{p:.3f}", "—" if rank is None else f"{rank:.3f}",
                     controls_report.share_text(shares[m], short=True) if m in shares else "—"])
    return table(["arm", "rollouts", f"vs {ref} on {metric} [95% CI]", "verdict",
                  "Holm-adjusted p (confirmatory)", "signed-rank p (distribution-free)",
                  "share of the headroom [95% Fieller]"], rows)


def _arms_by_start(results: dict) -> str:
    """The arms table of each shipped start's seeds alone (report.subset)."""
    from frontier_rl.experiment import report

    parts = []
    for name, v in (results.get("testbed_starts") or {}).items():
        sub = report.subset(results, v["seeds"])
        parts.append(f"Start `{name}` (`{v['path']}`, digest {v.get('digest')}; seeds "
                     f"{', '.join(map(str, sub['seeds']))}):\n\n" + _arms(sub))
    return "\n\n".join(parts)


def _default_time(results: dict, fresh: dict) -> str:
    """The README's first command in a fresh clone and its first setup (a table record),
    beside the published run's own wall time (its results file)."""
    minutes = results["wall_s_this_invocation"] / 60
    rows = [list(r) for r in fresh["rows"]]
    rows.append([f"the published run ({len(results['runs'])} runs, "
                 f"{results.get('workers', 2)} at a time, beside other work)",
                 f"{minutes:.0f} min"])
    return table(["what", "wall time"], rows)


def _reference_scope(default: dict, tuned: dict) -> str:
    """The reference at the shared rate (the default comparison) beside the reference at its
    tuned rate (the tuned comparison's confirmation runs), on the same seeds and eval prompts."""
    from frontier_rl.experiment import table as tidy
    from frontier_rl.experiment import tune
    from frontier_rl.experiment.evalcells import accuracy, paired, primary

    metric = primary(default)
    ref, tref = default["target_method"], tuned["target_method"]
    shared, mine = tidy.of(default), tidy.of(tuned)
    rate = tuned["tuning"]["arms"][ref]["chosen_label"]
    d = paired(mine, tref, ref, metric, other=shared)
    rows = [[f"{ref} at the shared {tune.label(tuned['tuning']['shared'])}",
             accuracy(shared, ref, metric).fmt(), "—"],
            [f"{ref} at its tuned {rate}", accuracy(mine, tref, metric).fmt(),
             "same run" if tref == ref else d.fmt(signed=True)]]
    return table(["reference", f"final Avg@{default['k']} {metric} [95% CI], seeds "
                  f"{', '.join(map(str, default['seeds']))}", "tuned − shared [95% CI]"], rows)


def _findings(results: dict) -> str:
    """What a comparison found, as sentences generated from its results file (never typed): the
    headroom, each confirmatory verdict, each ablation, where the starts disagree, and the
    gradient noise scale beside the informative groups per update."""
    import numpy as np

    from frontier_rl.experiment import controls_report, report, stats
    from frontier_rl.experiment import table as tidy
    from frontier_rl.experiment.evalcells import by_method, paired, primary

    ref, metric = results["target_method"], primary(results)
    by, tab = by_method(results), tidy.of(results)
    lines = []
    for name, e in results["control_effects"].items():
        if "mean" in e:
            lines.append(f"- The {name} ({e['control']} − {ref}, {metric}) is "
                         f"{e['mean']:+.1f} [{e['lo']:+.1f}, {e['hi']:+.1f}]: {e['verdict']}.")
    for x in report.family(results):
        if x["kind"] != "method":
            continue
        d = paired(tab, x["name"], ref, metric)
        rank = stats.signed_rank_p(d)
        lines.append(f"- {x['name']} − {ref}: {d.fmt(signed=True)}, "
                     f"{controls_report.holm_verdict(d, x)} (Holm-adjusted p "
                     f"{x['p_holm']:.3f} over the declared family"
                     + ("" if rank is None else f"; Wilcoxon signed-rank p {rank:.3f}") + ").")
    for ab in (results.get("ablations") or {}).values():
        if by.get(ab["method"]) and by.get(ab["ablation"]):
            d = paired(tab, ab["method"], ab["ablation"], metric)
            lines.append(f"- {ab['method']} − {ab['ablation']} ({ab['question']}): "
                         f"{d.fmt(signed=True)}, {stats.verdict(d)} (exploratory).")
    starts = results.get("testbed_starts") or {}
    if len(starts) > 1:
        for x in report.family(results):
            if x["kind"] != "method":
                continue
            per = {}
            for n, v in starts.items():
                sub = report.subset(results, v["seeds"])
                member = next((y for y in sub["confirmatory"] if y["name"] == x["name"]), None)
                per[n] = controls_report.holm_verdict(
                    paired(tidy.of(sub), x["name"], ref, metric), member)
            if len(set(per.values())) > 1:
                lines.append(f"- The starts disagree on {x['name']}: "
                             + "; ".join(f"{v} on {n}" for n, v in per.items()) + ".")
    rs = by.get(ref, [])
    b = [r["b_noise"] for r in rs if r.get("b_noise") is not None and np.isfinite(r["b_noise"])]
    inf = [r["informative_groups"] for r in rs if r.get("informative_groups") is not None]
    if b and inf:
        lines.append(f"- {ref}'s gradient noise scale is {min(b):.0f}-{max(b):.0f} groups over "
                     f"its seeds against {np.mean(inf):.1f} informative groups per update.")
    return "\n".join(lines)


def _noise(results: dict) -> str:
    from frontier_rl.experiment import report

    return report.noise_table(results)


def _groups(b: float) -> str:
    """A noise scale in groups, or why there is none (the mean |G|^2 estimate was not
    positive: noise too large for the steps measured to resolve the true gradient)."""
    return f"{b:.0f}" if math.isfinite(b) else "not resolved"


def _noise_pilot(results: dict) -> str:
    """The pilots' noise scale by regime (experiment/regimes.py), the testbed's cell named and
    the rule of NOISE_PILOT (configs/compare_arith.py) applied."""
    from frontier_rl.experiment import regimes

    cfg = _launch_module("compare_arith", "configs")
    rule = cfg.NOISE_PILOT
    pools = {tuple(v): k for k, v in cfg.POOLS.items()}
    testbed = (cfg.TESTBED["pool"], cfg.TESTBED["batch_size"], 8)
    cells = regimes.cells(results, rule["well_above"])
    starts = sorted({s for c in cells for s in c["b_noise_by_start"]})
    rows, lines = [], []
    for c in cells:
        g = c["regime"]
        pool = pools.get(tuple(g.get("bucket_weights") or ()), "?")
        here = (pool, g.get("batch_size"), g.get("group_size")) == testbed
        rows.append([f"{c['method']}{' (the testbed)' if here else ''}", pool,
                     g.get("group_size"), g.get("batch_size"), f"{g.get('learning_rate'):g}",
                     _groups(c["b_noise"]),
                     ", ".join(_groups(c["b_noise_by_start"].get(s, math.nan)) for s in starts),
                     f"{c['informative']:.1f} ± {c['informative_sd']:.1f}",
                     f"{c['ratio']:.1f}", "yes" if c["qualifies"] else "no"])
        if here:
            lines.append(f"- The testbed's regime ({pool} pool, G = {g.get('group_size')}): "
                         f"B_noise {c['b_noise']:.0f} groups against {c['informative']:.1f} "
                         f"informative groups per update, {c['ratio']:.1f} times; it "
                         + ("qualifies." if c["qualifies"] else "does not qualify."))
    ok = [c for c in cells if c["qualifies"]]
    if cells:
        top = max(cells, key=lambda c: c["ratio"] if math.isfinite(c["ratio"]) else -1)
        lines.append(f"- {len(ok)} of {len(cells)} regimes qualify (B_noise at least "
                     f"{rule['well_above']:g} times the informative groups per update); the "
                     f"largest ratio is {top['method']}'s, {top['ratio']:.1f}.")
    head = (f"Uniform at rate {rule['learning_rate']:g}, {rule['steps']} steps per run, B_noise "
            f"every {rule['noise_every']} steps, pooled over the runs (the ratio of the two "
            f"estimates' means); rule: {rule['well_above_source']}.")
    return "\n\n".join([head, table(
        ["regime", "pool", "G", "B", "rate", "B_noise (groups), pooled",
         f"B_noise by start ({', '.join(starts)})", "informative groups per update",
         "B_noise / informative", "qualifies"], rows), "\n".join(lines)])


def _tuning(results: dict) -> str:
    """The tuning stage's sensitivity table, chosen settings and power (report.tuning_section,
    without its plot and shared-setting table)."""
    from frontier_rl.experiment import report

    text = report.tuning_section({**results, "shared_setting": None}, out_dir="")
    return "\n".join(line for line in text.splitlines()[2:] if not line.startswith("!["))


def _stage_tuning(stage: dict) -> str:
    """The tuning stage's sensitivity table and choices, before its confirmation has run: the
    rule of configs/compare_arith.py:tuned applied to the stage's results file."""
    from frontier_rl.experiment import report, tune

    config = _launch_module("compare_arith", where="configs").get_config("tuned")
    record = tune.choose(stage, config)
    text = report.tuning_section({**stage, "tuning": record, "shared_setting": None},
                                 out_dir="")
    return "\n".join(line for line in text.splitlines()[2:] if not line.startswith("!["))


def _shared(results: dict) -> str:
    """The tuned comparison's arms at the shared setting, on the tuning seeds."""
    return _arms({**results, **results["shared_setting"], "best_of": {}})


def _controls(results: dict) -> str:
    from frontier_rl.experiment import report

    return report.controls_table(results)


def _fit_measured(_: dict) -> str:
    return _launch_module("fit_table").render(os.path.join(RESULTS, "fit"), measured_only=True)


def _fit_split(*_: dict) -> str:
    return _launch_module("fit_table").render_split(os.path.join(RESULTS, "fit"))


def _calibration(cal: dict) -> str:
    from frontier_rl.sim import calibrate

    return "\n\n".join(calibrate.table(entry) for entry in cal["updates"].values())


def _vs_tunix(bench: dict) -> str:
    rows = []
    for name in ("sampler", "train_step"):
        b = bench[name]
        rows.append([name, " / ".join(f"{r:.2f}" for r in b["ratios"]),
                     f"{b['frontier_rl_tokens_per_s']:,.0f}", f"{b['tunix_tokens_per_s']:,.0f}",
                     f"**{b['ratio']:.2f}x**"])
    return table(["work", "frontier_rl / tunix per round", "frontier_rl tokens/s (median)",
                  "tunix tokens/s (median)", "median ratio"], rows)


def _rate_model(stage: dict, default: dict, tuned: dict) -> str:
    """The progress model with the rate as input (frontier_rl/sim/rate_model.py) on every run
    of the tuning stage, the default and the tuned confirmation: fitted on the cells of one
    split, each cell's measured gain beside the prediction, for two splits."""
    from frontier_rl.sim import rate_model as rm

    shared = tuned["tuning"]["shared"]["rl.learning_rate"]
    runs = rm.unique(rm.rows(stage, shared) + rm.rows(default, shared) + rm.rows(tuned, shared))
    left = sum(len(r["runs"]) for r in (stage, default, tuned))
    splits = [("held-out arms: fitted on uniform and the positive control at every rate",
               lambda arm, rate: arm in ("uniform", "oracle")),
              ("held-out rate: fitted on every arm at 3e-05 and 3e-04, 1e-04 predicted",
               lambda arm, rate: not math.isclose(rate, 1e-4))]
    parts = [f"{rm.LABEL}. {len(runs)} runs (one per arm, rate and seed; runs reused by two "
             f"comparisons counted once, of {left} records; runs whose noise scale the "
             "estimator did not resolve left out). Gain: the 4op Avg@4 change from step 0 to the "
             "end, in points; intervals are 95% t over the cell's runs (2 runs at 3e-05: 1 "
             "degree of freedom)."]
    for title, fitted in splits:
        out = rm.held_out(runs, fitted)
        p = out["params"]
        held = [c for c in out["cells"] if not c["fitted"]]
        inside = sum(bool(c["inside"]) for c in held)
        outside = [f"{c['arm']} {c['rate']:.0e} ("
                   + ("under" if c["predicted"] < c["measured"] else "over") + "-predicted)"
                   for c in held if c["inside"] is False]
        rows = [[c["arm"], f"{c['rate']:.0e}", c["n"], "fitted" if c["fitted"] else
                 "**held out**", f"{c['measured']:+.1f} [{c['lo']:+.1f}, {c['hi']:+.1f}]",
                 f"{c['predicted']:+.1f}", "—" if c["fitted"] else
                 ("yes" if c["inside"] else "no"), f"{c['q']:.3f}", f"{c['updates']:.0f}"]
                for c in out["cells"]]
        parts.append(
            f"**{title}** ({out['fitted_runs']} runs fitted: alpha {p['alpha']:.3g}, gamma "
            f"{p['gamma']:.3g}, A {p['ceiling']:.1f}; {inside} of {len(held)} held-out cells "
            f"inside their interval, RMSE {out['rmse_held_out']:.1f} points"
            + (f"; outside: {', '.join(outside)}" if outside else "") + ")\n\n"
            + table(["arm", "rate", "runs", "cell", "measured gain [95% CI]", "predicted",
                     "inside", "q = B_inf / (B_inf + B_noise)", "updates"], rows))
    return "\n\n".join(parts)


def _staleness_levels(bench: dict) -> str:
    """Rollouts/s at each rl.staleness with the phases that explain it (bench staleness)."""
    rows = []
    for k, level in bench["levels"].items():
        ph = level["phases"]
        parts = [f"{ph[p]:.3f}" if p in ph else "-" for p in ("build", "update", "wait",
                                                                "publish")]
        rows.append([k, f"{level['rollouts_per_s']:.1f}", f"{level['s_per_1k']:.1f}", *parts,
                     f"**{level['ratio']:.2f}x**"])
    return (table(["rl.staleness", "rollouts/s", "s per 1,000 rollouts", "build (s, median)",
                   "update (s, median)", "wait for the update (s, median)",
                   "publish to the engine (s, median)", "vs synchronous"], rows)
            + f"\n\nA perfect overlap of the synchronous phases would give "
              f"{bench['model_ratio']:.2f}x; {bench['steps_timed']} steps timed after "
              f"{bench['warm_steps']}.")


def _staleness(bench: dict) -> str:
    return (_staleness_levels(bench) + "\n\n"
            + table(["paper scale (Qwen2.5-Math-7B, HIVE's Table 1b)", "rollout share of the "
                     "training time", "perfect-overlap bound"],
                    [[m, f"{v['rollout_share']:.0%}", f"{v['ratio']:.2f}x"]
                     for m, v in bench["paper_model"].items()]))


def _summary(path: str) -> str:
    """The first sentence of a module's or package's docstring, on one line."""
    import ast

    doc = ast.get_docstring(ast.parse(open(path).read())) or ""
    text = " ".join(doc.split())
    end = re.search(r"(?<=[a-z)\]`'\"])\.(\s|$)", text)
    return (text[: end.start() + 1] if end else text).replace("|", "\\|")


def _layout() -> str:
    """The package's map, drawn from the code: every module of the top level and every
    package with the first sentence of its docstring, then each package's modules."""
    pkg = os.path.join(ROOT, "frontier_rl")
    rows, inner = [], []
    for name in sorted(os.listdir(pkg)):
        path = os.path.join(pkg, name)
        if name.endswith(".py") and name not in ("__init__.py", "__main__.py"):
            rows.append([f"`{name}`", _summary(path)])
        elif os.path.isfile(os.path.join(path, "__init__.py")):
            rows.append([f"`{name}/`", _summary(os.path.join(path, "__init__.py"))])
            mods = sorted(m[:-3] for m in os.listdir(path)
                          if m.endswith(".py") and m != "__init__.py")
            subs = sorted(d + "/" for d in os.listdir(path)
                          if os.path.isfile(os.path.join(path, d, "__init__.py")))
            inner.append([f"`{name}/`", ", ".join(mods + subs)])
    return (table(["frontier_rl/", "what it is"], rows) + "\n\n"
            + table(["package", "its modules"], inner))


def _config_sections() -> str:
    """Every config section, where it is declared, its fields and the first sentence of its
    docstring, from config_lib.sections()."""
    from frontier_rl import config_lib

    rows = []
    for s in config_lib.sections():
        origin = "frontier_rl/" + s.origin.removeprefix("frontier_rl.").replace(".", "/")
        path = os.path.join(ROOT, origin)
        origin += "/__init__.py" if os.path.isdir(path) else ".py"
        what = " ".join(s.doc.split()).split(": ", 1)[-1].split(". ")[0].rstrip(".")
        rows.append([f"`{s.name}`", f"`{origin}`", str(len(s.fields)), what])
    return table(["section", "declared in", "fields", "what it holds"], rows)


def _sim_staleness(*studies: dict) -> str:
    """Each arm of the synthetic learner's controls study at every rl.staleness (one study per
    k, the same seeds): its accuracy at k = 0, its change at each k (paired by seed), and its
    difference to the reference at each k with the verdict after Holm over the declared
    family (every arm but the reference and the controls)."""
    from frontier_rl.experiment import stats

    by_k = {s["staleness"]: s for s in studies}
    base = by_k[0]
    roles = base["roles"]
    ref, pos, neg = roles["reference"], roles["positive"], roles["negative"]

    def seeds(study, arm):
        per = study["arms"][arm]["per_seed"]
        return np.array([per[s]["accuracy"] for s in sorted(per, key=int)])

    def vs_ref(study) -> dict[str, str]:
        family = [a for a in study["arms"] if a not in (ref, pos, neg)]
        ivs = {a: stats.seed_interval(seeds(study, a) - seeds(study, ref)) for a in family}
        adjusted = dict(zip(family, stats.holm([stats.p_value(ivs[a]) for a in family]),
                            strict=True))
        out = {}
        for a in study["arms"]:
            if a == ref:
                out[a] = "reference"
                continue
            iv = stats.seed_interval(seeds(study, a) - seeds(study, ref))
            if a in adjusted:
                word = (stats.verdict(iv) if adjusted[a] is not None and adjusted[a] < 0.05
                        else "n.d. after Holm")
            else:
                word = stats.verdict(iv) + " (control)"
            out[a] = f"{iv.fmt(signed=True)}, {word}"
        return out

    verdicts = {k: vs_ref(study) for k, study in by_k.items()}
    ks = sorted(k for k in by_k if k)
    rows = []
    for arm in base["arms"]:
        rollouts = np.mean([v["rollouts"] for v in base["arms"][arm]["per_seed"].values()])
        row = [arm, f"{rollouts / 1e6:.2f}M", f"{np.mean(seeds(base, arm)):.1f}"]
        row += [stats.seed_interval(seeds(by_k[k], arm) - seeds(base, arm)).fmt(
            digits=2, signed=True) for k in ks]
        row += [verdicts[k][arm] for k in sorted(by_k)]
        rows.append(row)
    return table(["arm", "rollouts at k = 0", "accuracy at k = 0"]
                 + [f"k = {k} − k = 0" for k in ks]
                 + [f"vs {ref} at k = {k}" for k in sorted(by_k)], rows)


def _staleness_arms(sync: dict, stale: dict) -> str:
    """Each arm at rl.staleness = 1 beside the same arm synchronous (same starts, same seeds):
    its change from k = 0 to k = 1 on the primary metric (paired by seed), and its verdict
    against the reference at each."""
    from frontier_rl.experiment import controls_report, report
    from frontier_rl.experiment import table as tidy
    from frontier_rl.experiment.evalcells import by_method, paired, primary

    ref, metric = sync["target_method"], primary(sync)
    rows = []
    by0, by1 = by_method(sync), by_method(stale)
    tab0, tab1 = tidy.of(sync), tidy.of(stale)
    fam0 = {x["name"]: x for x in report.family(sync) if x["kind"] == "method"}
    fam1 = {x["name"]: x for x in report.family(stale) if x["kind"] == "method"}
    for m, rs in by1.items():
        if not rs or not by0.get(m):
            continue
        verdicts = ["reference" if m == ref else controls_report.holm_verdict(
            paired(t, m, ref, metric), fam.get(m), m in sync.get("controls", {}))
            for t, fam in ((tab0, fam0), (tab1, fam1))]
        rows.append([m, paired(tab1, m, m, metric, other=tab0).fmt(signed=True), *verdicts])
    return table(["arm", f"k = 1 − k = 0 on {metric} [95% CI]", f"vs {ref} at k = 0",
                  f"vs {ref} at k = 1"], rows)


RENDERERS = {
    "default-arms": (["testbed/default.results.json.gz"], _arms),
    "default-controls": (["testbed/default.results.json.gz"], _controls),
    "default-starts": (["testbed/default.results.json.gz"], _arms_by_start),
    "default-noise": (["testbed/default.results.json.gz"], _noise),
    "default-findings": (["testbed/default.results.json.gz"], _findings),
    "default-time": (["testbed/default.results.json.gz", "tables/fresh_clone.json"],
                     _default_time),
    "tuned-arms": (["testbed/tuned.results.json.gz"], _arms),
    "reference-scope": (["testbed/default.results.json.gz", "testbed/tuned.results.json.gz"],
                        _reference_scope),
    "tuned-tuning": (["testbed/tuned.results.json.gz"], _tuning),
    "tuned-shared": (["testbed/tuned.results.json.gz"], _shared),
    "tuned-noise": (["testbed/tuned.results.json.gz"], _noise),
    "tuned-stage-noise": (["testbed/tuned_stage.results.json.gz"], _noise),
    "tuned-stage-tuning": (["testbed/tuned_stage.results.json.gz"], _stage_tuning),
    "noise-pilot": (["testbed/noise_pilot.results.json.gz"], _noise_pilot),
    "tuned-findings": (["testbed/tuned.results.json.gz"], _findings),
    "rate-model": (["testbed/tuned_stage.results.json.gz", "testbed/default.results.json.gz",
                    "testbed/tuned.results.json.gz"], _rate_model),
    "field-arms": (["superseded/field.results.json.gz"], _arms),
    "field-pflops-arms": (["superseded/field_pflops.results.json.gz"], _arms),
    "gym-controls": (["superseded/gym_controls.results.json.gz"], _controls),
    "default-calibration": (["superseded/default.calibration.json"], _calibration),
    "fit-measured": (["fit/index.json"], _fit_measured),
    "fit-split": ([f"fit/math_hive-qwen2.5-math-1.5b@{t}+rl.staleness-1+mesh.rollout-4"
                   "+rollout.rows_per_call-256.target.json" for t in ("h100x8", "v5p-16")],
                  _fit_split),
    "vs-tunix": (["bench/vs_tunix.json"], _vs_tunix),
    "staleness": (["bench/staleness.json"], _staleness),
    "staleness-server": (["bench/staleness_server.json"], _staleness_levels),
    "staleness-pinned": (["bench/staleness_pinned.json"], _staleness_levels),
    "layout": ([], _layout),
    "config-sections": ([], _config_sections),
    "sim-staleness": (["sim/staleness_k0.json", "sim/staleness_k1.json", "sim/staleness_k2.json"],
                      _sim_staleness),
    "staleness-arms": (["testbed/default.results.json.gz", "testbed/staleness1.results.json.gz"],
                       _staleness_arms),
    "staleness-findings": (["testbed/staleness1.results.json.gz"], _findings),
}


def provenance(files: list[str], page_dir: str) -> str:
    """One line per distinct `meta`: the files (linked relative to the page), commit, date,
    machine and command."""
    parts = []
    for rel in files:
        meta = load(rel).get("meta")
        if not meta:
            raise SystemExit(f"docs: results file docs/results/{rel} has no meta "
                             "(machine, date, commit, command)")
        link = os.path.relpath(os.path.join(RESULTS, rel), page_dir)
        results = load(rel)
        made = ""
        if results.get("numerics"):  # a comparison run from shipped starts, pinned numerics
            made = (f", numerics {results['numerics']}, starts "
                    + ", ".join(f"{n} {v.get('digest')}"
                                for n, v in results.get("testbed_starts", {}).items()))
        parts.append(f"[`{rel}`]({link}): commit {meta['commit']}, {meta['date'][:10]}, "
                     f"{meta['machine']}{made}; `{meta['command']}`")
    return "<sub>From " + "; ".join(parts) + ".</sub>"


def render(name: str, page_dir: str) -> str:
    if name.startswith("table:"):
        rel = name[len("table:"):]
        rec = load(rel)
        files, body = [rel], table(rec["columns"], rec["rows"])
    elif name in RENDERERS:
        files, fn = RENDERERS[name]
        body = fn(*[load(f) for f in files])
    else:
        raise SystemExit(f"docs: unknown block {name!r} in a page under {page_dir}; "
                         f"one of table:PATH or {sorted(RENDERERS)}")
    return body + "\n\n" + (provenance(files, page_dir) + "\n" if files else "")


def field_page() -> str:
    """docs/results/superseded/field.md, a page launch/field_tables.py renders whole."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _launch_module("field_tables").main(
            [os.path.join(RESULTS, "superseded", "field.results.json.gz"),
             os.path.join(RESULTS, "superseded", "field_pflops.results.json.gz")])
    return out.getvalue()


WHOLE_PAGES = {os.path.join(RESULTS, "superseded", "field.md"): field_page}


def pages() -> list[str]:
    found = [os.path.join(ROOT, "README.md")]
    found += sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    return found


def render_text(text: str, page_dir: str) -> tuple[str, list[str]]:
    """The page's text with every block rendered, and the names of the blocks that differed."""
    changed = []

    def sub(m):
        body = render(m.group(2), page_dir)
        if body != m.group(3):
            changed.append(m.group(2))
        return m.group(1) + body + m.group(4)

    return BLOCK.sub(sub, text), changed


def regenerate(path: str) -> tuple[str, str, list[str]]:
    """(old text, new text, names of the blocks whose rendering differs)."""
    with open(path) as f:
        old = f.read()
    if path in WHOLE_PAGES:
        new = WHOLE_PAGES[path]()
        return old, new, [] if new == old else ["the whole page"]
    new, changed = render_text(old, os.path.dirname(path))
    return old, new, changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="change nothing; exit 1 naming every block that differs")
    args = ap.parse_args(argv)
    stale = []
    blocks = 0
    for path in pages():
        old, new, changed = regenerate(path)
        blocks += len(BLOCK.findall(old))
        rel = os.path.relpath(path, ROOT)
        stale += [f"{rel}: {name}" for name in changed]
        if changed and not args.check:
            with open(path, "w") as f:
                f.write(new)
    if args.check and stale:
        for line in stale:
            print(f"docs: block differs from its results file: {line}", file=sys.stderr)
        print("docs: run launch/docs.sh to regenerate", file=sys.stderr)
        return 1
    verb = "differ" if args.check else "rewritten"
    print(f"docs: {blocks} blocks in {len(pages())} pages; {len(stale)} {verb}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
