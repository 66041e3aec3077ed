"""frontier_rl's fixed bench work (frontier_rl/bench WORK["default"]) run with google-tunix's own
model, sampler and GRPO trainer step, for a side-by-side figure (launch/bench_vs_tunix.sh).

Runs in its own virtualenv (google-tunix==0.1.7 on jax CPU; the recipe is in
launch/bench_vs_tunix.sh), not the project's:

    .venv-tunix/bin/python launch/bench_tunix.py sampler|train_step|all [--repeats=N] [--json]

The work, as frontier_rl's bench states it:
- model: a random Qwen3 (tunix.models.qwen3) with 2 layers, embed 128, MLP 256, 4 heads of
  dim 32, 2 KV heads, vocab 64, q/k RMSNorm, tied embeddings, rope theta 1e4, float32.
- sampler: tunix.generate.sampler.Sampler, exactly 32 new tokens for 256 prompts of 8 tokens
  at temperature 1 (top_p=1, no top-k: plain categorical sampling), no early stop (the only
  EOS id is -1, outside the vocab); KV cache of 8 + 32 positions. Prompts go in as token
  lists through a pass-through tokenizer, so no text is encoded or decoded.
- train_step: one GRPO update on 32 prompts x G=8 = 256 sequences of 8 + 32 tokens: tunix's
  registered "grpo" policy loss (tunix.rl.algo_core.grpo_loss_fn: beta=0, i.e. no KL, epsilon
  0.2, sequence-mean-token-mean, given old log-probs), inside tunix.rl.trainer.Trainer's own
  jitted train step (nnx.value_and_grad, optax.global_norm, nnx.Optimizer.update, one
  minibatch, the optimizer donated, the nnx graph cached) as GRPOLearner wires it. The
  optimizer is frontier_rl's default: global-norm clip 1.0 then AdamW(3e-4, b1 0.9, b2 0.99,
  eps 1e-8, no weight decay).
Timing matches frontier_rl's bench: one warm-up (compile) call, then the median of `repeats`
timed calls, each ending on the results fetched to the host.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from tunix.generate import sampler as sampler_lib
from tunix.models.qwen3 import model as qwen3
from tunix.rl import (
    algo_core,  # noqa: F401  (registers the "grpo" policy loss)
    function_registry,
)
from tunix.rl import trainer as rl_trainer
from tunix.rl.grpo import grpo_learner
from tunix.sft import peft_trainer

VOCAB = 64
PROMPTS, PROMPT_LEN, NEW_TOKENS = 256, 8, 32
TRAIN_PROMPTS, GROUP_SIZE = 32, 8
PAD_ID, EOS_ID = 0, -1  # prompts use ids 1..63; -1 is never sampled: no early stop


def model_config() -> qwen3.ModelConfig:
    return qwen3.ModelConfig(num_layers=2, vocab_size=VOCAB, embed_dim=128, hidden_dim=256,
                             num_heads=4, head_dim=32, num_kv_heads=2, rope_theta=10_000,
                             norm_eps=1e-6, use_tied_embedding=True, dtype=jnp.float32,
                             param_dtype=jnp.float32)


def make_model() -> qwen3.Qwen3:
    return qwen3.Qwen3(model_config(), rngs=nnx.Rngs(0))


class TokenTokenizer:
    """Pass-through tokenizer: a prompt is already a list of token ids."""

    def encode(self, ids, **kwargs):
        return list(ids)

    def decode(self, ids, **kwargs):
        return ids

    def bos_id(self):
        return None  # no BOS is prepended

    def eos_id(self):
        return EOS_ID

    def pad_id(self):
        return PAD_ID


def _timed(fn, repeats: int) -> list[float]:
    fn()  # warm-up: compile
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def bench_sampler(repeats: int) -> dict:
    model = make_model()
    cfg = model.config
    sampler = sampler_lib.Sampler(
        model, TokenTokenizer(),
        sampler_lib.CacheConfig(cache_size=PROMPT_LEN + NEW_TOKENS, num_layers=cfg.num_layers,
                                num_kv_heads=cfg.num_kv_heads, head_dim=cfg.head_dim))
    rng = np.random.default_rng(0)
    prompts = rng.integers(1, VOCAB, (PROMPTS, PROMPT_LEN)).tolist()
    seed = iter(range(10**6))

    def go():
        out = sampler(prompts, max_generation_steps=NEW_TOKENS, max_prompt_length=PROMPT_LEN,
                      echo=False, eos_tokens=[EOS_ID], temperature=1.0, top_p=1.0, top_k=None,
                      seed=next(seed))
        assert sum(len(t) for t in out.tokens) == PROMPTS * NEW_TOKENS

    times = _timed(go, repeats)
    tokens = PROMPTS * NEW_TOKENS
    med = statistics.median(times)
    return {"bench": "sampler", "generated_tokens": tokens, "median_s": med,
            "tokens_per_s": tokens / med, "min_s": min(times), "repeats": repeats}


def bench_train_step(repeats: int) -> dict:
    model = make_model()
    optimizer = optax.chain(
        optax.clip_by_global_norm(1.0),
        optax.adamw(3e-4, b1=0.9, b2=0.99, eps=1e-8, weight_decay=0.0))
    trainer = rl_trainer.Trainer(
        model, optimizer, peft_trainer.TrainingConfig(eval_every_n_steps=10**9),
        custom_checkpoint_metadata_fn=dict)
    algo_config = grpo_learner.GRPOConfig(num_generations=GROUP_SIZE, num_iterations=1,
                                          beta=0.0, epsilon=0.2)
    algo_config.temperature = 1.0  # what GRPOLearner copies from the rollout config
    policy_loss_fn = function_registry.get_policy_loss_fn(algo_config.policy_loss_fn)
    # GRPOLearner.__init__'s wiring of the loss and its inputs.
    trainer.with_loss_fn(
        lambda model, train_example, algo_config: policy_loss_fn(
            model, train_example, algo_config=algo_config, pad_id=PAD_ID, eos_id=EOS_ID),
        has_aux=True)
    trainer.with_gen_model_input_fn(lambda x: {"train_example": x, "algo_config": algo_config})
    train_step, _ = trainer.jit_train_and_eval_step(skip_jit=False, cache_nnx_graph=True)

    rows = TRAIN_PROMPTS * GROUP_SIZE
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, VOCAB, (rows, PROMPT_LEN + NEW_TOKENS)).astype(np.int32)
    example = grpo_learner.TrainExample(
        prompt_ids=jnp.asarray(tokens[:, :PROMPT_LEN]),
        prompt_mask=jnp.ones((rows, PROMPT_LEN), jnp.int32),
        completion_ids=jnp.asarray(tokens[:, PROMPT_LEN:]),
        completion_mask=jnp.ones((rows, NEW_TOKENS), jnp.int32),
        ref_per_token_logps=None,  # beta = 0: no reference model
        advantages=jnp.asarray(rng.standard_normal(rows).astype(np.float32)),
        old_per_token_logps=jnp.full((rows, NEW_TOKENS), -np.log(VOCAB), jnp.float32),
    )

    def go():
        loss, aux, grad_norm = train_step(example)
        return jax.device_get((loss, aux, grad_norm))

    times = _timed(go, repeats)
    med = statistics.median(times)
    n_tokens = rows * (PROMPT_LEN + NEW_TOKENS)
    return {"bench": "train_step", "sequences": rows, "tokens": n_tokens, "median_s": med,
            "tokens_per_s": n_tokens / med, "min_s": min(times), "repeats": repeats}


BENCHES = {"sampler": bench_sampler, "train_step": bench_train_step}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name", choices=[*BENCHES, "all"])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--json", action="store_true", help="also print each result as JSON")
    args = ap.parse_args()
    import tunix

    for name in BENCHES if args.name == "all" else [args.name]:
        out = BENCHES[name](args.repeats)
        out.update(library="tunix", version=tunix.__version__, jax=jax.__version__,
                   backend=jax.default_backend(), devices=jax.device_count())
        for k, v in out.items():
            print(f"{k:>18}: {v:,.4g}" if isinstance(v, float) else f"{k:>18}: {v}")
        if args.json:
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
