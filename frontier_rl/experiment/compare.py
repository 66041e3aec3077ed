"""Matched-budget comparison: methods x seeds from one base config, each to one budget.

`frontier-rl compare --config=configs/compare_arith.py --workdir=DIR` runs every method named in
`compare.run` (each a config delta in `compare.methods`, merged over the base config) for every
seed in `compare.seeds`:

- every run at one seed starts from the same warm start and every run uses the same task
  (`task.data_seed`); a run's `seed` drives its rollouts, its selector and its update RNG, so
  runs (method, s) and (method', s) share their initial RNG. With `compare.shared_start=False`
  (the default) each seed has its own warm start (`warmstart.seed = seed`, cached in
  DIR/warmstart/s<seed>), so the spread over seeds includes the starting point; with True one
  warm start (DIR/warmstart, `warmstart.seed`, or the base seed when that is -1) serves every
  seed, and the report says its verdicts are conditional on that one starting point;
- `compare.budget` matches either the rollouts ("rollouts", the default: every run ends at the
  step boundary nearest `compare.rollout_budget` generated responses, and is evaluated each
  time it crosses a multiple of budget / `compare.evals`) or the updates ("steps": every run
  takes `compare.steps` steps, is evaluated every max(1, steps // evals) steps, and reports the
  rollouts it spent); the report gives every run's steps, optimizer updates and rollouts;
- `compare.match_rollouts` reads a method at the rollouts another method spent at the same seed
  (its reference runs first, and the matched run goes to the step boundary nearest that
  count), and `compare.best_of` reports the better of several arms as one row: HIVE's two-run
  protocol, frontier_rl/experiment/two_run.py;
- runs live in DIR/runs/<method>-s<seed>; a finished run (`compare_done.json` holding its config
  fingerprint) is skipped on rerun, an interrupted one resumes from its checkpoint (train.py).

Then `results.json`, `report.md` and PNG plots are written (frontier_rl/experiment/report.py)
and the main table is printed. The compared accuracy is `compare.metric`, an eval bucket named in
the config before the runs (the frontier bucket; "all" for every eval prompt). The
rollouts-to-target target is pre-registered too: `compare.target_value` points, or, when that
is 0, per seed the final accuracy of `compare.target` minus `compare.target_margin` points.
So is the margin of the equivalence test of HIVE's accuracy against DS's and GRESO's,
`compare.equivalence_margin` points (stats.equivalence). `compare.ablations` names (method,
ablation) pairs whose paired difference the report gives as the effect of a mechanism, and
`compare.settings_notes` the methods run at non-default settings, with why.

`results.json["mechanisms"][method][counter]` holds the counter's total over seeds and its
value per seed; `required_mechanisms` says which must be non-zero, and every (method, seed,
counter) left at zero is listed in `mechanisms_missing`, flagged in the report and on the
console. Where the runs execute is `compare.launcher` (launchers.py), with the same plan and
results: `local` runs them one after another in this process with `compare.workers` = 1 (the
default), sharing a persistent XLA compilation cache, so later runs skip most compiles, or that
many at once, each in its own process (workers.py); `slurm` submits each as one SLURM job
(slurm.py).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import json
import math
import os
import time

import ml_collections
import numpy as np

from frontier_rl import config_lib, selection
from frontier_rl.experiment import controls_report, launchers, report, stats, tune, two_run
from frontier_rl.experiment.stats import to_target
from frontier_rl.rl import noise
from frontier_rl.run import budget as budget_rule
from frontier_rl.run import lock, provenance, statefile
from frontier_rl.selection.mechanisms import required_mechanisms

DONE = "compare_done.json"
# what train.run writes when a run ends at its budget or step count, never when cut by SIGTERM
FINAL = "final_metrics.json"
BUDGETS = ("rollouts", "steps", "tokens", "pflops")
# Fields a `compare` section may leave out (configs written before them), with their defaults.
# equivalence_margin: accuracy points within which the equivalence test (stats.equivalence)
# may call two methods equal; 1.5 is below the smallest gain the papers report for a method
# (HeaPA: +1.8 points), so "equivalent" rules out an effect of the size they claim.
# workers: runs at once, each in its own process (workers.py); 1 runs them in this process.
# effect_sizes: {name: {points, source}}, the effects power is computed at (never the observed
# one); confirmatory: "all" (every non-control method vs the reference and every claim with a
# paired p-value) or the names of those in the Holm-corrected family (controls_report.py).
DEFAULTS = {"budget": "rollouts", "steps": 0, "token_budget": 0, "pflops_budget": 0.0,
            "target_value": 0.0, "target_margin": 0.0,
            "equivalence_margin": 1.5, "shared_start": False, "ablations": {},
            "settings_notes": {}, "match_rollouts": {}, "best_of": {}, "workers": 1,
            "equivalence_margin_source": "below the smallest gain the papers report for a "
            "method (HeaPA Tables 1-2: +1.8 points), so \"equivalent\" rules out an effect of "
            "the size they claim", "effect_sizes": report.DEFAULT_EFFECT_SIZES,
            "confirmatory": "all", "starts": {}, "tune": {}, "launcher": "local", "slurm": {}}


@dataclasses.dataclass
class RunSpec:
    method: str
    seed: int
    config: ml_collections.ConfigDict
    dir: str
    match: str = ""  # compare.match_rollouts: the method whose spent rollouts are the budget
    target: int = 0  # that budget at this seed, once resolve() has read it

    @property
    def name(self) -> str:
        return f"{self.method}-s{self.seed}"

    def reference(self, specs: list[RunSpec]) -> RunSpec:
        """A matched run's reference: its `match` method's run at the same seed."""
        return next(s for s in specs if s.method == self.match and s.seed == self.seed)

    def needs_warm_start(self) -> bool:
        """Whether this run's warm start is still to be trained (enabled, not cached)."""
        ws = self.config.warmstart
        return ws.enabled and ws.steps > 0 and not os.path.exists(
            os.path.join(ws.cache_dir, "model.safetensors"))


# ----------------------------------------------------------------------------- planning


def _csv(s: str) -> list[str]:
    return [x.strip() for x in str(s).split(",") if x.strip()]


