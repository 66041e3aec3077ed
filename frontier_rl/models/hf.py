"""Hugging Face checkpoint and tokenizer I/O for the NNX Transformer (local paths only).

A checkpoint directory is `config.json` plus `model.safetensors` (or shards listed in
`model.safetensors.index.json`), and optionally `generation_config.json`, whose EOS ids are
merged into the config's. Parameter names map one-to-one onto HF names because the module
attributes mirror them: `layers/3/self_attn/q_proj/kernel` <->
`model.layers.3.self_attn.q_proj.weight` (transposed: HF Linear stores [out, in]).

Real sizes: loading reads one tensor at a time from the files and, given `shardings`, puts it
straight into its sharding, so no full copy of the model lands on one device; saving gathers
one tensor at a time and writes shards of at most `max_shard_bytes`, as transformers does.
A loaded bfloat16 checkpoint computes in bfloat16 (`cfg.dtype`) on float32 master weights
(`param_dtype`), the precision an RL update at lr 1e-6 needs.

config.json is written for both transformers 4.x (`rope_theta`, `rope_scaling`,
`torch_dtype`) and 5.x (`rope_parameters`, `dtype`); reading accepts either spelling.
Failures raise one-line errors (missing files, unsupported architecture, tensor names or
shapes that do not match) rather than a traceback from deep inside a loader.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from safetensors import safe_open
from safetensors.numpy import save_file

from frontier_rl.models.config import DTYPES, ModelConfig, family_preset, rope_type
from frontier_rl.models.transformer import Transformer, abstract_params

_ARCHITECTURES = {
    "qwen3": "Qwen3ForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "llama": "LlamaForCausalLM",
}
# HF class defaults for keys a config.json may omit.
_DEFAULT_MAX_POSITIONS = {"qwen3": 32768, "qwen2": 32768, "llama": 2048}
_WEIGHTS_NAME = "model.safetensors"
_INDEX_NAME = "model.safetensors.index.json"
_SHARD_NAME = "model-{:05d}-of-{:05d}.safetensors"
_SHARD_PATTERN = re.compile(r"model-\d{5}-of-\d{5}\.safetensors")
_CONFIG_NAME = "config.json"
_GENERATION_CONFIG_NAME = "generation_config.json"


def config_to_hf(cfg: ModelConfig) -> dict[str, Any]:
    """The HF config.json dict for `cfg` (raises if HF cannot express the architecture).

    Runtime fields (param_dtype, attention, remat, scan_layers) are not part of it; `dtype`
    is written as the stored tensors' dtype. Several EOS ids are written as a list.
    """
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
        "eos_token_id": _eos_json(cfg),
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
    """A ModelConfig from an HF config.json dict (qwen3 / qwen2 / llama).

    `dtype` is the stored dtype (the compute dtype of a loaded model); runtime fields keep
    their defaults. A list of EOS ids sets eos_token_ids, its first eos_token_id.
    """
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
            eos_token_ids=(_token_ids(d.get("eos_token_id"))
                           if isinstance(d.get("eos_token_id"), (list, tuple)) else ()),
            pad_token_id=_token_id(d.get("pad_token_id")),
        )
    except KeyError as e:
        raise ValueError(f"HF {family} config lacks required key {e.args[0]!r}") from None


def load_pretrained(path: str | os.PathLike, dtype: str | None = None,
                    param_dtype: str = "float32",
                    shardings: Callable[[nnx.State], Any] | None = None,
                    ) -> tuple[Transformer, ModelConfig]:
    """Load an HF qwen3/qwen2/llama checkpoint directory.

    The compute dtype is the stored one ("bfloat16" for bf16 checkpoints, else "float32")
    unless `dtype` overrides it; parameters are created in `param_dtype`. `shardings` maps
    the abstract parameter state (an nnx.State of ShapeDtypeStructs) to a matching pytree of
    jax.sharding.Sharding, e.g. `lambda p: sharding.param_shardings(p, mesh)`; each tensor is
    then read on its own and placed straight into its sharding. Without it, parameters go to
    the default device.
    """
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"checkpoint directory {path} does not exist")
    config_path = os.path.join(path, _CONFIG_NAME)
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"no {_CONFIG_NAME} in {path} (found: {_listing(path)})")
    hf_config = _read_json(config_path)
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
    cfg = dataclasses.replace(cfg, dtype=cfg.dtype if dtype is None else dtype,
                              param_dtype=param_dtype)
    cfg = _merge_generation_eos(cfg, path)

    graphdef, abstract = abstract_params(cfg)
    placement = {} if shardings is None else _sharding_by_path(shardings(abstract), abstract)
    wanted = _hf_layout(cfg)
    with _open_safetensors(path) as files:
        names = set(files)
        # Stale rotary buffers from old exports, and a redundant lm_head copy when the
        # embeddings are tied, are ignored, as transformers itself does.
        ignored = {n for n in names if n.endswith("rotary_emb.inv_freq")}
        if cfg.tie_word_embeddings:
            ignored.add("lm_head.weight")
        missing = sorted(set(wanted) - names)
        unexpected = sorted(names - set(wanted) - ignored)
        if missing or unexpected:
            raise ValueError(f"tensor names in {path} do not match {cfg.family} "
                             f"(tie_word_embeddings={cfg.tie_word_embeddings}): "
                             f"missing {_few(missing)}; unexpected {_few(unexpected)}")
        # Every shape is checked from the file headers before any tensor is read.
        for name, (_, transpose, shape) in wanted.items():
            stored = tuple(files[name].get_slice(name).get_shape())
            if stored != (shape[::-1] if transpose else shape):
                raise ValueError(f"tensor {name} in {path} has shape {stored}, expected "
                                 f"{shape[::-1] if transpose else shape} for {cfg.family}")
        params = {}
        for name, (param_path, transpose, _) in wanted.items():
            array = files[name].get_tensor(name)
            array = (array.T if transpose else array).astype(jnp.dtype(param_dtype))
            if param_path in placement:
                # Each device receives only its own slice of the host tensor.
                params[param_path] = jax.make_array_from_callback(
                    array.shape, placement[param_path], lambda index, a=array: a[index])
            else:
                params[param_path] = jnp.asarray(array)
    nnx.replace_by_pure_dict(abstract, nnx.traversals.unflatten_mapping(params))
    return nnx.merge(graphdef, abstract), cfg


def save_pretrained(model: Transformer, cfg: ModelConfig, path: str | os.PathLike, *,
                    dtype: str | None = None, max_shard_bytes: int = 4 * 2**30,
                    device_cast: bool = True, timings: dict[str, float] | None = None) -> None:
    """Write a checkpoint directory loadable by transformers' from_pretrained.

    Tensors are written in `dtype` (default cfg.dtype, the compute dtype: a bfloat16 run
    exports bfloat16). Up to `max_shard_bytes` they go into one `model.safetensors`; beyond
    it into `model-0000k-of-0000N.safetensors` shards listed in `model.safetensors.index.json`.
    Sharded arrays are gathered to the host one tensor at a time, so the host holds at most
    one shard's tensors. Weights of an earlier save in `path` are removed first.

    With `device_cast` (the default) a jax.Array is cast to `dtype` (and transposed to HF's
    layout) where it lives, by a jitted cast that keeps its sharding, so the device->host copy
    moves 16-bit weights for a bfloat16 export, in groups of at most _CAST_GROUP_BYTES of device
    memory; the files are byte-identical to the host cast's (`device_cast=False`: copy the
    master weights, then cast in numpy), both rounding to nearest even. `timings`, if given,
    gets the seconds spent in "host_copy" (cast + device->host copy) and "write" (the files)
    added to it.
    """
    path = os.fspath(path)
    dtype = cfg.dtype if dtype is None else dtype
    if dtype not in DTYPES:
        raise ValueError(f"save_pretrained: dtype={dtype!r} is not one of {DTYPES}")
    if max_shard_bytes <= 0:
        raise ValueError(f"save_pretrained: max_shard_bytes={max_shard_bytes} must be > 0")
    hf_config = {**config_to_hf(cfg), "torch_dtype": dtype, "dtype": dtype}
    wanted = _hf_layout(cfg)
    by_path = {p: (name, transpose, shape) for name, (p, transpose, shape) in wanted.items()}
    params = nnx.traversals.flatten_mapping(nnx.to_pure_dict(nnx.state(model, nnx.Param)))
    if set(params) != set(by_path):
        raise ValueError(f"model parameters do not match cfg: missing "
                         f"{_few(sorted(map(str, set(by_path) - set(params))))}, unexpected "
                         f"{_few(sorted(map(str, set(params) - set(by_path))))}")
    for param_path, value in params.items():
        if value.shape != by_path[param_path][2]:
            raise ValueError(f"parameter {'/'.join(map(str, param_path))} has shape "
                             f"{value.shape}, cfg implies {by_path[param_path][2]}")

    itemsize = jnp.dtype(dtype).itemsize
    shards, size = [[]], 0
    for param_path, value in params.items():
        nbytes = value.size * itemsize
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(param_path)
        size += nbytes

    clock = {"host_copy": 0.0, "write": 0.0}

    def host_tensors(paths: list[tuple]) -> dict[str, np.ndarray]:
        t0 = time.perf_counter()
        tensors = {}
        if device_cast:
            # Cast (and transpose) on the devices a group at a time, then one device_get per
            # group, which starts every array's host copy before waiting on the first.
            group: list[tuple[str, jax.Array]] = []
            size = 0

            def flush():
                for (name, _), host in zip(group, jax.device_get([a for _, a in group]),
                                           strict=True):
                    tensors[name] = np.ascontiguousarray(host)
                group.clear()

            for param_path in paths:
                name, transpose, _ = by_path[param_path]
                value = params[param_path]
                if isinstance(value, jax.Array):
                    group.append((name, _export_cast(value, jnp.dtype(dtype), transpose)))
                    size += value.size * itemsize
                else:  # already on the host
                    array = np.asarray(value).astype(jnp.dtype(dtype))
                    tensors[name] = np.ascontiguousarray(array.T if transpose else array)
                if size >= _CAST_GROUP_BYTES:
                    flush()
                    size = 0
            flush()
            tensors = {by_path[p][0]: tensors[by_path[p][0]] for p in paths}  # the file order
        else:
            for param_path in paths:
                name, transpose, _ = by_path[param_path]
                array = np.asarray(jax.device_get(params[param_path])).astype(jnp.dtype(dtype))
                tensors[name] = np.ascontiguousarray(array.T if transpose else array)
        clock["host_copy"] += time.perf_counter() - t0
        return tensors

    def write(tensors: dict[str, np.ndarray], file_name: str) -> None:
        t0 = time.perf_counter()
        save_file(tensors, os.path.join(path, file_name), metadata={"format": "pt"})
        clock["write"] += time.perf_counter() - t0

    t0 = time.perf_counter()
    os.makedirs(path, exist_ok=True)
    _remove_stale_shards(path)
    _write_json(os.path.join(path, _CONFIG_NAME), hf_config)
    _write_json(os.path.join(path, _GENERATION_CONFIG_NAME), {
        k: v for k, v in (("bos_token_id", cfg.bos_token_id), ("eos_token_id", _eos_json(cfg)),
                          ("pad_token_id", cfg.pad_token_id)) if v is not None})
    clock["write"] += time.perf_counter() - t0
    if len(shards) == 1:
        write(host_tensors(shards[0]), _WEIGHTS_NAME)
    else:
        weight_map = {}
        for k, paths in enumerate(shards):
            file_name = _SHARD_NAME.format(k + 1, len(shards))
            write(host_tensors(paths), file_name)
            weight_map.update({by_path[p][0]: file_name for p in paths})
        total = sum(value.size for value in params.values()) * itemsize
        t0 = time.perf_counter()
        _write_json(os.path.join(path, _INDEX_NAME), {
            "metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))})
        clock["write"] += time.perf_counter() - t0
    if timings is not None:
        for k, v in clock.items():
            timings[k] = timings.get(k, 0.0) + v


# Device memory one group of exported tensors may take at a time (beside the parameters).
_CAST_GROUP_BYTES = 512 * 2**20


@functools.partial(jax.jit, static_argnums=(1, 2))
def _export_cast(x: jax.Array, dtype, transpose: bool) -> jax.Array:
    """`x` in the export dtype and HF's layout, computed where `x` lives (jit keeps the
    sharding of an elementwise cast; the transpose permutes it)."""
    x = x.astype(dtype)
    return x.T if transpose else x


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


@functools.lru_cache(maxsize=16)
def _hf_layout(cfg: ModelConfig) -> dict[str, tuple[tuple, bool, tuple[int, ...]]]:
    """HF tensor name -> (our parameter path, transpose?, our shape), for every parameter
    (cached per config: read it, never change it)."""
    flat = nnx.traversals.flatten_mapping(nnx.to_pure_dict(abstract_params(cfg)[1]))
    layout = {}
    for param_path, value in flat.items():
        *modules, leaf = (str(p) for p in param_path)
        prefix = [] if modules[0] == "lm_head" else ["model"]
        name = ".".join(prefix + modules + ["bias" if leaf == "bias" else "weight"])
        layout[name] = (param_path, leaf == "kernel", tuple(value.shape))
    return layout


@contextlib.contextmanager
def _open_safetensors(path: str) -> Iterator[dict[str, Any]]:
    """Tensor name -> the open safetensors file holding it (headers only; nothing read)."""
    index_path = os.path.join(path, _INDEX_NAME)
    if os.path.isfile(index_path):
        files = sorted(set(_read_json(index_path)["weight_map"].values()))
    else:
        files = sorted(n for n in os.listdir(path) if n.endswith(".safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors weights in {path} (found: {_listing(path)})")
    with contextlib.ExitStack() as stack:
        handles = {}
        for name in files:
            file_path = os.path.join(path, name)
            if not os.path.isfile(file_path):
                raise FileNotFoundError(f"{_INDEX_NAME} in {path} lists missing shard {name}")
            f = stack.enter_context(safe_open(file_path, framework="numpy"))
            handles.update(dict.fromkeys(f.keys(), f))
        yield handles


def _sharding_by_path(tree: Any, abstract: nnx.State) -> dict[tuple, Any]:
    """Our parameter path -> Sharding, from a pytree shaped like the abstract state."""
    treedef = jax.tree.structure(abstract)
    try:
        leaves = treedef.flatten_up_to(tree)
    except (ValueError, TypeError) as e:
        raise ValueError(f"load_pretrained: shardings(...) must return a pytree matching the "
                         f"parameter state: {e}") from None
    bad = [x for x in leaves if not isinstance(x, jax.sharding.Sharding)]
    if bad:
        raise ValueError(f"load_pretrained: shardings(...) returned {type(bad[0]).__name__} "
                         "leaves, not jax.sharding.Sharding")
    return nnx.traversals.flatten_mapping(nnx.to_pure_dict(jax.tree.unflatten(treedef, leaves)))


def _merge_generation_eos(cfg: ModelConfig, path: str) -> ModelConfig:
    """Adds generation_config.json's EOS ids (often a list, e.g. Qwen3's <|im_end|> and
    <|endoftext|>) to the config's, which stay first."""
    gen_path = os.path.join(path, _GENERATION_CONFIG_NAME)
    if not os.path.isfile(gen_path):
        return cfg
    extra = _token_ids(_read_json(gen_path).get("eos_token_id"))
    if set(extra) <= set(cfg.stop_ids):
        return cfg
    return dataclasses.replace(cfg, eos_token_ids=tuple(dict.fromkeys(cfg.stop_ids + extra)))


