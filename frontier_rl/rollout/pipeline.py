"""When a step's rollouts are made: before its update (`rl.staleness = 0`), or up to k steps
ahead, under older weights, while the trainer updates (`rl.staleness = k`).

Step t's update takes the parameters after step t-1 (version t-1) and its groups. With
staleness 0 the groups are built under those same parameters, then the update runs: the loop
as it always was. With staleness k >= 1 the groups of step t were built k steps earlier, under
version t-1-k, and while the trainer runs step t's update (in a thread: XLA releases the
Python lock while a compiled program runs) the selector builds the groups of step t+k under
version t-1. The lag of a trained group, the trainer's version less the one that generated it,
is k once the pipeline is full and never more; the first k steps' groups are built at the
start under the first parameters (lag below k). Every group carries its `version`.

Admission is paced, never filtered: the groups of step s are built once version s-1-k exists,
and every group built is trained, in order; no group is dropped or requeued for being stale,
which would bias training toward the prompts whose groups finish first (tinker-cookbook
PR 822; AReaL paces admission the same way). The stale groups' behaviour log-probs are the
sampler's, which they carry; the trainer recomputes the old policy's under its current
parameters (rl.recompute_old_logp "auto" does with k >= 1), so the rollout corrections
(rl.tis_cap, rl.rollout_rs, as verl's) weight the lag the way they weight an external
engine's mismatch.

Order, which fixes every result given the seed: everything but the update runs on this
thread. The selector's calls come in the synchronous loop's order, build then feedback
(`after_update`) on that same batch, then the next build; with k >= 1 both run while the update
runs, so a selector's state after each call is what the same calls give synchronously on those
outcomes, and it never depends on timing. The feedback is on the parameters that built the
batch (the generating policy): HeaPA's proposals in `after_update` are that policy's, as are
HIVE's prompt-entropy pass and DS's and SPEED's screening in the build, the newest parameters
there are when they run. The groups in flight at a step's end (steps t+1 .. t+k) are the
pipeline's state: a checkpoint stores them (`state`), and a resumed run continues with them
exactly as the uninterrupted run would. A run that stops at its budget leaves the groups in
flight untrained; their rollouts were made and are counted (k steps' rollouts beyond the last
update).

The engine builds from a copy of the parameters (`snapshot`): the update donates the buffers of
the parameters it is given, and the sampler reads version t-1 while the update replaces it.
With a rollout mesh of its own (mesh.rollout) that copy is the sync: `jax.device_put` onto the
rollout devices (rl/sharding.py `placer`), passed as `snapshot`.

`admission="discard"` is the ablation the paced pipeline is measured against, never a run's
mode: the engine does not wait for a group that outlasts the k updates the pipeline gives it
(`late(group)`, from its latency), the group is dropped as too stale, its outcomes never reach
the selector, and its prompt is generated again in the next build, under the newer version
(discard and requeue, as an asynchronous trainer with a staleness filter does). A prompt whose
groups are slow, usually a hard one with long answers, is then trained less often or never:
the bias tests/test_pipeline.py measures against the synchronous loop's distribution."""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import os
import pickle
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp

from frontier_rl.run import statefile


@dataclasses.dataclass
class Built:
    """One step's groups, the step they are for and the parameters' version that built them."""

    step: int
    version: int
    groups: list


def serving(engine) -> Callable | None:
    """How the pipeline has `engine` generate from the copy it builds under: an engine in this
    process is pointed at it (`ensure`); an external one keeps the weights it was synced to."""
    return None if engine.external else engine.ensure


class _Inline:
    """An executor that runs what it is given at once, on the caller's thread."""

    def submit(self, fn: Callable, *args) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args))
        except BaseException as e:  # raised by `result()`, as a thread's would be
            future.set_exception(e)
        return future

    def shutdown(self, wait: bool = True) -> None:
        pass


