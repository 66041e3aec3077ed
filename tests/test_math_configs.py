"""The paper configs (configs/math_*.py, compare_math.py): full-size validation, the exact
prompt a chat template renders, the :smoke runs on generated verl parquet + benchmark files,
and `frontier-rl eval`'s per-benchmark table."""

import importlib.util
import json
import os

import pytest

from frontier_rl import config_lib, policy, train
from frontier_rl.evaluation import suite as eval_suite
from frontier_rl.experiment import compare, paper
from frontier_rl.tasks import make_task

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# HIVE's protocol: GRESO's user message in Qwen2.5-Math's chat template (its default system).
PROMPT = ("<|im_start|>system\nPlease reason step by step, and put your final answer within "
          "\\boxed{}.<|im_end|>\n<|im_start|>user\nPlease solve the following math problem: "
          "What is 8 added to 1?. The assistant first thinks about the reasoning process step by "
          "step and then provides the user with the answer. Return the final answer in "
          "\\boxed{} tags, for example \\boxed{1}. Let's solve this step by step. <|im_end|>\n"
          "<|im_start|>assistant\n")
# HeaPA's protocol: DAPO-Math-17k's user message in Qwen3's template (no system turn).
HEAPA_PROMPT = ("<|im_start|>user\nSolve the following math problem step by step. The last line "
                "of your response should be of the form Answer: $Answer (without quotes) where "
                "$Answer is the answer to the problem.\n\nWhat is 8 added to 1?\n\nRemember "
                "to put your answer on its own line after \"Answer:\".<|im_end|>\n"
                "<|im_start|>assistant\n")


def _config(name, arg):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, f"configs/{name}"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.get_config(arg)


@pytest.mark.parametrize("name,arg", [
    ("math_grpo.py", ""), ("math_grpo.py", "qwen2.5-math-7b"), ("math_grpo.py", "qwen3-0.6b"),
    ("math_grpo.py", "qwen3-8b,math"), ("math_hive.py", ""), ("math_hive.py", "qwen2.5-math-7b"),
    ("math_dapo.py", ""), ("math_dapo.py", "qwen3-4b"), ("math_heapa.py", ""),
    ("math_heapa.py", "qwen3-1.7b,dapo"), ("math_heapa.py", "qwen2.5-math-1.5b,childagg"),
    ("compare_math.py", ""), ("compare_math.py", "qwen2.5-math-7b"),
    ("math_hive.py", "deepseek-r1-distill-qwen-1.5b"), ("math_hive.py", "qwen3-4b-base,math"),
    ("math_hive.py", "llama3.2-3b-instruct"), ("math_grpo.py", "llama3.2-3b-instruct"),
    ("math_dapo.py", "deepseek-r1-distill-qwen-1.5b"),
    ("math_heapa.py", "qwen3-4b-instruct-2507"), ("math_heapa.py", "qwen2.5-7b-instruct,dapo"),
    ("math_grpo.py", "qwen2.5-7b-instruct"), ("math_dapo.py", "qwen3-4b-instruct-2507"),
    ("compare_math.py", "deepseek-r1-distill-qwen-1.5b"), ("compare_math.py", "qwen3-4b-base"),
    ("compare_math.py", "llama3.2-3b-instruct,openr1_math_30k"),
    ("math_heapa.py", "qwen3-4b,script_val"), ("math_grpo.py", "qwen3-8b,openr1_math_heapa"),
    ("math_hive.py", "qwen2.5-math-7b,openr1_math_30k")])
