"""The training loop: one RL run from a config, resumable from its workdir.

Read top to bottom: setup, task, policy, warm start, device functions, selector, restore, loop.
Method-specific logic lives behind the Selector interface (`selection/`); this file only wires
components together.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import resource
import time

import jax
import ml_collections
import numpy as np

from frontier_rl import (
    config_lib,
    export,
    policy,
    selection,
    tasks,
    warmstart,
)
from frontier_rl.entropy import PromptEntropy
from frontier_rl.evaluation import suite as eval_suite
from frontier_rl.fit import compile_cache, perf
from frontier_rl.fit.accounting import Accountant, cost_store_key
from frontier_rl.fit.shapes import PROMPT_BUCKETS
from frontier_rl.rl import sharding, update
from frontier_rl.rollout import engines
from frontier_rl.rollout.context import PolicyContext, encode_prompt
from frontier_rl.rollout.engine import EngineError, recompute_old_logp
from frontier_rl.rollout.pipeline import Pipeline, serving
from frontier_rl.rollout.sampler import Sampler
from frontier_rl.run import budget as budget_rule
from frontier_rl.run import checkpoint, distributed, health, lock, metrics, statefile
from frontier_rl.run.errors import RunError
from frontier_rl.tasks import composition

log = logging.getLogger("frontier_rl")

CLOCKS = ("generate", "verify", "entropy", "update", "select", "eval")


def _prepare_workdir(workdir: str) -> str:
    if not workdir:
        raise RunError("--workdir is required (a directory for checkpoints and metrics)")
    workdir = os.path.abspath(workdir)
    try:
        os.makedirs(workdir, exist_ok=True)
        # One probe per process: processes of one run share the workdir.
        probe = os.path.join(workdir, f".write_test.{jax.process_index()}")
        with open(probe, "w") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as e:
        raise RunError(f"workdir {workdir} is not writable: {e.strerror}") from None
    return workdir


def _peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _make_engine(config, workdir: str, sampler, trainer, graphdef, mcfg, tokenizer,
                 probe_ids: list[int]):
    """The rollout engine `rollout.engine` names, built from what this run offers
    (rollout/engines.py): an engine that loads files gets the policy's export, and the
    trainer's log-probs to probe a sync with."""
    def export_fn(params, path):
        return export.export_params(graphdef, params, mcfg, tokenizer, path)

    return engines.build(engines.EngineParts(
        config=config, workdir=workdir, sampler=sampler, export_fn=export_fn,
        probe_fn=functools.partial(trainer.response_logps, pad_id=tokenizer.pad_token_id),
        probe_ids=probe_ids, pad_id=tokenizer.pad_token_id,
        stop_ids=policy.stop_ids(mcfg, tokenizer)))


def _compose_pool(config, task, ctx, engine, params, workdir: str, say) -> tuple[list, dict]:
    """`pool.composition`: the train split cut to the asked shares of prompts the starting
    policy solves / cannot solve / sits at the frontier of (tasks/composition.py), and the
    metrics recording them; the split as it is when no composition is asked for."""
    if config.pool.composition:
        _sync(engine, params, 0, workdir)  # measured under the starting policy
    ctx.begin_step(0, params)
    try:
        return composition.apply(
            config.pool, task.train, functools.partial(ctx.measure_pass_rates,
                                                       batch=config.rl.batch_size),
            config.seed, workdir, say, distributed.is_primary())
    except ValueError as e:
        raise RunError(str(e)) from None


def run(config: ml_collections.ConfigDict, workdir: str, *,
        allow_config_change: bool = False) -> dict[str, float]:
    """Trains per `config` in `workdir`; returns the last evaluation's metrics. Process 0 holds
    the workdir's lock (run/lock.py) for the whole run: a second writer fails at once.

    A resume whose config differs from the checkpoint's in a field that changes the run
    (config_lib.run_fields) stops with the differing fields, as does a cached warm start made
    for another task / model / warm-start config; `allow_config_change` continues instead and
    records the change in DIR/config_changes.jsonl."""
    config_lib.validate(config)
    workdir = _prepare_workdir(workdir)
    if not distributed.is_primary():
        return _run(config, workdir, allow_config_change)
    with lock.hold(workdir, "train", print if config.log.progress else (lambda *a: None)):
        return _run(config, workdir, allow_config_change)


