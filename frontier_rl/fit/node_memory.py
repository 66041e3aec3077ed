"""The whole GPU, not JAX's share of it: what a GPU holds when an external rollout engine
(rollout.engine=sglang) shares it with the JAX trainer, as launch/run_gpu.sh lays a node out by
default ("colocated": SGLang and JAX on every GPU).

Per GPU, summed against the device's memory:
  JAX       its preallocated share: XLA's allocator takes `fraction x` the device's total
            memory up front (XLA_PYTHON_CLIENT_MEM_FRACTION; launch/env.sh sets it, else the
            launcher's colocated share of launch/shares.sh). `fit` sizes every program inside
            it; this module adds nothing for them.
  SGLang    - weights + KV pool: `--mem-fraction-static` (SGLANG_MEM) x the memory. SGLang
              defines the fraction as (weights + KV pool) / GPU memory (sgl-project/sglang,
              docs/advanced_features/hyperparameter_tuning.md, and the docstring of
              `_handle_gpu_memory_settings` in python/sglang/srt/server_args.py); the KV pool is
              what is left of `fraction x` the memory free at its start once the weights are
              loaded (python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py,
              `profile_max_num_token`; the free memory is read in model_runner.py before the
              weights load). Counted here against the whole device, which bounds it: SGLang
              starts before the trainer, on idle GPUs. The weights are 16-bit: `--dtype auto`
              serves a float32 or float16 checkpoint in float16 and a bfloat16 one in bfloat16
              (SGLang's `--dtype` help, server_args.py), split over SGLANG_TP GPUs.
            - CUDA graphs: 2 MiB per batch size up to `cuda_graph_max_bs`, SGLang's own
              estimate when it picks its fraction (server_args.py, `_handle_gpu_memory_settings`,
              "For cuda graphs"); `cuda_graph_max_bs` as SGLang defaults it for the GPU's
              memory and tensor parallelism (same function), or as SGLANG_ARGS sets it.
            - activations: 5 GiB, the low end of the 5-8 GB SGLang's tuning guide says to leave
              for activations outside the static share (hyperparameter_tuning.md, "Tune
              --mem-fraction-static"). SGLang's server_args.py reserves more when it picks the
              fraction itself (1.5 MiB per token of `chunked_prefill_size`, 12 GiB at an H100's
              default 8,192; at least 10 GiB on a GPU over 60 GB): a heuristic for any model,
              which the launcher overrides by setting the fraction.
            - metadata: 512 MiB ("constant meta data, e.g. from attention backend") plus
              tp / 8 GiB ("adjustments for large parallel size"), both from
              `_handle_gpu_memory_settings`.
  margin    each process's CUDA context, the trainer's and SGLang's: 0.5 GiB each. A context
            with CUDA's lazy module loading (11.7 and later) takes about 300 MB before a
            library loads its kernels into it, and over 1,000 MB with eager loading
            (pytorch/pytorch#107667, NVIDIA's answer); rounded up to 0.5 GiB for the cuBLAS,
            cuDNN and NCCL kernels each runtime loads.
Not counted, and so left to the headroom: NCCL's buffers for JAX's collectives (NCCL allocates
them itself, outside XLA's preallocated share; their size follows NCCL's channel count and
NCCL_BUFFSIZE), and the allocators' fragmentation. The CUDA graphs, activations and contexts
are stated figures, not measurements of this project's runs.

`size` is the arithmetic (`fit.check` adds it to its report as report["node"]);
`python -m frontier_rl.fit.node_check` runs it for launch/run_gpu.sh before anything is compiled or
started (exit status NODE_DOES_NOT_FIT when the sum exceeds the GPU). This module imports
nothing of the project.
"""
from __future__ import annotations

import os
import re

GIB, MIB = 2**30, 2**20
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARES_FILE = os.path.join(ROOT, "launch", "shares.sh")
NODE_DOES_NOT_FIT = 5  # launch/run_gpu.sh's exit status when the node's sum exceeds a GPU

# SGLang's figures (server_args.py `_handle_gpu_memory_settings`; the module docstring).
GRAPH_BYTES_PER_BATCH = 2 * MIB
METADATA_BYTES = 512 * MIB
TP_BYTES_PER_8 = 1024 * MIB
ACTIVATION_BYTES = 5 * GIB  # hyperparameter_tuning.md's 5-8 GB, its low end
CUDA_CONTEXT_BYTES = GIB // 2  # pytorch/pytorch#107667's ~300 MB, rounded up

_SHARE_LINE = re.compile(r"^([A-Z_]+)=([0-9.]+)\s*$")


def launch_shares(path: str = SHARES_FILE) -> dict[str, float]:
    """The launch scripts' default memory shares (launch/shares.sh, NAME=VALUE lines)."""
    with open(path, encoding="utf-8") as f:
        return {m.group(1): float(m.group(2))
                for m in (_SHARE_LINE.match(line.strip()) for line in f) if m}


