"""Any reasoning-gym dataset as a task: make_task("gym:<dataset>", cfg, seed).

Train and eval come from two `reasoning_gym.create_dataset` instances with different seeds;
eval drops anything whose question also appears in train. Verification is binary: the final
answer is extracted first (reasoning-gym scorers give partial credit for substrings, which
must not leak into the reward), then the dataset's own `score_answer` on the extracted answer
is thresholded at 1.0. No extractable answer (or an unfinished response) gives -1.

Buckets: with `bucket_key` (a metadata field, dotted for nested ones: "difficulty.level"),
each item goes to the bucket "<key>=<value>", ordered by value, e.g. basic_arithmetic with
bucket_key="num_terms" gives "num_terms=2" .. "num_terms=6". The warm start teaches
`response_template` (default "<answer>{answer}</answer>", what the verifier extracts).

reasoning_gym is imported lazily: it takes over a second to import. It comes with the `tasks`
extra; without it, building or validating a gym task says so in one line.
"""

from __future__ import annotations

import difflib

from frontier_rl.tasks import base
from frontier_rl.tasks.verify import extract_final_answer

DEFAULTS = dict(
    dataset=None,  # reasoning-gym name; set by make_task("gym:<name>", ...)
    train_size=2000,
    eval_size=200,
    dataset_kwargs=None,  # extra create_dataset kwargs (difficulty knobs, e.g. max_terms=3)
    bucket_key=None,  # metadata field to bucket by (e.g. "num_terms"); None = one bucket
    prompt_template="{question}\n\nGive your final answer between <answer> and </answer> tags.",
    allow_bare_answer=False,  # accept a response that is nothing but the answer
    response_template="<answer>{answer}</answer>",  # what a warm start teaches for an answer
    seed_offset=0,
    data_seed=None,
)


def _import():
    try:
        import reasoning_gym
        import reasoning_gym.factory
    except ImportError as e:
        raise ImportError(f"gym tasks need reasoning-gym, which failed to import ({e}): "
                          "install frontier_rl[tasks], e.g. pip install -e '.[tasks]'") from None
    return reasoning_gym


def _check_name(name: str | None) -> None:
    datasets = _import().factory.DATASETS
    if name in datasets:
        return
    close = difflib.get_close_matches(str(name), list(datasets), n=5)
    raise ValueError(
        f"Unknown reasoning-gym dataset {name!r} (close: {close}). List all names with: "
        "python -c 'from reasoning_gym.factory import DATASETS; print(sorted(DATASETS))'"
    )


def _sort_key(value) -> tuple:
    # Numeric difficulty values sort numerically, anything else by its text.
    return (0, value, "") if isinstance(value, int | float) else (1, 0, str(value))


def _check(cfg: dict) -> None:
    _check_name(cfg["dataset"])
    if "{answer}" not in str(cfg["response_template"]):
        raise ValueError(f"response_template={cfg['response_template']!r} has no '{{answer}}'.")


def _metadata(entry: dict, key: str):
    value = entry["metadata"]
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            raise ValueError(f"bucket_key={key!r}: reasoning-gym item has no metadata field "
                             f"{key!r}; its metadata: {sorted(entry['metadata'])}")
        value = value[part]
    return value


def _bucket(entry: dict, name: str, key: str | None) -> tuple[str, object]:
    """(bucket name, metadata value) of an item: "<key>=<value>", or the dataset's name without
    a bucket key (value None)."""
    if key is None:
        return name, None
    value = _metadata(entry, key)
    return f"{key}={value}", value