def _run(config: ml_collections.ConfigDict, workdir: str,
         allow_config_change: bool) -> dict[str, float]:
    # ======================================================================= setup
    # Every process runs this same program; only process 0 writes files (run/distributed.py).
    primary = distributed.is_primary()
    cache_dir = compile_cache.enable(workdir)  # a restart loads its compiled programs
    compiles = compile_cache.compile_log()  # this process's compiles, cumulative
    compiles_before = compiles.metrics()  # what earlier runs of this process compiled
    if primary and not os.path.exists(os.path.join(workdir, "config.json")):
        _write_json(os.path.join(workdir, "config.json"), config)  # rewritten once resumed
    seed = config.seed
    writer = metrics.MetricWriter(workdir, tensorboard=config.log.tensorboard, enabled=primary,
                                  wandb=config.log.wandb, wandb_mode=config.log.wandb_mode,
                                  config=config.to_dict())
    say = print if config.log.progress and primary else (lambda *a, **k: None)
    task = _make_task(config, say)
    _check_sizes(config, task)  # an impossible batch fails now, not after the warm start
    engines.check(config)  # a server that is not there fails now, not after the warm start

    # ======================================================================= policy
    # The mesh comes first: a loaded checkpoint's tensors go straight into their shardings.
    # With mesh.rollout the sampler has devices of its own (`rollout_mesh`), else the same.
    mesh, rollout_mesh = sharding.meshes_of(config.mesh)
    pol = policy.prepare(config, task, workdir, mesh, say,
                         allow_config_change=allow_config_change)
    pol = warmstart.apply(config, task, pol, workdir, say)  # trained and cached, or the cache's
    graphdef, mcfg, tokenizer = pol.graphdef, pol.mcfg, pol.tokenizer
    prompt_cap = _prompt_cap(config, mcfg)
    task.train = _drop_overlong(task, "train", tokenizer, prompt_cap)

    # ======================================================================= device functions
    trainer = update.make_trainer(config, graphdef, mesh)
    params, opt_state = trainer.init(pol.params)
    sampler, engine, entropy_fn = _generation(config, workdir, pol, rollout_mesh, trainer, task)
    accountant = _accountant(config, pol, params, sampler, entropy_fn, trainer,
                             os.path.join(cache_dir, "frontier_rl_costs") if primary else None)
    evaluator = _evaluator(config, task, engine, tokenizer, prompt_cap)

    # ======================================================================= selector
    ctx = _context(config, task, pol, sampler, entropy_fn, accountant, engine)
    task.train, pool_metrics = _compose_pool(config, task, ctx, engine, params, workdir, say)
    ctx.prompts = list(task.train)
    selector = selection.make(config.selector.name, config.selector, len(task.train), seed)
    updater = update.Updater(
        config, trainer, params, accountant=accountant, encode=ctx.encode,
        pad_id=tokenizer.pad_token_id, seed=seed,
        recompute_old=recompute_old_logp(config.rl.recompute_old_logp, config.rollout.top_p,
                                         engine, config.rollout.top_k, config.rl.staleness))
    pipe = _pipeline(config, selector, ctx, engine, updater, workdir,
                     sharding.rollout_placer(mesh, rollout_mesh))

    # ======================================================================= restore
    distributed.barrier("restore")  # the processes meet before the checkpointer's first sync
    run_state = _RunState(workdir, config, selector, ctx, engine, accountant,
                          allow_config_change, pipe)
    params, opt_state, start_step = run_state.restore(params, opt_state, trainer, writer, say)
    if primary:  # the config this run now continues under (checked against the checkpoint)
        _write_json(os.path.join(workdir, "config.json"), config)
    if start_step == 0:
        _first_eval(config, task, pol, params, evaluator, run_state, writer, pool_metrics, say)
    return _loop(config, workdir, run_state, params, opt_state, start_step, task=task, pol=pol,
                 evaluator=evaluator, writer=writer, updater=updater, compiles=compiles,
                 compiles_before=compiles_before, say=say)


