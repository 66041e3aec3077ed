"""Packed attention on the device it runs on: `frontier-rl bench packed [--json]`.

Checks that packed rows ("pack", several sequences per row: models/transformer.py
`SegmentMask`) give what one sequence per row gives, on whichever kernel this backend runs
(cuDNN's packed layout on a GPU in 16-bit compute, XLA's segment blocks elsewhere), and prints
the figures as one JSON line:

1. attention alone: packed rows of drawn lengths (bfloat16; Qwen2.5-0.5B's 14 query and 2 kv
   heads of 64 dims), output and q/k/v gradients of the backend's kernel against a float32
   reference of the same inputs, beside XLA's own bfloat16 error against that reference
   (`*_err` / `*_xla_err`: the kernel is as exact as XLA's bfloat16 when the ratio is about 1);
   padding outputs finite;
2. a small bfloat16 policy: each response's token log-probs packed against the same sequences
   one per row ("trim"), largest absolute difference;
3. attention forward + backward timed in both layouts on the same sequences (median seconds
   and the rows x length each runs), the saving packing is for.

On a CPU it runs the XLA path (small shapes), as the tests do; launch/gpu_check.sh runs it on a
GPU.
"""
from __future__ import annotations

import functools
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from frontier_rl.models.transformer import SegmentMask, attend


def _rows(lengths, length: int, most: int) -> tuple[np.ndarray, dict]:
    """(segment ids [rows, length] of `lengths` packed best fit into rows of at most `most`
    sequences (rl/batch.py), {sequence: (row, its columns)})."""
    from frontier_rl.rl import batch as batch_lib

    rows = batch_lib.best_fit(lengths, length, most)
    seg = np.zeros((len(rows), length), np.int32)
    where = {}
    for r, members in enumerate(rows):
        s = 0
        for k, i in enumerate(members, start=1):
            seg[r, s:s + lengths[i]] = k
            where[i] = (r, np.arange(s, s + lengths[i]))
            s += lengths[i]
    return seg, where


def _reference(q, k, v, seg):
    """float32 attention within segments, dense mask: the reference."""
    mask = SegmentMask(jnp.asarray(seg), max_segments=seg.max()).dense()
    f32 = [x.astype(jnp.float32) for x in (q, k, v)]
    return jax.nn.dot_product_attention(*f32, mask=mask[:, None], scale=q.shape[-1]**-0.5,
                                        implementation="xla").reshape(q.shape[0], q.shape[1], -1)


def _err(a, b, valid) -> float:
    """Largest |a - b| over the positions of `valid` (NaN there counts: it propagates)."""
    a, b = np.asarray(a, np.float32)[valid], np.asarray(b, np.float32)[valid]
    return float(np.max(np.abs(a - b)))


def _timed(fn, repeats: int) -> float:
    jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def attention_parity(implementation: str, length: int, sequences: int, seed: int = 0) -> dict:
    from frontier_rl.rl.batch import MAX_SEGMENTS

    rng = np.random.default_rng(seed)
    lengths = np.minimum(rng.geometric(3 / length, sequences), length).astype(int).tolist()
    seg, _ = _rows(lengths, length, MAX_SEGMENTS)
    b, n, kh, d = seg.shape[0], 14, 2, 64
    q = jnp.asarray(rng.standard_normal((b, length, n, d)), jnp.bfloat16)
    k = jnp.asarray(rng.standard_normal((b, length, kh, d)), jnp.bfloat16)
    v = jnp.asarray(rng.standard_normal((b, length, kh, d)), jnp.bfloat16)
    valid = seg > 0
    w = jnp.asarray(rng.standard_normal((b, length, n * d)), jnp.float32) * valid[..., None]

    def loss(fn):
        return lambda q, k, v: jnp.sum(fn(q, k, v).astype(jnp.float32) * w)

    mask = SegmentMask(jnp.asarray(seg), max_segments=MAX_SEGMENTS)
    kernel = jax.jit(lambda q, k, v: attend(q, k, v, mask, implementation))
    xla16 = jax.jit(lambda q, k, v: attend(q, k, v, mask.dense(), "xla"))
    ref = jax.jit(lambda q, k, v: _reference(q, k, v, seg))
    out = {"implementation": implementation, "rows": b, "length": length,
           "sequences": sequences, "segments_max": int(seg.max())}
    got, ours, want = kernel(q, k, v), xla16(q, k, v), ref(q, k, v)
    out["finite"] = bool(np.isfinite(np.asarray(got, np.float32)).all())
    out["out_err"], out["out_xla_err"] = _err(got, want, valid), _err(ours, want, valid)
    grads = [jax.jit(jax.grad(loss(f), argnums=(0, 1, 2)))(q, k, v)
             for f in (kernel, xla16, ref)]
    for name, g_k, g_x, g_r in zip("qkv", *grads, strict=True):
        out[f"d{name}_err"], out[f"d{name}_xla_err"] = _err(g_k, g_r, valid), _err(g_x, g_r,
                                                                                    valid)
        # everywhere, padding included: a NaN there reaches the weights' gradients
        out["finite"] &= bool(np.isfinite(np.asarray(g_k, np.float32)).all())
    return out


