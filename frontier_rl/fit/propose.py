"""What fits, when a run does not: `frontier-rl fit` searches the run's own knobs for the smallest
change under which every program fits, and prints it as `--config.` overrides with the
compiled figures of the change (`--apply=PATH` writes a config copy that makes it).

The knobs, per kind of program that does not fit (fit.check's kinds), in the order tried:
  sampler: rollout.rows_per_call, each smaller row bucket of the largest call down to one
    group (rl.group_size); costs more, smaller sampler calls.
  entropy: model.logits_chunk, halved down to MIN_CHUNK positions (costs nothing: the same work
    in smaller pieces); rollout.entropy_batch, halved down to the mesh's row shards.
  logps, train_step, probe: model.logits_chunk; model.attention_chunk where attention runs on
    XLA (costs nothing); rl.micro_batch_size, halved while a multiple of data x fsdp and a
    divisor of the minibatch (as fit's advice and the trainer require); model.remat, "dots"
    then "full" (recomputed activations).
  every kind, last: the mesh for the same devices (not with --mesh): data folded into fsdp,
    then mesh.model doubled where it divides the KV heads (more collectives).

"Smallest change": the fewest knobs, each moved as little as possible (the largest rows,
micro-batch or chunk that fits), the costless knobs first. A knob that costs nothing is tried
only where the memory it can free (a generous bound from the program's shape) covers the
program's excess over the budget, so a hopeless one costs no compile. The search assumes a
program's memory falls as a knob moves along its ladder, and finds the least move by bisection:
the first value tried is the one the failing program's own figure predicts (its rows scaled by
budget / bytes), then the neighbour that changes less. One knob alone is tried before two:
when none fits alone, the knobs are moved to their ends one after another until the programs
fit, those not needed are dropped, and each of the rest is moved back as far as it can go.

Each candidate is a config validated as the trainer validates it (config_lib.validate, the
mesh for the devices, the trainer's and sampler's own checks at compile time); an invalid one
is skipped and named. Only the failing kinds are recompiled (a mesh change recompiles every
program), with the simulation already played (`sim`). Programs of other kinds keep their
figures: the knobs only lower them. Kinds are searched in the order sampler, entropy, train
program; a later kind's search starts from the earlier kinds' change.
"""
from __future__ import annotations

import copy
import dataclasses
import importlib.util
import math
import os
import re
import shlex
import textwrap
import time

import ml_collections

GROUPS = (("sampler", ("sampler",)), ("entropy", ("entropy",)),
          ("train", ("logps", "train_step", "probe")))
MIN_CHUNK = 128  # the smallest logits / attention chunk proposed (positions)
MAX_TRIALS = 16  # candidates compiled at most, over all kinds


@dataclasses.dataclass
class Knob:
    """One knob: `ladder` is [(overrides, rows)] from the least change to the most, `rows`
    those a value gives its programs (None where they do not scale with it); `kinds` the
    programs it lowers."""

    name: str
    ladder: list
    kinds: tuple
    size: int = 0  # rows of the current value, for a knob whose programs grow with its rows
    frees: object = None  # (program, overrides) -> bytes it can free at most; None: unknown


def _fields(config, overrides: dict) -> ml_collections.ConfigDict:
    from frontier_rl import config_lib

    c = copy.deepcopy(config)
    with c.unlocked():
        config_lib.set_fields(c, overrides)
    return config_lib.validate(c)


def _tokens(program: dict) -> int:
    return sum(int(t) for t in re.findall(r"\d+", program["tokens"]))


def _halves(value: int, floor: int) -> list[int]:
    out = []
    while value // 2 >= floor and value % 2 == 0:
        value //= 2
        out.append(value)
    return out


