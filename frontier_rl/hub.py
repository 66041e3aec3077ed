"""Hugging Face ids for models, corpora and benchmarks, resolved through the hub's own client
and cache.

Where a config takes a local path (`model.path`, `task.chat_template`, `task.path`,
`eval.sets.<name>`, `frontier-rl eval --model`), it also takes an id:

  org/name[@revision][:pattern]

`revision` is a branch, tag or commit (default "main"); `pattern` picks files of the repository
(a glob such as `data/train-*.parquet`; default: what the field needs, below). A string that
exists on disk is a path, never an id; so is one without the id's shape (a leading `/`, `.` or
`~`, more than one `/` before `@`, a `tfds:` prefix, or a repository name ending in a file
suffix such as `.jsonl`).

An id is resolved by `huggingface_hub.snapshot_download` into the hub's cache, read when it is
resolved: HF_HUB_CACHE, else HF_HOME/hub; HF_HUB_OFFLINE=1 reads the cache only; a token comes
from HF_TOKEN or `hf auth login`, as the hub client finds it. A model takes its safetensors
weights, config, tokenizer and chat template only (MODEL_PATTERNS: never .bin / .pt weights). A
dataset repository (repo_type="dataset") gives its data files, read by the project's own readers
(no `datasets` library): a corpus (`task.path`) its .parquet / .jsonl files of the train split
when the file names mark one, else all of them; a benchmark its .parquet / .jsonl / .json / .csv
files of the test split, else of the train split, else all, converted by
frontier_rl/data/benchmarks.py when the benchmark's name is one it knows (its public schema),
else read as corpus rows. Within a process each (repository, revision) resolves to one commit.

What is recorded: WORKDIR/hub_sources.json (policy.prepare writes it) lists, per config field
holding an id, the id, the revision asked for, the commit it resolved to and the files read (and
for a corpus `fetch` built, the same of each of its sources); `frontier-rl eval` puts the same
in its eval.json; `frontier-rl protocol` lists a paper config's ids with the commit each has in
the local cache. A missing id ends in one line naming the id and the command that fetches it.

  python -m frontier_rl.experiment.hub_fetch plan  --config=CONFIG [--config.FIELD=VALUE ...]
  python -m frontier_rl.experiment.hub_fetch fetch --config=CONFIG --out=DIR [...]

(frontier_rl/experiment/hub_fetch.py; this module imports nothing of the project, so every
layer can resolve ids.) `plan` says, offline, what `fetch` would fetch for a config: its ids,
and for a paper config (frontier_rl/experiment/paper.py) whose local checkpoint, corpus or
benchmark files are missing, the paper's ids in their place. `fetch` fetches them, builds a
paper corpus that is missing from its sources (the rules of frontier_rl/data/benchmarks.py, as
launch/prepare_benchmarks.py applies them to local downloads) and writes DIR/flags (the config
overrides that pin every id to the commit fetched), DIR/model_dir (the policy's local
directory), DIR/sources.json and DIR/sources.md. launch/paper.sh runs both.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re

log = logging.getLogger("frontier_rl")

DEFAULT_REVISION = "main"
# A policy's files: config, generation config, tokenizer (json / BPE merges / sentencepiece /
# tiktoken), chat template and the safetensors weights with their index.
MODEL_PATTERNS = ("*.json", "*.safetensors", "*.txt", "*.model", "*.jinja", "*.tiktoken")
CORPUS_EXTS = (".parquet", ".jsonl")  # what tasks/corpus.py reads
TABLE_EXTS = (".parquet", ".jsonl", ".json", ".csv")  # what data/benchmarks.py reads
CORPUS_SPLITS = ("train",)
BENCHMARK_SPLITS = ("test", "train")
RECORD = "hub_sources.json"  # WORKDIR/hub_sources.json

_ID = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)"
                 r"(?:@(?P<revision>[^:@\s]+))?(?::(?P<pattern>\S+))?")
_FILE_SUFFIXES = (".jsonl", ".parquet", ".json", ".csv", ".txt", ".safetensors")
_SHA = re.compile(r"[0-9a-f]{40}")


class HubError(ValueError):
    """An id that cannot be resolved; the message is one line (the CLI prints it as is)."""


@dataclasses.dataclass(frozen=True)
class Ref:
    """A parsed id: the repository, the revision asked for and the file pattern ("" = none)."""

    repo: str
    revision: str
    pattern: str
    text: str

    def pinned(self, commit: str) -> str:
        """The id at `commit`, with its pattern."""
        return f"{self.repo}@{commit}" + (f":{self.pattern}" if self.pattern else "")


@dataclasses.dataclass(frozen=True)
class Resolved:
    ref: Ref
    kind: str  # "model" or "dataset"
    commit: str
    path: str  # the snapshot directory in the cache
    files: tuple[str, ...]  # the snapshot's files the patterns take, relative to `path`

    def entry(self, files: list[str] | tuple[str, ...] | None = None) -> dict:
        return {"id": self.ref.text, "repo": self.ref.repo, "type": self.kind,
                "revision": self.ref.revision, "commit": self.commit,
                "pinned": self.ref.pinned(self.commit),
                "files": list(self.files if files is None else files)}


def parse(value) -> Ref | None:
    """The id `value` names, or None when it is a local path (module docstring)."""
    if not isinstance(value, str) or not value or os.path.exists(value):
        return None
    if value.startswith(("/", ".", "~", "tfds:")) or "\\" in value:
        return None
    m = _ID.fullmatch(value)
    if m is None:
        return None
    repo = m["repo"]
    if ".." in repo or "--" in repo or repo.lower().endswith(_FILE_SUFFIXES):
        return None
    return Ref(repo=repo, revision=m["revision"] or DEFAULT_REVISION,
               pattern=m["pattern"] or "", text=value)


def is_id(value) -> bool:
    return parse(value) is not None


def offline() -> bool:
    """HF_HUB_OFFLINE as set now (the hub client reads it once, at import)."""
    value = os.environ.get("HF_HUB_OFFLINE")
    if value is not None:
        return value.strip().upper() in ("1", "ON", "YES", "TRUE")
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def cache_dir() -> str:
    """The hub cache as the environment names it now: HF_HUB_CACHE, else HF_HOME/hub, else the
    client's default."""
    env = os.environ
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(name):
            return os.path.expanduser(env[name])
    if env.get("HF_HOME"):
        return os.path.join(os.path.expanduser(env["HF_HOME"]), "hub")
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def fetch_command(ref: Ref, kind: str) -> str:
    """The hub CLI's command that puts `ref` into the cache."""
    parts = ["hf download", ref.repo]
    if kind == "dataset":
        parts.append("--repo-type dataset")
    if ref.revision != DEFAULT_REVISION:
        parts.append(f"--revision {ref.revision}")
    if ref.pattern:
        parts.append(f"--include '{ref.pattern}'")
    return " ".join(parts)


