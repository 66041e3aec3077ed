"""Hugging Face export of a run's policy, loadable by transformers, vLLM and SGLang.

`frontier-rl export --workdir=DIR [--step=N] --out=HF_DIR` writes the parameters of checkpoint
N (default: the newest) as safetensors shards + index, config.json, generation_config.json and
the tokenizer; `export.every` in the config does the same during training. What the export
needs besides the checkpoint (the architecture, the tokenizer, the precision) is written by
the training run into WORKDIR/policy when it starts, so an export never rebuilds the task.

Each export is written to `<out>.tmp` and renamed into place, so an interrupted export never
leaves a half-written directory that a server would load.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import jax
import ml_collections
from flax import nnx

from frontier_rl.models import ModelConfig, abstract_params, hf

POLICY_DIR = "policy"
RUNTIME_NAME = "frontier_rl_policy.json"


def write_policy_spec(workdir: str, mcfg: ModelConfig, tokenizer) -> str:
    """WORKDIR/policy: config.json, the tokenizer and the run's precision (no weights)."""
    path = os.path.join(workdir, POLICY_DIR)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
        json.dump(hf.config_to_hf(mcfg), f, indent=2, sort_keys=True)
    with open(os.path.join(path, RUNTIME_NAME), "w", encoding="utf-8") as f:
        json.dump({"param_dtype": mcfg.param_dtype, "dtype": mcfg.dtype,
                   "eos_token_ids": list(mcfg.eos_token_ids)}, f, indent=2)
    hf.save_tokenizer(tokenizer, path)
    return path


def read_policy_spec(workdir: str) -> tuple[ModelConfig, object]:
    """The ModelConfig and tokenizer a run in `workdir` trained."""
    path = os.path.join(workdir, POLICY_DIR)
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise FileNotFoundError(f"no {POLICY_DIR}/config.json in {workdir}: not a frontier-rl "
                                "run directory, or a run started before exports existed")
    with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
        mcfg = hf.config_from_hf(json.load(f))
    with open(os.path.join(path, RUNTIME_NAME), encoding="utf-8") as f:
        runtime = json.load(f)
    eos = tuple(runtime.get("eos_token_ids") or ())
    mcfg = dataclasses.replace(mcfg, param_dtype=runtime["param_dtype"],
                               dtype=runtime["dtype"], **({"eos_token_ids": eos} if eos else {}))
    return mcfg, hf.load_tokenizer(path)


def export_params(graphdef, params, mcfg: ModelConfig, tokenizer, out: str) -> str:
    """Writes `params` as a Hugging Face checkpoint directory `out` (atomically)."""
    out = os.path.abspath(out)
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    hf.save_pretrained(nnx.merge(graphdef, params), mcfg, tmp)
    hf.save_tokenizer(tokenizer, tmp)
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.replace(tmp, out)
    return out


def restore_policy(workdir: str, step: int | None = None, config=None):
    """(graphdef, params, ModelConfig, tokenizer, step) of checkpoint `step` (None = the
    newest) of the run in `workdir`; `config` defaults to the run's config.json."""
    from frontier_rl import checkpoint, policy
    from frontier_rl.rl.train_step import OptimConfig, make_optimizer

    mcfg, tokenizer = read_policy_spec(workdir)
    if config is None:
        with open(os.path.join(workdir, "config.json"), encoding="utf-8") as f:
            config = ml_collections.ConfigDict(json.load(f))
    graphdef, params = abstract_params(mcfg)
    # The checkpoint holds params and optimizer state together; restore both, keep params.
    tx = make_optimizer(OptimConfig(learning_rate=config.rl.learning_rate,
                                    warmup_steps=config.rl.warmup_steps))
    opt_state = jax.eval_shape(tx.init, params)
    ckpt = checkpoint.Checkpointer(os.path.join(workdir, "checkpoints"))
    try:
        steps = ckpt.all_steps()
        if not steps:
            raise FileNotFoundError(f"no checkpoints in {workdir}/checkpoints")
        if step is not None and step not in steps:
            raise ValueError(f"--step={step}: {workdir} has checkpoints at steps {steps}")
        target = {"params": policy.flat(params), "opt_state": policy.flat(opt_state)}
        step, state, _ = ckpt.restore_step(step if step is not None else steps[-1], target)
    finally:
        ckpt.close()
    return graphdef, policy.unflat(params, state["params"]), mcfg, tokenizer, step


def export_run(workdir: str, out: str, step: int | None = None) -> str:
    """Exports checkpoint `step` (None = the newest) of the run in `workdir` to `out`."""
    if not out:
        raise ValueError("--out is required (the directory to write the checkpoint to)")
    graphdef, params, mcfg, tokenizer, _ = restore_policy(os.path.abspath(workdir), step)
    return export_params(graphdef, params, mcfg, tokenizer, out)