def _get(c: ml_collections.ConfigDict, field: str):
    """compare.<field>, or its default when the section predates the field."""
    return c.get(field, DEFAULTS[field])


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def validate(config: ml_collections.ConfigDict) -> None:
    """Checks the `compare` section; raises ConfigError naming the field. Long (about 100
    lines) as a list of checks is: each reads the fields the checks before it have passed, in
    the order a reader of the section meets them."""
    if "compare" not in config:
        raise config_lib.ConfigError(
            "the config has no `compare` section (see configs/compare_arith.py)")
    c = config.compare
    methods = set(c.methods.keys())
    run = _csv(c.run)
    if not run:
        raise config_lib.ConfigError("compare.run is empty: name at least one method")
    for m in run:
        if m not in methods:
            raise config_lib.ConfigError(
                f"compare.run names {m!r}, which is not in compare.methods {sorted(methods)}")
    if len(set(run)) != len(run):
        raise config_lib.ConfigError(f"compare.run={c.run!r} names a method twice")
    try:
        seeds = [int(s) for s in _csv(c.seeds)]
    except ValueError:
        raise config_lib.ConfigError(
            f"compare.seeds={c.seeds!r} is not allowed: comma-separated integers >= 0") from None
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise config_lib.ConfigError(
            f"compare.seeds={c.seeds!r} is not allowed: distinct comma-separated integers >= 0")
    budget, steps = _get(c, "budget"), _get(c, "steps")
    if budget not in BUDGETS:
        raise config_lib.ConfigError(
            f"compare.budget={budget!r} is not allowed: 'rollouts' (every run to "
            "compare.rollout_budget rollouts), 'steps' (to compare.steps steps), 'tokens' (to "
            "compare.token_budget generated tokens) or 'pflops' (to compare.pflops_budget "
            "measured PFLOPs)")
    tokens, pflops = _get(c, "token_budget"), _get(c, "pflops_budget")
    if budget == "tokens" and not (isinstance(tokens, int) and not isinstance(tokens, bool)
                                   and tokens >= 1):
        raise config_lib.ConfigError(
            f"compare.token_budget={tokens!r} is not allowed with compare.budget='tokens': the "
            "generated response tokens every run spends, an integer >= 1")
    if budget == "pflops" and not (_number(pflops) and np.isfinite(pflops) and pflops > 0):
        raise config_lib.ConfigError(
            f"compare.pflops_budget={pflops!r} is not allowed with compare.budget='pflops': the "
            "measured PFLOPs every run spends, a number > 0")
    if not (isinstance(c.rollout_budget, int) and c.rollout_budget > 0):
        raise config_lib.ConfigError(
            f"compare.rollout_budget={c.rollout_budget!r} is not allowed: an integer >= 1")
    if not (isinstance(steps, int) and not isinstance(steps, bool) and steps >= 0):
        raise config_lib.ConfigError(f"compare.steps={steps!r} is not allowed: an integer >= 0")
    if budget == "steps" and steps < 1:
        raise config_lib.ConfigError(
            f"compare.steps={steps!r} is not allowed with compare.budget='steps': the steps "
            "every run takes, an integer >= 1")
    span, unit = {"rollouts": (c.rollout_budget, "rollout_budget"), "steps": (steps, "steps"),
                  "tokens": (tokens, "token_budget"),
                  "pflops": (math.inf, "pflops_budget")}[budget]
    if not (isinstance(c.evals, int) and 1 <= c.evals <= span):
        raise config_lib.ConfigError(
            f"compare.evals={c.evals!r} is not allowed: an integer in [1, compare.{unit}]")
    if not (isinstance(c.metric, str) and c.metric):
        raise config_lib.ConfigError(
            f"compare.metric={c.metric!r} is not allowed: an eval bucket's name, or 'all'")
    for field in ("target", "rollout_reference"):
        if c[field] and c[field] not in methods:
            raise config_lib.ConfigError(
                f"compare.{field}={c[field]!r} is not in compare.methods {sorted(methods)}")
    for field in ("target_value", "target_margin"):
        if not (_number(_get(c, field)) and _get(c, field) >= 0):
            raise config_lib.ConfigError(
                f"compare.{field}={_get(c, field)!r} is not allowed: accuracy points >= 0")
    delta = _get(c, "equivalence_margin")
    if not (_number(delta) and np.isfinite(delta) and delta > 0):
        raise config_lib.ConfigError(
            f"compare.equivalence_margin={delta!r} is not allowed: accuracy points > 0, the "
            "±margin within which the equivalence test calls two methods' accuracy equal")
    _validate_statistics(c)
    workers = _get(c, "workers")
    if not (isinstance(workers, int) and not isinstance(workers, bool) and workers >= 1):
        raise config_lib.ConfigError(
            f"compare.workers={workers!r} is not allowed: an integer >= 1 (the runs executed at "
            "once, each in its own process; 1 runs them one after another in this one)")
    launchers.check(c)  # the launcher's name and settings, before any run
    _validate_starts(c, seeds)
    if tune.enabled(c):
        tune.validate(c)
        _validate_starts(c, [int(s) for s in _csv(c.tune.seeds)])
    if not isinstance(_get(c, "shared_start"), bool):
        raise config_lib.ConfigError(
            f"compare.shared_start={_get(c, 'shared_start')!r} is not allowed: True or False")
    for name, ab in _get(c, "ablations").items():
        where = f"compare.ablations.{name}"
        if not isinstance(ab, (dict, ml_collections.ConfigDict)) or set(ab.keys()) != {
                "method", "ablation", "question"}:
            raise config_lib.ConfigError(
                f"{where} is not allowed: a ConfigDict of exactly method, ablation and question")
        for field in ("method", "ablation"):
            if ab[field] not in methods:
                raise config_lib.ConfigError(
                    f"{where}.{field}={ab[field]!r} is not in compare.methods {sorted(methods)}")
        if not (isinstance(ab["question"], str) and ab["question"]):
            raise config_lib.ConfigError(f"{where}.question is empty: say what the pair tests")
    for name, note in _get(c, "settings_notes").items():
        if not (isinstance(note, str) and note):
            raise config_lib.ConfigError(
                f"compare.settings_notes.{name}={note!r} is not allowed: a non-empty reason")
    two_run.validate(c, methods, run)
    for m in methods:  # every delta must name existing fields with valid values
        _apply_delta(copy.deepcopy(_base(config)), c.methods[m], f"compare.methods.{m}")


