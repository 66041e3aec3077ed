"""The heapa / ps selectors end to end on a scripted context: config validation, augmentation
parsing, statistics keyed by record id, recycling with lineage refresh, ablations, teacher
faults during training, and checkpoint round trips."""

import copy
import importlib.util
import json
import os
import time

import numpy as np
import pytest
from heapa_testlib import ArithCtx, run_steps

from frontier_rl import config_lib, selection
from frontier_rl.selection.heapa import augment
from frontier_rl.selection.heapa.pool import ARCHIVE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make(name="heapa", n=120, **over):
    cfg = dict(selection.defaults(name))
    cfg.update({"teacher_workers": 0, **over})
    return selection.make(name, {name: cfg}, n, 0)


# ----------------------------------------------------------------------------- config


@pytest.mark.parametrize("field,value,message", [
    ("alpha", 1.3, r"selector.heapa.alpha=1.3 is outside \[0.05, 0.95\]"),
    ("alpha", 0.01, r"selector.heapa.alpha=0.01 is outside \[0.05, 0.95\]"),
    ("sampling", "top", r"selector.heapa.sampling='top' is not one of"),
    ("d_min", 1.5, r"selector.heapa.d_min=1.5 is outside \[0.01, 1.0\]"),
    ("n_aug", 0, r"selector.heapa.n_aug=0 is outside \[1, 64\]"),
    ("capacity", 0, r"selector.heapa.capacity=0 is outside \[1, inf\]"),
    ("refresh", "tree", r"selector.heapa.refresh='tree' is not one of"),
    ("prompt_template", "Q:", r"must contain '\{prompt\}'"),
])
def test_validation_names_field_value_and_range(field, value, message):
    c = config_lib.default_config()
    c.selector.name = "heapa"
    c.selector.heapa[field] = value
    with pytest.raises(config_lib.ConfigError, match=message):
        config_lib.validate(c)


def test_ps_validation_and_http_teacher_needs_a_url():
    with pytest.raises(ValueError, match=r"selector.ps.ps_temperature=0.0 is outside \(0.0"):
        make("ps", ps_temperature=0.0)
    with pytest.raises(ValueError, match="selector.heapa.teacher_url=''"):
        make(teacher="http")


