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

import json
import logging
import os
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from frontier_rl.errors import RunError

PyTree = Any

logger = logging.getLogger(__name__)

# Damaged step directories are renamed into this subdirectory of the checkpoint root. Orbax
# only treats integer-named directories as steps, so it never sees (or deletes) them again.
DAMAGED_SUBDIR = "_damaged"


class _DropOrbaxInfo(logging.Filter):
    """Drops orbax's INFO/DEBUG records (several per save) but keeps its warnings and errors.

    Orbax logs through absl, i.e. the shared ``absl`` Python logger, so lowering that logger's
    level would also silence other absl users; filtering on the emitting file is narrower.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return True
        return f"{os.sep}orbax{os.sep}" not in record.pathname


def _install_log_filter() -> None:
    absl_logger = logging.getLogger("absl")
    if not any(isinstance(f, _DropOrbaxInfo) for f in absl_logger.filters):
        absl_logger.addFilter(_DropOrbaxInfo())


_install_log_filter()


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
        if step in self._manager.all_steps():
            logger.info("Checkpoint for step %d already exists; not saving again.", step)
            return False
        if not isinstance(meta, dict):
            raise TypeError(f"meta must be a dict, got {type(meta).__name__}")
        # Fail before touching disk rather than midway through the orbax write.
        json.dumps(meta)
        state = jax.tree.map(_savable_leaf, state)
        meta = {**meta, CHECKSUMS: checksums(state)}
        args = ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta))
        saved = self._manager.save(step, args=args, force=force)
        if not self.async_save:
            # Also waits for deletion of checkpoints beyond max_to_keep.
            self._manager.wait_until_finished()
        return bool(saved)

    def wait(self) -> None:
        """Blocks until the last save is complete on disk."""
        self._manager.wait_until_finished()

    # --------------------------------------------------------------- restoring

    def all_steps(self) -> list[int]:
        """Steps of all finalised checkpoints on disk (damaged ones included until restore)."""
        return sorted(self._manager.all_steps())

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
        self._manager.wait_until_finished()
        self._manager.close()

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
