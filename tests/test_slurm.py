"""The slurm launcher (experiment/slurm.py) through stand-ins for SLURM's commands on PATH
(tests/fake_slurm.py: each job's batch script runs here in the background, its states reported
as sacct reports them), driving submitit's real SLURM executor: the smoke comparison's results
equal the local launcher's, a preempted run requeues and resumes, the same command reattaches,
--detach and --report_only, Ctrl-C cancels the jobs, a failed job is named, and --dry_run prints
each job's batch script without submitting."""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from frontier_rl import config_lib
from frontier_rl.experiment import compare, launchers, slurm
from frontier_rl.run.errors import RunError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE = os.path.join(ROOT, "tests", "fake_slurm.py")
COMMANDS = ("sbatch", "sacct", "squeue", "scancel", "scontrol", "srun")


def _config(name="compare_arith", arg="smoke"):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, f"configs/{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.get_config(arg)


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """A fake cluster on PATH; job ids never repeat in one test process (submitit's watcher
    remembers the states of ended jobs by id)."""
    submitit = slurm._submitit()
    bin_dir, state = tmp_path / "bin", tmp_path / "slurm_state"
    bin_dir.mkdir()
    state.mkdir()
    for name in COMMANDS:
        (bin_dir / name).symlink_to(FAKE)
    (state / "next").write_text(str(1000 + 100 * len(os.listdir(tmp_path.parent))))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM_DIR", str(state))
    monkeypatch.setenv("FAKE_SLURM_KILL_WAIT", "20")
    submitit.SlurmJob.watcher.clear()
    return state


def _calls(state, command: str) -> list[str]:
    path = state / "calls.log"
    return [x for x in path.read_text().splitlines() if x.startswith(command + " ")] \
        if path.exists() else []


def _slurm(cfg, poll_s=0.5):
    cfg.compare.launcher = "slurm"
    cfg.compare.slurm.poll_s = poll_s
    return cfg


def _same_runs(a: dict, b: dict) -> None:
    keys = ("method", "seed", "steps", "updates", "rollouts", "tokens", "final", "curve")
    assert [{k: r[k] for k in keys} for r in a["runs"]] == [
        {k: r[k] for k in keys} for r in b["runs"]]


def test_settings_name_the_bad_field():
    c = _config()
    c.compare.slurm.nodes = 0
    with pytest.raises(config_lib.ConfigError, match=r"compare.slurm.nodes=0 is not allowed"):
        compare.validate(c)
    with pytest.raises(config_lib.ConfigError, match=r"compare.slurm.gpus is not a SLURM"):
        launchers.slurm_settings(gpus=8)
    c = _config()
    c.compare.launcher = "ray"
    with pytest.raises(config_lib.ConfigError, match=r"compare.launcher='ray' is not a "
                                                      r"launcher: one of local, slurm"):
        compare.validate(c)


def test_a_dry_run_prints_every_batch_script_and_submits_nothing(tmp_path, capsys):
    cfg = _config("compare_math", "qwen2.5-math-1.5b")
    cfg.compare.launcher = "slurm"
    specs = compare.plan(cfg, str(tmp_path / "w"))
    compare.run(cfg, str(tmp_path / "w"), dry_run=True)
    out = capsys.readouterr().out
    assert f"slurm launcher: {len(specs)} runs, one job each (nothing submitted)" in out
    scripts = out.split("\n===== ")[1:]
    assert [s.split(" ->")[0] for s in scripts] == [s.name for s in specs]
    for text in scripts:
        for line in ("#SBATCH --nodes=1", "#SBATCH --gpus-per-node=8",
                     "#SBATCH --ntasks-per-node=1", "#SBATCH --signal=TERM@300",
                     "#SBATCH --requeue", "#SBATCH --time=2880"):
            assert line in text, line
        assert "srun --unbuffered" in text and "-m submitit.core._submit" in text
    # the runs matched to GRESO's rollouts wait for its job
    pcl = next(s for s in scripts if s.startswith("pcl-s0"))
    assert "(after greso-s0)" in pcl and "#SBATCH --dependency=afterok:JOBID_OF_greso-s0" in pcl
    assert not os.path.exists(tmp_path / "w")  # nothing made, nothing submitted


def test_a_failed_job_is_named_with_its_id_state_and_log(tmp_path, cluster):
    cfg = _slurm(_config())
    cfg.rl.batch_size = 100_000_000  # train refuses it before the warm start
    cfg.compare.run = "uniform"
    with pytest.raises(RunError) as e:
        compare.run(cfg, str(tmp_path / "w"))
    job = json.loads((tmp_path / "w" / "slurm" / slurm.JOBS).read_text())["uniform-s0"]["job_id"]
    msg = str(e.value)
    assert f"uniform-s0: SLURM job {job} ended FAILED before its budget" in msg
    assert f"{job}_0_log.err" in msg and "larger than the training pool" in msg


