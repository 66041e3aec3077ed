"""Unbiased pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", Sec. 2.1
and Fig. 3): from n >= k samples of a prompt of which c are correct, the probability that k of
them drawn without replacement hold a correct one,

    pass@k = 1 - C(n - c, k) / C(n, k) = 1 - prod_{i = n - c + 1}^{n} (1 - k / i),

the product form being the paper's numerically stable one (no binomial of n ever formed); it is
1 when n - c < k (every k-subset holds a correct sample). At k = n it is the plain estimate, 1 if
any of the n samples is correct (evaluation's `pass@<n>`); at k < n it is an unbiased estimate of
the pass@k of the policy, which the plain "any correct among k samples" is only when k samples
are all that is drawn.

`config.eval.k` is n (the samples drawn per prompt) and `config.eval.pass_k` the k here (0 = n).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np


def pass_at_k(n, c, k: int) -> np.ndarray:
    """Unbiased pass@k of prompts with `c` correct of `n` samples (arrays or scalars, broadcast
    together: one value per prompt), as float64 in [0, 1]."""
    n, c = np.broadcast_arrays(np.asarray(n, np.int64), np.asarray(c, np.int64))
    if n.size and (k < 1 or k > int(n.min())):
        raise ValueError(f"pass@k needs 1 <= k <= n samples: k={k}, n={int(n.min())}")
    if np.any(c < 0) or np.any(c > n):
        raise ValueError(f"correct counts must lie in [0, n]: got {c[(c < 0) | (c > n)][:5]}")
    i = np.arange(1, int(n.max(initial=0)) + 1, dtype=np.float64)
    # factor (1 - k / i) for i in (n - c, n], 1 elsewhere; a prompt with n - c < k has the
    # factor i = k, exactly 0, and is set to 1 below without relying on it
    inside = (i > (n - c)[..., None]) & (i <= n[..., None])
    miss = np.prod(np.where(inside, 1.0 - k / i, 1.0), axis=-1)
    return np.where(n - c < k, 1.0, 1.0 - miss)


def resolve(eval_cfg: Mapping) -> int:
    """The k of the unbiased pass@k under `config.eval` (`eval.pass_k`, 0 = `eval.k`), checked:
    a k above the samples drawn has no unbiased estimate."""
    n = int(eval_cfg["k"])
    k = eval_cfg.get("pass_k", 0)
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= n:
        raise ValueError(f"eval.pass_k={k!r} is not allowed: an integer in [0, eval.k={n}] "
                         "(the k of the unbiased pass@k from the eval.k samples drawn per "
                         "prompt; 0 = eval.k)")
    return k or n


def metric(k: int, n: int) -> str:
    """The name of the unbiased pass@k from n samples, beside `pass@<n>` (any correct of n)."""
    return f"pass@{k}_unbiased_n{n}"


def label(k: int, n: int) -> str:
    """Its column heading in a table."""
    return f"pass@{k} (unbiased, n={n})"


def config_section():
    """`eval`: held-out evaluation, Avg@k (k samples at `temperature` / `top_p` / `top_k`) and
    greedy accuracy per bucket. T = 0.7, top-p = 0.7 is HeaPA's Avg@16 protocol
    (eval_dataset_generation.py, which also keeps top-k 50: the paper configs set it)."""
    import ml_collections

    from frontier_rl.run import fields

    def sets_rule(cfg) -> None:
        sets = cfg.eval.get("sets") or {}
        for name in dict(sets):
            fields.check(cfg, f"eval.sets.{name}", lambda x: isinstance(x, str) and bool(x),
                         "a path to a .jsonl or .parquet benchmark file")
        if sets:
            fields.check(cfg, "task.name", lambda x: x == "corpus",
                         "'corpus' when eval.sets is given (benchmarks are rendered and "
                         "checked like the training corpus)")

    return (fields.Section("eval", config_section.__doc__)
            .field("every", 25, fields.nonneg_int, "an integer >= 0")  # steps; 0 = start, end
            # also evaluate each time cumulative rollouts cross a multiple
            .field("every_rollouts", 0, fields.nonneg_int, "an integer >= 0 (0 disables)")
            # ... each time the run's budget spend (its unit) crosses a multiple
            .field("every_budget", 0.0, fields.nonneg,
                   "a number >= 0 in the budget's unit (0 disables)")
            # ... and when the spend crosses budget / 2, budget / 4, ... budget / 2^early (0 =
            # none): evaluations dense early, so X-to-target is resolved where curves rise
            .field("early", 0, lambda x: fields.int_(x) and 0 <= x <= 16,
                   "an integer in [0, 16]: evaluations at budget / 2 .. budget / 2^n")
            # the k of the unbiased pass@k estimate from the eval.k samples (0 = eval.k)
            .field("pass_k", 0)
            .field("k", 8, fields.pos_int, "an integer >= 1")
            .rule(lambda cfg: fields.as_config_error(lambda: resolve(cfg.eval)))
            .field("temperature", 0.7, fields.pos, "a number > 0")
            .field("top_p", 0.7, lambda x: fields.pos(x) and x <= 1, "a number in (0, 1]")
            # sampling top-k of the k samples (not their count); -1 = off
            .field("top_k", -1, fields.top_k, fields.TOP_K_ALLOWED)
            .field("greedy", True)
            # Token cap of evaluation responses; 0 = rollout.max_new_tokens (HeaPA: 20,480)
            .field("max_new_tokens", 0, fields.nonneg_int,
                   "an integer >= 0 (0 = rollout.max_new_tokens)")
            # Benchmark name -> local file (.jsonl/.parquet, plain or verl rows; launch/
            # prepare_benchmarks.py): evaluated instead of the task's held-out split, rendered
            # and checked like the corpus (evaluation/suite.py). Empty = the task's own split.
            .sub("sets", ml_collections.ConfigDict)
            .rule(sets_rule))
