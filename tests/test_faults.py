"""Faults a user meets, driven as the user would: one writer per workdir, a comparison config
given to `train`. Each ends in one line naming the cause, never a traceback or a silent run."""

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from frontier_rl.run import lock
from frontier_rl.run.errors import RunError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "frontier_rl", *args], cwd=ROOT,
                          capture_output=True, text=True, **kw)


def test_a_second_writer_fails_at_once_naming_the_holder(tmp_path):
    first = lock.hold(str(tmp_path), "train", lambda s: None)
    with pytest.raises(RunError, match=rf"in use by another train \(pid {os.getpid()} on "
                                       rf"{socket.gethostname()}"):
        lock.hold(str(tmp_path), "compare", lambda s: None)
    first.release()
    said = []
    lock.hold(str(tmp_path), "compare", said.append).release()
    assert said == []  # a clean release leaves nothing to take over


def test_a_dead_processs_lock_is_taken_over_and_said_so(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = int(dead.stdout)
    (tmp_path / lock.NAME).write_text(json.dumps(
        {"what": "train", "pid": pid, "host": socket.gethostname(), "started": "then"}))
    said = []
    held = lock.hold(str(tmp_path), "train", said.append)
    assert len(said) == 1 and f"left by pid {pid}" in said[0] and "no longer running" in said[0]
    assert json.loads((tmp_path / lock.NAME).read_text())["pid"] == os.getpid()
    held.release()


def test_a_requeued_slurm_job_takes_over_its_own_lock_from_another_node(tmp_path,
                                                                          monkeypatch):
    """A lock line left on another host by this same SLURM job (killed, then requeued onto
    another node) is taken over; one left by another job on another host is refused."""
    def left_by(job):
        (tmp_path / lock.NAME).write_text(json.dumps(
            {"what": "train", "pid": 12345, "host": "node-17", "started": "then",
             "slurm_job": job}))

    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    left_by("4242")
    said = []
    held = lock.hold(str(tmp_path), "train", said.append)
    assert len(said) == 1 and "earlier start of this SLURM job 4242" in said[0]
    assert json.loads((tmp_path / lock.NAME).read_text())["slurm_job"] == "4242"
    held.release()
    left_by("999")
    with pytest.raises(RunError, match=r"held by a train of pid 12345 on host node-17"):
        lock.hold(str(tmp_path), "train", said.append)


@pytest.mark.slow
def test_two_trains_on_one_workdir(tmp_path):
    """The second `train` on a running one's workdir exits 1 at once with one line; the first
    runs to its end with one record per step."""
    args = ["train", "--config=configs/arith_grpo.py:smoke", f"--workdir={tmp_path}",
            "--config.rl.num_steps=6", "--config.log.progress=False"]
    first = subprocess.Popen([sys.executable, "-m", "frontier_rl", *args], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    path = tmp_path / lock.NAME
    deadline = time.time() + 300
    while time.time() < deadline and first.poll() is None:
        if path.exists() and path.read_text().strip():
            break
        time.sleep(0.1)
    assert first.poll() is None
    t0 = time.time()
    second = _cli(*args)
    assert second.returncode == 1 and time.time() - t0 < 60
    assert f"in use by another train (pid {first.pid}" in second.stderr
    assert "Traceback" not in second.stderr
    out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err
    with open(tmp_path / "metrics.jsonl") as f:
        steps = [json.loads(line)["step"] for line in f]
    assert steps == sorted(set(steps)) and steps[-1] == 6


def test_train_refuses_a_comparison_config(tmp_path):
    r = _cli("train", "--config=configs/compare_arith.py:smoke", f"--workdir={tmp_path}")
    assert r.returncode == 1 and "run it with `frontier-rl compare`" in r.stderr
    assert "Traceback" not in r.stderr and not os.listdir(tmp_path)


def _smoke(**fields):
    from frontier_rl import config_lib

    c = config_lib.shrink_for_smoke(config_lib.default_config())
    c.log.progress = c.log.tensorboard = False
    c.eval.every = 0
    return config_lib.validate(config_lib.set_fields(c, fields))


@pytest.mark.slow
def test_a_changed_config_is_refused_on_resume_unless_allowed(tmp_path):
    """A rerun with another learning rate stops, naming the field and both values, and leaves
    config.json as it was; more steps (a field that does not change the run) resume silently;
    --allow_config_change resumes and records the change."""
    from frontier_rl import train

    train.run(_smoke(**{"rl.num_steps": 2, "checkpoint.every": 1}), str(tmp_path))
    before = (tmp_path / "config.json").read_text()
    with pytest.raises(RunError, match=r"checkpoint at step 2 was made with another config "
                                       r"\(rl.learning_rate: 0\.\d+ -> 0\.5\)"):
        train.run(_smoke(**{"rl.num_steps": 3, "rl.learning_rate": 0.5}), str(tmp_path))
    assert (tmp_path / "config.json").read_text() == before
    assert not (tmp_path / "config_changes.jsonl").exists()
    train.run(_smoke(**{"rl.num_steps": 3}), str(tmp_path))  # only how far it runs
    assert not (tmp_path / "config_changes.jsonl").exists()
    train.run(_smoke(**{"rl.num_steps": 4, "rl.learning_rate": 0.5}), str(tmp_path),
              allow_config_change=True)
    changes = [json.loads(x) for x in open(tmp_path / "config_changes.jsonl")]
    assert changes[0]["step"] == 3 and changes[0]["changes"][0].startswith("rl.learning_rate")
    assert json.loads((tmp_path / "config.json").read_text())["rl"]["learning_rate"] == 0.5


def test_damaged_records_are_kept_aside_and_the_final_evaluation_restored(tmp_path, caplog):
    """A half-written final record and a damaged middle line: on rerun neither is deleted
    silently (both kept in metrics.jsonl.damaged, the lines named in a warning), and the
    checkpoint's step gets its record back with its evaluation."""
    from frontier_rl import train
    from frontier_rl.run import metrics

    cfg = _smoke(**{"rl.num_steps": 3, "checkpoint.every": 1})
    train.run(cfg, str(tmp_path))
    path = tmp_path / "metrics.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    final = json.loads(lines[-1])
    assert final["step"] == 3 and "eval/avg@2/all" in final
    lines[1] = lines[1][:10] + "\x00garbage\n"  # step 1's record
    lines[-1] = lines[-1][: len(lines[-1]) // 2]  # cut mid-write
    path.write_text("".join(lines))
    with caplog.at_level("WARNING"):
        train.run(cfg, str(tmp_path))
    assert "line(s) 2, 4 did not parse" in caplog.text
    kept = [json.loads(x) for x in open(str(path) + metrics.DAMAGED)]
    assert [k["line"] for k in kept] == [2, 4]
    records = metrics.read(str(path))
    assert [r["step"] for r in records] == [0, 2, 3]
    assert records[-1]["train/record_restored"] == 1.0
    assert records[-1]["eval/avg@2/all"] == final["eval/avg@2/all"]


def test_train_with_no_server_fails_in_seconds_naming_the_url(tmp_path):
    """Nothing listens at rollout.sglang.url: one line naming it, before any warm start."""
    import socket as sk

    with sk.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    r = _cli("train", "--config=configs/arith_grpo.py:smoke", f"--workdir={tmp_path}",
             "--config.rollout.engine=sglang",
             f"--config.rollout.sglang.url=http://127.0.0.1:{port}")
    assert r.returncode == 1 and time.monotonic() - t0 < 120
    assert f"rollout.sglang.url=http://127.0.0.1:{port}: no healthy server" in r.stderr
    assert "Traceback" not in r.stderr and "warm start" not in r.stdout


def test_a_hung_server_is_given_up_at_the_deadline_not_the_request_timeout():
    """A server that accepts the request and never answers (SIGSTOPped): one attempt may not
    wait past rollout.sglang.deadline, whatever the per-request timeout."""
    import socket as sk
    import threading

    from frontier_rl.rollout.engine import EngineError
    from frontier_rl.rollout.sglang import SGLangEngine

    srv = sk.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    accepted = []
    threading.Thread(target=lambda: [accepted.append(srv.accept()) for _ in range(8)],
                     daemon=True).start()
    eng = SGLangEngine(f"http://127.0.0.1:{srv.getsockname()[1]}", pad_id=0, stop_ids=[1],
                       max_new_tokens=4, sync_dir="/nonexistent", timeout=1800.0, deadline=3.0,
                       retries=50, backoff=0.1)
    t0 = time.monotonic()
    with pytest.raises(EngineError, match=r"deadline=3.0s"):
        eng._post("/generate", {}, lambda b: b)
    assert time.monotonic() - t0 < 10
    srv.close()


@pytest.mark.parametrize("args,words", [
    (["--config.rl.nosuch=1"], "--config.rl.nosuch: no such field"),
    (["--config.rl.learning_rate=abc"], "--config.rl.learning_rate=abc"),
])
def test_a_bad_override_is_one_line(tmp_path, args, words):
    r = _cli("train", "--config=configs/arith_grpo.py:smoke", f"--workdir={tmp_path}", *args)
    assert r.returncode == 1 and words in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_missing_config_file_and_a_bad_mesh_are_one_line(tmp_path):
    r = _cli("train", "--config=configs/nosuch.py", f"--workdir={tmp_path}")
    assert r.returncode == 1 and "--config=configs/nosuch.py: no such config file" in r.stderr
    assert "Traceback" not in r.stderr
    r = _cli("fit", "--config=configs/arith_grpo.py:smoke", "--mesh=data=1,fsdp=x")
    assert r.returncode == 1 and "--mesh='data=1,fsdp=x'" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_compare_workdir_that_is_a_file_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = _cli("compare", "--config=configs/compare_arith.py:smoke", f"--workdir={blocker}")
    assert r.returncode == 1 and str(blocker) in r.stderr and "Traceback" not in r.stderr


@pytest.mark.allow_skip("root writes to a read-only directory, so the case cannot arise")
def test_a_read_only_compare_workdir_is_one_line(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as a user that can write anywhere")
        r = _cli("compare", "--config=configs/compare_arith.py:smoke", f"--workdir={ro}")
        assert r.returncode == 1 and "is not writable" in r.stderr
    finally:
        ro.chmod(0o700)


def test_a_corpus_with_a_non_utf8_byte_names_the_file_and_line(tmp_path):
    from frontier_rl.tasks import corpus

    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"prompt": "1+1", "answer": "2"}\n{"prompt": "\xff", "answer": "1"}\n')
    with pytest.raises(ValueError, match=rf"{path}:2: not UTF-8 \(byte 0xff at column 13\)"):
        corpus._read_jsonl(str(path))


def test_a_copied_comparison_directory_holds_the_same_runs(tmp_path):
    """The finished-run fingerprint leaves out the comparison's own directory."""
    from frontier_rl import config_lib
    from frontier_rl.experiment import compare

    spec = importlib.util.spec_from_file_location(
        "compare_arith", os.path.join(ROOT, "configs", "compare_arith.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cfg = mod.get_config("smoke")
    a = compare.plan(cfg, str(tmp_path / "a"))[0]
    b = compare.plan(config_lib.validate(cfg), str(tmp_path / "b"))[0]
    assert compare.fingerprint(a.config, str(tmp_path / "a")) == compare.fingerprint(
        b.config, str(tmp_path / "b"))
    assert compare.fingerprint(a.config) != compare.fingerprint(b.config)


def test_a_corpus_whose_rows_have_no_answer_says_how_many_were_skipped(tmp_path):
    """Every row's answer is under another column: the error names the count skipped, not just
    "empty split"."""
    import ml_collections

    from frontier_rl import config_lib, train

    rows = [{"prompt": f"{i}+{i}=", "solution": str(2 * i)} for i in range(20)]
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    c = _smoke()
    c.task = ml_collections.ConfigDict({"name": "corpus", "path": str(path),
                                        "verifier": "numeric"})
    with pytest.raises(RunError, match=r"empty train and eval split: 20 rows were skipped for "
                                       r"having no answer"):
        train.run(config_lib.validate(c), str(tmp_path / "run"))


def test_a_damaged_compare_done_file_is_named(tmp_path):
    from frontier_rl.experiment import compare

    spec = importlib.util.spec_from_file_location(
        "compare_arith", os.path.join(ROOT, "configs", "compare_arith.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    run = compare.plan(mod.get_config("smoke"), str(tmp_path))[0]
    os.makedirs(run.dir)
    (open(os.path.join(run.dir, compare.FINAL), "w")).write("{}")
    with open(os.path.join(run.dir, compare.DONE), "w") as f:
        f.write('{"fingerprint": ')
    with pytest.raises(RunError, match=rf"the record of a finished run "
                                       rf"{os.path.join(run.dir, compare.DONE)} is damaged "
                                       r"\(JSONDecodeError: .+\): delete it to run "):
        compare._finished(run)


def test_data_prepares_hint_works_as_printed(tmp_path):
    """`data prepare --data_dir=DIR` prints `--config.task.path=tfds:NAME
    --config.task.data_dir=DIR`: on a paper config both flags are fields (the dataset is then
    looked up there; here none was prepared, so the error is about the dataset, in one line)."""
    r = _cli("train", "--config=configs/math_grpo.py:smoke", f"--workdir={tmp_path / 'run'}",
             "--config.task.path=tfds:nosuch_corpus", f"--config.task.data_dir={tmp_path}")
    assert r.returncode == 1 and "no such field" not in r.stderr
    assert "Could not open TFDS dataset 'nosuch_corpus'" in r.stderr
    assert f"data_dir={tmp_path}" in r.stderr and "Traceback" not in r.stderr


def test_a_warm_start_cache_of_another_model_is_refused(tmp_path):
    """The cached warm start was made for a 2-layer model; a run asking for 3 layers stops
    naming the differing field (it used to train the cached architecture after a warning)."""
    from frontier_rl import config_lib, train

    cache = str(tmp_path / "ws")
    train.run(_smoke(**{"rl.num_steps": 1, "warmstart.cache_dir": cache}), str(tmp_path / "a"))
    c = _smoke(**{"rl.num_steps": 1, "warmstart.cache_dir": cache})
    c.model.num_layers = c.model.num_layers + 1
    with pytest.raises(RunError, match=r"cached warm start .* made for another config \(.*"
                                       r"model.num_layers: \d+ -> \d+"):
        train.run(config_lib.validate(c), str(tmp_path / "b"))
