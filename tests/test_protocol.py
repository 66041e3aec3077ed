"""Every protocol setting of the paper configs carries its source (experiment/protocol.py), and
`frontier-rl protocol` prints them."""

import importlib.util
import os
import subprocess
import sys

import pytest

from frontier_rl.experiment import paper, protocol

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = [(name, model) for name, models in (
    ("math_grpo.py", paper.MODELS), ("math_dapo.py", paper.MODELS),
    ("math_hive.py", ("qwen2.5-math-1.5b", "qwen2.5-math-7b", "deepseek-r1-distill-qwen-1.5b",
                      "qwen3-4b-base", "llama3.2-3b-instruct")),
    ("math_heapa.py", paper.MODELS),
    ("compare_math.py", ("qwen2.5-math-1.5b", "qwen2.5-math-7b", "deepseek-r1-distill-qwen-1.5b",
                         "qwen3-4b-base", "llama3.2-3b-instruct"))) for model in models]


def _config(name, arg):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "configs", name))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.get_config(arg)


@pytest.mark.parametrize("name,model", CONFIGS)
def test_every_protocol_setting_has_a_source(name, model):
    c = _config(name, model)
    required = tuple(protocol.SOURCES[paper.MODELS[model][2]])
    assert protocol.check(c, required) == []
    assert protocol.unsourced(c) == []  # every setting that differs from the defaults
    words = {word for _, _, word, _ in protocol.rows(c)}
    assert words <= set(protocol.WORDS)
    if name == "math_heapa.py":  # the DAPO recipe's settings are sourced too
        c = _config(name, f"{model},dapo")
        assert protocol.check(c, required) == [] and protocol.unsourced(c) == []


def test_a_setting_without_a_source_fails():
    c = _config("math_hive.py", "qwen2.5-math-7b")
    del c.protocol.rl["learning_rate"]
    assert protocol.unsourced(c) == ["rl.learning_rate"]
    assert protocol.check(c, ("rl.learning_rate",)) == ["rl.learning_rate: no source"]
    c = _config("math_hive.py", "qwen2.5-math-7b")
    c.rl.tis_cap = 2.0  # a new protocol choice nobody sourced
    assert protocol.unsourced(c) == ["rl.tis_cap"]
    c.protocol.rl.tis_cap = "ours"  # a word without its reason
    c.protocol.rl.learning_rate = "papers: HIVE"  # not a source word
    c.protocol.rl.grad_clip = "code: GRESO's defaults"  # code without a file
    assert protocol.check(c) == [
        "rl.grad_clip: code names no file (\"GRESO's defaults\")",
        "rl.learning_rate: source word 'papers' is not one of "
        "['paper', 'code', 'follows', 'ours']",
        "rl.tis_cap: ours gives no reference or reason"]


def test_smoke_runs_carry_no_sources():
    assert "protocol" not in _config("math_hive.py", "smoke")


def test_protocol_command_prints_the_table():
    out = subprocess.run(
        [sys.executable, "-m", "frontier_rl", "protocol",
         "--config=configs/math_hive.py:qwen2.5-math-7b"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["setting", "value", "source", "reference"]
    row = next(line for line in lines if line.startswith("rl.entropy_coef"))
    assert row.split()[1:3] == ["0.001", "follows"] and "ppo_trainer.yaml" in row


def test_model_sources_replace_the_protocols():
    """Each model's own source (paper.MODELS arg): HIVE's other models name App. B.1, the
    Qwen2.5-7B-Instruct recipe cites HeaPA's released 7B script for every setting it changes."""
    c = _config("math_hive.py", "llama3.2-3b-instruct")
    assert "Llama-3.2-3B-Instruct" in c.protocol.model.path
    c = _config("math_heapa.py", "qwen2.5-7b-instruct")
    for path in ("rl.learning_rate", "rl.warmup_steps", "rl.minibatches", "rl.num_steps"):
        section, leaf = path.split(".")
        src = c.protocol[section][leaf]
        assert src.startswith("code: ") and "HEAP-DAPO_14kdapo" in src, (path, src)
    assert set(protocol.MODEL_SOURCES) <= set(paper.MODELS)


@pytest.mark.parametrize("name,arg", [
    ("math_heapa.py", "qwen3-4b,script_val"), ("math_heapa.py", "qwen2.5-7b-instruct,script_val"),
    ("math_grpo.py", "qwen3-8b,openr1_math_heapa"), ("math_hive.py", "openr1_math_30k"),
    ("math_grpo.py", "qwen3-4b,dapo_math"), ("math_dapo.py", "qwen2.5-7b-instruct"),
    ("compare_math.py", "llama3.2-3b-instruct,openr1_math_30k")])
def test_flags_corpora_and_baselines_are_sourced(name, arg):
    c = _config(name, arg)
    model = arg.split(",")[0] if arg.split(",")[0] in paper.MODELS else "qwen2.5-math-1.5b"
    required = tuple(protocol.SOURCES[paper.MODELS[model][2]])
    assert protocol.check(c, required) == [] and protocol.unsourced(c) == []


def test_eval_top_k_is_heapas_and_not_hives():
    """HeaPA's offline evaluation keeps the 50 likeliest tokens (eval_dataset_generation.py's
    TOP_K); HIVE's (GRESO's validation) and HeaPA's in-run validation keep no top-k."""
    for name, model in (("math_heapa.py", "qwen3-4b"), ("math_grpo.py", "qwen3-4b"),
                        ("math_dapo.py", "qwen2.5-7b-instruct")):
        c = _config(name, model)
        assert c.eval.top_k == 50 and c.rollout.top_k == -1, (name, model)
        assert c.protocol.eval.top_k.startswith("code: HeaPA eval_dataset_generation.py")
        assert "TOP_K = 50" in c.protocol.eval.top_k
    for name, arg in (("math_hive.py", ""), ("math_grpo.py", "qwen2.5-math-1.5b"),
                      ("compare_math.py", ""), ("math_heapa.py", "qwen3-4b,script_val")):
        c = _config(name, arg)
        assert c.eval.top_k == -1 and c.rollout.top_k == -1, (name, arg)
        assert "top_k" in c.protocol.eval.top_k and "-1" in c.protocol.eval.top_k


def test_sources_of_the_new_settings():
    c = _config("math_heapa.py", "qwen3-4b")
    assert c.protocol.task.path.startswith("code: ") and "14k" in c.protocol.task.path
    c = _config("math_grpo.py", "qwen3-4b,openr1_math_heapa")
    assert "prepare_OpenR1_training_dataset.py" in c.protocol.task.path
    c = _config("math_hive.py", "openr1_math_30k")
    assert c.protocol.task.path.startswith("paper: HIVE") and "30,000" in c.protocol.task.path
    c = _config("math_heapa.py", "qwen3-4b,script_val")
    for leaf in ("sets", "k", "temperature", "top_p", "top_k", "every"):
        assert "HeaPA_DAPO_PathAgg" in c.protocol.eval[leaf], leaf
    c = _config("math_heapa.py", "qwen2.5-7b-instruct,script_val")
    assert "test_freq=1000" in c.protocol.eval.every
    c = _config("math_dapo.py", "qwen2.5-7b-instruct")
    assert "HEAP-DAPO_14kdapo" in c.protocol.selector.ds.gen_batch_size
    c = _config("compare_math.py", "")
    assert c.protocol.compare.budget.startswith("paper: HIVE")
    for sel in ("greso", "pcl", "prefilter"):
        assert sel in c.protocol.selector, sel
