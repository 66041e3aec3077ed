"""rl.staleness (rollout/pipeline.py): the order of builds and updates, the lag bound, the
groups' versions, and a resume from the groups in flight.

The pipeline is driven here by a stand-in trainer whose parameters are a version number (an
update adds one) and a build that records under which version it ran; their sleeps are random,
so a result that depended on which thread came first would differ between runs."""

import random
import threading
import time

import numpy as np
import pytest

from frontier_rl.rollout.pipeline import Pipeline
from frontier_rl.selection.base import Group

OVERLAP_WAIT = 10.0


class Stand:
    """A build that returns one group per step, recording (step, version it was built under),
    and an update that returns version + 1, recording (step, lag)."""

    def __init__(self, seed: int, slow_build: float = 0.0, slow_update: float = 0.0,
                 prove_overlap: bool = False):
        self.rng = random.Random(seed)
        # prove_overlap: until a build has begun during an update, each update waits (up to
        # OVERLAP_WAIT s) for one to begin, so an overlap is seen whatever the machine's load;
        # a pipeline that never builds during an update never gets one
        self.prove_overlap, self.began = prove_overlap, threading.Event()
        self.slow_build, self.slow_update = slow_build, slow_update
        self.builds: list[tuple[int, int]] = []
        self.calls: list[tuple[str, int]] = []  # the selector's calls, in order
        self.updates: list[tuple[int, int, int]] = []
        self.lock = threading.Lock()
        self.updating = False
        self.overlapped = 0

    def build(self, step: int, params: int) -> list:
        with self.lock:
            if self.updating:
                self.overlapped += 1
            self.began.set()
        time.sleep(self.rng.random() * self.slow_build)
        self.builds.append((step, params))
        self.calls.append(("build", step))
        return [Group(index=step, prompt_id=str(step), outcomes=np.ones(2, np.int8),
                      rewards=np.ones(2, np.float32), lengths=np.ones(2, np.int32),
                      mean_entropy=np.zeros(2, np.float32))]

    def after(self, groups) -> None:
        self.calls.append(("after", groups[0].index))

    def update(self, params: int, opt_state, groups, step: int, lag: int):
        with self.lock:
            self.updating = True
            self.began.clear()
        if self.prove_overlap and not self.overlapped:
            self.began.wait(OVERLAP_WAIT)
        time.sleep(self.rng.random() * self.slow_update)
        self.updating = False
        self.updates.append((step, params, lag))
        return params + 1, opt_state, {}, None


def _run(k: int, steps: int, stand: Stand, pipe: Pipeline | None = None, start: int = 0):
    pipe = pipe or Pipeline(k, stand.build, stand.update, after=stand.after,
                            snapshot=lambda p: p)
    params, trained = start, []
    for step in range(start + 1, steps + 1):
        groups, (params, _, _, _) = pipe.run(step, params, None)
        trained.append([(g.index, g.version) for g in groups])
    pipe.close()
    return trained, params


def test_staleness_zero_builds_then_updates_under_the_same_parameters():
    stand = Stand(0)
    trained, params = _run(0, 5, stand)
    assert params == 5
    assert stand.builds == [(s, s - 1) for s in range(1, 6)]  # under version s - 1
    assert [u[2] for u in stand.updates] == [0] * 5
    assert trained == [[(s, s - 1)] for s in range(1, 6)]
    assert stand.calls == [c for s in range(1, 6) for c in (("build", s), ("after", s))]


def test_staleness_zero_keeps_the_loops_order_of_calls():
    """build, built(), update, updated(), publish, feedback: the synchronous loop's order."""
    order = []
    pipe = Pipeline(0, lambda s, p: order.append("build") or [],
                    lambda p, o, g, s, lag: order.append("update") or (p + 1, o, {}, None),
                    after=lambda g: order.append("after"),
                    publish=lambda p, s: order.append(f"publish {p}"))
    pipe.run(1, 0, None, built=lambda: order.append("built"),
             updated=lambda: order.append("updated"))
    assert order == ["build", "built", "update", "updated", "publish 1", "after"]


