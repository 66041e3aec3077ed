"""The embedded sampler: determinism, EOS handling, log-probs, compile-once buckets."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from frontier_rl.fit.shapes import bucket
from frontier_rl.rl.train_step import sequence_logps
from frontier_rl.rollout.sampler import Sampler

PROMPTS = [[1, 5, 14, 6, 15], [1, 7, 8, 14, 9, 14, 4, 15], [1, 13, 15]]


@pytest.fixture()
def sampler(tiny_policy, tokenizer):
    cfg, graphdef, _ = tiny_policy
    return Sampler(graphdef, cfg, eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id,
                   prompt_buckets=(16, 32), batch_buckets=(8, 32), max_new_tokens=6)


def test_bucket():
    assert bucket(3, (8, 16)) == 8
    assert bucket(16, (8, 16)) == 16
    assert bucket(17, (8, 16)) == 32


def test_deterministic_by_seed(sampler, tiny_policy):
    params = tiny_policy[2]
    a = sampler.sample(params, PROMPTS, 4, seed=3)
    b = sampler.sample(params, PROMPTS, 4, seed=3)
    c = sampler.sample(params, PROMPTS, 4, seed=4)
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_array_equal(a.logps, b.logps)
    assert not np.array_equal(a.tokens, c.tokens)


def test_lengths_eos_and_padding(sampler, tiny_policy, tokenizer):
    res = sampler.sample(tiny_policy[2], PROMPTS, 8, seed=0)
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    assert res.tokens.shape == (24, 6)
    for row, n, fin in zip(res.tokens, res.lengths, res.finished, strict=True):
        assert 1 <= n <= 6
        assert (row[n - 1] == eos) == fin
        assert not np.any(row[: n - 1] == eos)  # stops at the first EOS
        assert np.all(row[n:] == pad)


def test_logps_match_full_forward(sampler, tiny_policy):
    """The sampler's per-token log-probs (KV cache, left padding) equal a full forward pass."""
    cfg, graphdef, params = tiny_policy
    res = sampler.sample(params, PROMPTS, 2, seed=1)
    rows = [p for p in PROMPTS for _ in range(2)]
    plen = max(map(len, rows))
    length = plen + res.tokens.shape[1]
    tokens = np.zeros((len(rows), length), np.int32)
    valid = np.zeros_like(tokens)
    for i, p in enumerate(rows):
        tokens[i, plen - len(p):plen] = p
        valid[i, plen - len(p):plen + res.lengths[i]] = 1
        tokens[i, plen:] = res.tokens[i]
    logp, _ = jax.jit(lambda p, t, v: sequence_logps(nnx.merge(graphdef, p), t, v))(
        params, jnp.asarray(tokens), jnp.asarray(valid))
    logp = np.asarray(logp)
    for i in range(len(rows)):
        n = res.lengths[i]
        np.testing.assert_allclose(logp[i, plen - 1:plen - 1 + n], res.logps[i, :n], atol=2e-5)
        want_logp, want_ent = _reference(graphdef, params, rows[i], res.tokens[i, :n], 1.0)
        np.testing.assert_allclose(res.logps[i, :n], want_logp, atol=2e-5)
        np.testing.assert_allclose(res.entropies[i, :n], want_ent, atol=2e-5)


@functools.cache
def _forward(graphdef):
    """The model's logits for one unpadded sequence, jitted (an eager forward dispatches and
    compiles op by op, for every sequence length)."""
    return jax.jit(lambda params, ids: nnx.merge(graphdef, params)(
        ids[None], jnp.arange(ids.shape[0])[None])[0][0])


def _reference(graphdef, params, prompt, response, temperature):
    """Log-probs of `response` after `prompt` and the entropies of each step's distribution,
    log_softmax(logits / T) in float64 from one unpadded forward pass of the model."""
    ids = np.concatenate([prompt, response]).astype(np.int32)
    logits = _forward(graphdef)(params, jnp.asarray(ids))
    z = np.asarray(logits, np.float64)[len(prompt) - 1:len(ids) - 1] / temperature
    z = z - z.max(-1, keepdims=True)
    logq = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return logq[np.arange(len(response)), response], -(np.exp(logq) * logq).sum(-1)


