"""What `fit --target` reports, without the target compilers: a target compiler's refusal of a
program over the device's memory is a verdict ("does not fit", exit 3) while any other compile
error is the run's error (exit 4, "fits" unknown); the columns printed per program never exceed
the compiler's peak; a compiler of another version than the tested one is named; setup.py pins
the tested JAX.

A TPU target's compile-only devices are stood in for by the CPU's (`Target.compile_devices`), so
`fit.check` runs its target path here; the program whose `lower()` raises is the run's own
train step."""

import os
import re

import jax
import pytest

from frontier_rl.fit import command as fit
from frontier_rl.fit import targets
from frontier_rl.rl.train_step import Trainer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIB = 2**30
OOM = ("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space "
       "hbm. Used 20.5G of 15.48G hbm. Exceeded hbm capacity by 5.02G.")
OTHER = "INVALID_ARGUMENT: Shape mismatch in a custom call's operand"


@pytest.fixture()
def on_cpu_target(monkeypatch):
    """v5e-8's target path with the CPU's devices standing in for its compile-only ones."""
    monkeypatch.setattr(targets.Target, "compile_devices", lambda self: jax.devices())
    return targets.parse("v5e-8")


def _check_raising(monkeypatch, target, message):
    from configs import arith_grpo

    def lower_step(self, *a, **k):
        raise RuntimeError(message)

    monkeypatch.setattr(Trainer, "lower_step", lower_step)
    c = arith_grpo.get_config("smoke")
    return fit.check(c, fit.parse_mesh("data=1"), "v5e", say=lambda *a, **k: 0,
                     sim=fit.simulate(c, steps=2), kinds=("train_step",), target=target)


def test_the_compilers_refusal_over_memory_is_a_verdict(monkeypatch, on_cpu_target, capsys):
    r = _check_raising(monkeypatch, on_cpu_target, OOM)
    (p,) = r["programs"]
    assert p["error_kind"] == fit.OUT_OF_MEMORY and p["fits"] is False
    assert r["fits"] is False and "error_kind" not in r
    fit.print_report(r)
    out = capsys.readouterr().out
    assert "fits: NO" in out and "compile error" not in out


def test_any_other_compile_error_is_the_runs_error(monkeypatch, on_cpu_target, capsys):
    r = _check_raising(monkeypatch, on_cpu_target, OTHER)
    (p,) = r["programs"]
    assert p["error_kind"] == fit.COMPILE_ERROR and p["fits"] is None
    assert r["error_kind"] == fit.COMPILE_ERROR and r["fits"] is None
    assert any(OTHER in a for a in r["advice"])
    fit.print_report(r)
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("train step"))
    assert "compile error" in line and " NO " not in line
    assert "fits: compile error" in out and "fits: NO" not in out


@pytest.mark.parametrize("report,status", [({"fits": False}, 3),
                                           ({"fits": None, "error_kind": "compile_error"}, 4),
                                           ({"fits": True}, 0)])
def test_the_cli_exits_3_on_does_not_fit_and_4_on_a_compile_error(monkeypatch, report, status):
    from frontier_rl import cli

    monkeypatch.setattr(fit, "main", lambda *a, **k: report)
    try:
        cli.FLAGS(["frontier-rl", "fit", "--config=configs/arith_grpo.py:smoke",
                   "--target=v5e-8"])
        assert cli._main(["frontier-rl", "fit"]) == status
    finally:
        cli.FLAGS.unparse_flags()


def _target_report() -> dict:
    """A TPU target's report as libtpu measured one program: its temp_size_in_bytes (124 GiB)
    is above its peak (72.8 GiB of a 95 GiB chip)."""
    t = {"peak": int(72.8 * GIB), "arguments": int(20.0 * GIB), "outputs": int(2.0 * GIB),
         "aliased": int(1.0 * GIB), "temporaries": int(124.0 * GIB), "flops": 1.5e15,
         "collectives": {"all-gather bf16": 3}}
    program = {"program": "train step", "kind": "train_step", "rows": 256, "asked": 256,
               "tokens": "4096", "resident": 0, "change": "", "compile_s": 12.0,
               "memory": {}, "bytes_per_device": t["peak"], "fits": True, "target": t}
    return {"simulation": {"steps": 2, "selector": "uniform", "stopped": "", "max_rows": {}},
            "usable_bytes": int(0.9 * 95 * GIB), "usable_share": 0.9, "usable_source": "TPU",
            "device": "v5p-8", "device_bytes": 95 * GIB, "compiler": "tpu target compiler",
            "target": {"name": "v5p-8"}, "programs": [program],
            "resident_optimizer_bytes_per_device": 0, "reference_bytes_per_device": 0,
            "not_sized": [], "fits": True, "advice": []}


def test_no_printed_column_exceeds_the_compilers_peak(capsys):
    fit.print_report(_target_report())
    out = capsys.readouterr().out.splitlines()
    head = next(x for x in out if x.startswith("program"))
    line = next(x for x in out if x.startswith("train step"))
    assert "temp GiB" not in head and "peak-args GiB" in head
    figures = [float(x) for x in re.findall(r"\b\d+\.\d\d\b", line)]
    assert 52.80 in figures  # 72.8 - 20.0: what the program adds at its peak
    assert max(figures) <= 72.8, line


def test_an_untested_compiler_version_is_named(monkeypatch):
    from importlib import metadata

    tested = targets.TESTED_VERSIONS["tpu"]
    monkeypatch.setattr(metadata, "version", lambda name: tested[name])
    assert targets.untested_versions("tpu") == ""
    monkeypatch.setattr(metadata, "version",
                        lambda name: "0.0.99" if name == "libtpu" else tested[name])
    line = targets.untested_versions("tpu")
    assert "libtpu 0.0.99 (tested 0.0.42.1)" in line and "jax " not in line
    monkeypatch.setattr(metadata, "version",
                        lambda name: "0.11.0" if name.startswith("jax") else tested[name])
    line = targets.untested_versions("tpu")
    assert line.startswith("untested TPU compiler versions: jax 0.11.0 (tested 0.10.2)")
    assert "\n" not in line


def test_fit_target_prints_the_untested_version_line(monkeypatch, on_cpu_target):
    monkeypatch.setattr(targets, "installed_versions",
                        lambda kind: {**targets.TESTED_VERSIONS[kind], "libtpu": "0.0.99"})
    from configs import arith_grpo

    c = arith_grpo.get_config("smoke")
    said = []
    fit.check(c, fit.parse_mesh("data=1"), "v5e", say=lambda *a, **k: said.append(a[0]),
              sim=fit.simulate(c, steps=2), kinds=(), target=on_cpu_target)
    assert [s for s in said if "untested" in s] == [
        "fit: untested TPU compiler versions: libtpu 0.0.99 (tested 0.0.42.1); the figures may "
        "differ, and fit --target relies on JAX internals of the tested release "
        "(frontier_rl/fit/targets.py TESTED_VERSIONS)"]


def test_setup_py_pins_the_tested_jax():
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        pins = re.findall(r'"jax([<>=!~][^"]*)"', f.read())
    assert pins == [f">={targets.TESTED_VERSIONS['tpu']['jax']},<0.11"]
    assert targets.TESTED_VERSIONS["gpu"]["jax"] == targets.TESTED_VERSIONS["tpu"]["jax"]
    assert jax.__version__ == targets.TESTED_VERSIONS["tpu"]["jax"]
