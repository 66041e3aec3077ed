"""The README's commands run as written: every code block marked `<!-- runnable -->` is run
line by line as a user would type it (the `frontier-rl` entry point, from the repository root),
and a block marked `<!-- runnable: smoke -->` with each config's `:smoke` argument. Only the
workdirs move, under a temporary directory."""

import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = re.compile(r"<!-- runnable(: smoke)? -->\n```bash\n(.*?)```", re.S)


def readme_commands() -> list[tuple[str, bool]]:
    """(command, on smoke) for each command of a marked block, continuation lines joined and
    comments dropped."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    out = []
    for smoke, body in MARK.findall(text):
        for cmd in body.replace("\\\n", " ").splitlines():
            cmd = cmd.split("  #")[0].strip()
            if cmd:
                out.append((" ".join(cmd.split()), bool(smoke)))
    return out


def as_run(cmd: str, smoke: bool, tmp: str) -> list[str]:
    argv = shlex.split(cmd)
    for i, a in enumerate(argv):
        if smoke and a.startswith("--config=configs/"):
            argv[i] = a.split(":")[0] + ":smoke"
        if a.startswith("--workdir="):
            argv[i] = "--workdir=" + os.path.join(tmp, a.split("=", 1)[1])
    return argv


def test_the_readme_marks_its_cpu_commands_runnable():
    cmds = [c for c, _ in readme_commands()]
    assert len(cmds) >= 5
    assert all(c.startswith("frontier-rl ") for c in cmds), cmds
    for verb in ("train", "compare", "eval", "fit", "protocol"):
        assert any(c.startswith(f"frontier-rl {verb} ") for c in cmds), verb


@pytest.mark.slow
def test_every_runnable_readme_command_runs(tmp_path):
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    for cmd, smoke in readme_commands():
        argv = as_run(cmd, smoke, str(tmp_path))
        r = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=900)
        assert r.returncode == 0, f"{cmd}: exit {r.returncode}\n{r.stderr[-3000:]}"
