"""Save and resume the whole run state of a training run with orbax.

A checkpoint at step ``N`` is one orbax step directory holding two composite items:

* ``state``: a pytree of arrays (params, optimizer state, RNG key data, counters), written with
  ``StandardSave`` and restored into the structure, shapes, dtypes and shardings of a target;
* ``meta``: a JSON dict (step, data cursor, selector state, config hash, ...), ``JsonSave``.

Rerunning the same command with the same directory resumes: ``restore`` returns the newest
checkpoint that can actually be read. Damaged checkpoints (missing or truncated files, garbage
JSON, ...) are detected by attempting the restore itself; they are logged, skipped, and moved
aside into ``<directory>/_damaged/`` so the resumed run can write those steps again. Orbax
writes each step into a ``*.orbax-checkpoint-tmp-*`` directory and renames it when complete,
so a save killed midway leaves only a tmp directory, which orbax ignores and we delete.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from frontier_rl.run.errors import RunError

PyTree = Any

logger = logging.getLogger(__name__)

# Damaged step directories are renamed into this subdirectory of the checkpoint root. Orbax
# only treats integer-named directories as steps, so it never sees (or deletes) them again.
DAMAGED_SUBDIR = "_damaged"


class _DropOrbaxInfo(logging.Filter):
    """Drops orbax's INFO/DEBUG records (several per save), keeps its warnings, and takes its
    errors out of the terminal into `FAILURES`.

    Orbax logs through absl, i.e. the shared ``absl`` Python logger, so lowering that logger's
    level would also silence other absl users; filtering on the emitting file is narrower.
    A save that fails in orbax's background threads (a full disk, a quota, a permission) is
    logged there as several tracebacks and skipped, not raised: `Checkpointer` finds the step
    missing on disk and stops the run with one line built from the error kept here.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if f"{os.sep}orbax{os.sep}" not in record.pathname:
            return True
        if record.levelno >= logging.ERROR:
            FAILURES.append(record.exc_info[1] if record.exc_info else record.getMessage())
            del FAILURES[:-8]
            return False
        return record.levelno >= logging.WARNING


# orbax's errors, newest last (a few kept): what a failed save says
FAILURES: list[BaseException | str] = []
# what an error says about a write, from its text where it carries no errno (tensorstore's)
WRITE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EROFS, errno.EPERM, errno.EIO)


def failure_reason(error: BaseException | str | None) -> str:
    """One phrase for why a write failed: the OS's words for its errno (found in an exception
    chain, or in the text of a tensorstore error that carries none), else its first line."""
    seen = set()
    e = error
    while isinstance(e, BaseException) and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno:
            return os.strerror(e.errno)
        e = e.__cause__ or e.__context__
    text = str(error or "unknown error")
    for code in WRITE_ERRORS:
        if os.strerror(code).lower() in text.lower():
            return os.strerror(code)
    first = text.strip().splitlines()[0] if text.strip() else "unknown error"
    kind = f"{type(error).__name__}: " if isinstance(error, BaseException) else ""
    return (kind + first)[:200]


def _from_orbax(error: BaseException | None) -> bool:
    """Whether an exception was raised in orbax's code (a frame of its traceback is)."""
    tb = error.__traceback__ if error is not None else None
    while tb is not None:
        if f"{os.sep}orbax{os.sep}" in tb.tb_frame.f_code.co_filename:
            return True
        tb = tb.tb_next
    return False


