"""FLOPs accounting: the formula's golden values, XLA's cost analysis against it, the padding
bounds on real calls, HeaPA's convention against its released code's expression, compile-once
caching and checkpoint round trips."""

import json
import os

import jax
import numpy as np
import pytest

from frontier_rl.fit import accounting
from frontier_rl.fit.accounting import (
    COST_ROWS,
    ELEMENTWISE_ALLOWANCE,
    KINDS,
    Accountant,
    analytic_flops,
    attention_flops_per_pair,
    compiled_flops,
    dense_flops,
    heapa_forward_flops,
    matmul_params,
)
from frontier_rl.models import ModelConfig
from frontier_rl.rl import sharding
from frontier_rl.rl.batch import pack
from frontier_rl.rl.losses import LOSSES
from frontier_rl.rl.train_step import OptimConfig, Trainer, make_optimizer
from frontier_rl.rollout.sampler import Sampler, SampleResult, SampleShape

PROMPTS = [[1, 5, 14, 6, 15], [1, 7, 8, 14, 9, 14, 4, 15], [1, 13, 15]]
# 1 layer, hidden 4, MLP 8, 2 query heads of dim 2, 1 KV head, vocab 10, tied embeddings.
HAND = ModelConfig(vocab_size=10, hidden_size=4, intermediate_size=8, num_layers=1, num_heads=2,
                   num_kv_heads=1, head_dim=2)


def test_formula_golden_values():
    # N: q 4x4 + k,v 2 x 4x2 + o 4x4 = 48, MLP 3 x 4x8 = 96, two layer norms 8, final norm 4,
    # LM head 10x4 = 40: 196. Attention: 4 * 1 layer * 2 heads * dim 2 = 16 per (query, key).
    assert matmul_params(HAND) == 196
    # Sequences of 3 + 2 and 2 + 0 tokens: 2N x 7 tokens + 16 x (5*6/2 + 2*3/2 = 18) pairs.
    gen = analytic_flops(HAND, "generation", [3, 2], [2, 0])
    assert gen == 2 * 196 * 7 + 16 * 18 == 3032
    assert analytic_flops(HAND, "old_logprob", [3, 2], [2, 0]) == 3032
    # Entropy reads the prompts only: 2N x 5 + 16 x (6 + 3).
    assert analytic_flops(HAND, "entropy", [3, 2], [2, 0]) == 2 * 196 * 5 + 16 * 9 == 2104
    # Training: forward + backward = 3 forwards (6N per token), per epoch.
    assert analytic_flops(HAND, "train", [3, 2], [2, 0], epochs=2) == 6 * 3032
    # Dense (padded, masked) work: 10 query slots over 4 key slots each.
    assert dense_flops(HAND, 10, 4) == 2 * 196 * 10 + 16 * 40 == 4560
    with pytest.raises(ValueError, match="kind"):
        analytic_flops(HAND, "eval", [3])


def test_xla_counts_a_loop_body_once():
    """The accountant analyses loop bodies on their own because XLA does not multiply them by
    the trip count; should that change, this fails before the accounts double count."""
    w = jax.numpy.ones((16, 16))
    x = jax.ShapeDtypeStruct((4, 16), jax.numpy.float32)

    def scan(n):
        return lambda x: jax.lax.scan(lambda c, _: (c @ w, None), x, None, length=n)[0]

    def loop(n):
        return lambda x: jax.lax.fori_loop(0, n, lambda i, c: c @ w, x)

    one = compiled_flops(lambda x: x @ w, x)
    assert one == 2 * 4 * 16 * 16
    for make in (scan, loop):
        assert compiled_flops(make(1), x) == pytest.approx(compiled_flops(make(10), x), rel=1e-3)
        assert compiled_flops(make(10), x) < 2 * one