class Pipeline:
    """`build(step, params)` returns a step's groups under `params` (selector, engine);
    `after(groups)` gives the selector their outcomes (its `after_update`); `update(params,
    opt_state, groups, step, lag)` returns (params, opt_state, metrics, engine_diff);
    `publish(params, step)` hands the updated parameters to the context and the engine (on its
    sync schedule); `serve(params, version)`, for an engine in this process, has it generate
    from `params` (an external engine keeps the weights it was last synced to)."""

    def __init__(self, k: int, build: Callable, update: Callable, *,
                 after: Callable = lambda groups: None,
                 publish: Callable = lambda params, step: None,
                 serve: Callable | None = None, snapshot: Callable | None = None,
                 admission: str = "paced", late: Callable | None = None,
                 regenerate: Callable | None = None, overlap: bool = True):
        if k < 0:
            raise ValueError(f"staleness {k} is not >= 0")
        if admission not in ("paced", "discard"):
            raise ValueError(f"admission {admission!r} is not 'paced' or 'discard'")
        if admission == "discard" and not (k and late and regenerate):
            raise ValueError("admission 'discard' needs staleness >= 1, late(group) and "
                             "regenerate(groups, params)")
        self.k, self._build, self._update, self._serve = k, build, update, serve
        self.admission, self._late, self._regenerate = admission, late, regenerate
        self.requeued: list = []  # discard: the late groups whose prompts are generated again
        self.discarded = 0
        self._after, self._publish = after, publish
        self._snapshot = snapshot or (lambda p: jax.tree.map(jnp.copy, p))
        self.pending: collections.deque[Built] = collections.deque()
        # overlap=False runs each update on this thread before the build beside it: the same
        # calls on the same inputs (a build reads only its copy), for a host-side model of the
        # policy (sim/run.py) whose update and builds share one object
        self._pool = ((concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="update")
                       if overlap else _Inline()) if k else None)
        self.times: dict[str, float] = {}  # the last step's phases (k >= 1)

    def _make(self, step: int, params, version: int) -> Built:
        groups = self._build(step, params)
        if self.admission == "discard":  # the requeued prompts again, then drop the late
            again, self.requeued = self.requeued, []
            if again:
                groups = list(groups) + list(self._regenerate(again, params))
            is_late = [bool(self._late(g)) for g in groups]
            self.requeued = [g for g, x in zip(groups, is_late, strict=True) if x]
            self.discarded += len(self.requeued)
            groups = [g for g, x in zip(groups, is_late, strict=True) if not x]
        for g in groups:
            g.version = version
        return Built(step, version, groups)

    def run(self, step: int, params, opt_state, built: Callable = lambda: None,
            updated: Callable = lambda: None):
        """Step `step`: its groups and the update's result. `built()` is called once this
        step's building is done, `updated()` once its update is. With k >= 1 the groups of the
        k steps after it are built whether or not the run gets there, so where a run stops does
        not change what it computes (a resume with a larger rl.num_steps continues as one
        run)."""
        if not self.k:  # build, update, publish, feedback: the synchronous loop
            groups = self._make(step, params, step - 1).groups
            built()
            out = self._update(params, opt_state, groups, step, 0)
            updated()
            self._publish(out[0], step)
            self._after(groups)
            return groups, out
        t0 = time.perf_counter()
        behaviour = self._snapshot(params)  # what the engine reads while the update runs
        if self._serve is not None:
            self._serve(behaviour, step - 1)
        while len(self.pending) < self.k:  # the first steps
            self.pending.append(self._made(self._next(step), behaviour, step - 1))
        item = self.pending.popleft()
        if item.step != step:
            raise RuntimeError(f"the pipeline holds the groups of step {item.step}, not of "
                               f"step {step}")
        lag = step - 1 - item.version
        if not 0 <= lag <= self.k:
            raise RuntimeError(f"step {step}: groups of version {item.version} lag {lag} "
                               f"updates behind, more than rl.staleness={self.k}")
        t1 = time.perf_counter()
        future = self._pool.submit(self._timed, params, opt_state, item.groups, step, lag)
        try:
            self.pending.append(self._made(step + self.k, behaviour, step - 1))
            built()
            t2 = time.perf_counter()
        finally:
            out, update_s = future.result()  # an update's error is raised here
        t3 = time.perf_counter()
        updated()
        self._publish(out[0], step)
        self.times = {"perf/pipeline_lag": float(lag), "perf/pipeline_fill_time": t1 - t0,
                      "perf/pipeline_build_time": t2 - t1, "perf/pipeline_update_time": update_s,
                      "perf/pipeline_wait_time": t3 - t2,
                      "perf/pipeline_publish_time": time.perf_counter() - t3}
        if self.admission == "discard":
            self.times["perf/pipeline_discarded"] = float(self.discarded)
        return item.groups, out

    def _made(self, step: int, params, version: int) -> Built:
        """A build followed at once by the selector's feedback on it: the selector's calls come
        in the synchronous loop's order (build, feedback, build...), each on its own batch."""
        item = self._make(step, params, version)
        self._after(item.groups)
        return item

    def _timed(self, *args):
        t0 = time.perf_counter()
        out = self._update(*args)
        return out, time.perf_counter() - t0

    def _next(self, step: int) -> int:
        return self.pending[-1].step + 1 if self.pending else step

    def metrics(self) -> dict[str, float]:
        """The last step's lag and phase times (k >= 1; the synchronous loop records none)."""
        return dict(self.times)

    def state(self) -> bytes | None:
        """The groups in flight, for a checkpoint (None with k = 0: there are none)."""
        return pickle.dumps((list(self.pending), self.requeued, self.discarded)
                            ) if self.k else None

    def load_state(self, data: bytes) -> None:
        state = pickle.loads(data)  # a list: the groups in flight alone (paced, older runs)
        pending, self.requeued, self.discarded = (state if isinstance(state, tuple)
                                                  else (state, [], 0))
        self.pending = collections.deque(pending)

    def save(self, folder: str, step: int, kept: set[int]) -> None:
        """The groups in flight at `step` to FOLDER/<step>.pkl, written whole before the
        checkpoint that needs them; the files of checkpoints not `kept` are removed."""
        state = self.state()
        if state is None:
            return
        os.makedirs(folder, exist_ok=True)
        statefile.write_bytes(os.path.join(folder, f"{step}.pkl"), state)
        for name in os.listdir(folder):
            if name.endswith(".pkl") and name[:-4].isdigit() and int(name[:-4]) not in kept | {
                    step}:
                os.remove(os.path.join(folder, name))

    def load(self, folder: str, step: int) -> bool:
        """The groups in flight saved at `step`; False when none were (nothing loaded)."""
        path = os.path.join(folder, f"{step}.pkl")
        if not self.k or not os.path.exists(path):
            return not self.k
        with open(path, "rb") as f:
            self.load_state(f.read())
        return True

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
