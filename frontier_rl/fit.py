"""Will this config fit? `frontier-rl fit --config=... [--mesh=data=D,fsdp=F,model=M]
[--device=h200] [--json]`.

Compiles the three device programs of a run ahead of time for the config's shapes on the mesh,
without allocating them: the train step (epochs x minibatches x micro-batches, forward,
backward and Adam, params and optimizer state donated), the sampler (prefill + the decode loop
over `rollout.max_new_tokens` with its KV cache, for B x G rows of `fit.prompt_len` tokens) and
the prompt-entropy pass (`fit.entropy_rows` prompts). Each figure is per device, from XLA's
memory analysis of the partitioned program: arguments + outputs - donated aliases +
temporaries. While the sampler and the entropy pass run, the optimizer state (and a KL
reference policy) stays resident, so it is added to theirs.

The mesh is built from fake CPU devices (`--xla_force_host_platform_device_count`, set by the
CLI before JAX starts), so the check runs on any machine. XLA's CPU compiler is not the GPU's
or TPU's: fusion and layout differ, so treat the figures as estimates (not yet compared with
a device's own memory profile; launch/gpu_check.sh does that on a GPU). A program fits when it
needs at most the share of the device's memory JAX will have: on a GPU, the fraction it
preallocates (`mem_fraction`: XLA_PYTHON_CLIENT_MEM_FRACTION, which launch/env.sh sets for every
launch script, else JAX's default of 75%); on a TPU, which has no such fraction, `TPU_USABLE`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os

import jax
import jax.numpy as jnp
import ml_collections

from frontier_rl import perf
from frontier_rl.models import ModelConfig, abstract_params, hf, presets

# JAX preallocates 75% of a GPU's memory unless told otherwise (JAX's docs,
# docs/gpu_memory_allocation.rst; jaxlib/xla_client.py passes the variables below to the GPU
# client as its memory_fraction).
JAX_DEFAULT_MEM_FRACTION = 0.75
TPU_USABLE = 0.9  # share of a TPU's HBM a program may plan for (runtime reservations, headroom)
TPU_DEVICES = ("v5e", "v5p", "v6e")


def mem_fraction(env=None) -> tuple[float, str]:
    """(the share of each GPU's memory JAX takes, the variable it came from):
    XLA_CLIENT_MEM_FRACTION, else XLA_PYTHON_CLIENT_MEM_FRACTION (the older name, read as jaxlib
    reads them; launch/env.sh sets it), else JAX's default 0.75."""
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
    return JAX_DEFAULT_MEM_FRACTION, "JAX's default; XLA_PYTHON_CLIENT_MEM_FRACTION is unset"


def usable_share(device: str, env=None) -> tuple[float, str]:
    """(share of `device`'s memory a program may use, where that share comes from)."""
    if device in TPU_DEVICES:
        return TPU_USABLE, "TPU HBM less runtime reservations"
    return mem_fraction(env)


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
    """The device count a `fit` command line's --mesh asks for (read before JAX starts)."""
    for arg in argv:
        if arg.startswith("--mesh="):
            m = parse_mesh(arg.split("=", 1)[1])
            return m["data"] * m["fsdp"] * m["model"]
    return None


def model_config(config: ml_collections.ConfigDict) -> ModelConfig:
    """The policy architecture a run of `config` builds, without building it."""
    from frontier_rl import policy, tasks

    m = config.model
    runtime = policy.runtime_fields(config)
    if m.path:
        with open(os.path.join(m.path, "config.json"), encoding="utf-8") as f:
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


def _bytes(compiled) -> dict[str, int]:
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


def check(config: ml_collections.ConfigDict, mesh_spec: dict[str, int], device: str,
          say=print) -> dict:
    """Compiles the three programs for `config` on `mesh_spec` and sizes them against
    `device` (a key of perf.DEVICE_BYTES). Returns the report dict."""
    from frontier_rl.entropy import PromptEntropy
    from frontier_rl.rl import losses, sharding
    from frontier_rl.rl.train_step import OptimConfig, Trainer, make_optimizer
    from frontier_rl.rollout.sampler import PROMPT_BUCKETS, ROW_BUCKETS, Sampler, bucket

    if device not in perf.DEVICE_BYTES:
        raise ValueError(f"--device={device!r} is not one of {sorted(perf.DEVICE_BYTES)}")
    n = mesh_spec["data"] * mesh_spec["fsdp"] * mesh_spec["model"]
    if jax.device_count() < n:
        raise ValueError(f"--mesh needs {n} devices, JAX has {jax.device_count()} (run through "
                         "`frontier-rl fit`, which creates them, or set XLA_FLAGS="
                         f"--xla_force_host_platform_device_count={n} before JAX starts)")
    mesh = sharding.make_mesh(mesh_spec["data"], mesh_spec["fsdp"], mesh_spec["model"],
                              devices=jax.devices()[:n])
    mcfg = model_config(config)
    graphdef, params = abstract_params(mcfg)
    say(f"fit: {config.model.preset or config.model.path or 'model'}: "
        f"{mcfg.num_params() / 1e9:.2f}B parameters ({mcfg.param_dtype} master, {mcfg.dtype} "
        f"compute, remat {mcfg.remat}), mesh {dict(mesh.shape)}, device {device}")

    # The train step: B x G rows of prompt + response, padded as the run pads them.
    rows = bucket(config.rl.batch_size * config.rl.group_size, ROW_BUCKETS)
    multiple = config.rl.minibatches * sharding.row_multiple(mesh)
    rows = -(-rows // multiple) * multiple
    plen = bucket(config.fit.prompt_len, PROMPT_BUCKETS)
    length = plen + config.rollout.max_new_tokens
    loss_cfg = losses.LossConfig(aggregation=losses.LOSSES[config.rl.loss].aggregation,
                                 kl_coef=config.rl.kl_coef)
    tx = make_optimizer(OptimConfig(learning_rate=config.rl.learning_rate,
                                    warmup_steps=config.rl.warmup_steps))
    trainer = Trainer(graphdef, loss_cfg, tx, mesh, epochs=config.rl.epochs,
                      minibatches=config.rl.minibatches,
                      micro_batch_size=config.rl.micro_batch_size,
                      logits_chunk=config.model.logits_chunk)
    report = {"model": config.model.preset or config.model.path or "config shape",
              "params": mcfg.num_params(), "mesh": dict(mesh.shape), "device": device,
              "device_bytes": perf.DEVICE_BYTES[device]}
    say(f"  train step: {rows} rows x {length} tokens, {config.rl.minibatches} minibatch(es), "
        f"micro-batch {config.rl.micro_batch_size or rows // config.rl.minibatches} rows ...",
        flush=True)
    train_mem = _bytes(trainer.lower_step(params, rows, length).compile())
    # Adam's two moments are sharded like the parameters (its step counts are negligible).
    param_sh = sharding.param_shardings(params, mesh)
    resident = 2 * _tree_bytes_per_device(params, param_sh)
    if config.rl.kl_coef > 0:
        resident += _tree_bytes_per_device(params, param_sh)

    sample_rows = config.rl.batch_size * config.rl.group_size
    if config.rollout.rows_per_call:
        per_prompt = config.rl.group_size
        sample_rows = min(sample_rows, config.rollout.rows_per_call // per_prompt * per_prompt)
    sample_rows = bucket(sample_rows, (8, 64, 256, 512, 1024))
    sampler = Sampler(graphdef, mcfg, eos_id=mcfg.eos_token_id or 0, pad_id=0,
                      prompt_buckets=PROMPT_BUCKETS, max_new_tokens=config.rollout.max_new_tokens,
                      mesh=mesh)
    say(f"  sampler: {sample_rows} rows, prompt {plen} + {config.rollout.max_new_tokens} new "
        "tokens ...", flush=True)
    sample_mem = _bytes(sampler.lower(params, sample_rows, plen, config.rollout.max_new_tokens,
                                      greedy=False,
                                      use_top_p=config.rollout.top_p < 1.0).compile())
    entropy = PromptEntropy(graphdef, pad_id=0, prompt_buckets=PROMPT_BUCKETS, mesh=mesh,
                            micro_batch=config.rollout.entropy_batch,
                            chunk=config.model.logits_chunk)
    ent_rows = config.fit.entropy_rows
    say(f"  prompt entropy: {ent_rows} rows x {plen} tokens, micro-batch "
        f"{config.rollout.entropy_batch} ...", flush=True)
    ent_mem = _bytes(entropy.lower(params, ent_rows, plen).compile())

    share, source = usable_share(device)
    usable = share * perf.DEVICE_BYTES[device]
    figures = {"train_step": train_mem["total"], "sampler": sample_mem["total"] + resident,
               "entropy": ent_mem["total"] + resident}
    report.update({
        "train_step_bytes_per_device": figures["train_step"],
        "sampler_bytes_per_device": figures["sampler"],
        "entropy_bytes_per_device": figures["entropy"],
        "resident_optimizer_bytes_per_device": resident,
        "train_step": train_mem, "sampler": sample_mem, "entropy": ent_mem,
        "usable_bytes": int(usable), "usable_share": share, "usable_source": source,
        "fits": all(v <= usable for v in figures.values()),
    })
    micro = config.rl.micro_batch_size or "the whole minibatch"
    hints = {
        "train_step": f"reduce rl.micro_batch_size (now {micro}), set model.remat=full, or "
                      "raise mesh.fsdp",
        "sampler": "set rollout.rows_per_call (rows generated at once; now "
                   f"{config.rollout.rows_per_call or 'all'}) or reduce rollout.max_new_tokens, or "
                   "raise mesh.data / mesh.model (the KV cache is split over both)",
        "entropy": f"reduce rollout.entropy_batch (now {config.rollout.entropy_batch}) or "
                   "fit.entropy_rows",
    }
    report["advice"] = [f"{k} does not fit: {hints[k]}" for k, v in figures.items()
                        if v > usable]
    if report["advice"] and device not in TPU_DEVICES:
        report["advice"].append(f"or give JAX more of each GPU ({source}; launch/env.sh sets it "
                                "for every launch script, JAX_MEM_FRACTION)")
    return report


def print_report(r: dict, say=print) -> None:
    gib = 2**30
    say(f"{'program':<12} {'args':>9} {'outputs':>9} {'temps':>9} {'total/device':>13}  "
        f"(GiB; device {r['device']} {r['device_bytes'] / gib:.0f} GiB, usable "
        f"{r['usable_bytes'] / gib:.1f} = {r['usable_share']:g} x: {r['usable_source']})")
    for k in ("train_step", "sampler", "entropy"):
        m = r[k]
        say(f"{k:<12} {m['arguments'] / gib:9.2f} {m['outputs'] / gib:9.2f} "
            f"{m['temporaries'] / gib:9.2f} {r[f'{k}_bytes_per_device'] / gib:13.2f}")
    say(f"(sampler and entropy include {r['resident_optimizer_bytes_per_device'] / gib:.2f} GiB "
        "of optimizer state resident meanwhile)")
    say("fits: yes" if r["fits"] else "fits: NO\n  " + "\n  ".join(r["advice"]))


def main(config, mesh: str, device: str, as_json: bool) -> dict:
    spec = parse_mesh(mesh) if mesh else {
        "data": config.mesh.data if config.mesh.data > 0 else 1,
        "fsdp": config.mesh.fsdp, "model": config.mesh.model}
    report = check(config, spec, device)
    print_report(report)
    if as_json:
        print(json.dumps(report))
    return report
