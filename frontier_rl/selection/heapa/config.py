"""Config fields of the `heapa` and `ps` selectors (`config.selector.<name>.*`), with the
paper symbol each one maps to, and their validation (errors name the field, the value and the
allowed range: `selector.heapa.alpha=1.3 is outside [0.05, 0.95]`)."""

from __future__ import annotations

import math

from frontier_rl.selection.common import read_config
from frontier_rl.selection.heapa import augment, lineage, pool, teacher

REWARD_SCHEMES = ("ternary", "pm1")
AUG_ENTRY = ("cold", "heap")
EFFORTS = ("", "minimal", "low", "medium", "high")

COMMON = dict(
    # N: pool size bound (cold + low + high; the archive is not counted); the released
    # scripts' dynamic_data.max_pool_size (the code's default is 30,000).
    capacity=1_000_000,
    reward_scheme="ternary",  # pool statistic from r = 1/0/-1 (paper) or "pm1" (+-1, code)
    shuffle_seeds=True,  # seeds enter the cold queue in a seeded random order (a dataloader)
    max_cold_frac=1.0,  # at most this share of a batch from the cold queue (1.0 = paper)
    filter_groups=False,  # DAPO recipe: keep only non-zero-variance groups, resample rounds
    max_rounds=20,  # DAPO max_num_gen_batches
    # A_max: archive size that triggers recycling (0 = off, as the released code, whose only
    # trigger is |pool| < B). The trigger is the paper's, the value ours (no source gives one):
    # 16 steps of HeaPA's B = 512, so a record is back within ~16 steps of its rollout.
    recycle_archive_max=8192,
    recycle_chunk=512,  # archived records reinserted per step (0 = all at once)
    # On-policy augmentation.
    augment=True,  # off: "heap sampling only" (heapa) / plain PS (ps)
    n_aug=1,  # n_aug: candidate queries the policy writes per rolled-out prompt
    aug_format="auto",  # "arith" (prefix continuation), "template" (tags), "auto" (by prompts)
    aug_max_new_tokens=0,  # token cap of the augmentation generation; 0 = 8 arith / 400 template
    aug_temperature=1.0,
    aug_entry="cold",  # accepted pairs enter the cold queue (paper) or "heap" at est (code)
    aug_require_capacity=True,  # augment only if N - |pool| >= #prompts * n_aug (code)
    arith_prefix="mixed",  # arith: "drop_last" (sibling), "extend" (harder child) or "mixed"
    arith_max_operands=6,  # arith dataset filter: operands per problem (min 2)
    arith_max_digits=3,  # arith dataset filter: digits per operand
    reverse_digits=True,  # arith: digits least-significant first (= task.reverse_digits)
    # Template path: how a question becomes a prompt ("{prompt}" stands for it, other braces
    # doubled); "" = the task's own rendering (its chat template, instruction and system
    # prompt: Task.prompt_wrapper, handed over by the trainer's context).
    prompt_template="",
    d_min=0.75,  # d_min: clamp of the policy difficulty factor d
    d_max=1.33,  # d_max
    est_fallback=0.5,  # parent statistic used when it has none
    # Teacher.
    teacher="auto",  # "arith" (programmatic), "http" (OpenAI-compatible), "auto" (by format)
    teacher_workers=2,  # worker threads; 0 = inline and deterministic (tests)
    teacher_queue=20000,  # bounded queue; a full queue drops candidates (counted)
    teacher_timeout_s=30.0,  # per call
    teacher_max_retries=1,  # retries after a failed call (timeouts, errors, bad JSON)
    teacher_backoff_s=1.0,  # backoff before retry k: backoff * 2^(k-1)
    teacher_url="",  # e.g. http://127.0.0.1:8000/v1 (the path /chat/completions is added)
    teacher_model="gpt-5-nano",
    teacher_api_key_env="OPENAI_API_KEY",  # name of the environment variable holding the key
    teacher_max_tokens=4196,
    teacher_max_tokens_field="max_completion_tokens",  # or "max_tokens" for older servers
    teacher_reasoning_effort="",  # sent only if set (e.g. "low" for OpenAI reasoning models)
    # A fair teacher (any teacher kind): wrong labels and latency. Both 0 = the exact, instant
    # teacher; a real LLM teacher already errs, so leave teacher_error_rate at 0 for it.
    teacher_error_rate=0.0,  # P(an accepted child's answer is replaced by a wrong one)
    teacher_latency_s=0.0,  # seconds each teacher call takes before its verdict is posted
    teacher_step_s=1.0,  # inline teacher: seconds of training one step stands for (latency)
    max_question_chars=4000,  # template path dataset filter
)

