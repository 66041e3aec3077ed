"""Run by tests/test_target_compile.py with a target compiler's Python (launch/target_env.sh):
compiles one small policy's train step for a compile-only GPU and prints what the GPU compiler
made of it, as one JSON line.

  python tests/target_programs.py packed-cudnn    # rl.packing="pack" on cuDNN attention
  python tests/target_programs.py packed-tpu      # rl.packing="pack" on a TPU (XLA attention)
  python tests/target_programs.py packed-a100     # rl.packing="pack" on a GPU before Hopper
  python tests/target_programs.py gpu-check-twin  # bench's fit --target twin of a train step
"""

import dataclasses
import json
import os
import re
import sys

os.environ["JAX_PLATFORMS"] = "cpu"  # compile-only devices; no backend is started for them

from frontier_rl.fit import targets  # noqa: E402
from frontier_rl.models import ModelConfig, abstract_params  # noqa: E402
from frontier_rl.models.transformer import attention_impl  # noqa: E402
from frontier_rl.rl import sharding  # noqa: E402
from frontier_rl.rl.losses import LOSSES  # noqa: E402
from frontier_rl.rl.train_step import OptimConfig, Trainer, make_optimizer  # noqa: E402

ROWS, LENGTH = 8, 200  # a length no weight dimension shares
TPU_LENGTH = 1160  # above SEGMENT_BLOCK, so XLA attends in blocks; shared by no other dimension


def packed_cudnn() -> dict:
    return _packed(targets.parse("h100x1"), LENGTH)


def packed_a100() -> dict:
    return _packed(targets.parse("a100-80gbx1"), TPU_LENGTH)


def packed_tpu() -> dict:
    return _packed(targets.parse("v5e-1"), TPU_LENGTH)


def _packed(target, length: int) -> dict:
    """The train step of packed rows compiled for `target`: its attention kernel, layout,
    cuDNN calls, every array shaped [..., length, length] and its peak."""
    devices = target.compile_devices()
    cfg = ModelConfig(vocab_size=64, hidden_size=256, intermediate_size=512, num_layers=2,
                      num_heads=4, num_kv_heads=2, head_dim=64, dtype="bfloat16",
                      attention="auto", scan_layers=True, remat="full")
    cfg = dataclasses.replace(cfg, attention=attention_impl(cfg, target.platform))
    graphdef, params = abstract_params(cfg)
    mesh = sharding.make_mesh(devices=devices)
    tr = Trainer(graphdef, LOSSES["grpo"], make_optimizer(OptimConfig()), mesh, layout="pack",
                 logits_chunk=0)
    with targets.compiling_for(target, devices):
        compiled = tr.lower_step(params, ROWS, length).compile()
    hlo = compiled.as_text()
    square = re.findall(rf"\w+\[[\d,]*{length},{length}\]", hlo)
    return {"attention": cfg.attention, "layout": tr.layout,
            "cudnn_calls": sorted(set(re.findall(r'custom_call_target="(__cudnn\$[^"]+)"', hlo))),
            "square_arrays": sorted(set(square)),
            "peak": targets.measure(compiled, target.kind)["peak"]}


def gpu_check_twin() -> dict:
    """launch/gpu_check.sh's prediction (bench._target_peak_gib): a train step built on this
    machine's CPU mesh, recompiled for an H100's compile-only device."""
    import numpy as np
    from flax import nnx

    from frontier_rl import bench
    from frontier_rl.models import Transformer

    cfg = ModelConfig(vocab_size=64, hidden_size=256, intermediate_size=512, num_layers=2,
                      num_heads=4, num_kv_heads=2, head_dim=64, dtype="bfloat16",
                      scan_layers=True, remat="full")
    graphdef, params = nnx.split(Transformer(cfg, rngs=nnx.Rngs(0)), nnx.Param)
    mesh = sharding.make_mesh()
    tr = Trainer(graphdef, LOSSES["grpo"], make_optimizer(OptimConfig()), mesh, layout="pack")
    gib = bench._target_peak_gib(graphdef, params, mesh, tr, ROWS, LENGTH,
                                 target=targets.parse("h100x1"))
    weights = sum(np.size(x) * 4 for x in __import__("jax").tree.leaves(params))
    return {"peak_gib": gib, "weights_gib": weights / 2**30}


if __name__ == "__main__":
    print(json.dumps({"packed-cudnn": packed_cudnn, "packed-tpu": packed_tpu,
                      "packed-a100": packed_a100,
                      "gpu-check-twin": gpu_check_twin}[sys.argv[1]]()))