def starts_of(c: ml_collections.ConfigDict) -> dict[str, dict]:
    """compare.starts as {name: {"path", "seeds": [int]}}: the testbed's shipped starting
    points (warmstart.start), each with the seeds of compare.seeds run from it (a start none
    of them uses is left out); {} = warm starts as compare.shared_start says."""
    run = {int(x) for x in _csv(c.seeds)}
    out = {n: {"path": str(v["path"]), "seeds": [int(x) for x in _csv(v["seeds"])
                                                 if int(x) in run]}
           for n, v in _get(c, "starts").items()}
    return {n: v for n, v in out.items() if v["seeds"]}


def _validate_starts(c: ml_collections.ConfigDict, seeds: list[int]) -> None:
    """compare.starts: each a ConfigDict of path and seeds; every seed of compare.seeds run from
    exactly one start."""
    starts = _get(c, "starts")
    if not starts:
        return
    owner: dict[int, str] = {}
    for name, v in starts.items():
        where = f"compare.starts.{name}"
        if not isinstance(v, (dict, ml_collections.ConfigDict)) or set(v.keys()) != {
                "path", "seeds"}:
            raise config_lib.ConfigError(
                f"{where} is not allowed: a ConfigDict of exactly path (a shipped start, "
                "`frontier-rl start`) and seeds (comma-separated, run from it)")
        if not (isinstance(v["path"], str) and v["path"]):
            raise config_lib.ConfigError(f"{where}.path is empty: name the start's directory")
        try:
            mine = [int(x) for x in _csv(v["seeds"])]
        except ValueError:
            raise config_lib.ConfigError(
                f"{where}.seeds={v['seeds']!r} is not allowed: comma-separated integers") from None
        for x in mine:
            if x in owner:
                raise config_lib.ConfigError(
                    f"{where}.seeds names seed {x}, already run from start {owner[x]!r}: a "
                    "seed is one (start, seed) replicate")
            owner[x] = name
    stray = [x for x in seeds if x not in owner]
    if stray:
        raise config_lib.ConfigError(
            f"compare.seeds names seed(s) {stray} that no compare.starts entry runs (its seeds: "
            f"{','.join(map(str, sorted(owner)))}): every seed runs from one start")


def _validate_statistics(c: ml_collections.ConfigDict) -> None:
    """The pre-registered statistics: the margin's rationale, the effect sizes power is
    computed at (each with its source) and the confirmatory family."""
    src = _get(c, "equivalence_margin_source")
    if not (isinstance(src, str) and src.strip()):
        raise config_lib.ConfigError(
            f"compare.equivalence_margin_source={src!r} is not allowed: a non-empty reason for "
            "the margin (where its size comes from)")
    sizes = _get(c, "effect_sizes")
    if not isinstance(sizes, (dict, ml_collections.ConfigDict)) or not sizes:
        raise config_lib.ConfigError(
            f"compare.effect_sizes={sizes!r} is not allowed: a non-empty ConfigDict of name -> "
            "{points, source}")
    for name, e in sizes.items():
        where = f"compare.effect_sizes.{name}"
        if not isinstance(e, (dict, ml_collections.ConfigDict)) or set(e.keys()) != {
                "points", "source"}:
            raise config_lib.ConfigError(
                f"{where} is not allowed: a ConfigDict of exactly points and source")
        if not (_number(e["points"]) and np.isfinite(e["points"]) and e["points"] > 0):
            raise config_lib.ConfigError(
                f"{where}.points={e['points']!r} is not allowed: accuracy points > 0")
        if not (isinstance(e["source"], str) and e["source"].strip()):
            raise config_lib.ConfigError(f"{where}.source is empty: cite where the effect is from")
    fam = _get(c, "confirmatory")
    if fam != "all" and not (isinstance(fam, (list, tuple)) and fam and all(
            isinstance(x, str) and x for x in fam)):
        raise config_lib.ConfigError(
            f"compare.confirmatory={fam!r} is not allowed: 'all', or a non-empty list of method "
            "names (their primary verdict vs compare.target) and claim texts (report.claims)")


