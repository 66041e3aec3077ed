"""The train step's three batch layouts (rl/batch.py): "pad" (full token cap), "trim" (the
longest sequence) and "pack" (several responses per row) carry the same responses, so they must
give the same loss, metrics and gradient to float32 rounding."""

import jax
import numpy as np
import pytest

from frontier_rl.models.transformer import SegmentMask, attend
from frontier_rl.rl import batch as batch_lib
from frontier_rl.rl import sharding
from frontier_rl.rl.losses import LOSSES, LossConfig
from frontier_rl.rl.train_step import OptimConfig, Trainer, make_optimizer, segment_positions
from frontier_rl.selection.base import Group

MAX_NEW = 24
GROUP = 4


def _groups(vocab: int, seed: int = 0, n_prompts: int = 6):
    """Groups of random responses with lengths spread over [0, MAX_NEW] (mean ~ a third)."""
    rng = np.random.default_rng(seed)
    prompts, groups = [], []
    for j in range(n_prompts):
        prompts.append(rng.integers(3, vocab, rng.integers(3, 9)).tolist())
        lengths = np.minimum(rng.geometric(3 / MAX_NEW, GROUP), MAX_NEW).astype(np.int32)
        lengths[0] = MAX_NEW if j == 0 else lengths[0]  # one response at the cap
        tokens = np.zeros((GROUP, MAX_NEW), np.int32)
        logps = np.zeros((GROUP, MAX_NEW), np.float32)
        for k, n in enumerate(lengths):
            tokens[k, :n] = rng.integers(3, vocab, n)
            logps[k, :n] = -rng.uniform(0.5, 4.0, n)
        rewards = rng.integers(0, 2, GROUP).astype(np.float32)
        groups.append(Group(index=j, prompt_id=str(j), outcomes=rewards.astype(np.int8),
                            rewards=rewards, lengths=lengths,
                            mean_entropy=np.zeros(GROUP, np.float32), tokens=tokens,
                            logps=logps))
    return groups, prompts


def _trainer(graphdef, layout, loss_cfg, micro_batch_size=0):
    return Trainer(graphdef, loss_cfg, make_optimizer(OptimConfig()), sharding.make_mesh(),
                   micro_batch_size=micro_batch_size, layout=layout, logits_chunk=0)


def _batch(groups, prompts, layout, row_multiple):
    return batch_lib.pack(groups, prompts, pad_id=0, prompt_buckets=(16,), row_buckets=(8, 32),
                          row_multiple=row_multiple, layout=layout)


@pytest.mark.parametrize("loss,micro", [("grpo", 0), ("dapo", 0), ("grpo", 8)])
def test_every_layout_gives_the_pad_layouts_loss_and_gradient(tiny_policy, loss, micro):
    cfg, graphdef, params = tiny_policy
    groups, prompts = _groups(cfg.vocab_size)
    loss_cfg = LossConfig(aggregation=LOSSES[loss].aggregation, entropy_coef=0.01)
    out = {}
    for layout in batch_lib.LAYOUTS:
        trainer = _trainer(graphdef, layout, loss_cfg, micro)
        batch = _batch(groups, prompts, layout, trainer.row_multiple)
        out[layout] = (batch, *jax.device_get(trainer.gradient(params, batch)))
    pad_tokens = out["pad"][0]["tokens"].size
    # the trimmed batches really are smaller: the work they save is the point
    assert out["trim"][0]["tokens"].shape[1] < out["pad"][0]["tokens"].shape[1]
    assert out["pack"][0]["tokens"].size < out["trim"][0]["tokens"].size < pad_tokens
    _, loss_ref, metrics_ref, grads_ref = out["pad"]
    for layout in ("trim", "pack"):
        _, loss_, metrics, grads = out[layout]
        np.testing.assert_allclose(loss_, loss_ref, rtol=0, atol=1e-6, err_msg=layout)
        for k, v in metrics_ref.items():
            np.testing.assert_allclose(metrics[k], v, rtol=0, atol=1e-6, err_msg=f"{layout} {k}")
        for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(grads_ref), strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6, err_msg=layout)
    # and the gradient is not trivially zero (a test that could not fail otherwise)
    assert max(float(np.abs(g).max()) for g in jax.tree.leaves(grads_ref)) > 1e-3


def test_old_logps_of_every_layout_agree_on_the_response_tokens(tiny_policy):
    cfg, graphdef, params = tiny_policy
    groups, prompts = _groups(cfg.vocab_size, seed=1)
    got = {}
    for layout in batch_lib.LAYOUTS:
        trainer = _trainer(graphdef, layout, LOSSES["grpo"])
        batch = _batch(groups, prompts, layout, trainer.row_multiple)
        logp = trainer.logps(params, batch["tokens"], batch["valid"])
        # each response's log-probs, in the order of its old_logp values (unique per token)
        mask = batch["loss_mask"] > 0
        order = np.argsort(batch["old_logp"][mask], kind="stable")
        got[layout] = (np.sort(batch["old_logp"][mask]), logp[mask][order])
    for layout in ("trim", "pack"):
        np.testing.assert_array_equal(got[layout][0], got["pad"][0])
        np.testing.assert_allclose(got[layout][1], got["pad"][1], rtol=0, atol=1e-6)


