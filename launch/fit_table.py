"""The README's fit table: every paper config on the hardware its docstring names, each program
compiled by the target's own compiler (`frontier-rl fit --target`) beside the CPU compiler's
estimate (`frontier-rl fit --device`), at the memory fraction the launcher sets.

  python launch/fit_table.py OUT_DIR [--only=TEXT] [--compilers=target,cpu]  # what OUT_DIR lacks
  python launch/fit_table.py OUT_DIR --render [--measured | --split]    # the markdown table

GPU rows run as launch/run_gpu.sh runs them (SGLang engine, JAX's colocated share of each GPU,
launch/shares.sh); TPU rows as launch/tpu_pod.sh does (embedded sampler; libtpu's own usable
share). Each (config, target, compiler) is one `frontier-rl fit --json` run whose report is
kept in OUT_DIR/<name>.json (its log beside it), so an interrupted table resumes where it
stopped. The target compilers come from launch/target_env.sh's virtualenvs (`fit` re-runs in
them).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SGLANG = ["--config.rollout.engine=sglang", "--config.rollout.sglang.url=http://127.0.0.1:31000",
          "--config.rollout.sglang.max_rows=512"]

HIVE = ("qwen2.5-math-1.5b", "qwen2.5-math-7b", "deepseek-r1-distill-qwen-1.5b",
        "qwen3-4b-base", "llama3.2-3b-instruct")
HEAPA = ("qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-4b-instruct-2507",
         "qwen2.5-7b-instruct")
# A TPU line that fits for every paper config: HIVE's 1.5B on v5e-8 with `fit`'s proposal
# (fewer rows per sampler call) and on v5p-8 above; HIVE's 7B and the 8B configs (HeaPA, GRPO,
# DAPO) on v5p-16, 8 chips on 2 hosts, where the paper mesh (data=1, fsdp=8) holds as written;
# HeaPA's 8B on v5e-32 with a tensor axis (docs/architecture.md, "A paper run on a TPU slice").
TPU_FITS = ([("math_hive.py:qwen2.5-math-1.5b", "v5e-8", "data=1,fsdp=8",
              ["--config.rollout.rows_per_call=256"]),
             ("math_hive.py:qwen2.5-math-7b", "v5p-16", "data=1,fsdp=8", [])]
            + [(f"{c}.py:qwen3-8b", "v5p-16", "data=1,fsdp=8", [])
               for c in ("math_heapa", "math_grpo", "math_dapo")]
            # on v5e's 16 GiB chips the sampler's weights must be split: a tensor axis of 8
            # (the KV heads), micro-batches of one row per fsdp shard
            + [("math_heapa.py:qwen3-8b", "v5e-32", "data=1,fsdp=4,model=8",
                ["--config.mesh.model=8", "--config.rl.micro_batch_size=4"])])
# (config, target, mesh, extra flags): the paper configs on their docstrings' hardware (the
# configs' mesh, data=1 fsdp=8), then the 1.5B and 8B configs on TPU slices, fsdp over every
# device of the slice (v5p-8 is 4 megacore devices).
ROWS = ([(f"math_hive.py:{m}", "a100-80gbx8", "data=1,fsdp=8", SGLANG) for m in HIVE]
        + [(f"math_heapa.py:{m}", "h200x8", "data=1,fsdp=8", SGLANG) for m in HEAPA]
        + [(f"{c}.py:qwen3-8b", "h200x8", "data=1,fsdp=8", SGLANG)
           for c in ("math_grpo", "math_dapo")]
        # arXiv 2608.17941's Table 1 (configs/compare_numina.py; its hardware not read: HIVE's)
        + [(f"compare_numina.py:{m}", "a100-80gbx8", "data=1,fsdp=8", SGLANG)
           for m in ("qwen2.5-math-1.5b", "llama3.2-1b-instruct")]
        + [(c, t, m, []) for c in ("math_hive.py:qwen2.5-math-1.5b", "math_heapa.py:qwen3-8b")
           for t, m in (("v5e-8", "data=1,fsdp=8"), ("v5p-8", "data=1,fsdp=4"))]
        # an 8B policy's float32 weights and Adam state alone fill a v5e-8's 8 x 16 GiB: the
        # v5e slice for it is 32 chips (micro-batches of one row per chip)
        + [("math_heapa.py:qwen3-8b", "v5e-32", "data=1,fsdp=32",
            ["--config.rl.micro_batch_size=32"])]
        + TPU_FITS)


def name(config: str, target: str, compiler: str, extra=()) -> str:
    """The results file's name of one line and compiler (its overrides, if any, in it)."""
    tail = "".join("+" + re.sub(r"[^\w.-]", "-", f.removeprefix("--config.")) for f in extra)
    return f"{config.replace('.py:', '-')}@{target}{tail}.{compiler}"