def timing(implementation: str, length: int, sequences: int, repeats: int,
           seed: int = 1) -> dict:
    """Attention forward + backward on the same sequences, one per row vs packed."""
    from frontier_rl.rl.batch import MAX_SEGMENTS

    rng = np.random.default_rng(seed)
    lengths = np.minimum(rng.geometric(3 / length, sequences), length).astype(int).tolist()
    out = {}
    for layout, most in (("trim", 1), ("pack", MAX_SEGMENTS)):
        seg, _ = _rows(lengths, length, most)
        b, n, kh, d = seg.shape[0], 14, 2, 64
        q = jnp.asarray(rng.standard_normal((b, length, n, d)), jnp.bfloat16)
        k = jnp.asarray(rng.standard_normal((b, length, kh, d)), jnp.bfloat16)
        mask = SegmentMask(jnp.asarray(seg), packed=layout == "pack", max_segments=most)

        def loss(q, k, mask=mask):
            return jnp.sum(attend(q, k, k, mask, implementation).astype(jnp.float32))

        step = jax.jit(jax.grad(loss, argnums=(0, 1)))
        out[f"{layout}_shape"] = f"{b}x{length}"
        out[f"{layout}_median_s"] = _timed(functools.partial(step, q, k), repeats)
    out["pack_speedup"] = out["trim_median_s"] / out["pack_median_s"]
    return out


def policy_parity(implementation: str, seed: int = 2) -> dict:
    """Token log-probs of a small bfloat16 policy, packed vs one sequence per row."""
    from flax import nnx

    from frontier_rl.models import ModelConfig, Transformer
    from frontier_rl.rl.train_step import sequence_logps

    cfg = ModelConfig(vocab_size=128, hidden_size=256, intermediate_size=512, num_layers=2,
                      num_heads=4, num_kv_heads=2, head_dim=64, dtype="bfloat16",
                      attention=implementation)
    model = Transformer(cfg, rngs=nnx.Rngs(seed))
    rng = np.random.default_rng(seed)
    length, lengths = 256, rng.integers(8, 120, 24).tolist()
    tokens = [rng.integers(1, cfg.vocab_size, n) for n in lengths]
    seqs = {}
    for layout, most in (("trim", 1), ("pack", 16)):
        seg, where = _rows(lengths, length, most)
        tok = np.zeros_like(seg)
        for i, (r, cols) in where.items():
            tok[r, cols] = tokens[i]
        logp, _ = jax.jit(lambda t, v, layout=layout: sequence_logps(
            model, t, v, chunk=0, layout=layout))(jnp.asarray(tok), jnp.asarray(seg))
        logp = np.asarray(logp)
        seqs[layout] = {i: logp[r, cols[:-1]] for i, (r, cols) in where.items()}
    diff = max(float(np.max(np.abs(seqs["pack"][i] - seqs["trim"][i]))) for i in seqs["trim"])
    return {"policy_logp_max_diff": diff}


def main(repeats: int = 5, as_json: bool = False) -> dict:
    import json

    from frontier_rl.models import ModelConfig
    from frontier_rl.models.transformer import attention_impl

    impl = attention_impl(ModelConfig(vocab_size=8, hidden_size=8, intermediate_size=8,
                                      num_layers=1, num_heads=1, num_kv_heads=1, head_dim=8,
                                      dtype="bfloat16", attention="auto"))
    gpu = jax.default_backend() == "gpu"
    # parity against a dense float32 reference ([rows, heads, T, T] scores): a shorter cap
    length, sequences = (2048, 48) if gpu else (256, 12)
    out = {"bench": "packed", "backend": jax.default_backend(),
           "device_kind": jax.devices()[0].device_kind, "jax": jax.__version__}
    out.update(attention_parity(impl, length, sequences))
    out.update(policy_parity(impl))
    out.update(timing(impl, *((4096, 128) if gpu else (length, sequences)), repeats))
    for k, v in out.items():
        print(f"{k:>20}: {v:.4g}" if isinstance(v, float) else f"{k:>20}: {v}")
    if as_json:
        print(json.dumps(out))
    return out
