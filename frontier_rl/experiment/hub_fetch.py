"""Fetching a paper config's Hugging Face ids: `plan` (what would be fetched, offline) and
`fetch` (fetch, build a missing paper corpus from its sources, pin every id to its commit).
Above frontier_rl/hub.py, which resolves single ids and imports nothing of the project, so the
paper tables (experiment/paper.py) and the benchmark converters (data/benchmarks.py) are read
here only.

  python -m frontier_rl.experiment.hub_fetch plan  --config=CONFIG [--config.FIELD=VALUE ...]
  python -m frontier_rl.experiment.hub_fetch fetch --config=CONFIG --out=DIR [...]

`fetch` writes DIR/flags (the config overrides that pin every id to the commit fetched),
DIR/model_dir (the policy's local directory), DIR/sources.json and DIR/sources.md;
launch/paper.sh runs both (frontier_rl/hub.py's docstring says how ids resolve).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

from frontier_rl import hub
from frontier_rl.experiment import paper


@dataclasses.dataclass
class Item:
    field: str
    value: str  # the config's value
    kind: str  # "model", "corpus" or "benchmark:<name>"
    action: str  # "local", "id", "paper id" or "build"
    ids: tuple[str, ...] = ()  # the ids to fetch (for "build": the corpus's sources)


def plan(config) -> list[Item]:
    """What `fetch` does for `config` (module docstring)."""

    defaults = paper.local_defaults(config)
    out = []
    for field, value, kind in hub.fields(config):
        if os.path.exists(value):
            out.append(Item(field, value, kind, "local"))
        elif field in defaults:
            ids = defaults[field]
            out.append(Item(field, value, kind, "build" if kind == "corpus" else "paper id",
                            ids))
        elif hub.is_id(value):
            out.append(Item(field, value, kind, "id", (value,)))
        else:
            out.append(Item(field, value, kind, "local"))  # missing: the run will say so
    return out


def _table_rows(files: list[str]) -> list[dict]:
    from frontier_rl.data import benchmarks

    return [row for f in files for row in benchmarks.read_table(f)]


def build_corpus(dataset: str, ids: tuple[str, ...], out: str) -> tuple[str, dict, list[dict]]:
    """Builds the paper corpus `dataset` (paper.DATASETS arg) from its Hugging Face sources
    `ids` by frontier_rl/data/benchmarks.py's rule for it; writes `out` and, beside it,
    `out`.sources.json (the ids, their commits and the counts). (out, counts, entries)."""
    from frontier_rl.data import benchmarks as b

    entries, tables = [], []
    for value in ids:
        res, files = hub.dataset(value, f"task.path ({dataset} source)", hub.CORPUS_EXTS,
                              hub.CORPUS_SPLITS)
        entries.append(res.entry(files))
        paths = [os.path.join(res.path, f) for f in files]
        tables.append((_table_rows(paths), f"{res.ref.repo}@{res.commit}"))
    counts: dict = {}
    if dataset == "dapo_math":
        rows = b.dapo_math_rows(tables[0][0])
    elif dataset == "math":
        rows = b.math_rows(*tables[0])
    elif dataset == "dapo_math+math":
        rows, counts = b.dapo_plus_math_rows(tables[0][0], tables[1][0], tables[0][1],
                                             tables[1][1])
    elif dataset == "dapo_math_14k":
        rows, counts = b.dapo_14k_rows(*tables[0])
    elif dataset == "openr1_math_30k":
        rows, counts = b.openr1_rows(*tables[0])
    elif dataset == "openr1_math_heapa":
        rows, counts = b.openr1_heapa_rows(*tables[0])
    elif dataset == "numina_math":
        rows, counts = b.numina_rows(*tables[0])
    else:
        raise hub.HubError(f"no rule builds corpus {dataset!r} from Hugging Face sources")
    b.write_parquet(rows, out)
    with open(out + ".sources.json", "w", encoding="utf-8") as f:
        json.dump({"corpus": dataset, "rows": len(rows), "counts": counts, "sources": entries},
                  f, indent=2)
    return out, counts, entries


def fetch(config, out_dir: str, say=print) -> dict:
    """Fetches what `plan(config)` names and writes OUT/flags, OUT/hub.model_dir, OUT/sources.json
    and OUT/sources.md (module docstring)."""

    os.makedirs(out_dir, exist_ok=True)
    flags, entries, model = [], {}, ""
    for item in plan(config):
        if item.action == "local":
            if item.field == "model.path":
                model = os.path.abspath(item.value)
            continue
        if item.action == "build":
            dataset = paper.dataset_of(item.value)
            say(f"hub: building {item.value} ({dataset}) from {', '.join(item.ids)}")
            _, counts, built = build_corpus(dataset, item.ids, item.value)
            for i, entry in enumerate(built):
                entries[f"{item.field} source {i + 1}"] = entry
            continue
        value = item.ids[0]
        say(f"hub: {item.field}: {value}")
        res, files = hub.resolve_field(item.field, value, item.kind)
        entries[item.field] = res.entry(files)
        flags.append(f"--config.{item.field}={res.ref.pinned(res.commit)}")
        if item.field == "model.path":
            model = res.path
    with open(os.path.join(out_dir, "model_dir"), "w", encoding="utf-8") as f:
        f.write(model + "\n")
    with open(os.path.join(out_dir, "sources.json"), "w", encoding="utf-8") as f:
        json.dump({"fields": entries, "cache": hub.cache_dir()}, f, indent=2)
    with open(os.path.join(out_dir, "sources.md"), "w", encoding="utf-8") as f:
        f.write(markdown(entries))
    # last, atomically: launch/paper.sh takes OUT/flags as the mark of a finished fetch
    with open(os.path.join(out_dir, "flags.tmp"), "w", encoding="utf-8") as f:
        f.write("".join(flag + "\n" for flag in flags))
    os.replace(os.path.join(out_dir, "flags.tmp"), os.path.join(out_dir, "flags"))
    return {"flags": flags, "model_dir": model, "sources": entries}


def markdown(entries: dict[str, dict]) -> str:
    lines = ["| field | id | commit | files |", "|---|---|---|---|"]
    for field, e in entries.items():
        files = ", ".join(e["files"][:4]) + (f", ... ({len(e['files'])})"
                                             if len(e["files"]) > 4 else "")
        lines.append(f"| {field} | {e['id']} | {e['commit']} | {files} |")
    if not entries:
        lines.append("| (none: every path is local) | | | |")
    return "\n".join(lines) + "\n"


def _load_config(argv: list[str]):
    from absl import flags
    from ml_collections import config_flags

    values = flags.FlagValues()  # its own: main() may run more than once in a process
    holder = config_flags.DEFINE_config_file("config", None, "the config file",
                                             flag_values=values, lock_config=False)
    values([sys.argv[0]] + argv, known_only=True)
    if holder.value is None:
        raise hub.HubError("--config is required")
    return holder.value


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = ("usage: python -m frontier_rl.experiment.hub_fetch {plan|fetch} --config=CONFIG "
             "[--out=DIR] [--config.FIELD=VALUE ...]")
    if not argv or argv[0] not in ("plan", "fetch"):
        print(usage, file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    out = next((a.split("=", 1)[1] for a in rest if a.startswith("--out=")), "")
    rest = [a for a in rest if not a.startswith("--out=")]
    try:
        config = _load_config(rest)
        if command == "plan":
            for item in plan(config):
                shown = ", ".join(item.ids) if item.ids else item.value
                print(f"{item.field:<28} {item.action:<9} {shown}")
            return 0
        if not out:
            raise hub.HubError("fetch needs --out=DIR")
        res = fetch(config, out)
        print(markdown(res["sources"]), end="")
        print(f"wrote {os.path.join(out, 'flags')} ({len(res['flags'])} overrides); the "
              f"policy's directory: {res['model_dir'] or '(none: a random init)'}")
    except (ValueError, FileNotFoundError) as e:
        print(f"frontier_rl.experiment.hub_fetch {command}: error: {hub.first_line(e)}",
              file=sys.stderr)
        return 1
    return 0


def hub_table(c) -> str:
    """`c`'s Hugging Face ids (paper.hub_ids), each with the commit it has in the local hub
    cache (looked up without the network), or how to fetch it."""
    ids = paper.hub_ids(c)
    if not ids:
        return ""
    lines = ["", "Hugging Face ids (revision asked for -> commit in the local cache "
             f"{hub.cache_dir()}; launch/paper.sh fetches and pins them, a run records them "
             f"in {hub.RECORD}):"]
    for field, values in ids.items():
        kind = "dataset" if field != "model.path" else "model"
        for value in values:
            commit = hub.cached_commit(value, kind)
            ref = hub.parse(value)
            where = commit or ("not cached: " + hub.fetch_command(ref, kind) if ref
                               else "not cached")
            lines.append(f"  {field:<24}  {value:<52}  {where}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
