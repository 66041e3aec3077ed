"""The training loop: one RL run from a config, resumable from its workdir.

Read top to bottom: setup, task, policy, warm start, device functions, selector, restore, loop.
Method-specific logic lives behind the Selector interface (`selection/`); this file only wires
components together.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from frontier_rl import (
    checkpoint,
    config_lib,
    distributed,
    eval_suite,
    export,
    metrics,
    perf,
    policy,
    selection,
    tasks,
)
from frontier_rl.accounting import Accountant
from frontier_rl.entropy import PromptEntropy
from frontier_rl.errors import RunError
from frontier_rl.rl import batch as batch_lib
from frontier_rl.rl import losses, sharding
from frontier_rl.rl.train_step import OptimConfig, Trainer, make_optimizer
from frontier_rl.rollout.context import PolicyContext, encode_prompt
from frontier_rl.rollout.engine import EngineError, JaxEngine
from frontier_rl.rollout.sampler import PROMPT_BUCKETS, ROW_BUCKETS, Sampler
from frontier_rl.rollout.sglang import SGLangEngine

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
    """The rollout engine `rollout.engine` names (rollout/engine.py). An SGLang engine gets the
    export of the policy (to `rollout.sync_dir`) and the trainer's log-probs for its probe."""
    if config.rollout.engine == "jax":
        return JaxEngine(sampler, rows_per_call=config.rollout.rows_per_call)
    c = config.rollout

    def export_fn(params, path):
        return export.export_params(graphdef, params, mcfg, tokenizer, path)

    def probe_fn(params, prompt, response):
        plen = len(prompt)
        seq = np.array(prompt + response, np.int32)
        length = -(-len(seq) // 8) * 8
        tokens = np.full((trainer.row_multiple, length), tokenizer.pad_token_id, np.int32)
        valid = np.zeros_like(tokens)
        tokens[:, :len(seq)], valid[:, :len(seq)] = seq, 1
        return trainer.logps(params, tokens, valid)[0, plen - 1:len(seq) - 1]

    return SGLangEngine(
        c.sglang.url, pad_id=tokenizer.pad_token_id, stop_ids=policy.stop_ids(mcfg, tokenizer),
        max_new_tokens=c.max_new_tokens, sync_dir=c.sync_dir or os.path.join(workdir, "sync"),
        export_fn=export_fn, probe_fn=probe_fn, probe_ids=probe_ids, probe_tol=c.probe_tol,
        temperature=c.temperature, timeout=c.sglang.timeout, deadline=c.sglang.deadline,
        retries=c.sglang.retries, backoff=c.sglang.backoff, concurrency=c.sglang.concurrency,
        max_rows=c.sglang.max_rows)


def run(config: ml_collections.ConfigDict, workdir: str) -> dict[str, float]:
    """Trains per `config` in `workdir`; returns the last evaluation's metrics."""
    # ======================================================================= setup
    config_lib.validate(config)
    # Every process runs this same program; only process 0 writes files (distributed.py).
    primary = distributed.is_primary()
    workdir = _prepare_workdir(workdir)
    if primary:
        with open(os.path.join(workdir, "config.json"), "w") as f:
            f.write(config.to_json_best_effort(indent=2))
    seed = config.seed
    writer = metrics.MetricWriter(workdir, tensorboard=config.log.tensorboard, enabled=primary)
    say = print if config.log.progress and primary else (lambda *a, **k: None)

    # ======================================================================= task
    task_cfg = {k: v for k, v in config.task.items() if k != "name"}
    task = tasks.make_task(config.task.name, task_cfg, seed)
    if not task.train or not task.eval:
        raise RunError(f"task {config.task.name!r} has an empty train or eval split")
    skipped = task.stats.get("skipped_no_answer", 0)
    if skipped:
        log.warning("task %s: skipped %d rows without an answer", task.name, skipped)
    say(f"task {task.name}: {len(task.train)} train prompts, {len(task.eval)} eval prompts, "
        f"buckets {task.buckets}")

    # ======================================================================= policy
    # The mesh comes first: a loaded checkpoint's tensors go straight into their shardings.
    mesh = sharding.make_mesh(config.mesh.data, config.mesh.fsdp, config.mesh.model)
    pol = policy.prepare(config, task, workdir, mesh, say)
    graphdef, params, mcfg, tokenizer, ws_info = (pol.graphdef, pol.params, pol.mcfg,
                                                  pol.tokenizer, pol.warmstart)

    # ======================================================================= device functions
    loss_cfg = losses.LossConfig(
        aggregation=losses.LOSSES[config.rl.loss].aggregation, eps_low=config.rl.eps_low,
        eps_high=config.rl.eps_high, clip_ratio_c=config.rl.clip_ratio_c,
        kl_coef=config.rl.kl_coef, tis_cap=config.rl.tis_cap)
    tx = make_optimizer(OptimConfig(
        learning_rate=config.rl.learning_rate, b1=config.rl.b1, b2=config.rl.b2,
        weight_decay=config.rl.weight_decay, grad_clip=config.rl.grad_clip,
        warmup_steps=config.rl.warmup_steps))
    trainer = Trainer(graphdef, loss_cfg, tx, mesh, epochs=config.rl.epochs,
                      minibatches=config.rl.minibatches,
                      temperature=config.rollout.temperature,
                      micro_batch_size=config.rl.micro_batch_size,
                      logits_chunk=config.model.logits_chunk)
    params, opt_state = trainer.init(params)
    # A copy: the update donates `params`' buffers, which may be the ones init returned.
    ref_params = jax.tree.map(jnp.copy, params) if config.rl.kl_coef > 0 else None
    sampler = Sampler(graphdef, mcfg, eos_id=policy.stop_ids(mcfg, tokenizer),
                      pad_id=tokenizer.pad_token_id, prompt_buckets=PROMPT_BUCKETS,
                      max_new_tokens=config.rollout.max_new_tokens, mesh=mesh)
    # The sampler returns log-probs of softmax(logits / T) before top-p truncation, what the
    # trainer computes at the same T, so they serve as the old policy's at any temperature.
    # Under top-p the trainer still recomputes them with a full forward, as verl's actor always
    # does; the distribution is the same, only the KV-cache path's rounding is replaced.
    # An external engine's log-probs come from another implementation (and precision): the
    # trainer recomputes them and logs the difference (rollout/engine_logprob_abs_diff).
    engine = _make_engine(config, workdir, sampler, trainer, graphdef, mcfg, tokenizer,
                          encode_prompt(tokenizer, task.train[0].text))
    recompute_old = {"always": True, "never": False}.get(
        config.rl.recompute_old_logp, config.rollout.top_p < 1.0 or engine.external)

    def shape_rewards(outcomes: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        if config.rl.loss == "dapo" and config.rl.overlong_buffer > 0:
            return outcomes + losses.overlong_penalty(
                lengths, config.rollout.max_new_tokens, config.rl.overlong_buffer,
                config.rl.overlong_penalty)
        return outcomes

    # With eval.sets the benchmark files replace the task's held-out split (eval_suite.py).
    if config.eval.get("sets"):
        task.eval = eval_suite.suite_task(config.task.name, task_cfg, config.eval.sets).eval

    def evaluate(params, step: int) -> dict[str, float]:
        """The eval metrics (the code `frontier-rl eval` runs); the per-prompt correct counts go
        to the next metrics record only (`evalset/correct_counts`, what a comparison's
        intervals resample)."""
        if engine.external and engine.synced_step != step:
            try:  # evaluation measures the current policy, never a stale one
                engine.sync(params, step)
            except EngineError as e:
                raise RunError(f"evaluation at step {step}: {e}") from None
        ev, counts = eval_suite.evaluate(engine, params, tokenizer, task, config.eval,
                                         seed=seed + 7)
        eval_counts[:] = counts.tolist()
        return ev

    eval_counts: list[int] = []

    # ======================================================================= selector
    selector = selection.make(config.selector.name, config.selector, len(task.train), seed)
    entropy_fn = PromptEntropy(graphdef, pad_id=tokenizer.pad_token_id,
                               prompt_buckets=PROMPT_BUCKETS, mesh=mesh,
                               micro_batch=config.rollout.entropy_batch,
                               chunk=config.model.logits_chunk)
    # FLOPs of every rollout, entropy pass, old-logprob pass and update: XLA's cost analysis of
    # each compiled function x its calls, beside the 2N/6N formula (accounting.py).
    accountant = Accountant(mcfg, params, sampler=sampler, entropy=entropy_fn, trainer=trainer)
    ctx = PolicyContext(
        sampler=sampler, tokenizer=tokenizer, prompts=list(task.train), verify=task.verify,
        shape_rewards=shape_rewards, group_size=config.rl.group_size,
        batch_size=config.rl.batch_size, temperature=config.rollout.temperature,
        top_p=config.rollout.top_p, seed=seed,
        prompt_entropy_fn=entropy_fn, flops_per_token=2.0 * mcfg.num_params(),
        accountant=accountant, verify_many=task.verify_many, engine=engine)

    # ======================================================================= restore
    # Async: a save copies the arrays off the devices and writes them while the next steps run.
    ckpt = checkpoint.Checkpointer(os.path.join(workdir, "checkpoints"),
                                   max_to_keep=config.checkpoint.max_to_keep, async_save=True)
    start_step, last_eval, done = 0, {}, False
    # Cumulative wall time per phase (seconds), the split a comparison reports; checkpointed.
    clock = {k: 0.0 for k in CLOCKS}
    restored = ckpt.restore({"params": policy.flat(params), "opt_state": policy.flat(opt_state)})
    if restored is not None:
        start_step, arrays, meta = restored
        params = jax.device_put(policy.unflat(params, arrays["params"]), trainer.param_shardings)
        opt_state = jax.device_put(policy.unflat(opt_state, arrays["opt_state"]),
                                   trainer.opt_shardings)
        selector.load_state_dict(meta["selector"])
        ctx.counters.update(meta["counters"])
        if engine.external:
            engine.load_state_dict(meta.get("engine", {}))
        accountant.load_state_dict(meta.get("accounting", {}))
        clock.update(meta.get("clock", {}))
        last_eval = meta.get("last_eval", {})
        done = bool(meta.get("done", False))
        writer.truncate_after(start_step)
        say(f"resumed from step {start_step} ({ctx.counters['rollouts']:,} rollouts so far)")
    else:
        writer.truncate_after(-1)

    def save(step: int) -> None:
        ckpt.save(step, {"params": policy.flat(params), "opt_state": policy.flat(opt_state)},
                  {"step": step, "selector": selector.state_dict(), "counters": ctx.counters,
                   "engine": engine.state_dict() if engine.external else {},
                   "clock": clock, "accounting": accountant.state_dict(), "rng": {"seed": seed},
                   "last_eval": last_eval, "done": done}, force=True)

    if start_step == 0:
        t0 = time.perf_counter()
        last_eval = evaluate(params, 0)
        task_metrics = {"task/train_prompts": len(task.train), "task/eval_prompts": len(task.eval),
                        **{f"task/{k}": v for k, v in task.stats.items()
                           if isinstance(v, (int, float))}}
        ws_metrics = {f"warmstart/{k}": ws_info[k]
                      for k in ("steps", "loss", "check_acc", "frontier_acc")
                      if isinstance(ws_info.get(k), (int, float)) and np.isfinite(ws_info[k])}
        writer.write(0, {**last_eval, **task_metrics, **ws_metrics,
                         "evalset/correct_counts": list(eval_counts),
                         "evalset/prompt_buckets": [p.bucket for p in task.eval],
                         "perf/eval_time": time.perf_counter() - t0, "rollout/total": 0})
        say(_eval_line(0, last_eval, task.buckets, config.eval.k))

    # ======================================================================= loop
    num_steps, budget = config.rl.num_steps, config.rl.rollout_budget
    every_r = config.eval.every_rollouts
    bar = _progress(config.log.progress, start_step, num_steps, budget,
                    ctx.counters["rollouts"])
    profile = _Profiler(config.log.profile_steps, os.path.join(workdir, "profile"))
    flops_seen = accountant.metrics()  # cumulative; per-step deltas give MFU and tokens/s
    bad_steps = 0
    # SIGTERM (preemption, maintenance) -> checkpoint at the end of the step, exit cleanly.
    preemption = distributed.Preemption().install()
    preempted = False
    step = start_step
    def sync(step: int) -> None:
        if engine.external and engine.synced_step == step:
            return
        try:
            engine.sync(params, step)
        except EngineError as e:
            raise RunError(f"step {step}: {e}; the newest checkpoint in {workdir} is intact, "
                           "resume from it once the engine is fixed") from None

    sync(start_step)  # before the first rollout: a server may start from any checkpoint
    while not done and step < num_steps:
        step += 1
        profile.begin(step)
        t_step = time.perf_counter()
        ctx.begin_step(step, params)
        staleness_base = engine.synced_step if engine.external else step - 1
        rollouts_before = ctx.counters["rollouts"]

        # --- select + roll out
        try:
            groups = selector.build_batch(ctx)
        except EngineError as e:
            raise RunError(f"step {step}: {e}; nothing of this step was written, the newest "
                           f"checkpoint in {workdir} is intact") from None
        except RuntimeError as e:  # e.g. DS's max_num_gen_batches: the selector's own words
            raise RunError(f"step {step}: {e}") from None
        t_built = time.perf_counter()
        if not groups:
            raise RunError(f"selector {config.selector.name!r} returned no groups at step {step}")

        # --- update
        prompt_ids = [ctx.encode(g.index) for g in groups]
        batch = batch_lib.pack(groups, prompt_ids, pad_id=tokenizer.pad_token_id,
                               prompt_buckets=PROMPT_BUCKETS, row_buckets=ROW_BUCKETS,
                               row_multiple=trainer.row_multiple,
                               std_norm=config.rl.adv_std_norm)
        engine_diff = None
        if recompute_old:
            engine_logp = batch["rollout_logp"] = batch["old_logp"]
            batch["old_logp"] = trainer.logps(params, batch["tokens"], batch["valid"])
            accountant.charge_logps(batch)
            # the train-inference mismatch, over response tokens
            mask = batch["loss_mask"] > 0
            engine_diff = float(np.abs(batch["old_logp"] - engine_logp)[mask].mean())
        if ref_params is not None:
            batch["ref_logp"] = trainer.logps(ref_params, batch["tokens"], batch["valid"])
            accountant.charge_logps(batch)
        params, opt_state, train_metrics = trainer.step(
            params, opt_state, batch, seed=int(np.random.SeedSequence([seed, step, 99])
                                               .generate_state(1)[0]))
        accountant.charge_train(batch)
        t_updated = time.perf_counter()
        # NaN guard: the trainer skipped every update whose loss or gradient norm was not
        # finite (params unchanged); a run of such steps means the run has diverged (checked
        # after this step's metrics are written).
        if train_metrics.get("skipped_updates", 0) > 0:
            bad_steps += 1
            log.warning("step %d: %d update(s) skipped on a non-finite loss or gradient norm",
                        step, int(train_metrics["skipped_updates"]))
        else:
            bad_steps = 0
        ctx.params = params
        # The engine samples the updated policy from here on (an external one every
        # rollout.sync_every steps: export, reload, probe), HeaPA's augmentation included.
        if not engine.external or step % config.rollout.sync_every == 0:
            sync(step)
        selector.after_update(ctx, groups)
        t_after = time.perf_counter()

        # --- budget: stop at the step boundary nearest the budget (the next step is expected
        # to cost what this one did), so matched runs differ by at most about one step's batch.
        used = ctx.counters["rollouts"] - rollouts_before
        # responses that carry gradient: trained groups with non-zero reward variance
        ctx.counters["effective_rollouts"] += sum(g.size for g in groups if not g.zero_variance)
        if budget and (ctx.counters["rollouts"] >= budget
                       or budget - ctx.counters["rollouts"] < used / 2):
            done = True
        last = done or step == num_steps

        # --- metrics
        outcomes = np.concatenate([g.outcomes for g in groups])
        rewards = np.concatenate([g.rewards for g in groups])
        phase = {
            "generate": ctx.timers["generate"], "verify": ctx.timers["verify"],
            "entropy": ctx.timers["entropy"], "update": t_updated - t_built,
            "select": (t_built - t_step) - ctx.timers["generate"] - ctx.timers["verify"]
            - ctx.timers["entropy"] + (t_after - t_updated)}
        for k, v in phase.items():
            clock[k] += v
        step_metrics = {f"train/{k}": v for k, v in train_metrics.items()}
        step_metrics.update({
            "rollout/total": ctx.counters["rollouts"],
            "rollout/step": used,
            "rollout/effective_total": ctx.counters["effective_rollouts"],
            # responses whose answer check timed out or crashed (scored wrong), cumulative
            "rollout/verify_timeouts": ctx.counters["verify_timeouts"],
            "rollout/tokens": ctx.counters["response_tokens"],
            "perf/rollout_pflops": ctx.counters["rollout_flops"] / 1e15,
            "perf/entropy_pflops": ctx.counters["entropy_flops"] / 1e15,
            "rollout/reward_mean": float(rewards.mean()),
            "rollout/correct": float(np.mean(outcomes == 1)),
            "rollout/invalid": float(np.mean(outcomes == -1)),
            "rollout/zero_var_frac": float(np.mean([g.zero_variance for g in groups])),
            "rollout/all_correct_frac": float(np.mean([g.all_correct for g in groups])),
            "rollout/all_wrong_frac": float(np.mean([g.all_wrong for g in groups])),
            "rollout/response_len": float(np.mean(np.concatenate([g.lengths for g in groups]))),
            "perf/step_time": t_after - t_step,
            **{f"perf/{k}_time": v for k, v in phase.items()},
            **{f"perf/cum_{k}_time": v for k, v in clock.items()},
            "perf/peak_rss_gib": _peak_rss_gib(),
        })
        step_metrics.update(ctx.rolled.metrics())
        if engine.external:
            step_metrics.update(engine.metrics())
            step_metrics["rollout/engine_staleness"] = step - 1 - staleness_base
        if engine_diff is not None:
            step_metrics["rollout/engine_logprob_abs_diff"] = engine_diff
        flops_now = accountant.metrics()
        step_metrics.update(flops_now)
        step_seconds = t_after - t_step
        step_model_flops = (flops_now["perf/pflops_formula"]
                            - flops_seen["perf/pflops_formula"]) * 1e15
        step_tokens = flops_now["perf/tokens"] - flops_seen["perf/tokens"]
        flops_seen = flops_now
        step_metrics["perf/tokens_per_s"] = step_tokens / max(step_seconds, 1e-9)
        step_metrics["perf/mfu"] = perf.mfu(step_model_flops, step_seconds)
        step_metrics.update({f"select/{k}": v for k, v in selector.metrics().items()})
        # Cumulative evidence that the method's mechanism ran (selection/base.py).
        step_metrics.update({f"mech/{k}": v
                             for k, v in getattr(selector, "mechanisms", dict)().items()})
        crossed = every_r and (ctx.counters["rollouts"] // every_r > rollouts_before // every_r)
        if (config.eval.every and step % config.eval.every == 0) or crossed or last:
            t0 = time.perf_counter()
            last_eval = evaluate(params, step)
            clock["eval"] += time.perf_counter() - t0
            step_metrics.update(last_eval)
            step_metrics["evalset/correct_counts"] = list(eval_counts)
            step_metrics["perf/eval_time"] = time.perf_counter() - t0
            step_metrics["perf/cum_eval_time"] = clock["eval"]
        writer.write(step, step_metrics)
        if bad_steps >= config.rl.max_bad_steps:
            writer.close()
            ckpt.wait()
            raise RunError(f"step {step}: non-finite loss or gradient norm in {bad_steps} "
                           f"steps in a row (rl.max_bad_steps={config.rl.max_bad_steps}); the "
                           "parameters were left at their last finite values, which the newest "
                           "checkpoint holds. Lower rl.learning_rate or check the rewards")
        bar.update(step, ctx.counters["rollouts"], float(rewards.mean()), last_eval, task.buckets,
                   config.eval.k)
        preempted = preemption.requested()  # agreed by every process
        if step % config.checkpoint.every == 0 or last or preempted:
            save(step)
        if config.export.every and step % config.export.every == 0:
            host_params = distributed.to_host(params) if jax.process_count() > 1 else params
            if primary:
                out = export.export_params(
                    graphdef, host_params, mcfg, tokenizer,
                    os.path.join(config.export.dir or os.path.join(workdir, "export"),
                                 f"step_{step}"))
                say(f"exported the policy at step {step} to {out}")
        profile.end(step)
        if preempted:
            log.warning("preempted: checkpointed step %d; rerun the same command to resume",
                        step)
            break
    preemption.uninstall()
    profile.close()
    bar.close()
    if step > start_step:
        say(_eval_line(step, last_eval, task.buckets, config.eval.k))
    ckpt.close()  # waits for the last (async) save to be complete on disk
    writer.close()
    if not primary or preempted:
        return last_eval
    with open(os.path.join(workdir, "final_metrics.json"), "w") as f:
        json.dump({"step": step, "rollouts": ctx.counters["rollouts"], **last_eval}, f,
                  indent=2)
    return last_eval


def _eval_line(step: int, ev: dict, buckets, k: int) -> str:
    parts = [f"{b} {ev.get(f'eval/avg@{k}/{b}', float('nan')):.1f}" for b in buckets]
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
    """A tqdm bar showing step (or rollouts, under a budget), mean reward and the last eval."""

    def __init__(self, enabled: bool, start: int, total: int, budget: int = 0,
                 rollouts: int = 0):
        self._bar = None
        self._budget = budget
        if enabled:
            from tqdm import tqdm

            if budget:
                self._bar = tqdm(total=budget, initial=min(rollouts, budget), desc="rl rollouts",
                                 dynamic_ncols=True)
            else:
                self._bar = tqdm(total=total, initial=start, desc="rl", dynamic_ncols=True)

    def update(self, step, rollouts, reward, last_eval, buckets, k):
        if self._bar is None:
            return
        ev = "/".join(f"{last_eval.get(f'eval/avg@{k}/{b}', float('nan')):.0f}" for b in buckets)
        if self._budget:
            self._bar.set_postfix_str(f"step {step} reward {reward:+.2f} avg@{k} {ev}")
            self._bar.update(min(rollouts, self._budget) - self._bar.n)
        else:
            self._bar.set_postfix_str(f"rollouts {rollouts:,} reward {reward:+.2f} avg@{k} {ev}")
            self._bar.update(1)

    def close(self):
        if self._bar is not None:
            self._bar.close()
