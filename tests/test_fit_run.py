"""`frontier-rl fit` sizes the run the selector makes: row counts recorded on the synthetic
learner (HIVE's first round and top-ups, DS's generation batches, HeaPA's augmentation,
evaluation), the sampler's row buckets, and the program that does not fit named with its field."""

import pytest

from frontier_rl.fit import command as fit
from frontier_rl.fit.shapes import row_bucket
from frontier_rl.rollout.sampler import Sampler


def _max_rows(sim, kind):
    return max(p * (n if kind in ("rollout", "update") else 1)
               for k, p, n in sim["calls"] if k == kind)


def test_row_buckets_pad_under_ten_percent():
    prev = 0
    for n in range(1025, 16_385):
        b = row_bucket(n)
        assert n <= b <= 1.1 * n, (n, b)
        assert b >= prev and row_bucket(b) == b  # monotone, a bucket is its own bucket
        prev = b
    # HIVE's 1.5 x 256 prompts x 8 plus a top-up: 3,136 rows ran as 4,096 with steps of 1,024.
    assert row_bucket(3136) == 3328
    for n in (2048, 4096, 8192):
        assert row_bucket(n) == n
    # Up to 1,024 rows: 8, 16, 32, 64, then 256, 512, 1,024 (HIVE's first round of 96 x 8
    # runs as 1,024); a paper run's small calls (16 or 32 rows) no longer run as 64.
    assert [row_bucket(n) for n in (1, 8, 9, 16, 17, 32, 33, 64, 65, 256, 300, 512, 768,
                                    1024)] == [8, 8, 16, 16, 32, 32, 64, 64, 256, 256, 512,
                                               512, 1024, 1024]
    # A sampler on a mesh pads the bucket to its row shards; given buckets are kept as before.
    assert Sampler.padded_rows(type("S", (), {"batch_buckets": None, "row_multiple": 48})(),
                               33) == 96
    assert Sampler.padded_rows(type("S", (), {"batch_buckets": (8, 32), "row_multiple": 1})(),
                               9) == 32


@pytest.mark.parametrize("name", ["arith_grpo", "arith_dapo", "arith_hive"])
def test_embedded_configs_use_few_sampler_buckets(name):
    import importlib

    c = importlib.import_module(f"configs.{name}").get_config()
    variants = fit._sampler_variants(c, fit.simulate(c, steps=10))
    for v in variants.values():
        assert len({row_bucket(r) for r in v["rows"]}) <= 6, v


def test_hive_and_ds_calls_exceed_batch_x_group():
    from configs import arith_dapo, arith_hive

    c = arith_hive.get_config()
    b, g = c.rl.batch_size, c.rl.group_size
    sim = fit.simulate(c, steps=5)
    rollouts = [(p, n) for k, p, n in sim["calls"] if k == "rollout"]
    # HIVE's first round asks for 1.5 x B_t candidates, each rolled out G times.
    assert rollouts[0] == (round(1.5 * b), g)
    assert _max_rows(sim, "rollout") > b * g
    assert _max_rows(sim, "entropy") > b  # Stage 2 scores more candidates than it keeps
    assert _max_rows(sim, "update") == b * g
    # With rows_per_call the engine splits a call into sampler calls of whole prompts.
    c.rollout.rows_per_call = 256
    rows = fit._sampler_variants(c, sim)[(c.rollout.max_new_tokens, False, False, -1)]["rows"]
    assert max(rows) == 256 and sum(rows) == sum(p * n for p, n in rollouts)

    d = arith_dapo.get_config()
    sim = fit.simulate(d, steps=3)
    # DS oversamples: generation batches of ceil(1.5 B) prompts.
    assert {p for k, p, _ in sim["calls"] if k == "rollout"} == {round(1.5 * b)}
    assert _max_rows(sim, "rollout") == round(1.5 * b) * g > b * g


def test_an_eval_top_k_is_a_sampler_program_of_its_own():
    """Evaluation at the rollouts' cap and top-p shares their program until it has a top-k."""
    from configs import arith_hive

    c = arith_hive.get_config("smoke")
    c.eval.greedy = False
    c.eval.top_p = c.rollout.top_p
    sim = fit.simulate(c, steps=2)
    assert [v["purposes"] for v in fit._sampler_variants(c, sim).values()] == [
        ["rollout", "eval"]]
    c.eval.top_k = 50
    variants = fit._sampler_variants(c, sim)
    assert {k: v["purposes"] for k, v in variants.items()} == {
        (c.rollout.max_new_tokens, False, False, -1): ["rollout"],
        (c.rollout.max_new_tokens, False, False, 50): ["eval"]}


