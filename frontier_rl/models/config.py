"""Decoder-only LM hyper-parameters (Qwen3, Qwen2/2.5 and Llama share one config).

The three families differ only in two switches (`qk_norm`, `qkv_bias`) plus the Hugging
Face names written on export (`family`), so one frozen dataclass describes all of them.
Validation happens eagerly in `__post_init__` so that a bad config fails at construction
with a message naming the field, not deep inside a jitted forward pass.

Besides the architecture, a few fields are runtime knobs that change how the same weights are
stored and computed but not what the checkpoint is: `param_dtype` (master weights, hence
optimizer state), `attention` (kernel), `remat` and `scan_layers` (memory and compile time).
They are never exported to config.json and a loaded config leaves them at their defaults.
"""

from __future__ import annotations

import dataclasses
from typing import Any

FAMILIES = ("qwen3", "qwen2", "llama")
DTYPES = ("float32", "bfloat16")
# "auto" = cuDNN flash attention on a GPU in 16-bit compute, XLA otherwise (transformer.py).
ATTENTIONS = ("xla", "cudnn", "auto")
REMATS = ("none", "full", "dots")
# RoPE variants implemented in transformer.py; others (yarn, dynamic, ...) are rejected.
ROPE_TYPES = ("default", "linear", "llama3")
_ROPE_KEYS = {
    "default": (),
    "linear": ("factor",),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor",
               "original_max_position_embeddings"),
}
# Architecture switches that the Hugging Face modelling code hard-wires per family.
_FAMILY_FLAGS = {
    "qwen3": {"qk_norm": True, "qkv_bias": False},
    "qwen2": {"qk_norm": False, "qkv_bias": True},
    "llama": {"qk_norm": False, "qkv_bias": False},
}
_POSITIVE_INTS = ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads",
                  "num_kv_heads", "head_dim", "max_position_embeddings")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Shapes and switches of a Qwen3 / Qwen2 / Llama style decoder-only LM."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = True
    qk_norm: bool = False  # Qwen3: RMSNorm on q and k per head before rope.
    qkv_bias: bool = False  # Qwen2/2.5: bias on the q/k/v projections.
    family: str = "qwen3"  # "qwen3" | "qwen2" | "llama": HF model_type/architectures on export.
    max_position_embeddings: int = 4096
    rope_scaling: dict | None = None  # HF rope parameters without rope_theta; None = default.
    # Compute dtype (activations; weights are cast to it inside each module's forward).
    dtype: str = "float32"
    # Dtype the parameters are created and stored in: the master weights, hence Adam's state.
    # bfloat16 master weights lose updates below ~2^-8 of the weight (an lr-1e-6 step).
    param_dtype: str = "float32"
    attention: str = "xla"  # "xla" | "cudnn" | "auto" (jax.nn.dot_product_attention backend)
    # On the XLA backend, queries in blocks of this many positions (0 = all at once), each
    # block's [rows, heads, block, keys] scores recomputed in the backward pass: memory linear
    # in the sequence, not quadratic (cuDNN's flash attention needs none of this).
    attention_chunk: int = 0
    # Per decoder layer in the backward pass: "none" keeps all activations, "full" recomputes
    # the layer from its input, "dots" keeps only the projection matmuls' outputs.
    remat: str = "none"
    scan_layers: bool = False  # one lax.scan over the layers: one compiled layer, not L
    bos_token_id: int | None = None
    eos_token_id: int | None = None  # one of eos_token_ids when those are set (the first)
    # Every id that ends a sequence (generation_config.json's eos_token_id may be a list);
    # () = just eos_token_id. Read them through `cfg.stop_ids`.
    eos_token_ids: tuple[int, ...] = ()
    pad_token_id: int | None = None

    def __post_init__(self):
        for name in _POSITIVE_INTS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"ModelConfig.{name}={value!r} must be a positive int")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"ModelConfig.num_heads={self.num_heads} is not a multiple of "
                             f"num_kv_heads={self.num_kv_heads}")
        if self.head_dim % 2:
            raise ValueError(f"ModelConfig.head_dim={self.head_dim} must be even (rotary "
                             "embeddings rotate pairs of dimensions)")
        for name in ("rope_theta", "rms_norm_eps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"ModelConfig.{name}={value!r} must be a positive number")
        if self.family not in FAMILIES:
            raise ValueError(f"ModelConfig.family={self.family!r} is not one of {FAMILIES}")
        for name, allowed in (("dtype", DTYPES), ("param_dtype", DTYPES),
                              ("attention", ATTENTIONS), ("remat", REMATS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"ModelConfig.{name}={getattr(self, name)!r} is not one of "
                                 f"{allowed}")
        if isinstance(self.attention_chunk, bool) or not isinstance(self.attention_chunk, int) \
                or self.attention_chunk < 0:
            raise ValueError(f"ModelConfig.attention_chunk={self.attention_chunk!r} must be an "
                             "int >= 0")
        if not isinstance(self.scan_layers, bool):
            raise ValueError(f"ModelConfig.scan_layers={self.scan_layers!r} must be a bool")
        for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
            if not _is_token_id(getattr(self, name), allow_none=True):
                raise ValueError(f"ModelConfig.{name}={getattr(self, name)!r} must be None or "
                                 "an int >= 0")
        self._check_eos_token_ids()
        _check_rope_scaling(self.rope_scaling)

    def _check_eos_token_ids(self) -> None:
        ids = self.eos_token_ids
        if not isinstance(ids, (tuple, list)) or not all(_is_token_id(i) for i in ids):
            raise ValueError(f"ModelConfig.eos_token_ids={ids!r} must be a tuple of ints >= 0")
        # A list from a JSON config becomes a tuple, so that equality and hashing agree.
        object.__setattr__(self, "eos_token_ids", tuple(ids))
        if ids and self.eos_token_id is None:
            object.__setattr__(self, "eos_token_id", ids[0])
        elif ids and self.eos_token_id not in ids:
            raise ValueError(f"ModelConfig.eos_token_id={self.eos_token_id} is not one of "
                             f"eos_token_ids={tuple(ids)}")

    def __hash__(self):
        # The generated hash would fail on the `rope_scaling` dict, and configs are handy as
        # static jit arguments, so hash a frozen view of every field instead.
        return hash(tuple(_freeze(getattr(self, f.name)) for f in dataclasses.fields(self)))

    @property
    def num_groups(self) -> int:
        """Query heads per key/value head (GQA group size)."""
        return self.num_heads // self.num_kv_heads

    @property
    def stop_ids(self) -> tuple[int, ...]:
        """Every token id that ends a sequence: eos_token_ids, else (eos_token_id,), else ()."""
        if self.eos_token_ids:
            return self.eos_token_ids
        return () if self.eos_token_id is None else (self.eos_token_id,)

    def num_params(self, include_embeddings: bool = True) -> int:
        """Analytic parameter count; `include_embeddings=False` drops embed_tokens and lm_head."""
        h = self.hidden_size
        q, kv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        attn = h * q + 2 * h * kv + q * h
        if self.qkv_bias:
            attn += q + 2 * kv
        if self.qk_norm:
            attn += 2 * self.head_dim
        mlp = 3 * h * self.intermediate_size
        per_layer = attn + mlp + 2 * h  # + input_layernorm and post_attention_layernorm.
        total = self.num_layers * per_layer + h  # + final norm.
        if include_embeddings:
            total += self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return total


def family_preset(family: str, **overrides: Any) -> ModelConfig:
    """A ModelConfig with `family`'s qk_norm/qkv_bias switches; sizes come from `overrides`."""
    if family not in _FAMILY_FLAGS:
        raise ValueError(f"family={family!r} is not one of {FAMILIES}")
    return ModelConfig(**{**_FAMILY_FLAGS[family], "family": family, **overrides})


def rope_type(cfg: ModelConfig) -> str:
    """The RoPE variant of `cfg` ("default" when rope_scaling is None)."""
    if cfg.rope_scaling is None:
        return "default"
    return cfg.rope_scaling.get("rope_type", cfg.rope_scaling.get("type", "default"))


def _check_rope_scaling(rope_scaling: dict | None) -> None:
    if rope_scaling is None:
        return
    if not isinstance(rope_scaling, dict):
        raise ValueError(f"ModelConfig.rope_scaling={rope_scaling!r} must be a dict or None")
    kind = rope_scaling.get("rope_type", rope_scaling.get("type", "default"))
    if kind not in ROPE_TYPES:
        raise ValueError(f"ModelConfig.rope_scaling has rope_type={kind!r}; supported: "
                         f"{ROPE_TYPES}")
    missing = [k for k in _ROPE_KEYS[kind] if k not in rope_scaling]
    if missing:
        raise ValueError(f"ModelConfig.rope_scaling={rope_scaling!r} lacks {missing}, needed "
                         f"by rope_type={kind!r}")


def _is_token_id(x: Any, allow_none: bool = False) -> bool:
    if x is None:
        return allow_none
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _freeze(x: Any) -> Any:
    if isinstance(x, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in x.items()))
    if isinstance(x, list):
        return tuple(_freeze(v) for v in x)
    return x