@pytest.mark.parametrize("top_p", [1.0, 0.8])
def test_logps_at_temperature_are_of_logits_over_t(sampler, tiny_policy, top_p):
    """At T = 0.7 the sampler's log-probs and entropies, the trainer's recomputed log-probs
    and log_softmax(logits / T) agree (verl's actor divides the logits by the rollout
    temperature); top-p truncates what is sampled, not these log-probs."""
    from frontier_rl.rl import sharding
    from frontier_rl.rl.batch import pack
    from frontier_rl.rl.losses import LossConfig
    from frontier_rl.rl.train_step import OptimConfig, Trainer, make_optimizer
    from frontier_rl.selection.base import Group

    cfg, graphdef, params = tiny_policy
    t = 0.7
    res = sampler.sample(params, PROMPTS, 2, seed=2, temperature=t, top_p=top_p)
    rows = [p for p in PROMPTS for _ in range(2)]
    for i, p in enumerate(rows):
        n = res.lengths[i]
        want_logp, want_ent = _reference(graphdef, params, p, res.tokens[i, :n], t)
        np.testing.assert_allclose(res.logps[i, :n], want_logp, atol=2e-5)
        np.testing.assert_allclose(res.entropies[i, :n], want_ent, atol=2e-5)
    # Not the T = 1 distribution: the scaling is really applied.
    t1_logp, _ = _reference(graphdef, params, rows[0], res.tokens[0, :res.lengths[0]], 1.0)
    assert np.max(np.abs(res.logps[0, :res.lengths[0]] - t1_logp)) > 1e-3

    groups = [Group(index=j, prompt_id=str(j), outcomes=np.zeros(2, np.int8),
                    rewards=np.zeros(2, np.float32), lengths=res.lengths[2 * j:2 * j + 2],
                    mean_entropy=np.zeros(2, np.float32), tokens=res.tokens[2 * j:2 * j + 2],
                    logps=res.logps[2 * j:2 * j + 2]) for j in range(len(PROMPTS))]
    b = pack(groups, PROMPTS, pad_id=0, prompt_buckets=(16,), row_buckets=(8,), row_multiple=1)
    tr = Trainer(graphdef, LossConfig(), make_optimizer(OptimConfig()),
                 sharding.make_mesh(devices=jax.devices()[:1]), temperature=t)
    tr_params, _ = tr.init(jax.tree.map(lambda x: x.copy(), params))
    recomputed = tr.logps(tr_params, b["tokens"], b["valid"])
    mask = b["loss_mask"] > 0
    np.testing.assert_allclose(recomputed[mask], b["old_logp"][mask], atol=2e-5)


def test_greedy_and_top_p(sampler, tiny_policy):
    params = tiny_policy[2]
    g1 = sampler.sample(params, PROMPTS, 2, seed=0, greedy=True)
    g2 = sampler.sample(params, PROMPTS, 2, seed=9, greedy=True)
    np.testing.assert_array_equal(g1.tokens, g2.tokens)
    # A vanishing nucleus keeps only the top token: the same as greedy.
    nucleus = sampler.sample(params, PROMPTS, 2, seed=5, top_p=1e-6)
    np.testing.assert_array_equal(nucleus.tokens, g1.tokens)
    # So does sampling top-k 1, at any temperature; greedy ignores a top-k.
    top1 = sampler.sample(params, PROMPTS, 2, seed=5, temperature=3.0, sample_top_k=1)
    np.testing.assert_array_equal(top1.tokens, g1.tokens)
    assert top1.shape.sample_top_k == 1
    g3 = sampler.sample(params, PROMPTS, 2, seed=0, greedy=True, sample_top_k=3)
    np.testing.assert_array_equal(g3.tokens, g1.tokens)
    assert g3.shape.sample_top_k == -1