def colocated(env=None) -> bool:
    """Whether the engine shares JAX's GPUs: launch/run_gpu.sh's default layout
    (FRONTIER_RL_GPU_SHARED=1, or unset); FRONTIER_RL_GPU_SHARED=0 is its split layout."""
    env = os.environ if env is None else env
    return env.get("FRONTIER_RL_GPU_SHARED", "1") == "1"


def _fraction(name: str, value: str) -> float:
    try:
        fraction = float(value)
    except ValueError:
        fraction = float("nan")
    if not 0 < fraction <= 1:
        raise ValueError(f"{name}={value!r} is not a fraction in (0, 1]")
    return fraction


def jax_colocated_share(env=None) -> tuple[float, str]:
    """(JAX's share of a GPU it shares with the engine, where it comes from) when no
    XLA_*_MEM_FRACTION is set: what launch/env.sh would set with FRONTIER_RL_GPU_SHARED=1."""
    env = os.environ if env is None else env
    if env.get("JAX_MEM_FRACTION_SHARED"):
        v = env["JAX_MEM_FRACTION_SHARED"]
        return (_fraction("JAX_MEM_FRACTION_SHARED", v),
                f"JAX_MEM_FRACTION_SHARED={v}, launch/env.sh's share beside the engine "
                "(XLA_PYTHON_CLIENT_MEM_FRACTION is unset)")
    share = launch_shares()["DEFAULT_JAX_MEM_FRACTION_SHARED"]
    return share, (f"launch/run_gpu.sh's colocated share, DEFAULT_JAX_MEM_FRACTION_SHARED="
                   f"{share:g} of launch/shares.sh, as launch/env.sh sets it with "
                   "FRONTIER_RL_GPU_SHARED=1 (XLA_PYTHON_CLIENT_MEM_FRACTION is unset)")


def engine_fraction(env=None) -> tuple[float, str]:
    """(SGLang's --mem-fraction-static, where it comes from): SGLANG_MEM as launch/run_gpu.sh
    exports it, else its default for the layout (launch/shares.sh)."""
    env = os.environ if env is None else env
    if env.get("SGLANG_MEM"):
        return _fraction("SGLANG_MEM", env["SGLANG_MEM"]), f"SGLANG_MEM={env['SGLANG_MEM']}"
    name = "DEFAULT_SGLANG_MEM_SHARED" if colocated(env) else "DEFAULT_SGLANG_MEM"
    share = launch_shares()[name]
    return share, f"SGLANG_MEM unset: {name}={share:g} of launch/shares.sh"


def _tp(env) -> int:
    v = env.get("SGLANG_TP", "") or "1"
    if not v.isdigit() or int(v) < 1:
        raise ValueError(f"SGLANG_TP={v!r} is not an integer >= 1")
    return int(v)


def cuda_graph_max_bs(device_bytes: int, tp: int, sglang_args: str = "") -> tuple[int, str]:
    """(SGLang's largest CUDA-graph batch, where it comes from): --disable-cuda-graph (0) or
    --cuda-graph-max-bs in SGLANG_ARGS, else SGLang's default for the GPU's memory and tensor
    parallelism (server_args.py, `_handle_gpu_memory_settings`; its thresholds are MiB)."""
    args = sglang_args.split()
    if "--disable-cuda-graph" in args:
        return 0, "--disable-cuda-graph in SGLANG_ARGS"
    for i, a in enumerate(args):
        value = a.split("=", 1)[1] if a.startswith("--cuda-graph-max-bs=") else (
            args[i + 1] if a == "--cuda-graph-max-bs" and i + 1 < len(args) else None)
        if value is not None:
            if not value.isdigit():
                raise ValueError(f"SGLANG_ARGS: --cuda-graph-max-bs {value!r} is not an integer")
            return int(value), "--cuda-graph-max-bs in SGLANG_ARGS"
    mib = device_bytes / MIB
    if mib < 20 * 1024:
        bs = 8
    elif mib < 35 * 1024:
        bs = 24 if tp < 4 else 80
    elif mib < 60 * 1024:
        bs = 32 if tp < 4 else 160
    elif mib < 160 * 1024:
        bs = 256 if tp < 4 else 512
    else:
        bs = 512
    return bs, f"SGLang's default for {device_bytes / GIB:.0f} GiB at tp {tp}"


