"""Paper-size support around the training loop: presets, export, the NaN guard, profiling,
the fit check and MFU."""

import json
import math
import os

import numpy as np
import pytest

from frontier_rl import config_lib, policy, train
from frontier_rl.fit import command as fit
from frontier_rl.fit import perf
from frontier_rl.models import presets

# Parameter counts of the released checkpoints (model cards: total, and without embeddings
# where the card states it), in billions.
CARD_PARAMS = {
    "qwen2.5-0.5b": (0.49, None), "qwen2.5-math-1.5b": (1.54, None),
    "qwen2.5-math-7b": (7.62, None), "qwen3-0.6b": (0.6, 0.44), "qwen3-1.7b": (1.7, 1.4),
    "qwen3-4b": (4.0, 3.6), "qwen3-8b": (8.2, 6.95), "llama3.2-1b": (1.24, None),
    # R1-Distill: 1.78B as its Hub page counts the safetensors (the 1.5B Qwen2.5-Math body plus
    # an untied 151,936 x 1,536 head); Qwen3-4B-Base: its weight index's 8,045,591,552 bf16
    # bytes (4.02B); Llama-3.2-3B card: 3.21B; Qwen2.5-7B-Instruct card: 7.61B, 6.53B without
    # embeddings.
    "deepseek-r1-distill-qwen-1.5b": (1.78, None), "qwen3-4b-base": (4.02, 3.6),
    "qwen3-4b-instruct-2507": (4.0, 3.6), "llama3.2-3b-instruct": (3.21, None),
    "qwen2.5-7b-instruct": (7.61, 6.53),
}


@pytest.mark.parametrize("name", sorted(presets.PRESETS))
def test_presets_match_the_model_cards(name):
    cfg = presets.preset_config(name)
    total, non_emb = CARD_PARAMS[name]
    assert cfg.num_params() / 1e9 == pytest.approx(total, rel=0.03)
    if non_emb is not None:
        assert cfg.num_params(include_embeddings=False) / 1e9 == pytest.approx(non_emb, rel=0.03)


def test_scale_config_validates_every_preset():
    from configs import scale

    for name in presets.PRESETS:
        c = scale.get_config(name)
        assert c.model.preset == name and c.rl.batch_size * c.rl.group_size == 2048
    with pytest.raises(ValueError, match="unknown arg"):
        scale.get_config("qwen9-1t")


def test_perf_peaks():
    assert perf.peak_flops("NVIDIA H200") == 989e12
    assert perf.peak_flops("NVIDIA H100 PCIe") == 756e12
    assert perf.peak_flops("TPU v5 lite") == 197e12
    assert perf.peak_flops("TPU v5p") == 459e12
    assert math.isnan(perf.peak_flops("cpu"))


def _smoke(tmp_path, **overrides):
    from configs import arith_grpo

    c = arith_grpo.get_config("smoke")
    c.log.progress = False
    c.log.tensorboard = False
    return config_lib.validate(config_lib.set_fields(c, overrides))


def _torch_logits(path, tokens):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32)
    with torch.no_grad():
        return model(torch.tensor(tokens)).logits.numpy()


