"""Published comparisons are a function of the code: pinned numerics, shipped starts, digests.

- numerics.pin_cpu adds XLA:CPU's pinned flags and keeps a user's own;
- numerics.digest names the code's float numerics: one changed float operation of the model
  changes it, and then every published results file fails the check (shown in a process whose
  RMSNorm divides by the root where the model multiplies by its reciprocal);
- every results file under docs/results/testbed/ was measured under the numerics the code gives
  now, from the shipped starts as they are now;
- a shipped start whose file was altered stops a run in one line naming the file;
- a warm-start cache made under other numerics is refused, never reused.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from frontier_rl import config_lib, numerics, warmstart
from frontier_rl.experiment import published
from frontier_rl.run.errors import RunError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
START = os.path.join(ROOT, "configs", "starts", "arith_s0")


def test_pin_cpu_adds_the_flags_and_keeps_a_users_own():
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8 --xla_cpu_max_isa=SSE4_2"}
    numerics.pin_cpu(env)
    flags = env["XLA_FLAGS"].split()
    assert "--xla_cpu_max_isa=SSE4_2" in flags and "--xla_cpu_max_isa=AVX2" not in flags
    assert "--xla_cpu_multi_thread_eigen=false" in flags
    assert "--xla_force_host_platform_device_count=8" in flags
    assert not numerics.pinned(env)
    env = {}
    numerics.pin_cpu(env)
    assert numerics.pinned(env)
    env = {numerics.ENV: "native"}
    numerics.pin_cpu(env)
    assert "XLA_FLAGS" not in env


def test_the_suite_runs_under_the_pinned_numerics():
    assert numerics.pinned(), os.environ.get("XLA_FLAGS")


PATCHED = """
import jax.numpy as jnp
from frontier_rl import numerics
from frontier_rl.models import transformer


def by_division(self, x):  # x / sqrt(.) where the model multiplies by rsqrt(.)
    x32 = x.astype(jnp.float32)
    x32 = x32 / jnp.sqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
    return self.weight[...].astype(self.dtype) * x32.astype(self.dtype)