def test_top_k_off_is_the_program_and_draws_of_before(sampler, tiny_policy):
    """-1 (off) and any k that keeps the whole vocabulary run the program without a top-k:
    no new compile and the same tokens, key for key (the draw is over the full vocabulary
    either way). 0 is refused, as SGLang refuses it."""
    params = tiny_policy[2]
    ref = sampler.sample(params, PROMPTS, 2, seed=7, temperature=0.8)
    count = sampler.compile_count
    for k in (-1, tiny_policy[0].vocab_size, 10 * tiny_policy[0].vocab_size):
        res = sampler.sample(params, PROMPTS, 2, seed=7, temperature=0.8, sample_top_k=k)
        np.testing.assert_array_equal(res.tokens, ref.tokens)
        np.testing.assert_array_equal(res.logps, ref.logps)
        assert res.shape == ref.shape and res.shape.sample_top_k == -1
    assert sampler.compile_count == count
    for bad in (0, -2):
        with pytest.raises(ValueError, match=f"sample_top_k={bad} must be -1"):
            sampler.sample(params, PROMPTS, 2, sample_top_k=bad)


def test_compiles_once_per_bucket(sampler, tiny_policy):
    params = tiny_policy[2]
    sampler.sample(params, PROMPTS, 2, seed=0)
    count = sampler.compile_count
    # Different prompt lengths and row counts inside the same buckets, new seeds: no retrace.
    for step in range(5):
        prompts = [p[: 3 + step % 3] for p in PROMPTS][: 1 + step % 3]
        sampler.sample(params, prompts, 2, seed=step)
    assert sampler.compile_count == count


def test_rejects_bad_input(sampler, tiny_policy):
    with pytest.raises(ValueError, match="no prompts"):
        sampler.sample(tiny_policy[2], [], 2)
    with pytest.raises(ValueError, match="temperature"):
        sampler.sample(tiny_policy[2], PROMPTS, 2, temperature=0.0)


def test_prompt_entropy_matches_numpy(tiny_policy, tokenizer):
    """ctx.prompt_entropy's pass equals a direct numpy computation from the model's logits."""
    from frontier_rl.entropy import PromptEntropy

    cfg, graphdef, params = tiny_policy
    fn = PromptEntropy(graphdef, pad_id=tokenizer.pad_token_id, prompt_buckets=(16,),
                       batch_buckets=(8,))
    got = fn(params, PROMPTS)
    for p, v in zip(PROMPTS, got, strict=True):
        logits = np.asarray(_forward(graphdef)(params, jnp.asarray(p, jnp.int32))[:-1],
                            np.float64)
        z = logits - logits.max(-1, keepdims=True)
        logq = z - np.log(np.exp(z).sum(-1, keepdims=True))
        expected = float(np.mean(-(np.exp(logq) * logq).sum(-1)))
        assert v == pytest.approx(expected, abs=1e-5)
    fn(params, PROMPTS[:2])
    assert fn.compile_count == 1


def test_context_charges_entropy_and_rollout_flops(tiny_policy, tokenizer):
    from frontier_rl.entropy import PromptEntropy
    from frontier_rl.rollout.context import PolicyContext
    from frontier_rl.tasks import Prompt

    cfg, graphdef, params = tiny_policy
    sampler = Sampler(graphdef, cfg, eos_id=tokenizer.eos_token_id,
                      pad_id=tokenizer.pad_token_id, prompt_buckets=(16,), max_new_tokens=4)
    prompts = [Prompt(id=str(i), text=f"{i}+{i}=", answer=str(2 * i), bucket="2op")
               for i in range(3)]
    ctx = PolicyContext(sampler=sampler, tokenizer=tokenizer, prompts=prompts,
                        verify=lambda p, r, f: int(r == p.answer),
                        shape_rewards=lambda o, lengths: o, group_size=2, batch_size=3,
                        temperature=1.0, top_p=1.0, seed=0,
                        prompt_entropy_fn=PromptEntropy(graphdef, pad_id=0,
                                                        prompt_buckets=(16,)),
                        flops_per_token=10.0)
    ctx.begin_step(1, params)
    ctx.prompt_entropy([0, 1])
    assert ctx.counters["entropy_tokens"] == 2 * 5  # BOS + "i+i="
    assert ctx.counters["entropy_flops"] == 10.0 * 10
    groups = ctx.rollout([0, 1, 2], 2)
    tokens = sum(int(g.lengths.sum()) for g in groups) + 2 * 3 * 5
    assert ctx.counters["rollouts"] == 6
    assert ctx.counters["rollout_flops"] == 10.0 * tokens


