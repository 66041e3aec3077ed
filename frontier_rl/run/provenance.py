"""Where a results file came from: the machine, the date, the commit and the command.

Every results file the project publishes (a comparison's results.json, `fit --json`, the bench
JSON, the calibration) carries this as its `meta`, so the docs that render it (launch/docs.sh)
can say what was measured where, and a reader can rerun it.
"""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def commit(root: str = ROOT) -> str:
    """The short commit of `root`, with "+local changes" when frontier_rl/ differs from it;
    "unknown" outside a git checkout."""
    def git(*args):
        return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True,
                              timeout=30)
    try:
        head = git("rev-parse", "--short", "HEAD")
        if head.returncode:
            return "unknown"
        dirty = git("status", "--porcelain", "--", "frontier_rl").stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head.stdout.strip() + (" +local changes" if dirty else "")


def machine() -> str:
    """CPU cores and architecture, and the accelerators JAX sees when it is already loaded."""
    text = f"{os.cpu_count()} CPU cores ({platform.machine()}, {platform.system()})"
    jax = sys.modules.get("jax")
    if jax is not None:
        try:
            devices = jax.devices()
        except RuntimeError:
            return text
        if devices and devices[0].platform != "cpu":
            text += f", {len(devices)} x {devices[0].device_kind}"
    return text


def command(argv: list[str] | None = None) -> str:
    """The command line as a user would retype it: `frontier-rl ...` for the CLI (also when
    `fit --target` re-ran it as frontier_rl/cli.py in the target's Python), paths inside the
    repository relative to it and the home directory as `~` (no path of this machine)."""
    argv = list(sys.argv if argv is None else argv)
    if argv and os.path.basename(argv[0]) in ("frontier-rl", "__main__.py", "cli.py"):
        argv[0] = "frontier-rl"
    home = os.path.expanduser("~")
    argv = [a.replace(ROOT + os.sep, "").replace(home + os.sep, "~" + os.sep) for a in argv]
    return shlex.join(argv)


def stamp(argv: list[str] | None = None) -> dict:
    """{"machine", "date" (UTC, ISO 8601), "commit", "command"}."""
    return {"machine": machine(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "commit": commit(), "command": command(argv)}