def _loop(config, workdir: str, run_state: _RunState, params, opt_state, start_step: int, *,
          task, pol, evaluator, writer, updater, compiles, compiles_before: dict,
          say) -> dict[str, float]:
    """The steps, from `start_step` until rl.num_steps or the budget, then the run's end: the
    last evaluation, the checkpoints closed, final_metrics.json."""
    # ======================================================================= loop
    ctx, engine, accountant = run_state.ctx, run_state.engine, run_state.accountant
    selector, pipe, primary = run_state.selector, run_state.pipe, distributed.is_primary()
    graphdef, mcfg, tokenizer = pol.graphdef, pol.mcfg, pol.tokenizer
    num_steps, meter = config.rl.num_steps, budget_rule.Meter.of(config)
    bar = _progress(config.log.progress, start_step, num_steps, meter,
                    _spent(meter, ctx, accountant))
    profile = _Profiler(config.log.profile_steps, os.path.join(workdir, "profile"))
    timing = _StepTiming(run_state.clock, accountant)
    # SIGTERM (preemption, maintenance) -> checkpoint at the end of the step, exit cleanly.
    preemption = distributed.Preemption().install()
    ctrl_c = distributed.CtrlC().install()  # a Ctrl-C that Python drops still stops the run
    # A collapsed policy stops the run (run/health.py); its checkpoints are held, or set aside at
    # the stop, so a resume restores the last good one.
    collapse = health.CollapseWatch(config.rl.collapse_steps, workdir, num_steps)
    preempted, step = False, start_step
    try:
        _sync(engine, params, start_step, workdir)  # a server may start from any checkpoint
        while not run_state.done and step < num_steps:
            ctrl_c.check()
            step += 1
            profile.begin(step)
            timing.begin()
            rollouts_before = ctx.counters["rollouts"]
            spent_before = _spent(meter, ctx, accountant)

            # --- select + roll out, update, the engine serves the new policy (on its sync
            # schedule), the selector's feedback; in this order, or overlapped (rl.staleness)
            groups, (params, opt_state, train_metrics, engine_diff) = pipe.run(
                step, params, opt_state, built=timing.built, updated=timing.updated)
            timing.after()

            # --- budget: stop at the step boundary nearest the budget (the next step is expected
            # to cost what this one did), so matched runs differ by at most about one step's spend.
            used = ctx.counters["rollouts"] - rollouts_before
            spent = _spent(meter, ctx, accountant)
            # responses that carry gradient: trained groups with non-zero reward variance
            ctx.counters["effective_rollouts"] += sum(g.size for g in groups if not g.zero_variance)
            if meter.reached(spent, spent - spent_before):
                run_state.done = True
            last = run_state.done or step == num_steps

            # --- metrics, evaluation
            record = _step_record(train_metrics, engine_diff, ctx, groups, used, timing, engine,
                                  selector, step)
            # compile churn since this run started: seconds, and programs per kind
            record.update(compiles.metrics(since=compiles_before))
            record.update(pipe.metrics())  # lag and overlapped phases (rl.staleness)
            if (evaluator.due(step, rollouts_before, ctx.counters["rollouts"], last)
                    or meter.eval_due(spent_before, spent)):
                record.update(_evaluate(evaluator, params, step, run_state))
            writer.write(step, record)
            collapse.observe(step, record)
            stop = updater.diverged(step) or collapse.stop(step, run_state.ckpt)
            if stop is not None:
                raise stop
            bar.update(step, spent, record["rollout/reward_mean"],
                       run_state.last_eval, task.buckets, config.eval.k, evaluator.empty)

            # --- checkpoint, export
            preempted = preemption.requested()  # agreed by every process
            if (step % config.checkpoint.every == 0 and not collapse.open) or last or preempted:
                run_state.save(step, params, opt_state)
            if config.export.every and step % config.export.every == 0:
                _export(config, workdir, graphdef, params, mcfg, tokenizer, step, say)
            run_state.ckpt.check()  # a failed save stops the run here, not steps later
            profile.end(step)
            if preempted:
                log.warning("preempted: checkpointed step %d; rerun the same command to resume",
                            step)
                break
        if not preempted:  # a run that ends collapsed never ends as finished
            stop = collapse.stop(step, run_state.ckpt, final=True)
            if stop is not None:
                raise stop
    except BaseException as e:  # the saves in flight finish, and the error is one line
        raise run_state.stopped(e, step, bar, writer) from None
    finally:
        preemption.uninstall()
        ctrl_c.uninstall()
        pipe.close()
    profile.close()
    bar.close()
    if step > start_step:
        say(_eval_line(step, run_state.last_eval, task.buckets, config.eval.k,
                       evaluator.empty))
    run_state.ckpt.close()  # waits for the last (async) save to be complete on disk
    writer.close()
    if primary and not preempted:
        # never when SIGTERM cut the run: compare.FINAL marks a finished run
        _write_json(os.path.join(workdir, "final_metrics.json"),
                    {"step": step, "rollouts": ctx.counters["rollouts"], **run_state.last_eval})
    return run_state.last_eval


# ============================================================================ the run's parts


def _generation(config, workdir: str, pol, mesh, trainer, task):
    """The sampler, the rollout engine over it and the prompt-entropy pass, on `mesh` (the
    rollout mesh: the trainer's own unless mesh.rollout gives them devices of their own)."""
    graphdef, mcfg, tokenizer = pol.graphdef, pol.mcfg, pol.tokenizer
    sampler = Sampler(graphdef, mcfg, eos_id=policy.stop_ids(mcfg, tokenizer),
                      pad_id=tokenizer.pad_token_id, prompt_buckets=PROMPT_BUCKETS,
                      max_new_tokens=config.rollout.max_new_tokens, mesh=mesh)
    # The sampler returns log-probs of softmax(logits / T) before top-p truncation, what the
    # trainer computes at the same T, so they serve as the old policy's unless the engine is
    # another implementation or top-p truncates (rollout/engine.py `recompute_old_logp`).
    engine = _make_engine(config, workdir, sampler, trainer, graphdef, mcfg, tokenizer,
                          encode_prompt(tokenizer, task.train[0].text))
    entropy_fn = PromptEntropy(graphdef, pad_id=tokenizer.pad_token_id,
                               prompt_buckets=PROMPT_BUCKETS, mesh=mesh,
                               micro_batch=config.rollout.entropy_batch,
                               chunk=config.model.logits_chunk)
    return sampler, engine, entropy_fn


def _accountant(config, pol, params, sampler, entropy_fn, trainer, store: str | None):
    """FLOPs of every rollout, entropy pass, old-logprob pass and update: XLA's cost analysis of
    each compiled function x its calls, beside the 2N/6N formula (fit/accounting.py). Their
    costs are kept in `store`, beside the compiled programs, for the other runs of a
    comparison (process 0 only)."""
    mcfg, tokenizer = pol.mcfg, pol.tokenizer
    return Accountant(mcfg, params, sampler=sampler, entropy=entropy_fn, trainer=trainer,
                      store=store, store_key=cost_store_key(
                          config, mcfg, policy.stop_ids(mcfg, tokenizer),
                          tokenizer.pad_token_id))