def test_submission_waits_reattaches_and_replaces_what_waits_for_a_replaced_job(
        tmp_path, cluster, monkeypatch):
    """On a full cluster (no job starts): a run waits for the run that trains its warm start,
    and a job submitted after one with a dependency has none of its own; the same command
    reattaches to every pending job; once a job is cancelled, it is submitted again and the
    job waiting for it is replaced by one waiting for the new job."""
    monkeypatch.setenv("FAKE_SLURM_HOLD", "1")
    cfg = _slurm(_config())
    cfg.compare.seeds = "0,1"
    work = str(tmp_path / "w")
    specs = compare.plan(cfg, work)
    order = ["uniform-s0", "hive-s0", "uniform-s1", "hive-s1"]
    specs = sorted(specs, key=lambda s: order.index(s.name))
    book_path = os.path.join(work, "slurm", slurm.JOBS)
    os.makedirs(os.path.dirname(book_path))

    def submit():
        book = json.load(open(book_path)) if os.path.exists(book_path) else {}
        slurm.Slurm._submit(compare._plan(cfg, work, specs), slurm.settings(cfg.compare),
                            book_path, book, {}, lambda text: None)
        return json.load(open(book_path))

    def script(job):
        return (cluster / f"{job}.sh").read_text()

    first = submit()
    ids = {n: first[n]["job_id"] for n in order}
    assert f"--dependency=afterok:{ids['uniform-s0']}" in script(ids["hive-s0"])
    assert "--dependency" not in script(ids["uniform-s1"])  # none left over from hive-s0's
    assert f"--dependency=afterok:{ids['uniform-s1']}" in script(ids["hive-s1"])
    assert submit() == first and len(_calls(cluster, "sbatch")) == 4  # all reattached

    subprocess.run(["scancel", ids["uniform-s0"]], check=True)
    again = submit()
    assert again["uniform-s0"]["job_id"] != ids["uniform-s0"]
    assert again["hive-s0"]["job_id"] != ids["hive-s0"]  # it waited for the cancelled job
    assert f"--dependency=afterok:{again['uniform-s0']['job_id']}" in script(
        again["hive-s0"]["job_id"])
    assert (cluster / f"{ids['hive-s0']}.state").read_text() == "CANCELLED"
    assert {n: again[n]["job_id"] for n in ("uniform-s1", "hive-s1")} == {
        n: ids[n] for n in ("uniform-s1", "hive-s1")}
    subprocess.run(["scancel", *(again[n]["job_id"] for n in order)], check=True)


@pytest.mark.slow
def test_the_smoke_comparison_as_slurm_jobs_preempted_reattached_and_reported(tmp_path,
                                                                              cluster):
    """--detach submits both runs (hive after uniform: it loads the warm start uniform's run
    trains); uniform's job is preempted mid-run (SIGTERM, requeue) and resumes from its
    checkpoint; the same command then reattaches to the jobs (no second submission) and
    writes results equal to the local launcher's; --report_only writes them again."""
    base = _config()
    base.compare.rollout_budget = 600
    local = compare.run(base, str(tmp_path / "local"))

    work = str(tmp_path / "w")
    cfg = _slurm(_config())
    cfg.compare.rollout_budget = 600
    assert compare.run(cfg, work, detach=True) == {"detached": True}
    jobs = json.loads(open(os.path.join(work, "slurm", slurm.JOBS)).read())
    assert list(jobs) == ["uniform-s0", "hive-s0"] and len(_calls(cluster, "sbatch")) == 2
    first = jobs["uniform-s0"]["job_id"]
    metrics = os.path.join(work, "runs", "uniform-s0", "metrics.jsonl")
    deadline = time.time() + 600
    while time.time() < deadline:  # a few steps in: preempt it
        if os.path.exists(metrics) and sum(1 for _ in open(metrics)) >= 4:
            break
        time.sleep(0.5)
    subprocess.run([sys.executable, FAKE, "preempt", first], check=True)

    results = compare.run(cfg, work)  # reattaches and follows both jobs to their end
    assert len(_calls(cluster, "sbatch")) == 2  # nothing submitted twice
    assert f"scontrol requeue {first}" in _calls(cluster, "scontrol")
    assert (cluster / f"{first}.state").read_text() == "COMPLETED"
    _same_runs(local, results)
    again = compare.run(cfg, work, report_only=True)
    _same_runs(results, again)


@pytest.mark.slow
def test_ctrl_c_cancels_every_job_of_the_comparison(tmp_path, cluster):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "frontier_rl", "compare",
           "--config=configs/compare_arith.py:smoke", f"--workdir={tmp_path / 'w'}",
           "--config.compare.launcher=slurm", "--config.compare.slurm.poll_s=0.5",
           "--config.compare.rollout_budget=600"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "RUNNING" in line:
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    jobs = json.loads((tmp_path / "w" / "slurm" / slurm.JOBS).read_text())
    ids = [jobs[n]["job_id"] for n in ("uniform-s0", "hive-s0")]
    assert proc.returncode == 130, err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and f"cancelled SLURM jobs {', '.join(ids)}" in lines[0], err
    assert sorted(x.split()[1] for x in _calls(cluster, "scancel")) == sorted(ids)
    deadline = time.time() + 60
    while time.time() < deadline and any(
            (cluster / f"{j}.state").read_text() != "CANCELLED" for j in ids):
        time.sleep(0.5)
    assert [(cluster / f"{j}.state").read_text() for j in ids] == ["CANCELLED"] * 2


def test_the_cluster_page_shows_the_script_the_code_prints(capsys):
    """docs/cluster.md's batch script is what --dry_run prints for PCL's run of the paper
    config (the interpreter's path written as .venv/bin/python)."""
    cfg = _config("compare_math", "qwen2.5-math-1.5b")
    cfg.compare.launcher = "slurm"
    compare.run(cfg, "/shared/runs/compare_math", dry_run=True)
    out = capsys.readouterr().out.replace(sys.executable, ".venv/bin/python")
    printed = next(b for b in out.split("\n\n===== ") if b.startswith("pcl-s0")).rstrip()
    page = open(os.path.join(ROOT, "docs", "cluster.md")).read()
    shown = page.split("<!-- slurm-script:begin -->\n```\n")[1].split("\n```\n")[0]
    assert shown == "===== " + printed
