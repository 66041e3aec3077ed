"""The `rl` config section: every field of the RL update (loss, batch, budgets, optimizer, clip
range, KL, rollout corrections, staleness, layout, health), declared once with its default and
check (run/fields.py), and the sections of each registered loss and advantage estimator
(rl/objectives.py). config_lib assembles it with the other components' sections."""

from __future__ import annotations

import ml_collections

from frontier_rl.rl import losses, objectives
from frontier_rl.run import fields
from frontier_rl.run.fields import int_, nonneg, nonneg_int, one_of, pos, pos_int


def objective_sections() -> dict[str, ml_collections.ConfigDict]:
    """`losses` and `estimators`: each registered loss's and advantage estimator's fields."""
    out = {"losses": ml_collections.ConfigDict(), "estimators": ml_collections.ConfigDict()}
    for name in objectives.loss_names():
        out["losses"][name] = ml_collections.ConfigDict(objectives.loss(name).defaults)
    for name in objectives.estimator_names():
        out["estimators"][name] = ml_collections.ConfigDict(
            objectives.estimator(name).defaults)
    return out


def _one_budget(cfg) -> None:
    budgets = [f for f in ("rollout_budget", "token_budget", "pflops_budget") if cfg.rl.get(f)]
    if len(budgets) > 1:
        raise fields.ConfigError(f"rl.{budgets[1]}={cfg.rl[budgets[1]]!r} is not allowed with "
                                 f"rl.{budgets[0]}={cfg.rl[budgets[0]]!r}: a run has one "
                                 "budget")


def _minibatches(cfg) -> None:
    rows = cfg.rl.batch_size * cfg.rl.group_size
    fields.check(cfg, "rl.minibatches", lambda x: rows % x == 0,
                 f"a divisor of rl.batch_size * rl.group_size = {rows}")


def _trusting_the_engine(cfg) -> None:
    """With rl.recompute_old_logp='never' the sampler's log-probs are the old policy's: they
    must be of the untruncated distribution, and nothing may need the trainer's."""
    if cfg.rl.recompute_old_logp != "never":
        return
    fields.check(cfg, "rollout.top_p", lambda x: x == 1.0,
                 "1.0 with rl.recompute_old_logp='never' (the sampler's log-probs are of the "
                 "untruncated distribution)")
    fields.check(cfg, "rollout.top_k", lambda x: x == -1,
                 "-1 (off) with rl.recompute_old_logp='never' (the sampler's log-probs are of "
                 "the untruncated distribution)")
    fields.check(cfg, "rl.tis_cap", lambda x: x == 0,
                 "0 with rl.recompute_old_logp='never' (TIS needs the trainer's log-probs)")
    fields.check(cfg, "rl.rollout_rs", lambda x: x == "",
                 "'' with rl.recompute_old_logp='never' (rejection needs the trainer's "
                 "log-probs)")


def _micro_batch(cfg) -> None:
    mb_rows = cfg.rl.batch_size * cfg.rl.group_size // cfg.rl.minibatches
    fields.check(cfg, "rl.micro_batch_size", lambda x: isinstance(x, int) and x >= 0
                 and (x == 0 or mb_rows % x == 0),
                 f"0 or a divisor of the minibatch's {mb_rows} rows (rl.batch_size * "
                 "rl.group_size / rl.minibatches)")


def _overlong(cfg) -> None:
    cap = cfg.rollout.max_new_tokens
    fields.check(cfg, "rl.overlong_buffer", lambda x: isinstance(x, int) and 0 <= x < cap,
                 f"an integer in [0, rollout.max_new_tokens={cap})")


def _objectives(cfg) -> None:
    """The chosen loss's and estimator's own sections, by their registered checks."""
    for field, name, entry in (("losses", cfg.rl.loss, objectives.loss(cfg.rl.loss)),
                               ("estimators", cfg.rl.adv_estimator,
                                objectives.estimator(cfg.rl.adv_estimator))):
        section = cfg.rl[field].get(name) if field in cfg.rl else None
        if section is None:
            raise fields.ConfigError(f"rl.{field}.{name} is missing: the config has no section "
                                     f"for the chosen {name!r} (default_config() builds one "
                                     "per entry)")
        if entry.validate is not None:
            fields.as_config_error(lambda entry=entry, section=section: entry.validate(
                section, cfg.rl))


