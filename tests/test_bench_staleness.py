"""`frontier-rl bench staleness --pin_cores`: the trainer's threads on their own cores, and
the option refused where it splits nothing."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_pinning_moves_every_thread_already_running_and_the_ones_started_after():
    script = """
import os, threading, time
from frontier_rl.bench.staleness import pin_this_process
early = threading.Thread(target=time.sleep, args=(2,))
early.start()
core = min(os.sched_getaffinity(0))
pin_this_process({core})
late = threading.Thread(target=time.sleep, args=(1,))
late.start()
print(sorted({tuple(sorted(os.sched_getaffinity(int(t)))) for t in os.listdir("/proc/self/task")}),
      core)
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out[0] == f"[({out[1]},)]", out


def test_pinning_needs_a_server_it_starts():
    from frontier_rl import config_lib
    from frontier_rl.bench import staleness

    c = config_lib.default_config()  # the embedded engine: nothing to split the cores with
    with pytest.raises(ValueError, match="--pin_cores splits the cores"):
        staleness.measure(c, "/nonexistent", 1, pin_cores=True)
