"""`frontier-rl fit` proposes what fits (fit/propose.py): on the embedded HIVE config at a budget
below its sampler's (or train step's) need, the search finds the largest rows per call (or
micro-batch) that fits, and the figures it reports are those a fresh check of the changed config
gives; the --apply copy loads the original with the same overrides and fits; a run that fits
gets no proposal. The launch scripts stop naming the proposal, or take it when asked."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

from frontier_rl import config_lib
from frontier_rl.fit import command as fit
from frontier_rl.fit import perf
from frontier_rl.fit import propose as fit_propose

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# arith_hive:smoke with evaluation sharing the rollouts' sampler program (one sampler program),
# on the synthetic learner for 2 steps
SOURCE = "configs/arith_hive.py:smoke"
OVERRIDES = {"eval.greedy": False, "eval.top_p": 1.0, "fit.sim_steps": 2}
MESH = {"data": 1, "fsdp": 1, "model": 1}


def _config():
    from configs import arith_hive

    return config_lib.set_fields(arith_hive.get_config("smoke"), dict(OVERRIDES))


def _quiet(*a, **k):
    pass


@pytest.fixture(scope="module")
def measured():
    """The config, its simulation and every program's bytes at h200's default share."""
    c = _config()
    sim = fit.simulate(c)
    r = fit.check(c, MESH, "h200", say=_quiet, sim=sim)
    assert r["fits"]
    return c, sim, {p["kind"]: p["bytes_per_device"] for p in r["programs"]}


def _budget(monkeypatch, nbytes: float) -> None:
    """JAX's share of an h200 set to `nbytes`."""
    monkeypatch.delenv("XLA_CLIENT_MEM_FRACTION", raising=False)
    share = nbytes / perf.DEVICE_BYTES["h200"]
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", f"{share:.9f}")


def _fits(c, sim, overrides, kinds=None) -> dict:
    changed = config_lib.set_fields(config_lib.validate(_copy(c)), dict(overrides))
    return fit.check(changed, MESH, "h200", say=_quiet, sim=sim, kinds=kinds)


def _copy(c):
    import copy

    return copy.deepcopy(c)


def test_the_sampler_gets_the_largest_rows_per_call_that_fits(measured, monkeypatch):
    c, sim, need = measured
    _budget(monkeypatch, 0.75 * need["sampler"])  # the 1,024-row program needs a third more
    r = fit.check(c, MESH, "h200", say=_quiet, sim=sim)
    assert [p["kind"] for p in r["programs"] if not p["fits"]] == ["sampler"]
    p = fit_propose.propose(c, MESH, "h200", r, sim, say=_quiet)
    assert p["fits"] and p["overrides"] == {"rollout.rows_per_call": 512}
    assert p["args"] == ["--config.rollout.rows_per_call=512"]
    assert p["compiled"] <= 2  # the guess from the figure (3/4 of 1,024 rows) is right
    # the figures are a fresh check's, and the next larger bucket (the run's own) does not fit
    again = _fits(c, sim, p["overrides"])
    assert again["fits"]
    proposed = {q["program"]: q for q in p["programs"]}
    for q in again["programs"]:
        assert (q["rows"], q["tokens"]) == (proposed[q["program"]]["rows"],
                                            proposed[q["program"]]["tokens"])
        if proposed[q["program"]]["recompiled"]:
            assert q["bytes_per_device"] == proposed[q["program"]]["bytes_per_device"]
    assert [q["recompiled"] for q in p["programs"]] == [True, False, False]  # sampler only


def test_the_train_step_gets_the_largest_micro_batch_that_fits(measured, monkeypatch):
    c, sim, need = measured
    _budget(monkeypatch, 0.8 * need["train_step"])
    r = fit.check(c, MESH, "h200", say=_quiet, sim=sim, kinds=("train_step",))
    assert not r["fits"]
    p = fit_propose.propose(c, MESH, "h200", r, sim, say=_quiet)
    assert p["fits"] and set(p["overrides"]) == {"rl.micro_batch_size"}
    micro = p["overrides"]["rl.micro_batch_size"]
    whole = c.rl.batch_size * c.rl.group_size // c.rl.minibatches
    assert micro < whole and whole % micro == 0
    # moved as little as possible: the micro-batch twice as large was tried and did not fit
    tried = {t["overrides"].get("rl.micro_batch_size"): t["fits"] for t in p["trials"]}
    assert tried[micro] and (2 * micro == whole or tried[2 * micro] is False)
    assert _fits(c, sim, p["overrides"], kinds=("train_step",))["fits"]


