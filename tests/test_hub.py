"""Hugging Face ids (frontier_rl/hub.py) for models, corpora and benchmarks, offline: a hub cache
is written here in the hub client's own layout (blobs named by content hash, snapshots/<commit>
linking to them, refs/<branch> naming a commit), HF_HOME points at it and HF_HUB_OFFLINE=1, and
a model id, a dataset id and benchmark ids resolve from it, train and evaluate end to end on the
paper configs' smoke run; a pinned revision is what is read and recorded; a paper config's ids
are fetched, its corpus built from its sources and every id pinned; a missing id fails in one
line naming it and the command that fetches it."""

import hashlib
import importlib.util
import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from frontier_rl import hub, train
from frontier_rl.data import benchmarks, fixtures
from frontier_rl.evaluation import suite as eval_suite
from frontier_rl.experiment import hub_fetch, paper, protocol
from frontier_rl.tasks import make_task

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config(name, arg):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "configs", name))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.get_config(arg)


def put_repo(cache, repo: str, files: dict, kind: str = "model", ref: str | None = "main"
             ) -> str:
    """One commit of `repo` in the hub cache `cache`, as the hub client lays it out: each file
    ({path in the repo: bytes, or a local file to copy}) a blob named by its content's hash,
    snapshots/<commit>/<path> a relative link to it, refs/<ref> naming the commit. The commit."""
    from huggingface_hub.file_download import repo_folder_name

    folder = os.path.join(str(cache), repo_folder_name(repo_id=repo, repo_type=kind))
    contents = {}
    for path, content in sorted(files.items()):
        if not isinstance(content, bytes):
            with open(content, "rb") as f:
                content = f.read()
        contents[path] = (hashlib.sha256(content).hexdigest(), content)
    commit = hashlib.sha1("".join(f"{p}={h};" for p, (h, _) in contents.items()).encode()
                          ).hexdigest()
    os.makedirs(os.path.join(folder, "blobs"), exist_ok=True)
    for path, (digest, content) in contents.items():
        blob = os.path.join(folder, "blobs", digest)
        if not os.path.exists(blob):
            with open(blob, "wb") as f:
                f.write(content)
        link = os.path.join(folder, "snapshots", commit, *path.split("/"))
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(os.path.relpath(blob, os.path.dirname(link)), link)
    if ref:
        os.makedirs(os.path.join(folder, "refs"), exist_ok=True)
        with open(os.path.join(folder, "refs", ref), "w") as f:
            f.write(commit)
    return commit


def _parquet(rows) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    return sink.getvalue().to_pybytes()


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty hub cache under HF_HOME, read offline."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache = tmp_path / "hf" / "hub"
    cache.mkdir(parents=True)
    return cache


def _model_files(model_dir: str) -> dict:
    return {n: os.path.join(model_dir, n) for n in os.listdir(model_dir)}


def test_ids_paths_and_the_fetch_command(tmp_path):
    ref = hub.parse("Qwen/Qwen2.5-Math-1.5B")
    assert (ref.repo, ref.revision, ref.pattern) == ("Qwen/Qwen2.5-Math-1.5B", "main", "")
    ref = hub.parse("Hothan/OlympiadBench@v1.0:*OE_TO_maths_en_COMP*")
    assert (ref.repo, ref.revision, ref.pattern) == ("Hothan/OlympiadBench", "v1.0",
                                                     "*OE_TO_maths_en_COMP*")
    assert ref.pinned("a" * 40) == f"Hothan/OlympiadBench@{'a' * 40}:*OE_TO_maths_en_COMP*"
    assert hub.fetch_command(ref, "dataset") == (
        "hf download Hothan/OlympiadBench --repo-type dataset --revision v1.0 "
        "--include '*OE_TO_maths_en_COMP*'")
    # paths: anything on disk, and what has not the id's shape
    local = tmp_path / "org" / "name"
    local.mkdir(parents=True)
    for path in (str(local), "data/train/dapo_math_17k.parquet", "data/math.jsonl",
                 "tfds:dapo_math_17k", "./org/name", "~/org/name", ""):
        assert hub.parse(path) is None, path
    os.chdir(tmp_path)
    try:
        assert hub.parse("org/name") is None  # it exists here: a path, never an id
    finally:
        os.chdir(ROOT)
    assert hub.model_dir(str(local)) == str(local)  # a local path keeps working as it did
    assert hub.dataset_files("data/train/x.parquet") is None


