"""The config schema: every knob, its default (the embedded CPU run) and its allowed values.

Experiment files in `configs/` start from `default_config()` and change what they need. A
config is validated when it is built (`get_config` calls `validate`) and again after command-line
overrides, before anything is compiled; a bad value raises `ConfigError` naming the field, the
value and what is allowed.
"""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Callable
from typing import Any

import ml_collections


class ConfigError(ValueError):
    pass


def default_config() -> ml_collections.ConfigDict:
    """Every knob at its default (the embedded CPU run), one section per function below."""
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.task = _task_section()
    c.model = _model_section()
    c.warmstart = _warmstart_section()
    c.pool = _pool_section()
    c.rollout = _rollout_section()
    c.rl = _rl_section()
    c.selector = _selector_section()
    c.eval = _eval_section()
    c.checkpoint = _checkpoint_section()
    c.mesh = _mesh_section()
    c.export = _export_section()
    c.fit = _fit_section()
    c.log = _log_section()
    return c


def validate(cfg: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """Raises ConfigError on the first bad field; returns cfg unchanged otherwise."""
    _check(cfg, "seed", lambda x: isinstance(x, int) and x >= 0, "an integer >= 0")
    _check_task(cfg)
    _check_model(cfg)
    _check(cfg, "log.wandb_mode", lambda x: x in ("auto", "online", "offline"),
           "one of auto, online, offline")
    _check_pool(cfg)
    _check_warmstart(cfg)
    _check_rollout(cfg)
    _check_rl(cfg)
    _check_selector(cfg)
    _check_eval(cfg)
    _check_checkpoint(cfg)
    _check_mesh(cfg)
    _check_export(cfg)
    _check_fit(cfg)
    _check(cfg, "log.profile_steps", lambda x: isinstance(x, str) and all(
        p.strip().isdigit() for p in x.split(",") if p.strip()),
        "comma-separated step numbers, e.g. '5,6' ('' disables)")
    return cfg


def _task_section() -> ml_collections.ConfigDict:
    """The task: prompts + verifier. "arith" is the embedded procedural task (see tasks/arith.py);
    "gym:<dataset>" any reasoning-gym dataset; "corpus" a local jsonl/parquet/TFDS corpus.
    Every field but `name` goes to the task's builder; a config for another task replaces
    this section (e.g. c.task = ConfigDict(dict(name="corpus", path="data/math.jsonl"))).
    With only `name` changed (--config.task.name=gym:<dataset>), the arith fields below are
    ignored while they hold these defaults; one set to anything else is an error naming it."""
    task = ml_collections.ConfigDict()
    task.name = "arith"
    task.min_operands = 2
    task.max_operands = 5
    task.min_digits = 1
    task.max_digits = 3
    task.reverse_digits = True
    task.train_size = 20000
    task.eval_per_bucket = 128
    task.eval_sizes = ""  # per-bucket overrides of eval_per_bucket, e.g. "4op:1024"
    return task


def _check_task(cfg: ml_collections.ConfigDict) -> None:
    _check(cfg, "task.name", lambda x: isinstance(x, str) and bool(x),
           "'arith', 'gym:<reasoning-gym dataset>' or 'corpus'")
    if cfg.task.name == "arith":
        _check(cfg, "task.min_operands", lambda x: _pos_int(x) and x >= 2, "an integer >= 2")
        _check(cfg, "task.max_operands", lambda x: _pos_int(x) and x >= cfg.task.min_operands,
               f"an integer >= task.min_operands={cfg.task.min_operands}")
        _check(cfg, "task.min_digits", _pos_int, "an integer >= 1")
        _check(cfg, "task.max_digits", lambda x: _pos_int(x) and x >= cfg.task.min_digits,
               f"an integer >= task.min_digits={cfg.task.min_digits}")
        _check(cfg, "task.train_size", _pos_int, "an integer >= 1")
        _check(cfg, "task.eval_per_bucket", _pos_int, "an integer >= 1")
        if cfg.task.get("eval_sizes"):
            from frontier_rl.tasks import arith

            try:
                arith.eval_sizes(dict(cfg.task), arith.buckets_of(dict(cfg.task)))
            except ValueError as e:
                raise ConfigError(str(e)) from None
    if cfg.task.name == "corpus":
        _check(cfg, "task.path", lambda x: isinstance(x, str) and bool(x),
               "a .jsonl/.parquet path or tfds:<name>")
    from frontier_rl import tasks  # the task registry: fields per family, cheap checks

    try:
        tasks.check_config(cfg.task.name, cfg.task)
    except (ValueError, ImportError) as e:
        raise ConfigError(f"task.name={cfg.task.name!r}: {e}") from None
    if cfg.task.name.startswith("gym:") and not cfg.model.path:
        # Char-level policy: every character of the answer format is a generated token, so a
        # cap below the format's own length makes every rollout unfinished (-1).
        template = cfg.task.get("response_template", tasks.gym.DEFAULTS["response_template"])
        need = len(str(template).replace("{answer}", "")) + 2  # one answer character, EOS
        _check(cfg, "rollout.max_new_tokens", lambda x: x >= need,
               f"an integer >= {need} for the task's response format {template!r} (each "
               "character is a token; leave room for the answer)")


def _model_section() -> ml_collections.ConfigDict:
    """The policy. With `path` set, a Hugging Face directory (config.json + *.safetensors +
    tokenizer) is loaded; otherwise a random model of this shape is built."""
    model = ml_collections.ConfigDict()
    model.path = ""
    model.family = "qwen3"
    model.hidden_size = 64
    model.intermediate_size = 256
    model.num_layers = 2
    model.num_heads = 4
    model.num_kv_heads = 2
    model.head_dim = 16
    model.rope_theta = 10000.0
    model.tie_word_embeddings = True
    # A named architecture (models/presets.py: "qwen2.5-math-1.5b", "qwen3-8b", ...) replaces the
    # shape fields above, with the real vocabulary size (random init; configs/scale.py).
    model.preset = ""
    # Precision: master parameters and optimizer state in `param_dtype`; the forward pass in
    # `dtype` ("auto" = float32 for a random model, the stored dtype of a loaded checkpoint:
    # bfloat16 for every Qwen release). bfloat16 master weights would lose lr-1e-6 updates.
    model.param_dtype = "float32"
    model.dtype = "auto"
    # Memory: attention kernel ("xla"; "cudnn" = flash attention on NVIDIA GPUs; "auto" picks
    # cudnn on a GPU in 16-bit compute), activation rematerialisation per layer ("none",
    # "full", "dots" = keep matmul outputs), a lax.scan over the layers (one compiled layer),
    # and the sequence chunk in which log-probs/entropies are computed from the final hidden
    # states (so no [rows, L, vocab] float32 array is ever built).
    model.attention = "xla"
    model.attention_chunk = 0  # query positions per attention block on XLA; 0 = all at once
    model.remat = "none"
    model.scan_layers = False
    model.logits_chunk = 512
    return model


def _check_model(cfg: ml_collections.ConfigDict) -> None:
    _check(cfg, "model.family", _in("qwen3", "qwen2", "llama"), "'qwen3', 'qwen2' or 'llama'")
    for f in ("hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads",
              "head_dim"):
        _check(cfg, f"model.{f}", _pos_int, "an integer >= 1")
    _check(cfg, "model.num_heads", lambda x: x % cfg.model.num_kv_heads == 0,
           f"a multiple of model.num_kv_heads={cfg.model.num_kv_heads}")
    _check(cfg, "model.dtype", _in("auto", "float32", "bfloat16"),
           "'auto', 'float32' or 'bfloat16'")
    _check(cfg, "model.param_dtype", _in("float32", "bfloat16"), "'float32' or 'bfloat16'")
    from frontier_rl.models import presets

    _check(cfg, "model.preset", lambda x: x == "" or x in presets.PRESETS,
           f"'' or one of {sorted(presets.PRESETS)}")
    _check(cfg, "model.attention", _in("auto", "xla", "cudnn"), "'auto', 'xla' or 'cudnn'")
    _check(cfg, "model.remat", _in("none", "full", "dots"), "'none', 'full' or 'dots'")
    _check(cfg, "model.attention_chunk", lambda x: isinstance(x, int) and not isinstance(
        x, bool) and x >= 0, "an integer >= 0 (query positions per block; 0 = all at once)")
    _check(cfg, "model.scan_layers", lambda x: isinstance(x, bool), "True or False")
    _check(cfg, "model.logits_chunk", lambda x: isinstance(x, int) and x >= 0,
           "an integer >= 0 (0 = the whole sequence at once)")


def _warmstart_section() -> ml_collections.ConfigDict:
    """Supervised warm start on the easy slice, cached in DIR/warmstart so reruns skip it."""
    warmstart = ml_collections.ConfigDict()
    warmstart.enabled = True
    warmstart.buckets = ""  # comma-separated; "" = the task's easier half (arith: 2op,3op)
    # The starting point by construction (warmstart.py): every batch holds a fixed share
    # `frontier_dose` of examples from the frontier bucket (the one just harder than
    # `buckets`), so its accuracy rises steadily instead of depending on whether a tiny policy
    # generalises to longer prompts. Every `check_every` steps the policy decodes `check_size`
    # held-out prompts of the easy buckets and of the frontier bucket greedily; training stops
    # at the first check with easy exact match >= `target_acc` and frontier exact match >=
    # `frontier_min` (0 = no frontier condition; target_acc 0 = train all `steps`). `steps` caps
    # an attempt; an attempt outside the regime at its cap is redone from a fresh init with the
    # next seed, up to `attempts`, then the run stops with an error.
    warmstart.target_acc = 0.8
    warmstart.frontier_min = 0.1
    warmstart.frontier_dose = 0.1
    # A check that passes the easy target but not the frontier's raises the dose by
    # `frontier_dose`, up to this share (0 = never): a seed that learns 2op/3op without
    # generalising to 4op (seed 9 of the comparison pool: 85% easy, 4-7% 4op for 3,000 steps at
    # a dose of 0.1) is taught more of the frontier; a seed that reaches both together is not
    # affected.
    warmstart.frontier_dose_max = 0.5
    warmstart.check_every = 100
    warmstart.check_size = 256
    warmstart.steps = 8000  # cap of one attempt
    warmstart.attempts = 3  # an attempt outside the regime at its cap is redone, seed + 1
    warmstart.target_loss = 0.0  # also stop once the loss EMA is below this; 0 disables
    warmstart.batch_size = 128
    # Peak rate (3e-3 left seed 0 on its loss plateau ~700 steps longer), held until the first
    # check with easy exact match >= `escape_acc` (the plateau is over, whenever that is), then
    # cosine-decayed to 5% over `decay_steps` (warmstart.train).
    warmstart.learning_rate = 1e-2
    warmstart.warmup_steps = 50
    warmstart.escape_acc = 0.3
    warmstart.decay_steps = 2000
    # Stall rules (warmstart.train): with no check at `escape_acc` by step `escape_by` the decay
    # starts anyway (0 = never); once the decay is at its floor, `patience` checks without a
    # gain of 0.01 in the best easy exact match restart it from the peak (0 = never).
    warmstart.escape_by = 4000
    warmstart.patience = 5
    # Where the warm start is cached; "" = DIR/warmstart. `compare` points every run at one
    # shared cache so all methods start from the same policy.
    warmstart.cache_dir = ""
    # A shipped start (a directory with start.json, `frontier-rl start`): the policy is loaded
    # from it, its files checked against the digests start.json records, and no warm start is
    # trained or cached; "" = none. Comparisons on a testbed load their starts this way.
    warmstart.start = ""
    warmstart.seed = -1  # seed of the warm start's init and data; -1 = the run's `seed`
    return warmstart


def _check_warmstart(cfg: ml_collections.ConfigDict) -> None:
    _check(cfg, "warmstart.steps", lambda x: isinstance(x, int) and x >= 0, "an integer >= 0")
    _check(cfg, "warmstart.batch_size", _pos_int, "an integer >= 1")
    _check(cfg, "warmstart.learning_rate", _pos, "a number > 0")
    _check(cfg, "warmstart.target_loss", _nonneg, "a number >= 0 (0 disables early stopping)")
    _check(cfg, "warmstart.target_acc", lambda x: _nonneg(x) and x <= 1,
           "a number in [0, 1] (0 trains all warmstart.steps)")
    _check(cfg, "warmstart.frontier_min", lambda x: _nonneg(x) and x <= 1,
           "a number in [0, 1] (0 disables the frontier check)")
    _check(cfg, "warmstart.frontier_dose", lambda x: _nonneg(x) and x < 1,
           "a number in [0, 1) (share of each batch from the frontier bucket; 0 = none)")
    _check(cfg, "warmstart.frontier_dose_max", lambda x: _nonneg(x) and x < 1,
           "a number in [0, 1) (the most the frontier dose is raised to; 0 = never raised)")
    _check(cfg, "warmstart.escape_acc", lambda x: _nonneg(x) and x <= 1,
           "a number in [0, 1] (0: the decay starts after the warmup and lasts to the cap)")
    _check(cfg, "warmstart.decay_steps", _pos_int, "an integer >= 1")
    _check(cfg, "warmstart.escape_by", lambda x: isinstance(x, int) and x >= 0,
           "an integer >= 0 (0: the decay waits for escape_acc)")
    _check(cfg, "warmstart.patience", lambda x: isinstance(x, int) and x >= 0,
           "an integer >= 0 (0: no restart)")
    _check(cfg, "warmstart.check_every", _pos_int, "an integer >= 1")
    _check(cfg, "warmstart.attempts", _pos_int, "an integer >= 1")
    _check(cfg, "warmstart.check_size", _pos_int, "an integer >= 1")
    _check(cfg, "warmstart.seed", lambda x: isinstance(x, int) and x >= -1,
           "an integer >= 0, or -1 for the run's seed")


def _pool_section() -> ml_collections.ConfigDict:
    """The training pool's composition by the starting policy's pass rate (tasks/composition.py):
    "solved=0.25,unsolved=0.25,frontier=0.5" keeps pool.size prompts of the task's train split
    in these shares, each candidate measured with pool.k samples before the first step.
    "" = the task's pool as generated."""
    pool = ml_collections.ConfigDict()
    pool.composition = ""
    pool.size = 0  # prompts kept; 0 = as many as the task has candidates
    pool.k = 8
    return pool


def _check_pool(cfg: ml_collections.ConfigDict) -> None:
    if "pool" in cfg:
        _check(cfg, "pool.size", lambda x: isinstance(x, int) and x >= 0, "an integer >= 0")
        _check(cfg, "pool.k", lambda x: _pos_int(x) and x >= 2, "an integer >= 2")
        if cfg.pool.composition:
            from frontier_rl.tasks import composition

            try:
                composition.parse(cfg.pool.composition)
            except ValueError as e:
                raise ConfigError(str(e)) from None


def _rollout_section() -> ml_collections.ConfigDict:
    """Rollouts."""
    rollout = ml_collections.ConfigDict()
    rollout.temperature = 1.0
    rollout.top_p = 1.0
    # Sampling top-k: draw among the k most likely tokens only; -1 = off (SGLang's convention,
    # which refuses 0). With top_p < 1 the nucleus is taken within the k (sampler.py).
    rollout.top_k = -1
    rollout.max_new_tokens = 8
    # Longest prompt in tokens (verl's max_prompt_length): longer train and eval prompts are
    # dropped at load, with their count logged (task/overlong_*), never sent to an engine. 0 =
    # what the model can serve: its context (max_position_embeddings) less max_new_tokens, the
    # bound SGLang rejects a batch over; a set value is capped there too.
    rollout.max_prompt_len = 0
    rollout.entropy_batch = 256  # rows per prompt-entropy forward pass (HIVE Stage 2)
    # Rows the embedded sampler generates at once (whole prompts; 0 = a call's rows at once).
    # Its KV cache is dense, rows x (prompt + max_new_tokens): at the papers' sizes this is what
    # makes generation fit (`frontier-rl fit` compiles the sampler for this many rows).
    rollout.rows_per_call = 0
    # Where tokens come from (rollout/engine.py): "jax" = the in-process sampler; "sglang" = an
    # HTTP server speaking SGLang's native API (real SGLang, or `frontier-rl serve`).
    rollout.engine = "jax"
    rollout.sync_every = 1  # steps between weight syncs to an external engine (staleness)
    rollout.sync_dir = ""  # where the policy is exported for the server; "" = DIR/sync
    # Largest |engine - trainer| mean token log-prob on the probe sequence after a sync. A bf16
    # engine and trainer differ by ~0.011 nats/token with the right weights (SGLang and vLLM
    # against Megatron at step 0, vllm-project/vime#64); other weights differ by ~0.1 and more.
    # `frontier-rl serve` (the trainer's own sampler) agrees to ~1e-6: tighten it there.
    rollout.probe_tol = 0.05
    # Each registered engine's own fields live in rollout.<name> (rollout/engines.py); the
    # SGLang client's (rollout.sglang.url, timeouts, retries) are in rollout/sglang.py.
    from frontier_rl.rollout import engines

    for name, section in engines.sections().items():
        rollout[name] = section
    return rollout


def _check_rollout(cfg: ml_collections.ConfigDict) -> None:
    from frontier_rl.rollout import engines  # registry of rollout engines

    _check(cfg, "rollout.temperature", _pos, "a number > 0")
    _check(cfg, "rollout.top_p", lambda x: _pos(x) and x <= 1, "a number in (0, 1]")
    _check(cfg, "rollout.top_k", _top_k, _TOP_K_ALLOWED)
    _check(cfg, "rollout.max_new_tokens", _pos_int, "an integer >= 1")
    _check(cfg, "rollout.max_prompt_len", lambda x: isinstance(x, int) and not isinstance(
        x, bool) and x >= 0, "an integer >= 0 (tokens; 0 = the model's context less "
           "rollout.max_new_tokens)")
    _check(cfg, "rollout.entropy_batch", _pos_int, "an integer >= 1")
    _check(cfg, "rollout.engine", _in(*engines.names()), f"one of {engines.names()}")
    _check(cfg, "rollout.sync_every", _pos_int, "an integer >= 1 (steps)")
    _check(cfg, "rollout.rows_per_call", lambda x: isinstance(x, int) and not isinstance(
        x, bool) and (x == 0 or x >= cfg.rl.group_size),
           f"0 (all at once) or an integer >= rl.group_size={cfg.rl.group_size} (whole prompts)")
    _check(cfg, "rollout.sync_dir", lambda x: isinstance(x, str), "a directory ('' = DIR/sync)")
    _check(cfg, "rollout.probe_tol", _pos, "a number > 0 (nats per token)")
    try:
        engines.validate(cfg)  # the chosen engine's own section (rollout.<name>)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _rl_section() -> ml_collections.ConfigDict:
    """The RL update. `loss` picks the registered policy loss (rl/objectives.py): "grpo"
    (clipped surrogate, seq-mean-token-mean, optional KL), "dapo" (the same, token-mean, no
    KL), "gspo" (sequence-level ratio, rl/gspo.py) or "cispo" (clipped stop-gradient IS
    weight, rl/cispo.py); each loss's own fields live in rl.losses.<name>. eps_low/eps_high
    are the clip range of grpo and dapo; `loss_agg` overrides the loss's aggregation
    ("token_mean", "seq_mean_token_mean", "token_sum", "seq_mean_token_sum",
    "seq_mean_token_sum_norm" = Dr. GRPO's; "" = the loss's own; rl/losses.py)."""
    rl = ml_collections.ConfigDict()
    rl.loss = "grpo"
    rl.group_size = 8  # G
    rl.batch_size = 64  # B, prompts per step
    rl.num_steps = 250
    # Matched budgets: with rollout_budget > 0 the run ends at the step boundary nearest this
    # many rollouts (every generated response counts, see docs/architecture.md "Accounting");
    # num_steps stays an upper bound on steps.
    rl.rollout_budget = 0
    # The same in generated response tokens, or in measured PFLOPs (every program charged,
    # selection's forward passes included): a run has at most one budget (run/budget.py).
    rl.token_budget = 0
    rl.pflops_budget = 0.0
    # Adam's first updates move every weight by ~lr in the gradient's sign direction; on the
    # ~120k-parameter embedded policy 3e-4 changed response log-probs by ~1.8 nats in one
    # update and collapsed it, 1e-4 trains stably.
    rl.learning_rate = 1e-4
    rl.b1 = 0.9
    rl.b2 = 0.99
    rl.weight_decay = 0.0
    rl.grad_clip = 1.0
    rl.warmup_steps = 0
    rl.epochs = 2  # PPO epochs over each batch
    rl.minibatches = 2  # optimizer updates per epoch
    rl.eps_low = 0.2
    rl.eps_high = 0.28
    rl.clip_ratio_c = 10.0  # dual-clip bound c for negative advantages; 0 = no dual clip
    rl.kl_coef = 0.0  # beta; not with dapo
    # The KL estimator of the kl_coef term (rl/losses.py): "k1", "abs", "k2", "k3" (verl's
    # low_var_kl) or "k1+" / "abs+" / "k3+" (the value of k1 / abs / k3, the gradient of k2).
    rl.kl_estimator = "k3"
    rl.loss_agg = ""
    # The constant L of loss_agg="seq_mean_token_sum_norm" (verl's loss_scale_factor); 0 =
    # rollout.max_new_tokens.
    rl.loss_scale_factor = 0
    # |log pi - log pi_old| is clamped to this before exp in the ratio (verl's 20); 0 = never.
    rl.log_ratio_clamp = 20.0
    # Entropy bonus: the loss less entropy_coef x the response tokens' entropy, aggregated as
    # the loss (verl's actor.entropy_coeff); 0 = none.
    rl.entropy_coef = 0.0
    # Truncated importance sampling against the rollout engine's log-probs (losses.py):
    # per-token weight min(exp(old_logp - rollout_logp), tis_cap); 0 = off. Matters when the
    # trainer recomputes old log-probs (an external engine, rollout.top_p < 1 or rollout.top_k).
    rl.tis_cap = 0.0
    # The TIS weight per "token" (min(rho_t, tis_cap)) or per "sequence" (min(prod_t rho_t,
    # tis_cap) on all of a response's tokens); verl's rollout_is.
    rl.rollout_is = "token"
    # Rejection against the rollout engine's log-probs: "" = off; "sequence" / "geometric"
    # drop from the loss every response whose ratio prod_t rho_t / its geometric mean lies
    # outside [rs_low, rs_high] (verl's seq_sum_k1 / seq_mean_k1 with reciprocal bounds).
    rl.rollout_rs = ""
    rl.rs_low = 0.5
    rl.rs_high = 2.0
    # Old-policy log-probs for the PPO ratio: "auto" recomputes them with the trainer when the
    # sampler's are not the trainer's (an external engine, or rollout.top_p < 1 or a
    # rollout.top_k, whose sampled distribution is truncated); "always" also does it for the
    # embedded engine, so a run through a server can be compared with an embedded one bit for
    # bit; "never" trusts the engine's (no engine_logprob_abs_diff, no TIS; not with top_p < 1
    # or a top_k).
    rl.recompute_old_logp = "auto"
    # Rollouts that overlap the update (rollout/pipeline.py): the groups of step t+k are built
    # under the parameters of step t-1 while step t's update runs, so a trained group lags the
    # trainer by at most k updates; 0 = build, then update (the synchronous loop).
    rl.staleness = 0
    rl.overlong_buffer = 0  # DAPO's L_cache (tokens), with either loss; 0 disables shaping
    rl.overlong_penalty = 1.0
    # GRPO's advantage A_i = (r_i - mean r) / std r within a group; False drops the division
    # (A_i = r_i - mean r), as Dr. GRPO and PCL's GRPO variant do.
    rl.adv_std_norm = True
    # The advantage estimator (rl/advantages.py): "grpo" (as above), "rloo" (leave-one-out
    # baseline) or "reinforce_plus_plus_baseline" (group baseline, batch whitening); each
    # estimator's own fields live in rl.estimators.<name>.
    rl.adv_estimator = "grpo"
    # Rows per forward/backward inside one optimizer update (gradients are accumulated over
    # the minibatch's micro-batches); 0 = the whole minibatch at once.
    rl.micro_batch_size = 0
    # How a step's responses are laid out in the train step's rows (rl/batch.py): "pad" (every
    # row the longest prompt + the full token cap), "trim" (one response per row, the batch as
    # long as its longest sequence) or "pack" (several responses per row, segment-masked
    # attention: about the tokens that exist). The three give the same loss and gradient to
    # float rounding (tests/test_batch_layouts.py); the embedded runs keep "pad", the layout
    # their published figures were measured with. Minibatches (rl.minibatches) are drawn over
    # the rows, so in "pack" the responses sharing a row share a minibatch.
    rl.packing = "pad"
    # A non-finite loss or gradient norm skips that update (train/skipped_updates); this many
    # bad steps in a row stop the run.
    rl.max_bad_steps = 3
    # The gradient noise scale B_noise (rl/noise.py, McCandlish et al. 2018), measured every
    # `noise_every` steps (0 = never) from the gradients of `noise_parts` contiguous chunks of
    # the step's groups and of the whole batch, at the same parameters: one extra forward and
    # backward pass, nothing the run computes changes.
    rl.noise_every = 10
    rl.noise_parts = 4
    # The collapse watch (run/health.py): this many collapsed steps in a row stop the run, the
    # collapsed policy's checkpoints set aside so a resume restores the last good one (a step
    # is collapsed when its gradient norm is exactly 0 though some group had reward variance,
    # or when the policy's entropy is below 1e-4 with no group of non-zero reward variance and
    # no correct response); 0 turns the watch off.
    rl.collapse_steps = 10
    rl.losses, rl.estimators = _objective_sections()
    return rl


def _objective_sections() -> tuple[ml_collections.ConfigDict, ml_collections.ConfigDict]:
    """Each registered loss's and advantage estimator's own fields (rl/objectives.py)."""
    from frontier_rl.rl import objectives

    losses = ml_collections.ConfigDict()
    for name in objectives.loss_names():
        losses[name] = ml_collections.ConfigDict(objectives.loss(name).defaults)
    estimators = ml_collections.ConfigDict()
    for name in objectives.estimator_names():
        estimators[name] = ml_collections.ConfigDict(objectives.estimator(name).defaults)
    return losses, estimators


def _check_rl(cfg: ml_collections.ConfigDict) -> None:
    from frontier_rl.rl import losses, objectives  # the loss and estimator registries

    _check(cfg, "rl.loss", _in(*objectives.loss_names()), f"one of {objectives.loss_names()}")
    _check(cfg, "rl.adv_estimator", _in(*objectives.estimator_names()),
           f"one of {objectives.estimator_names()}")
    _check(cfg, "rl.group_size", lambda x: _pos_int(x) and x >= 2, "an integer >= 2 (G)")
    _check(cfg, "rl.batch_size", _pos_int, "an integer >= 1 (B)")
    _check(cfg, "rl.num_steps", lambda x: isinstance(x, int) and x >= 0, "an integer >= 0")
    _check(cfg, "rl.rollout_budget", lambda x: isinstance(x, int) and x >= 0,
           "an integer >= 0 (0 = no budget; the run ends after rl.num_steps)")
    _check(cfg, "rl.token_budget", lambda x: isinstance(x, int) and x >= 0,
           "an integer >= 0 (generated response tokens; 0 = no token budget)")
    _check(cfg, "rl.pflops_budget", _nonneg,
           "a number >= 0 (measured PFLOPs; 0 = no PFLOPs budget)")
    budgets = [f for f in ("rollout_budget", "token_budget", "pflops_budget") if cfg.rl.get(f)]
    if len(budgets) > 1:
        raise ConfigError(f"rl.{budgets[1]}={cfg.rl[budgets[1]]!r} is not allowed with "
                          f"rl.{budgets[0]}={cfg.rl[budgets[0]]!r}: a run has one budget")
    _check(cfg, "rl.learning_rate", _pos, "a number > 0")
    _check(cfg, "rl.b1", lambda x: 0 <= x < 1, "a number in [0, 1)")
    _check(cfg, "rl.b2", lambda x: 0 <= x < 1, "a number in [0, 1)")
    _check(cfg, "rl.grad_clip", _pos, "a number > 0")
    _check(cfg, "rl.epochs", _pos_int, "an integer >= 1")
    _check(cfg, "rl.minibatches", _pos_int, "an integer >= 1")
    rows = cfg.rl.batch_size * cfg.rl.group_size
    _check(cfg, "rl.minibatches", lambda x: rows % x == 0,
           f"a divisor of rl.batch_size * rl.group_size = {rows}")
    _check(cfg, "rl.eps_low", lambda x: 0 < x < 1, "a number in (0, 1)")
    _check(cfg, "rl.eps_high", _pos, "a number > 0")
    _check(cfg, "rl.clip_ratio_c", lambda x: x == 0 or x > 1, "0 (no dual clip) or a number > 1")
    _check(cfg, "rl.loss_agg", _in("", *losses.AGGREGATIONS),
           "'' (the loss's own) or one of " + ", ".join(map(repr, losses.AGGREGATIONS)))
    _check(cfg, "rl.loss_scale_factor", lambda x: isinstance(x, int) and not isinstance(
        x, bool) and x >= 0, "an integer >= 0 (tokens; 0 = rollout.max_new_tokens)")
    _check(cfg, "rl.log_ratio_clamp", _nonneg, "a number >= 0 (0 = no clamp; verl's is 20)")
    _check(cfg, "rl.kl_estimator", _in(*losses.KL_ESTIMATORS),
           f"one of {list(losses.KL_ESTIMATORS)}")
    _check(cfg, "rl.rollout_is", _in(*losses.ROLLOUT_IS), f"one of {list(losses.ROLLOUT_IS)}")
    _check(cfg, "rl.rollout_rs", _in(*losses.ROLLOUT_RS), f"one of {list(losses.ROLLOUT_RS)}")
    if cfg.rl.rollout_rs:
        _check(cfg, "rl.rs_low", lambda x: _pos(x) and x <= 1,
               "a number in (0, 1] (an on-policy response, ratio 1, is always kept)")
        _check(cfg, "rl.rs_high", lambda x: _nonneg(x) and x >= 1,
               "a number >= 1 (an on-policy response, ratio 1, is always kept)")
    _check(cfg, "rl.entropy_coef", _nonneg, "a number >= 0 (0 = no entropy bonus)")
    _check(cfg, "rl.kl_coef", _nonneg, "a number >= 0")
    _check(cfg, "rl.staleness", lambda x: isinstance(x, int) and not isinstance(x, bool)
           and 0 <= x <= 8, "an integer from 0 (synchronous) to 8")
    _check(cfg, "rl.recompute_old_logp", _in("auto", "always", "never"),
           "'auto', 'always' or 'never'")
    if cfg.rl.recompute_old_logp == "never":
        _check(cfg, "rollout.top_p", lambda x: x == 1.0,
               "1.0 with rl.recompute_old_logp='never' (the sampler's log-probs are of the "
               "untruncated distribution)")
        _check(cfg, "rollout.top_k", lambda x: x == -1,
               "-1 (off) with rl.recompute_old_logp='never' (the sampler's log-probs are of the "
               "untruncated distribution)")
        _check(cfg, "rl.tis_cap", lambda x: x == 0,
               "0 with rl.recompute_old_logp='never' (TIS needs the trainer's log-probs)")
        _check(cfg, "rl.rollout_rs", lambda x: x == "",
               "'' with rl.recompute_old_logp='never' (rejection needs the trainer's "
               "log-probs)")
    _check(cfg, "rl.tis_cap", lambda x: _nonneg(x) and (x == 0 or x >= 1),
           "0 (off) or a cap >= 1 on the importance weight (verl uses 2)")
    _check(cfg, "rl.adv_std_norm", lambda x: isinstance(x, bool), "True or False")
    mb_rows = rows // cfg.rl.minibatches
    _check(cfg, "rl.micro_batch_size", lambda x: isinstance(x, int) and x >= 0
           and (x == 0 or mb_rows % x == 0),
           f"0 or a divisor of the minibatch's {mb_rows} rows (rl.batch_size * "
           "rl.group_size / rl.minibatches)")
    _check(cfg, "rl.max_bad_steps", _pos_int, "an integer >= 1")
    _check(cfg, "rl.noise_every", lambda x: isinstance(x, int) and not isinstance(x, bool)
           and x >= 0, "an integer >= 0 (0: never measure the gradient noise scale)")
    _check(cfg, "rl.noise_parts", lambda x: isinstance(x, int) and not isinstance(x, bool)
           and x >= 2, "an integer >= 2 (chunks of the batch, the small batch of the estimate)")
    _check(cfg, "rl.collapse_steps", lambda x: isinstance(x, int) and not isinstance(x, bool)
           and x >= 0, "an integer >= 0 (collapsed steps in a row that stop the run; 0 = off)")
    _check(cfg, "rl.packing", _in("pad", "trim", "pack"), "'pad', 'trim' or 'pack'")
    for field, name, entry in (("losses", cfg.rl.loss, objectives.loss(cfg.rl.loss)),
                               ("estimators", cfg.rl.adv_estimator,
                                objectives.estimator(cfg.rl.adv_estimator))):
        section = cfg.rl[field].get(name) if field in cfg.rl else None
        if section is None:
            raise ConfigError(f"rl.{field}.{name} is missing: the config has no section for "
                              f"the chosen {name!r} (default_config() builds one per entry)")
        if entry.validate is not None:
            try:
                entry.validate(section, cfg.rl)
            except ValueError as e:
                raise ConfigError(str(e)) from None
    _check(cfg, "rl.overlong_buffer",
           lambda x: isinstance(x, int) and 0 <= x < cfg.rollout.max_new_tokens,
           f"an integer in [0, rollout.max_new_tokens={cfg.rollout.max_new_tokens})")


def _selector_section() -> ml_collections.ConfigDict:
    """The prompt selector; each registered selector's own fields live in selector.<name>."""
    from frontier_rl import selection

    selector = ml_collections.ConfigDict()
    selector.name = "uniform"
    for name in selection.names():
        selector[name] = ml_collections.ConfigDict(selection.defaults(name))
    return selector


def _check_selector(cfg: ml_collections.ConfigDict) -> None:
    from frontier_rl import selection  # registry of selector names

    _check(cfg, "selector.name", _in(*selection.names()), f"one of {selection.names()}")
    try:
        selection.validate(cfg.selector.name, cfg.selector.get(cfg.selector.name))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    _check_teacher_url(cfg)


def _eval_section() -> ml_collections.ConfigDict:
    """Held-out evaluation: Avg@k (k samples at `temperature` / `top_p` / `top_k`) and greedy
    accuracy per bucket. T = 0.7, top-p = 0.7 is HeaPA's Avg@16 protocol
    (eval_dataset_generation.py, which also keeps top-k 50: the paper configs set it)."""
    ev = ml_collections.ConfigDict()
    ev.every = 25  # steps; 0 = only at step 0 and the end
    ev.every_rollouts = 0  # also evaluate each time cumulative rollouts cross a multiple
    ev.every_budget = 0.0  # ... each time the run's budget spend (its unit) crosses a multiple
    # ... and when the spend crosses budget / 2, budget / 4, ... budget / 2^early (0 = none):
    # evaluations dense early, so that X-to-target is resolved where curves rise fastest
    ev.early = 0
    # the k of the unbiased pass@k estimate from the eval.k samples (0 = eval.k; evaluation/
    # passk.py)
    ev.pass_k = 0
    ev.k = 8
    ev.temperature = 0.7
    ev.top_p = 0.7
    ev.top_k = -1  # sampling top-k of the k samples (not their count); -1 = off
    ev.greedy = True
    # Token cap of evaluation responses; 0 = rollout.max_new_tokens (HeaPA: 20,480 at eval).
    ev.max_new_tokens = 0
    # Benchmark name -> local file (.jsonl/.parquet, plain or verl rows; launch/
    # prepare_benchmarks.py): evaluated instead of the task's held-out split, rendered and
    # checked like the corpus (eval_suite.py). Empty = the task's own eval split.
    ev.sets = ml_collections.ConfigDict()
    return ev


def _check_eval(cfg: ml_collections.ConfigDict) -> None:
    _check(cfg, "eval.every", lambda x: isinstance(x, int) and x >= 0, "an integer >= 0")
    _check(cfg, "eval.every_rollouts", lambda x: isinstance(x, int) and x >= 0,
           "an integer >= 0 (0 disables)")
    _check(cfg, "eval.every_budget", _nonneg,
           "a number >= 0 in the budget's unit (0 disables)")
    _check(cfg, "eval.early", lambda x: isinstance(x, int) and not isinstance(x, bool)
           and 0 <= x <= 16, "an integer in [0, 16]: evaluations at budget / 2 .. budget / 2^n")
    _check(cfg, "eval.k", _pos_int, "an integer >= 1")
    try:
        from frontier_rl.evaluation import passk

        passk.resolve(cfg.eval)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    _check(cfg, "eval.temperature", _pos, "a number > 0")
    _check(cfg, "eval.top_p", lambda x: _pos(x) and x <= 1, "a number in (0, 1]")
    _check(cfg, "eval.top_k", _top_k, _TOP_K_ALLOWED)
    _check(cfg, "eval.max_new_tokens", lambda x: isinstance(x, int) and x >= 0,
           "an integer >= 0 (0 = rollout.max_new_tokens)")
    sets = cfg.eval.get("sets") or {}
    for name in dict(sets):
        _check(cfg, f"eval.sets.{name}", lambda x: isinstance(x, str) and bool(x),
               "a path to a .jsonl or .parquet benchmark file")
    if sets:
        _check(cfg, "task.name", lambda x: x == "corpus",
               "'corpus' when eval.sets is given (benchmarks are rendered and checked like "
               "the training corpus)")


def _checkpoint_section() -> ml_collections.ConfigDict:
    """Checkpoints (run/checkpoint.py): every `every` steps, the last `max_to_keep` kept."""
    checkpoint = ml_collections.ConfigDict()
    checkpoint.every = 25
    checkpoint.max_to_keep = 3
    return checkpoint


def _check_checkpoint(cfg: ml_collections.ConfigDict) -> None:
    _check(cfg, "checkpoint.every", _pos_int, "an integer >= 1")
    _check(cfg, "checkpoint.max_to_keep", lambda x: _pos_int(x) and x >= 2,
           "an integer >= 2 (a damaged latest checkpoint falls back to the previous one)")


def _mesh_section() -> ml_collections.ConfigDict:
    """The device mesh (rl/sharding.py): data x fsdp x model."""
    mesh = ml_collections.ConfigDict()
    mesh.data = -1  # data parallel; -1 = every device not used by fsdp x model
    mesh.fsdp = 1  # parameters, gradients and optimizer state sharded; rows split too
    mesh.model = 1  # tensor parallel (Megatron-style column/row splits)
    # Devices of a rollout mesh of its own (0: the sampler shares the trainer's devices). The
    # last `rollout` devices generate while the rest train (rl.staleness >= 1), each version
    # copied onto them by jax.device_put (rl/sharding.py `split_meshes`); mesh.data = -1 is
    # then the trainer's rest.
    mesh.rollout = 0
    mesh.rollout_model = 1  # tensor parallel within the rollout mesh
    return mesh


def _check_mesh(cfg: ml_collections.ConfigDict) -> None:
    _check(cfg, "mesh.data", lambda x: x == -1 or _pos_int(x), "-1 (all devices) or >= 1")
    _check(cfg, "mesh.fsdp", _pos_int, "an integer >= 1")
    _check(cfg, "mesh.model", _pos_int, "an integer >= 1")
    _check(cfg, "mesh.rollout", lambda x: _pos_int(x) or x == 0,
           "an integer >= 0 (0 = the sampler shares the trainer's devices)")
    _check(cfg, "mesh.rollout_model", _pos_int, "an integer >= 1")
    if cfg.mesh.rollout:
        from frontier_rl.rollout import engines

        _check(cfg, "mesh.rollout_model", lambda x: cfg.mesh.rollout % x == 0,
               f"a divisor of mesh.rollout={cfg.mesh.rollout}")
        _check(cfg, "rl.staleness", lambda x: x >= 1,
               f">= 1 with mesh.rollout={cfg.mesh.rollout} (a rollout mesh generates while "
               "the trainer updates; synchronously its devices would wait)")
        _check(cfg, "rollout.engine", lambda x: not engines.entry(x).external,
               f"an engine in this process with mesh.rollout={cfg.mesh.rollout} (an external "
               "engine generates on devices of its own; set mesh.rollout=0)")


def _export_section() -> ml_collections.ConfigDict:
    """Hugging Face export of the policy every `every` steps (0 = only on `frontier-rl export`)
    into `dir` (default WORKDIR/export/step_N)."""
    export = ml_collections.ConfigDict()
    export.every = 0
    export.dir = ""
    return export


def _check_export(cfg: ml_collections.ConfigDict) -> None:
    _check(cfg, "export.every", lambda x: isinstance(x, int) and x >= 0,
           "an integer >= 0 (0 disables)")


def _fit_section() -> ml_collections.ConfigDict:
    """The fit check (`frontier-rl fit`) plays the selector for `sim_steps` steps on the
    synthetic learner (frontier_rl/sim) to find the rows each program is called with, and
    compiles the programs at the longest prompt (`prompt_len` tokens). `entropy_rows` > 0
    sizes the prompt-entropy pass at that many rows instead of the selector's largest call;
    `every_bucket` sizes every sampler row bucket the selector uses, not only the largest."""
    fit = ml_collections.ConfigDict()
    fit.prompt_len = 32
    fit.entropy_rows = 0
    fit.sim_steps = 20
    fit.every_bucket = False
    return fit


def _check_fit(cfg: ml_collections.ConfigDict) -> None:
    _check(cfg, "fit.prompt_len", _pos_int, "an integer >= 1 (tokens)")
    _check(cfg, "fit.entropy_rows", lambda x: isinstance(x, int) and not isinstance(x, bool)
           and x >= 0, "an integer >= 0 (0 = the selector's largest call)")
    _check(cfg, "fit.sim_steps", _pos_int, "an integer >= 1")
    _check(cfg, "fit.every_bucket", lambda x: isinstance(x, bool), "True or False")


def _log_section() -> ml_collections.ConfigDict:
    """Logging: TensorBoard, Weights & Biases, progress on the console, profiling."""
    log = ml_collections.ConfigDict()
    log.tensorboard = True
    # Weights & Biases (pip install 'frontier_rl[wandb]'): "" = off, else the project name.
    # log.wandb_mode "auto" logs online when WANDB_API_KEY is set and offline otherwise
    # (DIR/wandb; `wandb sync` uploads it later); "online" / "offline" force it.
    log.wandb = ""
    log.wandb_mode = "auto"
    log.progress = True
    # Steps (comma-separated, e.g. "5,6") traced with jax.profiler into WORKDIR/profile.
    log.profile_steps = ""
    return log


def augment_on_arith(c: ml_collections.ConfigDict, *, max_digits: int | None = None,
                     max_operands: int | None = None) -> ml_collections.ConfigDict:
    """Points every augmenting selector section (those with `aug_format`: heapa, ps,
    heapa_hive) at the embedded arith task: policy continuations parsed as sums, the programmatic
    teacher run inline (it answers in microseconds, and runs stay bit-reproducible), children up
    to one operand longer than the task's prompts. Digits/operands default to `c.task`'s."""
    from frontier_rl import selection

    digits = c.task.max_digits if max_digits is None else max_digits
    operands = c.task.max_operands if max_operands is None else max_operands
    for name in selection.names():
        s = c.selector.get(name)
        if s is None or "aug_format" not in s:
            continue
        s.aug_format = "arith"
        s.teacher = "arith"
        s.teacher_workers = 0
        s.reverse_digits = c.task.reverse_digits
        s.arith_max_digits = digits
        s.arith_max_operands = operands + 1
    return c


# Fields a resumed run may change without changing what it computes: how it logs, checkpoints
# and exports, how far it runs and when a collapse stops it, when it evaluates, which server it
# reaches, and its mesh.
RESUME_FREE = ("log.", "checkpoint.", "export.", "rl.num_steps", "rl.rollout_budget",
               "rl.token_budget", "rl.pflops_budget", "rl.collapse_steps", "eval.every_budget",
               "eval.every", "eval.every_rollouts", "eval.early", "rollout.sglang.",
               "warmstart.cache_dir", "mesh.")


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """{"a.b": value} of a nested dict (a ConfigDict's JSON form)."""
    if isinstance(tree, dict):
        out: dict[str, Any] = {}
        for k, v in tree.items():
            out.update(flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: tree}


def run_fields(config: ml_collections.ConfigDict) -> dict[str, Any]:
    """The fields that decide what a run computes (all but RESUME_FREE), flattened: what a
    checkpoint records and a resume compares."""
    import json

    flat = flatten(json.loads(config.to_json_best_effort()))
    return {k: v for k, v in flat.items()
            if not any(k == f or (f.endswith(".") and k.startswith(f)) for f in RESUME_FREE)}


def changed_fields(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """`field: old -> new` for every field that differs (absent on one side included)."""
    missing = "<absent>"
    return [f"{k}: {old.get(k, missing)!r} -> {new.get(k, missing)!r}"
            for k in sorted(set(old) | set(new)) if old.get(k, missing) != new.get(k, missing)]


def set_fields(c: ml_collections.ConfigDict, fields: dict[str, Any]) -> ml_collections.ConfigDict:
    """Sets dotted fields ("rollout.engine": "sglang", ...) in place, as the command line's
    --config.<field>=value does; a path the config lacks is an error naming it."""
    for key, value in fields.items():
        node = c
        *path, leaf = key.split(".")
        for i, part in enumerate(path):
            if part not in node:
                raise ConfigError(f"{key}: the config has no section {'.'.join(path[:i + 1])!r}")
            node = node[part]
        if leaf not in node:
            raise ConfigError(f"{key}: the config has no field {key!r}")
        node[leaf] = value
    return c


def accelerator_memory(c: ml_collections.ConfigDict,
                       micro_batch_size: int) -> ml_collections.ConfigDict:
    """The memory settings of a real-size policy on one accelerator node (configs/scale.py and
    the paper configs): float32 master weights and Adam moments, bfloat16 compute, flash
    attention where the device has it, every decoder layer rematerialised, one scanned layer,
    log-probs in chunks of 1,024 positions, `micro_batch_size` rows per forward/backward,
    responses packed several to a row (rl.packing = "pack"), prompt entropies 64 rows at a
    time, and parameters, gradients and optimizer state sharded over 8 devices (mesh data=1,
    fsdp=8)."""
    c.model.param_dtype = "float32"
    c.model.dtype = "bfloat16"
    c.model.attention = "auto"
    c.model.attention_chunk = 1024  # where attention runs on XLA (TPU, CPU, a 32-bit GPU run)
    c.model.remat = "full"
    c.model.scan_layers = True
    c.model.logits_chunk = 1024
    c.rl.micro_batch_size = micro_batch_size
    c.rl.packing = "pack"
    c.rollout.entropy_batch = 64
    c.mesh.data, c.mesh.fsdp, c.mesh.model = 1, 8, 1
    return c


def shrink_for_smoke(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """The `:smoke` variant of a config: the same code paths in seconds (used by tests)."""
    c.task.train_size = 512
    c.task.eval_per_bucket = 8
    if "eval_sizes" in c.task:
        c.task.eval_sizes = ""
    c.warmstart.steps = 20
    c.warmstart.target_acc = 0.0  # 20 steps reach no accuracy target: train them all
    c.rl.num_steps = 4
    c.rl.batch_size = 8
    c.eval.every = 2
    c.eval.k = 2
    c.checkpoint.every = 2
    return c


def _check(cfg: ml_collections.ConfigDict, field: str, ok: Callable[[Any], bool],
           allowed: str) -> None:
    node: Any = cfg
    for part in field.split("."):
        node = node[part]
    valid = False
    try:
        valid = bool(ok(node))
    except TypeError:
        pass
    if not valid:
        raise ConfigError(f"{field}={node!r} is not allowed: {allowed}")


def _pos_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1


def _nonneg(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def _pos(x) -> bool:
    return _nonneg(x) and x > 0


def _in(*choices):
    return lambda x: x in choices


def _top_k(x) -> bool:
    return _pos_int(x) or (isinstance(x, int) and not isinstance(x, bool) and x == -1)


_TOP_K_ALLOWED = "-1 (off) or an integer >= 1 (SGLang refuses 0)"


def _endpoint(url: str) -> tuple[str, int] | None:
    """(host, port) of an http(s) URL, every loopback spelling as one host; None if unparsable."""
    try:
        u = urllib.parse.urlsplit(url)
        port = u.port or (443 if u.scheme == "https" else 80)
    except ValueError:
        return None
    host = (u.hostname or "").lower()
    if not host:
        return None
    if host in ("localhost", "0.0.0.0", "::", "::1") or host.startswith("127."):
        host = "loopback"
    return host, port


def _check_teacher_url(cfg: ml_collections.ConfigDict) -> None:
    """An HTTP teacher must not be the rollout server: that one runs with --skip-tokenizer-init
    and answers no chat completions, so every teacher call would fail (counted, not raised) and
    augmentation would silently never happen."""
    name = cfg.selector.name
    s = cfg.selector.get(name)
    if (cfg.rollout.engine != "sglang" or s is None or not s.get("teacher_url")
            or not s.get("augment") or s.get("teacher") not in ("http", "auto")):
        return
    rollout = _endpoint(cfg.rollout.sglang.url)
    _check(cfg, f"selector.{name}.teacher_url",
           lambda x: rollout is None or _endpoint(x) != rollout,
           f"the teacher's host:port is the rollout server's (rollout.sglang.url="
           f"{cfg.rollout.sglang.url!r}), which serves token ids to the trainer and answers no "
           "chat completions; serve the teacher on another port (launch/run_gpu.sh starts the "
           "rollout server on 31000)")