def test_full_size_configs_validate(name, arg):
    c = _config(name, arg)
    assert c.warmstart.enabled is False and c.model.preset and c.task.name == "corpus"
    assert c.task.chat_template == c.model.path  # the chat template follows the checkpoint
    protocol = paper.MODELS[arg.split(",")[0] or ("qwen3-4b" if name == "math_heapa.py"
                                                 else "qwen2.5-math-1.5b")][2]
    want = eval_suite.HIVE_BENCHMARKS if protocol == "hive" else eval_suite.HEAPA_BENCHMARKS
    assert set(c.eval.sets) == ({"aime24"} if "script_val" in arg else set(want))
    assert (c.rl.batch_size, c.rl.group_size) == ((256, 8) if protocol == "hive" else (512, 16))
    if name == "compare_math.py":
        specs = compare.plan(c, "/tmp/unused")
        # GRESO runs before the methods that go to the rollouts it spent
        assert [s.method for s in specs] == ["ds", "greso", "prefilter", "pcl", "pcl_own",
                                             "hive"]
        assert {s.method: s.match for s in specs if s.match} == dict.fromkeys(
            ("prefilter", "pcl", "pcl_own"), "greso")
        assert {(s.config.rl.num_steps, s.config.eval.every, s.config.rl.rollout_budget)
                for s in specs if not s.match} == {(1000, 50, 0)}  # HIVE's 1,000 steps


def test_loss_settings_follow_each_papers_code():
    """HIVE's loss where HIVE is silent is GRESO's (token-mean, clip 0.2/0.2, no dual clip,
    entropy 0.001, mini-batch 64 prompts = 512 responses), its DS baseline the same loss;
    HeaPA keeps its overlong buffer in the GRPO and the DAPO recipe."""
    for name in ("math_grpo.py", "math_hive.py", "math_dapo.py", "compare_math.py"):
        c = _config(name, "qwen2.5-math-7b")
        assert (c.rl.loss, c.rl.loss_agg, c.rl.eps_low, c.rl.eps_high) == (
            "grpo", "token_mean", 0.2, 0.2), name
        assert (c.rl.clip_ratio_c, c.rl.entropy_coef, c.rl.kl_coef) == (0.0, 0.001, 0.0)
        assert c.rl.minibatches == 4 and c.rl.overlong_buffer == 0
    ds = _config("math_dapo.py", "qwen2.5-math-1.5b")
    assert ds.selector.name == "ds" and ds.selector.ds.max_num_gen_batches == 0
    assert (ds.selector.ds.gen_batch_size, ds.rl.batch_size) == (384, 256)
    assert _config("compare_math.py", "").compare.methods.ds.to_dict() == {
        "selector": {"name": "ds"}}  # selection the only difference
    for arg in ("qwen3-4b", "qwen3-4b,dapo"):
        c = _config("math_heapa.py", arg)
        assert (c.rl.overlong_buffer, c.rl.overlong_penalty) == (4096, 1.0)
        assert c.rl.loss == ("dapo" if "dapo" in arg else "grpo")
    assert _config("math_grpo.py", "qwen3-8b").rl.overlong_buffer == 4096


def test_new_models_presets_and_recipes():
    """Each new model arg runs its own preset at its checkpoint; Qwen2.5-7B-Instruct takes
    HeaPA's released 7B recipe (lr 1.5e-6, 20 warm-up trainer steps = 80 updates of PPO
    mini-batch 128, 1,000 steps), the other HeaPA model the Qwen3 script's."""
    from frontier_rl.models import presets

    for model, (preset, _, _) in paper.MODELS.items():
        assert preset in presets.PRESETS and paper.MICRO_BATCH[model] > 0
        assert model in paper.ROWS_PER_CALL
    c = _config("math_heapa.py", "qwen2.5-7b-instruct")
    assert c.model.path == "checkpoints/Qwen2.5-7B-Instruct"
    assert (c.rl.learning_rate, c.rl.batch_size, c.rl.group_size) == (1.5e-6, 512, 16)
    assert (c.rl.minibatches, c.rl.warmup_steps, c.rl.num_steps) == (4, 80, 1000)
    c = _config("math_heapa.py", "qwen3-4b-instruct-2507")
    assert (c.rl.learning_rate, c.rl.minibatches, c.rl.warmup_steps, c.rl.num_steps) == (
        1e-6, 8, 0, 500)
    assert paper.MODELS["qwen3-4b-base"][2] == "hive"
    assert _config("math_heapa.py", "qwen2.5-7b-instruct,smoke").rl.warmup_steps == 0