def _padded(rows: int, shards: int) -> int:
    """The rows a sampler call of `rows` rows compiles for, as Sampler.padded_rows pads them
    with its default buckets: the row bucket, then a multiple of the mesh's row shards."""
    from frontier_rl.fit.shapes import row_bucket

    return -(-row_bucket(rows) // shards) * shards


def knobs(config, spec: dict, failing: list[dict], mcfg, platform: str,
          mesh_free: bool) -> list[Knob]:
    """The knobs that can lower the `failing` programs (fit.check's entries) of `config` on
    mesh `spec`, in the order they are tried (see the module docstring)."""
    from frontier_rl.fit.shapes import SMALL_BUCKETS
    from frontier_rl.models.transformer import attention_impl

    ro, rl, m = config.rollout, config.rl, config.model
    shards = spec["data"] * spec["fsdp"]
    kinds = {p["kind"] for p in failing}
    out: list[Knob] = []
    if "sampler" in kinds:
        # A call of whole prompts is at most rows_per_call rows, so its program at most the
        # padded rows_per_call: each row bucket below the largest failing program's, once.
        top = max(p["rows"] for p in failing if p["kind"] == "sampler")
        rows: dict[int, int] = {}  # padded rows -> the largest rows_per_call giving them
        for r in {*SMALL_BUCKETS, *(top >> k for k in range(1, 32)), rl.group_size}:
            if rl.group_size <= r < top and _padded(r, shards) < top:
                p = _padded(r, shards)
                rows[p] = max(rows.get(p, 0), r)
        out.append(Knob("rollout.rows_per_call",
                        [({"rollout.rows_per_call": r}, p) for p, r in sorted(rows.items())[::-1]],
                        ("sampler",), top))
    # A chunk at least the sequence's length is the sequence at once (0 says the same).
    whole = 1 << (config.fit.prompt_len + ro.max_new_tokens - 1).bit_length()
    chunked = kinds & {"entropy", "logps", "train_step", "probe"}
    def chunk_knob(field: str, now: int, programs, bound) -> Knob:
        """A chunk knob halving `field` from `now` (0: the whole sequence), compiled only where
        `bound` (program, positions fewer, config, model, shards) says it could free enough."""
        cur = min(now or whole, whole)
        return Knob(field, [({field: v}, None) for v in _halves(cur, MIN_CHUNK)],
                    tuple(sorted(programs)),
                    frees=lambda p, o: bound(p, cur - o[field], config, mcfg, shards))

    if chunked:
        out.append(chunk_knob("model.logits_chunk", m.logits_chunk, chunked, _logits_bound))
    if "entropy" in kinds:
        most = max(p["rows"] for p in failing if p["kind"] == "entropy")
        cur = min(-(-ro.entropy_batch // shards) * shards, most)
        out.append(Knob("rollout.entropy_batch",
                        [({"rollout.entropy_batch": v}, v) for v in _halves(cur, shards)
                         if v % shards == 0], ("entropy",), cur))
    train = kinds & {"logps", "train_step", "probe"}
    if train and attention_impl(mcfg, platform) == "xla":
        out.append(chunk_knob("model.attention_chunk", m.attention_chunk, train,
                              _attention_bound))
    if kinds & {"logps", "train_step"}:
        mb_rows = rl.batch_size * rl.group_size // rl.minibatches
        cur = rl.micro_batch_size or mb_rows
        out.append(Knob("rl.micro_batch_size",
                        [({"rl.micro_batch_size": v}, v) for v in _halves(cur, shards)
                         if v % shards == 0 and mb_rows % v == 0],
                        tuple(sorted(kinds & {"logps", "train_step"})), cur))
    if "train_step" in kinds:
        order = ("none", "dots", "full")
        later = order[order.index(m.remat) + 1:] if m.remat in order else ()
        out.append(Knob("model.remat", [({"model.remat": v}, None) for v in later],
                        ("train_step",)))
    if mesh_free:
        out.append(Knob("mesh", [(o, None) for o in _meshes(config, spec, mcfg.num_kv_heads)],
                        ("sampler", "entropy", "logps", "train_step", "probe")))
    return [k for k in out if k.ladder]


def _meshes(config, spec: dict, kv_heads: int) -> list[dict]:
    """The mesh overrides for the same devices, each sharding more than the one before: data
    folded into fsdp (parameters, gradients and optimizer state over every device), then
    mesh.model doubled, out of fsdp, while it divides the KV heads."""
    d, f, m = spec["data"], spec["fsdp"], spec["model"]
    data = {} if d == 1 or config.mesh.data == -1 else {"mesh.data": 1}
    out = [{**data, "mesh.fsdp": d * f}] if d > 1 else []
    v = 2 * m
    while kv_heads % v == 0 and (d * f * m) % v == 0:
        out.append({**data, "mesh.fsdp": d * f * m // v, "mesh.model": v})
        v *= 2
    return out


def _rows_per_device(program: dict, config, shards: int) -> int:
    rows = program["rows"]
    if program["kind"] in ("logps", "train_step") and config.rl.micro_batch_size:
        rows = min(rows, config.rl.micro_batch_size)
    elif program["kind"] == "entropy":
        rows = min(rows, config.rollout.entropy_batch)
    return -(-rows // shards)


def _logits_bound(program, fewer: int, config, mcfg, shards) -> int:
    """Bytes a logits chunk `fewer` positions shorter frees at most: float32 logits, their
    softmax, its gradient and one more of the vocabulary's width, per row on the device."""
    return 4 * 4 * _rows_per_device(program, config, shards) * fewer * mcfg.vocab_size


def _attention_bound(program, fewer: int, config, mcfg, shards) -> int:
    """Bytes an attention block `fewer` query positions shorter frees at most: four float32
    [heads, block, keys] arrays per row (scores, probabilities and their gradients), in every
    layer when the train step keeps the layers' activations."""
    layers = (mcfg.num_layers if program["kind"] == "train_step" and mcfg.remat != "full"
              else 1)
    return (4 * 4 * _rows_per_device(program, config, shards) * mcfg.num_heads * fewer
            * _tokens(program) * layers)


_HBM = re.compile(r"Used ([\d.]+)([KMGT]) of ([\d.]+)([KMGT]) hbm|"
                  r"temporaries \(([\d.]+)([KMGT])\) exceeds available HBM", re.IGNORECASE)


def program_bytes(program: dict) -> float | None:
    """A program's bytes per device: fit's figure, else the size a compiler's refusal names
    (libtpu's "Used 50.70G of 15.75G hbm"); None when neither is known."""
    if program.get("bytes_per_device") is not None:
        return float(program["bytes_per_device"])
    m = _HBM.search(program.get("error") or "")
    if not m:
        return None
    value, unit = (m.group(1), m.group(2)) if m.group(1) else (m.group(5), m.group(6))
    return float(value) * 1024 ** ("KMGT".index(unit.upper()) + 1) + program["resident"]


def _least(n: int, fits, first: int) -> int | None:
    """The least index i < n with fits(i), fits being monotone (false, ..., false, true, ...),
    by bisection that tries `first`, then, when it fits, its neighbour that changes less (the
    guess errs small). None: none fits (the last index was tried)."""
    lo, hi, found = 0, n - 1, None
    i = min(max(first, 0), n - 1)
    while lo <= hi:
        if fits(i):
            hi = i - 1
            i = hi if found is None else (lo + hi) // 2
            found = hi + 1
        else:
            lo = i + 1
            i = (lo + hi) // 2
    return found


class _Search:
    """The trials of one proposal: each candidate's config checked once (memoised)."""

    def __init__(self, config, device, report, sim, target, mesh_of, say, max_trials):
        self.config, self.device, self.report, self.sim = config, device, report, sim
        self.target, self.mesh_of, self.say, self.max_trials = target, mesh_of, say, max_trials
        self.usable = report["usable_bytes"]
        self.trials: list[dict] = []  # the candidates compiled
        self.skipped: list[dict] = []  # those refused before compiling (invalid, over budget)
        self.memo: dict = {}

    def run(self, overrides: dict, kinds: tuple, judged: set) -> dict:
        """Checks `config` with `overrides`, compiling `kinds` (all with a mesh change);
        {"fits", "programs", ...}; fits only where every program of `judged` kinds fits."""
        from frontier_rl.fit import command as fit

        key = tuple(sorted(overrides.items()))
        if key in self.memo:
            return self.memo[key]
        args = " ".join(arg(k, v) for k, v in overrides.items())
        entry = {"overrides": dict(overrides), "fits": False, "programs": []}
        self.memo[key] = entry
        mesh = any(k.startswith("mesh.") for k in overrides)
        try:
            c = _fields(self.config, overrides)
            spec = self.mesh_of(c)
        except ValueError as e:  # ConfigError included: the trainer would refuse it too
            entry["invalid"] = str(e)
            self.say(f"  skip {args}: {e}")
            self.skipped.append(entry)
            return entry
        if len(self.trials) >= self.max_trials:
            entry["invalid"] = f"not compiled: {self.max_trials} candidates already were"
            self.skipped.append(entry)
            return entry
        what = "every program (a mesh change)" if mesh else ", ".join(kinds)
        self.say(f"  try {args}: {what} ...", flush=True)
        t0 = time.perf_counter()

        def indented(*a, **k):  # the programs as check compiles them
            line = " ".join(str(x) for x in a)
            if line.startswith("  "):
                self.say("  " + line, **k)

        try:
            r = fit.check(c, spec, self.device, say=indented, sim=self.sim,
                          kinds=None if mesh else kinds, target=self.target)
        except Exception as e:  # a compiler's or the trainer's refusal of this candidate
            entry["invalid"] = f"{type(e).__name__}: {e}"
            self.say(f"    refused: {entry['invalid'].splitlines()[0][:200]}")
            self.trials.append(entry)
            return entry
        entry["seconds"] = time.perf_counter() - t0
        entry["programs"] = r["programs"]
        entry["kinds"] = sorted({p["kind"] for p in r["programs"]})
        entry["mesh"] = spec
        mine = [p for p in r["programs"] if p["kind"] in judged]
        entry["fits"] = bool(mine) and all(p["fits"] is True for p in mine)
        for p in mine:
            need = (f"{_gib(p['bytes_per_device'])} of {self.usable / 2**30:.1f} GiB"
                    if p["bytes_per_device"] is not None else
                    "the compiler refused it: " + (p.get("error") or "").split("\n")[0][:160])
            self.say(f"    {p['program']} {p['rows']} x {p['tokens']}: {need}: "
                     f"{'fits' if p['fits'] else 'NO'}")
        self.say(f"    -> {'fits' if entry['fits'] else 'does not fit'} "
                 f"({entry['seconds']:.0f} s)", flush=True)
        self.trials.append(entry)
        return entry

    def first_guess(self, knob: Knob, failing: list[dict]) -> int:
        """The ladder index the failing programs' figures predict, as if their bytes were in
        proportion to their rows (so the guess errs small: a program's fixed part does not
        shrink), else the middle."""
        wants = [min(knob.size, p["rows"]) * self.usable / b for p in failing
                 if p["kind"] in knob.kinds for b in [program_bytes(p)] if b]
        if not knob.size or not wants:
            return len(knob.ladder) // 2
        return next((i for i, (_, s) in enumerate(knob.ladder) if s <= min(wants)),
                    len(knob.ladder) - 1)

    def group(self, base: dict, kinds: tuple, judged: set, ks: list[Knob],
              failing: list[dict]) -> dict | None:
        """The smallest change of knobs `ks` (on top of `base`) under which the programs of
        `judged` kinds fit; None when there is none within the trials allowed."""
        def fits(over):
            return self.run({**base, **over}, kinds, judged)["fits"]

        for k in ks:  # one knob alone, where it lowers every failing program
            if not {p["kind"] for p in failing} <= set(k.kinds):
                continue
            short = [(k.frees(p, k.ladder[-1][0]), excess) for p in failing
                     if k.frees is not None
                     for excess in [(program_bytes(p) or math.inf) - self.usable]
                     if k.frees(p, k.ladder[-1][0]) < excess < math.inf]
            if short:
                self.say(f"  skip {k.name}: frees at most {_gib(short[0][0])} GiB of the "
                         f"{_gib(short[0][1])} over the budget")
                continue
            i = _least(len(k.ladder), lambda i, k=k: fits(k.ladder[i][0]),
                       self.first_guess(k, failing))
            if i is not None:
                return dict(k.ladder[i][0])
        if len(ks) < 2:
            return None
        self.say("  no knob alone: together ...")
        chosen: list[Knob] = []
        together: dict = {}
        for k in ks:  # each to its end, until they fit
            chosen.append(k)
            together.update(k.ladder[-1][0])
            if fits(together):
                break
        else:
            return None
        for k in chosen[-2::-1]:  # drop those not needed
            rest = {f: v for f, v in together.items() if f not in k.ladder[-1][0]}
            if fits(rest):
                chosen.remove(k)
                together = rest
        for k in chosen:  # each back as far as the others allow
            others = {f: v for f, v in together.items() if f not in k.ladder[-1][0]}
            i = _least(len(k.ladder),
                       lambda i, k=k, others=others: fits({**others, **k.ladder[i][0]}),
                       len(k.ladder) - 1)
            together = {**others, **k.ladder[len(k.ladder) - 1 if i is None else i][0]}
        return together


def propose(config, spec: dict, device: str, report: dict, sim: dict, *, target=None,
            mesh_of=None, say=print, max_trials: int = MAX_TRIALS) -> dict:
    """The smallest change of `config`'s knobs under which every program of `report` (fit.check
    on mesh `spec`) fits: {"overrides", "args", "fits", "programs", "trials", "tried", ...}.
    `mesh_of(config)` gives a candidate's mesh (None: the mesh is fixed, by --mesh)."""
    from frontier_rl.fit import command as fit
    from frontier_rl.models.transformer import attention_impl

    t0 = time.perf_counter()
    mcfg = fit.model_config(config)
    platform = (target.platform if target is not None
                else "tpu" if device in fit.TPU_DEVICES else "gpu")
    mcfg = dataclasses.replace(mcfg, attention=attention_impl(mcfg, platform))
    search = _Search(config, device, report, sim, target, mesh_of or (lambda c: spec), say,
                     max_trials)
    failing = [p for p in report["programs"] if p["fits"] is False]
    groups = [(name, [p for p in failing if p["kind"] in kinds]) for name, kinds in GROUPS]
    groups = [g for g in groups if g[1]]
    unsolved = {p["kind"] for p in failing}
    programs = {p["kind"]: [] for p in report["programs"]}
    for p in report["programs"]:
        programs[p["kind"]].append({**p, "recompiled": False})
    overrides: dict = {}
    tried: list[str] = []
    if not failing:  # e.g. the node's sum, or a cost program's error: no knob of ours
        tried.append("nothing: every program fits; what does not is named above")
    if groups:
        say(f"proposal: searching the {', '.join(n for n, _ in groups)} knobs (up to "
            f"{max_trials} candidates compiled) ...", flush=True)
    for _, mine in groups:
        fail_kinds = tuple(sorted({p["kind"] for p in mine}))
        c = _fields(config, overrides) if overrides else config
        ks = knobs(c, mesh_of(c) if mesh_of else spec, mine, mcfg, platform,
                   mesh_free=mesh_of is not None)
        tried += [f"{k.name} " + ", ".join(_value(o[k.name] if k.name in o else o)
                                           for o, _ in k.ladder) for k in ks]
        judged = {p["kind"] for p in report["programs"]} - (unsolved - set(fail_kinds))
        found = search.group(overrides, fail_kinds, judged, ks, mine) if ks else None
        if found is None:
            continue
        overrides.update(found)
        unsolved -= set(fail_kinds)
        for p in search.memo[tuple(sorted(overrides.items()))]["programs"]:
            programs[p["kind"]] = []
        for p in search.memo[tuple(sorted(overrides.items()))]["programs"]:
            programs[p["kind"]].append({**p, "recompiled": True})
    flat = [p for ps in programs.values() for p in ps]
    fits = not unsolved and all(p["fits"] is True for p in flat)
    if mesh_of is None:
        tried.append("the mesh: fixed by --mesh")
    return {"overrides": overrides, "args": [arg(k, v) for k, v in overrides.items()],
            "fits": fits, "programs": flat,
            "changes": [{"field": k, "from": _get(config, k), "to": v}
                        for k, v in overrides.items()],
            "unsolved": sorted(unsolved), "tried": tried, "trials": search.trials,
            "skipped": search.skipped, "compiled": len(search.trials),
            "usable_bytes": report["usable_bytes"], "seconds": time.perf_counter() - t0}


def arg(field: str, value) -> str:
    """The command-line override of `field`: --config.<field>=<value>."""
    return f"--config.{field}={_value(value)}"


def _value(value) -> str:
    if isinstance(value, dict):
        return ",".join(f"{k}={_value(v)}" for k, v in value.items())
    return str(value).lower() if isinstance(value, bool) else str(value)


def _get(config, field: str):
    node = config
    for part in field.split("."):
        node = node[part]
    return node


def _gib(n) -> str:
    return "n/a" if n is None else f"{n / 2**30:.2f}"


def print_proposal(p: dict, say=print) -> None:
    """The proposal: one line `proposal: --config.a=1 --config.b=2` (what the launch scripts
    read), the change, and each program's figure with it."""
    budget = p["usable_bytes"] / 2**30
    if not p["overrides"] or not p["fits"]:
        say(f"proposal: none found that fits ({p['compiled']} candidates compiled in "
            f"{p['seconds']:.0f} s); tried: " + "; ".join(p["tried"] or ["no knob applies"]))
        if p["overrides"]:
            say(f"  a partial change ({' '.join(p['args'])}) leaves {', '.join(p['unsolved'])} "
                "over the budget")
        return
    say("proposal: " + " ".join(p["args"]))
    say("  " + ", ".join(f"{c['field']} {c['from']} -> {c['to']}" for c in p["changes"])
        + f" ({p['compiled']} candidates compiled in {p['seconds']:.0f} s)")
    width = max(len(q["program"]) for q in p["programs"])
    say(f"  {'program':<{width}}  {'shape (rows x tokens)':<22} {'GiB/device':>10}  "
        f"{'budget':>7}  fits")
    for q in p["programs"]:
        b = q["bytes_per_device"]
        say(f"  {q['program']:<{width}}  {str(q['rows']) + ' x ' + q['tokens']:<22} "
            f"{_gib(b):>10}  {budget:7.1f}  {'yes' if q['fits'] else 'NO'}"
            + ("" if q["recompiled"] else "  (as above: the change does not raise it)"))
    say("  fits with the proposal; --apply=PATH writes a config copy with it")


def hook(*, search: bool = True, apply: str = "", source: tuple[str, dict] | None = None,
         command: str = "", say=print):
    """What `frontier-rl fit` does after its report (fit.main's `after`; cli.py makes it): when a
    program does not fit (and `search`), the proposal, printed and kept in report["proposal"];
    with `apply`, the config copy of a proposal that fits (`source`: the --config argument and
    its command-line overrides; `command`: the command line, for the copy's docstring)."""
    def after(config, spec, device, report, sim, *, target=None, mesh_of=None):
        if search and report["fits"] is False:
            report["proposal"] = propose(config, spec, device, report, sim, target=target,
                                         mesh_of=mesh_of, say=say)
            print_proposal(report["proposal"], say)
        if not apply:
            return
        p = report.get("proposal")
        if p and p["fits"] and source is not None:
            check = write_config(apply, p, source=source[0], command_line=source[1],
                                 command=command, report=report)
            say(f"fit: wrote {apply} (the proposal applied); check it: {check}")
        else:
            why = ("the run fits as it is" if report["fits"] else
                   "a compile error is no memory verdict" if report["fits"] is None else
                   "no proposal that fits")
            say(f"fit: --apply={apply}: nothing written ({why})")

    return after


# ---- The config copy (--apply) ----

def write_config(path: str, proposal: dict, *, source: str, command_line: dict,
                 command: str, report: dict) -> str:
    """Writes a config file at `path` whose get_config loads `source` ("file.py[:arg]") with
    the same arg, then sets `command_line`'s overrides and the proposal's; its docstring holds
    `command` and the proposal's figures. Returns the command that checks it."""
    file, _, arg_ = source.partition(":")
    here = os.path.dirname(os.path.abspath(path))
    rel = os.path.relpath(os.path.abspath(file), here)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    in_repo = os.path.relpath(os.path.abspath(file), root)
    places = (rel,) if in_repo.startswith("..") else (rel, in_repo)
    budget = proposal["usable_bytes"] / 2**30
    figures = "\n".join(
        f"  {q['program']}: {q['rows']} x {q['tokens']}, {_gib(q['bytes_per_device'])} GiB of "
        f"{budget:.1f}" + ("" if q["recompiled"] else " (not recompiled: not raised)")
        for q in proposal["programs"])
    check = " ".join(shlex.quote(a) for a in _check_command(command, path))
    head = textwrap.fill(
        f"{source} with the change `frontier-rl fit` proposed for {report['device']} "
        f"({report['compiler']}, GiB per device against a budget of {budget:.1f}): "
        f"{' '.join(proposal['args'])}, on top of the command line's own overrides.", 96)
    text = f'''"""{head}

Made by:
  {command}

The programs with the change:
{figures}

Check it:
  {check}
"""

from frontier_rl.fit import propose as fit_propose

# The original config: relative to this file, then to the repository root.
ORIGINAL = {places!r}
ARG = {arg_ or None!r}
COMMAND_LINE = {dict(command_line)!r}
PROPOSAL = {dict(proposal["overrides"])!r}


def get_config(arg=None):
    return fit_propose.derived_config(__file__, ORIGINAL, ARG, arg, COMMAND_LINE, PROPOSAL)
'''
    os.makedirs(here, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return check


def _check_command(command: str, path: str) -> list[str]:
    """`command` with --config pointing at `path`, and its --config.* overrides, --apply,
    --propose and --json dropped (the copy holds the overrides)."""
    out, skip = [], False
    for a in shlex.split(command):
        name, has_value = a.split("=", 1)[0], "=" in a
        if skip:  # the value of a flag written apart from it
            skip = False
        elif name == "--config":
            out.append(f"--config={path}")
            skip = not has_value
        elif name.startswith("--config.") or name == "--apply":
            skip = not has_value
        elif name not in ("--propose", "--nopropose", "--json", "--nojson"):
            out.append(a)
    return out


def derived_config(file: str, original: tuple, arg_expected: str | None, arg: str | None,
                   command_line: dict, proposal: dict) -> ml_collections.ConfigDict:
    """The config a --apply copy at `file` stands for: `original` (paths relative to the copy,
    then to the repository root) built with `arg_expected`, the command line's overrides and
    the proposal's set, validated."""
    from frontier_rl import config_lib

    if arg not in (None, "") and arg != arg_expected:
        raise ValueError(f"{os.path.basename(file)} is {original[0]}:{arg_expected} with a "
                         f"proposal made for that arg; it takes no other (got {arg!r})")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    bases = (os.path.dirname(os.path.abspath(file)), root)
    path = next((os.path.join(b, p) for p, b in zip(original, bases, strict=False)
                 if os.path.exists(os.path.join(b, p))), None)
    if path is None:
        raise FileNotFoundError(f"{file}: its original config {original[0]} is not there")
    spec = importlib.util.spec_from_file_location(
        f"frontier_rl_fit_original_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    c = module.get_config(arg_expected) if arg_expected else module.get_config()
    with c.unlocked():
        config_lib.set_fields(c, {**command_line, **proposal})
    return config_lib.validate(c)