class _DropOrphanedWrites(logging.Filter):
    """asyncio's "Task exception was never retrieved": a failed save ends orbax's loop with
    some of its write tasks failed and never awaited, and each one, collected, is logged by
    asyncio with its traceback (when depends on the garbage collector). Those raised in orbax
    go to `FAILURES` like its own errors; every other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if not (str(record.msg).startswith("Task exception was never retrieved")
                and _from_orbax(error)):
            return True
        FAILURES.append(error)
        del FAILURES[:-8]
        return False


def _install_log_filter() -> None:
    for name, kind in (("absl", _DropOrbaxInfo), ("asyncio", _DropOrphanedWrites)):
        logger = logging.getLogger(name)
        if not any(isinstance(f, kind) for f in logger.filters):
            logger.addFilter(kind())


_install_log_filter()


def _quiet_late_callbacks(unraisable) -> None:
    """sys.unraisablehook: a failed save ends orbax's asyncio loop while tensorstore still has
    writes in flight; each of them, finishing, calls back into the closed loop and prints a
    RuntimeError traceback (measured: 270 lines for one save that ran out of space). Those
    are dropped (the failure itself is reported once, by `Checkpointer`); anything else goes
    to the hook that was there before."""
    e = unraisable.exc_value
    if isinstance(e, RuntimeError) and str(e) == "Event loop is closed":
        return
    _PREVIOUS_HOOK(unraisable)


_PREVIOUS_HOOK = sys.unraisablehook
sys.unraisablehook = _quiet_late_callbacks


def _default_sharding() -> jax.sharding.Sharding:
    return jax.sharding.SingleDeviceSharding(jax.devices()[0])


def _abstract_leaf(leaf: Any) -> jax.ShapeDtypeStruct:
    """Turns a target leaf into the abstract array orbax restores into.

    Giving orbax a ShapeDtypeStruct with a sharding (rather than the numpy/scalar leaf itself)
    makes it return jax arrays placed on that sharding instead of mirroring the leaf type.
    """
    if isinstance(leaf, jax.ShapeDtypeStruct):
        if leaf.sharding is not None:
            return leaf
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=_default_sharding())
    if isinstance(leaf, jax.Array):
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=leaf.sharding)
    arr = np.asarray(leaf)
    # Canonicalise so e.g. a Python int / float64 target maps to int32 / float32 when jax runs
    # without x64, matching what jax itself would create.
    dtype = jax.dtypes.canonicalize_dtype(arr.dtype)
    return jax.ShapeDtypeStruct(arr.shape, dtype, sharding=_default_sharding())


def _like_target(restored: Any, target: Any) -> Any:
    """Gives Python-scalar target leaves (e.g. a plain int counter) back their Python type."""
    if isinstance(target, (bool, int, float)):
        return type(target)(np.asarray(restored).item())
    return restored


def _savable_leaf(leaf: Any) -> Any:
    # Orbax has handlers for jax/numpy arrays and Python scalars, not for numpy scalars.
    return np.asarray(leaf) if isinstance(leaf, np.generic) else leaf


@contextlib.contextmanager
def _sigint_deferred():
    """Ctrl-C waits for the block to end, then raises as it would have. Around orbax's `save`
    (its part in this thread picks the checkpoints beyond max_to_keep and starts the write)
    and around the wait for a save: a KeyboardInterrupt inside `Thread.join` leaves the
    thread's lock so that later joins return at once (CPython 3.11), so the exit no longer
    waited for orbax's finalize thread, which was killed deleting the oldest checkpoint
    (measured: half-deleted step directories, and orbax's warnings about them at every later
    start, on a loaded machine; none in 20 Ctrl-Cs with this)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            if callable(previous):
                previous(signal.SIGINT, None)
            elif previous != signal.SIG_IGN:
                raise KeyboardInterrupt


CHECKSUMS = "_checksums"  # the meta key holding one checksum per state leaf


@jax.jit
def _leaf_checksum(x: jax.Array) -> jax.Array:
    """A position-weighted sum of the leaf's bits, mod 2^32: every element's bit pattern (as an
    unsigned integer of its width) times an odd weight 2i + 1, summed. One flipped bit changes
    it; so does a swap of two unequal elements."""
    x = jnp.ravel(x)
    if x.dtype == jnp.bool_:
        bits = x.astype(jnp.uint32)
    else:
        width = jnp.dtype(x.dtype).itemsize * 8
        bits = jax.lax.bitcast_convert_type(x, jnp.dtype(f"uint{width}")).astype(jnp.uint32)
    weights = jnp.arange(x.size, dtype=jnp.uint32) * jnp.uint32(2) + jnp.uint32(1)
    return jnp.sum(bits * weights, dtype=jnp.uint32)


def checksums(state: PyTree) -> list[int]:
    """One checksum per leaf of `state`, in tree order (`_leaf_checksum`; a global array's is a
    collective, so every process calls this)."""
    return [int(_leaf_checksum(jnp.asarray(leaf))) for leaf in jax.tree.leaves(state)]