def _evaluator(config, task, engine, tokenizer, prompt_cap: int):
    """Held-out evaluation on the task's eval split, or with eval.sets on the benchmark files
    that replace it (evaluation/suite.py); prompts over the cap are dropped."""
    if config.eval.get("sets"):
        task.eval = eval_suite.suite_task(config.task.name, _task_fields(config),
                                          config.eval.sets).eval
    task.eval = _drop_overlong(task, "eval", tokenizer, prompt_cap)
    return eval_suite.Evaluator(engine, tokenizer, task, config.eval, seed=config.seed + 7)


def _context(config, task, pol, sampler, entropy_fn, accountant, engine) -> PolicyContext:
    """The selectors' door to the device: rollouts, pass rates, prompt entropy, generation."""
    return PolicyContext(
        sampler=sampler, tokenizer=pol.tokenizer, prompts=list(task.train), verify=task.verify,
        shape_rewards=update.reward_shaper(config, task.reward_values),
        reward_values=task.reward_values, group_size=config.rl.group_size,
        batch_size=config.rl.batch_size, temperature=config.rollout.temperature,
        top_p=config.rollout.top_p, top_k=config.rollout.top_k, seed=config.seed,
        prompt_entropy_fn=entropy_fn, flops_per_token=2.0 * pol.mcfg.num_params(),
        accountant=accountant, verify_many=task.verify_many, engine=engine,
        prompt_wrapper=task.prompt_wrapper)


def _first_eval(config, task, pol, params, evaluator, run_state, writer, pool_metrics: dict,
                say) -> None:
    """Step 0's record: the evaluation at the start, the warm start's and the pool's figures."""
    t0 = time.perf_counter()
    run_state.last_eval = evaluator.run(params, 0)
    writer.write(0, {**run_state.last_eval, **_start_metrics(task, pol.warmstart),
                     **pool_metrics,
                     "evalset/correct_counts": list(evaluator.counts),
                     "evalset/prompt_buckets": [p.bucket for p in task.eval],
                     "evalset/empty_buckets": list(evaluator.empty),
                     "perf/eval_time": time.perf_counter() - t0, "rollout/total": 0})
    say(_eval_line(0, run_state.last_eval, task.buckets, config.eval.k, evaluator.empty))


def _evaluate(evaluator, params, step: int, run_state) -> dict:
    """A step's evaluation, timed into the run's clock: the record's eval/ and evalset/ fields."""
    t0 = time.perf_counter()
    run_state.last_eval = evaluator.run(params, step)
    run_state.clock["eval"] += time.perf_counter() - t0
    return {**run_state.last_eval, "evalset/correct_counts": list(evaluator.counts),
            "perf/eval_time": time.perf_counter() - t0,
            "perf/cum_eval_time": run_state.clock["eval"]}


# ============================================================================ the loop's parts


# Host bytes per token of a row the rollout builds and keeps until the update (token ids,
# log-probs, masks, the decoded text and its verification, with numpy's and Python's overheads):
# a generous bound, so the check below refuses only a batch that cannot fit.
ROW_BYTES_PER_TOKEN = 64


def _check_sizes(config, task) -> None:
    """A batch the run cannot hold stops it before anything is built: more prompts per step
    than the pool has (a step would sample prompts again), or rows whose host memory (B x G
    responses x their prompt and response tokens) exceeds half of this host's available memory.
    """
    batch, pool = config.rl.batch_size, len(task.train)
    if batch > pool:
        raise RunError(f"rl.batch_size={batch:,} is larger than the training pool ({pool:,} "
                       f"prompts of task {config.task.name!r}): a step would roll out prompts "
                       "twice; lower rl.batch_size or raise task.train_size")
    tokens = config.rollout.max_new_tokens + max(PROMPT_BUCKETS)
    need = batch * config.rl.group_size * tokens * ROW_BYTES_PER_TOKEN
    have = perf.available_memory_bytes()
    if have and need > have / 2:
        raise RunError(
            f"rl.batch_size={batch:,} x rl.group_size={config.rl.group_size} responses of up "
            f"to {tokens:,} tokens need about {need / 2**30:,.1f} GiB of host memory for one "
            f"step's rows, more than half of the {have / 2**30:,.1f} GiB available: lower "
            "rl.batch_size, rl.group_size or rollout.max_new_tokens")


def _task_fields(config) -> dict:
    return {k: v for k, v in config.task.items() if k != "name"}