def test_pack_puts_every_response_once_within_rows_and_targets():
    rng = np.random.default_rng(3)
    lengths = rng.integers(1, 40, 300)
    rows = batch_lib.best_fit(lengths, 48)
    placed = sorted(i for r in rows for i in r)
    assert placed == list(range(300))
    assert all(sum(lengths[i] for i in r) <= 48 for r in rows)
    # best fit is within a row of the tokens' lower bound here
    assert len(rows) <= -(-int(lengths.sum()) // 48) + 2
    with pytest.raises(ValueError, match="does not fit rows of 48"):
        batch_lib.best_fit([49], 48)


def test_packed_batch_layout_fields(tokenizer):
    groups, prompts = _groups(len(tokenizer), seed=2)
    b = _batch(groups, prompts, "pack", 2)
    rows, length = b["tokens"].shape
    assert length == batch_lib.seq_bucket(
        max(len(prompts[g.index]) + int(n) for g in groups for n in g.lengths), 16 + MAX_NEW)
    assert rows == batch_lib.packed_rows(rows) or rows % 2 == 0
    # every response's weights sum to 1 over its tokens; its tokens carry its advantage
    assert np.isclose(b["seq_weight"].sum(), sum(int((g.lengths > 0).sum()) for g in groups),
                      atol=1e-4)
    # no loss token predicts across a sequence boundary: target c is token c + 1, in the same
    # sequence as token c
    r, c = np.nonzero(b["loss_mask"])
    assert np.all(b["valid"][r, c] == b["valid"][r, c + 1]) and np.all(b["valid"][r, c] > 0)


def test_bucket_rules():
    assert [batch_lib.seq_bucket(n, 4608) for n in (1, 577, 4608)] == [576, 1152, 4608]
    assert batch_lib.seq_bucket(10, 40) == 16  # steps are multiples of 8 tokens
    assert [batch_lib.packed_rows(n) for n in (1, 8, 9, 65, 700, 1024, 1025)] == \
        [8, 8, 9, 72, 704, 1024, 1152]


def test_segment_positions_restart_at_each_sequence():
    seg = np.array([[1, 1, 2, 2, 2, 0], [1, 1, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0]], np.int32)
    np.testing.assert_array_equal(segment_positions(seg),
                                  [[0, 1, 0, 1, 2, 0], [0, 1, 2, 0, 0, 0], [0] * 6])


def test_the_cudnn_calls_sequence_lengths_mean_the_segment_mask():
    """The cuDNN path of a one-sequence-per-row batch passes `is_causal` and sequence lengths
    instead of a mask; the same call on XLA must match the dense mask on the real queries."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((3, 7, 4, 8)).astype(np.float32)
    k = rng.standard_normal((3, 7, 2, 8)).astype(np.float32)
    v = rng.standard_normal((3, 7, 2, 8)).astype(np.float32)
    seg = np.array([[1] * 7, [1] * 4 + [0] * 3, [1] * 2 + [0] * 5], np.int32)
    mask = SegmentMask(seg, packed=False)
    lengths = mask.lengths()
    fast = jax.nn.dot_product_attention(q, k, v, scale=8**-0.5, is_causal=True,
                                        query_seq_lengths=lengths,
                                        key_value_seq_lengths=lengths, implementation="xla")
    dense = attend(q, k, v, mask).reshape(fast.shape)
    real = seg > 0
    np.testing.assert_allclose(np.asarray(fast)[real], np.asarray(dense)[real], atol=1e-6)


def test_the_realistic_train_step_bench_times_every_layout_on_the_same_responses():
    from frontier_rl import bench

    work = dict(bench.WORK["realistic"], train_prompts=2, new_tokens=24)
    out = bench.bench_train_step_realistic(work, repeats=1)
    rows = {k: int(out[f"{k}_shape"].split("x")[0]) for k in batch_lib.LAYOUTS}
    assert rows["pack"] < rows["pad"] == rows["trim"] == 16
    assert out["tokens"] < 16 * int(out["pad_shape"].split("x")[1])
    for k in batch_lib.LAYOUTS:
        assert out[f"{k}_median_s"] > 0 and np.isfinite(out[f"{k}_tokens_per_s"])


def test_the_early_stop_sampler_bench_times_both_decodes_on_the_same_draws():
    from frontier_rl import bench

    out = bench.bench_sampler_early(dict(bench.WORK["early"], prompts=16, new_tokens=48),
                                    repeats=1)
    # the same prompts and seeds: the same responses whichever way the loop runs
    assert out["one_loop_mean_length"] == out["segments_mean_length"] < 48
    assert out["one_loop_tokens_per_s"] > 0 and out["segments_tokens_per_s"] > 0


def test_pack_puts_at_most_max_segments_in_a_row():
    """A packed row holds at most `most` sequences (cuDNN's packed layout's static bound):
    short sequences that would fit one row open new rows past it."""
    rows = batch_lib.best_fit([2] * 40, 100, most=16)
    assert [len(r) for r in rows] == [16, 16, 8]
    assert sorted(i for r in rows for i in r) == list(range(40))
    assert max(len(r) for r in batch_lib.best_fit([1] * 100, 1000)) == batch_lib.MAX_SEGMENTS
