"""Hugging Face export of a run's policy, loadable by transformers, vLLM and SGLang.

`export_params` writes parameters as safetensors shards + index, config.json,
generation_config.json and the tokenizer; `export.every` in the config calls it during training
and `frontier-rl export --workdir=DIR [--step=N] --out=HF_DIR` on checkpoint N (default: the
newest) of a finished run (`policy.export_run`, which restores the checkpoint first). What the
export needs besides the checkpoint (the architecture, the tokenizer, the precision) is written
by the training run into WORKDIR/policy when it starts, so an export never rebuilds the task.
This module knows models and files only, not runs, so the trainer and the server use it
without the policy builders.

Each export is written to `<out>.tmp` and renamed into place, so an interrupted export never
leaves a half-written directory that a server would load.
"""

from __future__ import annotations

import os
import shutil
import time

from flax import nnx

from frontier_rl.models import ModelConfig, hf


def export_params(graphdef, params, mcfg: ModelConfig, tokenizer, out: str, *,
                  device_cast: bool = True, timings: dict[str, float] | None = None) -> str:
    """Writes `params` as a Hugging Face checkpoint directory `out` (atomically), in the
    model's compute dtype, cast on the devices before the host copy (`device_cast`; see
    hf.save_pretrained). `timings`, if given, gets "host_copy" and "write" seconds added."""
    out = os.path.abspath(out)
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    hf.save_pretrained(nnx.merge(graphdef, params), mcfg, tmp, device_cast=device_cast,
                       timings=timings)
    t0 = time.perf_counter()
    hf.save_tokenizer(tokenizer, tmp)
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.replace(tmp, out)
    if timings is not None:
        timings["write"] = timings.get("write", 0.0) + time.perf_counter() - t0
    return out


def config_section():
    """`export`: the policy as a Hugging Face checkpoint every `every` steps (0 = only on
    `frontier-rl export`) into `dir` (default WORKDIR/export/step_N)."""
    from frontier_rl.run import fields

    return (fields.Section("export", config_section.__doc__)
            .field("every", 0, fields.nonneg_int, "an integer >= 0 (0 disables)")
            .field("dir", ""))