@pytest.mark.parametrize("k", [1, 2, 3])
def test_the_lag_is_k_once_full_never_more_and_every_group_carries_its_version(k):
    """Slow builds and updates in random order: step s's groups were built under version
    max(0, s - 1 - k), every update is told its lag, and the builds overlap the updates."""
    stand = Stand(k, slow_build=0.02, slow_update=0.02, prove_overlap=True)
    trained, params = _run(k, 10, stand)
    assert params == 10
    want = {s: max(0, s - 1 - k) for s in range(1, 10 + k + 1)}
    assert trained == [[(s, want[s])] for s in range(1, 11)]
    assert [(step, lag) for step, _, lag in stand.updates] == [
        (s, s - 1 - want[s]) for s in range(1, 11)]
    assert max(lag for *_, lag in stand.updates) == k
    assert [s for s, _ in stand.builds] == list(range(1, 10 + k + 1))  # k beyond the last
    assert stand.overlapped > 0
    # the selector's calls in the synchronous loop's order: each build, then its feedback
    assert stand.calls == [c for s in range(1, 10 + k + 1) for c in (("build", s), ("after", s))]


def test_the_order_does_not_depend_on_timing():
    """The builds' versions and the updates' inputs are the same with any sleeps."""
    runs = []
    for seed in range(3):
        stand = Stand(seed, slow_build=0.01 * seed, slow_update=0.03 * (2 - seed))
        runs.append((_run(2, 8, stand)[0], stand.builds, stand.updates))
    assert runs[0] == runs[1] == runs[2]


def test_a_resume_from_the_groups_in_flight_equals_the_uninterrupted_run():
    """State after step 4 (the groups of steps 5 and 6 in flight) loaded into a new pipeline:
    steps 5-9 train what the uninterrupted run trains."""
    whole, _ = _run(2, 9, Stand(1))
    stand = Stand(1)
    first = Pipeline(2, stand.build, stand.update, after=stand.after, snapshot=lambda p: p)
    head, params = _run(2, 4, stand, first)
    assert [b.step for b in first.pending] == [5, 6]
    second_stand = Stand(1)
    second = Pipeline(2, second_stand.build, second_stand.update, after=second_stand.after,
                      snapshot=lambda p: p)
    second.load_state(first.state())
    tail, _ = _run(2, 9, second_stand, second, start=params)
    assert head + tail == whole
    assert [s for s, _ in second_stand.builds] == [7, 8, 9, 10, 11]  # none built again


def test_an_update_error_is_raised_after_the_build_and_nothing_is_left_running():
    stand = Stand(0)

    def failing(params, opt_state, groups, step, lag):
        raise FloatingPointError(f"step {step} diverged")

    pipe = Pipeline(1, stand.build, failing, snapshot=lambda p: p)
    with pytest.raises(FloatingPointError, match="step 1 diverged"):
        pipe.run(1, 0, None)
    assert [s for s, _ in stand.builds] == [1, 2]
    pipe.close()


def test_the_engine_in_this_process_is_served_the_copy_the_build_reads():
    served, stand = [], Stand(0)
    pipe = Pipeline(1, stand.build, stand.update, serve=lambda p, v: served.append((p, v)),
                    snapshot=lambda p: ("copy", p))
    pipe.run(1, 0, None)
    pipe.run(2, 1, None)
    pipe.close()
    assert served == [(("copy", 0), 0), (("copy", 1), 1)]
    assert stand.builds == [(1, ("copy", 0)), (2, ("copy", 0)), (3, ("copy", 1))]


# ----------------------------------------------------------------------------- in a run


def _smoke(**overrides):
    from frontier_rl import config_lib

    c = config_lib.shrink_for_smoke(config_lib.default_config())
    c.log.progress = False
    c.log.tensorboard = False
    c.eval.every = 0
    return config_lib.validate(config_lib.set_fields(c, {"rl.staleness": 1, **overrides}))


def test_a_stale_run_trains_every_group_with_its_version_and_behaviour_log_probs(
        tmp_path, monkeypatch):
    """rl.staleness=1 in train.run: each update gets groups generated one version earlier
    (after the first), with the sampler's log-probs, and the trainer recomputes the old
    policy's (the engine's are then the behaviour policy's)."""
    from frontier_rl import train
    from frontier_rl.rl import update
    from frontier_rl.run import metrics

    seen = []
    original = update.Updater.update

    def spy(self, params, opt_state, groups, step, lag=0):
        seen.append((step, lag, self.recompute_old, {g.version for g in groups},
                     all(g.logps is not None and np.isfinite(g.logps).all() for g in groups)))
        return original(self, params, opt_state, groups, step, lag)

    monkeypatch.setattr(update.Updater, "update", spy)
    train.run(_smoke(), str(tmp_path))
    assert [s[:4] for s in seen] == [(1, 0, True, {0}), (2, 1, True, {0}), (3, 1, True, {1}),
                                     (4, 1, True, {2})]
    assert all(s[4] for s in seen)
    records = metrics.read(str(tmp_path / "metrics.jsonl"))
    assert [r.get("perf/pipeline_lag") for r in records[1:]] == [0.0, 1.0, 1.0, 1.0]
    # the groups of step 5 were made (and counted) though the run ended at step 4
    assert records[-1]["rollout/total"] == 5 * 8 * 8


