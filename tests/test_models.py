"""Tests for frontier_rl.models: HF parity both ways, KV-cache decoding, attention, remat and
layer scan, sharded checkpoint I/O, config and I/O errors."""

from __future__ import annotations

import dataclasses
import json
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec
from safetensors import safe_open

from frontier_rl.models import (
    ModelConfig,
    Transformer,
    config_from_hf,
    config_to_hf,
    family_preset,
    init_cache,
    load_pretrained,
    load_tokenizer,
    save_pretrained,
    save_tokenizer,
    transformer,
)

TINY = dict(vocab_size=97, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4,
            num_kv_heads=2, head_dim=16)
# (family, tie_word_embeddings): Qwen2 covers qkv bias, Llama the untied lm_head.
CASES = [("qwen3", True), ("qwen2", True), ("llama", False)]
HF_CLASSES = {
    "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM),
    "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
    "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
}


def hf_model(family: str, tie: bool, seed: int = 0):
    """A random float32 transformers model; norms and biases are perturbed off their init
    (ones / zeros) so that a mix-up of those tensors would show in the logits."""
    config_cls, model_cls = HF_CLASSES[family]
    config = config_cls(
        vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, rope_theta=1e4 + seed,
        tie_word_embeddings=tie, attn_implementation="eager")
    torch.manual_seed(seed)
    model = model_cls(config).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    return model


def perturbed_model(cfg: ModelConfig, seed: int = 0) -> Transformer:
    """A random model whose norm weights and biases are also random (not ones / zeros)."""
    model = Transformer(cfg, rngs=nnx.Rngs(seed))
    state = nnx.state(model, nnx.Param)
    flat = nnx.traversals.flatten_mapping(nnx.to_pure_dict(state))
    rng = np.random.default_rng(seed)
    for path, value in flat.items():
        if path[-1] in ("weight", "bias"):
            flat[path] = value + 0.1 * rng.standard_normal(value.shape).astype(np.float32)
    nnx.replace_by_pure_dict(state, nnx.traversals.unflatten_mapping(flat))
    nnx.update(model, state)
    return model


def same_weights(model: Transformer, cfg: ModelConfig) -> Transformer:
    """`model`'s parameters under `cfg`, which may differ from its own in runtime fields."""
    graphdef = nnx.graphdef(nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0))))
    return nnx.merge(graphdef, nnx.state(model))


def random_batch(batch: int = 3, length: int = 13, seed: int = 0):
    tokens = np.random.default_rng(seed).integers(0, 97, (batch, length))
    positions = np.broadcast_to(np.arange(length), (batch, length))
    return tokens, jnp.asarray(tokens, jnp.int32), jnp.asarray(positions, jnp.int32)


def torch_logits(model, tokens: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor(tokens)).logits.float().numpy()


@pytest.mark.parametrize("family,tie", CASES)
def test_load_hf_checkpoint_matches_transformers(tmp_path, family, tie):
    ref_model = hf_model(family, tie)
    # The untied case is written as shards with a model.safetensors.index.json.
    ref_model.save_pretrained(tmp_path, max_shard_size="100KB" if not tie else "5GB")
    assert os.path.exists(tmp_path / "model.safetensors.index.json") == (not tie)
    model, cfg = load_pretrained(tmp_path)
    assert (cfg.family, cfg.tie_word_embeddings, cfg.rope_theta) == (family, tie, 1e4)
    assert cfg.qk_norm == (family == "qwen3") and cfg.qkv_bias == (family == "qwen2")
    assert cfg.num_params() == sum(p.numel() for p in ref_model.parameters())
    np_tokens, tokens, positions = random_batch()
    logits, cache = model(tokens, positions)
    assert logits.dtype == jnp.float32 and cache is None
    np.testing.assert_allclose(logits, torch_logits(ref_model, np_tokens), atol=1e-4, rtol=0)
    # Saving over the sharded checkpoint replaces it (no stale index left to shadow it).
    save_pretrained(model, cfg, tmp_path)
    assert not [n for n in os.listdir(tmp_path) if n.startswith("model-") or "index" in n]
    np.testing.assert_array_equal(load_pretrained(tmp_path)[0](tokens, positions)[0], logits)


@pytest.mark.parametrize("family,tie", CASES)
def test_saved_checkpoint_loads_in_transformers(tmp_path, family, tie):
    cfg = family_preset(family, **TINY, tie_word_embeddings=tie, rope_theta=5e5, eos_token_id=2)
    model = perturbed_model(cfg)
    save_pretrained(model, cfg, tmp_path)
    ref_model = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path, attn_implementation="eager").float().eval()
    assert type(ref_model).__name__ == config_to_hf(cfg)["architectures"][0]
    np_tokens, tokens, positions = random_batch(seed=1)
    logits, _ = model(tokens, positions)
    np.testing.assert_allclose(logits, torch_logits(ref_model, np_tokens), atol=1e-4, rtol=0)
    # And back: our own loader reproduces the model and its config exactly.
    reloaded, cfg2 = load_pretrained(tmp_path)
    assert cfg2 == cfg
    np.testing.assert_array_equal(reloaded(tokens, positions)[0], logits)