def test_rolled_groups_count_all_invalid_apart_from_hard():
    """Zero-variance types of rolled groups: hard is all wrong (0), invalid all invalid (-1);
    a mix of wrong and invalid responses has reward variance and is neither."""
    from frontier_rl.rollout.context import RolledGroups

    rolled = RolledGroups(group_size=3)
    rolled.add(np.array([[1, 1, 1], [0, 0, 0], [-1, -1, -1], [0, -1, 0], [1, 0, -1]]))
    rolled.add(np.array([[0, 0, 0], [-1, -1, -1], [1, 1, 0]]))
    m = rolled.metrics()
    assert m["rollout/rolled_groups"] == 8
    assert m["rollout/rolled_zero_var_easy"] == 1 / 8
    assert m["rollout/rolled_zero_var_hard"] == 2 / 8
    assert m["rollout/rolled_zero_var_invalid"] == 2 / 8
    # Groups by number correct: 0 (x5: two hard, two invalid, one wrong/invalid), 1, 2, 3.
    assert [m[f"rollout/rolled_pass_hist/{k}"] for k in range(4)] == [5 / 8, 1 / 8, 1 / 8,
                                                                      1 / 8]


def _full_sort_sample(logits, key, temperature, top_p):
    """The sampler's top-p draw as it was before the top-k fast path: a full sort per step."""
    scaled = logits / temperature
    sorted_logits = jnp.sort(scaled, axis=-1)[:, ::-1]
    cum = jnp.cumsum(jax.nn.softmax(sorted_logits, axis=-1), axis=-1)
    cutoff = jnp.take_along_axis(sorted_logits, jnp.sum(cum < top_p, axis=-1, keepdims=True),
                                 axis=-1)
    return jax.random.categorical(key, jnp.where(scaled < cutoff, -jnp.inf, scaled), axis=-1)


@pytest.mark.parametrize("scale,fast", [(4.0, True), (0.3, False)])
def test_top_p_from_top_k_is_the_full_sort(scale, fast):
    """Peaked logits put every row's nucleus inside the top 64 (the fast path); flat ones do
    not (the sorted fallback). Either way the tokens are the full sort's, key for key."""
    from frontier_rl.rollout.sampler import TOP_K, _sample_token

    vocab, top_p, t = 1000, 0.9, 0.8
    logits = scale * jax.random.normal(jax.random.key(0), (16, vocab))
    head = jax.lax.top_k(jax.nn.softmax(logits / t, axis=-1), TOP_K)[0].sum(-1)
    assert bool(jnp.all(head >= top_p)) == fast
    new = jax.jit(lambda z, k: _sample_token(z, k, t, top_p, False, True))
    old = jax.jit(lambda z, k: _full_sort_sample(z, k, t, top_p))
    for seed in range(20):
        key = jax.random.key(seed)
        np.testing.assert_array_equal(new(logits, key), old(logits, key))


def _sample(logits, seeds, **kw):
    from frontier_rl.rollout.sampler import _sample_token

    t, top_p = kw.pop("temperature", 1.0), kw.pop("top_p", 1.0)
    fn = jax.jit(lambda z, key: _sample_token(z, key, t, top_p, False, top_p < 1.0, **kw))
    return np.stack([np.asarray(fn(logits, jax.random.key(s))) for s in seeds])


