"""The policy: building it, loading it, restoring and exporting a run's, and its flat form.

One module for every command that needs a policy (train, fit, eval, export, serve, bench):

- `random_config` / `random_params`: a random policy from the config's model section (a preset's
  architecture or the shape fields) and the tokenizer's special ids, initialised straight into
  the mesh's shardings;
- `load`: a Hugging Face checkpoint (a local directory, or a Hugging Face id `org/name[@rev]`
  resolved through the hub's cache, frontier_rl/hub.py) into the mesh's shardings at the run's
  precision;
- `alphabet`, `stop_ids`: the char-level tokenizer's characters for a task, and every id that
  ends a response;
- `prepare`: the policy a run starts from: the cached warm start if there is one, else the
  checkpoint or a random init, which the caller then warm-starts (`warmstart.apply`);
- `flat` / `unflat`: parameters as a flat dict of arrays for checkpoints and export;
- `restore`, `export_run`: a run's checkpoint, and its Hugging Face export (export.py).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os

import jax
import ml_collections
import numpy as np
from flax import nnx

from frontier_rl import export, hub, tasks, warmstart
from frontier_rl.models import ModelConfig, Transformer, abstract_params, hf, presets
from frontier_rl.rl import sharding
from frontier_rl.run import distributed
from frontier_rl.run.errors import RunError

log = logging.getLogger("frontier_rl")

POLICY_DIR = "policy"  # WORKDIR/policy: the run's architecture, tokenizer and precision
RUNTIME_NAME = "frontier_rl_policy.json"


def write_spec(workdir: str, mcfg: ModelConfig, tokenizer) -> str:
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


def read_spec(workdir: str) -> tuple[ModelConfig, object]:
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


@dataclasses.dataclass
class Policy:
    graphdef: object
    params: object
    mcfg: ModelConfig
    tokenizer: object
    warmstart: dict  # where the warm start stopped ({} without one; set by warmstart.apply)
    from_cache: bool = False  # loaded from the warm-start cache: warm-started already


def flat(tree) -> dict[str, np.ndarray]:
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {f"{i:04d}": leaf for i, (_, leaf) in enumerate(leaves)}


def unflat(target, flat: dict) -> object:
    treedef = jax.tree_util.tree_structure(target)
    return jax.tree_util.tree_unflatten(treedef, [flat[k] for k in sorted(flat)])


def alphabet(task) -> str:
    """Characters of the char-level tokenizer built for a task without a model directory: the
    prompts and the responses the warm start teaches (their format's characters included)."""
    if task.alphabet is not None:
        return task.alphabet
    fmt = task.format_response if task.response_template is not None else (lambda a: "")
    return "".join(sorted({c for p in task.train + task.eval for c in p.text + fmt(p.answer)}))


# ============================================================================ policy builders

def runtime_fields(config) -> dict:
    """ModelConfig fields that change how the policy runs, not what it computes."""
    m = config.model
    return dict(param_dtype=m.param_dtype, attention=m.attention,
                attention_chunk=m.attention_chunk, remat=m.remat, scan_layers=m.scan_layers)


def random_config(config, tokenizer) -> ModelConfig:
    """The ModelConfig of a random policy: `model.preset`'s architecture or the shape fields,
    with the tokenizer's special ids (compute dtype "auto" = float32)."""
    m = config.model
    ids = dict(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
               eos_token_ids=(tokenizer.eos_token_id,), pad_token_id=tokenizer.pad_token_id)
    dtype = "float32" if m.dtype == "auto" else m.dtype
    if m.preset:
        mcfg = presets.preset_config(m.preset, dtype=dtype, **runtime_fields(config), **ids)
        if len(tokenizer) > mcfg.vocab_size:
            raise RunError(f"the tokenizer has {len(tokenizer)} tokens, more than model.preset="
                           f"{m.preset!r}'s vocabulary of {mcfg.vocab_size}")
        return mcfg
    return ModelConfig(
        vocab_size=len(tokenizer), hidden_size=m.hidden_size,
        intermediate_size=m.intermediate_size, num_layers=m.num_layers, num_heads=m.num_heads,
        num_kv_heads=m.num_kv_heads, head_dim=m.head_dim, rope_theta=m.rope_theta,
        family=m.family, qk_norm=m.family == "qwen3", qkv_bias=m.family == "qwen2",
        tie_word_embeddings=m.tie_word_embeddings, dtype=dtype, **runtime_fields(config), **ids)


def random_params(mcfg: ModelConfig, seed: int, mesh):
    """(graphdef, params) of a random policy, initialised straight into the mesh's shardings
    (a 7B model never sits whole on one device)."""
    abstract = nnx.eval_shape(lambda: Transformer(mcfg, rngs=nnx.Rngs(seed)))
    graphdef, abstract_params = nnx.split(abstract, nnx.Param)
    shardings = sharding.param_shardings(abstract_params, mesh)

    @jax.jit
    def init():
        params = nnx.split(Transformer(mcfg, rngs=nnx.Rngs(seed)), nnx.Param)[1]
        return jax.lax.with_sharding_constraint(params, shardings)

    return graphdef, init()


def load(path: str, config, mesh):
    """(graphdef, params, ModelConfig) of the checkpoint in `path` (a directory, or a Hugging
    Face id: its snapshot in the hub cache): parameters in `model.param_dtype` placed in their
    shardings tensor by tensor, compute in `model.dtype` ("auto" = the stored dtype) and the
    run's attention/remat/scan settings."""
    path = hub.model_dir(path)
    dtype = None if config.model.dtype == "auto" else config.model.dtype
    model, mcfg = hf.load_pretrained(
        path, dtype=dtype, param_dtype=config.model.param_dtype,
        shardings=lambda abstract: sharding.param_shardings(abstract, mesh))
    mcfg = dataclasses.replace(mcfg, **runtime_fields(config))
    _, params = nnx.split(model, nnx.Param)
    graphdef = abstract_params(mcfg)[0]
    return graphdef, params, mcfg


def stop_ids(mcfg: ModelConfig, tokenizer) -> tuple[int, ...]:
    """Every id that ends a response: the tokenizer's EOS first, then the checkpoint's
    generation_config EOS ids (e.g. Qwen's <|im_end|> and <|endoftext|>)."""
    ids = [tokenizer.eos_token_id, *mcfg.stop_ids]
    return tuple(dict.fromkeys(int(i) for i in ids if i is not None))


def prepare(config, task, workdir: str, mesh, say=print, *,
            allow_config_change: bool = False) -> Policy:
    """The policy a run starts from, before its warm start. The cached warm start
    (`warmstart.cache_dir`, default DIR/warmstart; warmstart.cached) is loaded if there is one;
    otherwise the checkpoint `model.path` or a random init (seeded by the warm-start seed,
    `warmstart.seed`, -1 = the run's seed), which the caller passes to `warmstart.apply`. Every
    process calls this. A Hugging Face id in `model.path` (or `task.path`, `eval.sets`) is
    resolved through the hub's cache, and the commit each resolved to is recorded in
    DIR/hub_sources.json (frontier_rl/hub.py)."""
    primary = distributed.is_primary()
    ws_dir = warmstart.cached(config, workdir, allow_config_change)
    if ws_dir:
        graphdef, params, mcfg = load(ws_dir, config, mesh)
        tokenizer = hf.load_tokenizer(ws_dir)
        say(f"warm start: loaded cached policy from {ws_dir}")
    elif config.model.path:
        model_dir = hub.model_dir(config.model.path)
        graphdef, params, mcfg = load(model_dir, config, mesh)
        tokenizer = hf.load_tokenizer(model_dir)
    else:
        tokenizer = tasks.build_char_tokenizer(alphabet(task))
        mcfg = random_config(config, tokenizer)
        graphdef, params = random_params(mcfg, warmstart.seed_of(config), mesh)
    say(f"policy: {mcfg.family}, {mcfg.num_params():,} parameters, vocab {mcfg.vocab_size}, "
        f"params {mcfg.param_dtype}, compute {mcfg.dtype}, mesh {dict(mesh.shape)}")
    if primary:
        if jax.process_count() > 1:
            log.warning("%s", distributed.describe(mesh))
        write_spec(workdir, mcfg, tokenizer)
    # every process resolves the ids (a missing one stops them all); process 0 records them
    hub.write_record(workdir, config, say, write=primary)
    return Policy(graphdef, params, mcfg, tokenizer, {}, from_cache=bool(ws_dir))


def restore(workdir: str, step: int | None = None, config=None):
    """(graphdef, params, ModelConfig, tokenizer, step) of checkpoint `step` (None = the
    newest) of the run in `workdir`; `config` defaults to the run's config.json."""
    from frontier_rl.rl.train_step import OptimConfig, make_optimizer
    from frontier_rl.run import checkpoint

    mcfg, tokenizer = read_spec(workdir)
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
        target = {"params": flat(params), "opt_state": flat(opt_state)}
        step, state, _ = ckpt.restore_step(step if step is not None else steps[-1], target)
    finally:
        ckpt.close()
    return graphdef, unflat(params, state["params"]), mcfg, tokenizer, step


def export_run(workdir: str, out: str, step: int | None = None) -> str:
    """Exports checkpoint `step` (None = the newest) of the run in `workdir` to `out` as a
    Hugging Face checkpoint directory (export.py)."""
    if not out:
        raise ValueError("--out is required (the directory to write the checkpoint to)")
    graphdef, params, mcfg, tokenizer, _ = restore(os.path.abspath(workdir), step)
    return export.export_params(graphdef, params, mcfg, tokenizer, out)