def _make_task(config, say):
    task = tasks.make_task(config.task.name, _task_fields(config), config.seed)
    skipped = task.stats.get("skipped_no_answer", 0)
    if not task.train or not task.eval:
        empty = " and ".join(s for s in ("train", "eval") if not getattr(task, s))
        raise RunError(f"task {config.task.name!r} has an empty {empty} split"
                       + (f": {skipped} rows were skipped for having no answer (check the "
                          "answer field of task.* against the file's columns)" if skipped
                          else ""))
    if skipped:
        log.warning("task %s: skipped %d rows without an answer", task.name, skipped)
    say(f"task {task.name}: {len(task.train)} train prompts, {len(task.eval)} eval prompts, "
        f"buckets {task.buckets}")
    for split, consequence in (
            ("train", "RL never draws from it"),
            ("eval", f"its accuracy is shown as {eval_suite.NO_PROMPTS!r}, recorded as no "
                     "metric (never 0) and left out of every average; a gym task's eval split "
                     "drops the items also in train, which can empty a bucket of few distinct "
                     "items")):
        for b in task.empty_buckets(split):
            log.warning("task %s: bucket %s has no %s prompts: %s", task.name, b, split,
                        consequence)
    return task


def _prompt_cap(config, mcfg) -> int:
    """The longest prompt an engine is sent: rollout.max_prompt_len, at most the model's
    context less the response cap (an SGLang server rejects the whole batch beyond it; the
    embedded sampler would run positions the model was never trained on)."""
    room = mcfg.max_position_embeddings - config.rollout.max_new_tokens
    if room < 1:
        raise RunError(f"rollout.max_new_tokens={config.rollout.max_new_tokens} leaves no room "
                       f"for a prompt in the model's context of {mcfg.max_position_embeddings}")
    cap = config.rollout.max_prompt_len
    if cap > room:
        log.warning("rollout.max_prompt_len=%d + rollout.max_new_tokens=%d exceed the model's "
                    "context of %d: prompts are capped at %d tokens", cap,
                    config.rollout.max_new_tokens, mcfg.max_position_embeddings, room)
    return min(cap, room) if cap else room


def _drop_overlong(task, split: str, tokenizer, cap: int) -> list:
    """`task`'s `split` without the prompts of more than `cap` tokens (verl's
    filter_overlong_prompts), their count logged and, if any, kept in task.stats."""
    prompts = getattr(task, split)
    kept = [p for p in prompts if len(encode_prompt(tokenizer, p.text)) <= cap]
    dropped = len(prompts) - len(kept)
    if dropped:  # step 0's metrics carry it as task/overlong_<split>
        task.stats[f"overlong_{split}"] = dropped
        log.warning("task %s: dropped %d of %d %s prompts longer than %d tokens "
                    "(rollout.max_prompt_len)", task.name, dropped, len(prompts), split, cap)
    if not kept:
        raise RunError(f"every {split} prompt of task {task.name!r} is longer than {cap} tokens "
                       "(rollout.max_prompt_len, or the model's context less "
                       "rollout.max_new_tokens)")
    return kept


def _start_metrics(task, ws_info: dict) -> dict:
    """Step 0's record besides the evaluation: the task's sizes and where the warm start
    stopped."""
    out = {"task/train_prompts": len(task.train), "task/eval_prompts": len(task.eval),
           **{f"task/{k}": v for k, v in task.stats.items() if isinstance(v, (int, float))}}
    out.update({f"warmstart/{k}": ws_info[k] for k in ("steps", "loss", "check_acc",
                                                       "frontier_acc", "attempts", "seed")
                if isinstance(ws_info.get(k), (int, float)) and np.isfinite(ws_info[k])})
    return out


def _sync(engine, params, step: int, workdir: str) -> None:
    """The engine serves `params` of `step` (in process: at once; a server: export, reload,
    probe); a failure stops the run with the checkpoint intact."""
    try:
        engine.ensure(params, step)
    except EngineError as e:
        raise RunError(f"step {step}: {e}; the newest checkpoint in {workdir} is intact, "
                       "resume from it once the engine is fixed") from None


def _pipeline(config, selector, ctx, engine, updater, workdir: str,
              snapshot=None) -> Pipeline:
    """Each step's build (the selector's groups, under the parameters it is given) and update,
    in order or overlapped (rl.staleness, rollout/pipeline.py); `snapshot` copies a version
    onto the rollout mesh (None: a copy on the trainer's devices)."""
    def build(step: int, params) -> list:
        ctx.begin_step(step, params)
        engine.begin_step(step)
        return _build_batch(selector, config.selector.name, ctx, step, workdir)

    def publish(params, step: int) -> None:  # the updated policy, to the engine on its schedule
        ctx.params = params
        if engine.sync_due(step):
            _sync(engine, params, step, workdir)

    return Pipeline(config.rl.staleness, build, updater.update, publish=publish,
                    after=lambda groups: selector.after_update(ctx, groups),
                    serve=serving(engine), snapshot=snapshot)


def _build_batch(selector, name: str, ctx, step: int, workdir: str) -> list:
    """The step's trained groups from the selector; its failures become one-line errors."""
    try:
        groups = selector.build_batch(ctx)
    except EngineError as e:
        raise RunError(f"step {step}: {e}; nothing of this step was written, the newest "
                       f"checkpoint in {workdir} is intact") from None
    except RuntimeError as e:  # e.g. DS's max_num_gen_batches: the selector's own words
        raise RunError(f"step {step}: {e}") from None
    if not groups:
        raise RunError(f"selector {name!r} returned no groups at step {step}")
    return groups