def test_llama3_rope_scaling_matches_transformers(tmp_path):
    rope = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
    # Small theta and a context past original_max_position_embeddings so that all three
    # frequency bands (kept, interpolated, divided by factor) are exercised.
    cfg = family_preset("llama", **TINY, rope_theta=500.0, rope_scaling=rope,
                        max_position_embeddings=128)
    model = perturbed_model(cfg)
    save_pretrained(model, cfg, tmp_path)
    ref_model = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path, attn_implementation="eager").float().eval()
    np_tokens, tokens, positions = random_batch(batch=1, length=100)
    np.testing.assert_allclose(model(tokens, positions)[0], torch_logits(ref_model, np_tokens),
                               atol=1e-4, rtol=0)


@pytest.mark.parametrize("family,scan,remat", [("qwen3", False, "none"), ("qwen2", False, "none"),
                                               ("qwen3", True, "none"), ("qwen3", False, "full")])
def test_kv_cache_decoding_matches_full_forward(family, scan, remat):
    cfg = family_preset(family, **TINY)
    model = perturbed_model(cfg, seed=2)
    ref_model = model
    if scan or remat != "none":  # The same weights, as one lax.scan over the layers / remat.
        cfg = dataclasses.replace(cfg, scan_layers=scan, remat=remat)
        model = same_weights(model, cfg)
    batch, length, prompt_len, max_len = 3, 12, 5, 16
    rng = np.random.default_rng(3)
    tokens = jnp.asarray(rng.integers(0, cfg.vocab_size, (batch, length)), jnp.int32)
    # Row 1 is left-padded by 3 slots and row 2 by 1; padding slots must be invisible.
    valid = np.ones((batch, length), bool)
    valid[1, :3] = valid[2, :1] = False
    positions = jnp.asarray(np.maximum(np.cumsum(valid, axis=1) - 1, 0), jnp.int32)
    causal = np.tril(np.ones((length, length), bool))
    full_mask = jnp.asarray(causal[None] & valid[:, None, :])
    ref, _ = ref_model(tokens, positions, attn_mask=full_mask)

    # Cache slots past `length` stay empty and are masked out like padding.
    slot_valid = jnp.asarray(np.pad(valid, ((0, 0), (0, max_len - length))))
    slots = jnp.arange(max_len)
    graphdef, params = nnx.split(model, nnx.Param)

    @jax.jit
    def decode(params):
        model = nnx.merge(graphdef, params)
        cache = init_cache(cfg, batch, max_len)
        mask = (slots[None, :prompt_len, None] >= slots) & slot_valid[:, None, :]
        logits, cache = model(tokens[:, :prompt_len], positions[:, :prompt_len],
                              attn_mask=mask, cache=cache, cache_index=jnp.int32(0))
        out = jnp.zeros((batch, length, cfg.vocab_size)).at[:, :prompt_len].set(logits)

        def step(t, carry):  # `t` is traced: the cache write offset is dynamic.
            out, cache = carry
            tok = jax.lax.dynamic_slice_in_dim(tokens, t, 1, axis=1)
            pos = jax.lax.dynamic_slice_in_dim(positions, t, 1, axis=1)
            mask = ((slots <= t) & slot_valid)[:, None, :]
            logits, cache = model(tok, pos, attn_mask=mask, cache=cache, cache_index=t)
            return jax.lax.dynamic_update_slice_in_dim(out, logits, t, axis=1), cache

        return jax.lax.fori_loop(prompt_len, length, step, (out, cache))

    out, cache = decode(params)
    # Per layer ([layers, ...] arrays with scan_layers): keys [B, K, S, D], values [B, K, D, S].
    assert isinstance(cache.k, tuple) == (not scan)
    ks, vs = np.stack(cache.k), np.stack(cache.v)
    assert ks.shape == (cfg.num_layers, batch, cfg.num_kv_heads, max_len, cfg.head_dim)
    assert vs.shape == (cfg.num_layers, batch, cfg.num_kv_heads, cfg.head_dim, max_len)
    # Unused slots are never written.
    assert not np.any(ks[:, :, :, length:]) and not np.any(vs[..., length:])
    np.testing.assert_allclose(np.asarray(out)[valid], np.asarray(ref)[valid], atol=1e-5, rtol=0)


def test_cache_requires_mask_and_index():
    cfg = family_preset("llama", **TINY)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    _, tokens, positions = random_batch(batch=2, length=4)
    with pytest.raises(ValueError, match="attn_mask"):
        model(tokens, positions, cache=init_cache(cfg, 2, 8), cache_index=0)


def test_grad_is_finite_and_nonzero():
    cfg = family_preset("qwen3", **TINY)
    graphdef, params = nnx.split(Transformer(cfg, rngs=nnx.Rngs(0)), nnx.Param)
    _, tokens, positions = random_batch()

    @jax.jit
    def loss(params):
        logits, _ = nnx.merge(graphdef, params)(tokens, positions)
        logp = jax.nn.log_softmax(logits[:, :-1])
        return -jnp.mean(jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1))

    norms = [float(jnp.linalg.norm(g)) for g in jax.tree.leaves(jax.grad(loss)(params))]
    assert all(np.isfinite(norms)) and all(n > 0 for n in norms)


