"""Tests for frontier_rl.run.checkpoint: round trip, retention, resume and damage fallback."""

from __future__ import annotations

import glob
import logging
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from frontier_rl.run.checkpoint import DAMAGED_SUBDIR, Checkpointer

# When a read of a damaged checkpoint fails, orbax abandons its asyncio loop while other reads
# are still pending: their callbacks later hit the closed loop ("Event loop is closed", ignored in
# a destructor) or a coroutine is never awaited. Harmless, and reported at GC time in whichever
# test happens to run then, so both are filtered module-wide.
pytestmark = [
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
    pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning"),
]


def make_state(step: int) -> dict:
    """A run-state-like pytree whose values depend on `step`, so steps are distinguishable."""
    return {
        "params": {
            "w": jnp.full((4, 3), step, jnp.float32) + jnp.arange(12.0).reshape(4, 3),
            "b": np.arange(3, dtype=np.int32) * step,
        },
        "opt": {"mu": {"w": jnp.ones((4, 3), jnp.float32) * 0.5 * step}, "count": np.int32(step)},
        "rng": jax.random.key_data(jax.random.PRNGKey(step)),
        "loss_ema": np.asarray(0.25 * step, np.float32),
        "tokens_seen": 1000 * step,
    }


def make_meta(step: int) -> dict:
    return {"step": step, "cursor": {"epoch": 1, "index": 7 * step}, "hash": "abc", "xs": [1, 2]}


def assert_state_equal(got: dict, want: dict) -> None:
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        if isinstance(w, (int, float)):
            assert type(g) is type(w) and g == w
            continue
        assert isinstance(g, jax.Array)
        assert g.dtype == np.asarray(w).dtype and g.shape == np.shape(w)
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def save_steps(directory, steps, **kwargs) -> None:
    with Checkpointer(str(directory), **kwargs) as ckpt:
        for s in steps:
            assert ckpt.save(s, make_state(s), make_meta(s))


def step_dir(directory, step: int) -> str:
    return os.path.join(str(directory), str(step))


def test_round_trip_latest_and_max_to_keep(tmp_path):
    ckpt = Checkpointer(str(tmp_path), max_to_keep=3)
    assert ckpt.latest_step() is None
    assert ckpt.restore(make_state(0)) is None
    for s in range(1, 6):
        assert ckpt.save(s, make_state(s), make_meta(s))
    assert ckpt.latest_step() == 5
    assert ckpt.all_steps() == [3, 4, 5]
    assert sorted(os.listdir(tmp_path)) == ["3", "4", "5"]

    step, state, meta = ckpt.restore(make_state(0))
    assert step == 5
    assert_state_equal(state, make_state(5))
    assert meta == make_meta(5)
    ckpt.close()


def test_restore_into_abstract_target_gives_jax_arrays(tmp_path):
    save_steps(tmp_path, [2])
    target = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(np.shape(x), jnp.asarray(x).dtype), make_state(0)
    )
    with Checkpointer(str(tmp_path)) as ckpt:
        step, state, _ = ckpt.restore(target)
    assert step == 2
    for leaf in jax.tree.leaves(state):
        assert isinstance(leaf, jax.Array)
        assert leaf.devices() == {jax.devices()[0]}
    np.testing.assert_array_equal(state["rng"], make_state(2)["rng"])
    assert state["rng"].dtype == jnp.uint32


def test_resume_in_new_process_picks_newest(tmp_path):
    save_steps(tmp_path, [1, 2, 3])
    with Checkpointer(str(tmp_path)) as ckpt:
        assert ckpt.latest_step() == 3
        step, state, meta = ckpt.restore(make_state(0))
        assert (step, meta) == (3, make_meta(3))
        assert_state_equal(state, make_state(3))