def _base(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    base = ml_collections.ConfigDict(config.to_dict())
    del base["compare"]
    return base


def _apply_delta(cfg: ml_collections.ConfigDict, delta, where: str) -> None:
    """Merges a nested delta into cfg in place; a key cfg lacks is an error naming its path.

    Keys under `task` may be new (a task builder takes any field it knows)."""
    for key, value in delta.items():
        path = f"{where}.{key}"
        if key not in cfg and not where.endswith(".task"):
            raise config_lib.ConfigError(f"{path}: the base config has no field {key!r}")
        if isinstance(value, (dict, ml_collections.ConfigDict)) and key in cfg and isinstance(
                cfg[key], ml_collections.ConfigDict):
            _apply_delta(cfg[key], value, path)
        else:
            with cfg.unlocked():
                cfg[key] = value


def plan(config: ml_collections.ConfigDict, workdir: str) -> list[RunSpec]:
    """One RunSpec per (method, seed), each a validated train config, in the order they run:
    compare.run's, except that a matched method (compare.match_rollouts) comes after its
    reference. A matched run's budget is only known once its reference has run (resolve)."""
    validate(config)
    c = config.compare
    base = _base(config)
    shared = _get(c, "shared_start")
    start_of = {x: v["path"] for v in starts_of(c).values() for x in v["seeds"]}
    match = two_run.matches(c)
    specs = []
    for method in two_run.order(_csv(c.run), match):
        for seed in (int(s) for s in _csv(c.seeds)):
            cfg = copy.deepcopy(base)
            _apply_delta(cfg, c.methods[method], f"compare.methods.{method}")
            cfg.seed = seed
            with cfg.task.unlocked():
                if cfg.task.name == "arith" and "data_seed" not in cfg.task:
                    cfg.task.data_seed = base.seed
            # warmstart.cache_dir, when the config names one, is honoured: comparisons that
            # name the same cache start from exactly the same policies (the controls, `:claims`
            # and `:hive_steps` on the default's starting points)
            ws_root = base.warmstart.cache_dir or os.path.join(workdir, "warmstart")
            if seed in start_of:  # a shipped start: loaded, never trained
                cfg.warmstart.start = start_of[seed]
                cfg.warmstart.cache_dir = start_of[seed]
                cfg.warmstart.seed = seed
            elif shared:  # one starting point for every seed
                if cfg.warmstart.seed < 0:
                    cfg.warmstart.seed = base.seed
                cfg.warmstart.cache_dir = ws_root
            else:  # each seed its own, shared by the methods at that seed
                cfg.warmstart.seed = seed
                cfg.warmstart.cache_dir = os.path.join(ws_root, f"s{seed}")
            kind = _get(c, "budget")
            if kind == "rollouts":
                cfg.rl.rollout_budget = c.rollout_budget
                cfg.rl.num_steps = max(cfg.rl.num_steps, c.rollout_budget)  # an upper bound
                cfg.eval.every = 0
                cfg.eval.every_rollouts = max(1, c.rollout_budget // c.evals)
            elif kind in ("tokens", "pflops"):
                amount = _get(c, "token_budget" if kind == "tokens" else "pflops_budget")
                cfg.rl.rollout_budget = 0
                cfg.rl[f"{'token' if kind == 'tokens' else 'pflops'}_budget"] = amount
                # an upper bound on the steps: every step spends at least one rollout
                cfg.rl.num_steps = max(cfg.rl.num_steps, 1_000_000)
                cfg.eval.every = 0
                cfg.eval.every_rollouts = 0
                cfg.eval.every_budget = (max(1, amount // c.evals) if kind == "tokens"
                                         else amount / c.evals)
            else:
                cfg.rl.rollout_budget = 0
                cfg.rl.num_steps = c.steps
                cfg.eval.every = max(1, c.steps // c.evals)
                cfg.eval.every_rollouts = 0
            try:
                config_lib.validate(cfg)
            except config_lib.ConfigError as e:
                raise config_lib.ConfigError(f"method {method!r}: {e}") from None
            specs.append(RunSpec(method, seed, cfg, os.path.join(workdir, "runs",
                                                                 f"{method}-s{seed}"),
                                 match=match.get(method, "")))
    return specs


def resolve(spec: RunSpec, specs: list[RunSpec], c: ml_collections.ConfigDict) -> None:
    """A matched run's budget: the rollouts its reference's run at the same seed spent (that
    run's final_metrics.json, written when it finished). The run goes to the step boundary
    nearest them (rl.rollout_budget; its steps follow, rl.num_steps only bounds them) and is
    evaluated each time its rollouts cross a multiple of target / compare.evals."""
    ref = spec.reference(specs)
    path = os.path.join(ref.dir, FINAL)
    target = 0
    if os.path.exists(path):
        target = int(statefile.read_json(
            path, "the finished run's final metrics",
            f"delete the run directory {ref.dir} to run {ref.name} again").get("rollouts", 0))
    if target < 1:
        raise config_lib.ConfigError(
            f"{spec.name} runs to the rollouts {ref.name} spent (compare.match_rollouts."
            f"{spec.method}={spec.match!r}), but {ref.dir} holds no finished run that spent any")
    cfg = spec.config
    cfg.rl.rollout_budget = target
    cfg.rl.num_steps = max(cfg.rl.num_steps, target)  # an upper bound: a step rolls out >= 1
    cfg.eval.every = 0
    cfg.eval.every_rollouts = max(1, target // c.evals)
    config_lib.validate(cfg)
    spec.target = target


def fingerprint(cfg: ml_collections.ConfigDict, workdir: str = "") -> str:
    """What makes two runs the same run: the whole config except logging, the collapse watch
    and the sections of the selectors it does not run, with the comparison's own directory
    (`workdir`, in the warm-start cache path) taken out, so a copied or moved comparison
    directory still holds the same runs."""
    d = cfg.to_dict()
    d.pop("log", None)
    # the watch (run/health.py) only stops a run; one that reached its budget computed the same
    # with any setting, and runs finished before the field existed keep their fingerprint
    d["rl"].pop("collapse_steps", None)
    # evaluations change no update (their sampling has its own seed); runs finished before
    # the early points existed keep their fingerprint
    if not d.get("eval", {}).get("early"):
        d.get("eval", {}).pop("early", None)
    if not d["rl"].get("staleness"):  # the synchronous loop, as before the field existed
        d["rl"].pop("staleness", None)
    # a selector reads its own section alone (selection.make): the other selectors' sections,
    # and a selector registered since, change no run
    chosen = d["selector"]["name"]
    d["selector"] = {"name": chosen, chosen: d["selector"].get(chosen)}
    text = json.dumps(d, sort_keys=True, default=str)
    if workdir:
        text = text.replace(json.dumps(workdir)[1:-1], "<workdir>")
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _done(spec: RunSpec) -> dict:
    """A finished run's DONE record ({} when absent or unreadable)."""
    try:
        with open(os.path.join(spec.dir, DONE)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _finished(spec: RunSpec) -> bool:
    """Whether the run reached its budget: DONE and the run's FINAL both present (a run cut by
    SIGTERM has neither; a DONE without FINAL, left by an older version that took a cut run for
    a finished one, is resumed)."""
    path = os.path.join(spec.dir, DONE)
    if not os.path.exists(path) or not os.path.exists(os.path.join(spec.dir, FINAL)):
        return False
    done = statefile.read_json(path, "the record of a finished run",
                               f"delete it to run {spec.name} again")
    workdir = os.path.dirname(os.path.dirname(spec.dir))
    if done.get("fingerprint") not in (fingerprint(spec.config, workdir),
                                       fingerprint(spec.config)):
        raise config_lib.ConfigError(
            f"{spec.dir} holds a finished run of another config (changed method delta, budget "
            "or base, or for a matched run its reference's spent rollouts); delete that "
            "directory or use another --workdir")
    return True


# ----------------------------------------------------------------------------- running


def _enable_compile_cache(workdir: str) -> None:
    import jax

    jax.config.update("jax_compilation_cache_dir", os.path.join(workdir, ".jax_cache"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    # the workers' size limit (workers.child_env), so every process keeps the cache's access
    # times the same way (an entry written without them warns in a worker that reads it)
    jax.config.update("jax_compilation_cache_max_size",
                      int(os.environ.get("JAX_COMPILATION_CACHE_MAX_SIZE", 4 << 30)))


def run(config: ml_collections.ConfigDict, workdir: str, *, report_only: bool = False,
        detach: bool = False, dry_run: bool = False) -> dict:
    """Runs (or resumes, or skips) every planned run through the comparison's launcher
    (launchers.py), then writes the results and report.
    `report_only`: runs nothing and writes the results and report from the runs' records, as
    they are (every planned run must have ended at its budget): a report made again by newer
    code over runs that an older version made. `detach`: returns once the launcher has started
    every run elsewhere (a cluster's jobs), writing no report. `dry_run`: prints what the
    launcher would execute (for SLURM, each job's batch script) and runs nothing."""
    from frontier_rl import train  # jax and the models load only when something runs

    if not workdir:
        raise train.RunError("--workdir is required (a directory for the runs and the report)")
    workdir = os.path.abspath(workdir)
    if tune.enabled(config.compare):
        validate(config)
        return _run_tuned(config, workdir, report_only, detach, dry_run)
    specs = plan(config, workdir)
    if dry_run:
        print(launchers.get(config.compare).dry_run(_plan(config, workdir, specs)))
        return {}
    try:
        os.makedirs(workdir, exist_ok=True)
    except OSError as e:
        raise train.RunError(f"--workdir={workdir} cannot be created: {e.strerror}") from None
    if not os.access(workdir, os.W_OK):
        raise train.RunError(f"--workdir={workdir} is not writable")
    with lock.hold(workdir, "compare"):
        return _run_all(config, workdir, specs, report_only, detach=detach)


def _run_tuned(config: ml_collections.ConfigDict, workdir: str, report_only: bool,
               detach: bool = False, dry_run: bool = False) -> dict:
    """compare.tune (tune.py): the tuning stage in DIR/tune, each arm's setting chosen by the
    declared rule, then the confirmation stage's runs in DIR/runs on fresh seeds (a run that
    an untuned comparison in DIR already made at the same config is reused), its results and
    report in DIR/tuned, with the tuning record and the shared-setting verdicts."""
    print(f"tuning stage: {len(tune.points(config.compare.tune.grid))} settings x "
          f"{len(_csv(config.compare.tune.arms))} arms on tuning seeds "
          f"{config.compare.tune.seeds} -> {os.path.join(workdir, 'tune')}", flush=True)
    tuning = run(tune.tuning_config(config), os.path.join(workdir, "tune"),
                 report_only=report_only, detach=detach, dry_run=dry_run)
    if dry_run or tuning.get("detached"):  # the confirmation is chosen from the tuning's end
        print("the confirmation stage's runs follow from the tuning stage's results: the same "
              "command plans them once it has ended", flush=True)
        return tuning
    record = tune.choose(tuning, config)
    for arm, a in record["arms"].items():
        need = record["power"].get(arm, {}).get("seeds_needed", {})
        print(f"tuned: {arm} at {a['chosen_label']}"
              + ("; confirmation seeds for 80% power at the pre-registered effects: "
                 + ", ".join(f"{n} {'>' + str(stats.MAX_SEEDS) if v is None else v}"
                             for n, v in need.items()) if need else ""), flush=True)
    confirm = tune.confirmation_config(config, record)
    specs = plan(confirm, workdir)
    with lock.hold(workdir, "compare"):
        return _run_all(confirm, workdir, specs, report_only,
                        extra={"tuning": record, "shared_setting": _shared_rows(tuning)},
                        detach=detach)


def _shared_rows(tuning: dict) -> dict:
    """The tuning stage's results at the shared setting only, methods under their arm names:
    the shared-setting verdicts, on the tuning seeds."""
    ref = tuning["target_method"]
    shared = ref.split("@", 1)[1]
    keep = {m for m in {r["method"] for r in tuning["runs"]} if m.endswith("@" + shared)}
    out = {**tuning, "runs": [{**r, "method": r["method"].split("@", 1)[0]}
                              for r in tuning["runs"] if r["method"] in keep]}
    out["target_method"] = ref.split("@", 1)[0]
    out["methods"] = [m.split("@", 1)[0] for m in tuning["methods"] if m in keep]
    fam = tuning.get("confirmatory_declared")
    out["confirmatory_declared"] = fam if fam == "all" else [x.split("@", 1)[0] for x in fam]
    out["control_effects"] = report.control_effects(out)
    out["headroom_share"] = report.headroom_shares(out)
    out["confirmatory"] = report.family(out)
    out["setting"] = shared
    return {k: out[k] for k in ("runs", "target_method", "methods", "confirmatory_declared",
                                "control_effects", "headroom_share", "confirmatory", "setting",
                                "seeds", "controls", "metric", "k", "testbed_starts")}


def _run_all(config: ml_collections.ConfigDict, workdir: str, specs: list[RunSpec],
             report_only: bool = False, extra: dict | None = None, detach: bool = False
             ) -> dict:
    from frontier_rl import train

    if report_only:
        missing = [s.name for s in specs if not os.path.exists(os.path.join(s.dir, FINAL))]
        if missing:
            raise train.RunError(f"--report_only: {len(missing)} planned run(s) did not end at "
                                 f"their budget in {workdir}: {', '.join(missing)}")
    else:
        statefile.write_json(os.path.join(workdir, "compare_config.json"), None,
                             text=config.to_json_best_effort(indent=2))
        _enable_compile_cache(workdir)
        _numerics()  # once, before the workers start: they inherit it
    t_all = time.perf_counter()
    if not report_only:
        done = launchers.get(config.compare).run(_plan(config, workdir, specs), detach=detach)
        if done.cut:  # SIGTERM: the runs checkpointed, and the comparison stops with them
            raise train.RunError(cut_message(done.cut))
        if done.detached:
            return {"detached": True}
    results = collect(config, specs)
    results.update(extra or {})
    results["wall_s_this_invocation"] = time.perf_counter() - t_all
    results["meta"] = provenance.stamp()
    out = os.path.join(workdir, "tuned") if "tuning" in results else workdir
    os.makedirs(out, exist_ok=True)
    statefile.write_json(os.path.join(out, "results.json"), results, indent=1, default=float)
    text = report.write(results, out)
    print(report.main_table(results))
    for line in controls_report.console_lines(results):
        print(line)
    for method, seed, counter in results["mechanisms_missing"]:
        print(f"WARNING: {method} seed {seed}: mechanism counter {counter} stayed at zero (this "
              "run did not exercise its method; see report.md)")
    print(f"\nwrote {os.path.join(out, 'results.json')}, {os.path.join(out, 'report.md')}"
          f" and {len(text['plots'])} plots")
    return results


def _plan(config: ml_collections.ConfigDict, workdir: str, specs: list[RunSpec]
          ) -> launchers.Plan:
    """The runs and this module's functions on them, for the launcher."""
    c = config.compare

    def finished(spec: RunSpec) -> bool:
        # a matched run is only itself once its budget is read from its finished reference
        if spec.match and not spec.target:
            if not _finished(spec.reference(specs)):
                return False
            resolve(spec, specs, c)
        return _finished(spec)

    return launchers.Plan(
        specs=specs, workdir=workdir, c=c, target=run_one,
        begin=functools.partial(_begin, specs=specs, c=c), finished=finished,
        fingerprint=lambda spec: fingerprint(spec.config, workdir),
        prepare=lambda spec: (functools.partial(resolve, spec, specs, c) if spec.match
                              else None))


def _begin(i: int, spec: RunSpec, say, specs: list[RunSpec],
           c: ml_collections.ConfigDict) -> bool:
    """Announces run i of `specs` (its selector, budget and directory); False, saying so, when
    it finished earlier. A matched run's budget is read here: its reference has run."""
    head = f"[{i}/{len(specs)}] {spec.name}"
    if spec.match:
        resolve(spec, specs, c)
    if _finished(spec):
        say(f"{head}: finished earlier, skipped")
        return False
    meter = budget_rule.Meter.of(spec.config)
    budget = meter.describe() if meter.limit else f"{spec.config.rl.num_steps:,} steps"
    if spec.match:
        budget += f" (what {spec.match}-s{spec.seed} spent)"
    say(f"{head}: {spec.config.selector.name}, budget {budget} -> {spec.dir}")
    return True


def run_one(spec: RunSpec, workdir: str) -> bool:
    """Trains (or resumes) one run; True once it reached its budget, which DONE then records.
    False when SIGTERM cut it: train checkpointed and returned, and nothing marks it finished."""
    from frontier_rl import train

    t0 = time.perf_counter()
    train.run(spec.config, spec.dir)
    if not os.path.exists(os.path.join(spec.dir, FINAL)):
        return False
    statefile.write_json(os.path.join(spec.dir, DONE), {
        "fingerprint": fingerprint(spec.config, workdir), "wall_s": time.perf_counter() - t0,
        "numerics": _numerics()})
    return True


def cut_message(names: list[str]) -> str:
    """What a comparison stopped by SIGTERM says, naming the runs it cut."""
    if len(names) == 1:
        return (f"{names[0]} was stopped by SIGTERM before its budget and checkpointed; the "
                f"comparison stopped with it (no report written): rerun the same command to "
                f"resume {names[0]} and run the rest")
    return (f"{', '.join(names)} were stopped by SIGTERM before their budgets and checkpointed; "
            "the comparison stopped with them (no report written): rerun the same command to "
            "resume them and run the rest")


# ----------------------------------------------------------------------------- results


def _records(run_dir: str) -> list[dict]:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def _pflops(r: dict) -> tuple[float, float]:
    """(cost-analysis PFLOPs, formula PFLOPs) so far; older runs only have the formula."""
    formula = r.get("perf/pflops_formula")
    if formula is None:
        formula = r.get("perf/rollout_pflops", 0.0) + r.get("perf/entropy_pflops", 0.0)
    return float(r.get("perf/pflops", formula)), float(formula)


def run_result(spec: RunSpec, metric: str, k: int) -> dict:
    """One run's curves and totals, read back from its metrics.jsonl."""
    recs = _records(spec.dir)
    steps = [r for r in recs if r["step"] > 0]
    curve = _curve(recs, metric, k, spec.config.rl.epochs * spec.config.rl.minibatches)
    last = steps[-1] if steps else {}
    first = recs[0] if recs else {}

    def series(key: str) -> list[float]:
        return [float(r[key]) for r in steps if key in r]

    def mean_of(key: str) -> float:
        s = series(key)
        return float(np.mean(s)) if s else float("nan")

    hist = _pass_hist(steps)
    return {
        "method": spec.method, "seed": spec.seed, "selector": spec.config.selector.name, "k": k,
        # the run's regime, as its config set it (pilots vary these between arms)
        "regime": {"group_size": int(spec.config.rl.group_size),
                   "batch_size": int(spec.config.rl.batch_size),
                   "learning_rate": float(spec.config.rl.learning_rate),
                   "bucket_weights": list(spec.config.task.get("bucket_weights") or [])},
        "eval_prompts": int(next((r["task/eval_prompts"] for r in recs
                                  if "task/eval_prompts" in r), 0)),
        "steps": int(last.get("step", 0)),
        # optimizer updates: epochs x minibatches per step, less those skipped on a non-finite
        # loss or gradient norm
        "updates": int(last.get("step", 0)) * spec.config.rl.epochs * spec.config.rl.minibatches
        - int(sum(series("train/skipped_updates"))),
        "rollouts": int(last.get("rollout/total", 0)),
        # generated response tokens of every charged rollout (the token budget's unit), and the
        # prompt tokens those rollouts prefilled, reported apart
        "tokens": int(last.get("rollout/tokens", 0)),
        "prompt_tokens": int(last.get("rollout/prompt_tokens", 0)),
        "max_step_rollouts": int(max(series("rollout/step"), default=0)),
        "effective_rollouts": int(last.get("rollout/effective_total", 0)),
        "pflops": _pflops(last)[0] if last else 0.0,
        "pflops_formula": _pflops(last)[1] if last else 0.0,
        # HeaPA's released analytic convention (fit/accounting.py), a third count beside these two
        "pflops_heapa": float(last.get("perf/pflops_heapa", float("nan"))),
        "padding_ratio": float(last.get("perf/padding_ratio", float("nan"))),
        "final": curve["metric"][-1] if curve["metric"] else float("nan"),
        "final_buckets": {b: v[-1] for b, v in curve["buckets"].items()},
        "best": max(curve["metric"]) if curve["metric"] else float("nan"),
        "curve": curve,
        "zero_var_easy": mean_of("rollout/rolled_zero_var_easy"),
        "zero_var_hard": mean_of("rollout/rolled_zero_var_hard"),
        "zero_var_curve": {"rollouts": [float(r["rollout/total"]) for r in steps
                                        if "rollout/rolled_zero_var_easy" in r],
                           "easy": series("rollout/rolled_zero_var_easy"),
                           "hard": series("rollout/rolled_zero_var_hard")},
        "rolled_pass_hist": (hist / hist.sum()).tolist() if hist.size and hist.sum() else [],
        "aug": {"rollouts": [float(r["rollout/total"]) for r in steps
                             if "select/aug_reward" in r],
                "aug_reward": series("select/aug_reward"),
                "seed_reward_at_aug": [float(r["select/seed_reward"]) for r in steps
                                       if "select/aug_reward" in r and "select/seed_reward" in r],
                # the rollouts of those steps (a step may train augmented groups only)
                "seed_rollouts": [float(r["rollout/total"]) for r in steps
                                  if "select/aug_reward" in r and "select/seed_reward" in r],
                "seed_reward": series("select/seed_reward"),
                "aug_share": mean_of("select/aug_share")},
        # what this run compiled (train records it since the run's start)
        "compile_s": float(last["perf/compile_s"]) if "perf/compile_s" in last else None,
        "compiles": int(last.get("perf/compiles", 0)) if "perf/compiles" in last else None,
        # the gradient noise scale in groups (rl/noise.py) beside the informative groups per
        # optimizer update and the update's norm, over the steps that measured them
        "b_noise": noise.scale(series("train/gns_g2"), series("train/gns_s"))
        if series("train/gns_g2") else None,
        # the two estimates' means and how many steps measured them, so that runs can be
        # pooled into one B_noise (mean tr(Sigma) over mean |G|^2, as a run's is)
        "gns": {"g2": mean_of("train/gns_g2"), "s": mean_of("train/gns_s"),
                "n": len(series("train/gns_g2"))},
        "informative_groups": mean_of("train/informative_groups"),
        "update_norm": mean_of("train/update_norm"),
        "time_s": {k: float(last.get(f"perf/cum_{k}_time", 0.0))
                   for k in ("generate", "verify", "entropy", "update", "select", "eval")},
        "mechanisms": {x.split("/", 1)[1]: int(v) for x, v in last.items()
                       if x.startswith("mech/")},
        "mechanisms_required": required_mechanisms(spec.config),
        "eval_buckets": first.get("evalset/prompt_buckets"),
        "start": {x.split("/", 1)[1]: v for x, v in first.items() if x.startswith("warmstart/")},
        "start_cache": start_cache(spec.config, os.path.dirname(os.path.dirname(spec.dir))),
    }

def _curve(recs: list[dict], metric: str, k: int, per_step: int) -> dict:
    """A run's eval curve: at each evaluation, the step, the rollouts, tokens and PFLOPs spent
    by then, the optimizer updates (`per_step` a step, less the skipped), the metric, every
    bucket's Avg@k and the per-prompt correct counts."""
    curve = {"step": [], "rollouts": [], "tokens": [], "pflops": [], "pflops_formula": [],
             "updates": [], "metric": [], "buckets": {}, "correct_counts": []}
    last_r = last_t = last_p = last_pf = 0.0
    skipped = 0
    for r in recs:
        if "rollout/total" in r:
            last_r = r["rollout/total"]
            last_t = r.get("rollout/tokens", 0)
            if r["step"] > 0:
                last_p, last_pf = _pflops(r)
                skipped += int(r.get("train/skipped_updates", 0))
        key = f"eval/avg@{k}/{metric}"
        if key in r:
            curve["step"].append(r["step"])
            curve["rollouts"].append(float(last_r))
            curve["tokens"].append(float(last_t))
            curve["pflops"].append(last_p)
            curve["pflops_formula"].append(last_pf)
            curve["updates"].append(r["step"] * per_step - skipped)  # optimizer updates
            curve["metric"].append(float(r[key]))
            for b in (x.split("/")[-1] for x in r if x.startswith(f"eval/avg@{k}/")):
                curve["buckets"].setdefault(b, []).append(float(r[f"eval/avg@{k}/{b}"]))
            curve["correct_counts"].append(r.get("evalset/correct_counts"))
    return curve


def _pass_hist(steps: list[dict]) -> np.ndarray:
    """The rolled groups' pass-count histogram summed over the steps (empty without one)."""
    hist = np.zeros(0)
    for r in steps:
        h = [r[x] for x in sorted((x for x in r if x.startswith("rollout/rolled_pass_hist/")),
                                  key=lambda x: int(x.rsplit("/", 1)[1]))]
        if h:
            hist = np.asarray(h, float) if hist.size == 0 else hist + np.asarray(h, float)
    return hist


def start_cache(cfg: ml_collections.ConfigDict, workdir: str = "") -> dict:
    """The warm-start cache a run started from (relative to the comparison's `workdir` when
    inside it, so a moved or copied comparison records the same) and a digest of its key
    (warmstart.cache_key: what the starting point depends on): the report names the exact
    starting point."""
    from frontier_rl import warmstart  # the policy layer; planning needs no jax

    if cfg.warmstart.get("start", ""):  # a shipped start is named by its own digest
        return {"dir": cfg.warmstart.start,
                "key": warmstart.read_start(cfg.warmstart.start)["digest"]}
    key = json.dumps(warmstart.cache_key(cfg), sort_keys=True, default=str)
    where = cfg.warmstart.cache_dir
    if workdir and os.path.isabs(where) and where.startswith(os.path.join(workdir, "")):
        where = os.path.relpath(where, workdir)
    return {"dir": where, "key": hashlib.sha256(key.encode()).hexdigest()[:16]}


def _per_seed_targets(c: ml_collections.ConfigDict, runs: list[dict]) -> dict[int, float]:
    """The pre-registered rollouts-to-target target per seed: compare.target_value points, or
    (when 0) the final accuracy of compare.target's run at that seed minus
    compare.target_margin points (its final value, not its best over the evaluations)."""
    seeds = {r["seed"] for r in runs}
    if _get(c, "target_value") > 0:
        return {s: float(_get(c, "target_value")) for s in seeds}
    return {r["seed"]: r["final"] - _get(c, "target_margin") for r in runs
            if r["method"] == c.target and np.isfinite(r["final"])}


def _mechanisms(runs: list[dict]) -> tuple[dict, list]:
    """Counters per method ({"total", "per_seed"}) and the (method, seed, counter) triples of
    required counters that stayed at zero in that run (checked per run, never on totals)."""
    out: dict[str, dict[str, dict]] = {}
    for r in runs:
        for name, v in r["mechanisms"].items():
            entry = out.setdefault(r["method"], {}).setdefault(name, {"total": 0, "per_seed": {}})
            entry["total"] += v
            entry["per_seed"][str(r["seed"])] = v
    missing = [[r["method"], r["seed"], m] for r in runs for m in r["mechanisms_required"]
               if not r["mechanisms"].get(m)]
    return out, missing


def collect(config: ml_collections.ConfigDict, specs: list[RunSpec]) -> dict:
    """Every run's result, the per-seed targets, the mechanism counters, the matched budgets
    and best-of choices (two_run.py) and what the report needs from the config."""
    c = config.compare
    k = specs[0].config.eval.k
    for s in specs:  # in run order: a reference before the runs matched to it
        if s.match:
            resolve(s, specs, c)
    runs = [run_result(s, c.metric, k) for s in specs]
    for s, r in zip(specs, runs, strict=True):
        r["matched_to"] = s.match or None
        r["rollout_target"] = s.target or None
        r["numerics"] = _done(s).get("numerics")
        r["start_name"] = next((n for n, v in starts_of(c).items() if s.seed in v["seeds"]),
                               None)
    targets = _per_seed_targets(c, runs)
    for r in runs:
        t = targets.get(r["seed"])
        r["target"] = t
        r["rollouts_to_target"] = to_target(r["curve"], t, "rollouts") if t is not None else None
        r["tokens_to_target"] = to_target(r["curve"], t, "tokens") if t is not None else None
        r["pflops_to_target"] = to_target(r["curve"], t, "pflops") if t is not None else None
    mechanisms, missing = _mechanisms(runs)
    seeds = [int(s) for s in _csv(c.seeds)]
    starts = {str(s): next((r["start"] for r in runs if r["seed"] == s and r["start"]), {})
              for s in seeds}
    results = {
        # control arm -> "positive" / "negative" (selection/oracle.py): never a method
        "controls": {s.method: _control_kind(s.config) for s in specs
                     if selection.is_control(s.config.selector.name)},
        "mechanisms": mechanisms,  # method -> counter -> {"total", "per_seed": {seed: value}}
        "mechanisms_required": {r["method"]: r["mechanisms_required"] for r in runs},
        "mechanisms_missing": missing,  # [method, seed, counter] left at zero in that run
        "metric": f"eval/avg@{k}/{c.metric}", "k": k,
        "budget_kind": _get(c, "budget"), "budget": c.rollout_budget,
        "token_budget": _get(c, "token_budget"), "pflops_budget": _get(c, "pflops_budget"),
        "steps_budget": _get(c, "steps"),
        "target_method": c.target, "rollout_reference": c.rollout_reference,
        "target_value": float(_get(c, "target_value")),
        "target_margin": float(_get(c, "target_margin")),
        "equivalence_margin": float(_get(c, "equivalence_margin")),
        "equivalence_margin_source": str(_get(c, "equivalence_margin_source")),
        "effect_sizes": {n: {"points": float(e["points"]), "source": str(e["source"])}
                         for n, e in _get(c, "effect_sizes").items()},
        "confirmatory_declared": (_get(c, "confirmatory") if _get(c, "confirmatory") == "all"
                                  else list(_get(c, "confirmatory"))),
        "methods": _csv(c.run), "seeds": seeds,
        "shared_start": _get(c, "shared_start"), "starts": starts,
        # the shipped starts: name -> {"path", "seeds", "digest"} (the results-file check
        # compares the digests with the files the code now ships)
        "testbed_starts": {n: {**v, "digest": runs_digest(runs, v["seeds"])}
                           for n, v in starts_of(c).items()},
        # the code's float numerics that made every run (numerics.digest, recorded in each
        # run's DONE when it finished), or None when a run predates the record or they differ
        "numerics": _common(r["numerics"] for r in runs),
        "ablations": {n: {f: a[f] for f in ("method", "ablation", "question")}
                      for n, a in _get(c, "ablations").items()},
        "settings_notes": {n: str(v) for n, v in _get(c, "settings_notes").items()},
        # method -> {"reference", "per_seed": {seed: the rollouts its run went to}}
        "match_rollouts": {m: {"reference": ref, "per_seed": {
            str(s.seed): s.target for s in specs if s.method == m}}
            for m, ref in two_run.matches(c).items()},
        # group -> {"arms", "chosen", "mean": {arm: mean final over seeds}, "rule"}
        "best_of": two_run.choose(two_run.groups(c), runs),
        "eval_prompts": runs[0]["eval_prompts"],
        "group_size": specs[0].config.rl.group_size, "batch_size": specs[0].config.rl.batch_size,
        "runs": runs,
    }
    # headroom (positive control - reference) and harm (negative - reference), paired per seed
    results["control_effects"] = report.control_effects(results)
    # seeds for 80% power to see each paper's reported effect at the spread measured here
    results["power"] = report.power_rows(results)
    # each method's share of the headroom (Fieller) and the Holm-corrected confirmatory family
    results["headroom_share"] = report.headroom_shares(results)
    results["confirmatory"] = report.family(results)
    return results


def runs_digest(runs: list[dict], seeds: list[int]) -> str | None:
    """The start digest the runs at `seeds` recorded (one start serves them all)."""
    keys = {r["start_cache"]["key"] for r in runs if r["seed"] in seeds}
    return keys.pop() if len(keys) == 1 else None


NUMERICS_ENV = "FRONTIER_RL_NUMERICS_DIGEST"  # set by the comparison for its worker processes


def _numerics() -> str:
    """numerics.digest() of this process, or the comparison's, which its workers inherit (they
    run the same code under the same XLA flags; one digest costs a compile)."""
    if os.environ.get(NUMERICS_ENV):
        return os.environ[NUMERICS_ENV]
    from frontier_rl import numerics

    os.environ[NUMERICS_ENV] = numerics.digest()
    return os.environ[NUMERICS_ENV]


def _common(values):
    values = set(values)
    return values.pop() if len(values) == 1 else None


def _control_kind(cfg: ml_collections.ConfigDict) -> str:
    """A control arm's kind from its selector's mode: "positive" (frontier) or "negative"."""
    name = cfg.selector.name
    mode = cfg.selector[name].get("mode", "frontier") if name in cfg.selector else "frontier"
    return "positive" if mode == "frontier" else "negative"
