"""Named architectures of the policies the papers train, for random-init runs at real sizes.

Each preset is the exact shape of the released checkpoint's `config.json` (hidden sizes, heads,
vocabulary, RoPE, tied embeddings) and the EOS ids of its `generation_config.json`; weights are
random. They size the fit check (`frontier-rl fit`), the benches and `configs/scale.py`; a run
that wants the real weights sets `model.path` to the checkpoint directory instead.
"""

from __future__ import annotations

from typing import Any

from frontier_rl.models.config import ModelConfig, family_preset

_QWEN25 = dict(family="qwen2", rms_norm_eps=1e-6, bos_token_id=151643, eos_token_id=151643,
               eos_token_ids=(151643,))
_QWEN3 = dict(family="qwen3", vocab_size=151936, head_dim=128, rope_theta=1_000_000.0,
              rms_norm_eps=1e-6, max_position_embeddings=40960, bos_token_id=151643,
              eos_token_id=151645, eos_token_ids=(151645, 151643))

PRESETS: dict[str, dict[str, Any]] = {
    "qwen2.5-0.5b": dict(
        _QWEN25, vocab_size=151936, hidden_size=896, intermediate_size=4864, num_layers=24,
        num_heads=14, num_kv_heads=2, head_dim=64, rope_theta=1_000_000.0,
        max_position_embeddings=32768, tie_word_embeddings=True),
    "qwen2.5-math-1.5b": dict(
        _QWEN25, vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_layers=28,
        num_heads=12, num_kv_heads=2, head_dim=128, rope_theta=10_000.0,
        max_position_embeddings=4096, tie_word_embeddings=True),
    "qwen2.5-math-7b": dict(
        _QWEN25, vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_layers=28,
        num_heads=28, num_kv_heads=4, head_dim=128, rope_theta=10_000.0,
        max_position_embeddings=4096, tie_word_embeddings=False),
    "qwen3-0.6b": dict(
        _QWEN3, hidden_size=1024, intermediate_size=3072, num_layers=28, num_heads=16,
        num_kv_heads=8, tie_word_embeddings=True),
    "qwen3-1.7b": dict(
        _QWEN3, hidden_size=2048, intermediate_size=6144, num_layers=28, num_heads=16,
        num_kv_heads=8, tie_word_embeddings=True),
    "qwen3-4b": dict(
        _QWEN3, hidden_size=2560, intermediate_size=9728, num_layers=36, num_heads=32,
        num_kv_heads=8, tie_word_embeddings=True),
    "qwen3-8b": dict(
        _QWEN3, hidden_size=4096, intermediate_size=12288, num_layers=36, num_heads=32,
        num_kv_heads=8, tie_word_embeddings=False),
    "llama3.2-1b": dict(
        family="llama", vocab_size=128256, hidden_size=2048, intermediate_size=8192,
        num_layers=16, num_heads=32, num_kv_heads=8, head_dim=64, rope_theta=500_000.0,
        rms_norm_eps=1e-5, max_position_embeddings=131072, tie_word_embeddings=True,
        rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        bos_token_id=128000, eos_token_id=128001, eos_token_ids=(128001, 128008, 128009)),
}


def preset_config(name: str, **overrides: Any) -> ModelConfig:
    """The ModelConfig of preset `name`; `overrides` set runtime fields (dtype, remat, ...)."""
    if name not in PRESETS:
        raise ValueError(f"model preset {name!r} is not one of {sorted(PRESETS)}")
    return family_preset(**{**PRESETS[name], **overrides})