@pytest.mark.parametrize("param_dtype", ["float32", "bfloat16"])
def test_bfloat16_compute_and_float32_logits(param_dtype):
    cfg = family_preset("qwen3", **TINY, dtype="bfloat16", param_dtype=param_dtype,
                        tie_word_embeddings=False)
    _, tokens, positions = random_batch()

    @jax.jit  # Built inside jit: one compile instead of many eager bf16 op compiles.
    def forward(tokens, positions):
        model = Transformer(cfg, rngs=nnx.Rngs(0))
        dtypes = {p.dtype for p in jax.tree.leaves(nnx.state(model, nnx.Param))}
        assert dtypes == {jnp.dtype(param_dtype)}, dtypes
        hidden, _ = model.embed_and_hidden(tokens, positions)
        assert hidden.dtype == jnp.bfloat16  # activations in the compute dtype
        return model.logits(hidden)

    logits = forward(tokens, positions)
    assert logits.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(logits)))


@pytest.mark.parametrize("family,tie", CASES + [("qwen3", False)])
def test_num_params_matches_model(family, tie):
    cfg = family_preset(family, **TINY, tie_word_embeddings=tie)
    params = nnx.state(nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0))), nnx.Param)
    assert cfg.num_params() == sum(int(np.prod(p.shape)) for p in jax.tree.leaves(params))
    embeddings = cfg.vocab_size * cfg.hidden_size * (1 if tie else 2)
    assert cfg.num_params(include_embeddings=False) == cfg.num_params() - embeddings


@pytest.mark.parametrize("override,pattern", [
    (dict(num_heads=6, num_kv_heads=4), r"num_heads=6 is not a multiple of num_kv_heads=4"),
    (dict(hidden_size=0), r"hidden_size=0"),
    (dict(head_dim=15), r"head_dim=15"),
    (dict(dtype="float16"), r"dtype='float16'.*bfloat16"),
    (dict(param_dtype="float16"), r"param_dtype='float16'.*bfloat16"),
    (dict(attention="flash"), r"attention='flash'.*cudnn"),
    (dict(remat="some"), r"remat='some'.*dots"),
    (dict(scan_layers=1), r"scan_layers=1 must be a bool"),
    (dict(eos_token_ids=(3, -1)), r"eos_token_ids=\(3, -1\)"),
    (dict(eos_token_ids=[3, True]), r"eos_token_ids=\[3, True\]"),
    (dict(eos_token_id=5, eos_token_ids=(3, 4)), r"eos_token_id=5 is not one of"),
    (dict(family="gpt2"), r"family='gpt2'"),
    (dict(rms_norm_eps=-1.0), r"rms_norm_eps=-1.0"),
    (dict(rope_scaling={"rope_type": "yarn", "factor": 2.0}), r"rope_type='yarn'"),
    (dict(rope_scaling={"rope_type": "llama3", "factor": 8.0}), r"low_freq_factor"),
    (dict(eos_token_id=-1), r"eos_token_id=-1"),
])
def test_config_validation_names_the_field(override, pattern):
    with pytest.raises(ValueError, match=pattern):
        ModelConfig(**{**TINY, **override})


def test_config_hashable_and_hf_round_trip():
    rope = {"rope_type": "linear", "factor": 2.0}
    cfg = family_preset("qwen2", **TINY, rope_scaling=rope, bos_token_id=1, pad_token_id=0)
    assert hash(cfg) == hash(family_preset("qwen2", **TINY, rope_scaling=dict(rope),
                                           bos_token_id=1, pad_token_id=0))
    assert config_from_hf(config_to_hf(cfg)) == cfg
    with pytest.raises(ValueError, match="qkv_bias"):
        config_to_hf(family_preset("llama", **TINY, qkv_bias=True))
    # transformers 4.x spelling: top-level rope_theta, rope_scaling with "type", torch_dtype,
    # and a list of EOS ids; head_dim and num_key_value_heads omitted.
    legacy = {"model_type": "llama", "vocab_size": 97, "hidden_size": 64,
              "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
              "rope_theta": 5e5, "rope_scaling": {"type": "linear", "factor": 4.0},
              "torch_dtype": "bfloat16", "eos_token_id": [7, 8], "tie_word_embeddings": True}
    got = config_from_hf(legacy)
    assert (got.head_dim, got.num_kv_heads, got.rope_theta, got.dtype, got.eos_token_id) == (
        16, 4, 5e5, "bfloat16", 7)
    assert got.eos_token_ids == got.stop_ids == (7, 8) and got.param_dtype == "float32"
    assert got.rope_scaling == {"rope_type": "linear", "factor": 4.0}