def test_nothing_switches_thinking_on(tmp_path):
    """Qwen3-4B-Instruct-2507 is a non-thinking model: its config renders the prompt with the
    template's defaults, so a template that would open a think block on request opens none."""
    from frontier_rl.data import fixtures

    c = _config("math_heapa.py", "qwen3-4b-instruct-2507")
    assert not [k for k in c.task.keys() if "think" in k]
    template = fixtures.QWEN3_CHAT_TEMPLATE.replace(
        "{%- if enable_thinking is defined and enable_thinking is false %}",
        "{%- if enable_thinking is defined and enable_thinking %}<think>\n")
    tok_dir = str(tmp_path / "tok")
    fixtures.build_tokenizer(["What is 2 plus 3?"], tok_dir, chat_template=template)
    rows = [{"data_source": "math_dapo", "prompt": [{"role": "user", "content": "What is 2 "
                                                     "plus 3?"}],
             "reward_model": {"style": "rule", "ground_truth": "5"}}]
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), str(tmp_path / "train.parquet"))
    c.task.path = str(tmp_path / "train.parquet")
    c.task.chat_template = tok_dir
    c.task.verify_workers = 0
    task = make_task("corpus", {k: v for k, v in c.task.items() if k != "name"}, 0)
    assert task.train[0].text.endswith("<|im_start|>assistant\n")
    assert "<think>" not in task.train[0].text


def test_unknown_args_are_refused():
    with pytest.raises(ValueError, match="unknown arg"):
        _config("math_hive.py", "qwen3-8b")
    with pytest.raises(ValueError, match="one model"):
        _config("math_grpo.py", "qwen3-4b,qwen3-8b")


def test_smoke_prompt_is_the_chat_template_rendering():
    c = _config("math_grpo.py", "smoke")
    task = make_task("corpus", {k: v for k, v in c.task.items() if k != "name"}, 0)
    assert task.train[0].text == PROMPT
    assert task.train[0].answer == "9" and task.format_response("9") == "\\boxed{9}"
    from frontier_rl.models import hf

    _, mcfg = hf.load_pretrained(c.model.path)
    tok = hf.load_tokenizer(c.model.path)
    stops = policy.stop_ids(mcfg, tok)  # every EOS of generation_config.json
    assert set(stops) == {tok.convert_tokens_to_ids("<|im_end|>"), tok.eos_token_id}
    assert task.reward_values == (1.0, 0.1, 0.0)  # HIVE's 1.0 / 0.1 / 0.0
    c = _config("math_heapa.py", "smoke")  # Qwen3 under HeaPA's protocol
    task = make_task("corpus", {k: v for k, v in c.task.items() if k != "name"}, 0)
    assert task.train[0].text == HEAPA_PROMPT
    assert task.format_response("9") == "Answer: 9" and task.reward_values == (1.0, -1.0, -1.0)
    assert task.verify(task.train[0], "8 + 1 = 9.\nAnswer: 9") == 1


class _SeedCtx:
    """What the HeaPA selector reads from the trainer's context before any rollout."""

    def __init__(self, task):
        self.prompts = list(task.train)
        self.prompt_wrapper = task.prompt_wrapper
        self.step = 0


