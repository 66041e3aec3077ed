"""The docs say what the code does where the two drifted apart:
the rewards are process 0's, broadcast, and the batch is hash-checked; packed rows train as
one sequence per row on cuDNN; `fit --target` documents every target the code knows."""

import os
import re

from frontier_rl.fit import gpu_specs, targets
from frontier_rl.rl import batch as batch_lib
from frontier_rl.run import distributed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(path: str) -> str:
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def test_docs_describe_the_broadcast_rewards_and_the_batch_hash_check():
    assert callable(distributed.broadcast_object) and callable(distributed.check_agree)
    for path in ("docs/multihost.md", "docs/architecture.md"):
        text = " ".join(_read(path).split())
        assert "Nothing is broadcast" not in text, path
        assert "broadcast_object" in text and "check_agree" in text, path
        assert "every process scores every response" not in text, path


def test_docs_say_pack_trains_packed_on_cudnn():
    assert batch_lib.layout_for("pack", "cudnn") == "pack"
    for path in ("docs/benchmarks.md", "docs/architecture.md"):
        text = " ".join(_read(path).split())
        assert "layout_for" in text, path


def test_the_fit_target_table_names_every_target_the_code_knows():
    text = _read("docs/hardware.md")
    table = text[text.index("| `--target` |"):]
    table = table[:table.index("\n\n")]
    for chip in gpu_specs.GPU_TARGET_CONFIGS:
        assert f"`{chip}x<N>`" in table, chip
    for gen in targets._TPU:
        assert re.search(rf"`{gen}-<(cores|chips)>`", table), gen
    # every --target=NAME the README shows is one the code parses
    for name in set(re.findall(r"--target=([a-z0-9-]+)", text)):
        targets.parse(name)
