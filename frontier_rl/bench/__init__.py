"""Benchmarks: `frontier-rl bench sampler | train_step | entropy | flops [--json]`.

The default work is fixed so figures can be compared across versions and with other libraries:
a random Qwen3-style model (2 layers, embed 128, MLP 256, 4 heads of dim 32, 2 KV heads,
vocab 64, float32).
- sampler: exactly 32 new tokens (no EOS stop) for 256 prompts of 8 tokens at temperature 1.
- train_step: one GRPO update (Adam, no KL, one minibatch) on 32 prompts x G=8 sequences of
  8 + 32 tokens.
- sampler on rows that stop early (`--bench_config=early`, `<preset>-early`): 256 new tokens,
  stop ids 1/85 of the vocabulary (rows end after about a third of the cap), as one
  full-width decode loop and in the default decode segments, on the same prompts and seeds.
- train_step at realistic lengths (`--bench_config=realistic`): the same model and update on
  32 prompts of 16-32 tokens x G=8 responses whose lengths are drawn (geometric, mean about a
  third of the 256-token cap, clipped to it), the same responses laid out in each of
  rl/batch.py's layouts: "pad" (every row at the full cap, as before the layouts existed),
  "trim" and "pack". It reports each layout's median step time and the speed-ups over "pad".
  `<preset>-realistic` is the same at paper-like lengths on a preset (the accelerator figure:
  128 sequences, 256-token prompts, a 3,072-token cap, micro-batches of 8).
- entropy: the prompt-entropy pass (HIVE Stage 2) over one step's B prompts as a share of
  rolling out the same prompts x G, on the embedded config (a random d=64 arith policy).
- flops: one RL step's device work on the embedded config (B prompts x G rollouts, the
  prompt-entropy pass, an old-logprob pass, the update): XLA's FLOPs beside the formula's, per
  kind, with the padding ratios that bound their quotient (fit/accounting.py). Not timed.
Each timed figure is the median of `repeats` timed runs after one warm-up (compile) run.

Paper-size work (`--bench_config=<preset>`, the architectures of models/presets.py with the
run settings of configs/scale.py: float32 master weights, bfloat16 compute, full remat, a scan
over layers, chunked log-probs):
- `qwen2.5-0.5b` is small enough for a CPU: the sampler decodes 32 tokens for 8 prompts of 8
  tokens *per device* on a mesh of every device along `data` (so tokens/s across 1, 2, 4, 8
  fake devices shows how generation scales), the train step runs 8 rows x 256 tokens.
- `qwen2.5-0.5b-full` is the accelerator figure: the train step on 64 rows x 4,096 tokens in
  micro-batches of 8 (what the MFU target is stated for), the sampler 256 rows x (1,024 + 512).
The train step reports `mfu`: model FLOPs by the formula (6N per token plus causal attention,
fit/accounting.py) / median step time / the devices' bf16 peak (fit/perf.py); NaN on a CPU.

Layer "experiment": benches run whole runs and studies, so they may import every layer
but the CLI.
"""

from __future__ import annotations

import json
import statistics
import time

import jax
import numpy as np
from flax import nnx

from frontier_rl.fit import perf
from frontier_rl.models import ModelConfig, Transformer, presets
from frontier_rl.rl import sharding
from frontier_rl.rl.losses import LOSSES
from frontier_rl.rl.train_step import OptimConfig, Trainer, make_optimizer
from frontier_rl.rollout.sampler import Sampler

WORK = {
    "default": dict(
        model=ModelConfig(vocab_size=64, hidden_size=128, intermediate_size=256, num_layers=2,
                          num_heads=4, num_kv_heads=2, head_dim=32, qk_norm=True,
                          family="qwen3"),
        prompts=256, prompt_len=8, new_tokens=32, train_prompts=32, group_size=8),
}
_SCALE = dict(dtype="bfloat16", remat="full", scan_layers=True, attention="auto")
WORK["early"] = dict(WORK["default"], new_tokens=256, early=True)
WORK["realistic"] = dict(WORK["default"], prompt_len=32, min_prompt_len=16, new_tokens=256,
                         realistic=True)
