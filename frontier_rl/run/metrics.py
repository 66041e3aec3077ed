"""Namespaced metrics (train/, rollout/, select/, mech/, perf/, eval/, ...) -> JSONL, and
optionally TensorBoard and Weights & Biases.

`DIR/metrics.jsonl` gets one JSON object per write: {"step": s, "<ns>/<name>": value, ...}; it
is the record every report reads. On resume, lines with a step beyond the restored checkpoint
are dropped first, so the file of an interrupted-then-resumed run equals that of an
uninterrupted one. TensorBoard (DIR/tb) and W&B get the numeric values of each write; a W&B run
is named after the workdir and keeps one id per workdir, so a resumed run continues it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping

DAMAGED = ".damaged"  # suffix of the side file that keeps lines that did not parse
NAMESPACES = ("train", "rollout", "select", "mech", "perf", "eval", "evalset", "task",
              "warmstart", "pool")


class NonFiniteError(RuntimeError):
    pass


def wandb_run(workdir: str, project: str, mode: str = "auto", config: dict | None = None):
    """A W&B run for `workdir`: id from the workdir's path (a resumed run continues it), files
    in DIR/wandb, offline unless `mode` is "online" or "auto" with WANDB_API_KEY set."""
    try:
        import wandb
    except ImportError:
        raise ImportError("log.wandb is set but the wandb package is not installed: "
                          "pip install 'frontier_rl[wandb]' (or set log.wandb='')") from None
    if mode == "auto":
        mode = "online" if os.environ.get("WANDB_API_KEY") else "offline"
    run_id = hashlib.sha256(os.path.abspath(workdir).encode()).hexdigest()[:16]
    return wandb.init(project=project, dir=workdir, mode=mode, id=run_id, resume="allow",
                      name=os.path.basename(os.path.abspath(workdir)), config=config or {})


class MetricWriter:
    def __init__(self, workdir: str, *, tensorboard: bool = True, enabled: bool = True,
                 wandb: str = "", wandb_mode: str = "auto", config: dict | None = None):
        # `enabled=False` (every process but 0 of a multi-process run) still checks each record
        # (so a NaN stops every process alike) but writes nothing.
        self.path = os.path.join(workdir, "metrics.jsonl")
        self.enabled = enabled
        self._wandb = wandb_run(workdir, wandb, wandb_mode, config) if wandb and enabled else None
        self._tb = None
        if tensorboard and enabled:
            try:
                from tensorboardX import SummaryWriter

                self._tb = SummaryWriter(os.path.join(workdir, "tb"))
            except ImportError:  # TensorBoard output is optional; JSONL is the record.
                self._tb = None

    def truncate_after(self, step: int) -> list[int]:
        """Drops records written after `step` (by a run that was killed before checkpointing).
        A line that does not parse (a write cut by a crash, a damaged disk) is never dropped
        silently: it is appended to DAMAGED beside the file with its line number, and the line
        numbers are returned (the caller says so). Returns [] when every line parsed."""
        if not self.enabled or not os.path.exists(self.path):
            return []
        keep, damaged = [], []
        with open(self.path, encoding="utf-8", errors="surrogateescape") as f:
            for n, line in enumerate(f, 1):
                try:
                    if json.loads(line)["step"] <= step:
                        keep.append(line)
                except (json.JSONDecodeError, KeyError, TypeError):
                    damaged.append((n, line))
        if damaged:
            with open(self.path + DAMAGED, "a", encoding="utf-8",
                      errors="surrogateescape") as f:
                for n, line in damaged:
                    f.write(json.dumps({"line": n, "text": line.rstrip("\n")}) + "\n")
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(keep)
        os.replace(tmp, self.path)
        return [n for n, _ in damaged]

    def has_step(self, step: int) -> bool:
        """Whether a record of `step` is in the file."""
        if not self.enabled or not os.path.exists(self.path):
            return False
        return any(r.get("step") == step for r in read(self.path))

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        for key, value in metrics.items():
            if key.split("/", 1)[0] not in NAMESPACES:
                raise ValueError(f"metric {key!r} is not namespaced ({'/'.join(NAMESPACES)})")
            if isinstance(value, float) and not math.isfinite(value) and key.startswith("train/"):
                raise NonFiniteError(f"{key} = {value} at step {step}: training diverged")
        record = {"step": int(step), **{k: _plain(v) for k, v in sorted(metrics.items())}}
        if not self.enabled:
            return
        try:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
        except OSError as e:  # a full disk fails the write or the close: name the file
            raise OSError(e.errno, e.strerror, self.path) from e
        if self._tb is not None:
            for key, value in record.items():
                if key != "step" and isinstance(value, (int, float)):
                    # TensorBoard tag names may not contain '@'.
                    self._tb.add_scalar(key.replace("@", "_at_"), value, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log({k: v for k, v in record.items()
                             if k != "step" and isinstance(v, (int, float))}, step=int(step))

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            import wandb

            self._wandb.finish()
            # finish() returns before wandb's service process has written the run file (found
            # with an offline run read back at once); teardown waits for it and stops it.
            wandb.teardown()
            self._wandb = None


def _plain(value):
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def read(path: str) -> list[dict]:
    """All records of a metrics.jsonl file."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def config_section():
    """`log`: TensorBoard, Weights & Biases, progress on the console, profiling."""
    from frontier_rl.run import fields

    return (fields.Section("log", config_section.__doc__)
            .field("tensorboard", True)
            # Weights & Biases (pip install 'frontier_rl[wandb]'): "" = off, else the project
            # name. "auto" logs online when WANDB_API_KEY is set and offline otherwise
            # (DIR/wandb; `wandb sync` uploads it later); "online" / "offline" force it.
            .field("wandb", "")
            .field("wandb_mode", "auto", fields.one_of("auto", "online", "offline"),
                   "one of auto, online, offline")
            .field("progress", True)
            # Steps (comma-separated, e.g. "5,6") traced with jax.profiler into WORKDIR/profile.
            .field("profile_steps", "", lambda x: isinstance(x, str) and all(
                p.strip().isdigit() for p in x.split(",") if p.strip()),
                "comma-separated step numbers, e.g. '5,6' ('' disables)"))