def label(config: str, extra) -> str:
    """The config column: the config, then its overrides."""
    flags = [f"`{f.removeprefix('--config.')}`" for f in extra]
    return ", ".join([config, *flags])


# The split layout (mesh.rollout, rl.staleness=1): the embedded sampler and the prompt-entropy
# pass on a rollout mesh of their own (data=4: whole weights on each device, so 256 rows per
# sampler call) while the trainer shards over the other 4 devices, compiled for one GPU host
# and one 2-host TPU slice (`--render --split`). No SGLang beside JAX: its default share.
STALE = ["--config.rl.staleness=1", "--config.mesh.rollout=4",
         "--config.rollout.rows_per_call=256"]
SPLIT = [("math_hive.py:qwen2.5-math-1.5b", "h100x8", "data=1,fsdp=4", STALE),
         ("math_hive.py:qwen2.5-math-1.5b", "v5p-16", "data=1,fsdp=4", STALE)]


def run_one(out: str, config: str, target: str, mesh: str, extra: list[str],
            compiler: str) -> dict:
    """One `fit` run: compiler "target" (--target) or "cpu" (--device, the CPU estimate)."""
    path = os.path.join(out, name(config, target, compiler, extra) + ".json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    from frontier_rl.fit import targets

    t = targets.parse(target)
    where = ([f"--target={target}"] if compiler == "target" else
             [f"--device={targets.estimate_device(t)}"])
    cmd = [os.path.join(os.path.dirname(sys.executable), "frontier-rl"), "fit",
           f"--config={os.path.join(ROOT, 'configs', config)}", "--config.model.path=",
           *where, f"--mesh={mesh}", *extra, "--json"]
    env = dict(os.environ)
    if t.kind == "gpu" and "--config.rollout.engine=sglang" in extra:
        # run_gpu.sh's default layout, SGLang beside JAX: the share env.sh gives JAX there
        from frontier_rl.fit import node_memory

        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = str(
            node_memory.launch_shares()["DEFAULT_JAX_MEM_FRACTION_SHARED"])
    print(f"[fit_table] {name(config, target, compiler, extra)}: {' '.join(cmd[1:])}",
          flush=True)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    with open(path[:-5] + ".log", "w") as f:  # this machine's paths left out
        f.write(scrub(r.stdout + r.stderr))
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    if r.returncode not in (0, 3, 4) or not lines:  # 4: a compile error, kept in its report
        print(f"[fit_table]   failed (exit {r.returncode}): {r.stderr[-2000:]}", flush=True)
        return {}
    report = json.loads(lines[-1])
    report["wall_s"] = time.perf_counter() - t0
    with open(path, "w") as f:
        json.dump(report, f)
    print(f"[fit_table]   {report['wall_s']:.0f} s, fits: {report['fits']}", flush=True)
    return report


def scrub(text: str) -> str:
    """`text` with the repository's path as '.' and the home directory's as '~'."""
    return text.replace(ROOT, ".").replace(os.path.expanduser("~"), "~")


def _gib(n) -> str:
    return "-" if n is None else f"{n / 2**30:.1f}"


KINDS = (("entropy", "prompt entropy"), ("logps", "log-probs"), ("train_step", "train step"),
         ("probe", "weight-sync probe"), ("sampler", "sampler (largest)"))


def render(out: str, measured_only: bool = False) -> str:
    """One line per (config, target): each program's peak GiB per device by the target's
    compiler, the CPU compiler's estimate of it in brackets (largest program of each kind);
    `measured_only`: only the lines OUT_DIR has a report for."""
    head = ("| config | target (budget GiB) | mesh d/f/m | "
            + " | ".join(title for _, title in KINDS)
            + " | fits | train step compile s | train step collectives |")
    lines = [head, "|" + "---|" * (len(KINDS) + 6)]
    for config, target, _, extra in ROWS:
        rep = _load(out, config, target, "target", extra)
        if not rep:
            if measured_only:
                continue
            lines.append(f"| {label(config, extra)} | {target} | not measured |"
                         + " |" * (len(KINDS) + 3))
            continue
        cpu = _load(out, config, target, "cpu", extra)
        mesh = "/".join(str(rep["mesh"][k]) for k in ("data", "fsdp", "model"))
        cells = []
        for kind, _ in KINDS:
            got = _largest(rep, kind)
            if got is None:
                cells.append("-")
                continue
            est = _largest(cpu, kind) if cpu else None
            value = _failure(got["error"]) if got.get("error") else _gib(got["bytes_per_device"])
            cells.append(f"{value} ({_gib(est['bytes_per_device']) if est else 'n/m'})"
                         f"{' NO' if got['fits'] is False else ''}")
        train = _largest(rep, "train_step") or {}
        coll = ", ".join(f"{k} x{v}" for k, v in
                         (train.get("target") or {}).get("collectives", {}).items())
        lines.append(f"| {label(config, extra)} | {target} ({rep['usable_bytes'] / 2**30:.1f}) "
                     f"| {mesh} | "
                     + " | ".join(cells)
                     + f" | {verdict(rep)} | {train.get('compile_s', 0):.0f} | "
                     f"{coll} |")
    return "\n".join(lines)


def render_split(out: str) -> str:
    """One line per split layout (SPLIT) measured in OUT_DIR: each half's devices and mesh, its
    largest program per device by the target's compiler and its bytes over its devices, and
    the sum of both halves against the node."""
    lines = ["| config | target | train half: devices (d/f/m), largest GiB/device, GiB | "
             "rollout half: devices (d/f/m), largest GiB/device, GiB | both: devices, GiB of "
             "the node's | fits |", "|---|---|---|---|---|---|"]
    for config, target, _, extra in SPLIT:
        rep = _load(out, config, target, "target", extra)
        if not rep:
            continue
        h = rep["halves"]
        cells = []
        for half in ("train", "rollout"):
            x = h[half]
            mesh = "/".join(str(x["mesh"][k]) for k in ("data", "fsdp", "model"))
            cells.append(f"{x['devices']} ({mesh}), {_gib(x['peak_bytes_per_device'])}, "
                         f"{_gib(x['bytes'])}")
        t = h["sum"]
        lines.append(f"| {label(config, extra)} | {target} | " + " | ".join(cells)
                     + f" | {t['devices']}, {_gib(t['bytes'])} of {_gib(t['node_bytes'])} | "
                     f"{verdict(rep)} |")
    return "\n".join(lines)


def verdict(report: dict) -> str:
    """The fits column: a compile error is the run's error, not a verdict (fit/command.py)."""
    if report.get("error_kind") == "compile_error":
        return "compile error"
    return "yes" if report["fits"] else "NO"


def _failure(error: str) -> str:
    """A compiler's refusal in a few words (libtpu's out-of-HBM names both sizes)."""
    m = re.search(r"temporaries \(([\d.]+)G\) exceeds available HBM \(([\d.]+)G\)", error)
    if m:
        return f"over HBM: {m.group(1)}G temporaries of {m.group(2)}G"
    m = re.search(r"Used ([\d.]+)G of ([\d.]+)G hbm", error)
    if m:
        return f"over HBM: {m.group(1)}G of {m.group(2)}G"
    return "fails: " + error.split("\n")[0][:60]


def _largest(report: dict, kind: str) -> dict | None:
    mine = [p for p in report.get("programs", []) if p["kind"] == kind]
    return max(mine, key=lambda p: p["bytes_per_device"] or float("inf")) if mine else None


def _load(out, config, target, compiler, extra=()) -> dict:
    path = os.path.join(out, name(config, target, compiler, extra) + ".json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--only", default="",
                    help="rows whose 'config@target flags' contains this")
    ap.add_argument("--compilers", default="target,cpu",
                    help="which runs: target (fit --target), cpu (fit --device), or both")
    ap.add_argument("--render", action="store_true")
    ap.add_argument("--measured", action="store_true", help="--render: measured lines only")
    ap.add_argument("--split", action="store_true",
                    help="--render: the split layouts' halves (SPLIT)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.render:
        print(render_split(a.out) if a.split else render(a.out, a.measured))
        return
    for config, target, mesh, extra in ROWS + SPLIT:
        if a.only and a.only not in f"{config}@{target} {' '.join(extra)}":
            continue
        for compiler in a.compilers.split(","):
            run_one(a.out, config, target, mesh, extra, compiler)


if __name__ == "__main__":
    main()
