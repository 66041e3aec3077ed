"""Run by tests/test_target_compile.py with a target compiler's Python (launch/target_env.sh):
compiles one small policy's train step for a compile-only GPU and prints what the GPU compiler
made of it, as one JSON line.

  python tests/target_programs.py packed-cudnn    # rl.packing="pack" on cuDNN attention
"""

import dataclasses
import json
import os
import re
import sys

os.environ["JAX_PLATFORMS"] = "cpu"  # compile-only devices; no backend is started for them

from frontier_rl import targets  # noqa: E402
from frontier_rl.models import ModelConfig, abstract_params  # noqa: E402
from frontier_rl.models.transformer import attention_impl  # noqa: E402
from frontier_rl.rl import sharding  # noqa: E402
from frontier_rl.rl.losses import LOSSES  # noqa: E402
from frontier_rl.rl.train_step import OptimConfig, Trainer, make_optimizer  # noqa: E402

ROWS, LENGTH = 8, 200  # a length no weight dimension shares


def packed_cudnn() -> dict:
    target = targets.parse("h100x1")
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
        compiled = tr.lower_step(params, ROWS, LENGTH).compile()
    hlo = compiled.as_text()
    square = re.findall(rf"\w+\[[\d,]*{LENGTH},{LENGTH}\]", hlo)
    return {"attention": cfg.attention, "layout": tr.layout,
            "cudnn_calls": sorted(set(re.findall(r'custom_call_target="(__cudnn\$[^"]+)"', hlo))),
            "square_arrays": sorted(set(square)),
            "peak": targets.measure(compiled, "gpu")["peak"]}


if __name__ == "__main__":
    print(json.dumps({"packed-cudnn": packed_cudnn}[sys.argv[1]]()))