def load_config(arg):
    spec = importlib.util.spec_from_file_location("c", os.path.join(ROOT, "configs",
                                                                    "arith_heapa.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.get_config(arg)


@pytest.mark.parametrize("arg,check", [
    ("", lambda c: c.selector.name == "heapa" and c.selector.heapa.refresh == "path"),
    ("childagg", lambda c: c.selector.heapa.refresh == "child"),
    ("heap_only", lambda c: not c.selector.heapa.augment),
    ("aug_only", lambda c: c.selector.heapa.sampling == "uniform"),
    ("ps", lambda c: c.selector.name == "ps" and not c.selector.ps.augment),
    ("ps_aug,smoke", lambda c: c.selector.ps.augment and c.rl.num_steps == 4),
    ("dapo", lambda c: c.rl.loss == "dapo" and c.selector.heapa.filter_groups),
])
def test_config_variants(arg, check):
    assert check(load_config(arg))


def test_config_rejects_unknown_arg():
    with pytest.raises(ValueError, match="unknown arg"):
        load_config("huge")


# ----------------------------------------------------------------------------- augmentation


def test_arith_prefixes_and_parsing():
    rng = np.random.default_rng(0)
    assert augment.arith_prefix("73+5+218=", "drop_last", rng) == "73+5+"
    assert augment.arith_prefix("73+5+218=", "extend", rng) == "73+5+218+"
    assert {augment.arith_prefix("73+5=", "mixed", rng) for _ in range(50)} == {"73+", "73+5+"}
    assert augment.parse_arith("73+5+", "12", 8) == ("73+5+12=", "")
    assert augment.parse_arith("73+5+", "1+2=999", 8) == ("73+5+1+2=", "")
    assert augment.parse_arith("73+5+", "", 8) == (None, "empty")
    assert augment.parse_arith("73+5+", "+4", 8) == (None, "ill_formed")
    assert augment.parse_arith("73+5+", "12345678", 8) == (None, "token_cap")
    assert augment.arith_difficulty("73+5+218=", "73+5+218+4=") == pytest.approx(7 / 6)


def test_estimate_and_clamp():
    assert augment.clamp_d(2.0, 0.75, 1.33) == 1.33
    assert augment.clamp_d(float("nan"), 0.75, 1.33) == 1.0
    assert augment.estimate(0.5, 1.25) == pytest.approx(0.4)
    assert augment.estimate(-0.5, 1.25) == pytest.approx(-0.625)
    assert augment.estimate(None, 1.0) == 0.5  # fallback
    assert augment.estimate(-1.0, 1.33) == -1.0  # clipped


def test_template_parsing():
    gen = " A car goes 150 km in 3 h; how far in 7 h?\n<DIFFICULTY> 1.05\n<END>"
    assert augment.parse_template(gen) == ("A car goes 150 km in 3 h; how far in 7 h?", 1.05)
    gen = "<ORIGINAL> old\n<NEW> new problem\n<DIFFICULTY> harder, about 1.2"
    assert augment.parse_template(gen) == ("new problem", 1.2)
    assert augment.parse_template('new one {"difficulty": 0.9}') == (
        'new one {"difficulty": 0.9}', 0.9)
    assert augment.parse_template("# New Problem # X has 3 apples # Difficulty # 1.1") == (
        "X has 3 apples", 1.1)
    assert augment.parse_template("Compute 3 + 4.")[1] is None  # no bare number from the text
    assert augment.unwrap("Q: what?\nBox it.", "Q: {prompt}\nBox it.") == "what?"
    assert "<ORIGINAL> what?\n<NEW>" in augment.TEMPLATE.format(original="what?")


# ----------------------------------------------------------------------------- end to end


def test_heapa_trains_on_augmented_prompts_and_keys_stats_by_record_id():
    sel = make(recycle_archive_max=40)
    ctx = ArithCtx(120)
    rejected = 0
    for step in range(1, 41):
        ctx.step = step
        groups = sel.build_batch(ctx)
        assert len(groups) == ctx.batch_size
        for g in groups:  # the statistic of each record is the mean of its own group
            rec = sel.pool.records[g.prompt_id]
            assert rec.loc == ARCHIVE and rec.step == step
            assert rec.stat == pytest.approx(float(g.rewards.mean()))
        sel.after_update(ctx, groups)
        sel.pool.check()
        m = sel.metrics()
        rejected += sum(m[f"reject_{r}"] for r in ("empty", "ill_formed", "token_cap"))
    assert ctx.added > 0 and sel.next_rid == ctx.added + len(
        [r for r in sel.pool.records.values() if r.aug and r.index < 0])
    aug_ids = {p.id for p in ctx.prompts if p.id.startswith("aug/")}
    assert any(i in aug_ids for batch in ctx.rolled for i in
               (ctx.prompts[j].id for j in batch))
    assert sel.counters["refreshes"] >= 1 and sel.pool.counters["recycles"] >= 1
    assert sel.lineage.num_edges > 0
    for key in ("cold", "low", "high", "archive", "boundary", "aug_candidates", "aug_accepted",
                "reject_token_cap", "reject_filter", "teacher_queue", "aug_share",
                "aug_reward", "time_ms"):
        assert key in m, key
    assert rejected > 0  # the scripted policy writes some junk, rejected with a reason


def test_augmented_children_carry_parent_difficulty_and_estimate():
    sel = make(aug_entry="heap")
    ctx = ArithCtx(60)
    run_steps(sel, ctx, 3)
    kids = [r for r in sel.pool.records.values() if r.aug]
    assert kids
    for r in kids:
        assert r.parent in sel.pool.records and r.rid in sel.lineage.children[r.parent]
        assert 0.75 <= r.d <= 1.33
        assert r.est is not None and -1 <= r.est <= 1
        if r.loc != ARCHIVE:
            assert r.stat == r.est  # heap entry at the estimate (the code's behaviour)


def test_sampled_statistics_are_summarised_once_the_cold_queue_drains():
    sel = make(augment=False)
    ctx = ArithCtx(40)
    run_steps(sel, ctx, 6)  # 5 steps of cold seeds, then boundary draws
    before = {rid: r.stat for rid, r in sel.pool.records.items()}
    (batch,) = run_steps(sel, ctx, 1, start=7)
    m = sel.metrics()
    assert m["sampled_cold"] == 0 and m["sampled_boundary"] == ctx.batch_size
    drawn = np.array([before[rid] for rid in batch])  # the statistics they were drawn with
    for q in (10, 25, 50, 75, 90):
        assert m[f"sampled_stat_q{q}"] == pytest.approx(np.quantile(drawn, q / 100))
    assert m["sampled_stat_mean"] == pytest.approx(drawn.mean())
    assert m["boundary_low"] <= m["boundary_high"]


def test_refresh_every_k_steps_updates_archived_parents():
    sel = make(refresh_every=2, refresh="child", recycle_archive_max=0)
    ctx = ArithCtx(60)
    run_steps(sel, ctx, 3)
    assert sel.counters["refreshes"] == 1  # step 2 only; recycling is off
    before = {rid: sel.pool.records[rid].stat for rid in sel.pool.archive}
    run_steps(sel, ctx, 1, start=4)
    assert sel.counters["refreshes"] == 2
    parents = [rid for rid in before if rid in sel.lineage.children
               and sel.pool.records[rid].loc == ARCHIVE]
    assert parents and any(sel.pool.records[rid].stat != before[rid] for rid in parents)


def test_pm1_reward_scheme():
    sel = make(reward_scheme="pm1")
    ctx = ArithCtx(40)
    ctx.step = 1
    groups = sel.build_batch(ctx)
    for g in groups:
        expect = np.where(g.outcomes == 1, 1.0, -1.0).mean()
        assert sel.pool.records[g.prompt_id].stat == pytest.approx(expect)


def test_heap_only_never_generates_and_aug_only_samples_uniformly():
    sel = make(augment=False, recycle_archive_max=16)
    ctx = ArithCtx(40)
    run_steps(sel, ctx, 12)
    assert ctx.generated == 0 and ctx.added == 0
    assert sel.metrics()["sampled_boundary"] > 0
    # children enter the heaps, so scored records are drawn once the 40 seeds have left the
    # cold queue (5 steps of 8)
    sel = make(sampling="uniform", recycle_archive_max=16, aug_entry="heap")
    ctx = ArithCtx(40)
    run_steps(sel, ctx, 12)
    assert ctx.generated > 0 and sel.pool.counters["recycles"] >= 1
    mech = sel.mechanisms()
    assert mech["cold_draws"] == 40 and mech["uniform_draws"] == 7 * 8
    assert "boundary_draws" not in mech and "boundary_selective" not in mech
    # the pool held more scored records than each draw: every uniform draw chose
    assert mech["uniform_selective"] == mech["uniform_draws"]


@pytest.mark.parametrize("augment_on", [False, True])
def test_prioritized_sampling(augment_on):
    sel = make("ps", n=40, augment=augment_on, aug_entry="heap")
    ctx = ArithCtx(40)
    run_steps(sel, ctx, 12)
    sel.pool.check()
    m = sel.metrics()
    assert m["cold"] + m["low"] == sel.pool.size
    assert (ctx.added > 0) == augment_on
    assert m["sampled_prioritized"] > 0  # the cold queue drained after 5 steps


def test_dapo_filter_keeps_informative_groups():
    sel = make(filter_groups=True, max_rounds=6)
    ctx = ArithCtx(200)
    ctx.step = 1
    groups = sel.build_batch(ctx)
    assert len(groups) <= ctx.batch_size
    assert all(not g.zero_variance for g in groups) or sel.counters["filter_short"]
    assert sel.metrics()["rounds"] >= 1
    rolled = sum(len(b) for b in ctx.rolled)
    assert len(sel.pool.archive) == rolled  # every rolled-out group is archived


def test_training_continues_when_the_teacher_is_down():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sel = make(aug_format="template", teacher="http", teacher_url=f"http://127.0.0.1:{port}",
               teacher_workers=2, teacher_timeout_s=0.2, teacher_backoff_s=0.01)
    ctx = ArithCtx(60, junk=0.0)
    run_steps(sel, ctx, 3)
    deadline = time.monotonic() + 30  # the calls fail in the background, however loaded
    while sel.teacher.counters["fault_connection_error"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    run_steps(sel, ctx, 2, start=4)
    sel.close()
    assert sel.teacher.counters["fault_connection_error"] > 0
    assert sel.metrics()["teacher_faults"] > 0 and ctx.added == 0


def test_state_dict_round_trip_gives_an_identical_sampler():
    sel = make(recycle_archive_max=24, capacity=130)
    ctx = ArithCtx(120)
    run_steps(sel, ctx, 25)
    state = json.loads(json.dumps(sel.state_dict()))
    twin = make(recycle_archive_max=24, capacity=130)
    twin.load_state_dict(state)
    assert twin.state_dict() == state
    assert twin.lineage.children == sel.lineage.children
    ctx2 = copy.deepcopy(ctx)
    assert run_steps(sel, ctx, 15, start=26) == run_steps(twin, ctx2, 15, start=26)
    assert sel.state_dict() == twin.state_dict()
    with pytest.raises(ValueError, match="'heapa' selector state"):
        make("ps").load_state_dict(state)


def test_resume_re_adds_augmented_prompts_to_a_fresh_context():
    sel = make(aug_entry="heap")
    ctx = ArithCtx(60)
    run_steps(sel, ctx, 6)
    state = json.loads(json.dumps(sel.state_dict()))
    twin = make(aug_entry="heap")
    twin.load_state_dict(state)
    fresh = ArithCtx(60)  # the resumed trainer's context knows only the task's prompts
    run_steps(twin, fresh, 8, start=7)
    assert fresh.added > 0  # augmented records were registered again by id


def test_runs_on_the_shared_scripted_context():
    from frontier_rl.selection.scripted import ScriptedContext

    ctx = ScriptedContext(np.linspace(0.05, 0.95, 300), batch_size=16, group_size=4, seed=0)
    sel = make(n=300, recycle_archive_max=64)
    for step in range(1, 31):
        ctx.begin_step(step)
        groups = sel.build_batch(ctx)
        assert len(groups) == 16
        sel.after_update(ctx, groups)
    sel.pool.check()
    assert len(ctx.extra_prompts) > 0


def test_template_path_with_an_http_teacher():
    import http.server
    import threading

    from frontier_rl import tasks

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            gen = body["messages"][1]["content"].split("GENERATION:\n", 1)[1].split("\n", 1)[0]
            clean = f"{gen.strip() or '7'}+1="  # an arith problem, so ArithCtx can check it
            reply = {"clean": clean, "solvable": True, "answer": tasks.solve(clean)}
            payload = json.dumps({"choices": [{"message": {"content": json.dumps(reply)}}]})
            self.send_response(200)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload.encode())

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    try:
        host, port = srv.server_address
        sel = make(aug_format="template", teacher="http", teacher_url=f"http://{host}:{port}",
                   prompt_template="{prompt}", aug_entry="heap")
        ctx = ArithCtx(24, junk=0.0)
        run_steps(sel, ctx, 6)  # 3 steps of cold seeds, then the heaps hold the children
    finally:
        srv.shutdown()
        srv.server_close()
    kids = [r for r in sel.pool.records.values() if r.aug]
    assert kids and all(r.answer == tasks.solve(r.text) for r in kids)
    assert sel.teacher.counters["accepted"] >= len(kids)
    assert all(r.text == f"{r.text[:-3]}+1=" for r in kids)  # the teacher's clean question
    assert ctx.added > 0  # rolled out through ctx.add_prompts


# ----------------------------------------------------------------------------- regressions


def test_dapo_rounds_at_capacity_survive_evicting_this_steps_records():
    """filter_groups at capacity: round 2's recycling evicts records rolled out in round 1 (the
    batch's own prompts 6, 7); their groups are still trained, counted and augmented."""
    from frontier_rl.selection.scripted import ScriptedContext

    class Ctx(ScriptedContext):
        def generate(self, texts, **kw):  # every child: its prefix and a "7" (well formed)
            super().generate(texts, **kw)
            return ["7"] * len(texts)

    mixed, low, wrong = [1, 1, 0, 0], [1, -1, -1, -1], [0, 0, 0, 0]
    script = {0: [mixed], 1: [mixed], 2: [mixed], 3: [mixed], 4: [wrong], 5: [wrong],
              6: [low], 7: [low]}  # stats 0.5 (0-3), 0 (4, 5), -0.5 (6, 7)
    ctx = Ctx(np.full(8, 0.5), batch_size=4, group_size=4, script=script, new_prompt_p=0.5)
    sel = make(n=8, capacity=8, shuffle_seeds=False, filter_groups=True, max_rounds=2,
               recycle_archive_max=8, recycle_chunk=0, aug_require_capacity=False,
               reverse_digits=False)  # the teacher accepts operands ending in 0
    ctx.begin_step(1)
    groups = sel.build_batch(ctx)  # 0..3, all informative: one round
    assert [g.index for g in groups] == [0, 1, 2, 3]
    sel.after_update(ctx, groups)  # 4 children for the teacher
    ctx.begin_step(2)
    groups = sel.build_batch(ctx)  # children enter the cold queue; round 1 rolls out 4..7
    ids = [g.prompt_id for g in groups]
    # round 1 kept 6, 7; round 2 recycled the archive (8 records) into a pool of 4 children:
    # a full pool evicts the hardest, 4..7, then round 2 rolls out the 4 children
    assert ids[:2] == ["scripted/6", "scripted/7"] and len(ids) == 4
    assert all(f"scripted/{i}" not in sel.pool.records for i in range(4, 8))
    assert sel.pool.counters["evicted"] == 4
    n_aug = sum(i.startswith("aug/") for i in ids)
    assert sel.mechanisms()["children_trained"] == n_aug
    generated = ctx.counters["generated_texts"]
    sel.after_update(ctx, groups)  # augments all 8 prompts rolled out this step
    assert ctx.counters["generated_texts"] - generated == 8
    assert sel.metrics()["aug_share"] == n_aug / 4
    sel.pool.check()
    run_steps(sel, ctx, 3, start=3)


def test_metrics_read_the_teacher_counters_under_its_lock():
    """A worker thread adding a counter while metrics() reads them must not break it."""
    import collections
    import threading

    sel = make(n=40)
    ctx = ArithCtx(40)
    run_steps(sel, ctx, 1)
    teacher = sel.teacher

    class Busy(collections.Counter):
        def items(self):
            it = iter(super().items())
            first = next(it)

            def worker():  # as AsyncTeacher._finish: takes the lock, adds a fault key
                if teacher._cv.acquire(timeout=0.2):
                    try:
                        self[f"fault_new_{len(self)}"] += 1
                    finally:
                        teacher._cv.release()

            t = threading.Thread(target=worker)
            t.start()
            t.join()
            yield first
            yield from it

    teacher.counters = Busy({"fault_timeout": 1, "completed": 3})
    sel._finish_metrics()
    assert sel.metrics()["teacher_faults"] >= 1


def test_ps_honours_max_cold_frac():
    sel = make("ps", n=40, max_cold_frac=0.25)
    ctx = ArithCtx(40)
    run_steps(sel, ctx, 1)  # nothing scored yet: the whole batch is cold
    assert sel.metrics()["sampled_cold"] == 8
    run_steps(sel, ctx, 3, start=2)  # then at most ⌈0.25 · 8⌉ = 2 cold, 6 by priority
    m = sel.metrics()
    assert (m["sampled_cold"], m["sampled_prioritized"]) == (2, 6)
    assert sel.mechanisms()["priority_draws"] == 18 and sel.mechanisms()["cold_draws"] == 14


def test_ps_returns_unrolled_cold_records_in_their_order():
    class Partial(ArithCtx):  # rolls out only the first prompt of each call
        def rollout(self, indices, n):
            return super().rollout(list(indices)[:1], n)

    sel = make("ps", n=40, shuffle_seeds=False)
    ctx = Partial(40)
    ctx.step = 1
    sel.build_batch(ctx)
    ids = [r.rid for r in sel.pool.cold]
    want = [p.id for p in ctx.prompts[1:40]]  # 1..7 back at the front, in order, then 8..39
    assert ids == want
    state = json.loads(json.dumps(sel.state_dict()))
    twin = make("ps", n=40, shuffle_seeds=False)
    twin.load_state_dict(state)
    assert [r.rid for r in twin.pool.cold] == want


def test_ps_with_zero_epsilon_never_draws_an_empty_slot():
    from frontier_rl.selection.heapa.ps import PSPool
    from frontier_rl.selection.heapa.records import Record

    pool = PSPool(epsilon=0.0, seed=0)
    pool.add_many([Record(f"r{i}", stat=1.0) for i in range(5)])  # s = 1: weight 0 for all
    pool._free_slot(pool.records["r0"])  # slot 0 empty, as after an eviction
    pool.records.pop("r0")
    pool.n_scored -= 1
    got = pool.sample(3)
    assert all(r is not None for r in got) and len({r.rid for r in got}) == 3
    assert {r.rid for r in got} <= {"r1", "r2", "r3", "r4"}
    pool.add(Record("hard", stat=-1.0))  # s = 0: the only positive weight
    got = pool.sample(2)
    assert got[0].rid == "hard" and got[1].rid in {"r1", "r2", "r3", "r4"}
    pool.check()
