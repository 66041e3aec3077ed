"""JSON state files a run writes and reads back: written whole or not at all, read with a check.

A run keeps state beside its checkpoints (the run's config, the pool it composed, the final
metrics, a comparison's plan and its runs' records). A kill or a full disk in the middle of a
plain `open(path, "w")` leaves a truncated file that a later reader takes as the state.

- `write_json` writes into a temporary file in the same directory, flushes it to disk, then
  renames it over `path` (`os.replace` is atomic on POSIX filesystems): a reader sees the old
  file or the new one, never half of one. A failed write removes the temporary file and raises.
- `read_json` reads one back and checks it: a file that does not parse, is not a JSON object or
  lacks a required key is a RunError naming the file, what is wrong and what to do (`fix`),
  never a traceback from deep inside the code that reads it.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterable
from typing import Any

from frontier_rl.run.errors import RunError


def write_json(path: str, obj: Any, *, text: str | None = None, **dump: Any) -> None:
    """Writes `obj` as JSON (json.dump's keyword arguments `dump`), or `text` as it is, to
    `path` atomically: a temporary file in the same directory, fsynced, renamed over `path`."""
    if text is None:
        text = json.dumps(obj, **dump)
    write_bytes(path, text.encode("utf-8"))


def write_bytes(path: str, data: bytes) -> None:
    """`data` to `path` atomically, as write_json."""
    path = os.fspath(path)
    # beside `path` (a rename stays on one filesystem), named by process and a random part so
    # two writers never share one; the umask's permissions, as open() gives
    tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_json(path: str, what: str, fix: str, *, keys: Iterable[str] = (),
              kind: type = dict) -> Any:
    """The JSON of `path`, a `kind` (dict or list) holding every key of `keys` (for a dict).
    Anything else is a RunError: "<what> <path> is damaged (<reason>): <fix>"."""
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except ValueError as e:  # JSONDecodeError, bad UTF-8
        raise damaged(path, what, f"{type(e).__name__}: {e}", fix) from None
    if not isinstance(obj, kind):
        raise damaged(path, what, f"a JSON {type(obj).__name__}, not a {kind.__name__}", fix)
    missing = [k for k in keys if k not in obj] if isinstance(obj, dict) else []
    if missing:
        raise damaged(path, what, f"no {', '.join(map(repr, missing))}", fix)
    return obj


def damaged(path: str, what: str, reason: str, fix: str) -> RunError:
    return RunError(f"{what} {path} is damaged ({reason}): {fix}")