@pytest.fixture(scope="module")
def one_step(tiny_policy, tokenizer):
    """An accountant charged with one RL step's work through PolicyContext and the trainer."""
    from frontier_rl.entropy import PromptEntropy
    from frontier_rl.rollout.context import PolicyContext
    from frontier_rl.tasks import Prompt

    cfg, graphdef, params = tiny_policy
    sampler = Sampler(graphdef, cfg, eos_id=tokenizer.eos_token_id,
                      pad_id=tokenizer.pad_token_id, prompt_buckets=(16,), batch_buckets=(8, 32),
                      max_new_tokens=6)
    entropy = PromptEntropy(graphdef, pad_id=tokenizer.pad_token_id, prompt_buckets=(16,),
                            batch_buckets=(8,))
    tr = Trainer(graphdef, LOSSES["grpo"], make_optimizer(OptimConfig()),
                 sharding.make_mesh(devices=jax.devices()[:1]), epochs=2, minibatches=2)
    params, opt = tr.init(jax.tree.map(lambda x: x.copy(), params))
    acc = Accountant(cfg, params, sampler=sampler, entropy=entropy, trainer=tr)
    prompts = [Prompt(id=str(i), text=f"{i}+{i}{i}=", answer=str(12 * i), bucket="2op")
               for i in range(1, 4)]
    ctx = PolicyContext(sampler=sampler, tokenizer=tokenizer, prompts=prompts,
                        verify=lambda p, r, f: int(r == p.answer),
                        shape_rewards=lambda o, lengths: o, group_size=4, batch_size=3,
                        temperature=1.0, top_p=1.0, seed=0, prompt_entropy_fn=entropy,
                        accountant=acc)
    ctx.begin_step(1, params)
    ctx.prompt_entropy([0, 1, 2])
    groups = ctx.rollout([0, 1, 2], 4)
    batch = pack(groups, [ctx.encode(i) for i in range(3)], pad_id=tokenizer.pad_token_id,
                 prompt_buckets=(16,), row_buckets=(16,), row_multiple=tr.row_multiple)
    batch["old_logp"] = tr.logps(params, batch["tokens"], batch["valid"])
    acc.charge_logps(batch)
    params, opt, _ = tr.step(params, opt, batch, seed=0)
    acc.charge_train(batch)
    # Tests that charge more work share this accountant: others read this snapshot.
    return dict(acc=acc, ctx=ctx, groups=groups, batch=batch, tr=tr, params=params, opt=opt,
                sampler=sampler, entropy=entropy, state=acc.state_dict())


def _within_allowance(xla: float, formula: float):
    assert formula <= xla <= formula * (1 + ELEMENTWISE_ALLOWANCE), xla / formula


def test_cost_analysis_matches_the_dense_formula(one_step, tiny_policy):
    """Per compiled function, XLA's count is the formula at the padded shape plus a few percent
    of elementwise work: the matmuls are all there and nothing is counted twice."""
    cfg, costs = tiny_policy[0], one_step["acc"].costs
    assert set(costs) == {("generation", 32, 16, 6, False, False, -1), ("entropy", 8, 16),
                          ("old_logprob", 16, 22), ("train", 8, 22)}
    prefill, step = costs["generation", 32, 16, 6, False, False, -1]
    _within_allowance(prefill, dense_flops(cfg, 32 * 16, 16 + 6))
    _within_allowance(step, dense_flops(cfg, 32, 16 + 6))  # one token per row, whole cache
    _within_allowance(costs["entropy", 8, 16], dense_flops(cfg, 8 * 16, 16))
    _within_allowance(costs["old_logprob", 16, 22], dense_flops(cfg, 16 * 22, 22))
    _within_allowance(costs["train", 8, 22], 3 * dense_flops(cfg, 8 * 22, 22))