def test_sample_top_k_never_leaves_the_k_largest():
    """Each row's draws lie among its k largest logits (no ties: a permutation per row), with
    and without top-p, and over many keys every one of the k is drawn: a mask, not an argmax.
    Top-k 1 is the argmax."""
    vocab, k = 40, 5
    perm = jax.vmap(lambda key: jax.random.permutation(key, vocab))(
        jax.random.split(jax.random.key(1), 6))
    logits = 0.3 * perm.astype(jnp.float32)  # flat enough that top-k binds
    top = np.argsort(-np.asarray(logits), axis=-1)[:, :k]
    for kw in ({}, {"top_p": 0.95}, {"temperature": 2.0}):
        draws = _sample(logits, range(300), sample_top_k=k, **kw)  # [seeds, rows]
        for row in range(logits.shape[0]):
            assert set(draws[:, row].tolist()) <= set(top[row].tolist()), (kw, row)
        assert set(draws[:, 0].tolist()) == set(top[0].tolist())  # 300 draws reach all five
    greedy = np.asarray(jnp.argmax(logits, axis=-1))
    np.testing.assert_array_equal(_sample(logits, range(20), sample_top_k=1, temperature=5.0),
                                  np.broadcast_to(greedy, (20, logits.shape[0])))


def test_top_p_is_taken_within_the_renormalised_top_k():
    """Top-k first, then top-p on what is left (vLLM's and HF's order): with probabilities
    (0.4, 0.3, 0.2, 0.1), k = 2 and top-p 0.5, the top-2 set renormalises to (4/7, 3/7), whose
    nucleus is the first token alone; cutting both on the full distribution (SGLang's "joint")
    would keep two tokens, as top-p alone does. Likewise k = 3, top-p 0.75: two, not three."""
    logits = jnp.log(jnp.array([[0.4, 0.3, 0.2, 0.1]]))
    draws = _sample(logits, range(200), sample_top_k=2, top_p=0.5)
    assert set(draws.ravel().tolist()) == {0}
    nucleus = _sample(logits, range(200), top_p=0.5)
    assert set(nucleus.ravel().tolist()) == {0, 1}
    both = _sample(logits, range(200), sample_top_k=3, top_p=0.75)  # (4/9, 3/9, 2/9): two
    assert set(both.ravel().tolist()) == {0, 1}


def test_top_k_then_top_p_on_a_large_vocabulary_is_the_full_sort():
    """k = 50 under the nucleus search's 64 candidates (its fast path, the vocabulary 1,000):
    the tokens are a full sort's nucleus of the masked logits, key for key."""
    vocab, k, top_p, t = 1000, 50, 0.7, 0.7
    logits = 0.5 * jax.random.normal(jax.random.key(2), (16, vocab))  # flat: top-k binds

    def full_sort(z, key):
        scaled = z / t
        kth = jax.lax.top_k(scaled, k)[0][:, -1:]
        return _full_sort_sample(jnp.where(scaled < kth, -jnp.inf, scaled), key, 1.0, top_p)

    got = _sample(logits, range(20), sample_top_k=k, top_p=top_p, temperature=t)
    want = jax.jit(full_sort)
    for seed in range(20):
        np.testing.assert_array_equal(got[seed], want(logits, jax.random.key(seed)))
    # Not top-p alone: its nucleus of these flat logits holds hundreds of tokens.
    rows = _sample(logits, range(20), top_p=top_p, temperature=t)
    assert not np.all(np.isin(rows, np.argsort(-np.asarray(logits), axis=-1)[:, :k]))


