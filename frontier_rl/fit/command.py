"""Will this run fit? `frontier-rl fit --config=... [--mesh=data=D,fsdp=F,model=M]
[--device=h200] [--json]`.

It sizes the run the selector will make, not just the config's batch. First it plays the
configured selector for `fit.sim_steps` steps on the synthetic learner (frontier_rl/sim: the same
selector code against a simulated policy, no model) and records every device call it makes:
rollouts (prompts x n, split as the engine splits them by `rollout.rows_per_call`), prompt
entropy passes, the policy's augmentation generations (HeaPA) and the packed train batches;
evaluation's calls follow from `eval.*` (chunks of evaluation.CHUNK_ROWS rows, a full chunk
assumed). HIVE's first round (1.5 x B prompts) and top-ups, DS's generation batches and HeaPA's
children are what the learner makes them on its model of a policy early in training, so treat
the maxima as typical rather than worst cases.

Then it compiles, for those row counts padded as the run pads them (`Sampler.padded_rows`,
`PromptEntropy.padded_shape`, rl/batch.py's buckets and the trainer's row multiple), every
distinct program the run compiles, without allocating it: the sampler (prefill + decode loop
with its KV cache) per (token cap, greedy, top-p) variant at its largest row bucket (every bucket
with `fit.every_bucket`), the prompt-entropy pass, the old-log-prob pass (also the KL reference's,
when the run recomputes or rl.kl_coef > 0), the train step (epochs x minibatches x micro-batches,
params and optimizer state donated) and, with an external engine, the weight-sync probe (the
log-prob pass on one prompt and its probe continuation, at the shape the trainer sends it:
`probe_shape`; the sampler is then not compiled). Each figure is per device, from XLA's memory
analysis of the partitioned program (arguments + outputs - donated aliases + temporaries),
plus what stays resident meanwhile: Adam's two moments beside every program but the train
step, and the KL reference policy's parameters beside every program when rl.kl_coef > 0.

The mesh is built from fake CPU devices (`--xla_force_host_platform_device_count`, set by the
CLI before JAX starts), so the check runs on any machine and nothing is run. XLA's CPU compiler
is not the GPU's or TPU's: fusion and layout differ, so treat the figures as estimates (not yet
compared with a device's own memory profile; launch/gpu_check.sh does that on a GPU). A program
fits when it needs at most the share of the device's memory JAX will have: on a GPU, the
fraction it preallocates (`mem_fraction`: XLA_PYTHON_CLIENT_MEM_FRACTION, which launch/env.sh
sets for every launch script, else, with an external engine on JAX's GPUs, the share env.sh
gives JAX there, else JAX's default of 75%); on a TPU, which has no such fraction,
`TPU_USABLE`. A program that does not fit is named with its shape and the fields to change.
With an external engine on JAX's GPUs (launch/run_gpu.sh's default layout) the whole GPU is
summed too: JAX's share, the engine's memory and a runtime margin (node_memory.py,
report["node"]); a layout whose sum exceeds the GPU does not fit. On a target, a compiler error
other than its refusal of a program over the device's memory is an error of the run
(report["error_kind"] = "compile_error", "fits" unknown), not a verdict.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import math
import os
import re
import time
import types

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from frontier_rl import hub
from frontier_rl.fit import node_memory, perf, targets
from frontier_rl.fit.accounting import COST_ROWS
from frontier_rl.models import ModelConfig, abstract_params, hf, presets
from frontier_rl.run import provenance

# JAX preallocates 75% of a GPU's memory unless told otherwise (JAX's docs,
# docs/gpu_memory_allocation.rst; jaxlib/xla_client.py passes the variables below to the GPU
# client as its memory_fraction).
JAX_DEFAULT_MEM_FRACTION = 0.75
TPU_USABLE = 0.9  # share of a TPU's HBM a program may plan for (runtime reservations, headroom)
TPU_DEVICES = ("v4", "v5e", "v5p", "v6e")
# A target compiler's error: its refusal of a program over the device's memory (libtpu's
# RESOURCE_EXHAUSTED, "Ran out of memory in memory space hbm", "exceeds available HBM"), a
# verdict on the run's size, or any other error, which is the run's (report["error_kind"]).
OUT_OF_MEMORY, COMPILE_ERROR = "out_of_memory", "compile_error"
_OOM = re.compile(r"RESOURCE_EXHAUSTED|ran out of memory|exceeds? (the )?available HBM|"
                  r"exceeded hbm capacity", re.IGNORECASE)


def mem_fraction(env=None, *, colocated: bool = False) -> tuple[float, str]:
    """(the share of each GPU's memory JAX takes, the variable it came from):
    XLA_CLIENT_MEM_FRACTION, else XLA_PYTHON_CLIENT_MEM_FRACTION (the older name, read as jaxlib
    reads them; launch/env.sh sets it), else, for a run whose engine shares JAX's GPUs
    (`colocated`), the share launch/env.sh gives it there (node_memory.jax_colocated_share),
    else JAX's default 0.75."""
    env = os.environ if env is None else env
    for name in ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION"):
        value = env.get(name, "")
        if value:
            try:
                fraction = float(value)
            except ValueError:
                fraction = math.nan
            if not 0 < fraction <= 1:
                raise ValueError(f"{name}={value!r} is not a fraction in (0, 1]")
            return fraction, f"{name}={value}"
    if colocated:
        return node_memory.jax_colocated_share(env)
    return JAX_DEFAULT_MEM_FRACTION, "JAX's default; XLA_PYTHON_CLIENT_MEM_FRACTION is unset"


def usable_share(device: str, env=None, *, colocated: bool = False) -> tuple[float, str]:
    """(share of `device`'s memory a program may use, where that share comes from)."""
    if device in TPU_DEVICES:
        return TPU_USABLE, "TPU HBM less runtime reservations"
    return mem_fraction(env, colocated=colocated)


def parse_mesh(spec: str) -> dict[str, int]:
    """'data=1,fsdp=8' -> {'data': 1, 'fsdp': 8, 'model': 1}."""
    out = {"data": 1, "fsdp": 1, "model": 1}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, value = part.partition("=")
        if name not in out or not value.isdigit() or int(value) < 1:
            raise ValueError(f"--mesh={spec!r}: expected comma-separated data=D,fsdp=F,model=M "
                             "with integers >= 1")
        out[name] = int(value)
    return out


def devices_needed(argv: list[str]) -> int | None:
    """The device count a `fit` command line's --mesh asks for, with the rollout mesh's
    devices of --config.mesh.rollout beside it (read before JAX starts)."""
    rollout = [a.split("=", 1)[1] for a in argv if a.startswith("--config.mesh.rollout=")]
    extra = int(rollout[-1]) if rollout and rollout[-1].isdigit() else 0
    for arg in argv:
        if arg.startswith("--mesh="):
            m = parse_mesh(arg.split("=", 1)[1])
            return m["data"] * m["fsdp"] * m["model"] + extra
    return None


def model_config(config: ml_collections.ConfigDict) -> ModelConfig:
    """The policy architecture a run of `config` builds, without building it."""
    from frontier_rl import policy, tasks

    m = config.model
    runtime = policy.runtime_fields(config)
    if m.path:
        # a Hugging Face id resolves through the hub's cache (fetched when online)
        with open(os.path.join(hub.model_dir(m.path), "config.json"), encoding="utf-8") as f:
            mcfg = hf.config_from_hf(json.load(f))
        if m.dtype != "auto":
            runtime["dtype"] = m.dtype
        return dataclasses.replace(mcfg, **runtime)
    if m.preset:
        dtype = "float32" if m.dtype == "auto" else m.dtype
        return presets.preset_config(m.preset, dtype=dtype, **runtime)
    task = tasks.make_task(config.task.name,
                           {k: v for k, v in config.task.items() if k != "name"}, config.seed)
    return policy.random_config(config, tasks.build_char_tokenizer(policy.alphabet(task)))


def program_bytes(compiled) -> dict[str, int]:
    """Bytes per device of a compiled program by XLA's memory analysis (what `fit` reports):
    arguments, outputs, aliased, temporaries and their total."""
    ma = compiled.memory_analysis()
    if ma is None:
        raise RuntimeError("this backend reports no memory analysis")
    args, outs = int(ma.argument_size_in_bytes), int(ma.output_size_in_bytes)
    alias, temp = int(ma.alias_size_in_bytes), int(ma.temp_size_in_bytes)
    return {"arguments": args, "outputs": outs, "aliased": alias, "temporaries": temp,
            "total": args + outs - alias + temp}


def _tree_bytes_per_device(tree, shardings) -> int:
    """Bytes of one device's shards of an abstract pytree placed with `shardings`."""
    total = 0
    for leaf, sh in zip(jax.tree.leaves(tree), jax.tree.leaves(shardings), strict=True):
        shard = sh.shard_shape(leaf.shape)
        n = 1
        for d in shard:
            n *= d
        total += n * jnp.dtype(leaf.dtype).itemsize
    return total


def _engine_calls(prompts: int, n: int, rows_per_call: int) -> list[int]:
    """Rows of each sampler call a generate call of `prompts` x `n` makes (JaxEngine's split:
    whole prompts, at most `rows_per_call` rows, at least one prompt)."""
    per = max(1, rows_per_call // n) if rows_per_call else prompts
    calls = [per * n] * (prompts // per)
    if prompts % per:
        calls.append(prompts % per * n)
    return calls


def simulate(config: ml_collections.ConfigDict, steps: int | None = None) -> dict:
    """Plays `config`'s selector for `steps` (default fit.sim_steps) steps on the synthetic
    learner and returns the device calls it made ({"calls": [(kind, prompts, n)], ...}: see
    SimContext.calls). Augmenting selectors use the programmatic arith teacher inline, as every
    sim run does (sim/run.py `base_config`): the children's count, not their text, matters."""
    from frontier_rl import config_lib
    from frontier_rl.sim import run as sim_run

    steps = steps or config.fit.sim_steps
    c = copy.deepcopy(config)
    with c.unlocked():
        c.sim = sim_run.default_sim_config()
        c.sim.steps = c.sim.eval_every = steps
        if "reverse_digits" not in c.task:
            c.task.reverse_digits = True
    config_lib.augment_on_arith(c, max_digits=3, max_operands=len(c.sim.band_names) + 1)
    calls: list = []
    res = sim_run.run_sim(c, calls=calls)
    return {"selector": res["selector"], "steps_run": res["steps_run"],
            "stopped": res["stopped"], "calls": calls}


@dataclasses.dataclass
class _Plan:
    """One program to size: `lower()` gives its Lowered; `resident` bytes are added."""

    program: str  # what the run calls it
    kind: str  # "sampler", "entropy", "logps", "train_step", "probe"
    rows: int  # padded rows it compiles for
    tokens: str  # its token shape, e.g. "1024+2560"
    asked: int  # the most rows a call asks for (before padding)
    lower: object
    resident: int
    hint: str
    # The accountant's cost program for this program's work (compiled on the host CPU at
    # accounting.COST_ROWS rows, as a run compiles it); None where the run charges none.
    cost: object = None


def probe_shape(config: ml_collections.ConfigDict, row_multiple: int) -> tuple[int, int]:
    """(rows, tokens) of the trainer's weight-sync probe of an external engine, as the run
    sends it: one prompt (at most `fit.prompt_len` tokens) and its continuation padded to the
    engine's probe length (rollout/sglang.py: PROBE_LEN, at most rollout.max_new_tokens), laid
    in `row_multiple` rows padded to a multiple of 8 tokens (Trainer.response_logps)."""
    from frontier_rl.rollout.sglang import PROBE_LEN

    probe_len = max(1, min(PROBE_LEN, int(config.rollout.max_new_tokens)))
    return row_multiple, -(-(config.fit.prompt_len + probe_len) // 8) * 8


def _aug_cap(config, sim_cap: int) -> int:
    """The token cap of the run's augmentation generations (the sim's augmenter writes arith
    continuations, whatever the run's format): `aug_max_new_tokens`, else the format's default
    (augment.py), the format "auto" being arith exactly on the arith task."""
    from frontier_rl.selection.heapa import augment

    s = config.selector.get(config.selector.name)
    if s is None or "aug_format" not in s:
        return sim_cap
    if s.get("aug_max_new_tokens", 0):
        return int(s.aug_max_new_tokens)
    fmt = s.aug_format if s.aug_format != "auto" else (
        "arith" if config.task.name == "arith" else "template")
    return augment.ARITH_MAX_NEW_TOKENS if fmt == "arith" else augment.TEMPLATE_MAX_NEW_TOKENS


def _sampler_variants(config, sim: dict) -> dict:
    """{(token cap, greedy, top-p, sampling top-k): {"purposes": [...], "rows": [rows asked per
    call]}} of every sampler call of the run: rollouts, augmentation generations and evaluation
    (top-k -1 = off: each k is a program of its own)."""
    from frontier_rl.evaluation import CHUNK_ROWS
    from frontier_rl.rollout.sampler import sample_top_k_on

    ro, ev = config.rollout, config.eval
    rpc = ro.rows_per_call
    out: dict = {}

    def add(purpose, key, rows):
        v = out.setdefault(key, {"purposes": [], "rows": []})
        if purpose not in v["purposes"]:
            v["purposes"].append(purpose)
        v["rows"].extend(rows)

    for kind, prompts, n in sim["calls"]:
        if kind == "rollout":
            key = (ro.max_new_tokens, False, ro.top_p < 1.0, sample_top_k_on(ro.top_k))
            add("rollout", key, _engine_calls(prompts, n, rpc))
        elif kind == "generate":
            add("augmentation", (_aug_cap(config, n), False, False, -1),
                _engine_calls(prompts, 1, rpc))
    cap = ev.max_new_tokens or ro.max_new_tokens
    add("eval", (cap, False, ev.top_p < 1.0, sample_top_k_on(ev.top_k)),
        _engine_calls(max(1, CHUNK_ROWS // ev.k), ev.k, rpc))
    if ev.greedy:
        add("eval greedy", (cap, True, False, -1), _engine_calls(CHUNK_ROWS, 1, rpc))
    return out


def check(config: ml_collections.ConfigDict, mesh_spec: dict[str, int], device: str,
          say=print, sim: dict | None = None, kinds=None, target=None, env=None) -> dict:
    """Sizes every program a run of `config` compiles on `mesh_spec` against `device` (a key of
    perf.DEVICE_BYTES), at the row counts the selector asks for on the synthetic learner
    (`sim`: a `simulate` result, else one is run). `kinds`: size only the programs of these
    kinds ("sampler", "entropy", "logps", "train_step", "probe"; None = all). `target` (a
    targets.Target whose compiler is installed): compile with the target's own compiler on its
    compile-only devices, attention resolved for its platform, and add each program's peak,
    FLOPs, collectives and compile seconds, and the accountant's cost programs (compiled on the
    host CPU, as a run compiles them); `device` is then ignored. `env` (default os.environ):
    where JAX's memory fraction and an external engine's settings are read. With an external
    engine on JAX's GPUs (launch/run_gpu.sh's colocated layout) the node's sum is added
    (node_memory.size: report["node"]). Returns the report dict."""
    from frontier_rl.fit.shapes import PROMPT_BUCKETS
    from frontier_rl.rl import update
    from frontier_rl.rollout.sampler import Sampler

    mesh, rollout_mesh, pool = _make_mesh(mesh_spec, device, target, config.mesh.rollout,
                                          config.mesh.rollout_model)
    mcfg, graphdef, params = _abstract_policy(config, mesh, pool, device, target, say,
                                              rollout_mesh)
    if sim is None:
        say(f"  playing {config.selector.name} for {config.fit.sim_steps} steps on the synthetic "
            "learner ...", flush=True)
        sim = simulate(config)
    s = _sizing(config, sim, mesh, rollout_mesh, mcfg, graphdef, params)

    # The programs the run compiles, at the rows the selector's calls ask for.
    not_sized: list[tuple[str, str]] = []
    sampler = Sampler(graphdef, mcfg, eos_id=mcfg.eos_token_id or 0, pad_id=0,
                      prompt_buckets=PROMPT_BUCKETS, max_new_tokens=config.rollout.max_new_tokens,
                      mesh=rollout_mesh)
    plans = _sampler_plans(s, sampler, not_sized)
    plans += _entropy_plans(s, not_sized)
    trainer = update.make_trainer(config, graphdef, mesh)
    plans += _trainer_plans(s, trainer, not_sized)
    if kinds is not None:
        not_sized += [(p.program, "not asked for") for p in plans if p.kind not in kinds]
        plans = [p for p in plans if p.kind in kinds]

    # Each compiled and sized against the device's usable memory.
    budget = _budget(device, target, s.external, env)
    with (targets.compiling_for(target, pool) if target is not None
          else contextlib.nullcontext()):
        programs = _compile(plans, target, budget.usable, say)
        cost_programs = _cost_programs(plans, say) if target is not None else []

    report = _report(s, device, target, budget, programs, cost_programs, not_sized)
    _add_advice(report, budget)
    _add_node(report, s, budget, env)
    report["halves"] = _halves(report, s, target)
    report["churn"] = compile_churn(
        config, sim, rollout_mesh, graphdef, mcfg, trainer, None if s.external else sampler,
        logps=s.recompute or config.rl.kl_coef > 0,
        platform=target.platform if target is not None else ("tpu" if budget.tpu else "gpu"))
    return report


@dataclasses.dataclass
class _Sizing:
    """What `check` plans every program from: the config and the selector's calls (`sim`),
    the meshes and the abstract policy, the shapes the run pads to and the bytes per device
    that stay resident beside each program (on the trainer's devices: the optimizer's state
    and the reference; a rollout mesh of its own holds neither)."""

    config: ml_collections.ConfigDict
    sim: dict
    mesh: object
    rollout_mesh: object  # the sampler's and the entropy pass's (`mesh` unless mesh.rollout)
    mcfg: ModelConfig
    graphdef: object
    params: object
    external: bool  # an external engine generates (rollout.engine)
    recompute: bool  # the trainer recomputes the old policy's log-probs
    plen: int  # fit.prompt_len padded to its prompt bucket
    length: int  # a packed train row: plen + rollout.max_new_tokens
    opt: int  # Adam's two moments
    ref: int  # the KL reference policy's parameters (0 without a KL term)

    @property
    def split(self) -> bool:
        return self.rollout_mesh is not self.mesh

    @property
    def beside_rollout(self) -> int:
        """Resident beside the sampler's and the entropy pass's programs."""
        return 0 if self.split else self.opt + self.ref


@dataclasses.dataclass
class _Budget:
    """The memory per device a program may use, and where its share comes from."""

    device_bytes: int
    share: float
    source: str
    tpu: bool
    beside: bool  # an external engine shares JAX's GPUs: the node is summed (node_memory.py)

    @property
    def usable(self) -> float:
        return self.share * self.device_bytes


def _make_mesh(mesh_spec: dict[str, int], device: str, target, rollout: int = 0,
               rollout_model: int = 1) -> tuple[object, object, list]:
    """(the trainer's mesh of `mesh_spec` on the target's compile-only devices, else JAX's, the
    rollout mesh on the `rollout` devices after it (the same mesh when 0), the device pool
    they were cut from)."""
    from frontier_rl.rl import sharding

    if target is None and device not in perf.DEVICE_BYTES:
        raise ValueError(f"--device={device!r} is not one of {sorted(perf.DEVICE_BYTES)}")
    n = mesh_spec["data"] * mesh_spec["fsdp"] * mesh_spec["model"]
    pool = target.compile_devices() if target is not None else jax.devices()
    if len(pool) < n + rollout:
        what = f"{n} devices" + (f" and mesh.rollout={rollout} beside them" if rollout else "")
        where = (f"target {target.name} has {len(pool)}" if target is not None else
                 f"JAX has {len(pool)} (run through `frontier-rl fit`, which creates them, or "
                 "set XLA_FLAGS=--xla_force_host_platform_device_count="
                 f"{n + rollout} before JAX starts)")
        raise ValueError(f"--mesh needs {what}, {where}")
    mesh, rollout_mesh = sharding.split_meshes(
        mesh_spec["data"], mesh_spec["fsdp"], mesh_spec["model"], rollout, rollout_model,
        devices=pool[:n + rollout])
    return mesh, rollout_mesh, pool


def _abstract_policy(config, mesh, pool: list, device: str, target, say=print,
                     rollout_mesh=None) -> tuple:
    """(model config, graphdef, abstract params) of the policy a run of `config` builds, with
    the kernels the target's run builds; says what it is and where it is compiled."""
    from frontier_rl.models.transformer import attention_impl

    mcfg = model_config(config)
    if target is not None:  # the kernels the target's run builds (cuDNN attention on a GPU)
        mcfg = dataclasses.replace(mcfg, attention=attention_impl(mcfg, target.platform))
    graphdef, params = abstract_params(mcfg)
    if target is not None:
        untested = targets.untested_versions(target.kind)
        if untested:
            say(f"fit: {untested}")
    where = (f"target {target.name} ({target.devices} x {pool[0].device_kind}, its own "
             "compiler)" if target is not None else f"device {device} (CPU compiler: an "
             "estimate)")
    say(f"fit: {config.model.preset or config.model.path or 'model'}: "
        f"{mcfg.num_params() / 1e9:.2f}B parameters ({mcfg.param_dtype} master, {mcfg.dtype} "
        f"compute, remat {mcfg.remat}, attention {attention_impl(mcfg)}), mesh "
        f"{dict(mesh.shape)}"
        + (f" + rollout mesh {dict(rollout_mesh.shape)}" if rollout_mesh not in (None, mesh)
           else "") + f", {where}")
    return mcfg, graphdef, params


def _sizing(config, sim: dict, mesh, rollout_mesh, mcfg: ModelConfig, graphdef,
            params) -> _Sizing:
    """The shapes and resident bytes every program of the run is planned with."""
    from frontier_rl.fit.shapes import PROMPT_BUCKETS, bucket
    from frontier_rl.rl import sharding
    from frontier_rl.rollout import engines
    from frontier_rl.rollout.engine import recompute_old_logp

    ro, rl = config.rollout, config.rl
    external = engines.entry(ro.engine).external
    plen = bucket(config.fit.prompt_len, PROMPT_BUCKETS)
    # What stays on the device beside each program: Adam's two moments (sharded like the
    # parameters; the step counts are negligible) and the KL reference policy.
    param_bytes = _tree_bytes_per_device(params, sharding.param_shardings(params, mesh))
    recompute = recompute_old_logp(rl.recompute_old_logp, ro.top_p,
                                   types.SimpleNamespace(external=external), ro.top_k,
                                   rl.staleness)
    return _Sizing(config, sim, mesh, rollout_mesh, mcfg, graphdef, params, external,
                   recompute, plen,
                   length=plen + ro.max_new_tokens, opt=2 * param_bytes,
                   ref=param_bytes if rl.kl_coef > 0 else 0)


def _sampler_plans(s: _Sizing, sampler, not_sized: list) -> list[_Plan]:
    """The sampler's programs, per (token cap, greedy, top-p, top-k) variant at its largest row
    bucket (every bucket with fit.every_bucket); what it leaves unsized (every variant when an
    external engine generates, the smaller buckets) is added to `not_sized`."""
    from frontier_rl.rollout.sampler import SampleShape

    config, ro, params, plen = s.config, s.config.rollout, s.params, s.plen
    rpc = ro.rows_per_call or "all"
    axes = "mesh.rollout / mesh.rollout_model" if s.split else "mesh.data / mesh.model"
    plans = []
    variants = _sampler_variants(config, s.sim)
    for (cap, greedy, top_p, top_k), v in sorted(variants.items(), key=lambda kv: kv[0]):
        name = "sampler: " + ", ".join(v["purposes"])
        if s.external:
            not_sized.append((name, f"rollout.engine={ro.engine} generates: its server's "
                                    "memory, not JAX's"))
            continue
        buckets: dict[int, int] = {}
        for r in v["rows"]:
            b = sampler.padded_rows(r)
            buckets[b] = max(buckets.get(b, 0), r)
        sized = sorted(buckets) if config.fit.every_bucket else [max(buckets)]
        for b in sorted(buckets):
            if b not in sized:
                not_sized.append((f"{name} at {b} rows", f"smaller than its {max(buckets)}-row "
                                  "bucket (fit.every_bucket=True sizes it)"))
        field = "eval.max_new_tokens" if v["purposes"][0].startswith("eval") else (
            "the augmenter's aug_max_new_tokens" if v["purposes"] == ["augmentation"]
            else "rollout.max_new_tokens")
        for b in sized:
            plans.append(_Plan(
                name, "sampler", b, f"{plen}+{cap}", buckets[b],
                lambda b=b, cap=cap, greedy=greedy, top_p=top_p, top_k=top_k: sampler.lower(
                    params, b, plen, cap, greedy=greedy, use_top_p=top_p, sample_top_k=top_k),
                s.beside_rollout,
                f"set rollout.rows_per_call (rows per sampler call; now {rpc}) or reduce "
                f"{field}, or raise {axes} (the KV cache is split over both)",
                lambda cap=cap, greedy=greedy, top_p=top_p, top_k=top_k: sampler.cost_analysis(
                    params, SampleShape(rows=COST_ROWS[-1], prompt_len=plen, max_new=cap,
                                        steps=cap, greedy=greedy, use_top_p=top_p,
                                        sample_top_k=top_k))))
    return plans


def _entropy_plans(s: _Sizing, not_sized: list) -> list[_Plan]:
    """The prompt-entropy pass at its largest call (fit.entropy_rows overrides it), or, when
    the selector never calls it, a line in `not_sized`."""
    from frontier_rl.entropy import PromptEntropy
    from frontier_rl.fit.shapes import PROMPT_BUCKETS

    config, params = s.config, s.params
    ent_calls = [p for k, p, _ in s.sim["calls"] if k == "entropy"]
    ent_rows = config.fit.entropy_rows or (max(ent_calls) if ent_calls else 0)
    if not ent_rows:
        not_sized.append(("prompt entropy", f"{config.selector.name} never calls it"))
        return []
    entropy = PromptEntropy(s.graphdef, pad_id=0, prompt_buckets=PROMPT_BUCKETS,
                            mesh=s.rollout_mesh, micro_batch=config.rollout.entropy_batch,
                            chunk=config.model.logits_chunk)
    e_rows, e_len = entropy.padded_shape([s.plen] * ent_rows)
    return [_Plan(
        "prompt entropy", "entropy", e_rows, str(e_len), ent_rows,
        lambda: entropy.lower(params, e_rows, e_len), s.beside_rollout,
        f"reduce rollout.entropy_batch (rows per forward; now {config.rollout.entropy_batch})",
        lambda: entropy.cost_analysis(params, COST_ROWS[-1], e_len))]


def _trainer_plans(s: _Sizing, trainer, not_sized: list) -> list[_Plan]:
    """The packed train batch's programs at its largest (padded) batch: the old-log-prob /
    KL-reference pass when the run recomputes or has a KL term (else a line in `not_sized`),
    the train step and, with an external engine, the weight-sync probe (one prompt's
    log-probs at the trainer)."""
    from frontier_rl.fit.shapes import ROW_BUCKETS, bucket

    config, rl, params, length = s.config, s.config.rl, s.params, s.length
    upd = [p * g for k, p, g in s.sim["calls"] if k == "update"]
    asked = max(upd) if upd else rl.batch_size * rl.group_size
    rows = bucket(asked, ROW_BUCKETS)
    rows = -(-rows // trainer.row_multiple) * trainer.row_multiple
    fewer = _fewer_rows_advice(rl, s.mesh)
    plans = []
    if s.recompute or rl.kl_coef > 0:
        what = " and ".join(w for w, on in (("old policy", s.recompute),
                                            ("KL reference", rl.kl_coef > 0)) if on)
        plans.append(_Plan(
            f"log-probs ({what})", "logps", rows, str(length), asked,
            lambda: trainer.lower_logps(params, rows, length), s.opt + s.ref,
            f"{fewer} (rows per forward)",
            lambda: trainer.logps_cost(params, COST_ROWS[-1], length)))
    else:
        not_sized.append(("log-probs", "not recomputed (the sampler's serve, "
                          f"rl.recompute_old_logp={rl.recompute_old_logp}) and no KL term"))
    plans.append(_Plan(
        "train step", "train_step", rows, str(length), asked,
        lambda: trainer.lower_step(params, rows, length), s.ref,
        f"{fewer}, set model.remat=full, or raise mesh.fsdp",
        lambda: trainer.update_cost(params, COST_ROWS[-1], length)))
    if s.external:
        p_rows, p_len = probe_shape(config, trainer.row_multiple)
        plans.append(_Plan(
            "weight-sync probe", "probe", p_rows, str(p_len), 1,
            lambda: trainer.lower_logps(params, p_rows, p_len), s.opt + s.ref,
            f"{fewer} or reduce model.logits_chunk"))
    return plans


def _fewer_rows_advice(rl, mesh) -> str:
    """How a train-batch program that does not fit gets fewer rows per forward. Fewer rows per
    micro-batch is advice only where half of them still fills the row shards; otherwise tensor
    parallelism (mesh.model) is what splits the rest (weights, activations)."""
    micro = rl.micro_batch_size or "the whole minibatch"
    shards = mesh.shape["data"] * mesh.shape["fsdp"]
    return (f"reduce rl.micro_batch_size (now {micro})"
            if not rl.micro_batch_size or (rl.micro_batch_size // 2) % shards == 0
            and rl.micro_batch_size >= 2 * shards
            else f"raise mesh.model (rl.micro_batch_size={micro} is already the fewest rows "
                 f"that fill the {shards} row shards)")


def _budget(device: str, target, external: bool, env) -> _Budget:
    """The device's memory and the share of it JAX's programs may use. An external engine on
    JAX's GPUs (run_gpu.sh's default layout): JAX has the share launch/env.sh gives it there,
    and the engine's memory is summed with it (`_add_node`)."""
    tpu = target.kind == "tpu" if target is not None else device in TPU_DEVICES
    beside = external and not tpu and node_memory.colocated(env)
    if target is not None:
        device_bytes = target.memory_bytes
        share, source = (usable_share("v5p") if tpu else mem_fraction(env, colocated=beside))
    else:
        device_bytes = perf.DEVICE_BYTES[device]
        share, source = usable_share(device, env, colocated=beside)
    return _Budget(device_bytes, share, source, tpu, beside)


def _report(s: _Sizing, device: str, target, budget: _Budget, programs: list[dict],
            cost_programs: list[dict], not_sized: list) -> dict:
    """The report's figures: the model, mesh and device, every program sized, the budget, the
    resident bytes, the simulation's largest calls, and whether every program fits."""
    calls = {}
    for kind, prompts, nn in s.sim["calls"]:
        rows_ = prompts * (nn if kind in ("rollout", "update") else 1)
        calls[kind] = max(calls.get(kind, 0), rows_)
    return {"model": s.config.model.preset or s.config.model.path or "config shape",
            "params": s.mcfg.num_params(), "mesh": dict(s.mesh.shape),
            "device": target.name if target is not None else device,
            "device_bytes": budget.device_bytes, "programs": programs,
            "not_sized": not_sized, "usable_bytes": int(budget.usable),
            "usable_share": budget.share, "usable_source": budget.source,
            "resident_optimizer_bytes_per_device": s.opt,
            "reference_bytes_per_device": s.ref,
            "simulation": {"selector": s.sim["selector"], "steps": s.sim["steps_run"],
                           "stopped": s.sim["stopped"], "max_rows": calls},
            "compiler": (f"{target.kind} target compiler" if target is not None
                         else "CPU compiler (an estimate)"),
            "target": dataclasses.asdict(target) if target is not None else None,
            "cost_programs": cost_programs,
            "fits": all(p["fits"] for p in programs if p["fits"] is not None)
            and not any(c.get("error") for c in cost_programs)}


def _add_advice(report: dict, budget: _Budget) -> None:
    """Adds to `report` the compile error, if any, the largest program of each kind and the
    advice: each program that does not fit with the fields to change, each failed cost program
    and each compile error."""
    programs, cost_programs = report["programs"], report["cost_programs"]
    # A compile error is the run's error, not a memory verdict: "fits" is then unknown (None)
    # unless a program is known not to fit, and the CLI exits with its own status.
    errors = [p for p in programs if p.get("error_kind") == COMPILE_ERROR]
    if errors:
        report["error_kind"] = COMPILE_ERROR
        if report["fits"]:
            report["fits"] = None
    # The largest program of each kind, under the names earlier reports used.
    for kind in ("train_step", "sampler", "entropy"):
        mine = [p for p in programs if p["kind"] == kind and p["memory"] is not None]
        top = max(mine, key=lambda p: p["bytes_per_device"]) if mine else None
        report[kind] = top["memory"] if top else None
        report[f"{kind}_bytes_per_device"] = top["bytes_per_device"] if top else 0
    report["advice"] = [f"{p['program']} ({p['rows']} rows x {p['tokens']} tokens) does not "
                        f"fit: {p['change']}" for p in programs if p["fits"] is False]
    report["advice"] += [f"cost program {c['program']} failed: {c['error']}"
                         for c in cost_programs if c.get("error")]
    report["advice"] += [f"{p['program']} ({p['rows']} rows x {p['tokens']} tokens): compile "
                         f"error: {p['error']}" for p in errors]
    if report["advice"] and not budget.tpu and not errors:
        report["advice"].append(f"or give JAX more of each GPU ({budget.source}; launch/env.sh "
                                "sets it for every launch script, JAX_MEM_FRACTION)")


def _add_node(report: dict, s: _Sizing, budget: _Budget, env) -> None:
    """The whole node, with an external engine on JAX's GPUs (node_memory.py): its sum is
    report["node"], and a sum over the GPU does not fit. An engine on GPUs of its own is
    named as not sized."""
    if budget.beside:
        report["node"] = node_memory.size(device_bytes=budget.device_bytes,
                                          jax_share=budget.share, jax_source=budget.source,
                                          params=s.mcfg.num_params(), env=env)
        if not report["node"]["fits"]:
            report["fits"] = False
            report["advice"] += report["node"]["advice"]
    elif s.external and not budget.tpu:
        report["not_sized"].append(("node", f"rollout.engine={s.config.rollout.engine} on GPUs "
                                    "of its own (FRONTIER_RL_GPU_SHARED=0): not on JAX's"))


# The programs of each half of a split layout (mesh.rollout): what runs on which devices.
HALVES = {"train": ("logps", "train_step", "probe"), "rollout": ("sampler", "entropy")}


def _halves(report: dict, s: _Sizing, target) -> dict | None:
    """With a rollout mesh of its own (mesh.rollout), each half's devices, mesh, largest
    program per device and bytes over its devices, and their sum: the devices the layout takes
    (all of the target's) and the bytes of the node. None when the sampler shares the
    trainer's mesh."""
    if not s.split:
        return None
    out = {}
    for half, kinds in HALVES.items():
        mesh = s.mesh if half == "train" else s.rollout_mesh
        mine = [p for p in report["programs"] if p["kind"] in kinds]
        peak = max((p["bytes_per_device"] or 0 for p in mine), default=0)
        out[half] = {"devices": int(mesh.size), "mesh": dict(mesh.shape),
                     "programs": [p["program"] for p in mine],
                     "peak_bytes_per_device": int(peak), "bytes": int(peak) * int(mesh.size),
                     "fits": _all_fit(p["fits"] for p in mine)}
    devices = out["train"]["devices"] + out["rollout"]["devices"]
    out["sum"] = {"devices": devices, "bytes": out["train"]["bytes"] + out["rollout"]["bytes"],
                  "node_bytes": devices * report["device_bytes"],
                  "fits": _all_fit((out["train"]["fits"], out["rollout"]["fits"]))}
    if target is not None and devices != target.devices:
        out["sum"]["fits"] = False
        report["advice"].append(f"the halves take {devices} devices, target {target.name} has "
                                f"{target.devices}")
    if out["sum"]["fits"] is False:
        report["fits"] = False
    return out


def _all_fit(verdicts) -> bool | None:
    """False if any program does not fit, else None if any was not sized (a compile error),
    else True."""
    verdicts = list(verdicts)
    return False if False in verdicts else None if None in verdicts else True


def print_halves(h: dict, say=print) -> None:
    gib = 2**30
    for half in ("train", "rollout"):
        x = h[half]
        mesh = ",".join(f"{k}={v}" for k, v in x["mesh"].items())
        say(f"{half} half: {x['devices']} devices ({mesh}), largest program "
            f"{x['peak_bytes_per_device'] / gib:.2f} GiB/device, {x['bytes'] / gib:.1f} GiB "
            f"over its devices: {', '.join(x['programs']) or 'none'}")
    t = h["sum"]
    verdict = {True: "yes", False: "NO", None: "not known (a program did not compile)"}
    say(f"both halves: {t['devices']} devices, {t['bytes'] / gib:.1f} GiB of the "
        f"{t['node_bytes'] / gib:.0f} GiB they have; fits: {verdict[t['fits']]}")


def compile_churn(config, sim: dict, mesh, graphdef, mcfg, trainer, sampler, *, logps: bool,
                  platform: str) -> dict:
    """The distinct programs the run compiles per kind, their bound and padding (churn.py),
    from `sim`'s calls padded by the run's own `sampler` (None: an external engine generates)
    and `trainer`, with the batch layout the trainer takes on `platform`'s attention."""
    from frontier_rl.entropy import PromptEntropy
    from frontier_rl.fit import churn
    from frontier_rl.fit.shapes import PROMPT_BUCKETS
    from frontier_rl.models.transformer import attention_impl
    from frontier_rl.rl import batch as batch_lib

    entropy = PromptEntropy(graphdef, pad_id=0, prompt_buckets=PROMPT_BUCKETS, mesh=mesh,
                            micro_batch=config.rollout.entropy_batch)
    layout = batch_lib.layout_for(config.rl.packing, attention_impl(mcfg, platform))
    return churn.count(
        sim["calls"], _sampler_variants(config, sim), prompt_len=config.fit.prompt_len,
        max_new=config.rollout.max_new_tokens, layout=layout, row_multiple=trainer.row_multiple,
        sampler_rows=sampler.padded_rows if sampler is not None else None,
        entropy_shape=entropy.padded_shape, logps=logps, seed=config.seed)


def _compile(plans: list[_Plan], target, usable: float, say=print) -> list[dict]:
    """Compiles each plan (for `target` when given: its compiler's error kept verbatim, its
    measurements added) and sizes it against `usable` bytes."""
    programs = []
    for p in plans:
        say(f"  {p.program}: {p.rows} rows x {p.tokens} tokens ...", flush=True)
        entry = {"program": p.program, "kind": p.kind, "rows": p.rows, "asked": p.asked,
                 "tokens": p.tokens, "resident": p.resident, "change": p.hint}
        t0 = time.perf_counter()
        try:
            compiled = p.lower().compile()
        except Exception as e:  # the target compiler's error, verbatim
            if target is None:
                raise
            kind = OUT_OF_MEMORY if _OOM.search(str(e)) else COMPILE_ERROR
            entry.update(memory=None, bytes_per_device=None, error=str(e), error_kind=kind,
                         fits=False if kind == OUT_OF_MEMORY else None,
                         compile_s=time.perf_counter() - t0)
            programs.append(entry)
            continue
        entry["compile_s"] = time.perf_counter() - t0
        mem = program_bytes(compiled)
        total = mem["total"] + p.resident
        if target is not None:
            entry["target"] = targets.measure(compiled, target.kind)
            # On a target, the compiler's own peak (live buffers at the worst point of its
            # schedule, arguments included) is the figure compared with the budget.
            if entry["target"]["peak"]:
                total = entry["target"]["peak"] + p.resident
        entry.update(memory=mem, bytes_per_device=total, fits=total <= usable)
        programs.append(entry)
    return programs


def _cost_programs(plans: list[_Plan], say=print) -> list[dict]:
    """Compiles each plan's FLOPs cost program as the run's accountant does (host CPU, layers
    unrolled, XLA attention), timing it and keeping its error verbatim."""
    out = []
    for p in plans:
        if p.cost is None:
            continue
        say(f"  cost program of {p.program} ...", flush=True)
        t0 = time.perf_counter()
        entry = {"program": p.program, "kind": p.kind, "rows": COST_ROWS[-1]}
        try:
            entry["flops"] = p.cost()  # generation: (prefill, one decode step)
        except Exception as e:
            entry["error"] = f"{type(e).__name__}: {e}"
        entry["compile_s"] = time.perf_counter() - t0
        out.append(entry)
    return out


def print_report(r: dict, say=print) -> None:
    gib = 2**30
    s = r["simulation"]
    mx = s["max_rows"]
    say(f"row counts from {s['steps']} steps of {s['selector']} on the synthetic learner"
        + (f" (stopped: {s['stopped']})" if s["stopped"] else "") + ": largest rollout "
        f"{mx.get('rollout', 0)} rows, entropy pass {mx.get('entropy', 0)} prompts, "
        f"augmentation {mx.get('generate', 0)} texts, train batch {mx.get('update', 0)} rows")
    budget = r["usable_bytes"] / gib
    what = r["target"]["name"] if r.get("target") else r["device"]
    say(f"{r['compiler']}: {what} {r['device_bytes'] / gib:.0f} GiB per device, usable "
        f"{budget:.1f} = {r['usable_share']:g} x: {r['usable_source']} (the budget below, GiB)")
    on_target = bool(r.get("target"))
    width = max([len(p["program"]) for p in r["programs"]] + [7])
    head = (f"{'program':<{width}}  {'rows asked':>10}  {'shape (rows x tokens)':<22} "
            f"{'GiB/device':>10}  {'budget':>7}  fits")
    if on_target:
        # The compiler's peak less the arguments: what the program adds at its worst point
        # (outputs and temporaries live then). Not libtpu's temp_size_in_bytes, which is no
        # live-buffer figure: it can exceed the peak itself.
        head += (f"  {'peak-args GiB':>13}  {'args GiB':>8}  {'compile s':>9}  {'TFLOPs':>8}  "
                 "collectives")
    say(head)
    for p in r["programs"]:
        used = p["bytes_per_device"]
        verdict = ("compile error" if p.get("error_kind") == COMPILE_ERROR
                   else "yes" if p["fits"] else "NO")
        line = (f"{p['program']:<{width}}  {p['asked']:>10}  "
                f"{str(p['rows']) + ' x ' + p['tokens']:<22} "
                f"{(used / gib if used is not None else math.nan):10.2f}  {budget:7.1f}  "
                f"{verdict:<4}")
        if on_target and p.get("target"):
            t = p["target"]
            coll = ", ".join(f"{k} x{v}" for k, v in t["collectives"].items()) or "none"
            above = (f"{max(t['peak'] - t['arguments'], 0) / gib:13.2f}" if t["peak"]
                     else f"{'n/a':>13}")
            line += (f"  {above}  {t['arguments'] / gib:8.2f}  "
                     f"{p['compile_s']:9.1f}  {t['flops'] / 1e12:8.3f}  {coll}")
        say(line)
        if p.get("error"):
            say(f"  the compiler's error: {p['error']}")
    say(f"(GiB/device{' = the compiler peak' if on_target else ''} includes "
        f"{r['resident_optimizer_bytes_per_device'] / gib:.2f} GiB of Adam "
        f"state beside every program but the train step"
        + (f", and {r['reference_bytes_per_device'] / gib:.2f} GiB of KL reference beside all"
           if r["reference_bytes_per_device"] else "") + ")")
    if r.get("node"):
        say(node_memory.summary(r["node"]))
    if r.get("halves"):
        print_halves(r["halves"], say)
    for c in r.get("cost_programs", []):
        say(f"cost program (host CPU) of {c['program']}: {c['compile_s']:.1f} s, "
            + (f"error: {c['error']}" if c.get("error") else
               f"{sum(np.atleast_1d(c['flops'])) / 1e9:.3g} GFLOPs at {c['rows']} rows"))
    if r.get("churn"):
        from frontier_rl.fit import churn

        churn.print_churn(r["churn"], say)
    for name, why in r["not_sized"]:
        say(f"not sized: {name}: {why}")
    if r.get("error_kind") == COMPILE_ERROR:
        say("fits: compile error (an error of the run, not a memory verdict)\n  "
            + "\n  ".join(r["advice"]))
    else:
        say("fits: yes" if r["fits"] else "fits: NO\n  " + "\n  ".join(r["advice"]))


def target_mesh(config, target, say=print) -> dict[str, int]:
    """The mesh a run of `config` builds on `target`'s devices (mesh.data=-1: the rest), as
    launch/run_gpu.sh checks it. A config whose mesh is for another device count (a paper
    mesh of 8 on a 16-device slice) is scaled to the target (`sharding.scaled_mesh`): the
    mesh and rl.micro_batch_size are set in `config`, and the overrides a run there needs are
    printed."""
    from frontier_rl.rl.sharding import scaled_mesh

    m, rl = config.mesh, config.rl
    if m.rollout >= target.devices:
        raise ValueError(f"mesh.rollout={m.rollout} leaves none of {target.name}'s "
                         f"{target.devices} devices to the trainer")
    # the trainer's mesh is cut from the devices the rollout mesh leaves
    spec, micro = scaled_mesh(m.data, m.fsdp, m.model, target.devices - m.rollout,
                              rl.micro_batch_size)
    before = {"data": m.data, "fsdp": m.fsdp, "model": m.model}
    changes = {f"mesh.{k}": v for k, v in spec.items()
               if v != before[k] and not (k == "data" and before[k] == -1)}
    if micro != rl.micro_batch_size:
        changes["rl.micro_batch_size"] = micro
    if changes:
        with config.unlocked():
            for key, value in changes.items():
                section, field = key.split(".")
                config[section][field] = value
        which = (f"{target.name}'s {target.devices} devices" if not m.rollout else
                 f"the {target.devices - m.rollout} of {target.name}'s devices that "
                 f"mesh.rollout={m.rollout} leaves the trainer")
        say(f"fit: mesh data={before['data']},fsdp={before['fsdp']},model={before['model']} "
            f"does not fit {which}; scaled to it "
            "(sharding.scaled_mesh), as a run there needs: "
            + " ".join(f"--config.{k}={v}" for k, v in changes.items()))
    return spec


def main(config, mesh: str, device: str, as_json: bool, target: str = "",
         hosts: int = 1, after=None) -> dict:
    """`frontier-rl fit`: the report, printed (with `as_json`, then as one JSON line).
    `after(config, spec, device, report, sim, target=, mesh_of=)` runs between the two, on the
    simulation already played (cli.py passes fit_propose.hook: when a program does not fit, the
    smallest change of the run's knobs that fits, report["proposal"]); `mesh_of(config)` is a
    candidate config's mesh, None where --mesh fixes it."""
    tgt = targets.parse(target, hosts) if target else None
    planned = tgt  # the mesh follows the target's devices even on the CPU's estimate

    def mesh_of(c) -> dict[str, int]:
        if planned is not None:
            return target_mesh(c, planned)
        return {"data": c.mesh.data if c.mesh.data > 0 else 1, "fsdp": c.mesh.fsdp,
                "model": c.mesh.model}

    spec = parse_mesh(mesh) if mesh else mesh_of(config)
    if tgt is not None and not targets.compiler_installed(tgt.kind):
        # The CLI re-runs `fit` in the target's virtualenv when there is one (cli.py); here
        # there is none: say so, and size with the CPU compiler, labelled as an estimate.
        print(f"fit: the {tgt.kind.upper()} compiler is not installed in this Python "
              f"(`source launch/target_env.sh {tgt.kind}` makes its virtualenv); falling back "
              "to the CPU compiler's estimate", flush=True)
        device, tgt = targets.estimate_device(tgt), None
    # The selector's calls are played once, so `after` sizes its candidates on them too.
    print(f"  playing {config.selector.name} for {config.fit.sim_steps} steps on the synthetic "
          "learner ...", flush=True)
    sim = simulate(config)
    report = check(config, spec, device, target=tgt, sim=sim)
    print_report(report)
    if after is not None:
        after(config, spec, device, report, sim, target=tgt,
              mesh_of=None if mesh else mesh_of)
    if as_json:
        report["meta"] = provenance.stamp()
        print(json.dumps(report))
    return report