def _write_json(path: str, obj) -> None:
    """`obj` (a dict or a ConfigDict) written whole or not at all (statefile.write_json)."""
    if isinstance(obj, ml_collections.ConfigDict):
        statefile.write_json(path, None, text=obj.to_json_best_effort(indent=2))
    else:
        statefile.write_json(path, obj, indent=2)


def _step_record(train_metrics, engine_diff, ctx, groups, used: int, timing, engine, selector,
                 step: int) -> dict:
    """A step's metrics record: the update, the rollouts, the phase times and FLOPs, the
    engine's report, the selector's metrics and its cumulative mechanism counters."""
    record = {f"train/{k}": v for k, v in train_metrics.items()}
    record.update(_rollout_metrics(ctx, groups, used))
    record.update(timing.metrics(ctx.timers))
    record.update(engine.step_metrics(step))
    if engine_diff is not None:
        record["rollout/engine_logprob_abs_diff"] = engine_diff
    record.update({f"select/{k}": v for k, v in selector.metrics().items()})
    # Cumulative evidence that the method's mechanism ran (selection/mechanisms.py).
    record.update({f"mech/{k}": v for k, v in getattr(selector, "mechanisms", dict)().items()})
    return record


def _spent(meter: budget_rule.Meter, ctx, accountant) -> float:
    """What the run has spent so far in its budget's unit (run/budget.py)."""
    pflops = accountant.metrics()["perf/pflops"] if meter.unit == "pflops" else 0.0
    return meter.read(ctx.counters, pflops)


def _rollout_metrics(ctx, groups, used: int) -> dict[str, float]:
    """What the step rolled out and trained on (counters are cumulative)."""
    outcomes = np.concatenate([g.outcomes for g in groups])
    rewards = np.concatenate([g.rewards for g in groups])
    out = {
        "rollout/total": ctx.counters["rollouts"],
        "rollout/step": used,
        "rollout/effective_total": ctx.counters["effective_rollouts"],
        # responses whose answer check timed out or crashed (scored wrong), cumulative
        "rollout/verify_timeouts": ctx.counters["verify_timeouts"],
        # samples a control arm measured pass rates with (selection/oracle.py): never charged
        "rollout/control_samples": ctx.counters.get("control_samples", 0),
        "rollout/tokens": ctx.counters["response_tokens"],
        "rollout/prompt_tokens": ctx.counters["prompt_tokens"],
        "perf/rollout_pflops": ctx.counters["rollout_flops"] / 1e15,
        "perf/entropy_pflops": ctx.counters["entropy_flops"] / 1e15,
        "rollout/reward_mean": float(rewards.mean()),
        "rollout/correct": float(np.mean(outcomes == 1)),
        "rollout/invalid": float(np.mean(outcomes == -1)),
        "rollout/zero_var_frac": float(np.mean([g.zero_variance for g in groups])),
        "rollout/all_correct_frac": float(np.mean([g.all_correct for g in groups])),
        "rollout/all_wrong_frac": float(np.mean([g.all_wrong for g in groups])),
        "rollout/response_len": float(np.mean(np.concatenate([g.lengths for g in groups]))),
    }
    out.update(ctx.rolled.metrics())
    return out


class _StepTiming:
    """Wall time per phase of a step (generate, verify, entropy, update, select), the
    cumulative `clock` a comparison reports (checkpointed), MFU and tokens/s."""

    def __init__(self, clock: dict, accountant):
        self.clock, self.accountant = clock, accountant
        self.flops_seen = accountant.metrics()  # cumulative; per-step deltas give MFU

    def begin(self) -> None:
        self.t_step = time.perf_counter()

    def built(self) -> None:
        self.t_built = time.perf_counter()

    def updated(self) -> None:
        self.t_updated = time.perf_counter()

    def after(self) -> None:
        self.t_after = time.perf_counter()

    def metrics(self, timers: dict) -> dict[str, float]:
        phase = {
            "generate": timers["generate"], "verify": timers["verify"],
            "entropy": timers["entropy"], "update": self.t_updated - self.t_built,
            "select": (self.t_built - self.t_step) - timers["generate"] - timers["verify"]
            - timers["entropy"] + (self.t_after - self.t_updated)}
        for k, v in phase.items():
            self.clock[k] += v
        seconds = self.t_after - self.t_step
        flops_now = self.accountant.metrics()
        model_flops = (flops_now["perf/pflops_formula"]
                       - self.flops_seen["perf/pflops_formula"]) * 1e15
        tokens = flops_now["perf/tokens"] - self.flops_seen["perf/tokens"]
        self.flops_seen = flops_now
        return {"perf/step_time": seconds,
                **{f"perf/{k}_time": v for k, v in phase.items()},
                **{f"perf/cum_{k}_time": v for k, v in self.clock.items()},
                "perf/peak_rss_gib": _peak_rss_gib(), **flops_now,
                "perf/tokens_per_s": tokens / max(seconds, 1e-9),
                "perf/mfu": perf.mfu(model_flops, seconds)}


