"""Hugging Face checkpoint and tokenizer I/O for the NNX Transformer (local paths only).

A checkpoint directory is `config.json` plus `model.safetensors` (or shards listed in
`model.safetensors.index.json`). Parameter names map one-to-one onto HF names because the
module attributes mirror them: `layers/3/self_attn/q_proj/kernel` <->
`model.layers.3.self_attn.q_proj.weight` (transposed: HF Linear stores [out, in]).

config.json is written for both transformers 4.x (`rope_theta`, `rope_scaling`,
`torch_dtype`) and 5.x (`rope_parameters`, `dtype`); reading accepts either spelling.
Failures raise one-line errors (missing files, unsupported architecture, tensor names or
shapes that do not match) rather than a traceback from deep inside a loader.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from safetensors import safe_open
from safetensors.numpy import save_file

from frontier_rl.models.config import ModelConfig, family_preset, rope_type
from frontier_rl.models.transformer import Transformer

_ARCHITECTURES = {
    "qwen3": "Qwen3ForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "llama": "LlamaForCausalLM",
}
# HF class defaults for keys a config.json may omit.
_DEFAULT_MAX_POSITIONS = {"qwen3": 32768, "qwen2": 32768, "llama": 2048}
_WEIGHTS_NAME = "model.safetensors"
_INDEX_NAME = "model.safetensors.index.json"
_CONFIG_NAME = "config.json"


def config_to_hf(cfg: ModelConfig) -> dict[str, Any]:
    """The HF config.json dict for `cfg` (raises if HF cannot express the architecture)."""
    expected = family_preset(cfg.family, **_sizes(cfg))
    for flag in ("qk_norm", "qkv_bias"):
        if getattr(cfg, flag) != getattr(expected, flag):
            raise ValueError(f"ModelConfig.{flag}={getattr(cfg, flag)} cannot be exported as "
                             f"family={cfg.family!r} (HF {_ARCHITECTURES[cfg.family]} has "
                             f"{flag}={getattr(expected, flag)})")
    rope_scaling = None
    if rope_type(cfg) != "default":
        rope_scaling = {k: v for k, v in cfg.rope_scaling.items() if k != "type"}
        rope_scaling["rope_type"] = rope_type(cfg)
    d = {
        "architectures": [_ARCHITECTURES[cfg.family]],
        "model_type": cfg.family,
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": cfg.max_position_embeddings,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta,  # transformers 4.x
        "rope_scaling": rope_scaling,  # transformers 4.x
        "rope_parameters": {"rope_type": "default", **(rope_scaling or {}),
                            "rope_theta": cfg.rope_theta},  # transformers 5.x
        "tie_word_embeddings": cfg.tie_word_embeddings,
        "torch_dtype": cfg.dtype,  # transformers 4.x
        "dtype": cfg.dtype,  # transformers 5.x
        "bos_token_id": cfg.bos_token_id,
        "eos_token_id": cfg.eos_token_id,
        "pad_token_id": cfg.pad_token_id,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "use_cache": True,
    }
    if cfg.family == "llama":
        d.update(attention_bias=False, mlp_bias=False, pretraining_tp=1)
    else:
        d.update(use_sliding_window=False, sliding_window=None,
                 max_window_layers=cfg.num_layers)
        if cfg.family == "qwen3":
            d.update(attention_bias=False)
    return d


def config_from_hf(d: dict[str, Any]) -> ModelConfig:
    """A ModelConfig from an HF config.json dict (qwen3 / qwen2 / llama)."""
    family = d.get("model_type")
    archs = d.get("architectures") or []
    if family is None:
        by_arch = {v: k for k, v in _ARCHITECTURES.items()}
        family = next((by_arch[a] for a in archs if a in by_arch), None)
    if family not in _ARCHITECTURES:
        raise ValueError(f"unsupported model_type={d.get('model_type')!r} "
                         f"(architectures={archs}); supported: {sorted(_ARCHITECTURES)}")

    def unsupported(what: str):
        return ValueError(f"unsupported {family} checkpoint: {what}")

    if d.get("hidden_act", "silu") != "silu":
        raise unsupported(f"hidden_act={d['hidden_act']!r} (only 'silu')")
    if d.get("attention_bias") and family != "qwen2":
        raise unsupported("attention_bias=true (o_proj bias is not implemented)")
    if d.get("mlp_bias"):
        raise unsupported("mlp_bias=true")
    if d.get("use_sliding_window"):
        raise unsupported("use_sliding_window=true")
    layer_types = set(d.get("layer_types") or ["full_attention"])
    if layer_types != {"full_attention"}:
        raise unsupported(f"layer_types={sorted(layer_types)} (only full_attention)")

    # transformers 5.x nests RoPE settings in `rope_parameters`; 4.x uses `rope_theta` plus
    # an optional `rope_scaling` dict (whose type key was once spelled "type").
    rope = dict(d.get("rope_parameters") or d.get("rope_scaling") or {})
    rope_theta = rope.pop("rope_theta", d.get("rope_theta", 10000.0))
    kind = rope.pop("rope_type", rope.pop("type", "default"))
    if rope.get("partial_rotary_factor", 1.0) != 1.0:
        raise unsupported(f"partial_rotary_factor={rope['partial_rotary_factor']}")
    rope.pop("partial_rotary_factor", None)
    if kind == "llama3":
        rope.setdefault("original_max_position_embeddings",
                        d.get("max_position_embeddings"))
    rope_scaling = None if kind == "default" else {"rope_type": kind, **rope}

    num_heads = d["num_attention_heads"]
    dtype = d.get("dtype") or d.get("torch_dtype") or "float32"
    # float16 checkpoints are widened to float32 (bfloat16 would lose mantissa bits).
    dtype = "bfloat16" if dtype == "bfloat16" else "float32"
    try:
        return family_preset(
            family,
            vocab_size=d["vocab_size"],
            hidden_size=d["hidden_size"],
            intermediate_size=d["intermediate_size"],
            num_layers=d["num_hidden_layers"],
            num_heads=num_heads,
            num_kv_heads=d.get("num_key_value_heads") or num_heads,
            head_dim=d.get("head_dim") or d["hidden_size"] // num_heads,
            rope_theta=float(rope_theta),
            rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),
            # Qwen2/Qwen3/Llama configs default to untied embeddings when the key is absent.
            tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
            max_position_embeddings=(d.get("max_position_embeddings")
                                     or _DEFAULT_MAX_POSITIONS[family]),
            rope_scaling=rope_scaling,
            dtype=dtype,
            bos_token_id=_token_id(d.get("bos_token_id")),
            eos_token_id=_token_id(d.get("eos_token_id")),
            pad_token_id=_token_id(d.get("pad_token_id")),
        )
    except KeyError as e:
        raise ValueError(f"HF {family} config lacks required key {e.args[0]!r}") from None


def load_pretrained(path: str | os.PathLike, dtype: str | None = None,
                    ) -> tuple[Transformer, ModelConfig]:
    """Load an HF qwen3/qwen2/llama checkpoint directory; `dtype` overrides the stored one."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"checkpoint directory {path} does not exist")
    config_path = os.path.join(path, _CONFIG_NAME)
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"no {_CONFIG_NAME} in {path} (found: {_listing(path)})")
    try:
        with open(config_path, encoding="utf-8") as f:
            hf_config = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"cannot parse {config_path}: {e}") from None
    missing_field = None
    try:
        cfg = config_from_hf(hf_config)
    except KeyError as e:  # reported after the (more basic) missing-weights check
        missing_field = e.args[0]
    if not os.path.isfile(os.path.join(path, _INDEX_NAME)) and not any(
            n.endswith(".safetensors") for n in os.listdir(path)):
        raise FileNotFoundError(f"no *.safetensors weights in {path} (found: {_listing(path)})")
    if missing_field is not None:
        raise ValueError(f"{config_path} lacks the required field {missing_field!r}")
    if dtype is not None:
        cfg = dataclasses.replace(cfg, dtype=dtype)

    tensors = _read_safetensors(path)
    wanted = _hf_layout(cfg)
    names = set(tensors)
    # Stale rotary buffers from old exports, and a redundant lm_head copy when the embeddings
    # are tied, are ignored, as transformers itself does.
    ignored = {n for n in names if n.endswith("rotary_emb.inv_freq")}
    if cfg.tie_word_embeddings:
        ignored.add("lm_head.weight")
    missing = sorted(set(wanted) - names)
    unexpected = sorted(names - set(wanted) - ignored)
    if missing or unexpected:
        raise ValueError(f"tensor names in {path} do not match {cfg.family} "
                         f"(tie_word_embeddings={cfg.tie_word_embeddings}): "
                         f"missing {_few(missing)}; unexpected {_few(unexpected)}")

    graphdef, abstract_state = nnx.split(
        nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0))))
    params = {}
    for name, (param_path, transpose, shape) in wanted.items():
        array = tensors.pop(name)
        hf_shape = shape[::-1] if transpose else shape
        if array.shape != hf_shape:
            raise ValueError(f"tensor {name} in {path} has shape {array.shape}, expected "
                             f"{hf_shape} for {cfg.family}")
        params[param_path] = jnp.asarray(array.T if transpose else array,
                                         dtype=jnp.dtype(cfg.dtype))
    nnx.replace_by_pure_dict(abstract_state, nnx.traversals.unflatten_mapping(params))
    return nnx.merge(graphdef, abstract_state), cfg


