"""Decoder-only LM hyper-parameters (Qwen3, Qwen2/2.5 and Llama share one config).

The three families differ only in two switches (`qk_norm`, `qkv_bias`) plus the Hugging
Face names written on export (`family`), so one frozen dataclass describes all of them.
Validation happens eagerly in `__post_init__` so that a bad config fails at construction
with a message naming the field, not deep inside a jitted forward pass.
"""

from __future__ import annotations

import dataclasses
from typing import Any

FAMILIES = ("qwen3", "qwen2", "llama")
DTYPES = ("float32", "bfloat16")
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
    dtype: str = "float32"  # Parameter and compute dtype: "float32" | "bfloat16".
    bos_token_id: int | None = None
    eos_token_id: int | None = None
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
        if self.dtype not in DTYPES:
            raise ValueError(f"ModelConfig.dtype={self.dtype!r} is not one of {DTYPES}")
        for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 0):
                raise ValueError(f"ModelConfig.{name}={value!r} must be None or an int >= 0")
        _check_rope_scaling(self.rope_scaling)

    def __hash__(self):
        # The generated hash would fail on the `rope_scaling` dict, and configs are handy as
        # static jit arguments, so hash a frozen view of every field instead.
        return hash(tuple(_freeze(getattr(self, f.name)) for f in dataclasses.fields(self)))

    @property
    def num_groups(self) -> int:
        """Query heads per key/value head (GQA group size)."""
        return self.num_heads // self.num_kv_heads

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


def _freeze(x: Any) -> Any:
    if isinstance(x, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in x.items()))
    if isinstance(x, list):
        return tuple(_freeze(v) for v in x)
    return x