def test_export_every_and_cli_export_load_in_transformers(tmp_path):
    import jax
    from flax import nnx

    from frontier_rl.models import Transformer, hf

    workdir = str(tmp_path / "run")
    c = _smoke(tmp_path, **{"export.every": 2, "log.profile_steps": "3"})
    train.run(c, workdir)
    # export.every wrote steps 2 and 4; the CLI's export of the last checkpoint matches step 4.
    exported = tmp_path / "run" / "export"
    assert sorted(os.listdir(exported)) == ["step_2", "step_4"]
    out = policy.export_run(workdir, str(tmp_path / "hf"), step=None)
    for name in ("config.json", "generation_config.json", "tokenizer.json"):
        assert os.path.isfile(os.path.join(out, name)), name
    tokens = np.array([[1, 5, 7, 9, 3, 4]], np.int32)
    ours, mcfg = hf.load_pretrained(out)
    mine = np.asarray(ours(tokens, np.arange(6)[None])[0])
    np.testing.assert_allclose(_torch_logits(out, tokens), mine, atol=1e-4, rtol=1e-4)
    step4, _ = hf.load_pretrained(exported / "step_4")
    np.testing.assert_allclose(np.asarray(step4(tokens, np.arange(6)[None])[0]), mine,
                               atol=1e-6)
    # The exported weights are the trained ones: step 2's differ from step 4's.
    step2, _ = hf.load_pretrained(exported / "step_2")
    assert not np.allclose(np.asarray(step2(tokens, np.arange(6)[None])[0]), mine)
    # A bad step is named.
    with pytest.raises(ValueError, match="--step=3"):
        policy.export_run(workdir, str(tmp_path / "hf3"), step=3)
    # log.profile_steps wrote a trace.
    traces = [f for _, _, fs in os.walk(tmp_path / "run" / "profile") for f in fs]
    assert any(f.endswith(".xplane.pb") for f in traces), traces
    # MFU is NaN on a CPU (no peak), tokens/s is a positive figure.
    rec = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")][-1]
    assert rec["perf/tokens_per_s"] > 0
    del jax, nnx, Transformer, mcfg


def test_nan_guard_stops_a_diverged_run(tmp_path):
    # lr 1e30: the first update sends the weights to ~1e30, every later loss is non-finite, so
    # each later step skips its updates and the run stops after rl.max_bad_steps of them.
    c = _smoke(tmp_path, **{"rl.learning_rate": 1e30, "rl.max_bad_steps": 2,
                            "rl.num_steps": 6, "rl.epochs": 1, "rl.minibatches": 1})
    with pytest.raises(train.RunError, match="rl.max_bad_steps=2"):
        train.run(c, str(tmp_path / "run"))
    recs = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    skipped = [r.get("train/skipped_updates", 0) for r in recs if "train/loss" in r]
    assert skipped[0] == 0 and all(s > 0 for s in skipped[1:]) and len(skipped) == 3


def test_fit_reports_bytes_per_device_on_a_fake_mesh(monkeypatch, capsys):
    import jax

    assert jax.device_count() >= 8, "tests/conftest.py creates 8 fake CPU devices"
    from configs import arith_grpo

    c = arith_grpo.get_config("smoke")
    # The usable share is the memory fraction launch/env.sh gives JAX.
    monkeypatch.delenv("XLA_CLIENT_MEM_FRACTION", raising=False)
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.9")
    report = fit.check(c, fit.parse_mesh("data=2,fsdp=2,model=2"), "h200", say=lambda *a, **k: 0)
    assert report["usable_bytes"] == int(0.9 * 141 * 10**9)
    fit.print_report(report)
    assert "usable 118.2 = 0.9 x: XLA_PYTHON_CLIENT_MEM_FRACTION=0.9" in capsys.readouterr().out
    for key in ("train_step_bytes_per_device", "sampler_bytes_per_device",
                "entropy_bytes_per_device", "device_bytes", "fits"):
        assert key in report
    assert report["fits"] is True and report["device_bytes"] == 141 * 10**9
    assert 0 < report["train_step_bytes_per_device"] < 10**8
    # Sharding over more devices splits the parameters: per-device arguments shrink.
    one = fit.check(c, fit.parse_mesh("data=1,fsdp=1,model=1"), "h200", say=lambda *a, **k: 0)
    assert report["train_step"]["arguments"] < one["train_step"]["arguments"]
    with pytest.raises(ValueError, match="--mesh"):
        fit.parse_mesh("data=2,fsdp=x")
    with pytest.raises(ValueError, match="--device"):
        fit.check(c, fit.parse_mesh("data=1"), "h900")