def test_eos_ids_and_runtime_fields_round_trip():
    cfg = family_preset("qwen3", **TINY, eos_token_ids=[5, 6])
    # A list becomes a tuple (hashable, equal to the tuple form); eos_token_id is its first.
    assert cfg.eos_token_ids == cfg.stop_ids == (5, 6) and cfg.eos_token_id == 5
    assert cfg == family_preset("qwen3", **TINY, eos_token_id=5, eos_token_ids=(5, 6))
    assert hash(cfg) == hash(family_preset("qwen3", **TINY, eos_token_ids=(5, 6)))
    assert family_preset("qwen3", **TINY, eos_token_id=4).stop_ids == (4,)
    assert family_preset("qwen3", **TINY).stop_ids == ()
    assert config_to_hf(cfg)["eos_token_id"] == [5, 6]
    assert config_from_hf(config_to_hf(cfg)) == cfg
    # Runtime knobs are not exported and come back at their defaults.
    runtime = dict(param_dtype="bfloat16", attention="cudnn", remat="dots", scan_layers=True)
    fast = dataclasses.replace(cfg, **runtime)
    hf = config_to_hf(fast)
    assert hf == config_to_hf(cfg) and not set(runtime) & set(hf)
    assert config_from_hf(hf) == cfg


def test_generation_config_eos_ids_are_merged(tmp_path):
    cfg = family_preset("qwen3", **TINY, eos_token_id=5)
    save_pretrained(Transformer(cfg, rngs=nnx.Rngs(0)), cfg, tmp_path)
    assert json.loads((tmp_path / "generation_config.json").read_text())["eos_token_id"] == 5
    assert load_pretrained(tmp_path)[1] == cfg  # nothing new: eos_token_ids stays ()
    # Qwen3-style: config.json has <|im_end|>, generation_config.json both EOS tokens.
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [6, 5]}))
    loaded = load_pretrained(tmp_path)[1]
    assert (loaded.eos_token_id, loaded.stop_ids) == (5, (5, 6))
    save_pretrained(Transformer(loaded, rngs=nnx.Rngs(0)), loaded, tmp_path / "again")
    gen = json.loads((tmp_path / "again" / "generation_config.json").read_text())
    assert gen == {"eos_token_id": [5, 6]}
    assert load_pretrained(tmp_path / "again")[1] == loaded


def test_load_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_pretrained(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_pretrained(tmp_path)
    cfg = family_preset("qwen3", **TINY)
    (tmp_path / "config.json").write_text(json.dumps(config_to_hf(cfg)))
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(FileNotFoundError,
                       match=r"no \*\.safetensors weights in .* \(found: config.json, "
                             r"tokenizer.json\)"):
        load_pretrained(tmp_path)

    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    (gpt2 / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ValueError, match="unsupported model_type='gpt2'"):
        load_pretrained(gpt2)

    # A checkpoint of another family: same sizes, but no q_norm/k_norm and extra biases.
    qwen2 = tmp_path / "qwen2"
    save_pretrained(Transformer(family_preset("qwen2", **TINY), rngs=nnx.Rngs(0)),
                    family_preset("qwen2", **TINY), qwen2)
    hf_config = json.loads((qwen2 / "config.json").read_text())
    (qwen2 / "config.json").write_text(json.dumps({**hf_config, "model_type": "qwen3"}))
    with pytest.raises(ValueError, match=r"missing .*q_norm.weight.*unexpected .*q_proj.bias"):
        load_pretrained(qwen2)


def test_tokenizer_round_trip(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(["<pad>", "<eos>", "<unk>", "a", "b", "c"])}
    raw = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<pad>",
                                               eos_token="<eos>", unk_token="<unk>")
    save_tokenizer(tok, tmp_path)
    loaded = load_tokenizer(tmp_path)
    assert loaded.encode("a c b z", add_special_tokens=False) == [3, 5, 4, 2]
    assert (loaded.pad_token_id, loaded.eos_token_id) == (0, 1)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_tokenizer(os.path.join(tmp_path, "missing"))


