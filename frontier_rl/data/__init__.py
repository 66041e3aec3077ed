"""Data files: corpora stored once as TensorFlow Datasets, the papers' benchmark files
(benchmarks.py) and the tiny models and corpora tests generate (fixtures.py).

`frontier-rl data prepare --src=FILE.parquet --name=NAME [--data_dir=DIR]`: a corpus stored
once as a TensorFlow Datasets dataset in array_record files, then read with
`task.path="tfds:NAME"` (and `task.data_dir=DIR`) through `tfds.data_source`: random access,
a deterministic order (the source file's), and per-process shards with
`shard_split("train", index, count)`. Neither side needs tensorflow.

Each row is stored in the corpus reader's normalized schema (tasks/corpus.py `normalize`):
`messages` (the chat messages as JSON text), `answer`, `data_source`, `extra_info` (JSON text)
and `row` (the position in the source file). Rows without a prompt or an answer are dropped
and counted. The source may be verl rows or plain {prompt, answer} rows (.parquet or .jsonl).

Layer "tasks": may import the base layer, models and tasks; fixtures.py, which builds tiny
policies and warm starts for tests, is in layer "policy".
"""

from __future__ import annotations

import json
import os

import numpy as np

from frontier_rl.tasks import corpus

FIELDS = ("messages", "answer", "data_source", "extra_info", "row")


def _builder_class(name: str, rows: list[dict], split: str):
    import tensorflow_datasets as tfds
    from tensorflow_datasets.core import registered

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self, description=f"frontier_rl corpus {name}",
            features=tfds.features.FeaturesDict({
                "messages": tfds.features.Text(), "answer": tfds.features.Text(),
                "data_source": tfds.features.Text(), "extra_info": tfds.features.Text(),
                "row": np.int64}),
            disable_shuffling=True)  # keep the source file's order

    def _split_generators(self, dl_manager):
        return {split: self._generate_examples(rows)}

    def _generate_examples(self, rows):
        for r in rows:
            yield r["row"], r

    # A class per corpus name, kept out of TFDS's global registry (reading needs no class).
    with registered.skip_registration():
        return type(name, (tfds.core.GeneratorBasedBuilder,), dict(
            name=name, VERSION=tfds.core.Version("1.0.0"), _info=_info,
            _split_generators=_split_generators, _generate_examples=_generate_examples,
            __module__=__name__))


def prepare(src: str, name: str, data_dir: str | None = None, split: str = "train",
            fmt: str = "auto") -> dict:
    """Writes corpus `name` from `src`; returns {"path", "rows", "skipped", "dir"}."""
    import re

    if not re.fullmatch(r"[a-z][a-z0-9_]*", name or ""):
        raise ValueError(f"--name={name!r}: use lower-case letters, digits and underscores, "
                         "starting with a letter (a TFDS dataset name)")
    data_dir = os.path.abspath(data_dir or os.path.expanduser("~/tensorflow_datasets"))
    records = corpus.read_records({**corpus.DEFAULTS, "path": src, "format": fmt})
    rows, skipped = [], 0
    for rec in records:
        if rec["messages"] is None or rec["answer"] is None:
            skipped += 1
            continue
        rows.append({"messages": json.dumps(rec["messages"], ensure_ascii=False),
                     "answer": rec["answer"], "data_source": rec["data_source"] or "",
                     "extra_info": json.dumps(rec["extra_info"], ensure_ascii=False,
                                              default=str),
                     "row": int(rec["row"])})
    if not rows:
        raise ValueError(f"{src}: no row has both a prompt and an answer")
    out = os.path.join(data_dir, name)
    if os.path.isdir(out):
        raise ValueError(f"{out} exists: delete it or pick another --name")
    builder = _builder_class(name, rows, split)(data_dir=data_dir, file_format="array_record")
    builder.download_and_prepare()
    return {"path": f"tfds:{name}", "rows": len(rows), "skipped": skipped, "dir": out}


def shard_split(split: str, index: int, count: int) -> str:
    """The `index`-th of `count` contiguous, near-equal slices of `split` (one per process)."""
    import tensorflow_datasets as tfds

    if not 0 <= index < count:
        raise ValueError(f"shard index {index} is outside [0, {count})")
    return tfds.even_splits(split, n=count)[index]


def main(src: str, name: str, data_dir: str | None = None) -> dict:
    if not src:
        raise ValueError("--src is required (a .parquet or .jsonl corpus file)")
    out = prepare(src, name, data_dir)
    print(f"prepared {out['rows']:,} rows ({out['skipped']} without a prompt or answer "
          f"skipped) into {out['dir']}; train with --config.task.path={out['path']}"
          + (f" --config.task.data_dir={data_dir}" if data_dir else ""))
    return out