def save_pretrained(model: Transformer, cfg: ModelConfig, path: str | os.PathLike) -> None:
    """Write `config.json` and `model.safetensors` loadable by transformers' from_pretrained."""
    path = os.fspath(path)
    hf_config = config_to_hf(cfg)
    wanted = _hf_layout(cfg)
    by_path = {p: (name, transpose, shape) for name, (p, transpose, shape) in wanted.items()}
    params = nnx.traversals.flatten_mapping(nnx.to_pure_dict(nnx.state(model, nnx.Param)))
    if set(params) != set(by_path):
        raise ValueError(f"model parameters do not match cfg: missing "
                         f"{_few(sorted(map(str, set(by_path) - set(params))))}, unexpected "
                         f"{_few(sorted(map(str, set(params) - set(by_path))))}")
    tensors = {}
    for param_path, value in params.items():
        name, transpose, shape = by_path[param_path]
        if value.shape != shape:
            raise ValueError(f"parameter {'/'.join(map(str, param_path))} has shape "
                             f"{value.shape}, cfg implies {shape}")
        array = np.asarray(jax.device_get(value)).astype(jnp.dtype(cfg.dtype))
        tensors[name] = np.ascontiguousarray(array.T if transpose else array)

    os.makedirs(path, exist_ok=True)
    _remove_stale_shards(path)
    with open(os.path.join(path, _CONFIG_NAME), "w", encoding="utf-8") as f:
        json.dump(hf_config, f, indent=2, sort_keys=True)
        f.write("\n")
    save_file(tensors, os.path.join(path, _WEIGHTS_NAME), metadata={"format": "pt"})