def test_xla_over_formula_within_the_padding_ratio(one_step, tiny_policy):
    cfg = tiny_policy[0]
    acc = Accountant(cfg, tiny_policy[2])
    acc.load_state_dict(one_step["state"])
    groups, m = one_step["groups"], acc.metrics()
    for sfx in [f"/{k}" for k in KINDS] + [""]:
        pr, ratio = m[f"perf/padding_ratio{sfx}"], m[f"perf/xla_over_formula{sfx}"]
        assert 1 / pr <= ratio <= pr * (1 + ELEMENTWISE_ALLOWANCE), (sfx, ratio, pr)
        # Padding is all of the gap but the elementwise share.
        assert ratio >= pr
    # The padding figures by hand. A forward over `tokens` query slots with `pairs` (query, key)
    # pairs costs 2N per token + A per pair (N, A: the golden-tested matmul_params and
    # attention_flops_per_pair).
    n2, a = 2.0 * matmul_params(cfg), attention_flops_per_pair(cfg)

    def fwd(tokens, pairs):
        return n2 * tokens + a * pairs

    # Entropy: 3 prompts of 6 tokens (causal: 21 pairs each) on an 8 x 16 padded batch (dense).
    assert m["perf/token_padding_ratio/entropy"] == pytest.approx(8 * 16 / 18)
    assert m["perf/padding_ratio/entropy"] == pytest.approx(
        fwd(8 * 16, 8 * 16 * 16) / fwd(18, 3 * 21))
    # Old log-probs and training: the 16 x 22 packed batch against its real rows.
    lens = one_step["batch"]["valid"].sum(axis=1)
    lens = lens[lens > 0]
    real = fwd(lens.sum(), (lens * (lens + 1) / 2).sum())
    for kind in ("old_logprob", "train"):
        assert m[f"perf/token_padding_ratio/{kind}"] == pytest.approx(16 * 22 / lens.sum())
        assert m[f"perf/padding_ratio/{kind}"] == pytest.approx(fwd(16 * 22, 16 * 22 * 22) / real)
    # Generation: 32 rows x (16 prompt slots + the decode steps run, at most the cap of 6).
    padded = acc.totals["generation"]["padded_tokens"]
    steps = padded / 32 - 16
    assert steps == int(steps) and max(int(g.lengths.max()) for g in groups) <= steps <= 6
    gen = acc.totals["generation"]
    prompt_tokens = 4 * 3 * 6  # 4 samples of 3 prompts of BOS + "i+ii="
    assert gen["tokens"] == prompt_tokens + sum(int(g.lengths.sum()) for g in groups)
    assert gen["calls"] == 1 and acc.totals["entropy"]["tokens"] == 3 * 6
    # Two epochs of the 12 real rows (prompt + response each).
    assert acc.totals["train"]["tokens"] == 2 * int(one_step["batch"]["valid"].sum())
    assert m["perf/pflops"] == pytest.approx(sum(m[f"perf/pflops/{k}"] for k in KINDS))


def test_sample_reports_the_decode_steps_run(one_step):
    res = one_step["sampler"].sample(one_step["params"], PROMPTS, 4, seed=1)
    # The loop runs until every row, padding rows included, has ended, or to the cap.
    assert res.lengths.max() <= res.shape.steps <= 6
    assert res.shape == SampleShape(rows=32, prompt_len=16, max_new=6, steps=res.shape.steps,
                                    greedy=False, use_top_p=False)
    np.testing.assert_array_equal(res.prompt_lens, np.repeat([5, 8, 3], 4))