def size(*, device_bytes: int, jax_share: float, jax_source: str, params: int | None = None,
         env=None) -> dict:
    """The node's sum per GPU (module docstring): JAX's preallocated share, SGLang's memory
    (its settings from `env`: SGLANG_MEM, SGLANG_TP, SGLANG_ARGS) and the runtime margin,
    against `device_bytes`. `params`: the policy's parameter count, for SGLang's weights and
    the KV pool left beside them (None: not known; the sum does not need it)."""
    env = os.environ if env is None else env
    fraction, fraction_source = engine_fraction(env)
    tp = _tp(env)
    graph_bs, graph_source = cuda_graph_max_bs(device_bytes, tp, env.get("SGLANG_ARGS", ""))
    static = fraction * device_bytes
    engine = [
        {"what": "weights + KV pool", "bytes": static,
         "source": f"--mem-fraction-static {fraction:g} ({fraction_source})"},
        {"what": "CUDA graphs", "bytes": graph_bs * GRAPH_BYTES_PER_BATCH,
         "source": f"2 MiB x cuda_graph_max_bs {graph_bs} ({graph_source}; SGLang's "
                   "server_args.py)"},
        {"what": "activations", "bytes": ACTIVATION_BYTES,
         "source": "SGLang's tuning guide: 5-8 GB (hyperparameter_tuning.md)"},
        {"what": "metadata", "bytes": METADATA_BYTES + tp * TP_BYTES_PER_8 / 8,
         "source": f"512 MiB + tp {tp} / 8 GiB (SGLang's server_args.py)"},
    ]
    margin = [
        {"what": "CUDA context, trainer", "bytes": CUDA_CONTEXT_BYTES,
         "source": "~300 MB with lazy loading, rounded up (pytorch/pytorch#107667)"},
        {"what": "CUDA context, SGLang", "bytes": CUDA_CONTEXT_BYTES,
         "source": "~300 MB with lazy loading, rounded up (pytorch/pytorch#107667)"},
    ]
    jax_bytes = jax_share * device_bytes
    engine_bytes = sum(e["bytes"] for e in engine)
    margin_bytes = sum(m["bytes"] for m in margin)
    total = jax_bytes + engine_bytes + margin_bytes
    weights = params * 2 / tp if params else None
    kv = static - weights if weights is not None else None
    advice = []
    if total > device_bytes:
        advice.append(
            f"the node does not fit: JAX's share {jax_bytes / GIB:.1f} GiB ({jax_source}) + "
            f"the engine's {engine_bytes / GIB:.1f} GiB (SGLang: weights and KV pool "
            f"{static / GIB:.1f} at {fraction_source}, CUDA graphs "
            f"{engine[1]['bytes'] / GIB:.1f}, activations {engine[2]['bytes'] / GIB:.1f}, "
            f"metadata {engine[3]['bytes'] / GIB:.1f}) + runtime margin "
            f"{margin_bytes / GIB:.1f} GiB (CUDA contexts) = {total / GIB:.1f} GiB > the "
            f"device's {device_bytes / GIB:.1f} GiB: lower SGLANG_MEM or JAX's share "
            "(JAX_MEM_FRACTION_SHARED / XLA_PYTHON_CLIENT_MEM_FRACTION), or give SGLang GPUs "
            "of its own (launch/run_gpu.sh's SGLANG_GPUS)")
    if kv is not None and kv <= 0:
        advice.append(
            f"SGLang's weights {weights / GIB:.1f} GiB per GPU fill its static share "
            f"{static / GIB:.1f} GiB ({fraction_source}), leaving no KV pool: it stops at start "
            "(model_runner_kv_cache_mixin.py); raise SGLANG_MEM or SGLANG_TP")
    return {"layout": "colocated", "engine": "sglang", "device_bytes": device_bytes,
            "jax_share": jax_share, "jax_source": jax_source, "jax_bytes": jax_bytes,
            "engine_fraction": fraction, "engine_fraction_source": fraction_source,
            "engine_tp": tp, "cuda_graph_max_bs": graph_bs, "engine_items": engine,
            "engine_bytes": engine_bytes, "weights_bytes": weights, "kv_pool_bytes": kv,
            "margin_items": margin, "margin_bytes": margin_bytes, "total_bytes": total,
            "headroom_bytes": device_bytes - total, "fits": not advice, "advice": advice}


def summary(node: dict) -> str:
    """One line: the node's sum per GPU against the device."""
    kv = (f", of which weights {node['weights_bytes'] / GIB:.1f} + KV pool "
          f"{node['kv_pool_bytes'] / GIB:.1f}" if node["weights_bytes"] is not None else "")
    return (f"node per GPU ({node['layout']}): JAX's share {node['jax_bytes'] / GIB:.1f} GiB "
            f"({node['jax_share']:g}) + SGLang {node['engine_bytes'] / GIB:.1f} GiB (static "
            f"{node['engine_items'][0]['bytes'] / GIB:.1f} at {node['engine_fraction']:g}{kv}; "
            f"CUDA graphs, activations, metadata "
            f"{sum(e['bytes'] for e in node['engine_items'][1:]) / GIB:.1f}) + runtime margin "
            f"{node['margin_bytes'] / GIB:.1f} GiB = {node['total_bytes'] / GIB:.1f} of "
            f"{node['device_bytes'] / GIB:.1f} GiB: {'fits' if node['fits'] else 'does NOT fit'}")