def first_line(e: BaseException) -> str:
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return lines[0] if lines else type(e).__name__


_MEMO: dict[tuple, Resolved] = {}
_COMMITS: dict[tuple, str] = {}  # (kind, repo, revision, cache) -> the commit it resolved to


def resolve(ref: Ref, kind: str, field: str, patterns: tuple[str, ...]) -> Resolved:
    """`ref` in the cache (fetched unless offline), its snapshot's files matching `patterns`."""
    from huggingface_hub import errors, snapshot_download
    from huggingface_hub.utils import filter_repo_objects

    cache, off = cache_dir(), offline()
    key = (kind, ref.repo, ref.revision, patterns, cache)
    if key in _MEMO:
        return _MEMO[key]
    revision = _COMMITS.get((kind, ref.repo, ref.revision, cache), ref.revision)
    where = f"{field}={ref.text!r}"
    what = f"the Hugging Face {kind} {ref.repo}"
    url = f"https://huggingface.co/{'datasets/' if kind == 'dataset' else ''}{ref.repo}"
    fetch = fetch_command(ref, kind)
    try:
        path = snapshot_download(ref.repo, repo_type=kind, revision=revision, cache_dir=cache,
                                 allow_patterns=list(patterns), local_files_only=off)
    except errors.GatedRepoError:
        raise HubError(f"{where}: {what} is gated: accept its terms on {url} and set HF_TOKEN "
                       "(or run `hf auth login`)") from None
    except errors.RepositoryNotFoundError:
        raise HubError(f"{where}: not a local path, and there is no {kind} repository "
                       f"{ref.repo} on the Hugging Face hub (or it is private: set HF_TOKEN or "
                       "run `hf auth login`)") from None
    except errors.RevisionNotFoundError:
        raise HubError(f"{where}: {what} has no revision {ref.revision!r}") from None
    except errors.LocalEntryNotFoundError as e:
        if off:
            raise HubError(f"{where}: not a local path, and {what} (revision {ref.revision}) "
                           f"is not in the hub cache {cache} while HF_HUB_OFFLINE=1: fetch it "
                           f"with `{fetch}` (or unset HF_HUB_OFFLINE)") from None
        raise HubError(f"{where}: not a local path, and {what} could not be reached and is not "
                       f"in the hub cache {cache} ({first_line(e)}): fetch it with `{fetch}` "
                       "once the hub is reachable") from None
    except errors.HFValidationError as e:
        raise HubError(f"{where}: not a local path, nor a valid Hugging Face id "
                       f"({first_line(e)})") from None
    except (errors.HfHubHTTPError, OSError) as e:
        raise HubError(f"{where}: fetching {what} failed: {first_line(e)}") from None
    files = []
    for root, _, names in os.walk(path):
        files += [os.path.relpath(os.path.join(root, n), path) for n in names]
    files = sorted(filter_repo_objects([f.replace(os.sep, "/") for f in files],
                                       allow_patterns=list(patterns)))
    commit = os.path.basename(os.path.normpath(path))
    res = Resolved(ref, kind, commit, path, tuple(files))
    if kind == "model":
        missing = [n for n, ok in (("config.json", "config.json" in files),
                                   (".safetensors weights",
                                    any(f.endswith(".safetensors") for f in files))) if not ok]
        if missing:
            raise HubError(f"{where}: {what} at {commit} has no {' and no '.join(missing)} in "
                           f"the hub cache {cache} (only safetensors weights are loaded): fetch "
                           f"it with `{fetch}`")
    _COMMITS[(kind, ref.repo, ref.revision, cache)] = commit
    _MEMO[key] = res
    return res