class Checkpointer:
    """Keeps the last ``max_to_keep`` run-state checkpoints under ``directory``. Each carries a
    checksum of every state leaf, verified when it is restored: one that does not match is
    damaged (bit flips on disk, a partial copy), and the next older one is restored instead."""

    def __init__(
        self, directory: str, *, max_to_keep: int = 3, save_interval_steps: int = 1,
        async_save: bool = False,
    ) -> None:
        self.directory = os.path.abspath(os.fspath(directory))
        self.async_save = async_save
        options = ocp.CheckpointManagerOptions(
            save_interval_steps=save_interval_steps,
            preservation_policy=ocp.checkpoint_managers.LatestN(n=max_to_keep),
            # Async: `save` returns once the arrays are copied off the devices and the write
            # goes on in a background thread while training continues; the next `save`,
            # `wait` and `close` block until it is complete on disk.
            enable_async_checkpointing=async_save,
            # Delete tmp dirs left by a save that was killed midway (never valid checkpoints).
            cleanup_tmp_directories=True,
            create=True,
        )
        self._manager = ocp.CheckpointManager(self.directory, options=options)
        self._pending: int | None = None  # the step of a save not yet checked on disk

    # ------------------------------------------------------------------ saving

    def save(self, step: int, state: PyTree, meta: dict, *, force: bool = False) -> bool:
        """Writes checkpoint ``step``; returns whether one was written.

        Without ``force`` only steps allowed by ``save_interval_steps`` (and newer than the
        latest checkpoint) are saved. Saving a step that already exists is a no-op returning
        False, so a forced final save right after a periodic one is harmless. When this
        returns True the checkpoint is complete on disk, or, with ``async_save``, being written
        (complete once ``wait`` returns; the next ``save`` waits for it first, as orbax's does).
        Every process calls this; orbax writes each process's shards and one commits the step.
        ``meta`` must be JSON-serialisable and
        comes back as its JSON round trip (tuples become lists, keys become strings).
        """
        if not force and not self._manager.should_save(step):
            return False  # Cheap exit for the common off-interval step.
        self.wait()  # the save before, checked: a failed one stops the run before another
        if step in self._manager.all_steps():
            logger.info("Checkpoint for step %d already exists; not saving again.", step)
            return False
        if not isinstance(meta, dict):
            raise TypeError(f"meta must be a dict, got {type(meta).__name__}")
        # Fail before touching disk rather than midway through the orbax write; and write a
        # copy: an asynchronous save serialises `meta` in its own thread, after the run has
        # gone on changing the dicts inside it (measured: a checkpoint of step 38 holding the
        # rollout counters of step 39, found after 20 resumes)
        meta = json.loads(json.dumps(meta))
        state = jax.tree.map(_savable_leaf, state)
        meta = {**meta, CHECKSUMS: checksums(state)}
        args = ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta))
        del FAILURES[:]
        with _sigint_deferred():
            saved = self._manager.save(step, args=args, force=force)
        self._pending = step if saved else None
        if not self.async_save:
            self.wait()  # also waits for deletion of checkpoints beyond max_to_keep
        return bool(saved)

    def wait(self) -> None:
        """Blocks until the last save is complete on disk; a RunError if it failed."""
        try:
            with _sigint_deferred():  # a join cut by Ctrl-C never waits again (below)
                self._manager.wait_until_finished()
        except Exception as e:  # noqa: BLE001 - the finalize thread's error, named below
            FAILURES.append(e)
        self._verify()

    def check(self) -> None:
        """A RunError if the last save failed, once it is over; returns at once while it runs
        (call it each step: a failed asynchronous save stops the run at the next step). With
        several processes it waits for nothing: whether a save is over may differ between
        them, so they check together at the next save or at the end."""
        if (self._pending is not None and jax.process_count() == 1
                and not self._manager.is_saving_in_progress()):
            self.wait()

    def _verify(self) -> None:
        """The pending save's step directory is on disk (orbax renames its tmp directory when
        every item is written), else the run stops: orbax logs a failed write and skips the
        step's finalization instead of raising."""
        step, self._pending = self._pending, None
        if step is None or os.path.isdir(os.path.join(self.directory, str(step))):
            return
        reason = failure_reason(FAILURES[-1] if FAILURES else None)
        self._manager.reload()  # the failed step is no checkpoint
        kept = [s for s in self._manager.all_steps() if s != step]
        newest = (f"the newest complete checkpoint, step {max(kept)}, is kept" if kept
                  else "there is no complete checkpoint yet")
        raise RunError(f"the checkpoint of step {step} could not be written to "
                       f"{self.directory} ({reason}); {newest}; free space (or fix the "
                       "cause) and rerun the same command to resume")

    def abort(self) -> RunError | None:
        """On the way out of a failed or interrupted run: waits for the save in flight (a
        kill after it leaves a complete checkpoint; a failed one is left as orbax's tmp
        directory, which the next start deletes) and closes the manager's threads. Raises
        nothing (the error already on its way is the one to report); returns the save's
        failure, if it failed."""
        try:
            self.close()
        except RunError as e:
            return e
        except Exception:  # noqa: BLE001 - see above
            logger.debug("closing the checkpointer after a failure", exc_info=True)
        return None

    # --------------------------------------------------------------- restoring

    def all_steps(self) -> list[int]:
        """Steps of all finalised checkpoints on disk (damaged ones included until restore)."""
        return sorted(self._manager.all_steps())

    def steps_on_disk(self) -> list[int]:
        """The complete checkpoints' steps as the directory holds them now (orbax's tmp
        directories and the set-aside ones are not steps); usable after `close`."""
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        return sorted(int(n) for n in names
                      if n.isdigit() and os.path.isdir(os.path.join(self.directory, n)))

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def restore(self, target: PyTree) -> tuple[int, PyTree, dict] | None:
        """Restores the newest readable checkpoint as ``(step, state, meta)``.

        ``state`` has the structure of ``target`` and, leaf by leaf, its shape and dtype; leaves
        that are jax arrays or ShapeDtypeStructs with a sharding are restored with that sharding,
        all others as jax arrays on the default device (Python scalars stay Python scalars).
        Returns None if there is no checkpoint. Damaged checkpoints are skipped with a warning;
        if every checkpoint is damaged a RuntimeError lists each step and its error.
        """
        self._manager.reload()  # Pick up anything written since construction.
        steps = sorted(self._manager.all_steps(), reverse=True)
        if not steps:
            return None
        abstract = jax.tree.map(_abstract_leaf, target)
        errors: dict[int, str] = {}
        for step in steps:
            try:
                state, meta = self._restore_step(step, abstract)
            except Exception as e:  # Any failure to read this step means "damaged".
                errors[step] = f"{type(e).__name__}: {e}"
                logger.warning(
                    "Checkpoint at step %d in %s is unreadable, trying an older one: %s",
                    step,
                    self.directory,
                    errors[step],
                )
                continue
            if errors:
                self.set_aside(sorted(errors), DAMAGED_SUBDIR)
            return step, jax.tree.map(_like_target, state, target), meta
        details = "; ".join(f"step {s}: {err.splitlines()[0] if err else '?'}"
                            for s, err in errors.items())
        raise RunError(
            f"all {len(errors)} checkpoints in {self.directory} are unreadable ({details}): "
            "move that directory aside to start over, or restore it from a copy")

    def restore_step(self, step: int, target: PyTree) -> tuple[int, PyTree, dict]:
        """Restores checkpoint `step` (which must exist) like `restore`, without falling back
        to an older one; errors propagate."""
        self._manager.reload()
        if step not in self._manager.all_steps():
            raise ValueError(f"no checkpoint at step {step} in {self.directory} (steps: "
                             f"{self.all_steps()})")
        state, meta = self._restore_step(step, jax.tree.map(_abstract_leaf, target))
        return step, jax.tree.map(_like_target, state, target), meta

    def _restore_step(self, step: int, abstract: PyTree) -> tuple[PyTree, dict]:
        args = ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()
        )
        restored = self._manager.restore(step, args=args)
        # Orbax itself raises on missing/truncated files, bad JSON, and tree-structure or shape
        # mismatches with the target; valid JSON of the wrong kind is the one gap left.
        meta = restored["meta"]
        if not isinstance(meta, dict):
            raise ValueError(f"meta is a {type(meta).__name__}, expected a JSON object")
        saved = meta.pop(CHECKSUMS, None)
        if saved is not None:  # checkpoints written before checksums have none to check
            got = checksums(restored["state"])
            bad = [i for i, (a, b) in enumerate(zip(saved, got, strict=False)) if a != b]
            if bad or len(saved) != len(got):
                raise ValueError(f"checksum mismatch in {len(bad)} of {len(got)} arrays (the "
                                 "files changed after they were written)")
        return restored["state"], meta

    def set_aside(self, steps: list[int], subdir: str) -> str:
        """Moves the step directories `steps` out of orbax's view, into `<directory>/<subdir>/`
        (renamed `<step>-<time>`, never deleted), and returns that directory.

        Used for damaged steps newer than the restored one (DAMAGED_SUBDIR), which would
        otherwise still count as the latest step, so the resumed run could not save those step
        numbers again; and for steps whose policy had collapsed (health.py), so a resume
        restores the last good one. Kept in case the read error was transient or someone wants
        to inspect them. Call once the saves are complete (`wait`).
        """
        root = os.path.join(self.directory, subdir)
        if jax.process_index() != 0:
            return root
        os.makedirs(root, exist_ok=True)
        for step in steps:
            src = os.path.join(self.directory, str(step))
            dst = os.path.join(root, f"{step}-{int(time.time())}")
            try:
                os.rename(src, dst)
                logger.warning("Moved checkpoint %s to %s", src, dst)
            except OSError as e:
                logger.warning("Could not move checkpoint %s aside: %s", src, e)
        self._manager.reload()
        return root

    # ---------------------------------------------------------------- lifetime

    def close(self) -> None:
        """Waits for the last save (a RunError if it failed) and closes orbax's threads."""
        try:
            self.wait()
        finally:
            self._manager.close()

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def config_section():
    """`checkpoint`: every `every` steps, the last `max_to_keep` kept."""
    from frontier_rl.run import fields

    return (fields.Section("checkpoint", config_section.__doc__)
            .field("every", 25, fields.pos_int, "an integer >= 1")
            .field("max_to_keep", 3, lambda x: fields.pos_int(x) and x >= 2,
                   "an integer >= 2 (a damaged latest checkpoint falls back to the previous "
                   "one)"))