def test_when_nothing_fits_it_says_so_and_what_it_tried(measured, monkeypatch, capsys):
    c, sim, need = measured
    _budget(monkeypatch, need["sampler"] / 1000)  # below even one group's 8 rows
    r = fit.check(c, MESH, "h200", say=_quiet, sim=sim, kinds=("sampler",))
    p = fit_propose.propose(c, MESH, "h200", r, sim, say=_quiet)
    # the figure points at the ladder's end, one group of 8 rows; when that does not fit,
    # nothing less far along it does: one compile
    assert not p["fits"] and p["overrides"] == {} and p["compiled"] == 1
    assert p["trials"][0]["overrides"] == {"rollout.rows_per_call": c.rl.group_size}
    assert p["tried"][0].startswith("rollout.rows_per_call 512, 256") and "--mesh" in p["tried"][1]
    fit_propose.print_proposal(p)
    out = capsys.readouterr().out
    assert out.startswith("proposal: none found that fits (1 candidates compiled")
    assert "proposal: --config" not in out  # the launch scripts' line is for a change that fits


def test_apply_writes_a_copy_that_loads_the_original_and_fits(measured, monkeypatch, tmp_path,
                                                              capsys):
    c, _, need = measured
    _budget(monkeypatch, 0.75 * need["sampler"])
    path = tmp_path / "runs" / "fit" / "arith_smoke.py"
    args = " ".join(fit_propose.arg(k, v) for k, v in OVERRIDES.items())
    after = fit_propose.hook(apply=str(path), source=(SOURCE, OVERRIDES),
                             command=f"frontier-rl fit --config={SOURCE} {args} --apply={path}")
    report = fit.main(c, "", "h200", False, after=after)
    out = capsys.readouterr().out
    assert "proposal: --config.rollout.rows_per_call=512\n" in out
    assert report["proposal"]["fits"] and path.exists()
    text = path.read_text()
    assert f"Made by:\n  frontier-rl fit --config={SOURCE}" in text
    assert f"--config={path}" in text and "sampler: rollout, eval: 512 x" in text
    spec = importlib.util.spec_from_file_location("arith_smoke_copy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert not any(os.path.isabs(p) for p in module.ORIGINAL)
    assert module.ARG == "smoke" and module.COMMAND_LINE == OVERRIDES
    copy_config = module.get_config()
    assert copy_config.rollout.rows_per_call == 512 and copy_config.eval.greedy is False
    with pytest.raises(ValueError, match="takes no other"):
        module.get_config("paper")
    again = fit.main(copy_config, "", "h200", False, after=fit_propose.hook())
    assert again["fits"] and "proposal" not in again
    recompiled = [q for q in report["proposal"]["programs"] if q["recompiled"]]
    assert [(q["program"], q["rows"], q["bytes_per_device"]) for q in recompiled] == [
        (q["program"], q["rows"], q["bytes_per_device"]) for q in again["programs"]
        if q["kind"] == "sampler"]


def test_a_run_that_fits_gets_no_proposal(measured, capsys, tmp_path):
    c, _, _ = measured
    report = fit.main(c, "", "h200", True,
                      after=fit_propose.hook(apply=str(tmp_path / "x.py"), source=(SOURCE, {})))
    out = capsys.readouterr().out
    assert report["fits"] and "proposal" not in report and "\nproposal" not in out
    assert "nothing written (the run fits as it is)" in out
    assert "proposal" not in json.loads(out.strip().splitlines()[-1])
    assert not (tmp_path / "x.py").exists()


def test_the_knobs_ladders_follow_the_run_and_the_mesh(measured):
    from frontier_rl.fit.shapes import SMALL_BUCKETS, row_bucket
    from frontier_rl.models import ModelConfig

    c, _, _ = measured
    mcfg = fit.model_config(c)
    sampler = {"kind": "sampler", "rows": 1024, "tokens": "32+8"}
    (k,) = fit_propose.knobs(c, MESH, [sampler], mcfg, "gpu", mesh_free=False)
    # each smaller row bucket once, at the largest rows per call giving it, down to a group
    buckets = sorted({row_bucket(b) for b in SMALL_BUCKETS if 8 <= b < 1024}, reverse=True)
    assert [o["rollout.rows_per_call"] for o, _ in k.ladder] == buckets
    assert [rows for _, rows in k.ladder] == buckets and buckets[-1] == c.rl.group_size
    train = {"kind": "train_step", "rows": 64, "tokens": "40"}
    c2 = _copy(c)
    c2.rl.micro_batch_size = 4
    ks = {k.name: k for k in fit_propose.knobs(c2, {"data": 1, "fsdp": 2, "model": 1}, [train],
                                               mcfg, "gpu", mesh_free=True)}
    assert [o for o, _ in ks["rl.micro_batch_size"].ladder] == [{"rl.micro_batch_size": 2}]
    assert [o for o, _ in ks["model.remat"].ladder] == [{"model.remat": "dots"},
                                                         {"model.remat": "full"}]
    # mesh.model where it divides the 2 KV heads, out of fsdp; data folded into fsdp first
    assert [o for o, _ in ks["mesh"].ladder] == [{"mesh.fsdp": 1, "mesh.model": 2}]
    c2.rl.micro_batch_size = 2  # the fewest rows 2 row shards take
    ks = {k.name for k in fit_propose.knobs(c2, {"data": 1, "fsdp": 2, "model": 1}, [train],
                                            mcfg, "gpu", mesh_free=False)}
    assert "rl.micro_batch_size" not in ks and "mesh" not in ks
    c2.mesh.data = 2
    assert fit_propose._meshes(c2, {"data": 2, "fsdp": 4, "model": 1}, 4) == [
        {"mesh.data": 1, "mesh.fsdp": 8}, {"mesh.data": 1, "mesh.fsdp": 4, "mesh.model": 2},
        {"mesh.data": 1, "mesh.fsdp": 2, "mesh.model": 4}]
    assert isinstance(mcfg, ModelConfig)


def test_least_is_a_bisection_that_tries_the_guess_first():
    for n in range(1, 9):
        for first_fit in range(n + 1):
            for guess in range(n):
                tried = []

                def fits(i, first_fit=first_fit, tried=tried):
                    tried.append(i)
                    return i >= first_fit

                got = fit_propose._least(n, fits, guess)
                assert got == (first_fit if first_fit < n else None)
                assert tried[0] == guess and len(tried) == len(set(tried))
                assert len(tried) <= 2 + (n - 1).bit_length()


def test_a_compilers_refusal_gives_the_figure_it_names():
    p = {"bytes_per_device": None, "resident": 2**30,
         "error": "RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm. Used 50.70G of "
                  "15.75G hbm. Exceeded hbm capacity by 34.95G."}
    assert fit_propose.program_bytes(p) == pytest.approx(51.70 * 2**30)
    assert fit_propose.program_bytes({**p, "error": "INTERNAL: something else"}) is None


# ---- the launch scripts ----

FAKE_FIT = (
    '  fit) case " $* " in\n'
    '         *" --config.rl.micro_batch_size=8 "*) echo "fits: yes"; exit 0 ;;\n'
    '       esac\n'
    '       echo "fits: NO"; echo "proposal: searching the train knobs ..."\n'
    '       echo "proposal: --config.rl.micro_batch_size=8"; exit 3 ;;\n')


def test_paper_sh_names_the_proposal_or_takes_it(tmp_path):
    from test_hub_paper_sh import _env, stand_in_node

    stand_in_node(tmp_path)
    for f in os.listdir(os.path.join(ROOT, "launch")):  # what env.sh sources beside it
        if f.endswith(".sh") and not (tmp_path / "node" / "launch" / f).exists():
            shutil.copy(os.path.join(ROOT, "launch", f), tmp_path / "node" / "launch")
    fake = tmp_path / "venv" / "bin" / "frontier-rl"
    fake.write_text(fake.read_text().replace(
        '  fit) echo "fits: yes"; exit "${FAKE_FIT:-0}" ;;\n', FAKE_FIT))
    env = _env(PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}",
               FRONTIER_RL_VENV=str(tmp_path / "venv"), FRONTIER_RL_ACCEL="cpu")
    env.pop("HF_HUB_OFFLINE")
    config = os.path.join(ROOT, "configs", "math_hive.py") + ":qwen2.5-math-1.5b"
    log, workdir = tmp_path / "calls.log", tmp_path / "run"

    def paper(*args):
        if log.exists():
            log.unlink()
        r = subprocess.run(["bash", str(tmp_path / "node" / "launch" / "paper.sh"), config,
                            f"--workdir={workdir}", *args], env=env, capture_output=True,
                           text=True, timeout=300)
        return r, log.read_text().splitlines()

    r, calls = paper()
    assert r.returncode == 3
    assert "fit proposes --config.rl.micro_batch_size=8" in r.stderr
    assert "rerun with --apply-fit" in r.stderr
    assert [c.split()[0] for c in calls] == ["python", "frontier-rl"]  # the fetch, one fit
    r, calls = paper("--apply-fit")
    assert r.returncode == 0, r.stdout + r.stderr
    fits = [c for c in calls if c.split()[4:5] == ["fit"]]
    assert len(fits) == 2 and " --config.rl.micro_batch_size=8 " in fits[1]
    train = next(c for c in calls if c.startswith("run_gpu.sh"))
    assert train.endswith("--config.rl.micro_batch_size=8")
    assert (workdir / "fit_flags").read_text() == "--config.rl.micro_batch_size=8\n"
    assert "fits: yes" in (workdir / "fit_h100x8.txt").read_text()


