"""End to end: the smoke run, resume equality, and clear errors on bad input."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from frontier_rl import config_lib, train
from frontier_rl.rollout.context import PolicyContext
from frontier_rl.run import metrics

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def smoke_config(**overrides):
    c = config_lib.shrink_for_smoke(config_lib.default_config())
    c.log.progress = False
    c.log.tensorboard = False
    c.eval.every = 0  # eval at step 0 and at the end only
    return config_lib.validate(config_lib.set_fields(c, overrides))


def _wall_clock(key: str) -> bool:
    """Measured, not computed: perf/* and durations (select/time_ms, teacher_latency_ms...)."""
    return key.startswith("perf/") or key.endswith(("_ms", "_s"))


def _assert_same_records(a, b):
    """Equal records, a failure naming the step and the keys that differ."""
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for x, y in zip(a, b, strict=True):
        assert x.keys() == y.keys(), (x["step"], x.keys() ^ y.keys())
        assert {k: (x[k], y[k]) for k in x if x[k] != y[k]} == {}, x["step"]


def _comparable(records, evals_at=None):
    """Everything but wall-clock figures (and the evaluation of step `evals_at`)."""
    return [{k: v for k, v in r.items() if not _wall_clock(k)
             and not (r["step"] == evals_at and k.startswith(("eval/", "evalset/")))}
            for r in records]


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("full"))
    final = train.run(smoke_config(), workdir)
    return workdir, final


def _evals(record, buckets):
    """The eval metrics worked out from the record's per-prompt correct counts (of k = 2)."""
    counts = record["evalset/correct_counts"]
    out = {}
    for b in [*sorted(set(buckets)), "all"]:
        mine = [c for c, pb in zip(counts, buckets, strict=True) if b in (pb, "all")]
        out[f"eval/avg@2/{b}"] = 100.0 * sum(mine) / (2 * len(mine))
        out[f"eval/pass@2/{b}"] = 100.0 * sum(c > 0 for c in mine) / len(mine)
        out[f"eval/pass@2_unbiased_n2/{b}"] = out[f"eval/pass@2/{b}"]  # n = k: the same
    return out


def test_smoke_run_writes_metrics(full_run):
    workdir, final = full_run
    records = metrics.read(os.path.join(workdir, "metrics.jsonl"))
    assert [r["step"] for r in records] == [0, 1, 2, 3, 4]
    assert records[-1]["rollout/total"] == 4 * 8 * 8  # steps x B x G
    # Evaluations at step 0 and at the end: every bucket's metrics, Avg@2 and pass@2 those of
    # the per-prompt counts recorded beside them (8 prompts per bucket).
    buckets = records[0]["evalset/prompt_buckets"]
    assert sorted(set(buckets)) == ["2op", "3op", "4op", "5op"] and len(buckets) == 32
    names = ("avg@2", "pass@2", "pass@2_unbiased_n2", "invalid@2", "response_len", "greedy")
    want_keys = {f"eval/{m}/{b}" for m in names for b in ["2op", "3op", "4op", "5op", "all"]}
    for r in (records[0], records[-1]):
        assert {k for k in r if k.startswith("eval/")} == want_keys | {"eval/verify_timeouts"}
        assert all(0 <= c <= 2 for c in r["evalset/correct_counts"])
        for k, v in _evals(r, buckets).items():
            assert r[k] == pytest.approx(v, abs=1e-9), k
        assert 1 <= r["eval/response_len/all"] <= 8  # EOS counted; the cap is 8 tokens
    assert not any(k.startswith("eval/") for r in records[1:-1] for k in r)  # eval.every=0
    assert {"train/loss", "train/pg_loss", "rollout/zero_var_frac"} <= set(records[1])
    for r in records[1:]:
        assert r["train/loss"] == r["train/pg_loss"]  # no KL term at kl_coef=0
    # The 2N-per-token rollout counter and the accountant count the same generated tokens.
    from frontier_rl.models import hf

    _, mcfg = hf.load_pretrained(os.path.join(workdir, "warmstart"))
    for r in records[1:]:
        assert r["perf/rollout_pflops"] * 1e15 == pytest.approx(
            2 * mcfg.num_params() * r["perf/tokens/generation"], rel=1e-9)
    assert records[-1]["perf/tokens/generation"] > records[1]["perf/tokens/generation"]
    assert os.path.exists(os.path.join(workdir, "warmstart", "model.safetensors"))
    assert final == {k: v for k, v in records[-1].items() if k.startswith("eval/")}


def test_eval_of_the_final_checkpoint_is_the_runs_final_eval(full_run, capsys):
    """`frontier-rl eval` on the saved step-4 checkpoint gives the run's own final figures."""
    from frontier_rl.evaluation import suite as eval_suite

    workdir, final = full_run
    out = eval_suite.run(smoke_config(), workdir)
    assert out["metrics"] == final


def test_interrupted_twice_then_resumed_equals_uninterrupted(full_run, tmp_path, monkeypatch):
    """One workdir, stopped twice. SIGTERM during step 1 (delivered while its metrics are
    written): the run checkpoints step 1, off the checkpoint.every=2 schedule, and returns with
    the process's SIGTERM handler put back. Rerun with rl.num_steps=2: it resumes at 1 and stops
    after step 2 (with a final eval there). Rerun as configured: it resumes at 2 and ends at 4.
    Every record equals the uninterrupted run's (the same seed gives the same run), but for
    the extra eval at step 2."""
    workdir = str(tmp_path)
    write = metrics.MetricWriter.write

    def write_then_sigterm(self, step, record):
        write(self, step, record)
        if step == 1:
            os.kill(os.getpid(), signal.SIGTERM)

    handler = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(metrics.MetricWriter, "write", write_then_sigterm)
    train.run(smoke_config(), workdir)
    monkeypatch.setattr(metrics.MetricWriter, "write", write)
    assert signal.getsignal(signal.SIGTERM) == handler
    ckpts = os.path.join(workdir, "checkpoints")
    assert sorted(int(d) for d in os.listdir(ckpts) if d.isdigit()) == [1]
    assert not os.path.exists(os.path.join(workdir, "final_metrics.json"))
    assert [r["step"] for r in metrics.read(os.path.join(workdir, "metrics.jsonl"))] == [0, 1]

    short = train.run(smoke_config(**{"rl.num_steps": 2}), workdir)
    assert max(int(d) for d in os.listdir(ckpts) if d.isdigit()) == 2
    assert short and all(k.startswith("eval/") for k in short)
    train.run(smoke_config(), workdir)

    resumed = metrics.read(os.path.join(workdir, "metrics.jsonl"))
    uninterrupted = metrics.read(os.path.join(full_run[0], "metrics.jsonl"))
    assert [r["step"] for r in resumed] == [0, 1, 2, 3, 4]
    assert any(k.startswith("eval/") for k in resumed[2])
    _assert_same_records(_comparable(resumed, evals_at=2), _comparable(uninterrupted, evals_at=2))


def test_damaged_latest_checkpoint_falls_back(full_run, tmp_path, caplog):
    import shutil

    workdir = str(tmp_path / "run")
    shutil.copytree(full_run[0], workdir)
    ckpts = os.path.join(workdir, "checkpoints")
    latest = max(int(d) for d in os.listdir(ckpts) if d.isdigit())
    meta = [os.path.join(r, f) for r, _, fs in os.walk(os.path.join(ckpts, str(latest)))
            for f in fs]
    for path in meta:  # truncate every file of the newest checkpoint
        open(path, "w").close()
    train.run(smoke_config(**{"rl.num_steps": 6}), workdir)
    assert "unreadable" in caplog.text
    records = metrics.read(os.path.join(workdir, "metrics.jsonl"))
    assert [r["step"] for r in records] == [0, 1, 2, 3, 4, 5, 6]


def _cli(*args, timeout=300):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    return subprocess.run([sys.executable, "-m", "frontier_rl", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_cli_bad_config_value_is_one_clear_line(tmp_path):
    r = _cli("train", "--config=configs/arith_grpo.py:smoke", f"--workdir={tmp_path}",
             "--config.rl.learning_rate=-1")
    assert r.returncode == 1
    assert "rl.learning_rate=-1" in r.stderr and "Traceback" not in r.stderr


def test_cli_missing_workdir(tmp_path):
    r = _cli("train", "--config=configs/arith_grpo.py:smoke")
    assert r.returncode == 1 and "--workdir is required" in r.stderr
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = _cli("train", "--config=configs/arith_grpo.py:smoke", f"--workdir={blocker}/run")
    assert r.returncode == 1 and "not writable" in r.stderr and "Traceback" not in r.stderr


def test_cli_model_dir_without_weights(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    r = _cli("train", "--config=configs/arith_grpo.py:smoke", f"--workdir={tmp_path}/run",
             f"--config.model.path={tmp_path}/model")
    assert r.returncode == 1 and "safetensors" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
@pytest.mark.all_devices  # the command's mesh: every device of the process (conftest's 8)
def test_sigkill_then_resume_matches(tmp_path):
    """kill -9 mid-run, rerun the same command: the final metrics equal an uninterrupted run.
    The killed run left its compiled programs in the workdir's cache (every program, with the
    threshold at 0), and the rerun that loads them still matches."""
    cmd = [sys.executable, "-m", "frontier_rl", "train", "--config=configs/arith_grpo.py:smoke",
           f"--workdir={tmp_path}", "--config.log.progress=false",
           "--config.log.tensorboard=false", "--config.eval.every=0", "--config.rl.num_steps=12",
           "--config.checkpoint.every=3"]
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    ckpts = tmp_path / "checkpoints"
    deadline = time.time() + 300
    while time.time() < deadline:
        if ckpts.exists() and any(d.isdigit() and int(d) >= 3 for d in os.listdir(ckpts)):
            break
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert os.listdir(tmp_path / ".jax_cache")  # the killed run's compiled programs
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
    ref_dir = tmp_path.parent / "ref"
    train.run(smoke_config(**{"rl.num_steps": 12, "checkpoint.every": 3}), str(ref_dir))
    _assert_same_records(_comparable(metrics.read(str(tmp_path / "metrics.jsonl"))),
                         _comparable(metrics.read(str(ref_dir / "metrics.jsonl"))))


@pytest.mark.slow  # CI runs it; a whole run for a reader rule
def test_corpus_rows_without_answer_are_skipped_and_counted(tmp_path):
    import ml_collections

    rows = [{"prompt": f"{i}+{i}=", "answer": str(2 * i)} for i in range(40)]
    rows += [{"prompt": "1+1="}, {"prompt": "2+2=", "answer": None},
             {"prompt": "3+3=", "answer": ""}]
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    c = smoke_config(**{"warmstart.enabled": False, "rl.num_steps": 1})
    c.task = ml_collections.ConfigDict(
        {"name": "corpus", "path": str(path), "verifier": "numeric", "eval_fraction": 0.2})
    train.run(c, str(tmp_path / "run"))
    first = metrics.read(str(tmp_path / "run" / "metrics.jsonl"))[0]
    assert first["task/skipped_no_answer"] == 3
    assert first["task/train_prompts"] + first["task/eval_prompts"] == 40


def test_prompts_over_the_cap_are_dropped_at_load_and_counted(tmp_path, monkeypatch):
    """A corpus with prompts longer than rollout.max_prompt_len: they are dropped from the train
    and eval splits before anything is generated (none reaches the engine), and counted."""
    import ml_collections

    from frontier_rl.rollout import context

    rows = [{"prompt": f"{i}+{i}=", "answer": str(2 * i)} for i in range(40)]
    rows += [{"prompt": "+".join(["1"] * (20 + i)) + "=", "answer": str(20 + i)}
             for i in range(6)]  # 40+ characters: over a cap of 16 tokens
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    c = smoke_config(**{"warmstart.enabled": False, "rl.num_steps": 1,
                        "rollout.max_prompt_len": 16})
    c.task = ml_collections.ConfigDict(
        {"name": "corpus", "path": str(path), "verifier": "numeric", "eval_fraction": 0.2})
    sent = []
    encode = context.PolicyContext.encode

    def recording_encode(self, prompt_index):
        ids = encode(self, prompt_index)
        sent.append(len(ids))
        return ids

    monkeypatch.setattr(context.PolicyContext, "encode", recording_encode)
    train.run(c, str(tmp_path / "run"))
    first = metrics.read(str(tmp_path / "run" / "metrics.jsonl"))[0]
    assert first.get("task/overlong_train", 0) + first.get("task/overlong_eval", 0) == 6
    assert first["task/train_prompts"] + first["task/eval_prompts"] == 40
    assert sent and max(sent) <= 16
    c.rollout.max_prompt_len = 2  # nothing left: a clear error, not an empty run
    with pytest.raises(train.RunError, match="longer than 2 tokens"):
        train.run(c, str(tmp_path / "run2"))


@pytest.mark.slow  # CI runs it; configs/math_dapo.py's smoke run covers the DAPO path by default
def test_dapo_config_trains(tmp_path, monkeypatch):
    """configs/arith_dapo.py: the DAPO loss with dynamic sampling, so every trained group has
    mixed outcomes and a step rolls out at least B x G responses."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "arith_dapo", os.path.join(ROOT, "configs", "arith_dapo.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    c = mod.get_config("smoke")
    c.log.progress = c.log.tensorboard = False
    c.eval.every = 0
    c.rl.num_steps = 2
    # A longer overlong buffer and a half penalty than the config's, so that most rows are
    # shaped and the factor shows: L tokens of the 8 allowed cost min(0, -(L - 2) / 6 * 0.5).
    c.rl.overlong_buffer, c.rl.overlong_penalty = 6, 0.5
    rolled = []
    rollout = PolicyContext.rollout

    def keep(self, indices, n):
        groups = rollout(self, indices, n)
        rolled.extend(groups)
        return groups

    monkeypatch.setattr(PolicyContext, "rollout", keep)
    final = train.run(config_lib.validate(c), str(tmp_path))
    records = metrics.read(str(tmp_path / "metrics.jsonl"))
    assert records[-1]["step"] == 2 and set(final) == {
        k for k in records[-1] if k.startswith("eval/")}
    for r in records[1:]:
        assert r["train/loss"] == r["train/pg_loss"]  # DAPO has no KL term
        assert r["rollout/zero_var_frac"] == 0.0
        assert r["rollout/step"] >= 8 * 8 and r["rollout/step"] % 8 == 0
    # The rewards the loss sees are the verifier's outcomes plus the overlong penalty of each
    # row's own length; the outcomes alone decide which groups are kept.
    assert sum(r["rollout/step"] for r in records[1:]) == 8 * len(rolled)
    penalised = 0
    for g in rolled:
        penalty = [min(0.0, -(int(n) - 2) / 6 * 0.5) for n in g.lengths]
        np.testing.assert_allclose(g.rewards, g.outcomes + np.array(penalty), atol=1e-6)
        penalised += sum(p < 0 for p in penalty)
    assert penalised > 0


@pytest.mark.slow  # CI runs it; the KL term is unit-tested in test_losses.py
def test_grpo_with_kl_to_reference_trains(tmp_path):
    """The reference pass reads params that the update must not have donated."""
    c = smoke_config(**{"rl.kl_coef": 0.05, "rl.num_steps": 2})
    train.run(c, str(tmp_path))
    records = metrics.read(str(tmp_path / "metrics.jsonl"))
    assert records[-1]["step"] == 2
    for r in records[1:]:  # the loss is the policy loss plus 0.05 x the k3 estimate of the KL
        assert r["train/kl_ref"] > 0
        assert r["train/loss"] == pytest.approx(r["train/pg_loss"] + 0.05 * r["train/kl_ref"],
                                                rel=1e-5, abs=1e-7)
    # One reference pass per step (T = 1, no top-p: no old-policy recompute), over the trained
    # tokens, which the update reads once per epoch.
    for r in records[1:]:
        assert r["perf/pflops/old_logprob"] > 0
        assert r["perf/tokens/old_logprob"] * c.rl.epochs == r["perf/tokens/train"]


def test_cli_incomplete_model_config(tmp_path):
    from flax import nnx

    from frontier_rl.models import ModelConfig, Transformer, hf

    cfg = ModelConfig(vocab_size=16, hidden_size=16, intermediate_size=32, num_layers=1,
                      num_heads=2, num_kv_heads=1, head_dim=8, qk_norm=True)
    hf.save_pretrained(Transformer(cfg, rngs=nnx.Rngs(0)), cfg, str(tmp_path / "model"))
    conf = json.loads((tmp_path / "model" / "config.json").read_text())
    del conf["num_attention_heads"]
    (tmp_path / "model" / "config.json").write_text(json.dumps(conf))
    r = _cli("train", "--config=configs/arith_grpo.py:smoke", f"--workdir={tmp_path}/run",
             f"--config.model.path={tmp_path}/model")
    assert r.returncode == 1 and "num_attention_heads" in r.stderr
    assert "Traceback" not in r.stderr