@base.register_task("gym", DEFAULTS, check=_check)
def make_gym_task(cfg: dict, seed: int) -> base.Task:
    """Builds a reasoning-gym task; see DEFAULTS for the knobs."""
    reasoning_gym = _import()
    cfg = base.resolve_config(cfg, DEFAULTS, "gym")
    _check(cfg)
    name = cfg["dataset"]
    cfg["data_seed"] = dseed = base.data_seed(cfg, seed)
    # Procedural datasets seed item i with (seed + i), so nearby train/eval seeds would share
    # items. Keep the eval seed 2**30 away from the train seed.
    train_seed = int(base.rng(dseed).integers(2**30))
    kwargs = dict(cfg["dataset_kwargs"] or {})
    sets = {
        split: reasoning_gym.create_dataset(name, size=size, seed=s, **kwargs)
        for split, size, s in (("train", cfg["train_size"], train_seed),
                               ("eval", cfg["eval_size"], train_seed + 2**30))
    }
    stats = {"skipped_no_answer": 0, "train_duplicates": 0, "eval_dropped_overlap": 0}
    seen: set[str] = set()
    prompts: dict[str, list[base.Prompt]] = {"train": [], "eval": []}
    bucket_values = {}
    for split, dataset in sets.items():
        for i, entry in enumerate(dataset):
            if entry.get("answer") is None or str(entry["answer"]) == "":
                stats["skipped_no_answer"] += 1
                continue
            text = cfg["prompt_template"].format(question=entry["question"])
            if text in seen:  # repeats within train, or eval items that are also in train
                stats["train_duplicates" if split == "train" else "eval_dropped_overlap"] += 1
                continue
            seen.add(text)
            bucket, value = _bucket(entry, name, cfg["bucket_key"])
            if cfg["bucket_key"] is not None:
                bucket_values[bucket] = value
            pid = f"gym/{name}/{i:06d}" if split == "train" else f"gym/{name}/eval/{i:06d}"
            prompts[split].append(base.Prompt(id=pid, text=text, answer=str(entry["answer"]),
                                              bucket=bucket, meta={"entry": entry}))
    if cfg["bucket_key"] is None:
        buckets = [name]
    else:
        buckets = sorted(bucket_values, key=lambda b: _sort_key(bucket_values[b]))
    score_answer = sets["train"].score_answer
    allow_bare = cfg["allow_bare_answer"]

    def verifier(prompt: base.Prompt, response: str, finished: bool = True) -> int:
        if not finished:
            return base.REWARD_INVALID
        answer = extract_final_answer(response, allow_bare=allow_bare)
        if answer is None:
            return base.REWARD_INVALID
        try:
            score = score_answer(answer, prompt.meta["entry"])
        except Exception:  # scorers parse free text; a crash on odd input means "not correct"
            score = 0.0
        return base.REWARD_CORRECT if score >= 1.0 - 1e-9 else base.REWARD_WRONG

    seen_texts = frozenset(seen)  # train and eval

    def examples(wanted, n: int, seed: int) -> list[tuple[str, str]]:
        # A third stream of the same generator, 2**29 above the train seed (eval is 2**30
        # above), one 2**20-item range per warm-start seed: items in `wanted`, none of them a
        # pool or eval question.
        wanted, out, base_seed, offset = set(wanted), [], train_seed + 2**29, 0
        base_seed += (seed % 256) * 2**20
        while len(out) < n:
            if offset >= 2**20:
                raise ValueError(f"gym:{name}: fewer than {n} fresh warm-start items in "
                                 f"{sorted(wanted)} among 2**20 draws")
            size = min(2 * n, 2**20 - offset)
            for entry in reasoning_gym.create_dataset(name, size=size, seed=base_seed + offset,
                                                      **kwargs):
                text = cfg["prompt_template"].format(question=entry["question"])
                if (_bucket(entry, name, cfg["bucket_key"])[0] in wanted and text not in seen_texts
                        and str(entry.get("answer") or "") != ""):
                    out.append((text, str(entry["answer"])))
            offset += size
        return out[:n]

    return base.Task(name=f"gym:{name}", train=prompts["train"], eval=prompts["eval"],
                     buckets=buckets, verifier=verifier, stats=stats, config=cfg,
                     response_template=cfg["response_template"],
                     prompt_wrapper=cfg["prompt_template"].replace("{question}", "{prompt}"),
                     examples=examples)
