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


def config_section():
    """`model`: the policy. With `path` set, a Hugging Face directory (config.json +
    *.safetensors + tokenizer) is loaded; otherwise a random model of this shape is built."""
    from frontier_rl.models import presets
    from frontier_rl.run import fields

    def heads(cfg) -> None:
        fields.check(cfg, "model.num_heads", lambda x: x % cfg.model.num_kv_heads == 0,
                     f"a multiple of model.num_kv_heads={cfg.model.num_kv_heads}")

    s = (fields.Section("model", config_section.__doc__)
         .field("path", "")
         .field("family", "qwen3", fields.one_of("qwen3", "qwen2", "llama"),
                "'qwen3', 'qwen2' or 'llama'"))
    for name, default in (("hidden_size", 64), ("intermediate_size", 256), ("num_layers", 2),
                          ("num_heads", 4), ("num_kv_heads", 2), ("head_dim", 16)):
        s.field(name, default, fields.pos_int, "an integer >= 1")
    return (s.rule(heads)
            .field("rope_theta", 10000.0)
            .field("tie_word_embeddings", True)
            # A named architecture (models/presets.py: "qwen2.5-math-1.5b", "qwen3-8b", ...)
            # replaces the shape fields above, with the real vocabulary size (random init;
            # configs/scale.py).
            .field("preset", "", lambda x: x == "" or x in presets.PRESETS,
                   f"'' or one of {sorted(presets.PRESETS)}")
            # Precision: master parameters and optimizer state in `param_dtype`; the forward
            # pass in `dtype` ("auto" = float32 for a random model, the stored dtype of a
            # loaded checkpoint: bfloat16 for every Qwen release). bfloat16 master weights
            # would lose lr-1e-6 updates.
            .field("param_dtype", "float32", fields.one_of("float32", "bfloat16"),
                   "'float32' or 'bfloat16'")
            .field("dtype", "auto", fields.one_of("auto", "float32", "bfloat16"),
                   "'auto', 'float32' or 'bfloat16'")
            # Memory: attention kernel ("xla"; "cudnn" = flash attention on NVIDIA GPUs;
            # "auto" picks cudnn on a GPU in 16-bit compute), activation rematerialisation per
            # layer ("none", "full", "dots" = keep matmul outputs), a lax.scan over the layers
            # (one compiled layer), and the sequence chunk in which log-probs/entropies are
            # computed from the final hidden states (so no [rows, L, vocab] float32 array is
            # ever built).
            .field("attention", "xla", fields.one_of("auto", "xla", "cudnn"),
                   "'auto', 'xla' or 'cudnn'")
            # query positions per attention block on XLA; 0 = all at once
            .field("attention_chunk", 0, fields.nonneg_int,
                   "an integer >= 0 (query positions per block; 0 = all at once)")
            .field("remat", "none", fields.one_of("none", "full", "dots"),
                   "'none', 'full' or 'dots'")
            .field("scan_layers", False, fields.boolean, "True or False")
            .field("logits_chunk", 512, fields.nonneg_int,
                   "an integer >= 0 (0 = the whole sequence at once)"))