def reference_attend(q, k, v, mask, implementation="xla", q_chunk=0, heads_first=False):
    """The grouped einsum attention the model used before jax.nn.dot_product_attention (k, v
    [B, S, K, D], or a cache layer's k [B, K, S, D] and v [B, K, D, S] with `heads_first`)."""
    if heads_first:
        k, v = jnp.swapaxes(k, 1, 2), jnp.transpose(v, (0, 3, 1, 2))
    b, t, n, d = q.shape
    kv_heads = k.shape[2]
    q = q.reshape(b, t, kv_heads, n // kv_heads, d)
    scores = jnp.einsum("btkgd,bskd->bkgts", q, k, preferred_element_type=jnp.float32)
    scores = jnp.where(mask[:, None, None], scores * d**-0.5, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
    return jnp.einsum("bkgts,bskd->btkgd", probs, v).reshape(b, t, n * d)


def padded_batch(cfg: ModelConfig, batch: int = 3, length: int = 10, seed: int = 4):
    """Left-padded tokens (rows 1 and 2 by 3 and 1 slots), positions and a causal mask in
    which the padding queries of row 1 see no key at all."""
    rng = np.random.default_rng(seed)
    tokens = jnp.asarray(rng.integers(0, cfg.vocab_size, (batch, length)), jnp.int32)
    valid = np.ones((batch, length), bool)
    valid[1, :3] = valid[2, :1] = False
    positions = jnp.asarray(np.maximum(np.cumsum(valid, axis=1) - 1, 0), jnp.int32)
    mask = np.tril(np.ones((length, length), bool))[None] & valid[:, None, :]
    return tokens, positions, mask


def test_attention_matches_einsum_reference(monkeypatch):
    rng = np.random.default_rng(0)
    q, k, v = (jnp.asarray(rng.standard_normal(s), jnp.float32)
               for s in [(2, 5, 6, 8), (2, 7, 2, 8), (2, 7, 2, 8)])
    mask = rng.random((2, 5, 7)) < 0.6
    mask[0, 1] = False  # a fully masked query row stays finite (a uniform mix of values)
    out = transformer.attend(q, k, v, jnp.asarray(mask))
    assert out.shape == (2, 5, 48) and bool(jnp.all(jnp.isfinite(out)))
    np.testing.assert_allclose(out, reference_attend(q, k, v, jnp.asarray(mask)),
                               atol=1e-5, rtol=0)
    # A KV cache layer's layout (keys [B, K, S, D], values [B, K, D, S]), three query heads per
    # kv head.
    kf, vf = jnp.swapaxes(k, 1, 2), jnp.transpose(v, (0, 2, 3, 1))
    out_hf = transformer.attend(q, kf, vf, jnp.asarray(mask), heads_first=True)
    assert out_hf.shape == (2, 5, 48) and bool(jnp.all(jnp.isfinite(out_hf)))
    np.testing.assert_allclose(out_hf, out, atol=1e-6, rtol=0)
    for dt in (jnp.bfloat16,):
        low = [x.astype(dt) for x in (q, k, v)]
        lo_hf = transformer.attend(low[0], jnp.swapaxes(low[1], 1, 2),
                                   jnp.transpose(low[2], (0, 2, 3, 1)), jnp.asarray(mask),
                                   heads_first=True)
        lo = transformer.attend(*low, jnp.asarray(mask))
        assert lo_hf.dtype == dt
        np.testing.assert_allclose(lo_hf.astype(jnp.float32), lo.astype(jnp.float32),
                                   atol=2e-2, rtol=0)

    cfg = family_preset("qwen3", **TINY)
    model = perturbed_model(cfg, seed=3)
    tokens, positions, mask = padded_batch(cfg)
    max_len, prompt_len = 12, 7
    cache_mask = np.pad(mask, ((0, 0), (0, 0), (0, max_len - mask.shape[2])))

    def run():
        full, _ = model(tokens, positions, attn_mask=jnp.asarray(mask))
        # Prefill the first prompt_len tokens into a cache, then decode the rest one by one.
        cache = init_cache(cfg, tokens.shape[0], max_len)
        logits, cache = model(tokens[:, :prompt_len], positions[:, :prompt_len],
                              attn_mask=jnp.asarray(cache_mask[:, :prompt_len]), cache=cache,
                              cache_index=0)
        steps = [logits]
        for t in range(prompt_len, tokens.shape[1]):
            logits, cache = model(tokens[:, t:t + 1], positions[:, t:t + 1],
                                  attn_mask=jnp.asarray(cache_mask[:, t:t + 1]), cache=cache,
                                  cache_index=t)
            steps.append(logits)
        return full, jnp.concatenate(steps, axis=1)

    full, decoded = jax.jit(run)()
    assert bool(jnp.all(jnp.isfinite(full))) and bool(jnp.all(jnp.isfinite(decoded)))
    monkeypatch.setattr(transformer, "attend", reference_attend)
    # A new function object, so jit traces again (through the reference) instead of reusing
    # the cached trace of `run`.
    ref_full, ref_decoded = jax.jit(lambda: run())()
    np.testing.assert_allclose(full, ref_full, atol=1e-5, rtol=0)
    np.testing.assert_allclose(decoded, ref_decoded, atol=1e-5, rtol=0)


def test_attention_auto_picks_xla_off_gpu():
    assert transformer.attention_impl(family_preset("qwen3", **TINY, attention="cudnn")) == "cudnn"
    if jax.default_backend() != "gpu":
        cfg = family_preset("qwen3", **TINY, attention="auto", dtype="bfloat16")
        assert transformer.attention_impl(cfg) == "xla"


@pytest.fixture(scope="module")
def plain_grads():
    """A model, a padded batch, a loss builder and the plain path's gradients and logits."""
    cfg = family_preset("qwen2", **TINY)
    model = perturbed_model(cfg, seed=5)
    tokens, positions, mask = padded_batch(cfg)

    def grad_fn(cfg):
        graphdef = nnx.graphdef(same_weights(model, cfg))

        def loss(params):
            logits, _ = nnx.merge(graphdef, params)(tokens, positions, attn_mask=jnp.asarray(mask))
            logp = jax.nn.log_softmax(logits[:, :-1])
            return -jnp.mean(jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1)), logits

        return jax.jit(jax.grad(loss, has_aux=True))

    params = nnx.state(model, nnx.Param)
    return cfg, params, grad_fn, grad_fn(cfg)(params)


@pytest.mark.parametrize("remat,scan", [(r, s) for r in ("none", "full", "dots")
                                         for s in (False, True) if (r, s) != ("none", False)])
def test_remat_and_scan_keep_logits_and_gradients(plain_grads, remat, scan):
    cfg, params, grad_fn, (ref_grads, ref_logits) = plain_grads
    grads, logits = grad_fn(dataclasses.replace(cfg, remat=remat, scan_layers=scan))(params)
    np.testing.assert_allclose(logits, ref_logits, atol=1e-5, rtol=0)
    jax.tree.map(lambda g, r: np.testing.assert_allclose(g, r, atol=1e-5, rtol=1e-5),
                 grads, ref_grads)


def plain_linear(self, x):
    """Linear as a contraction of x [..., in] with the kernel, no flattening."""
    y = x @ self.kernel[...].astype(self.dtype)
    return y if self.bias is None else y + self.bias[...].astype(self.dtype)


def plain_attend(q, k, v, mask, implementation="xla", q_chunk=0, heads_first=False):
    """Full-sequence attention through JAX's own entry (what `attend` ran before its grouped
    layout); anything else as the model runs it."""
    if heads_first or q_chunk or isinstance(mask, transformer.SegmentMask):
        return ORIGINAL_ATTEND(q, k, v, mask, implementation, q_chunk, heads_first)
    b, t, n, d = q.shape
    out = jax.nn.dot_product_attention(q, k, v, mask=mask[:, None], scale=d**-0.5,
                                       implementation="xla")
    return out.reshape(b, t, n * d)


ORIGINAL_ATTEND = transformer.attend


@pytest.mark.parametrize("family,remat", [("qwen3", "none"), ("qwen2", "none"),
                                          ("qwen3", "dots"), ("llama", "full")])
def test_gradients_are_plain_autodiffs(monkeypatch, family, remat):
    """The train step's layouts (flattened projections, SwiGLU's recomputed backward, grouped
    attention) give plain autodiff's logits and gradients of the same maths written directly:
    x @ W over [B, T, in], silu(gate) * up with nothing recomputed, jax.nn.dot_product_attention."""
    cfg = family_preset(family, **TINY, tie_word_embeddings=family != "llama", remat=remat)
    model = perturbed_model(cfg, seed=7)
    tokens, positions, mask = padded_batch(cfg)
    graphdef, params = nnx.split(model, nnx.Param)
    weights = jnp.asarray(np.random.default_rng(1).standard_normal((3, 9, 1)), jnp.float32)

    def grads():
        def loss(params):
            logits, _ = nnx.merge(graphdef, params)(tokens, positions,
                                                   attn_mask=jnp.asarray(mask))
            logp = jax.nn.log_softmax(logits[:, :-1])
            picked = jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1)
            return -jnp.mean(weights * picked), logits

        # a new function each call, so the patched modules are traced afresh
        return jax.jit(jax.grad(loss, has_aux=True))(params)

    got, got_logits = grads()
    monkeypatch.setattr(transformer.Linear, "__call__", plain_linear)
    monkeypatch.setattr(transformer, "_swiglu", lambda gate, up: jax.nn.silu(gate) * up)
    monkeypatch.setattr(transformer, "attend", plain_attend)
    ref, ref_logits = grads()
    np.testing.assert_allclose(got_logits, ref_logits, atol=1e-5, rtol=0)
    flat_got = nnx.traversals.flatten_mapping(nnx.to_pure_dict(got))
    flat_ref = nnx.traversals.flatten_mapping(nnx.to_pure_dict(ref))
    assert flat_got.keys() == flat_ref.keys()
    for path, g in flat_got.items():
        r = flat_ref[path]
        assert float(jnp.max(jnp.abs(r))) > 0, path  # every weight is reached
        np.testing.assert_allclose(g, r, atol=2e-6, rtol=1e-4, err_msg="/".join(map(str, path)))