HEAPA_DEFAULTS = dict(
    # alpha: target fraction of scored items in the low (harder) partition; the code's
    # ThreadSafeQueryPool low_fraction default, which its trainer never overrides.
    alpha=0.5,
    sampling="boundary",  # "boundary", "mixed" (half from the easy end) or "uniform"
    candidate_factor=2,  # boundary candidates = factor * B, of which B are drawn uniformly
    rebalance_max_moves=0,  # boundary moves per rebalance; 0 = until balanced (code: 4)
    refresh="path",  # lineage re-estimation at recycle time: "path", "child" or "none"
    refresh_every=0,  # K: also refresh (the archive's values) every K steps; 0 = off
    path_weight_temp=1.0,  # T of PathAgg's leaf-count weights
    blend=0.5,  # weight of a node's previous value in the refresh blend
    **COMMON,
)

PS_DEFAULTS = dict(
    ps_epsilon=0.1,  # epsilon in ((1 - s) + epsilon)^(1/T)
    ps_temperature=1.0,  # T
    ps_prior_count=1,  # visit count of a record entering at an estimate (code: 0)
    **{**COMMON, "augment": False},
)


def checker(name: str, defaults: dict):
    """validate(section) for the registry: raises ValueError on the first bad field."""

    def validate(section) -> None:
        c = read_config(section, defaults)

        def fail(field, allowed):
            raise ValueError(f"selector.{name}.{field}={getattr(c, field)!r} {allowed}")

        def num(field, lo=None, hi=None, *, integer=False, lo_open=False):
            v = getattr(c, field)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or (
                    integer and not isinstance(v, int)) or not math.isfinite(v):
                fail(field, f"is not {'an integer' if integer else 'a number'}")
            if (lo is not None and (v <= lo if lo_open else v < lo)) or (hi is not None and v > hi):
                left = "(" if lo_open else "["
                fail(field, f"is outside {left}{lo if lo is not None else '-inf'}, "
                            f"{hi if hi is not None else 'inf'}]")

        def choice(field, options):
            if getattr(c, field) not in options:
                fail(field, f"is not one of {list(options)}")

        def flag(field):
            if not isinstance(getattr(c, field), bool):
                fail(field, "is not True or False")

        num("capacity", 1, integer=True)
        choice("reward_scheme", REWARD_SCHEMES)
        num("max_cold_frac", 0.0, 1.0, lo_open=True)
        num("max_rounds", 1, integer=True)
        num("recycle_archive_max", 0, integer=True)
        num("recycle_chunk", 0, integer=True)
        for f in ("shuffle_seeds", "filter_groups", "augment", "aug_require_capacity",
                  "reverse_digits"):
            flag(f)
        num("n_aug", 1, 64, integer=True)
        choice("aug_format", augment.FORMATS)
        num("aug_max_new_tokens", 0, integer=True)
        num("aug_temperature", 0.0, lo_open=True)
        choice("aug_entry", AUG_ENTRY)
        choice("arith_prefix", augment.ARITH_PREFIX)
        num("arith_max_operands", 2, integer=True)
        num("arith_max_digits", 1, 18, integer=True)
        if not isinstance(c.prompt_template, str) or (
                c.prompt_template and "{prompt}" not in c.prompt_template):
            fail("prompt_template", "must contain '{prompt}' ('' = the task's rendering)")
        num("d_min", 0.01, 1.0)
        num("d_max", 1.0, 100.0)
        num("est_fallback", -1.0, 1.0)
        choice("teacher", teacher.TEACHERS)
        num("teacher_workers", 0, 64, integer=True)
        num("teacher_queue", 1, integer=True)
        num("teacher_timeout_s", 0.0, lo_open=True)
        num("teacher_max_retries", 0, 10, integer=True)
        num("teacher_backoff_s", 0.0)
        for f in ("teacher_url", "teacher_model", "teacher_api_key_env"):
            if not isinstance(getattr(c, f), str):
                fail(f, "is not a string")
        if c.teacher == "http" and c.augment and not c.teacher_url:
            fail("teacher_url", "must be set when teacher='http'")
        num("teacher_max_tokens", 1, integer=True)
        choice("teacher_max_tokens_field", ("max_completion_tokens", "max_tokens"))
        choice("teacher_reasoning_effort", EFFORTS)
        num("teacher_error_rate", 0.0, 1.0)
        num("teacher_latency_s", 0.0)
        num("teacher_step_s", 0.0, lo_open=True)
        num("max_question_chars", 1, integer=True)
        if name == "heapa":
            num("alpha", 0.05, 0.95)
            choice("sampling", pool.SAMPLING)
            num("candidate_factor", 1, 16, integer=True)
            num("rebalance_max_moves", 0, integer=True)
            choice("refresh", lineage.MODES)
            num("refresh_every", 0, integer=True)
            num("path_weight_temp", 0.0, lo_open=True)
            num("blend", 0.0, 1.0)
        else:
            num("ps_epsilon", 0.0)
            num("ps_temperature", 0.0, lo_open=True)
            num("ps_prior_count", 0, integer=True)

    return validate