def test_charging_compiles_once_per_shape(one_step):
    acc, ctx, tr = one_step["acc"], one_step["ctx"], one_step["tr"]
    sampler, entropy = one_step["sampler"], one_step["entropy"]
    compiles = (acc.cost_compiles, sampler.compile_count, entropy.compile_count, tr.compile_count)
    assert compiles[0] == 8  # 1 and 2 rows per kind: each ran at one length
    calls = {k: acc.totals[k]["calls"] for k in KINDS}
    params, opt = one_step["params"], one_step["opt"]
    for step in range(2, 4):
        ctx.begin_step(step, params)
        ctx.prompt_entropy([0, 2])
        ctx.rollout([2, 1, 0], 4)
        acc.charge_logps(one_step["batch"])
        params, opt, _ = tr.step(params, opt, one_step["batch"], seed=step)
        acc.charge_train(one_step["batch"])
    # Same buckets: no new cost analysis, and the analysis never retraced the real functions.
    assert (acc.cost_compiles, sampler.compile_count, entropy.compile_count,
            tr.compile_count) == compiles
    assert {k: acc.totals[k]["calls"] - calls[k] for k in KINDS} == dict.fromkeys(KINDS, 2)


def test_state_dict_round_trip(one_step, tiny_policy):
    acc = one_step["acc"]
    state = json.loads(json.dumps(acc.state_dict()))
    fresh = Accountant(tiny_policy[0], tiny_policy[2])
    assert fresh.metrics()["perf/pflops"] == 0.0
    fresh.load_state_dict(state)
    assert fresh.metrics() == acc.metrics()
    assert isinstance(fresh.totals["train"]["tokens"], int)


def test_accounting_does_not_import_the_rollout_package():
    """One direction only: the sampler (and the trainer, the entropy pass) import accounting's
    helpers; accounting imports none of them, not even for type checking or lazily."""
    import ast
    import inspect

    import frontier_rl.fit.accounting
    import frontier_rl.rollout.sampler

    def imported(module):
        names = set()
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
        return names

    assert "frontier_rl.fit.accounting" in imported(frontier_rl.rollout.sampler)
    own = {n for n in imported(frontier_rl.fit.accounting) if n.startswith("frontier_rl")}
    assert own == {"frontier_rl.models.config"}, own


def _one_of_each(tiny_policy, tokenizer, *, rows: int, entropy_rows: int, max_new: int):
    """A sampler, a prompt-entropy pass and a one-update trainer over the tiny policy."""
    from frontier_rl.entropy import PromptEntropy

    cfg, graphdef, _ = tiny_policy
    sampler = Sampler(graphdef, cfg, eos_id=tokenizer.eos_token_id,
                      pad_id=tokenizer.pad_token_id, prompt_buckets=(16,), batch_buckets=(rows,),
                      max_new_tokens=max_new)
    entropy = PromptEntropy(graphdef, pad_id=tokenizer.pad_token_id, prompt_buckets=(16,),
                            batch_buckets=(entropy_rows,))
    tr = Trainer(graphdef, LOSSES["grpo"], make_optimizer(OptimConfig()),
                 sharding.make_mesh(devices=jax.devices()[:1]), epochs=1, minibatches=1)
    return sampler, entropy, tr


def test_cost_programs_are_two_rows_on_the_cpu(tiny_policy, tokenizer, monkeypatch):
    """Every cost program is lowered for the CPU device with at most two rows of token ids,
    whatever rows the charged call ran at (a GPU/TPU compiler never sees a full-size one)."""

    lowered = []
    real_lower = accounting._lower

    def spy(fn, args):
        leaves = jax.tree.leaves(args)
        lowered.append(([leaf.sharding.device_set for leaf in leaves],
                        [leaf.shape for leaf in leaves if leaf.dtype == np.int32]))
        return real_lower(fn, args)

    monkeypatch.setattr(accounting, "_lower", spy)
    cfg, _, params = tiny_policy
    sampler, entropy, tr = _one_of_each(tiny_policy, tokenizer, rows=64, entropy_rows=48,
                                        max_new=4)
    acc = Accountant(cfg, params, sampler=sampler, entropy=entropy, trainer=tr)
    acc.charge_generation(sampler.sample(params, PROMPTS * 20, 1, seed=0))
    acc.charge_entropy([5] * 40)
    batch = {"tokens": np.ones((32, 20), np.int32), "valid": np.ones((32, 20), np.int32)}
    acc.charge_logps(batch)
    acc.charge_train(batch)
    # 1 and 2 rows for each kind; generation's analysis is two programs (prefill, decode step)
    assert acc.cost_compiles == 2 * 4 and len(lowered) == 2 * 5
    cpu = jax.devices("cpu")[0]
    assert all(devices == {cpu} for devs, _ in lowered for devices in devs)
    assert max(shape[0] for _, shapes in lowered for shape in shapes if shape) <= max(COST_ROWS)
    assert set(acc.costs) == {("generation", 64, 16, 4, False, False, -1), ("entropy", 48, 16),
                              ("old_logprob", 32, 20), ("train", 32, 20)}


