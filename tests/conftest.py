"""Shared fixtures: a tiny random policy with the arith tokenizer."""

import os

# Tests run on the CPU with several fake devices so sharding rules are exercised.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tokenizer():
    from frontier_rl import tasks

    return tasks.build_char_tokenizer(tasks.ARITH_ALPHABET)


@pytest.fixture(scope="session")
def tiny_policy(tokenizer):
    from flax import nnx

    from frontier_rl.models import ModelConfig, Transformer

    cfg = ModelConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                      num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8, qk_norm=True)
    graphdef, params = nnx.split(Transformer(cfg, rngs=nnx.Rngs(0)), nnx.Param)
    return cfg, graphdef, params