for _name in presets.PRESETS:
    WORK[_name] = dict(model=presets.preset_config(_name, **_SCALE), per_device=True,
                       prompts=8, prompt_len=8, new_tokens=32, train_prompts=1, group_size=8,
                       train_len=256, micro_batch=0)
    WORK[f"{_name}-full"] = dict(model=presets.preset_config(_name, **_SCALE), per_device=False,
                                 prompts=256, prompt_len=1024, new_tokens=512, train_prompts=8,
                                 group_size=8, train_len=4096, micro_batch=8)
    WORK[f"{_name}-early"] = dict(WORK[_name], new_tokens=256, early=True)
    WORK[f"{_name}-realistic"] = dict(model=presets.preset_config(_name, **_SCALE),
                                      train_prompts=16, group_size=8, prompt_len=256,
                                      min_prompt_len=128, new_tokens=3072, micro_batch=8,
                                      realistic=True, preset=True)


def _model(cfg: ModelConfig, mesh=None):
    """(graphdef, params) of a random model; with a mesh, initialised into its shardings."""
    if mesh is None:
        return nnx.split(Transformer(cfg, rngs=nnx.Rngs(0)), nnx.Param)
    from frontier_rl.policy import random_params as _random_params

    return _random_params(cfg, 0, mesh)


def _timed(fn, repeats: int) -> list[float]:
    fn()  # warm-up: compile
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def bench_sampler(work: dict, repeats: int) -> dict:
    cfg = work["model"]
    mesh = sharding.make_mesh() if work.get("per_device") is not None else None
    graphdef, params = _model(cfg, mesh)
    n_prompts = work["prompts"] * (jax.device_count() if work.get("per_device") else 1)
    sampler = Sampler(graphdef, cfg, eos_id=-1, pad_id=0, prompt_buckets=(work["prompt_len"],),
                      batch_buckets=(n_prompts,), max_new_tokens=work["new_tokens"], mesh=mesh)
    rng = np.random.default_rng(0)
    prompts = rng.integers(1, cfg.vocab_size, (n_prompts, work["prompt_len"])).tolist()
    seed = iter(range(10**6))

    def go():
        res = sampler.sample(params, prompts, 1, seed=next(seed), temperature=1.0)
        assert int(res.lengths.sum()) == n_prompts * work["new_tokens"]

    times = _timed(go, repeats)
    tokens = n_prompts * work["new_tokens"]
    med = statistics.median(times)
    return {"bench": "sampler", "generated_tokens": tokens, "median_s": med,
            "tokens_per_s": tokens / med, "min_s": min(times), "repeats": repeats,
            "compiles": sampler.compile_count}


def bench_sampler_early(work: dict, repeats: int) -> dict:
    """The sampler on rows that stop early: 256 new tokens, stop ids a share of the vocabulary
    (1/85 of it, at least one id) so that a random model's rows end after about a third of the
    cap, timed as one full-width decode loop (`decode_bucket=0`, the sampler before its decode
    segments) and with the default segments, on the same prompts and seeds. On a CPU the
    preset computes in float32 (bfloat16 matmuls are emulated there)."""
    import dataclasses

    from frontier_rl.fit.shapes import DECODE_BUCKET

    cfg = work["model"]
    if jax.default_backend() == "cpu":
        cfg = dataclasses.replace(cfg, dtype="float32")
    mesh = sharding.make_mesh() if work.get("per_device") is not None else None
    graphdef, params = _model(cfg, mesh)
    n_prompts = work["prompts"] * (jax.device_count() if work.get("per_device") else 1)
    stop_ids = tuple(range(1, 1 + max(1, round(cfg.vocab_size / 85))))
    rng = np.random.default_rng(0)
    prompts = rng.integers(stop_ids[-1] + 1, cfg.vocab_size,
                           (n_prompts, work["prompt_len"])).tolist()
    out = {"bench": "sampler_early", "rows": n_prompts, "new_tokens_cap": work["new_tokens"],
           "stop_ids": len(stop_ids), "repeats": repeats}
    for name, decode_bucket in (("one_loop", 0), ("segments", DECODE_BUCKET)):
        sampler = Sampler(graphdef, cfg, eos_id=stop_ids, pad_id=0,
                          prompt_buckets=(work["prompt_len"],), batch_buckets=(n_prompts,),
                          max_new_tokens=work["new_tokens"], mesh=mesh,
                          decode_bucket=decode_bucket)
        seeds = iter(range(10**6))
        made = []

        def go(sampler=sampler, seeds=seeds, made=made):
            res = sampler.sample(params, prompts, 1, seed=next(seeds), temperature=1.0)
            made.append((int(res.lengths.sum()), res.shape.steps))

        times = _timed(go, repeats)
        med = statistics.median(times)
        tokens = statistics.median(m[0] for m in made[1:])
        out[f"{name}_median_s"] = med
        out[f"{name}_tokens_per_s"] = tokens / med
        out[f"{name}_mean_length"] = tokens / n_prompts
        out[f"{name}_decode_steps"] = statistics.median(m[1] for m in made[1:])
    out["speedup"] = out["one_loop_median_s"] / out["segments_median_s"]
    return out