@pytest.mark.slow  # CI runs it: four whole-batch compiles, the check of the line itself
def test_the_line_through_two_rows_is_the_whole_batch_cost(tiny_policy, tokenizer):
    """The cost at R rows read off the line through 1 and 2 rows equals a whole-batch compile
    (within 2%; measured 0.1-0.6% at the shapes below)."""
    import dataclasses

    from frontier_rl.fit.accounting import abstract

    p = abstract(tiny_policy[2])
    sampler, entropy, tr = _one_of_each(tiny_policy, tokenizer, rows=64, entropy_rows=64,
                                        max_new=8)
    sh = SampleShape(rows=1, prompt_len=16, max_new=8, steps=8, greedy=False, use_top_p=True)
    programs = {
        "generation": lambda r: sampler.cost_analysis(p, dataclasses.replace(sh, rows=r)),
        "entropy": lambda r: entropy.cost_analysis(p, r, 16),
        "old_logprob": lambda r: tr.logps_cost(p, r, 24),
        "train": lambda r: tr.update_cost(p, r, 24),
    }
    for kind, cost in programs.items():
        line = accounting._line(cost(1), cost(2), 64)
        whole = cost(64)
        for a, b in zip(np.atleast_1d(line), np.atleast_1d(whole), strict=True):
            assert a == pytest.approx(b, rel=0.02), kind


def test_a_process_without_the_cpu_backend_is_told_which_variable(monkeypatch):
    def no_cpu(backend=None):
        raise RuntimeError("Unknown backend cpu")

    monkeypatch.setattr(jax, "devices", no_cpu)
    with pytest.raises(RuntimeError, match="JAX_PLATFORMS"):
        accounting.host_device()


def _cost_programs(cfg, tokenizer):
    """Each kind's cost program at 2 rows for a policy of `cfg` (abstract parameters)."""
    import dataclasses

    from frontier_rl.models import abstract_params

    graphdef, params = abstract_params(cfg)
    sampler, entropy, tr = _one_of_each((cfg, graphdef, params), tokenizer, rows=2,
                                        entropy_rows=2, max_new=4)
    sh = SampleShape(rows=2, prompt_len=16, max_new=4, steps=4, greedy=False, use_top_p=True)
    return {
        "generation": lambda: sampler.cost_analysis(params, dataclasses.replace(sh)),
        "entropy": lambda: entropy.cost_analysis(params, 2, 16),
        "old_logprob": lambda: tr.logps_cost(params, 2, 24),
        "train": lambda: tr.update_cost(params, 2, 24),
    }


def test_scanned_layers_are_counted_as_often_as_they_run(tokenizer):
    """XLA counts a scan body once: the cost programs unroll the layers, so a scanned model's
    FLOPs equal the unscanned model's (within 2%) instead of about 1/layers of them."""
    import dataclasses

    cfg = ModelConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                      num_layers=6, num_heads=4, num_kv_heads=2, head_dim=8, remat="full")
    plain = {k: f() for k, f in _cost_programs(cfg, tokenizer).items()}
    scanned = {k: f() for k, f in _cost_programs(
        dataclasses.replace(cfg, scan_layers=True), tokenizer).items()}
    for kind in KINDS:
        for a, b in zip(np.atleast_1d(scanned[kind]), np.atleast_1d(plain[kind]), strict=True):
            assert a == pytest.approx(b, rel=0.02), kind


