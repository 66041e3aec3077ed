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
    # The other policies HIVE (App. B.1) and HeaPA (Table 1, released Qwen3 script) train; each
    # value is read from public copies of the released files, named per preset:
    # R1-Distill: config.json as copied into public repos (a C loader's field list, a Qwen2
    # loader's parse log: 28 / 1536 / 12 / 2 / 8960 / 131072 / 151936 / 1e-6 / 10000 / untied /
    # bos = eos = 151643); shapes also google/tunix qwen2 deepseek_r1_distill_qwen_1p5b. Its
    # generation_config.json was not found for the 1.5B itself: bos 151646 / eos 151643 are the
    # R1-Distill-Qwen family's (a Qwen-32B derivative's copy), so eos is checked, bos is not.
    "deepseek-r1-distill-qwen-1.5b": dict(
        _QWEN25, vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_layers=28,
        num_heads=12, num_kv_heads=2, head_dim=128, rope_theta=10_000.0,
        max_position_embeddings=131072, tie_word_embeddings=False, bos_token_id=151646),
    # Qwen3-4B-Base: config.json and generation_config.json of a public ModelScope copy
    # (Robojiang/qwen_mlsys Qwen3-4B-Base/): the Qwen3-4B shapes, context 32,768, eos 151643
    # only (a base model has no chat turn); its weight index's 8,045,591,552 bytes = 4.02B bf16.
    "qwen3-4b-base": dict(
        _QWEN3, hidden_size=2560, intermediate_size=9728, num_layers=36, num_heads=32,
        num_kv_heads=8, tie_word_embeddings=True, max_position_embeddings=32768,
        eos_token_id=151643, eos_token_ids=(151643,)),
    # Qwen3-4B-Instruct-2507 (non-thinking only, per its model card): shapes and rope_theta 5e6
    # from google/tunix qwen3 qwen3_4b_instruct_2507 and maxtext's qwen3-4b-thinking-2507.yml
    # (same architecture); context 262,144 and bos / eos 151643 / 151645 from a public copy of
    # the 2507 config.json and the card ("262,144 natively"). generation_config.json was not
    # found: the eos list (151645, 151643) is every post-trained Qwen3's, not read from this file.
    "qwen3-4b-instruct-2507": dict(
        _QWEN3, hidden_size=2560, intermediate_size=9728, num_layers=36, num_heads=32,
        num_kv_heads=8, tie_word_embeddings=True, rope_theta=5_000_000.0,
        max_position_embeddings=262144),
    # Llama-3.2-3B-Instruct: a public verbatim copy of the Llama-3.2-3B config.json (3072 / 8192
    # / 28 / 24 / 8 / 128 / 1e-5 / 500000 / tied / llama3 rope 32, 1, 4, 8192), google/tunix
    # llama3p2_3b(_instruct), the card's "3B (3.21B)" and 128k context (131072). The eos
    # list is Llama-3.1/3.2-Instruct's generation_config.json (read for Llama-3.1-8B-Instruct,
    # as the llama3.2-1b preset above); the 3B file itself was not found.
    "llama3.2-3b-instruct": dict(
        family="llama", vocab_size=128256, hidden_size=3072, intermediate_size=8192,
        num_layers=28, num_heads=24, num_kv_heads=8, head_dim=128, rope_theta=500_000.0,
        rms_norm_eps=1e-5, max_position_embeddings=131072, tie_word_embeddings=True,
        rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        bos_token_id=128000, eos_token_id=128001, eos_token_ids=(128001, 128008, 128009)),
    # Qwen2.5-7B-Instruct: maxtext checkpoint_conversion/utils/hf_model_configs.py
    # qwen25_7b_config (152064 / 3584 / 18944 / 28 / 28 / 4 / 32768 / 1e-6 / 1e6 / untied) and
    # google/tunix qwen2p5_7b_instruct; generation_config.json (bos 151643, eos [151645, 151643],
    # pad 151643) as a training log of a local copy prints it. No rope_scaling: YaRN is an
    # opt-in the card describes, not in config.json.
    "qwen2.5-7b-instruct": dict(
        _QWEN25, vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_layers=28,
        num_heads=28, num_kv_heads=4, head_dim=128, rope_theta=1_000_000.0,
        max_position_embeddings=32768, tie_word_embeddings=False, eos_token_id=151645,
        eos_token_ids=(151645, 151643), pad_token_id=151643),
}


def preset_config(name: str, **overrides: Any) -> ModelConfig:
    """The ModelConfig of preset `name`; `overrides` set runtime fields (dtype, remat, ...)."""
    if name not in PRESETS:
        raise ValueError(f"model preset {name!r} is not one of {sorted(PRESETS)}")
    return family_preset(**{**PRESETS[name], **overrides})
