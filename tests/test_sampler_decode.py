"""The sampler's decode segments: the loop over the filled cache only gives what one loop over
the full cache gave (tokens, lengths, log-probs, entropies, steps), for rows that stop at
different times, greedy and sampled."""

import jax
import numpy as np
import pytest

from frontier_rl.fit.shapes import decode_segments
from frontier_rl.rollout.sampler import Sampler

# Distinct prompts, so that greedy rows differ too.
PROMPTS = [[1, 5, 14, 6, 15], [1, 7, 8, 14, 9, 14, 4, 15], [1, 13, 15], [1, 9, 9, 3, 15],
           [1, 4, 12, 15], [1, 6, 2, 8, 11, 15], [1, 10, 15], [1, 3, 3, 3, 7, 15]]
N = 3  # samples per prompt: 24 rows, padded to 32
CAP = 40


def test_decode_segments_rule():
    assert decode_segments(16) == (16,)  # within the first bucket: one full-width loop
    assert decode_segments(32) == (16, 32)
    assert decode_segments(33) == (16, 32, 33)
    assert decode_segments(256) == (32, 64, 128, 256)
    assert decode_segments(300, 64) == (64, 128, 256, 300)
    # At most 4 segments: the smallest are dropped and the first starts wider.
    assert decode_segments(4096) == (512, 1024, 2048, 4096)
    assert decode_segments(256, 8, 8) == (8, 16, 32, 64, 128, 256)
    assert decode_segments(256, 0) == (256,)  # 0: the single full-width loop
    assert decode_segments(256, 64, 1) == (256,)


def _sharp(tiny_policy):
    """The tiny policy's parameters x 4: its greedy answers differ by prompt (the untrained
    tiny policy's all repeat one token)."""
    return jax.tree.map(lambda x: x * 4, tiny_policy[2])


def _samplers(tiny_policy, tokenizer, stop_ids):
    cfg, graphdef, _ = tiny_policy
    kw = dict(eos_id=stop_ids, pad_id=tokenizer.pad_token_id, prompt_buckets=(16,),
              batch_buckets=(32,), max_new_tokens=CAP)
    full = Sampler(graphdef, cfg, decode_bucket=0, **kw)
    seg = Sampler(graphdef, cfg, decode_bucket=4, **kw)
    assert full.segments(CAP) == (CAP,) and seg.segments(CAP) == (8, 16, 32, CAP)
    return full, seg


def _stop_ids(tiny_policy, tokenizer, kw):
    """Two stop ids under which the rows of `kw`'s calls end at the most spread-out steps
    (some in the first segment, some later, some not at all), from an uncapped sample."""
    cfg, graphdef, _ = tiny_policy
    params = _sharp(tiny_policy)
    probe = Sampler(graphdef, cfg, eos_id=-1, pad_id=tokenizer.pad_token_id,
                    prompt_buckets=(16,), batch_buckets=(32,), max_new_tokens=CAP,
                    decode_bucket=0)
    toks = probe.sample(params, PROMPTS, N, **kw).tokens

    def lengths(ids):
        hit = np.isin(toks, ids)
        return np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, CAP + 1)

    pairs = [(a, b) for a in range(cfg.vocab_size) for b in range(a + 1, cfg.vocab_size)]
    return max(pairs, key=lambda ids: len(set(lengths(ids).tolist())))


@pytest.mark.parametrize("kw", [dict(greedy=True), dict(seed=5, temperature=1.0),
                                dict(seed=2, temperature=0.7, top_p=0.9)],
                         ids=["greedy", "sampled", "top_p"])
def test_segments_match_one_full_width_loop(tiny_policy, tokenizer, kw):
    params = _sharp(tiny_policy)
    full, seg = _samplers(tiny_policy, tokenizer, _stop_ids(tiny_policy, tokenizer, kw))
    a = full.sample(params, PROMPTS, N, **kw)
    b = seg.sample(params, PROMPTS, N, **kw)
    np.testing.assert_array_equal(b.tokens, a.tokens)
    np.testing.assert_array_equal(b.lengths, a.lengths)
    np.testing.assert_array_equal(b.finished, a.finished)
    np.testing.assert_allclose(b.logps, a.logps, atol=1e-5)
    np.testing.assert_allclose(b.entropies, a.entropies, atol=1e-5)
    assert b.shape == a.shape  # the same steps run, at the same padded shape
    # The rows end at different times: some within the first segment, some past it.
    assert len(set(a.lengths.tolist())) >= 3
    assert a.lengths.min() <= 8 < a.lengths.max()
    # The padding rows start done: the loops stop with the last real row.
    assert a.shape.steps == (a.lengths.max() if a.finished.all() else CAP)


def test_loops_stop_once_every_row_is_done(tiny_policy, tokenizer):
    """Rows that all stop within the first segment: the later loops run no step."""
    cfg, graphdef, params = tiny_policy
    kw = dict(pad_id=tokenizer.pad_token_id, prompt_buckets=(16,), batch_buckets=(8,),
              max_new_tokens=CAP)
    # Every token a stop token: each row ends at its first token.
    every = tuple(range(cfg.vocab_size))
    seg = Sampler(graphdef, cfg, eos_id=every, decode_bucket=4, **kw)
    res = seg.sample(params, PROMPTS, 2, seed=0)
    assert res.shape.steps == 1 and np.all(res.lengths == 1) and np.all(res.finished)
    # No stop token: the segments run the full cap between them.
    none = Sampler(graphdef, cfg, eos_id=-1, decode_bucket=4, **kw)
    res = none.sample(params, PROMPTS, 2, seed=0)
    assert res.shape.steps == CAP and np.all(res.lengths == CAP) and not np.any(res.finished)
    assert seg.compile_count == 1 and none.compile_count == 1


def test_cost_and_lower_cover_the_full_cache(tiny_policy, tokenizer):
    """The decode step is costed at the full cache width whatever the segments (an upper bound
    on the segmented steps), and the whole segmented program lowers and compiles."""
    cfg, graphdef, params = tiny_policy
    full, seg = _samplers(tiny_policy, tokenizer, (tokenizer.eos_token_id,))
    shape = full.sample(params, PROMPTS, 2, seed=0).shape
    assert seg.cost_analysis(params, shape) == full.cost_analysis(params, shape)
    text = seg.lower(params, 8, 16, CAP).as_text()
    assert text.count("stablehlo.while") >= 4  # one loop per segment (and none merged)
    mem = seg.lower(params, 8, 16, CAP).compile().memory_analysis()
    assert mem is None or mem.temp_size_in_bytes >= 0