def test_cost_programs_never_lower_a_device_kernel_on_the_cpu(tokenizer, monkeypatch):
    """A policy whose attention resolved to cuDNN (a GPU run's graph) is costed on the CPU with
    XLA's attention: cuDNN's kernel has no CPU lowering, and its FLOPs would not be counted."""
    import dataclasses

    lowered = []
    real_lower = accounting._lower

    def spy(fn, args):
        out = real_lower(fn, args)
        lowered.append(out.as_text())
        return out

    monkeypatch.setattr(accounting, "_lower", spy)
    cfg = ModelConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                      num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8, dtype="bfloat16",
                      attention="cudnn", attention_chunk=8)
    costs = {k: f() for k, f in _cost_programs(cfg, tokenizer).items()}
    xla = {k: f() for k, f in _cost_programs(
        dataclasses.replace(cfg, attention="xla"), tokenizer).items()}
    assert len(lowered) == 2 * 5
    assert not any("cudnn" in text for text in lowered)
    for kind in KINDS:
        assert np.all(np.isfinite(costs[kind])) and np.all(np.asarray(costs[kind]) > 0)
        assert costs[kind] == xla[kind], kind


def test_a_store_lets_another_run_skip_the_cost_programs(one_step, tiny_policy, tmp_path):
    """A second accountant with the same store key reads the first one's costs instead of
    compiling them, and charges the same FLOPs; another key compiles its own."""
    sampler, entropy, tr = one_step["sampler"], one_step["entropy"], one_step["tr"]
    batch, params = one_step["batch"], tiny_policy[2]  # one_step's were donated to updates
    res = sampler.sample(params, PROMPTS, 4, seed=1)

    def charged(key):
        acc = Accountant(tiny_policy[0], params, sampler=sampler, entropy=entropy, trainer=tr,
                         store=str(tmp_path), store_key=key)
        acc.charge_entropy([5, 8, 3])
        acc.charge_logps(batch)
        acc.charge_train(batch)
        acc.charge_generation(res)
        return acc

    first = charged({"run": "a"})
    assert first.cost_compiles == 8 and len(os.listdir(tmp_path)) == 4
    again = charged({"run": "a"})
    assert again.cost_compiles == 0 and again.metrics() == first.metrics()
    other = charged({"run": "b"})
    assert other.cost_compiles == 8 and other.metrics() == first.metrics()
    for name in os.listdir(tmp_path):  # a damaged entry is analysed again, never trusted
        (tmp_path / name).write_text("{")
    assert charged({"run": "a"}).cost_compiles == 8


# ----------------------------------------------------------------------------- HeaPA's convention

QWEN3_8B = ModelConfig(vocab_size=151936, hidden_size=4096, intermediate_size=12288,
                       num_layers=36, num_heads=32, num_kv_heads=8, head_dim=128, qk_norm=True)


class _Programs:
    """Stand-ins for the sampler, the prompt-entropy pass and the trainer: XLA's side of the
    accounts is not under test here (an 8B cost program would take minutes to compile)."""

    epochs, minibatches = 2, 2

    def cost_analysis(self, params, *shape):
        return (1.0, 1.0) if len(shape) == 1 else 1.0

    def padded_shape(self, prompt_lens):
        return 8, 256

    def logps_cost(self, params, rows, length):
        return 1.0

    update_cost = logps_cost


def _result(prompt_lens, lengths, shape):
    rows, cap = len(prompt_lens), shape.max_new
    zeros = np.zeros((rows, cap), np.float32)
    return SampleResult(tokens=np.zeros((rows, cap), np.int32), logps=zeros, entropies=zeros,
                        lengths=np.asarray(lengths, np.int32), finished=np.ones(rows, bool),
                        prompt_lens=np.asarray(prompt_lens, np.int32), shape=shape)