def test_tpu_pod_sh_stops_naming_the_proposal_or_takes_it(tmp_path, tpu_pod_repo):
    repo = tpu_pod_repo
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    (bin_dir / "gcloud").write_text(f'#!/usr/bin/env bash\necho "gcloud $*" >> {log}\n')
    (bin_dir / "frontier-rl").write_text(
        f'#!/usr/bin/env bash\necho "frontier-rl $*" >> {log}\ncase "$1" in\n{FAKE_FIT}esac\n')
    for f in ("gcloud", "frontier-rl"):
        (bin_dir / f).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SHIP": "",
           "FIT_TARGET": "v5p-16"}
    pod = ["bash", str(repo / "launch" / "tpu_pod.sh"), "my-v5p-16", "z", "/w", "c.py",
           "--config.seed=1"]
    r = subprocess.run(pod, env=env, capture_output=True, text=True)
    assert r.returncode == 3 and "fit proposes --config.rl.micro_batch_size=8" in r.stderr
    assert log.read_text().splitlines() == [
        "frontier-rl fit --target=v5p-16 --config=c.py --config.seed=1"]  # nothing launched
    log.unlink()
    r = subprocess.run(pod, env={**env, "FIT_APPLY": "1"}, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    calls = log.read_text()
    assert "gcloud compute tpus tpu-vm ssh my-v5p-16" in calls
    assert calls.splitlines()[-1].endswith(
        "--workdir=/w --config.seed=1 --config.rl.micro_batch_size=8")


@pytest.mark.slow
def test_the_cli_prints_the_proposal_and_writes_the_copy(measured, tmp_path):
    _, _, need = measured
    env = {**os.environ, "PYTHONPATH": ROOT, "JAX_PLATFORMS": "cpu",
           "XLA_PYTHON_CLIENT_MEM_FRACTION":
               f"{0.75 * need['sampler'] / perf.DEVICE_BYTES['h200']:.9f}"}
    env.pop("XLA_CLIENT_MEM_FRACTION", None)
    copy_path = str(tmp_path / "arith_smoke.py")
    base = [sys.executable, "-m", "frontier_rl.cli", "fit", "--device=h200", "--mesh=data=1"]
    flags_ = [fit_propose.arg(k, v) for k, v in OVERRIDES.items()]
    r = subprocess.run(base + [f"--config={SOURCE}", *flags_, "--json",
                               f"--apply={copy_path}"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "proposal: --config.rollout.rows_per_call=512" in r.stdout
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report["proposal"]["overrides"] == {"rollout.rows_per_call": 512}
    assert report["proposal"]["fits"] and not report["fits"]
    r = subprocess.run(base + [f"--config={copy_path}"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "fits: yes" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