def test_a_rollout_mesh_generates_on_its_own_devices_while_the_trainer_keeps_the_rest(
        tmp_path, monkeypatch):
    """mesh.rollout=4 of the suite's 8 devices: every generation and prompt-entropy call reads
    parameters placed on the last four devices only, every update's parameters stay on the
    first four, and the run trains each group with its version as the shared mesh does."""
    import jax

    from frontier_rl import train
    from frontier_rl.rl import update
    from frontier_rl.rollout import context as context_lib
    from frontier_rl.rollout import sampler as sampler_lib
    from frontier_rl.run import metrics

    devices = jax.devices()
    meshes, built, updated = [], [], []
    sample, begin, upd = (sampler_lib.Sampler.sample, context_lib.PolicyContext.begin_step,
                          update.Updater.update)

    def on_devices(tree) -> set:
        return set().union(*(x.sharding.device_set for x in jax.tree.leaves(tree)))

    def spy_sample(self, *args, **kwargs):
        meshes.append(set(self.mesh.devices.flat))
        return sample(self, *args, **kwargs)

    def spy_begin(self, step, params):
        built.append(on_devices(params))
        return begin(self, step, params)

    def spy_update(self, params, opt_state, groups, step, lag=0):
        updated.append((on_devices(params), {g.version for g in groups}))
        return upd(self, params, opt_state, groups, step, lag)

    monkeypatch.setattr(context_lib.PolicyContext, "begin_step", spy_begin)
    monkeypatch.setattr(sampler_lib.Sampler, "sample", spy_sample)
    monkeypatch.setattr(update.Updater, "update", spy_update)
    train.run(_smoke(**{"mesh.rollout": 4, "selector.name": "hive"}), str(tmp_path))
    rollout, trainer = set(devices[4:]), set(devices[:4])
    assert meshes and all(m == rollout for m in meshes)
    assert all(b == rollout for b in built[-5:])  # the builds of steps 1-5, each a copy
    assert [u[1] for u in updated] == [{0}, {0}, {1}, {2}]
    assert all(on == trainer for on, _ in updated)
    records = metrics.read(str(tmp_path / "metrics.jsonl"))
    assert [r.get("perf/pipeline_lag") for r in records[1:]] == [0.0, 1.0, 1.0, 1.0]
    assert all(np.isfinite(r["train/pg_loss"]) for r in records[1:])


@pytest.mark.parametrize("fields,bad", [
    ({"mesh.rollout": 2, "rl.staleness": 0}, "rl.staleness"),
    ({"mesh.rollout": 3, "mesh.rollout_model": 2}, "mesh.rollout_model"),
    ({"mesh.rollout": 2, "rollout.engine": "sglang", "rollout.sglang.url": "http://127.0.0.1:1"},
     "rollout.engine"),
    ({"mesh.rollout": -1}, "mesh.rollout")])
def test_a_rollout_mesh_that_cannot_work_is_refused_naming_the_field(fields, bad):
    from frontier_rl.config_lib import ConfigError

    with pytest.raises(ConfigError, match=bad.replace(".", r"\.")):
        _smoke(**fields)


@pytest.mark.slow
def test_sigterm_mid_pipeline_then_resume_equals_the_uninterrupted_run(tmp_path, monkeypatch):
    """SIGTERM during step 1 (its group of step 2 in flight): the run checkpoints step 1 with
    that group; the rerun resumes and every record equals an uninterrupted run's."""
    import os
    import signal

    from frontier_rl import train
    from frontier_rl.run import metrics

    whole = str(tmp_path / "whole")
    train.run(_smoke(), whole)
    cut = str(tmp_path / "cut")
    write = metrics.MetricWriter.write

    def write_then_sigterm(self, step, record):
        write(self, step, record)
        if step == 1:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(metrics.MetricWriter, "write", write_then_sigterm)
    train.run(_smoke(), cut)
    monkeypatch.setattr(metrics.MetricWriter, "write", write)
    assert os.path.exists(os.path.join(cut, "pipeline", "1.pkl"))
    assert [r["step"] for r in metrics.read(os.path.join(cut, "metrics.jsonl"))] == [0, 1]
    train.run(_smoke(), cut)

    def computed(path):
        return [{k: v for k, v in r.items() if not k.startswith("perf/")
                 and not k.endswith(("_ms", "_s"))} for r in metrics.read(path)]

    assert computed(os.path.join(cut, "metrics.jsonl")) == computed(
        os.path.join(whole, "metrics.jsonl"))