def model_dir(value: str, field: str = "model.path") -> str:
    """The local directory of `value`: itself when it is a path, else the id's snapshot."""
    ref = parse(value)
    if ref is None:
        return value
    return resolve(ref, "model", field, (ref.pattern,) if ref.pattern else MODEL_PATTERNS).path


def pick_split(files: list[str], splits: tuple[str, ...]) -> list[str]:
    """The files of the first of `splits` a file name marks (a path part or a name part
    `train`, `test`, ... between separators), else all of them."""
    for split in splits:
        marked = [f for f in files if re.search(rf"(^|[/_.-]){split}([/_.-]|$)", f)]
        if marked:
            return marked
    return files


def dataset(value: str, field: str, exts: tuple[str, ...], splits: tuple[str, ...]
             ) -> tuple[Resolved, list[str]] | None:
    ref = parse(value)
    if ref is None:
        return None
    patterns = (ref.pattern,) if ref.pattern else tuple(f"*{e}" for e in exts)
    res = resolve(ref, "dataset", field, patterns)
    files = [f for f in res.files if f.endswith(exts)]
    if not ref.pattern:
        files = pick_split(files, splits)
    if not files:
        raise HubError(f"{field}={value!r}: the Hugging Face dataset {ref.repo} at {res.commit} "
                       f"has no {'/'.join(exts)} file"
                       + (f" matching {ref.pattern!r}" if ref.pattern else "")
                       + f" in the hub cache {cache_dir()}: fetch it with "
                       f"`{fetch_command(ref, 'dataset')}`, or name its files with "
                       "org/name@revision:PATTERN")
    return res, files


def dataset_files(value: str, field: str = "task.path", exts: tuple[str, ...] = CORPUS_EXTS,
                  splits: tuple[str, ...] = CORPUS_SPLITS) -> list[str] | None:
    """The local files of the dataset id `value` (module docstring), or None when `value` is a
    local path."""
    got = dataset(value, field, exts, splits)
    if got is None:
        return None
    res, files = got
    return [os.path.join(res.path, f) for f in files]


