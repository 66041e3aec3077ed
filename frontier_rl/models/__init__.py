"""Policy models: a Qwen3 / Qwen2 / Llama decoder-only LM in Flax NNX, with HF checkpoint I/O.

Layer "models": may import only the base layer (frontier_rl.run, the planner's base
modules); never a task, a selector or the RL update.
"""

from frontier_rl.models.config import FAMILIES, ModelConfig, family_preset
from frontier_rl.models.hf import (
    config_from_hf,
    config_to_hf,
    load_pretrained,
    load_tokenizer,
    save_pretrained,
    save_tokenizer,
)
from frontier_rl.models.transformer import KVCache, Transformer, abstract_params, init_cache

__all__ = [
    "FAMILIES",
    "KVCache",
    "ModelConfig",
    "Transformer",
    "abstract_params",
    "config_from_hf",
    "config_to_hf",
    "family_preset",
    "init_cache",
    "load_pretrained",
    "load_tokenizer",
    "save_pretrained",
    "save_tokenizer",
]