def test_heapa_convention_reproduces_the_released_code_on_qwen3_8b():
    """One step of Qwen3-8B at HeaPA's shapes: 2 prompts x n = 4 rolled out in a 256-token
    prompt bucket with a 1,024-token cap, the 8 sequences packed one per 1,280-token row (the
    "pad" layout: verl's prompt + response width) in 16 rows. The expected figure is the
    released code's expression (horizon-rl/HeaPA at commit 8b4cafb,
    recipe/dapo/dapo_ray_trainer_HeaPA.py, EfficiencyAnalyzer; the line numbers are that
    file's) written out by hand."""
    fake = _Programs()
    acc = Accountant(QWEN3_8B, {}, sampler=fake, entropy=fake, trainer=fake)
    shape = SampleShape(rows=8, prompt_len=256, max_new=1024, steps=900, greedy=False,
                        use_top_p=False)
    acc.charge_entropy([180, 231])
    # the figure charges the cap and the bucket, whatever the lengths and the steps run
    acc.charge_generation(_result([180] * 4 + [231] * 4, [900, 12, 40, 700, 1, 2, 3, 4], shape))
    lens = [180 + 900, 180 + 12, 180 + 40, 180 + 700, 231 + 1, 231 + 2, 231 + 3, 231 + 4]
    valid = np.zeros((16, 1280), np.int32)
    for r, n in enumerate(lens):
        valid[r, :n] = 1
    batch = {"tokens": np.zeros((16, 1280), np.int32), "valid": valid}
    acc.charge_logps(batch)  # old-policy recompute
    acc.charge_logps(batch)  # reference policy
    acc.charge_train(batch)

    L, H, I, V = 36, 4096, 12288, 151936  # noqa: E741 (the released code's symbols)

    def forward(batch_size, seq_length):
        # estimate_forward_tflops, full forward (ll. 1402-1414): per token
        # L * (4 H^2 [QKVO] + 4 seq H [attention] + 8 H I [FFN]) + 2 H V [embed + output]
        per_token = L * (4 * H * H + 4 * seq_length * H + 8 * H * I) + H * V * 2
        return batch_size * seq_length * per_token

    # rollout_generation (l. 7050): batch_size = prompts x n = 8, seq_length = the padded
    # prompt width 256, new_tokens = the response length 1024; estimate_forward_tflops'
    # generation branch (ll. 1383-1400): avg_context = 256 + 1024 / 2 = 768, per token
    # L * (4 H^2 + 4 * 768 * H + 8 H I) + H V, times batch_size * new_tokens
    gen = 8 * 1024 * (L * (4 * H * H + 4 * 768 * H + 8 * H * I) + H * V)
    # reward_computation (l. 7125): 0.1 x a forward over prompt + response (l. 1470)
    reward = 0.1 * forward(8, 256 + 1024)
    # old_log_prob and ref_log_prob (ll. 7516, 7549): a forward each (l. 1466)
    logps = 2 * forward(8, 1280)
    # actor_update (l. 7596): forward + backward, backward = 2 x forward (ll. 1429, 1454-1456),
    # once per step (the trainer's 2 epochs x 2 mini-batches not multiplied)
    train = forward(8, 1280) + 2 * forward(8, 1280)
    # HIVE's prompt-entropy pass has no stage there: a forward over (prompts, prompt width),
    # what its code charges a stage it does not know (l. 1478)
    entropy = forward(2, 256)
    m = acc.metrics()
    for kind, want in [("generation", gen + reward), ("old_logprob", logps), ("train", train),
                       ("entropy", entropy)]:
        assert m[f"perf/pflops_heapa/{kind}"] == pytest.approx(want / 1e15, rel=1e-12), kind
    total = gen + reward + logps + train + entropy
    assert m["perf/pflops_heapa"] == pytest.approx(total / 1e15, rel=1e-12)
    assert m["perf/pflops_heapa"] == pytest.approx(1.14433229586432, rel=1e-12)  # the golden value
    # a free-text sample (HeaPA's augmentation generation) is not rewarded: no 0.1 forward
    acc.charge_generation(_result([180], [5], shape), scored=False)
    assert acc.metrics()["perf/pflops_heapa/generation"] == pytest.approx(
        (gen + reward + 1024 * (L * (4 * H * H + 4 * 768 * H + 8 * H * I) + H * V)) / 1e15,
        rel=1e-12)