def test_heapa_augmentation_is_a_sampler_call_at_the_runs_cap():
    from configs import arith_heapa, math_heapa

    c = arith_heapa.get_config("smoke")
    sim = fit.simulate(c, steps=3)
    assert any(k == "generate" for k, _, _ in sim["calls"])
    purposes = [p for v in fit._sampler_variants(c, sim).values() for p in v["purposes"]]
    assert "augmentation" in purposes
    # The sim writes arith continuations; a math run's template augmentation has its own cap.
    m = math_heapa.get_config("smoke")
    assert fit._aug_cap(m, 8) == 400 and fit._aug_cap(c, 8) == 8
    m.selector.heapa.aug_max_new_tokens = 256
    assert fit._aug_cap(m, 8) == 256


def test_the_program_that_does_not_fit_is_named_with_its_field(monkeypatch, capsys):
    from configs import arith_hive

    c = arith_hive.get_config("smoke")
    c.eval.greedy = False
    c.eval.top_p = c.rollout.top_p  # evaluation shares the rollouts' sampler program
    sim = fit.simulate(c, steps=4)
    monkeypatch.delenv("XLA_CLIENT_MEM_FRACTION", raising=False)
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.00001")  # ~1.4 MB of an H200
    r = fit.check(c, fit.parse_mesh("data=1"), "h200", say=lambda *a, **k: 0, sim=sim,
                  kinds=("sampler",))
    (p,) = r["programs"]
    assert p["program"] == "sampler: rollout, eval" and p["rows"] == 1024  # eval's chunk
    assert not p["fits"] and not r["fits"]
    assert "rollout.rows_per_call" in r["advice"][0] and "1024 rows x 32+8" in r["advice"][0]
    assert any(name == "train step" for name, _ in r["not_sized"])
    fit.print_report(r)
    out = capsys.readouterr().out
    assert "fits: NO" in out and "sampler: rollout, eval" in out


@pytest.mark.parametrize("micro,advice", [(4, "reduce rl.micro_batch_size (now 4)"),
                                           (2, "raise mesh.model")])
def test_fewer_rows_per_micro_batch_is_advised_only_where_they_fill_the_shards(
        monkeypatch, micro, advice):
    """With 2 row shards, a micro-batch of 4 can halve; one of 2 cannot (2 rows per micro-batch
    are the fewest the mesh takes), so the advice is tensor parallelism instead."""
    from configs import arith_grpo

    c = arith_grpo.get_config("smoke")
    c.rl.micro_batch_size = micro
    sim = fit.simulate(c, steps=2)
    monkeypatch.delenv("XLA_CLIENT_MEM_FRACTION", raising=False)
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.00001")
    r = fit.check(c, fit.parse_mesh("data=1,fsdp=2"), "h200", say=lambda *a, **k: 0, sim=sim,
                  kinds=("train_step",))
    assert not r["fits"] and advice in r["advice"][0]


def test_kl_reference_old_logprobs_and_probe_are_planned():
    from configs import arith_hive

    c = arith_hive.get_config("smoke")
    c.rl.kl_coef = 0.1
    c.rollout.engine, c.rollout.sglang.url = "sglang", "http://127.0.0.1:31000"
    sim = fit.simulate(c, steps=2)
    r = fit.check(c, fit.parse_mesh("data=1"), "h200", say=lambda *a, **k: 0, sim=sim,
                  kinds=())
    names = dict(r["not_sized"])
    # An external engine generates: no sampler program; the trainer recomputes the old
    # policy's log-probs (one program with the KL reference's) and runs the weight-sync probe.
    assert any(n.startswith("sampler: rollout") and "rollout.engine=sglang" in why
               for n, why in names.items())
    assert "log-probs (old policy and KL reference)" in names
    assert "weight-sync probe" in names and "train step" in names
    assert r["reference_bytes_per_device"] > 0