transformer.RMSNorm.__call__ = by_division
print(numerics.compute())
"""


def test_one_changed_float_operation_fails_the_published_results_check():
    now = numerics.digest()
    env = numerics.digest_env()
    again = subprocess.run([sys.executable, "-c", "from frontier_rl import numerics; "
                            "print(numerics.compute())"], env=env, capture_output=True,
                           text=True, check=True).stdout.split()[-1]
    assert again == now  # deterministic
    changed = subprocess.run([sys.executable, "-c", PATCHED], env=env, capture_output=True,
                             text=True, check=True).stdout.split()[-1]
    assert changed != now
    paths = published.files()
    assert paths
    for path in paths:
        assert published.problems(path, now) == []
        assert any("numerics" in p for p in published.problems(path, changed)), path


def test_a_kept_digest_is_read_back_only_under_its_own_inputs(tmp_path, monkeypatch):
    """The digest is kept on disk under a key of its inputs: the package's sources (a copied
    package with one byte changed has another key) and the flags it computes under."""
    env = numerics.digest_env()
    key = numerics.cache_key(env)
    assert key == numerics.cache_key(dict(env))
    assert key != numerics.cache_key({**env, "XLA_FLAGS": env["XLA_FLAGS"] + " --x=1"})
    copy = tmp_path / "pkg" / "frontier_rl"
    shutil.copytree(os.path.dirname(numerics.__file__), copy,
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "models" / "transformer.py", "a") as f:
        f.write("\n")
    moved = subprocess.run([sys.executable, "-c", "import json, sys; from frontier_rl import "
                            "numerics; print(numerics.__file__); "
                            "print(numerics.cache_key(json.loads(sys.argv[1])))",
                            json.dumps(env)], cwd=tmp_path / "pkg", capture_output=True,
                           text=True, check=True, env={**os.environ, "PYTHONPATH": ""})
    where, moved_key = moved.stdout.split()
    assert where.startswith(str(copy)) and moved_key != key
    monkeypatch.setenv(numerics.CACHE_ENV, str(tmp_path / "kept"))
    os.makedirs(tmp_path / "kept")
    (tmp_path / "kept" / key).write_text("0123456789abcdef\n")
    assert numerics.digest.__wrapped__() == "0123456789abcdef"


@pytest.mark.parametrize("path", published.files(), ids=os.path.basename)
def test_every_published_comparison_is_what_the_code_gives_now(path):
    """Fails after a change that moves the figures: rerun the comparison from a fresh clone
    (launch/run.sh; docs/results/testbed/README.md names each file's command) and regenerate
    the docs (launch/docs.sh)."""
    assert published.problems(path, numerics.digest()) == []


def test_a_published_comparison_names_its_starts_and_their_digests():
    for path in published.files():
        results = published.load(path)
        starts = results["testbed_starts"]
        assert len(starts) >= 2, path
        seeds = [s for v in starts.values() for s in v["seeds"]]
        assert sorted(seeds) == sorted(results["seeds"])
        for r in results["runs"]:
            start = next(n for n, v in starts.items() if r["seed"] in v["seeds"])
            assert r["start_name"] == start
            assert r["start_cache"]["key"] == starts[start]["digest"]


def test_a_shipped_start_records_its_regime_and_checks_its_files(tmp_path):
    record = warmstart.read_start(START)
    assert record["regime"]["easy_acc"] >= record["regime"]["target_acc"]
    assert record["regime"]["frontier_acc"] >= record["regime"]["frontier_min"]
    copy = tmp_path / "start"
    shutil.copytree(START, copy)
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # one bit of one weight
    weights.write_bytes(bytes(data))
    with pytest.raises(RunError, match=r"model\.safetensors does not match its digest"):
        warmstart.read_start(str(copy))
    os.remove(copy / warmstart.START_NAME)
    with pytest.raises(RunError, match="no shipped start there"):
        warmstart.read_start(str(copy))


def _arith_config():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "compare_arith", os.path.join(ROOT, "configs", "compare_arith.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cfg = mod.get_config("")
    del cfg["compare"]
    return cfg


def test_a_warm_start_cache_made_under_other_numerics_is_refused(tmp_path):
    cfg = _arith_config()
    cache = tmp_path / "cache"
    shutil.copytree(START, cache)
    os.remove(cache / warmstart.START_NAME)
    cfg.warmstart.cache_dir = str(cache)
    cfg.warmstart.seed = 0
    key = warmstart.cache_key(cfg)
    assert key["numerics"] == numerics.digest()
    (cache / warmstart.KEY_NAME).write_text(json.dumps(key))
    assert warmstart.cached(cfg, str(tmp_path)) == str(cache)  # the same numerics: reused
    key["numerics"] = "0123456789abcdef"  # made by code or a machine that rounds otherwise
    (cache / warmstart.KEY_NAME).write_text(json.dumps(key))
    with pytest.raises(RunError, match=r"made for another config \(numerics: "):
        warmstart.cached(cfg, str(tmp_path))


def test_a_start_made_for_another_model_is_refused():
    cfg = _arith_config()
    cfg.model.hidden_size = 32
    with pytest.raises(RunError, match="made for another model"):
        warmstart.check_start(START, cfg)
    config_lib.validate(_arith_config())


def test_every_renderer_gives_the_holm_aware_verdict():
    """HIVE's unadjusted interval in the published default excludes 0 while its Holm-adjusted
    p does not pass: the report's table, the docs' arms table and the field tables must all say
    "not distinguishable after Holm", never "better"."""
    import importlib.util

    from frontier_rl.experiment import controls_report, report, table
    from frontier_rl.experiment.evalcells import paired, primary

    results = published.load(os.path.join(published.PUBLISHED, "default.results.json.gz"))
    d = paired(table.of(results), "hive", "uniform", primary(results))
    member = next(x for x in report.family(results) if x["name"] == "hive")
    assert d.lo > 0 and member["p_holm"] >= 0.05  # the case this test is about
    assert controls_report.holm_verdict(d, member) == "not distinguishable after Holm"

    def row(text):
        return next(line for line in text.splitlines() if line.startswith("| hive |"))

    assert "not distinguishable after Holm" in row(report.main_table(results))
    spec = importlib.util.spec_from_file_location("docs_script",
                                                  os.path.join(ROOT, "launch", "docs.py"))
    docs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(docs)
    assert "not distinguishable after Holm" in row(docs._arms(results))
    assert "| better |" not in row(docs._arms(results))
    spec = importlib.util.spec_from_file_location("field_tables",
                                                  os.path.join(ROOT, "launch", "field_tables.py"))
    field = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(field)
    assert "not distinguishable after Holm" in row(field.arms_table(results))