def test_the_cache_written_here_is_the_hub_clients_own(hub_cache):
    from huggingface_hub import scan_cache_dir

    old = put_repo(hub_cache, "tiny-org/corpus", {"data/train.jsonl": b'{"a": 1}\n'},
                   kind="dataset")
    new = put_repo(hub_cache, "tiny-org/corpus", {"data/train.jsonl": b'{"a": 2}\n'},
                   kind="dataset")
    info = scan_cache_dir(str(hub_cache))
    assert not info.warnings
    [repo] = info.repos
    assert (repo.repo_id, repo.repo_type) == ("tiny-org/corpus", "dataset")
    assert {r.commit_hash: set(r.refs) for r in repo.revisions} == {old: set(), new: {"main"}}
    assert hub.cached_commit("tiny-org/corpus", "dataset") == new
    assert hub.cached_commit(f"tiny-org/corpus@{old}", "dataset") == old
    assert hub.cached_commit("tiny-org/other", "dataset") is None


def test_ids_train_and_evaluate_end_to_end_offline(hub_cache, tmp_path):
    """A model id (its chat template too), a corpus id pinned to an older commit than main and
    three benchmark ids, on the smoke run of configs/math_grpo.py: they train and evaluate, and
    the commits read are the ones recorded."""
    f = fixtures.math_smoke("qwen2")
    model = put_repo(hub_cache, "tiny-org/tiny-qwen2-math", _model_files(f["model"]))
    decoy = _parquet([{"data_source": "x", "prompt": [{"role": "user", "content": f"Q{i}?"}],
                       "reward_model": {"ground_truth": "999"}} for i in range(4)])
    old = put_repo(hub_cache, "tiny-org/math-corpus",
                   {"data/train-00000-of-00001.parquet": f["train"],
                    "data/test-00000-of-00001.parquet": decoy, "README.md": b"# corpus\n"},
                   kind="dataset")
    newer = put_repo(hub_cache, "tiny-org/math-corpus",
                     {"data/train-00000-of-00001.parquet": decoy}, kind="dataset")
    raw = f["raw"]
    aime = put_repo(hub_cache, "HuggingFaceH4/aime_2024",
                    {"data/train-00000-of-00001.parquet": os.path.join(raw, "aime24",
                                                                       "train.parquet")},
                    kind="dataset")
    math500 = put_repo(hub_cache, "HuggingFaceH4/MATH-500",
                       {"test.jsonl": os.path.join(raw, "math500", "test.jsonl")},
                       kind="dataset")
    gpqa_csv = os.path.join(raw, "gpqa_diamond", "gpqa_diamond.csv")
    put_repo(hub_cache, "Idavidrein/gpqa", {"gpqa_diamond.csv": gpqa_csv,
                                            "gpqa_main.csv": gpqa_csv}, kind="dataset")

    c = _config("math_grpo.py", "smoke")
    c.model.path = "tiny-org/tiny-qwen2-math"
    assert c.task.chat_template == "tiny-org/tiny-qwen2-math"  # it follows model.path
    c.task.path = f"tiny-org/math-corpus@{old}"
    c.eval.sets.aime24 = "HuggingFaceH4/aime_2024"
    c.eval.sets.math500 = "HuggingFaceH4/MATH-500@main"
    c.eval.sets.gpqa_diamond = "Idavidrein/gpqa:gpqa_diamond.csv"
    workdir = tmp_path / "run"
    out = train.run(c, str(workdir))
    for b in ("aime24", "math500", "gpqa_diamond", "bench_mean"):
        assert f"eval/avg@2/{b}" in out
    rec = json.loads((workdir / hub.RECORD).read_text())["fields"]
    assert set(rec) == {"model.path", "task.path", "eval.sets.aime24", "eval.sets.math500",
                        "eval.sets.gpqa_diamond"}
    assert rec["model.path"]["commit"] == model and rec["model.path"]["revision"] == "main"
    assert "model.safetensors" in rec["model.path"]["files"]
    assert (rec["task.path"]["commit"], rec["task.path"]["revision"]) == (old, old) != newer
    assert rec["task.path"]["files"] == ["data/train-00000-of-00001.parquet"]  # the train split
    assert rec["eval.sets.aime24"]["commit"] == aime
    assert rec["eval.sets.math500"]["pinned"] == f"HuggingFaceH4/MATH-500@{math500}"
    assert rec["eval.sets.gpqa_diamond"]["files"] == ["gpqa_diamond.csv"]
    first = json.loads((workdir / "metrics.jsonl").read_text().splitlines()[0])
    assert first["task/train_prompts"] > 4  # the pinned commit's rows, not main's four

    res = eval_suite.run(c, str(workdir))  # `frontier-rl eval` on the run
    assert {"aime24", "math500", "gpqa_diamond"} <= {r["benchmark"] for r in res["rows"]}
    written = json.load(open(res["json"]))
    assert written["hub"]["eval.sets.aime24"]["commit"] == aime
    assert written["hub"]["task.path"]["commit"] == old
    res = eval_suite.run(c, str(tmp_path / "by_id"), model=f"tiny-org/tiny-qwen2-math@{model}")
    assert os.path.basename(os.path.dirname(res["json"])) == f"tiny-qwen2-math@{model[:12]}"