@pytest.mark.parametrize("model,template,head", [
    ("qwen3-4b", "QWEN3_CHAT_TEMPLATE", "<|im_start|>user\n"),
    ("qwen2.5-math-1.5b", "CHAT_TEMPLATE", "<|im_start|>system\nPlease reason step by step"),
])
def test_augmentation_unwraps_and_wraps_with_the_policy_template(model, template, head,
                                                                  tmp_path):
    """The real HeaPA config on a tokenizer with the model's chat template (Qwen3's renders no
    system turn, Qwen2.5-Math's its own default): the ORIGINAL the policy and the teacher see
    is the bare question, and a child is rendered exactly as the task renders a seed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from frontier_rl import selection
    from frontier_rl.data import fixtures
    from frontier_rl.selection.heapa import augment

    c = _config("math_heapa.py", model)
    tok_dir = str(tmp_path / "tok")
    fixtures.build_tokenizer(["What is 2 plus {3}?", "What is 4 and 5?"], tok_dir,
                             chat_template=getattr(fixtures, template))
    questions = ["What is 2 plus {3}?", "What is 4 and 5?"]
    rows = [{"data_source": "math_dapo", "prompt": [{"role": "user", "content": q}],
             "reward_model": {"style": "rule", "ground_truth": a}}
            for q, a in zip(questions + ["What is 7 plus 1?"], ["5", "9", "8"], strict=True)]
    pq.write_table(pa.Table.from_pylist(rows), str(tmp_path / "train.parquet"))
    c.task.path = str(tmp_path / "train.parquet")
    c.task.chat_template = tok_dir
    c.task.verify_workers = 0
    task = make_task("corpus", {k: v for k, v in c.task.items() if k != "name"}, 0)
    seed = task.train[0]
    assert seed.text.startswith(head) and seed.text.endswith("<|im_start|>assistant\n")

    sel = selection.make("heapa", c.selector, len(task.train), seed=0)
    sel._seed(_SeedCtx(task))
    [(gen_prompt, original)] = sel.augmenter.prompts(seed.text)
    assert original == seed.meta["question"]  # no chat markup, no instruction
    assert "<|im_start|>" not in gen_prompt and "boxed" not in original
    child = "What is 7 plus 1?"
    assert sel.wrap(child) == task.train[2].text  # the task's own rendering of that question
    assert augment.unwrap(sel.wrap(child), sel.template) == child


def _metrics(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("name", ["math_grpo.py", "math_dapo.py", "math_hive.py",
                                  "math_heapa.py"])
def test_smoke_runs(name, tmp_path):
    c = _config(name, "smoke")
    out = train.run(c, str(tmp_path))
    recs = _metrics(tmp_path)
    assert recs[-1]["step"] == c.rl.num_steps and recs[-1]["rollout/total"] > 0
    assert "rollout/verify_timeouts" in recs[-1]
    for b in eval_suite.HEAPA_BENCHMARKS:
        assert f"eval/avg@2/{b}" in out
    assert "eval/avg@2/bench_mean" in out


def test_smoke_comparison_and_eval_table(tmp_path):
    config = _config("compare_math.py", "smoke")
    specs = compare.plan(config, str(tmp_path))
    for spec in specs:
        train.run(spec.config, spec.dir)
    runs = compare.collect(config, specs)["runs"]
    assert {r["method"] for r in runs} == {"grpo", "hive"}
    assert all(r["rollouts"] > 0 for r in runs)
    # `frontier-rl eval` on a finished run: the table of the seven HeaPA benchmark names
    run_dir = specs[0].dir
    cfg = _config("math_grpo.py", "smoke")
    res = eval_suite.run(cfg, run_dir)
    names = [r["benchmark"] for r in res["rows"]]
    assert names[:-2] == list(cfg.eval.sets) and set(eval_suite.HEAPA_BENCHMARKS) <= set(names)
    assert names[-2:] == ["mean (unweighted)", "all (pooled)"]
    text = open(res["markdown"]).read()
    assert "| aime24 | 3 |" in text and "Avg@2" in text and "invalid %" in text
    assert json.load(open(res["json"]))["rows"][0]["questions"] == 3
    bad = config_lib.default_config()  # arith: benchmarks need a corpus task's rendering
    bad.eval.sets = {"aime24": "aime24.jsonl"}
    with pytest.raises(config_lib.ConfigError, match="task.name"):
        config_lib.validate(bad)


def test_corpora_args_and_defaults():
    """Every corpus builder's output is a dataset arg; HeaPA's protocol trains its released
    script's 14k subset by default, HIVE's DAPO+MATH."""
    from frontier_rl.data import benchmarks

    assert paper.DATASETS == benchmarks.TRAIN_OUT
    assert _config("math_heapa.py", "").task.path == "data/train/dapo_math_14k.parquet"
    assert _config("math_grpo.py", "").task.path == "data/train/dapo_math_plus_math.parquet"
    assert _config("math_grpo.py", "qwen3-4b,dapo_math").task.path == (
        "data/train/dapo_math_17k.parquet")
    for arg, path in (("openr1_math_30k", "openr1_math_30k"),
                      ("openr1_math_heapa", "openr1_math_heapa")):
        assert _config("math_hive.py", arg).task.path == f"data/train/{path}.parquet"


def test_compare_math_runs_hives_table_by_steps():
    """HIVE's Table 1: DS, GRESO and HIVE the same 1,000 steps, rollouts reported; Pre-filter
    and PCL's two runs at GRESO's rollouts, PCL's row the better of its two; the baselines HIVE
    names are selectors here; the new models build."""
    c = _config("compare_math.py", "llama3.2-3b-instruct")
    assert (c.compare.budget, c.compare.steps, c.compare.evals) == ("steps", 1000, 20)
    assert c.compare.run == "ds,prefilter,greso,pcl,pcl_own,hive"
    assert c.compare.match_rollouts.to_dict() == dict.fromkeys(("prefilter", "pcl", "pcl_own"),
                                                               "greso")
    assert c.compare.best_of.to_dict() == {"pcl": "pcl,pcl_own"}  # Pre-filter: one run
    assert c.compare.methods.pcl_own.rl.to_dict() == {"batch_size": 512, "group_size": 16,
                                                     "adv_std_norm": False}
    c.compare.run = "pcl,pcl_own,grpo,heapa,greso"  # the arms' reference runs first
    specs = compare.plan(c, "/tmp/unused")
    assert [s.config.selector.name for s in specs] == ["greso", "pcl", "pcl", "uniform", "heapa"]
    assert specs[2].config.rl.batch_size == 512 and specs[3].config.rl.batch_size == 256
    c.compare.run = "pcl_own,grpo"  # one arm of the group only, without its reference
    with pytest.raises(config_lib.ConfigError, match="compare.match_rollouts.pcl_own='greso' "
                                                      "is not in compare.run"):
        compare.plan(c, "/tmp/unused")
    smoke = _config("compare_math.py", "smoke")
    assert (smoke.compare.budget, smoke.compare.steps) == ("steps", 2)
    assert [s.match for s in compare.plan(smoke, "/tmp/unused")] == ["", ""]  # grpo, hive
    two = _config("compare_math.py", "smoke,two_run")
    assert [(s.method, s.match) for s in compare.plan(two, "/tmp/unused")] == [
        ("greso", ""), ("pcl", "greso"), ("pcl_own", "greso")]
    with pytest.raises(ValueError, match="`two_run` is a smoke variant"):
        _config("compare_math.py", "two_run")


def test_script_validation_and_ds_generation_batch():
    """`script_val`: the released scripts' in-run validation (AIME24, 960 rows of one sample =
    32 per problem, T 1.0, top-p 0.7, every 10 steps; the 7B scripts every 1,000); without it
    the seven-benchmark suite `frontier-rl eval` runs. DS generation batches per model: 512,
    1,024 for Qwen2.5-7B-Instruct."""
    c = _config("math_heapa.py", "qwen3-4b,script_val")
    assert set(c.eval.sets) == {"aime24"} and c.eval.sets.aime24 == "data/eval/aime24.jsonl"
    assert (c.eval.k, c.eval.temperature, c.eval.top_p, c.eval.top_k, c.eval.every,
            c.eval.greedy) == (32, 1.0, 0.7, -1, 10, False)
    assert _config("math_grpo.py", "qwen2.5-7b-instruct,script_val").eval.every == 1000
    full = _config("math_heapa.py", "qwen3-4b")
    assert set(full.eval.sets) == set(eval_suite.HEAPA_BENCHMARKS) and full.eval.k == 16
    assert (full.eval.temperature, full.eval.top_p, full.eval.top_k) == (0.7, 0.7, 50)
    with pytest.raises(ValueError, match="script_val"):
        _config("math_grpo.py", "qwen2.5-math-1.5b,script_val")
    assert _config("math_dapo.py", "qwen2.5-7b-instruct").selector.ds.gen_batch_size == 1024
    assert _config("math_dapo.py", "qwen3-4b").selector.ds.gen_batch_size == 512
    assert _config("math_dapo.py", "").selector.ds.gen_batch_size == 384  # HIVE's DS