def _remove_stale_shards(path: str) -> None:
    # A leftover shard index would make loaders ignore the model.safetensors we write, and a
    # leftover model.safetensors would be read beside new shards by a glob-based loader.
    index_path = os.path.join(path, _INDEX_NAME)
    stale = {_WEIGHTS_NAME} | {n for n in os.listdir(path) if _SHARD_PATTERN.fullmatch(n)}
    if os.path.isfile(index_path):
        stale |= {os.path.basename(n)
                  for n in _read_json(index_path).get("weight_map", {}).values()}
        os.remove(index_path)
    for name in stale:
        if os.path.isfile(os.path.join(path, name)):
            os.remove(os.path.join(path, name))


def _read_json(file_path: str) -> dict[str, Any]:
    try:
        with open(file_path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"cannot parse {file_path}: {e}") from None


def _write_json(file_path: str, d: dict[str, Any]) -> None:
    with open(file_path, "w", encoding="utf-8") as f:
        json.dump(d, f, indent=2, sort_keys=True)
        f.write("\n")


def _sizes(cfg: ModelConfig) -> dict[str, Any]:
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)
            if f.name not in ("qk_norm", "qkv_bias", "family")}


def _token_id(x: Any) -> int | None:
    # Some configs list several EOS ids (e.g. Llama 3.1); the single id is the first.
    if isinstance(x, (list, tuple)):
        return int(x[0]) if x else None
    return None if x is None else int(x)


def _token_ids(x: Any) -> tuple[int, ...]:
    """All ids of an HF token field (an int, a list of ints or null)."""
    if isinstance(x, (list, tuple)):
        return tuple(int(i) for i in x)
    return () if x is None else (int(x),)


def _eos_json(cfg: ModelConfig) -> int | list[int] | None:
    # A list exactly when eos_token_ids is set, so that config_from_hf restores the config.
    return list(cfg.eos_token_ids) if cfg.eos_token_ids else cfg.eos_token_id


def _listing(path: str, limit: int = 8) -> str:
    names = sorted(os.listdir(path))
    shown = ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")
    return shown or "nothing"


def _few(names: list[str], limit: int = 5) -> str:
    if not names:
        return "none"
    return ", ".join(names[:limit]) + (f" (+{len(names) - limit} more)" if len(names) > limit
                                       else "")