def load_tokenizer(path: str | os.PathLike):
    """A transformers PreTrainedTokenizerFast from a local directory holding tokenizer.json."""
    from transformers import PreTrainedTokenizerFast  # Heavy import, only when needed.

    path = os.fspath(path)
    # Check locally first: from_pretrained would read a missing path as a Hub repo id.
    if not os.path.isdir(path):
        raise FileNotFoundError(f"tokenizer directory {path} does not exist")
    if not os.path.isfile(os.path.join(path, "tokenizer.json")):
        raise FileNotFoundError(f"no tokenizer.json in {path} (found: {_listing(path)})")
    return PreTrainedTokenizerFast.from_pretrained(path, local_files_only=True)


def save_tokenizer(tok, path: str | os.PathLike) -> None:
    """Save a transformers tokenizer to a local directory (tokenizer.json and friends)."""
    tok.save_pretrained(os.fspath(path))


def _hf_layout(cfg: ModelConfig) -> dict[str, tuple[tuple, bool, tuple[int, ...]]]:
    """HF tensor name -> (our parameter path, transpose?, our shape), for every parameter."""
    abstract = nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0)))
    flat = nnx.traversals.flatten_mapping(nnx.to_pure_dict(nnx.state(abstract, nnx.Param)))
    layout = {}
    for param_path, value in flat.items():
        *modules, leaf = (str(p) for p in param_path)
        prefix = [] if modules[0] == "lm_head" else ["model"]
        name = ".".join(prefix + modules + ["bias" if leaf == "bias" else "weight"])
        layout[name] = (param_path, leaf == "kernel", tuple(value.shape))
    return layout


def _read_safetensors(path: str) -> dict[str, np.ndarray]:
    index_path = os.path.join(path, _INDEX_NAME)
    if os.path.isfile(index_path):
        with open(index_path, encoding="utf-8") as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = sorted(n for n in os.listdir(path) if n.endswith(".safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors weights in {path} (found: {_listing(path)})")
    tensors = {}
    for name in files:
        file_path = os.path.join(path, name)
        if not os.path.isfile(file_path):
            raise FileNotFoundError(f"{_INDEX_NAME} in {path} lists missing shard {name}")
        with safe_open(file_path, framework="numpy") as f:
            for key in f.keys():
                tensors[key] = f.get_tensor(key)
    return tensors


def _remove_stale_shards(path: str) -> None:
    # A leftover shard index would make loaders ignore the model.safetensors we write.
    index_path = os.path.join(path, _INDEX_NAME)
    if not os.path.isfile(index_path):
        return
    with open(index_path, encoding="utf-8") as f:
        shards = set(json.load(f).get("weight_map", {}).values())
    for name in shards:
        shard_path = os.path.join(path, os.path.basename(name))
        if os.path.isfile(shard_path):
            os.remove(shard_path)
    os.remove(index_path)


def _sizes(cfg: ModelConfig) -> dict[str, Any]:
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)
            if f.name not in ("qk_norm", "qkv_bias", "family")}


def _token_id(x: Any) -> int | None:
    # Some configs list several EOS ids (e.g. Llama 3.1); ModelConfig keeps the first.
    if isinstance(x, (list, tuple)):
        return int(x[0]) if x else None
    return None if x is None else int(x)


def _listing(path: str, limit: int = 8) -> str:
    names = sorted(os.listdir(path))
    shown = ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")
    return shown or "nothing"


def _few(names: list[str], limit: int = 5) -> str:
    if not names:
        return "none"
    return ", ".join(names[:limit]) + (f" (+{len(names) - limit} more)" if len(names) > limit
                                       else "")