def test_a_missing_id_fails_in_one_line(hub_cache, tmp_path):
    with pytest.raises(hub.HubError) as e:
        hub.model_dir("nobody/missing-model@v2")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("model.path='nobody/missing-model@v2': ")
    assert "HF_HUB_OFFLINE=1" in msg and "`hf download nobody/missing-model --revision v2`" in msg
    put_repo(hub_cache, "tiny-org/bin-only", {"config.json": b"{}", "pytorch_model.bin": b"x"})
    with pytest.raises(hub.HubError, match="no .safetensors weights"):
        hub.model_dir("tiny-org/bin-only")  # safetensors only: never a pickled checkpoint
    with pytest.raises(hub.HubError, match="has no .parquet/.jsonl file"):
        put_repo(hub_cache, "tiny-org/no-data", {"README.md": b"x"}, kind="dataset")
        hub.dataset_files("tiny-org/no-data")
    # the command line: one line naming the id and how to fetch it, no traceback
    env = {**os.environ, "HF_HOME": str(tmp_path / "empty"), "HF_HUB_OFFLINE": "1"}
    r = subprocess.run([sys.executable, "-m", "frontier_rl", "train",
                        "--config=configs/math_grpo.py:smoke", f"--workdir={tmp_path}/run",
                        "--config.task.path=nobody/missing-corpus@main"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if "error" in line]
    assert len(errors) == 1, r.stderr
    assert errors[0].startswith("frontier-rl train: error: task.path='nobody/missing-corpus@main'")
    assert "`hf download nobody/missing-corpus --repo-type dataset`" in errors[0]


def _dapo_row(problem: str, answer: str, index: int) -> dict:
    text = ("Solve the following math problem step by step. The last line of your response "
            "should be of the form Answer: $Answer (without quotes) where $Answer is the answer "
            f"to the problem.\n\n{problem}\n\nRemember to put your answer on its own line after "
            "\"Answer:\".")
    return {"data_source": "math_dapo", "prompt": [{"role": "user", "content": text}],
            "ability": "MATH", "reward_model": {"style": "rule", "ground_truth": answer},
            "extra_info": {"index": str(index)}}


def test_a_paper_config_is_fetched_built_and_pinned_offline(hub_cache, tmp_path, monkeypatch,
                                                             capsys):
    """configs/math_hive.py:qwen2.5-math-1.5b where nothing is local: its model, the two sources
    of DAPO+MATH and its six benchmarks come from their paper ids (stand-ins in the cache), the
    corpus is built by the project's rule, and every id is pinned to the commit read."""
    f = fixtures.math_smoke("qwen2")
    raw = f["raw"]
    model = put_repo(hub_cache, "Qwen/Qwen2.5-Math-1.5B", _model_files(f["model"]))
    dapo = [_dapo_row(f"What is {i} plus 1?", str(i + 1), i) for i in range(3)] * 2
    dapo_commit = put_repo(hub_cache, "BytedTsinghua-SIA/DAPO-Math-17k",
                           {"data/dapo-math-17k.parquet": _parquet(dapo)}, kind="dataset")
    math_row = [{"problem": p, "level": "Level 1", "type": "Algebra",
                 "solution": f"So $\\boxed{{{a}}}$."} for p, a in
                (("What is 0 plus 1?", "1"), ("What is 5 plus 5?", "10"),
                 ("What is 6 plus 6?", "12"))]
    put_repo(hub_cache, "xDAN2099/lighteval-MATH",
             {"data/train-00000-of-00001.parquet": _parquet(math_row),
              "data/test-00000-of-00001.parquet": _parquet(math_row[1:] * 3)}, kind="dataset")
    layout = {"aime24": ("HuggingFaceH4/aime_2024", "data/train-00000-of-00001.parquet"),
              "aimo_amc": ("AI-MO/aimo-validation-amc", "data/train-00000-of-00001.parquet"),
              "gaokao2023en": ("MARIO-Math-Reasoning/Gaokao2023-Math-En", "test.jsonl"),
              "math500": ("HuggingFaceH4/MATH-500", "test.jsonl"),
              "minerva_math": ("math-ai/minervamath", "test.jsonl")}
    commits = {}
    for name, (repo, path) in layout.items():
        src = benchmarks.find(raw, name)
        commits[name] = put_repo(hub_cache, repo, {path: src}, kind="dataset")
    olympiad = os.path.join(raw, "olympiadbench", "train.parquet")
    physics = _parquet([{"question": "Why?", "final_answer": ["42"]}] * 5)
    commits["olympiadbench"] = put_repo(
        hub_cache, "Hothan/OlympiadBench",
        {"OlympiadBench/OE_TO_maths_en_COMP/OE_TO_maths_en_COMP.parquet": olympiad,
         "OlympiadBench/OE_TO_physics_en_COMP/OE_TO_physics_en_COMP.parquet": physics},
        kind="dataset")

    monkeypatch.chdir(tmp_path)  # no checkpoints/, data/train/ or data/eval/ here
    spec = os.path.join(ROOT, "configs", "math_hive.py") + ":qwen2.5-math-1.5b"
    assert hub_fetch.main(["plan", f"--config={spec}"]) == 0
    plan = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()}
    assert plan["model.path"] == ["paper", "id", "Qwen/Qwen2.5-Math-1.5B@main"]
    assert plan["task.path"][0] == "build"
    assert hub_fetch.main(["fetch", f"--config={spec}", f"--out={tmp_path}/hub_out"]) == 0
    out = tmp_path / "hub_out"
    flags = (out / "flags").read_text().splitlines()
    assert f"--config.model.path=Qwen/Qwen2.5-Math-1.5B@{model}" in flags
    assert (f"--config.eval.sets.olympiadbench=Hothan/OlympiadBench@{commits['olympiadbench']}"
            ":*OE_TO_maths_en_COMP*") in flags
    assert len(flags) == 7  # the model and six benchmarks; the corpus is a local file now
    assert os.path.basename((out / "model_dir").read_text().strip()) == model
    assert "| eval.sets.aime24 | HuggingFaceH4/aime_2024@main |" in (out / "sources.md"
                                                                      ).read_text()
    corpus = tmp_path / "data" / "train" / "dapo_math_plus_math.parquet"
    rows = pq.read_table(str(corpus)).to_pylist()
    # DAPO's three problems once each, its instruction removed; MATH's train rows (not its
    # test split) less the one DAPO already has
    assert [r["prompt"][0]["content"] for r in rows] == [
        "What is 0 plus 1?", "What is 1 plus 1?", "What is 2 plus 1?", "What is 5 plus 5?",
        "What is 6 plus 6?"]
    built = json.loads((tmp_path / "data" / "train" / "dapo_math_plus_math.parquet.sources.json"
                        ).read_text())
    assert [s["repo"] for s in built["sources"]] == ["BytedTsinghua-SIA/DAPO-Math-17k",
                                                    "xDAN2099/lighteval-MATH"]
    assert built["sources"][0]["commit"] == dapo_commit

    # the config under the pinned overrides: everything resolves from the cache
    c = _config("math_hive.py", "qwen2.5-math-1.5b")
    for flag in flags:
        field, value = flag[len("--config."):].split("=", 1)
        section, *rest = field.split(".")
        node = c[section]
        for part in rest[:-1]:
            node = node[part]
        node[rest[-1]] = value
    got = hub.sources(c)
    assert got["model.path"]["commit"] == model
    assert got["task.path source 1"]["commit"] == dapo_commit  # what the corpus was built from
    assert {k: v["commit"] for k, v in got.items() if k.startswith("eval.sets.")} == {
        f"eval.sets.{n}": commit for n, commit in commits.items()}
    task_cfg = {k: v for k, v in c.task.items() if k != "name"}
    task_cfg["verify_workers"] = 0
    task = make_task("corpus", task_cfg, 0)  # the built corpus, the model's chat template
    assert task.train[0].text.startswith("<|im_start|>system\n")
    assert "Please solve the following math problem: What is" in task.train[0].text
    suite = eval_suite.suite_task("corpus", task_cfg, c.eval.sets)
    assert suite.buckets == list(c.eval.sets) and len(suite.eval) == 6 * 3
    assert not [p for p in suite.eval if "Why?" in p.text]  # OlympiadBench's maths part only
    # `frontier-rl protocol` lists each id with the commit the cache has for it
    table = protocol.table(c) + hub_fetch.hub_table(c)
    assert f"Qwen/Qwen2.5-Math-1.5B@{model}" in table and model in table