def cached_commit(value: str, kind: str) -> str | None:
    """The commit `value` resolves to in the local cache, without the network; None if absent
    (or not an id)."""
    from huggingface_hub import snapshot_download

    ref = parse(value)
    if ref is None:
        return None
    # the files every resolution of this kind fetches (a complete snapshot has them)
    patterns = ((ref.pattern,) if ref.pattern else MODEL_PATTERNS if kind == "model"
                else tuple(f"*{e}" for e in CORPUS_EXTS))
    try:
        path = snapshot_download(ref.repo, repo_type=kind, revision=ref.revision,
                                 cache_dir=cache_dir(), allow_patterns=list(patterns),
                                 local_files_only=True)
    except Exception:  # noqa: BLE001 - any failure means "not in the cache"
        return None
    return os.path.basename(os.path.normpath(path))


# ----------------------------------------------------------------------------- records


def fields(config) -> list[tuple[str, str, str]]:
    """(field, value, kind) of every config field that may hold an id: "model",
    "chat_template" (a model whose tokenizer alone is read), "corpus", "benchmark:<name>"."""
    out = []
    model_path = str(config.model.get("path") or "")
    if model_path:
        out.append(("model.path", model_path, "model"))
    task = config.task
    if task.get("name") == "corpus":
        template = str(task.get("chat_template") or "")
        if template and template != model_path:
            out.append(("task.chat_template", template, "model"))
        if task.get("path"):
            out.append(("task.path", str(task.path), "corpus"))
    sets = config.eval.get("sets") or {}
    sets = sets.to_dict() if hasattr(sets, "to_dict") else dict(sets)
    for name, value in sets.items():
        out.append((f"eval.sets.{name}", str(value), f"benchmark:{name}"))
    return out


def resolve_field(field: str, value: str, kind: str) -> tuple[Resolved, list[str]]:
    """`value` (an id) of config field `field` resolved as `kind` (fields): the resolution and
    the files the field reads."""
    if kind == "model":
        ref = parse(value)
        res = resolve(ref, "model", field, (ref.pattern,) if ref.pattern else MODEL_PATTERNS)
        return res, list(res.files)
    if kind == "corpus":
        return dataset(value, field, CORPUS_EXTS, CORPUS_SPLITS)
    # every table format a benchmark may come in (data/benchmarks.py reads them; this module
    # imports nothing of the project, so it does not ask which benchmark names it knows)
    return dataset(value, field, TABLE_EXTS, BENCHMARK_SPLITS)


def sources(config) -> dict[str, dict]:
    """Per config field holding an id: what it resolved to (Resolved.entry); for a corpus that
    `fetch` built (FILE.sources.json beside it), each of its sources ("task.path source N")."""
    out = {}
    for field, value, kind in fields(config):
        if is_id(value):
            res, files = resolve_field(field, value, kind)
            out[field] = res.entry(files)
        elif kind == "corpus" and os.path.isfile(value + ".sources.json"):
            # a corpus `fetch` built: the ids and commits it was built from
            with open(value + ".sources.json", encoding="utf-8") as f:
                built = json.load(f).get("sources", [])
            out.update({f"{field} source {i + 1}": e for i, e in enumerate(built)})
    return out


def write_record(workdir: str, config, say=print, write: bool = True) -> str | None:
    """WORKDIR/hub_sources.json: the config's ids and their commits (none: nothing written;
    `write=False` resolves them only). A resumed run whose id now resolves to another commit
    says so, and the entry keeps the earlier commit under "previous_commit"."""
    entries = sources(config)
    if not entries or not write:
        return None
    path = os.path.join(workdir, RECORD)
    old = {}
    if os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as f:
                old = json.load(f).get("fields", {})
        except (OSError, ValueError):
            old = {}
    for field, entry in entries.items():
        before = (old.get(field) or {}).get("commit")
        if before and before != entry["commit"]:
            entry["previous_commit"] = before
            log.warning("%s=%s now resolves to %s, not %s as when this run started: pin it as "
                        "%s to keep the earlier one", field, entry["id"], entry["commit"],
                        before, entry["pinned"].replace(entry["commit"], before))
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"fields": entries, "cache": cache_dir(), "offline": offline()}, f, indent=2)
    os.replace(tmp, path)
    say("hub: " + "; ".join(f"{k}={v['repo']}@{v['commit'][:12]}" for k, v in entries.items())
        + f" (recorded in {path})")
    return path
