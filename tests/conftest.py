"""The suite's settings and shared fixtures.

Devices: the tests run on the CPU with 8 fake devices, so the sharding rules are exercised; the
flag is added to any XLA_FLAGS already set (unless that names a device count itself). A mesh
built with `data=-1` and no explicit devices (training runs, `frontier-rl serve`) takes only
the devices fsdp x model need, so smoke runs run on one device; a test marked `all_devices`
(the mesh tests, one 8-device end-to-end run) gets every device.

Numerics: XLA:CPU's code generation is pinned as `frontier-rl` pins it (numerics.pin_cpu).

Compilation: executables are cached on disk under .cache/jax-tests (JAX's persistent cache,
every compile however short, shared by the workers and by subprocesses); the run recompiles
only what changed. Set JAX_COMPILATION_CACHE_DIR to move it.

Skips: with CI=true a skipped test fails the run, unless it is marked
`allow_skip(reason)`: CI must not pass by running less than it claims.
"""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_flags = os.environ.get("XLA_FLAGS", "")
if "--xla_force_host_platform_device_count" not in _flags:
    os.environ["XLA_FLAGS"] = f"{_flags} --xla_force_host_platform_device_count=8".strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# The float numerics every run of the project is made under (frontier_rl/numerics.py), as
# `frontier-rl` pins them: the published results check compares digests made here with theirs.
from frontier_rl import numerics  # noqa: E402

numerics.pin_cpu()
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(ROOT, ".cache", "jax-tests"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
# A size limit turns on the cache's file lock: two workers never read a half-written entry.
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(4 << 30))

import jax  # noqa: E402
import pytest  # noqa: E402

from frontier_rl.rl import sharding  # noqa: E402

_ALL_DEVICES = {"on": False}
_make_mesh = sharding.make_mesh


def _fewest_devices_mesh(data=-1, fsdp=1, model=1, devices=None):
    if (devices is None and data == -1 and not _ALL_DEVICES["on"]
            and all(isinstance(x, int) and not isinstance(x, bool) and x >= 1
                    for x in (fsdp, model))):
        devices = jax.devices()[:fsdp * model]
    return _make_mesh(data, fsdp, model, devices=devices)


sharding.make_mesh = _fewest_devices_mesh


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    # Set before setup, so fixtures a test sets up (module-scoped runs too) see its devices.
    _ALL_DEVICES["on"] = item.get_closest_marker("all_devices") is not None
    yield
    _ALL_DEVICES["on"] = False


def _ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not (_ci() and report.skipped and not hasattr(report, "wasxfail")):
        return
    marker = item.get_closest_marker("allow_skip")
    if marker is not None and (marker.args or marker.kwargs.get("reason")):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = (f"skipped under CI=true ({reason}); a test that may skip in CI is "
                       "marked @pytest.mark.allow_skip(reason)")


@pytest.hookimpl(tryfirst=True)
def pytest_collectreport(report):
    """A module that skips as a whole (importorskip at import) fails under CI=true."""
    if _ci() and report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"{report.nodeid} skipped at collection under CI=true ({reason})"


@pytest.fixture(scope="session")
def tokenizer():
    from frontier_rl import tasks

    return tasks.build_char_tokenizer(tasks.ARITH_ALPHABET)


@pytest.fixture(scope="session")
def tiny_policy(tokenizer):
    from flax import nnx

    from frontier_rl.models import ModelConfig, Transformer

    cfg = ModelConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                      num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8, qk_norm=True)
    graphdef, params = nnx.split(Transformer(cfg, rngs=nnx.Rngs(0)), nnx.Param)
    return cfg, graphdef, params


@pytest.fixture
def tpu_pod_repo(tmp_path):
    """A git repository holding launch/tpu_pod.sh, committed (the script ships HEAD's files)."""
    import shutil
    import subprocess

    repo = tmp_path / "repo"
    (repo / "launch").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "launch", "tpu_pod.sh"), repo / "launch")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "launch"], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    return repo