def test_heapa_beside_xla_and_the_formula_on_a_tiny_run(one_step, tiny_policy):
    """The three figures of one real step, where their ratios are predictable."""
    cfg = tiny_policy[0]
    acc = Accountant(cfg, tiny_policy[2])
    acc.load_state_dict(one_step["state"])
    m = acc.metrics()
    batch = one_step["batch"]
    rows, length = batch["tokens"].shape
    seqs = int((batch["valid"] > 0).any(axis=1).sum())
    assert (rows, length, seqs) == (16, 22, 12)
    # HeaPA charges the padded row of each sequence (padding rows left out) densely; XLA the
    # padded rows too; the formula the real tokens, causally. HeaPA's per-token count exceeds
    # the formula's here (8 H I against SwiGLU's 6 H I outweighs 4 H^2 for q, k, v, o), so:
    old = m["perf/pflops_heapa/old_logprob"]
    assert old == pytest.approx(heapa_forward_flops(cfg, seqs, length) / 1e15, rel=1e-12)
    assert old > dense_flops(cfg, seqs * length, length) / 1e15
    assert m["perf/pflops_formula/old_logprob"] < old < m["perf/pflops/old_logprob"]
    # Entropy: 3 prompts of 6 tokens in a 16-token bucket, 8 rows run.
    ent = m["perf/pflops_heapa/entropy"]
    assert ent == pytest.approx(heapa_forward_flops(cfg, 3, 16) / 1e15, rel=1e-12)
    assert m["perf/pflops_formula/entropy"] < ent < m["perf/pflops/entropy"]
    # Training: HeaPA charges 3 forwards once a step; the formula 3 per epoch (2 here) and
    # XLA the two epochs' updates (optimizer and elementwise work on top).
    assert m["perf/pflops_heapa/train"] == pytest.approx(3 * old, rel=1e-12)
    assert m["perf/pflops_formula/train"] == pytest.approx(
        6 * m["perf/pflops_formula/old_logprob"], rel=1e-12)
    assert m["perf/pflops/train"] > 5 * m["perf/pflops/old_logprob"]
    # Generation: the 12 rows charged for the whole cap of 6 at the 16-token prompt bucket,
    # plus the reward's tenth of a forward over 16 + 6; the steps run do not enter.
    from frontier_rl.fit.accounting import HEAPA_REWARD, heapa_generation_flops

    gen = heapa_generation_flops(cfg, 12, 16, 6) + HEAPA_REWARD * heapa_forward_flops(cfg, 12, 22)
    assert m["perf/pflops_heapa/generation"] == pytest.approx(gen / 1e15, rel=1e-12)
    assert m["perf/pflops_heapa"] == pytest.approx(
        sum(m[f"perf/pflops_heapa/{k}"] for k in KINDS), rel=1e-12)


def test_a_checkpoint_from_before_heapa_loads_it_as_zero(one_step, tiny_policy):
    old = {kind: {f: v for f, v in t.items() if f != "heapa_flops"}
           for kind, t in one_step["state"].items()}
    acc = Accountant(tiny_policy[0], tiny_policy[2])
    acc.load_state_dict(old)
    m = acc.metrics()
    assert m["perf/pflops_heapa"] == 0.0 and m["perf/pflops"] > 0
    assert all(acc.totals[k]["heapa_flops"] == 0.0 for k in KINDS)