@pytest.mark.parametrize("max_new", [100, 40])
def test_the_weight_sync_probe_is_sized_at_the_shape_the_trainer_sends(tmp_path, max_new):
    """The probe sends one prompt and its continuation padded to the engine's probe length
    (rollout/sglang.py), through Trainer.response_logps; fit's probe program has that shape,
    not the run's rows of prompt bucket + rollout.max_new_tokens."""
    import types

    import jax
    import numpy as np

    from configs import arith_grpo
    from frontier_rl.models import abstract_params
    from frontier_rl.rl import sharding, update
    from frontier_rl.rollout.sglang import SGLangEngine

    c = arith_grpo.get_config("smoke")
    c.rollout.engine, c.rollout.sglang.url = "sglang", "http://127.0.0.1:31000"
    c.fit.prompt_len, c.rollout.max_new_tokens = 33, max_new  # the longest prompt: 33 tokens
    r = fit.check(c, fit.parse_mesh("data=1"), "h200", say=lambda *a, **k: 0,
                  sim=fit.simulate(c, steps=2), kinds=("probe",))
    (plan,) = r["programs"]
    assert plan["program"] == "weight-sync probe"

    # What the run's probe sends the trainer: the engine samples a continuation, the trainer's
    # log-probs of it come from response_logps (its device call recorded, not run).
    graphdef, _ = abstract_params(fit.model_config(c))
    trainer = update.make_trainer(c, graphdef, sharding.make_mesh(1, 1, 1,
                                                                  devices=jax.devices()[:1]))
    sent = []

    def logps(params, tokens, valid):
        sent.append(tokens.shape)
        return np.zeros((tokens.shape[0], tokens.shape[1] - 1), np.float32)

    trainer.logps = logps
    engine = SGLangEngine(c.rollout.sglang.url, pad_id=0, stop_ids=[], max_new_tokens=max_new,
                          sync_dir=str(tmp_path), probe_fn=lambda p, ids, resp: (
                              trainer.response_logps(p, ids, resp, pad_id=0)),
                          probe_ids=[1] * c.fit.prompt_len,
                          transport=lambda post: types.SimpleNamespace(close=lambda: None))
    engine.generate = lambda prompts, n, sampling: types.SimpleNamespace(
        tokens=np.ones((1, sampling.max_new_tokens), np.int32),
        lengths=np.array([sampling.max_new_tokens - 3]),
        logps=np.zeros((1, sampling.max_new_tokens), np.float32))
    engine._probe(None)
    engine.close()
    assert sent == [(plan["rows"], int(plan["tokens"]))]


def test_a_rollout_mesh_of_its_own_is_sized_apart_and_summed():
    """mesh.rollout=2 beside a trainer of data=2: the sampler and the prompt-entropy pass are
    compiled on the last two devices with nothing resident beside them, the trainer's programs
    on the first two with Adam's state, and the report gives each half and their sum. A stale
    run's old-policy log-probs are planned: the trainer recomputes them."""
    from configs import arith_hive

    c = arith_hive.get_config("smoke")
    c.rl.staleness, c.mesh.rollout = 1, 2
    sim = fit.simulate(c, steps=2)
    r = fit.check(c, fit.parse_mesh("data=2"), "h200", say=lambda *a, **k: 0, sim=sim)
    h = r["halves"]
    assert (h["train"]["devices"], h["rollout"]["devices"], h["sum"]["devices"]) == (2, 2, 4)
    kinds = {p["program"]: p["kind"] for p in r["programs"]}
    assert {kinds[n] for n in h["rollout"]["programs"]} == {"sampler", "entropy"}
    assert {kinds[n] for n in h["train"]["programs"]} == {"logps", "train_step"}
    opt = r["resident_optimizer_bytes_per_device"]
    assert opt > 0
    for p in r["programs"]:
        assert p["resident"] == {"sampler": 0, "entropy": 0, "logps": opt,
                                 "train_step": 0}[p["kind"]], p
    for half in ("train", "rollout"):
        mine = [p["bytes_per_device"] for p in r["programs"]
                if p["program"] in h[half]["programs"]]
        assert h[half]["peak_bytes_per_device"] == max(mine)
        assert h[half]["bytes"] == max(mine) * 2
    assert h["sum"]["bytes"] == h["train"]["bytes"] + h["rollout"]["bytes"]
    assert h["sum"]["node_bytes"] == 4 * r["device_bytes"] and h["sum"]["fits"] and r["fits"]

    c.mesh.rollout = 0  # shared: no halves, Adam's state beside the sampler
    r = fit.check(c, fit.parse_mesh("data=4"), "h200", say=lambda *a, **k: 0, sim=sim,
                  kinds=("sampler",))
    assert r["halves"] is None
    assert all(p["resident"] == opt for p in r["programs"])


def test_a_rollout_mesh_that_leaves_the_trainer_nothing_is_refused():
    import jax

    from frontier_rl.rl import sharding

    with pytest.raises(ValueError, match="mesh.rollout=8 leaves none"):
        sharding.split_meshes(rollout=8, devices=jax.devices()[:8])
    # no rollout mesh: the one mesh make_mesh gives, on the devices it would choose
    shared, same = sharding.split_meshes()
    assert shared is same and shared.devices.tolist() == sharding.make_mesh().devices.tolist()
    train, rollout = sharding.split_meshes(fsdp=2, rollout=4, rollout_model=2)
    assert dict(train.shape) == {"data": 2, "fsdp": 2, "model": 1}
    assert dict(rollout.shape) == {"data": 2, "fsdp": 1, "model": 2}
    assert not set(train.devices.flat) & set(rollout.devices.flat)
