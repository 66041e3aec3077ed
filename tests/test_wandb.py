"""log.wandb: the metrics reach a Weights & Biases run (offline here: no network, no key)."""

import glob
import os

import pytest

from frontier_rl.run import metrics


def test_records_reach_an_offline_wandb_run(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    w = metrics.MetricWriter(str(tmp_path), tensorboard=False, wandb="frontier-rl-test",
                             config={"seed": 3})
    w.write(0, {"eval/avg@8/4op": 12.5, "evalset/prompt_buckets": ["4op"]})
    w.write(1, {"train/loss": 0.25, "rollout/total": 512})
    w.close()
    files = glob.glob(os.path.join(tmp_path, "wandb", "offline-run-*", "run-*.wandb"))
    assert len(files) == 1, "auto mode without WANDB_API_KEY must log offline"
    data = open(files[0], "rb").read()
    for key in (b"eval/avg@8/4op", b"train/loss", b"rollout/total"):
        assert key in data
    assert b"evalset/prompt_buckets" not in data  # only numbers are logged
    # the JSONL record is unchanged by the extra writer
    assert len(open(tmp_path / "metrics.jsonl").readlines()) == 2


def test_a_missing_wandb_package_is_one_clear_error(tmp_path, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_wandb(name, *a, **k):
        if name == "wandb":
            raise ImportError("No module named 'wandb'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_wandb)
    with pytest.raises(ImportError, match=r"pip install 'frontier_rl\[wandb\]'"):
        metrics.MetricWriter(str(tmp_path), tensorboard=False, wandb="p")