class _RunState:
    """What a checkpoint holds beside the parameters and optimizer state: the selector's and
    engine's state, the context's counters, the FLOPs account, the phase clock, the last
    evaluation and whether the budget was reached. Saves are asynchronous."""

    def __init__(self, workdir: str, config, selector, ctx, engine, accountant,
                 allow_config_change: bool = False, pipe: Pipeline | None = None):
        self.workdir = workdir
        self.pipe = pipe
        self.fields = config_lib.run_fields(config)
        self.allow_config_change = allow_config_change
        self.ckpt = checkpoint.Checkpointer(os.path.join(workdir, "checkpoints"),
                                            max_to_keep=config.checkpoint.max_to_keep,
                                            async_save=True)
        self.selector, self.ctx, self.engine, self.accountant = selector, ctx, engine, accountant
        self.seed = config.seed
        self.clock = {k: 0.0 for k in CLOCKS}
        self.last_eval: dict = {}
        self.done = False

    def restore(self, params, opt_state, trainer, writer, say):
        """(params, opt_state, step) of the newest checkpoint, or the inputs and step 0."""
        restored = self.ckpt.restore({"params": policy.flat(params),
                                      "opt_state": policy.flat(opt_state)})
        if restored is None:
            self._damaged(writer.truncate_after(-1), writer)
            return params, opt_state, 0
        step, arrays, meta = restored
        self._check_config(step, meta.get("config"), say)
        params = jax.device_put(policy.unflat(params, arrays["params"]), trainer.param_shardings)
        opt_state = jax.device_put(policy.unflat(opt_state, arrays["opt_state"]),
                                   trainer.opt_shardings)
        self.selector.load_state_dict(meta["selector"])
        self.ctx.counters.update(meta["counters"])
        self.engine.load_state_dict(meta.get("engine", {}))
        self.accountant.load_state_dict(meta.get("accounting", {}))
        self.clock.update(meta.get("clock", {}))
        self.last_eval = meta.get("last_eval", {})
        self.done = bool(meta.get("done", False))
        self._load_pipeline(step)
        self._damaged(writer.truncate_after(step), writer)
        if step > 0 and not writer.has_step(step) and distributed.is_primary():
            # the checkpoint's own step lost its record (cut mid-write): what the checkpoint
            # knows of it is written back, flagged, so its evaluation is not lost
            writer.write(step, {**self.last_eval, "rollout/total": self.ctx.counters["rollouts"],
                                "train/record_restored": 1.0})
            log.warning("metrics.jsonl had no readable record of step %d: rewrote it from the "
                        "checkpoint (evaluation and rollouts; train/record_restored=1)", step)
        say(f"resumed from step {step} ({self.ctx.counters['rollouts']:,} rollouts so far)")
        return params, opt_state, step

    def stopped(self, error: BaseException, step: int, bar, writer) -> BaseException:
        """The error to leave the loop with, once what it wrote is closed: the progress bar's
        line ended, the metrics closed, the checkpoint save in flight waited for and orbax's
        threads closed (Ctrl-C included, so the exit status is 130 and nothing crashes at
        shutdown). An OSError (a full disk, a quota, a permission) or a MemoryError becomes
        one line naming the step, the cause and the newest complete checkpoint."""
        bar.close()  # its line ends before the error's
        try:
            writer.close()
        except Exception:  # noqa: BLE001 - a full disk fails TensorBoard's flush too
            log.debug("closing the metrics after a failure", exc_info=True)
        failed_save = self.ckpt.abort()
        if isinstance(error, (OSError, MemoryError)) and failed_save is not None:
            return failed_save  # the same cause, said with the newest complete checkpoint
        if isinstance(error, OSError) and not isinstance(error, FileNotFoundError):
            where = f" writing {error.filename}" if error.filename else ""
            cause = f"{checkpoint.failure_reason(error)}{where}"
        elif isinstance(error, MemoryError):
            cause = ("out of host memory; lower rl.batch_size, rl.group_size or "
                     "rollout.max_new_tokens")
        else:
            return error
        newest = self.ckpt.steps_on_disk()
        kept = (f"the newest complete checkpoint, step {newest[-1]}, is kept" if newest
                else "no checkpoint was written yet")
        return RunError(f"run {self.workdir}: stopped at step {step}: {cause}; {kept}; rerun "
                        "the same command to resume once that is fixed")

    def _load_pipeline(self, step: int) -> None:
        """The groups in flight at the checkpoint (rl.staleness), as its save left them."""
        folder = os.path.join(self.workdir, "pipeline")
        if self.pipe is None or step == 0 or self.pipe.load(folder, step):
            return
        if not self.allow_config_change:
            raise RunError(f"{self.workdir}: the checkpoint at step {step} has no record of "
                           f"the groups in flight under rl.staleness={self.pipe.k} "
                           f"({folder}/{step}.pkl); resume under the staleness it was made with")
        log.warning("no groups in flight recorded at step %d in %s: the pipeline fills again "
                    "under the checkpoint's parameters", step, folder)

    def save(self, step: int, params, opt_state) -> None:
        if self.pipe is not None and self.pipe.k and distributed.is_primary():
            self.pipe.save(os.path.join(self.workdir, "pipeline"), step,
                           set(self.ckpt.steps_on_disk()))
        self.ckpt.save(step, {"params": policy.flat(params), "opt_state": policy.flat(opt_state)},
                       {"step": step, "selector": self.selector.state_dict(),
                        "counters": self.ctx.counters, "engine": self.engine.state_dict(),
                        "clock": self.clock, "accounting": self.accountant.state_dict(),
                        "rng": {"seed": self.seed}, "last_eval": self.last_eval,
                        "done": self.done, "config": self.fields}, force=True)

    @staticmethod
    def _damaged(lines: list[int], writer) -> None:
        if lines:
            log.warning("%s: line(s) %s did not parse; kept in %s, left out of the records",
                        writer.path, ", ".join(map(str, lines)), writer.path + metrics.DAMAGED)

    def _check_config(self, step: int, saved: dict | None, say) -> None:
        """The checkpoint's config against this run's: differing run fields stop the run
        (nothing is written), unless allowed, when the change is recorded and said."""
        if saved is None:  # a checkpoint from before configs were recorded
            return
        # a field the checkpoint does not know (added by a newer version) at its default
        # changes nothing the checkpoint computed
        defaults = config_lib.run_fields(config_lib.default_config())
        saved = {**{k: v for k, v in self.fields.items()
                    if k not in saved and k in defaults and defaults[k] == v}, **saved}
        changes = config_lib.changed_fields(saved, self.fields)
        if not changes:
            return
        shown = "; ".join(changes[:8]) + (f"; and {len(changes) - 8} more" if len(changes) > 8
                                          else "")
        if not self.allow_config_change:
            raise RunError(
                f"{self.workdir}: the checkpoint at step {step} was made with another config "
                f"({shown}); rerun with the checkpoint's config, use another --workdir, or pass "
                "--allow_config_change to continue under this one (recorded in "
                "config_changes.jsonl)")
        if distributed.is_primary():
            with open(os.path.join(self.workdir, "config_changes.jsonl"), "a") as f:
                f.write(json.dumps({"step": step, "changes": changes}) + "\n")
        log.warning("resuming step %d under a changed config (--allow_config_change): %s",
                    step, shown)
        say(f"config changed at step {step} (recorded in config_changes.jsonl): {shown}")