def test_top_k_off_is_the_plain_draw():
    """With no top-k (-1, or k >= the vocabulary) and no top-p the token is
    jax.random.categorical of logits / T, key for key: the draws of before top-k existed."""
    logits = 2.0 * jax.random.normal(jax.random.key(3), (8, 30))
    plain = jax.jit(lambda z, key: jax.random.categorical(key, z / 0.7, axis=-1))
    want = np.stack([np.asarray(plain(logits, jax.random.key(s))) for s in range(10)])
    for k in (-1, 30, 64):
        np.testing.assert_array_equal(_sample(logits, range(10), sample_top_k=k, temperature=0.7),
                                      want)


def test_stops_on_any_of_several_eos_ids(tiny_policy, tokenizer):
    cfg, graphdef, params = tiny_policy
    eos = tokenizer.eos_token_id
    base = Sampler(graphdef, cfg, eos_id=eos, pad_id=tokenizer.pad_token_id,
                   prompt_buckets=(16,), max_new_tokens=6)
    res = base.sample(params, PROMPTS, 8, seed=0)
    # The most common non-EOS first token becomes a second stop id.
    first = res.tokens[:, 0][res.tokens[:, 0] != eos]
    other = int(np.bincount(first).argmax())
    two = Sampler(graphdef, cfg, eos_id=[eos, other], pad_id=tokenizer.pad_token_id,
                  prompt_buckets=(16,), max_new_tokens=6)
    assert two.eos_id == eos and two.eos_ids == (eos, other)
    res2 = two.sample(params, PROMPTS, 8, seed=0)
    for row, row2, n2 in zip(res.tokens, res2.tokens, res2.lengths, strict=True):
        stop = next((i for i, x in enumerate(row) if x in (eos, other)), None)
        want = len(row) if stop is None else stop + 1
        assert n2 == want  # same tokens up to the first of either id, then padding
        np.testing.assert_array_equal(row2[:n2], row[:n2])
    with pytest.raises(ValueError, match="empty"):
        Sampler(graphdef, cfg, eos_id=[], pad_id=0)


def test_prompt_entropy_micro_batches_and_chunks(tiny_policy, tokenizer):
    """Micro-batches of 8 rows and 4-position logits chunks give the one-pass entropies."""
    from frontier_rl.entropy import PromptEntropy

    _, graphdef, params = tiny_policy
    prompts = [p[:k] for p in PROMPTS for k in range(2, 8)] * 2  # 36 prompts
    whole = PromptEntropy(graphdef, pad_id=tokenizer.pad_token_id, prompt_buckets=(16,),
                          batch_buckets=(64,), micro_batch=0, chunk=0)
    parts = PromptEntropy(graphdef, pad_id=tokenizer.pad_token_id, prompt_buckets=(16,),
                          batch_buckets=(64,), micro_batch=8, chunk=4)
    assert parts.padded_shape([3] * 36) == (64, 16)
    np.testing.assert_allclose(parts(params, prompts), whole(params, prompts), atol=1e-5)
    assert parts.compile_count == 1


def test_prefill_in_row_groups(tiny_policy, tokenizer):
    """A prefill in groups of 2 rows (prefill_tokens=32 at prompt bucket 16) samples what one
    prefill of all rows does."""
    cfg, graphdef, params = tiny_policy
    kw = dict(eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id,
              prompt_buckets=(16,), batch_buckets=(8,), max_new_tokens=6)
    whole = Sampler(graphdef, cfg, prefill_tokens=0, **kw)
    groups = Sampler(graphdef, cfg, prefill_tokens=32, **kw)
    assert groups._prefill_groups(8, 16) == 4 and whole._prefill_groups(8, 16) == 1
    a = whole.sample(params, PROMPTS, 2, seed=7, temperature=0.8)
    b = groups.sample(params, PROMPTS, 2, seed=7, temperature=0.8)
    np.testing.assert_array_equal(b.tokens, a.tokens)
    np.testing.assert_allclose(b.logps, a.logps, atol=1e-5)
    np.testing.assert_allclose(b.entropies, a.entropies, atol=1e-5)
