"""The config schema, assembled: `default_config()` and `validate()` over the sections each
component declares beside its code (run/fields.py; `sections()` names where each lives).

Experiment files in `configs/` start from `default_config()` and change what they need. A
config is validated when it is built (`get_config` calls `validate`) and again after command-line
overrides, before anything is compiled; a bad value raises `ConfigError` naming the field, the
value and what is allowed.
"""

from __future__ import annotations

from typing import Any

import ml_collections

from frontier_rl.run import fields

ConfigError = fields.ConfigError  # raised naming the bad field, its value and what is allowed


def sections() -> list[fields.Section]:
    """Every section of the config, in its order, each declared beside the component that reads
    it (`origin`: that module; the warm start's is here, as warmstart.py sits above this
    layer)."""
    from frontier_rl import export, models, selection, tasks
    from frontier_rl.evaluation import passk
    from frontier_rl.fit import shapes
    from frontier_rl.rl import config as rl_config
    from frontier_rl.rl import sharding
    from frontier_rl.rollout import engines
    from frontier_rl.run import checkpoint, metrics
    from frontier_rl.tasks import composition

    out = []
    for declare in (tasks.config_section, models.config_section, _warmstart_section,
                    composition.config_section, engines.config_section,
                    rl_config.config_section, selection.config_section, passk.config_section,
                    checkpoint.config_section, sharding.config_section,
                    export.config_section, shapes.config_section, metrics.config_section):
        section = declare()
        section.origin = declare.__module__
        out.append(section)
    return out


def default_config() -> ml_collections.ConfigDict:
    """Every knob at its default (the embedded CPU run): `seed`, then each section's fields."""
    c = ml_collections.ConfigDict()
    c.seed = 0
    for section in sections():
        c[section.name] = section.defaults()
    return c


def validate(cfg: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """Raises ConfigError on the first bad field; returns cfg unchanged otherwise. The sections
    are checked in the config's order, each its fields and rules in declaration order."""
    fields.check(cfg, "seed", fields.nonneg_int, "an integer >= 0")
    for section in sections():
        section.validate(cfg)
    return cfg


def _warmstart_section() -> fields.Section:
    """`warmstart`: supervised warm start on the easy slice, cached in DIR/warmstart so reruns
    skip it."""
    from frontier_rl.run.fields import nonneg, nonneg_int, pos, pos_int

    def unit(x) -> bool:  # an accuracy, in [0, 1]
        return nonneg(x) and x <= 1

    def share(x) -> bool:  # a share of each batch, in [0, 1)
        return nonneg(x) and x < 1

    return (
        fields.Section("warmstart", _warmstart_section.__doc__)
        .field("enabled", True)
        .field("buckets", "")  # comma-separated; "" = the task's easier half (arith: 2op,3op)
        # The starting point by construction (warmstart.py): every batch holds a fixed share
        # `frontier_dose` of examples from the frontier bucket (the one just harder than
        # `buckets`), so its accuracy rises steadily instead of depending on whether a tiny
        # policy generalises to longer prompts. Every `check_every` steps the policy decodes
        # `check_size` held-out prompts of the easy buckets and of the frontier bucket
        # greedily; training stops at the first check with easy exact match >= `target_acc`
        # and frontier exact match >= `frontier_min` (0 = no frontier condition; target_acc 0 =
        # train all `steps`). `steps` caps an attempt; an attempt outside the regime at its cap
        # is redone from a fresh init with the next seed, up to `attempts`, then the run stops
        # with an error.
        .field("target_acc", 0.8, unit, "a number in [0, 1] (0 trains all warmstart.steps)")
        .field("frontier_min", 0.1, unit,
               "a number in [0, 1] (0 disables the frontier check)")
        .field("frontier_dose", 0.1, share,
               "a number in [0, 1) (share of each batch from the frontier bucket; 0 = none)")
        # A check that passes the easy target but not the frontier's raises the dose by
        # `frontier_dose`, up to this share (0 = never): a seed that learns 2op/3op without
        # generalising to 4op (seed 9 of the comparison pool: 85% easy, 4-7% 4op for 3,000
        # steps at a dose of 0.1) is taught more of the frontier; a seed that reaches both
        # together is not affected.
        .field("frontier_dose_max", 0.5, share, "a number in [0, 1) (the most the frontier "
               "dose is raised to; 0 = never raised)")
        .field("check_every", 100, pos_int, "an integer >= 1")
        .field("check_size", 256, pos_int, "an integer >= 1")
        .field("steps", 8000, nonneg_int, "an integer >= 0")  # cap of one attempt
        # an attempt outside the regime at its cap is redone, seed + 1
        .field("attempts", 3, pos_int, "an integer >= 1")
        # also stop once the loss EMA is below this; 0 disables
        .field("target_loss", 0.0, nonneg, "a number >= 0 (0 disables early stopping)")
        .field("batch_size", 128, pos_int, "an integer >= 1")
        # Peak rate (3e-3 left seed 0 on its loss plateau ~700 steps longer), held until the
        # first check with easy exact match >= `escape_acc` (the plateau is over, whenever that
        # is), then cosine-decayed to 5% over `decay_steps` (warmstart.train).
        .field("learning_rate", 1e-2, pos, "a number > 0")
        .field("warmup_steps", 50)
        .field("escape_acc", 0.3, unit, "a number in [0, 1] (0: the decay starts after the "
               "warmup and lasts to the cap)")
        .field("decay_steps", 2000, pos_int, "an integer >= 1")
        # Stall rules (warmstart.train): with no check at `escape_acc` by step `escape_by` the
        # decay starts anyway (0 = never); once the decay is at its floor, `patience` checks
        # without a gain of 0.01 in the best easy exact match restart it from the peak (0 =
        # never).
        .field("escape_by", 4000, nonneg_int,
               "an integer >= 0 (0: the decay waits for escape_acc)")
        .field("patience", 5, nonneg_int, "an integer >= 0 (0: no restart)")
        # Where the warm start is cached; "" = DIR/warmstart. `compare` points every run at one
        # shared cache so all methods start from the same policy.
        .field("cache_dir", "")
        # A shipped start (a directory with start.json, `frontier-rl start`): the policy is
        # loaded from it, its files checked against the digests start.json records, and no warm
        # start is trained or cached; "" = none. Comparisons on a testbed load their starts
        # this way.
        .field("start", "")
        # seed of the warm start's init and data; -1 = the run's `seed`
        .field("seed", -1, lambda x: fields.int_(x) and x >= -1,
               "an integer >= 0, or -1 for the run's seed"))


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