@pytest.mark.parametrize("scan", [False, True])
def test_remat_shrinks_what_the_backward_pass_keeps(scan):
    cfg = family_preset("qwen2", **{**TINY, "num_layers": 3}, scan_layers=scan)
    params = nnx.state(Transformer(cfg, rngs=nnx.Rngs(0)), nnx.Param)
    tokens, positions, _ = padded_batch(cfg)

    def residual_bytes(remat):
        graphdef = nnx.graphdef(nnx.eval_shape(
            lambda: Transformer(dataclasses.replace(cfg, remat=remat), rngs=nnx.Rngs(0))))

        def residuals(params):  # the vjp closure holds what the backward pass reads
            _, vjp = jax.vjp(lambda p: nnx.merge(graphdef, p)(tokens, positions)[0], params)
            return jax.tree.leaves(vjp)

        shapes = jax.eval_shape(residuals, params)
        return sum(int(np.prod(x.shape)) * x.dtype.itemsize for x in shapes)

    # "dots" keeps the projection outputs only, "full" only what each layer starts from.
    assert residual_bytes("none") > residual_bytes("dots") > residual_bytes("full")


def test_sharded_save_loads_in_transformers(tmp_path):
    cfg = family_preset("llama", **TINY, tie_word_embeddings=False, eos_token_ids=(2, 3))
    model = perturbed_model(cfg, seed=6)
    # A stale single-file save must not survive beside the shards.
    save_pretrained(model, cfg, tmp_path)
    save_pretrained(model, cfg, tmp_path, max_shard_bytes=40_000)
    files = sorted(os.listdir(tmp_path))
    shards = [n for n in files if n.startswith("model-")]
    assert len(shards) > 2 and "model.safetensors" not in files
    assert shards[0] == f"model-00001-of-{len(shards):05d}.safetensors"
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert sorted(set(index["weight_map"].values())) == shards
    assert index["metadata"]["total_size"] == 4 * cfg.num_params()
    for name in shards:
        with safe_open(tmp_path / name, framework="numpy") as f:
            size = sum(np.prod(f.get_slice(k).get_shape()) * 4 for k in f.keys())
            assert size <= 40_000 or len(list(f.keys())) == 1

    np_tokens, tokens, positions = random_batch(seed=2)
    logits, _ = model(tokens, positions)
    ref_model = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path, attn_implementation="eager").float().eval()
    assert list(ref_model.generation_config.eos_token_id) == [2, 3]
    np.testing.assert_allclose(logits, torch_logits(ref_model, np_tokens), atol=1e-4, rtol=0)
    reloaded, cfg2 = load_pretrained(tmp_path)
    assert cfg2 == cfg
    np.testing.assert_array_equal(reloaded(tokens, positions)[0], logits)
    # Saving small again replaces the shards with one file.
    save_pretrained(model, cfg, tmp_path)
    assert sorted(n for n in os.listdir(tmp_path) if "safetensors" in n) == [
        "model.safetensors"]