def test_paper_tables_name_every_model_corpus_and_benchmark():
    for model, (_, name, _) in paper.MODELS.items():
        assert hub.parse(paper.MODEL_IDS[name]).repo.endswith("/" + name), model
    assert set(paper.CORPUS_IDS) == set(paper.DATASETS)
    assert set(paper.BENCHMARK_IDS) == set(benchmarks.BENCHMARKS)
    for ids in (*paper.CORPUS_IDS.values(), *[(i,) for i in paper.BENCHMARK_IDS.values()]):
        for i in ids:
            assert hub.parse(paper.hub_id(i)).revision == paper.REVISION == "main"
    c = _config("math_heapa.py", "qwen3-8b")
    assert c.protocol.model.path.endswith("; Hugging Face Qwen/Qwen3-8B@main")
    assert "built from Hugging Face BytedTsinghua-SIA/DAPO-Math-17k@main" in c.protocol.task.path
    assert "gpqa_diamond Idavidrein/gpqa@main:gpqa_diamond.csv" in c.protocol.eval.sets
    ids = paper.hub_ids(c)
    assert ids["model.path"] == ("Qwen/Qwen3-8B@main",) and len(ids) == 2 + 7
    assert c.model.path == "checkpoints/Qwen3-8B"  # the config keeps its local path


def test_fit_sizes_a_hub_model_id_from_the_cache(hub_cache):
    """`fit` reads the architecture of `model.path=org/name` from the hub's cache, as the run
    would (the same config as the local directory's), and a missing id is one line."""
    from frontier_rl.fit import command as fit

    f = fixtures.math_smoke("qwen2")
    put_repo(hub_cache, "tiny-org/tiny-qwen2-math", _model_files(f["model"]))
    c = _config("math_grpo.py", "smoke")
    local = fit.model_config(c)
    c.model.path = "tiny-org/tiny-qwen2-math"
    assert fit.model_config(c) == local
    c.model.path = "tiny-org/absent"
    with pytest.raises(hub.HubError, match="tiny-org/absent") as e:
        fit.model_config(c)
    assert "\n" not in str(e.value)