# ------------------------------------------------- paced admission against discard and requeue


class Slow:
    """An engine whose latency grows with a prompt's difficulty, behind a selector that draws
    BATCH prompts a step uniformly (seeded by the step, as a run's selector is): prompt i has
    difficulty i / N, and its group takes int(3 * difficulty) updates to generate, so with
    k = 1 the hardest third outlasts the pipeline's depth. The build sleeps in proportion to
    its slowest group: paced admission waits for it."""

    N, BATCH = 60, 6

    def __init__(self):
        self.fed: list[int] = []  # the prompts whose outcomes reached the selector

    @classmethod
    def difficulty(cls, index: int) -> float:
        return index / cls.N

    def _group(self, index: int) -> Group:
        return Group(index=index, prompt_id=str(index), outcomes=np.array([1, 0], np.int8),
                     rewards=np.zeros(2, np.float32), lengths=np.ones(2, np.int32),
                     mean_entropy=np.zeros(2, np.float32))

    def build(self, step: int, params: int) -> list:
        picks = np.random.default_rng(step).choice(self.N, self.BATCH, replace=False)
        time.sleep(0.002 * max(self.updates_to_make(int(i)) for i in picks))
        return [self._group(int(i)) for i in picks]

    def regenerate(self, groups, params) -> list:
        return [self._group(g.index) for g in groups]

    @classmethod
    def updates_to_make(cls, index: int) -> int:
        return int(3 * cls.difficulty(index))

    def after(self, groups) -> None:
        self.fed.extend(g.index for g in groups)

    @staticmethod
    def update(params, opt_state, groups, step, lag):
        return params + 1, opt_state, {}, None


def _trained(k: int, admission: str, steps: int = 60):
    slow = Slow()
    late = (lambda g: Slow.updates_to_make(g.index) > k) if admission == "discard" else None
    pipe = Pipeline(k, slow.build, slow.update, after=slow.after, snapshot=lambda p: p,
                    admission=admission, late=late,
                    regenerate=slow.regenerate if admission == "discard" else None)
    params, trained, lags = 0, [], []
    for step in range(1, steps + 1):
        groups, (params, *_) = pipe.run(step, params, None)
        trained.extend(g.index for g in groups)
        lags.extend(step - 1 - g.version for g in groups)
    pipe.close()
    return trained, lags, slow.fed, pipe.discarded


def test_paced_admission_trains_the_synchronous_loops_prompts_and_discarding_does_not():
    """With an engine whose latency grows with difficulty, k = 1: paced admission trains
    exactly the prompts the synchronous loop trains (the same difficulty distribution); discard
    and requeue drops every group of the hardest third, again each time it is requeued, so the
    trained distribution loses its top third and its mean falls."""
    sync, _, _, _ = _trained(0, "paced")
    paced, paced_lags, _, _ = _trained(1, "paced")
    dropped, dropped_lags, fed, discarded = _trained(1, "discard")

    def shares(indices):  # difficulty thirds
        counts = np.bincount([Slow.updates_to_make(i) for i in indices], minlength=3)
        return counts / counts.sum()

    assert paced == sync  # same prompts, same order: the distribution is sync's
    assert max(paced_lags) == 1 and max(dropped_lags) <= 1
    assert shares(sync)[2] > 0.25  # the hardest third is a third of what sync trains
    assert shares(dropped)[2] == 0.0  # and never trained under discard
    assert discarded > len(sync) / 4
    assert np.mean([Slow.difficulty(i) for i in dropped]) < np.mean(
        [Slow.difficulty(i) for i in sync]) - 0.1
    assert all(Slow.updates_to_make(i) <= 1 for i in fed)  # the dropped never reach it


def test_a_discarding_pipeline_needs_a_late_rule_and_staleness():
    with pytest.raises(ValueError, match="discard"):
        Pipeline(0, Slow().build, Slow.update, admission="discard", late=lambda g: False,
                 regenerate=lambda g, p: g)
    with pytest.raises(ValueError, match="admission 'drop'"):
        Pipeline(1, Slow().build, Slow.update, admission="drop")