def test_save_interval_force_and_existing_step(tmp_path):
    with Checkpointer(str(tmp_path), save_interval_steps=5) as ckpt:
        saved = [s for s in range(0, 12) if ckpt.save(s, make_state(s), make_meta(s))]
        assert saved == [0, 5, 10]
        assert ckpt.save(11, make_state(11), make_meta(11), force=True)
        # Forced save of a step that already exists (e.g. final save) is a harmless no-op.
        assert not ckpt.save(11, make_state(0), make_meta(0), force=True)
        assert ckpt.restore(make_state(0))[2] == make_meta(11)
        with pytest.raises(TypeError):
            ckpt.save(20, make_state(20), {"bad": object()}, force=True)
        assert ckpt.latest_step() == 11


def _delete_array_files(path: str) -> None:
    for f in glob.glob(os.path.join(path, "state", "**", "d", "*"), recursive=True):
        os.remove(f)


def _truncate_array_files(path: str) -> None:
    for f in glob.glob(os.path.join(path, "state", "**", "d", "*"), recursive=True):
        with open(f, "r+b") as fh:
            fh.truncate(os.path.getsize(f) // 2)


def _garbage_meta(path: str) -> None:
    with open(os.path.join(path, "meta", "metadata"), "w") as fh:
        fh.write("{not json at all")


def _delete_meta(path: str) -> None:
    os.remove(os.path.join(path, "meta", "metadata"))


def _empty_step_dir(path: str) -> None:
    shutil.rmtree(path)
    os.makedirs(path)


@pytest.mark.parametrize(
    "damage",
    [_delete_array_files, _truncate_array_files, _garbage_meta, _delete_meta, _empty_step_dir],
)
def test_damaged_newest_falls_back(tmp_path, caplog, damage):
    save_steps(tmp_path, [1, 2, 3])
    damage(step_dir(tmp_path, 3))

    ckpt = Checkpointer(str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="frontier_rl.run.checkpoint"):
        step, state, meta = ckpt.restore(make_state(0))
    assert step == 2
    assert_state_equal(state, make_state(2))
    assert meta == make_meta(2)
    warnings = [r.getMessage() for r in caplog.records if r.name == "frontier_rl.run.checkpoint"]
    assert any("step 3" in w and "unreadable" in w for w in warnings), warnings

    # The damaged step is moved aside, so the resumed run can write step 3 again.
    assert ckpt.latest_step() == 2
    assert len(os.listdir(tmp_path / DAMAGED_SUBDIR)) == 1
    assert ckpt.save(3, make_state(3), make_meta(3))
    assert ckpt.restore(make_state(0))[0] == 3
    ckpt.close()


def test_leftover_tmp_dir_is_ignored(tmp_path):
    save_steps(tmp_path, [1, 2])
    # Simulate a kill -9 during the save of step 3: orbax writes into a tmp dir first.
    tmp_dir = os.path.join(str(tmp_path), "3.orbax-checkpoint-tmp-1712345678")
    shutil.copytree(step_dir(tmp_path, 2), tmp_dir)
    shutil.rmtree(os.path.join(tmp_dir, "meta"))
    _truncate_array_files(tmp_dir)

    with Checkpointer(str(tmp_path)) as ckpt:
        assert ckpt.latest_step() == 2
        step, state, _ = ckpt.restore(make_state(0))
        assert step == 2
        assert_state_equal(state, make_state(2))
        assert ckpt.save(3, make_state(3), make_meta(3))
        assert ckpt.restore(make_state(0))[0] == 3
    assert not os.path.exists(tmp_dir)


def test_all_damaged_raises_naming_steps(tmp_path):
    save_steps(tmp_path, [4, 7])
    _garbage_meta(step_dir(tmp_path, 4))
    _delete_array_files(step_dir(tmp_path, 7))
    with Checkpointer(str(tmp_path)) as ckpt:
        with pytest.raises(RuntimeError) as err:
            ckpt.restore(make_state(0))
        assert "step 4" in str(err.value) and "step 7" in str(err.value)
        # Nothing is moved aside when there is nothing to resume from.
        assert ckpt.all_steps() == [4, 7]


def test_a_checkpoint_whose_arrays_changed_on_disk_falls_back_to_the_previous(tmp_path, caplog):
    """Step 2's array files replaced by step 1's (same shapes, so orbax reads them without a
    complaint): the checksums saved with step 2 do not match what is read, so step 2 is
    damaged, said so, moved aside, and step 1 restored."""
    save_steps(tmp_path, [1, 2])
    state2 = os.path.join(step_dir(tmp_path, 2), "state")
    shutil.rmtree(state2)
    shutil.copytree(os.path.join(step_dir(tmp_path, 1), "state"), state2)
    with caplog.at_level(logging.WARNING):
        with Checkpointer(str(tmp_path)) as ckpt:
            step, state, meta = ckpt.restore(make_state(0))
    assert step == 1 and meta == make_meta(1)  # the checksums are not part of the meta
    assert_state_equal(state, make_state(1))
    assert "step 2" in caplog.text and "checksum mismatch" in caplog.text
    assert os.listdir(os.path.join(str(tmp_path), DAMAGED_SUBDIR))


def test_checksums_see_one_flipped_bit_and_a_swap():
    from frontier_rl.run.checkpoint import checksums

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    base = checksums({"a": x, "b": np.array([True, False])})
    flipped = x.copy().view(np.uint32)
    flipped[1, 2] ^= 1 << 7
    swapped = x.copy()
    swapped[0, [0, 1]] = swapped[0, [1, 0]]
    assert checksums({"a": flipped.view(np.float32), "b": np.array([True, False])}) != base
    assert checksums({"a": swapped, "b": np.array([True, False])}) != base
    assert checksums({"a": x, "b": np.array([True, True])}) != base
    assert checksums({"a": jnp.asarray(x, jnp.bfloat16)})[0] != checksums({"a": x})[0]


def test_an_asynchronous_save_writes_meta_as_it_was_when_saved(tmp_path, monkeypatch):
    """The run goes on changing its counters while an asynchronous save is written (orbax
    serialises the JSON item in its background thread, here held back until the run has moved
    on, as a loaded machine schedules it): the checkpoint holds them as they were at `save`."""
    import threading

    from orbax.checkpoint._src.handlers import json_checkpoint_handler as handler

    moved_on = threading.Event()
    save_fn = handler.JsonCheckpointHandler._save_fn

    async def late(self, x, directory):
        moved_on.wait(30)
        return await save_fn(self, x, directory)

    monkeypatch.setattr(handler.JsonCheckpointHandler, "_save_fn", late)
    counters = {"rollouts": 64, "seen": [1, 2]}
    ckpt = Checkpointer(str(tmp_path), async_save=True)
    ckpt.save(1, {"x": jnp.ones(3)}, {"counters": counters})
    counters["rollouts"] += 64
    counters["seen"].append(3)
    moved_on.set()
    ckpt.close()
    _, _, meta = Checkpointer(str(tmp_path)).restore({"x": jnp.zeros(3)})
    assert meta["counters"] == {"rollouts": 64, "seen": [1, 2]}


@pytest.mark.parametrize("where", ["orbax", "elsewhere"])
def test_a_write_task_orbax_never_awaited_is_kept_off_the_terminal(caplog, where):
    """A failed save can leave orbax's write tasks failed and never awaited; asyncio logs each
    one when it is collected. Raised in orbax's code, it goes to FAILURES, not the terminal;
    raised anywhere else, asyncio's record passes untouched."""
    import asyncio
    import gc

    from frontier_rl.run import checkpoint

    filename = os.path.join(os.sep, "site", where, "serialization.py")
    scope: dict = {}
    exec(compile("async def write_fragment():\n    raise ValueError('No space left on device')\n",
                 filename, "exec"), scope)
    del checkpoint.FAILURES[:]
    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(scope["write_fragment"]())
        loop.run_until_complete(asyncio.sleep(0))  # it runs and fails; nobody awaits it
    finally:
        loop.close()
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        del task
        gc.collect()
    logged = [r for r in caplog.records if "never retrieved" in r.getMessage()]
    if where == "orbax":
        assert logged == [] and len(checkpoint.FAILURES) == 1
        assert checkpoint.failure_reason(checkpoint.FAILURES[-1]) == "No space left on device"
    else:
        assert len(logged) == 1 and checkpoint.FAILURES == []
