"""launch/paper.sh, from a paper config to its report: the dry run on the 1.5B HIVE config (no
GPU, nothing run, installed or fetched), and the whole sequence on a stand-in node (nvidia-smi,
the hub fetch, frontier-rl and run_gpu.sh record what they are run with): the steps in order,
each at its share of the GPUs, and a rerun that skips every step whose output exists.
(tests/test_launch.py runs bash -n and shellcheck on it, as on every launch script.)"""

import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HIVE = "configs/math_hive.py:qwen2.5-math-1.5b"


def _env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("XLA_", "JAX_MEM", "FRONTIER_RL_", "SGLANG_", "CUDA_", "HF_"))}
    env.update({"FRONTIER_RL_VENV": sys.prefix, "HF_HUB_OFFLINE": "1", **extra})
    return env


def test_dry_run_prints_each_step_of_the_hive_15b_config(tmp_path):
    workdir = tmp_path / "run"
    r = subprocess.run(["bash", "launch/paper.sh", HIVE, "--target=a100-80gbx8", "--dry-run",
                        f"--workdir={workdir}"], cwd=ROOT, env=_env(), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    steps = [line for line in out.splitlines() if line.startswith("[paper] ") and "/6 " in line
             and ":" in line.split("/6 ", 1)[1]]
    assert [s.split("/6 ")[0][-1] for s in steps if "would fetch" not in s] == list("123456")
    assert "8 GPU(s), JAX on 8 (sharing each with SGLang)" in out
    assert (f"python -m frontier_rl.experiment.hub_fetch fetch --config={HIVE} "
            f"--out={workdir}/hub") in out
    # what step 2 would fetch: the paper's ids, the corpus built from its two sources
    assert "model.path                   paper id  Qwen/Qwen2.5-Math-1.5B@main" in out
    assert ("task.path                    build     BytedTsinghua-SIA/DAPO-Math-17k@main, "
            "xDAN2099/lighteval-MATH@main") in out
    assert "eval.sets.aime24             paper id  HuggingFaceH4/aime_2024@main" in out
    fit = next(s for s in steps if s.startswith("[paper] 3/6 fit"))
    assert f"frontier-rl fit --target=a100-80gbx8 --config={HIVE}" in fit
    assert "--config.rollout.engine=sglang" in fit and f"--config.model.path={workdir}/model" in fit
    train = next(s for s in steps if s.startswith("[paper] 4/6 train"))
    assert (f"env FRONTIER_RL_SKIP_FIT=1 SGLANG_MODEL={workdir}/model bash "
            f"{ROOT}/launch/run_gpu.sh {HIVE} {workdir} 31000") in train
    assert f"frontier-rl eval --config={HIVE} --workdir={workdir}" in out
    assert f"{workdir}/report.md" in out
    assert not workdir.exists()  # nothing was run or written

    # without --target and without nvidia-smi: --gpus gives the count, the GPU stays unnamed
    r = subprocess.run(["bash", "launch/paper.sh", HIVE, "--gpus=8", "--dry-run",
                        f"--workdir={workdir}"], cwd=ROOT,
                       env=_env(PATH="/usr/bin:/bin", FRONTIER_RL_VENV=str(tmp_path / "none")),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "frontier-rl fit --target=GPUx8 " in r.stdout and "would fetch" not in r.stdout


def test_arguments_are_checked_before_anything_runs(tmp_path):
    def run(*args):
        return subprocess.run(["bash", "launch/paper.sh", *args], cwd=ROOT,
                              env=_env(PATH="/usr/bin:/bin"), capture_output=True, text=True,
                              timeout=60)

    if not shutil.which("nvidia-smi", path="/usr/bin:/bin"):
        r = run(HIVE, "--dry-run")  # no nvidia-smi, no --target / --gpus
        assert r.returncode == 2 and "give --target=GPUxN" in r.stderr
    r = run("configs/compare_math.py", "--gpus=8", "--dry-run")
    assert r.returncode == 2 and "frontier-rl compare" in r.stderr
    r = run("configs/nope.py", "--gpus=8")
    assert r.returncode == 2 and "no config file configs/nope.py" in r.stderr
    r = run(HIVE, "--gpus=8", "--bogus")
    assert r.returncode == 2 and "unknown argument --bogus" in r.stderr


def stand_in_node(tmp_path):
    """launch/paper.sh and env.sh on a node of 8 stand-in H100s: the hub fetch, frontier-rl and
    run_gpu.sh record each call (with JAX's memory fraction, FRONTIER_RL_GPU_SHARED and
    HF_HUB_OFFLINE as they see them) and write the outputs the real ones write."""
    root = tmp_path / "node"
    (root / "launch").mkdir(parents=True)
    for f in ("paper.sh", "env.sh", "shares.sh"):
        shutil.copy(os.path.join(ROOT, "launch", f), root / "launch")
    shutil.copy(os.path.join(ROOT, "setup.py"), root)
    log = tmp_path / "calls.log"
    record = (f'echo "$(basename "$0") XLA=${{XLA_PYTHON_CLIENT_MEM_FRACTION:-}} '
              f'SHARED=${{FRONTIER_RL_GPU_SHARED:-}} OFFLINE=${{HF_HUB_OFFLINE:-}} $*" >> {log}')
    model = tmp_path / "hf" / "snapshot"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (root / "launch" / "run_gpu.sh").write_text(
        f"#!/bin/sh\n{record}\n"
        f'echo "SKIP_FIT=$FRONTIER_RL_SKIP_FIT SGLANG_MODEL=$SGLANG_MODEL" >> {log}\n'
        'echo \'{"step": 2, "rollouts": 64}\' > "$2/final_metrics.json"\n')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(
        '#!/bin/sh\nif [ "$1" = --query-gpu=name ]; then\n'
        + 'echo "NVIDIA H100 80GB HBM3"\n' * 8 + "exit 0\nfi\n"
        + "".join(f'echo "GPU {i}: NVIDIA H100 80GB HBM3"\n' for i in range(8)))
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(
        "#!/bin/bash\n"
        'if [ "$1" = -m ] && [ "$2" = frontier_rl.experiment.hub_fetch ]; then\n'
        f"  {record}\n"
        '  for a in "$@"; do case "$a" in --out=*) out="${a#*=}" ;; esac; done\n'
        '  mkdir -p "$out"\n'
        f'  echo "{model}" > "$out/model_dir"\n'
        '  echo "| field | id | commit | files |" > "$out/sources.md"\n'
        '  printf "%s\\n" "--config.model.path=Qwen/Qwen2.5-Math-1.5B@abc123" '
        '"--config.eval.sets.aime24=HuggingFaceH4/aime_2024@def456" > "$out/flags"\n'
        "  exit 0\n"
        "fi\n"
        f'exec {sys.executable} "$@"\n')
    (venv / "bin" / "frontier-rl").write_text(
        f"#!/bin/bash\n{record}\n"
        'case "$1" in\n'
        '  fit) echo "fits: yes"; exit "${FAKE_FIT:-0}" ;;\n'
        '  eval) for a in "$@"; do case "$a" in --workdir=*) w="${a#*=}" ;; '
        '--step=*) s="${a#*=}" ;; esac; done\n'
        '        mkdir -p "$w/eval/step_$s"; echo "# Evaluation" > "$w/eval/step_$s/eval.md"\n'
        '        echo "| aime24 | 30 | 10.0 |" >> "$w/eval/step_$s/eval.md"\n'
        '        echo "{}" > "$w/eval/step_$s/eval.json" ;;\n'
        '  protocol) echo "setting  value  source  reference" ;;\n'
        "esac\n")
    for f in (bin_dir / "nvidia-smi", venv / "bin" / "python", venv / "bin" / "frontier-rl",
              root / "launch" / "run_gpu.sh"):
        f.chmod(0o755)
    with open(root / "setup.py", "rb") as f:
        crc = subprocess.run(["cksum"], stdin=f, capture_output=True, text=True,
                             check=True).stdout.split()[0]
    (venv / f".frontier_rl-tasks-{crc}").touch()
    env = _env(PATH=f"{bin_dir}:{os.environ['PATH']}", FRONTIER_RL_VENV=str(venv),
               FRONTIER_RL_ACCEL="cpu")
    env.pop("HF_HUB_OFFLINE")  # paper.sh sets it after the fetch
    config = os.path.join(ROOT, "configs", "math_hive.py") + ":qwen2.5-math-1.5b"

    def run(workdir, **extra):
        if log.exists():
            log.unlink()
        r = subprocess.run(["bash", str(root / "launch" / "paper.sh"), config,
                            f"--workdir={workdir}"], env={**env, **extra},
                           capture_output=True, text=True, timeout=300)
        calls = log.read_text().splitlines() if log.exists() else []
        return r, calls

    return run, model


def test_paper_sh_runs_each_step_once_and_resumes(tmp_path):
    run, model = stand_in_node(tmp_path)
    workdir = tmp_path / "run"
    r, calls = run(workdir)
    assert r.returncode == 0, r.stdout + r.stderr
    pinned = ("--config.model.path=Qwen/Qwen2.5-Math-1.5B@abc123 "
              "--config.eval.sets.aime24=HuggingFaceH4/aime_2024@def456")
    hub_call, fit, train, train_env, ev, protocol = calls
    assert hub_call.startswith(
        "python XLA= SHARED= OFFLINE= -m frontier_rl.experiment.hub_fetch fetch ")
    assert hub_call.endswith(f"--out={workdir}/hub")
    # fit: every program for the node's GPUs at JAX's share beside SGLang, on the local files
    assert fit.startswith("frontier-rl XLA=0.45 SHARED=1 OFFLINE=1 fit --target=h100x8 ")
    assert f"{pinned} --config.model.path={workdir}/model" in fit
    assert os.path.realpath(workdir / "model") == str(model)
    # train: run_gpu.sh picks its own share; its fit check is skipped, SGLang starts from the
    # fetched checkpoint, the trainer gets the pinned ids
    assert train.startswith("run_gpu.sh XLA= SHARED= OFFLINE=1 ")
    assert train.endswith(f"{workdir} 31000 {pinned}")
    assert train_env == f"SKIP_FIT=1 SGLANG_MODEL={workdir}/model"
    assert ev.startswith("frontier-rl XLA=0.9 SHARED= OFFLINE=1 eval ")  # a GPU to itself
    assert f"--workdir={workdir} --step=2 {pinned}" in ev
    assert protocol.startswith("frontier-rl ") and " protocol " in protocol
    report = (workdir / "report.md").read_text()
    for section in ("## Sources", "## Protocol", "## Fit (h100x8)", "## Training",
                    "## Evaluation (step 2)", "| aime24 | 30 | 10.0 |", '"rollouts": 64'):
        assert section in report
    assert json.loads((workdir / "final_metrics.json").read_text())["step"] == 2

    r, calls = run(workdir)  # everything done: nothing runs again
    assert r.returncode == 0 and calls == [], calls
    assert r.stdout.count(": skipped, ") == 5
    shutil.rmtree(workdir / "eval")
    (workdir / "report.md").unlink()
    r, calls = run(workdir)  # resumes at the evaluation
    assert r.returncode == 0, r.stderr
    assert [c.split()[0] + " " + c.split()[4] for c in calls] == ["frontier-rl eval",
                                                                  "frontier-rl protocol"]


def test_a_run_that_does_not_fit_starts_nothing(tmp_path):
    run, _ = stand_in_node(tmp_path)
    r, calls = run(tmp_path / "run", FAKE_FIT="3")
    assert r.returncode == 3 and "does not fit h100x8" in r.stderr
    assert [c.split()[0] for c in calls] == ["python", "frontier-rl"]  # the fetch, the fit
    assert not (tmp_path / "run" / "fit_h100x8.txt").exists()