def test_a_discarding_pipeline_resumes_with_its_requeued_prompts():
    def run(pipe, start, stop, params):
        out = []
        for step in range(start, stop + 1):
            groups, (params, *_) = pipe.run(step, params, None)
            out.extend(g.index for g in groups)
        return out, params

    def make(slow):
        return Pipeline(1, slow.build, slow.update, snapshot=lambda p: p, admission="discard",
                        late=lambda g: Slow.updates_to_make(g.index) > 1,
                        regenerate=slow.regenerate)

    whole, _ = run(make(Slow()), 1, 12, 0)
    first = make(Slow())
    head, params = run(first, 1, 5, 0)
    assert first.requeued  # late groups waiting to be generated again
    second = make(Slow())
    second.load_state(first.state())
    tail, _ = run(second, 6, 12, params)
    assert head + tail == whole and second.discarded > first.discarded


# ------------------------------------------ every selector under staleness (synthetic learner)


def _same(a, b) -> bool:
    """Deep equality of state dictionaries (arrays compared by value, NaN equal to NaN)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=np.asarray(a).dtype.kind
                              == "f")
    return a == b or (a != a and b != b)


def _sim_config(name: str, k: int):
    from frontier_rl.sim import run

    c = run.base_config()
    c.selector.name = name
    c.rl.batch_size, c.rl.staleness = 32, k
    c.sim.num_prompts, c.sim.steps, c.sim.eval_every, c.sim.eval_per_band = 2000, 10, 5, 64
    c.sim.eta_skill = 1.0  # a policy that moves visibly in 10 steps: a stale build differs
    return c


def _replay(config, steps: int):
    """The stale run written out by hand, with no snapshot: the build of step s + k is made
    when the learner has made s - 1 updates (before update s), so it reads the policy of version
    s - 1 = (s + k) - 1 - k as the learner is; the first k builds come before any update; each
    feedback follows its build at once. The pipeline instead updates first and builds from a
    snapshot, so the two agree only if every build reads the snapshot of its version."""
    from frontier_rl import selection
    from frontier_rl.sim import run

    k = config.rl.staleness
    ctx = run.make_context(config)
    selector = selection.make(config.selector.name, run._selector_config(config),
                              config.sim.num_prompts, config.seed)
    built, versions, updates = {}, {}, 0

    def build(s: int) -> None:
        ctx.begin_step(s)
        built[s] = selector.build_batch(ctx)
        selector.after_update(ctx, built[s])
        versions[s] = updates

    for s in range(1, k + 1):
        build(s)
    for s in range(1, steps + 1):
        build(s + k)
        ctx.update(built[s])
        updates += 1
    close = getattr(selector, "close", None)
    if close is not None:
        close()
    return selector, ctx, versions


SELECTORS = ["uniform", "oracle", "ds", "greso", "hive", "hive_v2", "heapa", "heapa_hive", "ps",
             "pcl", "mopps", "speed", "learnability", "prefilter", "reinforce_ada"]


def test_every_registered_selector_is_checked_under_staleness():
    from frontier_rl import selection

    assert sorted(selection.names()) == sorted(SELECTORS)


@pytest.mark.parametrize("name", SELECTORS)
def test_each_selectors_state_after_stale_updates_is_the_version_aware_replays(name,
                                                                              monkeypatch):
    """rl.staleness = 2 on the synthetic learner (sim/run.py through the pipeline, each update
    on the main thread before the build beside it): each selector's state and the learner
    equal the hand-written replay's, and every build's version is max(0, s - 3); staleness
    changes the run against the synchronous one."""
    from frontier_rl import selection
    from frontier_rl.sim import run

    made = []
    make = selection.make
    monkeypatch.setattr(selection, "make", lambda *a: made.append(make(*a)) or made[-1])
    res = run.run_sim(_sim_config(name, 2))
    monkeypatch.setattr(selection, "make", make)
    assert res["steps_run"] == 10, res["stopped"]
    selector, ctx, versions = _replay(_sim_config(name, 2), 10)
    assert versions == {s: max(0, s - 3) for s in range(1, 13)}
    assert _same(made[0].state_dict(), selector.state_dict())
    assert res["final"]["skill"] == ctx.skill and res["counters"] == ctx.counters
    synchronous = run.run_sim(_sim_config(name, 0))
    assert synchronous["counters"] != res["counters"] or (
        synchronous["final"]["skill"] != res["final"]["skill"])