def bench_train_step(work: dict, repeats: int) -> dict:
    from frontier_rl.fit.accounting import analytic_flops

    cfg = work["model"]
    mesh = sharding.make_mesh()
    graphdef, params = _model(cfg, mesh if "train_len" in work else None)
    trainer = Trainer(graphdef, LOSSES["grpo"], make_optimizer(OptimConfig()), mesh,
                      micro_batch_size=work.get("micro_batch", 0))
    params, opt_state = trainer.init(params)
    rows = work["train_prompts"] * work["group_size"]
    rows = -(-rows // trainer.row_multiple) * trainer.row_multiple
    length = work.get("train_len", work["prompt_len"] + work["new_tokens"])
    rng = np.random.default_rng(0)
    loss_mask = np.zeros((rows, length - 1), np.float32)
    loss_mask[:, work["prompt_len"] - 1:] = 1.0
    batch = {
        "tokens": rng.integers(1, cfg.vocab_size, (rows, length)).astype(np.int32),
        "valid": np.ones((rows, length), np.int32),
        "loss_mask": loss_mask,
        "old_logp": np.full((rows, length - 1), -np.log(cfg.vocab_size), np.float32),
        "advantages": rng.standard_normal(rows).astype(np.float32),
    }
    state = {"params": params, "opt": opt_state}

    def go():
        state["params"], state["opt"], m = trainer.step(state["params"], state["opt"], batch, 0)
        return m

    times = _timed(go, repeats)
    med = statistics.median(times)
    tokens = rows * length
    model_flops = analytic_flops(cfg, "train", np.full(rows, length), epochs=1)
    return {"bench": "train_step", "sequences": rows, "tokens": tokens, "median_s": med,
            "tokens_per_s": tokens / med, "min_s": min(times), "repeats": repeats,
            "compiles": trainer.compile_count, "model_tflops_per_step": model_flops / 1e12,
            "mfu": perf.mfu(model_flops, med),
            "device_kind": jax.devices()[0].device_kind}


def realistic_groups(work: dict, seed: int = 0):
    """(groups, prompts) of `work`'s train prompts x G responses with drawn lengths: geometric
    with mean about a third of the cap, clipped to it; random tokens and log-probs."""
    from frontier_rl.selection.base import Group

    cfg, cap, g = work["model"], work["new_tokens"], work["group_size"]
    rng = np.random.default_rng(seed)
    groups, prompts = [], []
    for j in range(work["train_prompts"]):
        prompts.append(rng.integers(1, cfg.vocab_size,
                                    rng.integers(work["min_prompt_len"],
                                                 work["prompt_len"] + 1)).tolist())
        lengths = np.minimum(rng.geometric(3 / cap, g), cap).astype(np.int32)
        tokens = rng.integers(1, cfg.vocab_size, (g, cap)).astype(np.int32)
        logps = np.full((g, cap), -np.log(cfg.vocab_size), np.float32)
        for k, n in enumerate(lengths):
            tokens[k, n:], logps[k, n:] = 0, 0.0
        rewards = rng.integers(0, 2, g).astype(np.float32)
        groups.append(Group(index=j, prompt_id=str(j), outcomes=rewards.astype(np.int8),
                            rewards=rewards, lengths=lengths,
                            mean_entropy=np.zeros(g, np.float32), tokens=tokens, logps=logps))
    return groups, prompts


def _time_train_layout(work, mesh, groups, prompts, layout: str, repeats: int):
    """(rows, length, median step seconds, compiled GiB per device or NaN) of `groups` packed
    in `layout`."""
    from frontier_rl.rl import batch as batch_lib

    cfg = work["model"]
    graphdef, params = _model(cfg, mesh if work.get("preset") else None)
    trainer = Trainer(graphdef, LOSSES["grpo"], make_optimizer(OptimConfig()), mesh,
                      micro_batch_size=work.get("micro_batch", 0), layout=layout)
    params, opt_state = trainer.init(params)
    batch = batch_lib.pack(groups, prompts, pad_id=0, prompt_buckets=(work["prompt_len"],),
                           row_buckets=(8,), row_multiple=trainer.row_multiple, layout=layout)
    state = {"params": params, "opt": opt_state}

    def go():
        state["params"], state["opt"], m = trainer.step(state["params"], state["opt"], batch, 0)
        return m

    rows, length = batch["tokens"].shape
    # `frontier-rl fit`'s figure for this program: XLA's memory analysis of it, compiled for
    # this backend (on an accelerator: to set beside the measured peak)
    gib = target_gib = float("nan")
    if work.get("preset"):
        from frontier_rl.fit import command as fit

        gib = fit.program_bytes(trainer.lower_step(params, rows, length).compile())["total"]
        gib /= 2**30
        target_gib = _target_peak_gib(graphdef, params, mesh, trainer, rows, length)
    return rows, length, statistics.median(_timed(go, repeats)), gib, target_gib


def _target_peak_gib(graphdef, params, mesh, trainer: Trainer, rows: int, length: int,
                     target=None) -> float:
    """`frontier-rl fit --target`'s prediction for this train step on the GPUs this runs on
    (or on `target`): the same program compiled for compile-only devices of the GPU's target
    (fit/targets.py), its compiler's peak GiB per device, to set beside the measured
    `peak_bytes_in_use` (launch/gpu_check.sh calibrates `fit --target` with it). NaN off a
    GPU."""
    from frontier_rl.fit import targets
    from frontier_rl.fit.accounting import abstract

    if target is None:
        device = jax.devices()[0]
        if device.platform != "gpu":
            return float("nan")
        target = targets.parse(f"{targets.gpu_name_to_target(device.device_kind)}"
                               f"x{mesh.devices.size}")
    devices = target.compile_devices()
    shape = dict(mesh.shape)
    twin = Trainer(graphdef, LOSSES["grpo"], make_optimizer(OptimConfig()),
                   sharding.make_mesh(shape["data"], shape["fsdp"], shape["model"], devices),
                   micro_batch_size=trainer.micro_batch_size, layout=trainer.requested_layout)
    with targets.compiling_for(target, devices):
        compiled = twin.lower_step(abstract(params), rows, length).compile()
    return targets.measure(compiled, "gpu")["peak"] / 2**30


def bench_train_step_realistic(work: dict, repeats: int) -> dict:
    """The train step on drawn response lengths, once per batch layout (module docstring)."""
    from frontier_rl.fit.accounting import analytic_flops
    from frontier_rl.rl import batch as batch_lib

    cfg = work["model"]
    mesh = sharding.make_mesh()
    groups, prompts = realistic_groups(work)
    lens = np.array([len(prompts[g.index]) + int(n) for g in groups for n in g.lengths])
    out = {"bench": "train_step_realistic", "sequences": len(lens), "tokens": int(lens.sum()),
           "new_tokens_cap": work["new_tokens"],
           "mean_response": float(np.mean([n for g in groups for n in g.lengths])),
           "repeats": repeats, "device_kind": jax.devices()[0].device_kind}
    model_flops = analytic_flops(cfg, "train", lens, epochs=1)
    out["model_tflops_per_step"] = model_flops / 1e12
    for layout in batch_lib.LAYOUTS:
        rows, length, med, gib, target_gib = _time_train_layout(work, mesh, groups, prompts,
                                                                layout, repeats)
        out[f"{layout}_shape"] = f"{rows}x{length}"
        out[f"{layout}_fit_gib"] = gib
        out[f"{layout}_fit_target_gib"] = target_gib
        out[f"{layout}_median_s"] = med
        out[f"{layout}_tokens_per_s"] = int(lens.sum()) / med
        out[f"{layout}_mfu"] = perf.mfu(model_flops, med)
    for layout in ("trim", "pack"):
        out[f"{layout}_speedup_over_pad"] = out["pad_median_s"] / out[f"{layout}_median_s"]
    return out


def _embedded():
    """The embedded run's config, arith task, char tokenizer and (random) policy shapes."""
    from frontier_rl import config_lib, tasks

    c = config_lib.default_config()
    task = tasks.make_task("arith", {k: v for k, v in c.task.items() if k != "name"}, 0)
    tok = tasks.build_char_tokenizer(tasks.ARITH_ALPHABET)
    cfg = ModelConfig(vocab_size=len(tok), hidden_size=c.model.hidden_size,
                      intermediate_size=c.model.intermediate_size,
                      num_layers=c.model.num_layers, num_heads=c.model.num_heads,
                      num_kv_heads=c.model.num_kv_heads, head_dim=c.model.head_dim,
                      qk_norm=True)
    return c, task, tok, cfg


def bench_entropy(work: dict, repeats: int) -> dict:
    """HIVE Stage 2's cost: the prompt-entropy pass over B prompts, as a share of the rollout
    of the same B prompts x G on the embedded config (arith prompts, d=64 policy)."""
    from frontier_rl.entropy import PromptEntropy
    from frontier_rl.fit.shapes import PROMPT_BUCKETS
    from frontier_rl.rollout.context import encode_prompt

    c, task, tok, cfg = _embedded()
    graphdef, params = _model(cfg)
    prompts = [encode_prompt(tok, p.text) for p in task.train[: c.rl.batch_size]]
    entropy = PromptEntropy(graphdef, pad_id=tok.pad_token_id, prompt_buckets=PROMPT_BUCKETS)
    sampler = Sampler(graphdef, cfg, eos_id=tok.eos_token_id, pad_id=tok.pad_token_id,
                      prompt_buckets=PROMPT_BUCKETS, max_new_tokens=c.rollout.max_new_tokens)
    seed = iter(range(10**6))
    t_ent = _timed(lambda: entropy(params, prompts), repeats)
    t_roll = _timed(lambda: sampler.sample(params, prompts, c.rl.group_size, seed=next(seed)),
                    repeats)
    ent, roll = statistics.median(t_ent), statistics.median(t_roll)
    return {"bench": "entropy", "prompts": len(prompts), "group_size": c.rl.group_size,
            "entropy_median_s": ent, "rollout_median_s": roll,
            "entropy_share_of_rollout": ent / roll, "repeats": repeats}


def bench_flops(work: dict, repeats: int) -> dict:
    """One RL step's FLOPs on the embedded config, XLA vs formula per kind (`repeats` unused)."""
    from frontier_rl.entropy import PromptEntropy
    from frontier_rl.fit.accounting import KINDS, Accountant, matmul_params
    from frontier_rl.fit.shapes import PROMPT_BUCKETS, ROW_BUCKETS
    from frontier_rl.rl import batch as batch_lib
    from frontier_rl.rollout.context import PolicyContext

    c, task, tok, cfg = _embedded()
    graphdef, params = _model(cfg)
    trainer = Trainer(graphdef, LOSSES[c.rl.loss], make_optimizer(OptimConfig()),
                      sharding.make_mesh(), epochs=c.rl.epochs, minibatches=c.rl.minibatches)
    params, opt_state = trainer.init(params)
    sampler = Sampler(graphdef, cfg, eos_id=tok.eos_token_id, pad_id=tok.pad_token_id,
                      prompt_buckets=PROMPT_BUCKETS, max_new_tokens=c.rollout.max_new_tokens)
    entropy = PromptEntropy(graphdef, pad_id=tok.pad_token_id, prompt_buckets=PROMPT_BUCKETS)
    acc = Accountant(cfg, params, sampler=sampler, entropy=entropy, trainer=trainer)
    ctx = PolicyContext(sampler=sampler, tokenizer=tok, prompts=task.train,
                        verify=task.verify,
                        shape_rewards=lambda o, lengths: o, group_size=c.rl.group_size,
                        batch_size=c.rl.batch_size, temperature=c.rollout.temperature,
                        top_p=c.rollout.top_p, top_k=c.rollout.top_k, seed=0,
                        prompt_entropy_fn=entropy, accountant=acc)
    ctx.begin_step(1, params)
    indices = list(range(c.rl.batch_size))
    t0 = time.perf_counter()
    ctx.prompt_entropy(indices)
    groups = ctx.rollout(indices, c.rl.group_size)
    batch = batch_lib.pack(groups, [ctx.encode(i) for i in indices], pad_id=tok.pad_token_id,
                           prompt_buckets=PROMPT_BUCKETS, row_buckets=ROW_BUCKETS,
                           row_multiple=trainer.row_multiple)
    batch["old_logp"] = trainer.logps(params, batch["tokens"], batch["valid"])
    acc.charge_logps(batch)
    trainer.step(params, opt_state, batch, seed=0)
    acc.charge_train(batch)
    seconds = time.perf_counter() - t0
    m = acc.metrics()
    out = {"bench": "flops", "prompts": c.rl.batch_size, "group_size": c.rl.group_size,
           "matmul_params": matmul_params(cfg), "cost_compiles": acc.cost_compiles,
           "step_with_compiles_s": seconds}
    for kind in (*KINDS, "all"):
        sfx = "" if kind == "all" else f"/{kind}"
        out[f"{kind}_gflops_xla"] = m[f"perf/pflops{sfx}"] * 1e6
        out[f"{kind}_gflops_formula"] = m[f"perf/pflops_formula{sfx}"] * 1e6
        for name in ("xla_over_formula", "padding_ratio", "token_padding_ratio"):
            out[f"{kind}_{name}"] = m[f"perf/{name}{sfx}"]
    return out


def bench_verify(work: dict, repeats: int) -> dict:
    """Answer checking (math-verify) in 0, 1 and 2 worker processes: bench_verify.py."""
    from frontier_rl.bench import verify as bv

    return bv.run(work, repeats)


BENCHES = {"sampler": bench_sampler, "train_step": bench_train_step, "entropy": bench_entropy,
           "flops": bench_flops, "verify": bench_verify}


def main(name: str, *, config_name: str = "default", repeats: int = 10,
         as_json: bool = False) -> dict:
    if name not in BENCHES:
        raise ValueError(f"bench {name!r} is not one of {sorted(BENCHES)}")
    if config_name not in WORK:
        raise ValueError(f"--bench_config={config_name!r} is not one of {sorted(WORK)}")
    work = WORK[config_name]
    if work.get("realistic") and name != "train_step":
        raise ValueError(f"--bench_config={config_name!r} is a train_step work")
    if work.get("early") and name != "sampler":
        raise ValueError(f"--bench_config={config_name!r} is a sampler work")
    bench = BENCHES[name]
    if work.get("realistic"):
        bench = bench_train_step_realistic
    elif work.get("early"):
        bench = bench_sampler_early
    out = bench(work, repeats)
    out.update(config=config_name, backend=jax.default_backend(), devices=jax.device_count())
    stats = jax.devices()[0].memory_stats()  # None on a CPU
    if stats and "peak_bytes_in_use" in stats:
        out["peak_bytes_in_use"] = int(stats["peak_bytes_in_use"])
    for k, v in out.items():
        print(f"{k:>18}: {v:,.4g}" if isinstance(v, float) else f"{k:>18}: {v}")
    if as_json:
        print(json.dumps(out))
    return out