def test_load_into_shardings_matches_unsharded_load(tmp_path):
    cfg = family_preset("qwen2", **{**TINY, "vocab_size": 128}, tie_word_embeddings=False)
    save_pretrained(perturbed_model(cfg, seed=7), cfg, tmp_path)
    mesh = jax.sharding.Mesh(np.asarray(jax.devices()), ("x",))
    split = NamedSharding(mesh, PartitionSpec(None, "x"))
    replicated = NamedSharding(mesh, PartitionSpec())
    requested = {}

    def shardings(abstract):
        assert all(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree.leaves(abstract))
        # Matrices split along their second dimension over all devices, vectors replicated.
        out = jax.tree.map(lambda x: split if x.ndim == 2 and x.shape[1] % mesh.size == 0
                           else replicated, abstract)
        requested.update(nnx.traversals.flatten_mapping(nnx.to_pure_dict(out)))
        return out

    model, _ = load_pretrained(tmp_path, shardings=shardings)
    plain, _ = load_pretrained(tmp_path)
    got = nnx.traversals.flatten_mapping(nnx.to_pure_dict(nnx.state(model, nnx.Param)))
    want = nnx.traversals.flatten_mapping(nnx.to_pure_dict(nnx.state(plain, nnx.Param)))
    assert set(got) == set(requested) == set(want)
    assert sum(s == split for s in requested.values()) == 2 * 7 + 2  # per layer, embed, head
    for path, value in got.items():
        assert value.sharding == requested[path], path
        np.testing.assert_array_equal(value, want[path])
    _, tokens, positions = random_batch()
    np.testing.assert_allclose(model(tokens, positions)[0], plain(tokens, positions)[0],
                               atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="matching the parameter state"):
        load_pretrained(tmp_path, shardings=lambda abstract: {"embed_tokens": None})


@pytest.mark.parametrize("heads_first", [False, True])
@pytest.mark.parametrize("chunk", [2, 3, 5])
def test_chunked_attention_is_the_unchunked_one(chunk, heads_first):
    """model.attention_chunk: queries in blocks (the last one padded when the length is not a
    multiple) give the same outputs and gradients as all at once (keys/values in either
    layout: [B, S, K, D], or a cache layer's k [B, K, S, D] and v [B, K, D, S])."""
    rng = np.random.default_rng(1)
    q, k, v = (jnp.asarray(rng.standard_normal(s), jnp.float32)
               for s in [(2, 7, 4, 8), (2, 7, 2, 8), (2, 7, 2, 8)])
    if heads_first:
        k, v = jnp.swapaxes(k, 1, 2), jnp.transpose(v, (0, 2, 3, 1))
    mask = jnp.asarray(np.tril(np.ones((7, 7), bool))[None].repeat(2, 0))

    def loss(q, k, v, c):
        return jnp.sum(jnp.sin(transformer.attend(q, k, v, mask, "xla", c,
                                                  heads_first=heads_first)))

    whole = transformer.attend(q, k, v, mask, heads_first=heads_first)
    blocked = transformer.attend(q, k, v, mask, "xla", chunk, heads_first=heads_first)
    np.testing.assert_allclose(blocked, whole, atol=1e-6, rtol=0)
    g_whole = jax.grad(loss, argnums=(0, 1, 2))(q, k, v, 0)
    g_blocked = jax.grad(loss, argnums=(0, 1, 2))(q, k, v, chunk)
    for a, b in zip(g_blocked, g_whole, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)


