"""docs/extending.md's worked examples, exactly as the page writes them: a new loss file and a
new engine file, each with its one registration line, train together on the smoke config."""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _blocks(section: str) -> list[str]:
    """The ```python blocks of one `## ` section of docs/extending.md."""
    with open(os.path.join(ROOT, "docs", "extending.md")) as f:
        text = f.read()
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", body, re.S)


def test_the_pages_examples_are_one_new_file_and_one_registration_line_each():
    for section, registry_file in (("A policy loss", "rl/objectives.py"),
                                   ("A rollout engine", "rollout/engines.py")):
        module, registration = _blocks(section)
        assert "register_" in module
        assert len(registration.strip().splitlines()) == 1, section
        # the registration line has the form of the lines already in that file
        with open(os.path.join(ROOT, "frontier_rl", registry_file)) as f:
            assert "# noqa: F401" in f.read() and "# noqa: F401" in registration


@pytest.mark.slow
def test_the_toy_loss_and_the_toy_engine_train_on_the_smoke_config(tmp_path):
    (loss_src, _), (engine_src, _) = _blocks("A policy loss"), _blocks("A rollout engine")
    script = textwrap.dedent(f"""
        import sys, types
        def install(name, src):  # the new file, as if written into the package
            mod = types.ModuleType(name)
            sys.modules[name] = mod
            exec(compile(src, name, "exec"), mod.__dict__)
        install("frontier_rl.rl.scaled_pg", {loss_src!r})
        install("frontier_rl.rollout.counting", {engine_src!r})
        from frontier_rl import config_lib, train
        import importlib.util
        spec = importlib.util.spec_from_file_location("cfg", "configs/arith_grpo.py")
        cfgmod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cfgmod)
        c = cfgmod.get_config("smoke")
        c.rl.loss, c.rl.losses.scaled_pg.scale = "scaled_pg", 0.5
        c.rollout.engine, c.rollout.counting.rows_per_call = "counting", 16
        c.rl.num_steps, c.eval.every = 2, 0
        c.log.progress = c.log.tensorboard = False
        try:
            c.rollout.counting.rows_per_call = -1
            config_lib.validate(c)
            raise SystemExit("a negative rows_per_call passed validation")
        except config_lib.ConfigError as e:
            assert "rollout.counting.rows_per_call=-1" in str(e), e
        c.rollout.counting.rows_per_call = 16
        train.run(config_lib.validate(c), {str(tmp_path)!r})
    """)
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True)
    with open(tmp_path / "metrics.jsonl") as f:
        records = [json.loads(line) for line in f if line.strip()]
    steps = [r for r in records if "rollout/engine_responses" in r]
    assert len(steps) == 2
    # each step's responses are counted (a rows cap of 16 splits each call but loses none)
    assert 0 < steps[0]["rollout/engine_responses"] < steps[1]["rollout/engine_responses"]
    with open(tmp_path / "config.json") as f:
        cfg = json.load(f)
    assert cfg["rl"]["loss"] == "scaled_pg" and cfg["rollout"]["engine"] == "counting"