def config_section() -> fields.Section:
    """`rl`: the RL update. `loss` picks the registered policy loss (rl/objectives.py): "grpo"
    (clipped surrogate, seq-mean-token-mean, optional KL), "dapo" (the same, token-mean, no
    KL), "gspo" (sequence-level ratio, rl/gspo.py) or "cispo" (clipped stop-gradient IS
    weight, rl/cispo.py); each loss's own fields live in rl.losses.<name>. eps_low/eps_high
    are the clip range of grpo and dapo; `loss_agg` overrides the loss's aggregation
    ("token_mean", "seq_mean_token_mean", "token_sum", "seq_mean_token_sum",
    "seq_mean_token_sum_norm" = Dr. GRPO's; "" = the loss's own; rl/losses.py).

    One declaration of 41 fields, each with its comment: long as the section is, not as logic
    is."""
    rs_on = lambda cfg: bool(cfg.rl.rollout_rs)  # noqa: E731  (the bounds matter only then)
    return (
        fields.Section("rl", config_section.__doc__)
        .field("loss", "grpo", lambda x: x in objectives.loss_names(),
               f"one of {objectives.loss_names()}")
        .field("group_size", 8, lambda x: pos_int(x) and x >= 2, "an integer >= 2 (G)")
        .field("batch_size", 64, pos_int, "an integer >= 1 (B)")  # prompts per step
        .field("num_steps", 250, nonneg_int, "an integer >= 0")
        # Matched budgets: with rollout_budget > 0 the run ends at the step boundary nearest
        # this many rollouts (every generated response counts, see docs/architecture.md
        # "Accounting"); num_steps stays an upper bound on steps.
        .field("rollout_budget", 0, nonneg_int,
               "an integer >= 0 (0 = no budget; the run ends after rl.num_steps)")
        # The same in generated response tokens, or in measured PFLOPs (every program charged,
        # selection's forward passes included): a run has at most one budget (run/budget.py).
        .field("token_budget", 0, nonneg_int,
               "an integer >= 0 (generated response tokens; 0 = no token budget)")
        .field("pflops_budget", 0.0, nonneg,
               "a number >= 0 (measured PFLOPs; 0 = no PFLOPs budget)")
        .rule(_one_budget)
        # Adam's first updates move every weight by ~lr in the gradient's sign direction; on
        # the ~120k-parameter embedded policy 3e-4 changed response log-probs by ~1.8 nats in
        # one update and collapsed it, 1e-4 trains stably.
        .field("learning_rate", 1e-4, pos, "a number > 0")
        .field("b1", 0.9, lambda x: 0 <= x < 1, "a number in [0, 1)")
        .field("b2", 0.99, lambda x: 0 <= x < 1, "a number in [0, 1)")
        .field("weight_decay", 0.0)
        .field("grad_clip", 1.0, pos, "a number > 0")
        .field("warmup_steps", 0)
        .field("epochs", 2, pos_int, "an integer >= 1")  # PPO epochs over each batch
        .field("minibatches", 2, pos_int, "an integer >= 1")  # optimizer updates per epoch
        .rule(_minibatches)
        .field("eps_low", 0.2, lambda x: 0 < x < 1, "a number in (0, 1)")
        .field("eps_high", 0.28, pos, "a number > 0")
        # dual-clip bound c for negative advantages; 0 = no dual clip
        .field("clip_ratio_c", 10.0, lambda x: x == 0 or x > 1,
               "0 (no dual clip) or a number > 1")
        .field("kl_coef", 0.0, nonneg, "a number >= 0")  # beta; not with dapo
        # The KL estimator of the kl_coef term (rl/losses.py): "k1", "abs", "k2", "k3" (verl's
        # low_var_kl) or "k1+" / "abs+" / "k3+" (the value of k1 / abs / k3, the gradient of
        # k2).
        .field("kl_estimator", "k3", one_of(*losses.KL_ESTIMATORS),
               f"one of {list(losses.KL_ESTIMATORS)}")
        .field("loss_agg", "", one_of("", *losses.AGGREGATIONS),
               "'' (the loss's own) or one of " + ", ".join(map(repr, losses.AGGREGATIONS)))
        # The constant L of loss_agg="seq_mean_token_sum_norm" (verl's loss_scale_factor); 0 =
        # rollout.max_new_tokens.
        .field("loss_scale_factor", 0, nonneg_int,
               "an integer >= 0 (tokens; 0 = rollout.max_new_tokens)")
        # |log pi - log pi_old| is clamped to this before exp in the ratio (verl's 20); 0 =
        # never.
        .field("log_ratio_clamp", 20.0, nonneg, "a number >= 0 (0 = no clamp; verl's is 20)")
        # Entropy bonus: the loss less entropy_coef x the response tokens' entropy, aggregated
        # as the loss (verl's actor.entropy_coeff); 0 = none.
        .field("entropy_coef", 0.0, nonneg, "a number >= 0 (0 = no entropy bonus)")
        # Truncated importance sampling against the rollout engine's log-probs (losses.py):
        # per-token weight min(exp(old_logp - rollout_logp), tis_cap); 0 = off. Matters when
        # the trainer recomputes old log-probs (an external engine, rollout.top_p < 1 or
        # rollout.top_k).
        .field("tis_cap", 0.0, lambda x: nonneg(x) and (x == 0 or x >= 1),
               "0 (off) or a cap >= 1 on the importance weight (verl uses 2)")
        # The TIS weight per "token" (min(rho_t, tis_cap)) or per "sequence" (min(prod_t
        # rho_t, tis_cap) on all of a response's tokens); verl's rollout_is.
        .field("rollout_is", "token", one_of(*losses.ROLLOUT_IS),
               f"one of {list(losses.ROLLOUT_IS)}")
        # Rejection against the rollout engine's log-probs: "" = off; "sequence" / "geometric"
        # drop from the loss every response whose ratio prod_t rho_t / its geometric mean lies
        # outside [rs_low, rs_high] (verl's seq_sum_k1 / seq_mean_k1 with reciprocal bounds).
        .field("rollout_rs", "", one_of(*losses.ROLLOUT_RS),
               f"one of {list(losses.ROLLOUT_RS)}")
        .field("rs_low", 0.5, lambda x: pos(x) and x <= 1,
               "a number in (0, 1] (an on-policy response, ratio 1, is always kept)",
               when=rs_on)
        .field("rs_high", 2.0, lambda x: nonneg(x) and x >= 1,
               "a number >= 1 (an on-policy response, ratio 1, is always kept)", when=rs_on)
        # Old-policy log-probs for the PPO ratio: "auto" recomputes them with the trainer when
        # the sampler's are not the trainer's (an external engine, or rollout.top_p < 1 or a
        # rollout.top_k, whose sampled distribution is truncated, or rl.staleness >= 1);
        # "always" also does it for the embedded engine, so a run through a server can be
        # compared with an embedded one bit for bit; "never" trusts the engine's (no
        # engine_logprob_abs_diff, no TIS; not with top_p < 1 or a top_k).
        .field("recompute_old_logp", "auto", one_of("auto", "always", "never"),
               "'auto', 'always' or 'never'")
        .rule(_trusting_the_engine)
        # Rollouts that overlap the update (rollout/pipeline.py): the groups of step t+k are
        # built under the parameters of step t-1 while step t's update runs, so a trained group
        # lags the trainer by at most k updates; 0 = build, then update (the synchronous loop).
        .field("staleness", 0, lambda x: int_(x) and 0 <= x <= 8,
               "an integer from 0 (synchronous) to 8")
        # DAPO's L_cache (tokens), with either loss; 0 disables shaping
        .field("overlong_buffer", 0).rule(_overlong)
        .field("overlong_penalty", 1.0)
        # GRPO's advantage A_i = (r_i - mean r) / std r within a group; False drops the
        # division (A_i = r_i - mean r), as Dr. GRPO and PCL's GRPO variant do.
        .field("adv_std_norm", True, fields.boolean, "True or False")
        # The advantage estimator (rl/advantages.py): "grpo" (as above), "rloo" (leave-one-out
        # baseline) or "reinforce_plus_plus_baseline" (group baseline, batch whitening); each
        # estimator's own fields live in rl.estimators.<name>.
        .field("adv_estimator", "grpo", lambda x: x in objectives.estimator_names(),
               f"one of {objectives.estimator_names()}")
        # Rows per forward/backward inside one optimizer update (gradients are accumulated
        # over the minibatch's micro-batches); 0 = the whole minibatch at once.
        .field("micro_batch_size", 0).rule(_micro_batch)
        # How a step's responses are laid out in the train step's rows (rl/batch.py): "pad"
        # (every row the longest prompt + the full token cap), "trim" (one response per row,
        # the batch as long as its longest sequence) or "pack" (several responses per row,
        # segment-masked attention: about the tokens that exist). The three give the same loss
        # and gradient to float rounding (tests/test_batch_layouts.py); the embedded runs keep
        # "pad", the layout their published figures were measured with. Minibatches
        # (rl.minibatches) are drawn over the rows, so in "pack" the responses sharing a row
        # share a minibatch.
        .field("packing", "pad", one_of("pad", "trim", "pack"), "'pad', 'trim' or 'pack'")
        # A non-finite loss or gradient norm skips that update (train/skipped_updates); this
        # many bad steps in a row stop the run.
        .field("max_bad_steps", 3, pos_int, "an integer >= 1")
        # The gradient noise scale B_noise (rl/noise.py, McCandlish et al. 2018), measured
        # every `noise_every` steps (0 = never) from the gradients of `noise_parts` contiguous
        # chunks of the step's groups and of the whole batch, at the same parameters: one extra
        # forward and backward pass, nothing the run computes changes.
        .field("noise_every", 10, nonneg_int,
               "an integer >= 0 (0: never measure the gradient noise scale)")
        .field("noise_parts", 4, lambda x: int_(x) and x >= 2,
               "an integer >= 2 (chunks of the batch, the small batch of the estimate)")
        # The collapse watch (run/health.py): this many collapsed steps in a row stop the run,
        # the collapsed policy's checkpoints set aside so a resume restores the last good one
        # (a step is collapsed when its gradient norm is exactly 0 though some group had reward
        # variance, or when the policy's entropy is below 1e-4 with no group of non-zero reward
        # variance and no correct response); 0 turns the watch off.
        .field("collapse_steps", 10, nonneg_int,
               "an integer >= 0 (collapsed steps in a row that stop the run; 0 = off)")
        .subs(objective_sections)
        .rule(_objectives))