def test_chunked_attention_scores_never_exist_whole():
    """The point of the blocks: the compiled forward and backward hold one block's scores, so
    their temporaries shrink with the block (4,096 positions: 512-query blocks)."""
    q = jax.ShapeDtypeStruct((1, 4096, 4, 16), jnp.float32)
    kv = jax.ShapeDtypeStruct((1, 4096, 2, 16), jnp.float32)
    mask = jax.ShapeDtypeStruct((1, 4096, 4096), jnp.bool_)

    def temps(chunk):
        def f(q, k, v, m):
            return jax.grad(lambda q: jnp.sum(transformer.attend(q, k, v, m, "xla", chunk)))(q)
        return jax.jit(f).lower(q, kv, kv, mask).compile().memory_analysis().temp_size_in_bytes

    whole, blocked = temps(0), temps(512)
    # whole: [1, 4, 4096, 4096] float32 scores (256 MiB) and their softmax/gradient copies
    assert whole > 256 * 2**20 and blocked < whole / 4, (whole, blocked)


def _segment_ids(rng, rows, length, most):
    """Segment ids of packed rows: contiguous sequences from column 0, then padding."""
    seg = np.zeros((rows, length), np.int32)
    for r in range(rows):
        s, k = 0, 1
        while k <= most and s < length - 1:
            n = int(rng.integers(1, max(2, length // 3)))
            seg[r, s:s + n] = k
            s, k = s + n, k + 1
    return seg


def test_segment_mask_gives_cudnn_packed_lengths_and_offsets():
    """SegmentMask.segments: each row's sequence lengths and start offsets, -1 past its last
    sequence and in the extra offset column (cuDNN's packed layout)."""
    seg = np.array([[1, 1, 2, 2, 2, 3, 0, 0], [1, 1, 1, 1, 1, 1, 1, 0]], np.int32)
    lengths, offsets = transformer.SegmentMask(jnp.asarray(seg), max_segments=4).segments()
    np.testing.assert_array_equal(lengths, [[2, 3, 1, -1], [7, -1, -1, -1]])
    np.testing.assert_array_equal(offsets, [[0, 2, 5, -1, -1], [0, -1, -1, -1, -1]])


@pytest.mark.parametrize("chunk", [0, 3, 8])
def test_segment_blocks_are_the_dense_segment_mask(chunk, monkeypatch):
    """XLA's packed attention builds each block of queries' mask from the segment ids; outputs
    and gradients equal the dense [B, T, T] mask's, also for rows longer than SEGMENT_BLOCK
    with no chunk set (monkeypatched small)."""
    rng = np.random.default_rng(4)
    seg = jnp.asarray(_segment_ids(rng, 3, 20, 5))
    mask = transformer.SegmentMask(seg, max_segments=5)
    dense = mask.dense()
    q, k, v = (jnp.asarray(rng.standard_normal(s), jnp.float32)
               for s in [(3, 20, 4, 8), (3, 20, 2, 8), (3, 20, 2, 8)])
    monkeypatch.setattr(transformer, "SEGMENT_BLOCK", 6)

    def loss(q, k, v, m, c):
        return jnp.sum(jnp.sin(transformer.attend(q, k, v, m, "xla", c)))

    np.testing.assert_allclose(transformer.attend(q, k, v, mask, "xla", chunk),
                               transformer.attend(q, k, v, dense, "xla", 0), atol=1e-6, rtol=0)
    for a, b in zip(jax.grad(loss, argnums=(0, 1, 2))(q, k, v, mask, chunk),
                    jax.grad(loss, argnums=(0, 1, 2))(q, k, v, dense, 0), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)


def test_long_packed_rows_build_no_square_array_on_xla():
    """A packed row longer than SEGMENT_BLOCK attends in blocks on XLA: the compiled forward
    and backward hold no [T, T] array (T = 1,200, a length no other dimension shares)."""
    t = 1200
    q = jax.ShapeDtypeStruct((1, t, 4, 16), jnp.float32)
    kv = jax.ShapeDtypeStruct((1, t, 2, 16), jnp.float32)
    seg = jax.ShapeDtypeStruct((1, t), jnp.int32)

    def f(q, k, v, s):
        mask = transformer.SegmentMask(s, max_segments=16)
        return jax.grad(lambda q: jnp.sum(transformer.attend(q, k, v, mask, "xla")))(q)

    hlo = jax.jit(f).lower(q, kv, kv, seg).compile().as_text()
    assert not re.findall(rf"\[[\d,]*{t},{t}\]", hlo)


def test_cudnn_padding_positions_pass_no_gradient():
    """cuDNN leaves positions outside every sequence unwritten (NaN seen there in the packed
    backward on an H200): the guard around its inputs zeroes their gradient there, whatever
    the kernel left, and keeps it elsewhere."""
    keep = jnp.asarray([[True, True, False]])[:, :, None, None]
    x = jnp.ones((1, 3, 2, 4))
    garbage = jnp.asarray([1.0, 2.0, jnp.nan])[None, :, None, None]
    g = jax.grad(lambda x: jnp.sum(transformer._grad_within(x, keep) * garbage))(x)
    np.testing.assert_array_equal(g[0, :, 0, 0], [1.0, 2.0, 0.0])