def _export(config, workdir: str, graphdef, params, mcfg, tokenizer, step: int, say) -> None:
    """`export.every`: a transformers-loadable copy of the policy (gathered on every process,
    written by process 0)."""
    host_params = distributed.gather(params)
    if distributed.is_primary():
        out = export.export_params(
            graphdef, host_params, mcfg, tokenizer,
            os.path.join(config.export.dir or os.path.join(workdir, "export"), f"step_{step}"))
        say(f"exported the policy at step {step} to {out}")


def _eval_line(step: int, ev: dict, buckets, k: int, empty) -> str:
    """The evaluation's Avg@k per bucket; a bucket in `empty` (no eval prompts) as "no
    prompts", never a number."""
    parts = [f"{b} {eval_suite.bucket_accuracy(ev, b, k, empty)}" for b in buckets]
    return f"eval step {step}: avg@{k} " + " | ".join(parts)


class _Profiler:
    """jax.profiler traces of the steps listed in `log.profile_steps` (one trace per run of
    consecutive steps), written under WORKDIR/profile for TensorBoard / Perfetto."""

    def __init__(self, steps: str, logdir: str):
        self.steps = {int(p) for p in steps.split(",") if p.strip()}
        self.logdir = logdir
        self.active = False

    def begin(self, step: int) -> None:
        if step in self.steps and not self.active:
            jax.profiler.start_trace(self.logdir)
            self.active = True

    def end(self, step: int) -> None:
        if self.active and step + 1 not in self.steps:
            self.close()

    def close(self) -> None:
        if self.active:
            jax.effects_barrier()
            jax.profiler.stop_trace()
            self.active = False
            log.info("profile trace written under %s", self.logdir)


class _progress:
    """A tqdm bar showing step (or the spend, under a budget: rollouts, tokens or PFLOPs), mean
    reward and the last eval."""

    def __init__(self, enabled: bool, start: int, total: int, meter: budget_rule.Meter,
                 spent: float = 0.0):
        self._bar = None
        self._budget = meter.limit
        self._unit = meter.unit
        if enabled:
            from tqdm import tqdm

            if self._budget:
                self._bar = tqdm(total=self._budget, initial=min(spent, self._budget),
                                 desc=f"rl {self._unit}", dynamic_ncols=True)
            else:
                self._bar = tqdm(total=total, initial=start, desc="rl", dynamic_ncols=True)

    def update(self, step, spent, reward, last_eval, buckets, k, empty):
        if self._bar is None:
            return
        ev = "/".join(eval_suite.bucket_accuracy(last_eval, b, k, empty, 0) for b in buckets)
        if self._budget:
            self._bar.set_postfix_str(f"step {step} reward {reward:+.2f} avg@{k} {ev}")
            self._bar.update(min(spent, self._budget) - self._bar.n)
        else:
            self._bar.set_postfix_str(f"{self._unit} {spent:,.0f} reward {reward:+.2f} "
                                      f"avg@{k} {ev}")
            self._bar.update(1)

    def close(self):
        if self._bar is not None:
            self._bar.close()
