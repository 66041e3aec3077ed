"""FLOPs accounting: what a run spends on generation, prompt-entropy passes, old-logprob (and
reference-policy) passes and training, counted three ways side by side.

* **xla**: XLA's cost analysis (`compiled.cost_analysis()["flops"]`) of each compiled function
  at the padded shape it ran at, times its calls. This is the work the device did, padding
  included. XLA counts the body of a `while_loop` / `scan` once whatever its trip count, so the
  loops are never analysed whole: the sampler's prefill and single decode step, and the trainer's
  single minibatch update, are compiled on their own (for analysis only, never run) and
  multiplied by the decode steps actually run and by epochs x minibatches. For the same reason
  the cost programs run the policy with its layers unrolled, whatever `scan_layers` (a scanned
  stack would count one layer), and with XLA's attention, whatever `attention` resolved to on
  the device (cuDNN's kernel has no CPU lowering and no FLOPs in the analysis):
  `models.transformer.cost_model`.

  Cost programs are small and host-side: each is compiled on the CPU backend (never on the
  accelerator, whose compiler would reject or autotune a full-size program), at 1 and at 2
  rows of its padded length, and the cost at R rows is the line through the two,
  c(1) + (R - 1) (c(2) - c(1)). Every count here is affine in the rows (the per-row work of
  matmuls, attention and elementwise ops, plus a row-independent part: the optimizer, gradient
  clipping), so the line is exact up to XLA's per-shape choices (tests/test_accounting.py checks
  it against whole-batch compiles). No cost program is larger than two rows of a device's
  share, at any model size; a new row bucket at a known length costs no compile.
* **formula**: `analytic_flops` on the real tokens only (nanoGPT's `estimate_mfu`): 2N per
  forward token, 6N per trained token, causal attention counted at half.
* **heapa**: HeaPA's own analytic convention (`heapa_forward_flops`, `heapa_generation_flops`),
  on the shapes its released trainer would pass it, so that this project's figures can be set
  beside the paper's ("perf/pflops_heapa"). It is neither of the two above: a different count
  per token (MACs for some matmuls, FLOPs for others, no grouped-query attention), the padded
  widths and the token cap instead of the real tokens, no prefill, a rule reward charged at a
  tenth of a forward, and one backward per train step whatever its epochs (`Accountant`'s
  docstring says what each program is charged, and from which lines of HeaPA's code).

XLA and the formula differ by the padding, which each charge also measures: `padded_formula` is
the formula at the padded shapes the device ran, with dense attention (masks hide keys but do
not skip them: the sampler attends over the whole KV cache at every step, training over the
whole padded row). The run reports `padding_ratio = padded_formula / formula` (and, for reference,
`token_padding_ratio = padded token slots / real tokens`). XLA also counts elementwise work the
formula leaves out (norms, rotary embeddings, softmax, sampling, the optimizer), a few percent,
so xla / formula lies in [1 / padding_ratio, padding_ratio * (1 + ELEMENTWISE_ALLOWANCE)].

Evaluation is not charged: only work done through `PolicyContext` and the trainer is.

This module imports no device function: the sampler, the prompt-entropy pass and the trainer
import `compiled_flops` from here, and are handed to `Accountant` by the caller.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from frontier_rl.models.config import ModelConfig

KINDS = ("generation", "entropy", "old_logprob", "train")
FIELDS = ("calls", "tokens", "padded_tokens", "xla_flops", "formula_flops", "padded_formula_flops",
          "heapa_flops")
# What XLA counts beyond the formula at the padded shapes, as a fraction of the formula: norms,
# rotary embeddings, attention softmax and masking, log-softmax/entropy over the vocabulary,
# sampling, Adam. Measured 3-11% at hidden size 32 (the tests), 2-4% at 64 (the embedded run,
# `frontier-rl bench flops`); it shrinks as the hidden size grows.
ELEMENTWISE_ALLOWANCE = 0.15


def matmul_params(mcfg: ModelConfig) -> int:
    """N: the parameters each token is multiplied by, one multiply-add each (2 FLOPs).

    The non-embedding parameters (attention and MLP projections, their biases, norm weights)
    plus the LM head (vocab x hidden), counted even when tied to the embedding because the
    logits matmul runs either way; the embedding lookup itself is a gather (no FLOPs).
    """
    return mcfg.num_params(include_embeddings=False) + mcfg.vocab_size * mcfg.hidden_size


def attention_flops_per_pair(mcfg: ModelConfig) -> int:
    """Forward FLOPs of one (query token, key token) pair summed over layers: scores q.k and
    the weighted sum of v, 2 * head_dim each, per query head."""
    return 4 * mcfg.num_layers * mcfg.num_heads * mcfg.head_dim


def analytic_flops(mcfg: ModelConfig, kind: str, prompt_lens: Sequence[int],
                   response_lens: Sequence[int] | None = None, *, epochs: int = 1) -> float:
    """FLOPs of `kind` on real tokens only, for sequences of prompt + response tokens.

    A sequence of T tokens is one causal forward: 2N per token (`matmul_params`) plus attention
    over T(T+1)/2 (query, key) pairs, i.e. causal attention at half of dense T^2.
      generation   prefill of the prompt, then one decode step per generated token (EOS
                   included), each attending to the real context so far: the same T tokens and
                   pairs as one forward over prompt + response.
      entropy      forward over the prompt (response_lens is ignored).
      old_logprob  forward over prompt + response (old-policy recompute or reference policy).
      train        forward + backward = 3 x forward (6N per trained token), per epoch.
    """
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is not one of {KINDS}")
    t = np.asarray(prompt_lens, np.float64)
    if kind != "entropy" and response_lens is not None:
        t = t + np.asarray(response_lens, np.float64)
    forward = (2.0 * matmul_params(mcfg) * t.sum()
               + attention_flops_per_pair(mcfg) * float((t * (t + 1) / 2).sum()))
    return forward * (3 * epochs if kind == "train" else 1)


def dense_flops(mcfg: ModelConfig, tokens: int, keys: int) -> float:
    """Forward FLOPs by the formula for `tokens` query slots each attending to `keys` slots
    (dense, as the device computes a padded, masked batch)."""
    return (2.0 * matmul_params(mcfg) * tokens
            + float(attention_flops_per_pair(mcfg)) * tokens * keys)


# HeaPA's convention: horizon-rl/HeaPA at commit 8b4cafb, recipe/dapo/dapo_ray_trainer_HeaPA.py
# (class EfficiencyAnalyzer; the line numbers here are that file's). The backward pass costs
# twice a forward (estimate_backward_tflops, l. 1429), the rule reward a tenth of a forward over
# the rolled-out batch (l. 1470).
HEAPA_BACKWARD = 2.0
HEAPA_REWARD = 0.1


def _heapa_dims(mcfg: ModelConfig) -> tuple[int, int, int, int]:
    return mcfg.num_layers, mcfg.hidden_size, mcfg.intermediate_size, mcfg.vocab_size


def heapa_forward_flops(mcfg: ModelConfig, rows: int, seq: int) -> float:
    """HeaPA's forward pass over `rows` sequences of width `seq`, in FLOPs (its
    estimate_forward_tflops(rows, seq) x 1e12, ll. 1402-1414 of
    recipe/dapo/dapo_ray_trainer_HeaPA.py):

        rows * seq * (L * (4 H^2 + 4 seq H + 8 H I) + 2 H V)

    L layers, H hidden size, I MLP size, V vocabulary. Every token of the padded width `seq`
    is charged, each attending to all `seq` positions (ctx = seq: dense, not causal). The terms
    mix conventions: 4 H^2 is the MACs of q, k, v, o as if each were H x H (FLOPs would be 8 H^2,
    and grouped-query attention's smaller k, v are ignored); 4 seq H the FLOPs of q.k and the
    weighted sum of v; 8 H I is 4/3 of SwiGLU's 6 H I FLOPs; 2 H V an "input embed + output
    project" pair at one MAC per weight (the embedding is a gather; the LM head is 2 H V FLOPs).
    """
    n_layers, h, inter, vocab = _heapa_dims(mcfg)
    per_token = n_layers * (4 * h * h + 4 * seq * h + 8 * h * inter) + 2 * h * vocab
    return float(rows) * seq * per_token


def heapa_generation_flops(mcfg: ModelConfig, rows: int, prompt_len: int,
                           new_tokens: int) -> float:
    """HeaPA's generation of `new_tokens` after prompts padded to `prompt_len`, in FLOPs (its
    estimate_forward_tflops(rows, prompt_len, is_generation=True, new_tokens) x 1e12,
    ll. 1383-1400):

        rows * new_tokens * (L * (4 H^2 + 4 ctx H + 8 H I) + H V),
        ctx = prompt_len + new_tokens / 2

    Only the generated tokens are charged, every row for the whole cap `new_tokens` (its
    callers pass the configured response length), each attending to the mean context of the
    decode loop; the prompt's prefill is not charged, and the LM head is one H V (no embedding
    term, unlike the forward). With no new tokens the code falls through to the forward.
    """
    if new_tokens <= 0:
        return heapa_forward_flops(mcfg, rows, prompt_len)
    n_layers, h, inter, vocab = _heapa_dims(mcfg)
    ctx = prompt_len + new_tokens / 2
    per_token = n_layers * (4 * h * h + 4 * ctx * h + 8 * h * inter) + h * vocab
    return float(rows) * new_tokens * per_token


def abstract(tree: Any) -> Any:
    """Shapes and dtypes of a pytree of arrays (what cost analysis needs; no values)."""
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), tree)


# Rows at which a cost program is compiled (see the module docstring): two points of a line.
COST_ROWS = (1, 2)


def host_device() -> jax.Device:
    """The CPU device cost programs are compiled for; an error names JAX_PLATFORMS if JAX was
    started without its CPU backend."""
    try:
        return jax.devices("cpu")[0]
    except RuntimeError as e:
        raise RuntimeError(
            "FLOPs accounting compiles its cost programs on JAX's CPU backend, which this "
            "process lacks: add cpu to JAX_PLATFORMS (e.g. JAX_PLATFORMS=cuda,cpu)") from e


def _lower(fn: Callable, args: tuple) -> jax.stages.Lowered:
    """The one place a cost program is lowered (tests count lowerings here)."""
    return jax.jit(fn).lower(*args)


def compiled_flops(fn: Callable, *args: Any) -> float:
    """XLA's cost-analysis FLOPs of `fn` compiled for `args` (arrays or ShapeDtypeStructs) on
    the CPU backend; NaN when the backend reports none.

    Every argument is placed on the host CPU device, whatever device or sharding it had, so the
    program is compiled by the CPU compiler and never allocated on an accelerator. The count is
    taken on the optimised HLO, before code generation, so the backend's optimisation level does
    not change it: lowering it to 0 halves the compile time.
    """
    host = jax.sharding.SingleDeviceSharding(host_device())
    placed = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=host), args)
    with jax.default_device(host_device()):
        lowered = _lower(fn, placed)
        try:
            compiled = lowered.compile(compiler_options={"xla_backend_optimization_level": 0})
        except Exception:  # a backend that rejects the option: compile as usual
            compiled = lowered.compile()
    cost = compiled.cost_analysis()
    if isinstance(cost, (list, tuple)):  # older jax: one dict per device program
        cost = cost[0] if cost else None
    return float(cost.get("flops", float("nan"))) if cost else float("nan")


def _line(one: Any, two: Any, rows: int) -> Any:
    """The cost at `rows` on the line through the costs at 1 and 2 rows (floats or tuples)."""
    if isinstance(one, tuple):
        return tuple(_line(a, b, rows) for a, b in zip(one, two, strict=True))
    return one + (rows - 1) * (two - one)


def cost_store_key(config: Any, mcfg: ModelConfig, stop_ids: Sequence[int], pad_id: int) -> dict:
    """What a run's cost programs depend on beyond their shapes, the key of `Accountant`'s
    store: the model, rl, rollout and mesh config (less the budget: how long a run is, not what
    it computes), the stop and pad ids, the device count and JAX's version. The runs of a
    comparison differ in selector and seed only, so they share it."""
    key = {"jax": jax.__version__, "devices": jax.device_count(), "mcfg": mcfg,
           "stop": tuple(stop_ids), "pad": pad_id,
           **{k: config[k].to_dict() for k in ("model", "rl", "rollout", "mesh")}}
    for budget in ("num_steps", "rollout_budget", "token_budget", "pflops_budget"):
        key["rl"].pop(budget, None)
    return key


class Accountant:
    """Cumulative FLOPs per kind (generation, entropy, old_logprob, train): XLA, formula and
    HeaPA's convention.

    Give it the device functions whose work it charges (`sampler`, `entropy`, `trainer`) and
    the policy parameters (only their shapes are kept). Each new padded shape costs one
    pair of small CPU compiles (1 and 2 rows) for analysis, once per padded length: other row
    counts at that length are read off the line through the two.

    HeaPA's figure is charged as its released trainer sizes each stage
    (recipe/dapo/dapo_ray_trainer_HeaPA.py, `measure_stage` calls): B its batch's sequences
    (len(input_ids), prompts x n after the repeat, l. 7027), widths its padded input_ids'
    (prompts left-padded to max_prompt_length, responses right-padded to response_length):
      rollout_generation (l. 7050)  generation(B, prompt width, rollout.response_length)
      reward_computation (l. 7125)  0.1 x forward(B, prompt + response width)
      augmentation_gen.  (l. 7384)  generation(B, source prompt width, its max_new_tokens)
      old_log_prob, ref_log_prob (ll. 7516, 7549)  forward(B, prompt + response width)
      actor_update       (l. 7596)  forward + backward = 3 x forward(B, width), once per step
                                    (verl's epochs and mini-batches are inside the one call)
      advantage 0, pool sampling 0 (width 0); teacher_annotation is never measured (the
      teacher is an API); an unknown stage is charged a forward (l. 1478).
    Here, per program:
      generation   `charge_generation`: generation(B real rows of the call, the prompt bucket,
                   the token cap), whatever the steps run or the lengths; a scored rollout also
                   the reward's 0.1 x forward(B, bucket + cap), a free-text sample
                   (`scored=False`: HeaPA's augmentation) none.
      entropy      HIVE's prompt-entropy pass has no HeaPA stage: a forward, as its code charges
                   a stage it does not know, over (prompts, prompt bucket).
      old_logprob  forward(B sequences of the packed batch, its row length), per call (old
                   policy or reference). In the "pad" layout the row is verl's prompt + response
                   width; "trim" and "pack" rows are shorter, and so is the figure.
      train        3 x forward(B, row length) per `Trainer.step`, not multiplied by epochs.
    The dimensions are the policy's. The released trainer reads them with getattr defaults
    from the top of the whole trainer config (`EfficiencyAnalyzer(model_config=config)`,
    l. 3488; ll. 1334-1345), where the DAPO config (recipe/dapo/config/dapo_trainer.yaml over
    verl's ppo_trainer.yaml) has no model, hidden_size, num_hidden_layers, vocab_size or
    intermediate_size, so its figures fall back to H 4096, L 32, V 32000, I 4H whatever the
    model: this counts the convention on the model actually trained.
    """

    def __init__(self, mcfg: ModelConfig, params: Any, *, sampler=None, entropy=None,
                 trainer=None, store: str | None = None, store_key: Any = None):
        self.mcfg = mcfg
        self.sampler, self.entropy, self.trainer = sampler, entropy, trainer
        self._params = abstract(params)
        self.costs: dict[tuple, Any] = {}  # XLA cost per (kind, rows, *padded shape)
        self._points: dict[tuple, tuple] = {}  # (kind, *shape without rows) -> costs at COST_ROWS
        self.cost_compiles = 0  # cost programs compiled
        self.totals = {k: _zeros() for k in KINDS}
        self._lock = threading.Lock()
        # Costs kept on disk (`store`, a directory) for other runs of the same programs: the
        # runs of a comparison differ in selector and seed, not in what their device functions
        # compute, and each lowering costs a second or so of host time. `store_key` must name
        # everything the cost programs depend on beyond the shape (train.py passes the model,
        # rl, rollout and mesh config, the stop and pad ids, the device count and JAX's version:
        # `cost_store_key`).
        self._store = store if store and store_key is not None else None
        self._store_key = json.dumps(store_key, sort_keys=True, default=str)

    def _stored(self, key: tuple) -> str:
        text = json.dumps([self._store_key, list(key), list(COST_ROWS)], default=str)
        return os.path.join(self._store, hashlib.sha256(text.encode()).hexdigest() + ".json")

    def _cost(self, key: tuple, rows: int, compute: Callable[[int], Any]) -> Any:
        """XLA's cost of `key` ((kind, *shape without rows)) at `rows`: `compute(r)` analyses
        the program at r rows, called only at COST_ROWS (or read from the store, when another
        run with the same store key analysed it)."""
        full = (key[0], rows, *key[1:])
        if full not in self.costs:
            if key not in self._points:
                self._points[key] = self._load(key)
            if self._points[key] is None:
                self._points[key] = tuple(compute(r) for r in COST_ROWS)
                self.cost_compiles += len(COST_ROWS)
                self._save(key, self._points[key])
            self.costs[full] = _line(*self._points[key], rows)
        return self.costs[full]

    def _load(self, key: tuple) -> tuple | None:
        if self._store is None:
            return None
        try:
            with open(self._stored(key)) as f:
                points = json.load(f)
        except (OSError, ValueError):  # not there yet, or unreadable: analyse it again
            return None
        return tuple(tuple(p) if isinstance(p, list) else p for p in points)

    def _save(self, key: tuple, points: tuple) -> None:
        if self._store is None:
            return
        path = self._stored(key)
        try:
            os.makedirs(self._store, exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                json.dump(list(points), f)
            os.replace(tmp, path)  # a reader sees the whole entry or none
        except OSError:  # a read-only store: the costs stay in this run
            pass

    def _add(self, kind: str, *, tokens: int, padded_tokens: int, xla: float, formula: float,
             padded_formula: float, heapa: float) -> None:
        # rl.staleness charges an update from its thread while rollouts are charged here
        with self._lock:
            t = self.totals[kind]
            t["calls"] += 1
            t["tokens"] += int(tokens)
            t["padded_tokens"] += int(padded_tokens)
            t["xla_flops"] += float(xla)
            t["formula_flops"] += float(formula)
            t["padded_formula_flops"] += float(padded_formula)
            t["heapa_flops"] += float(heapa)

    # -- charges ----------------------------------------------------------------------------

    def charge_generation(self, res: Any, *, scored: bool = True) -> None:
        """One `Sampler.sample` call (its `SampleResult`): prefill + the decode steps its loop
        ran, from `res.shape`, `res.prompt_lens` and `res.lengths`; a result joined from
        several calls (`rollout.rows_per_call`) is charged call by call. `scored`: its
        responses are rewarded (a rollout), which HeaPA's convention charges too."""
        if getattr(res, "parts", ()):
            for part in res.parts:
                self.charge_generation(part, scored=scored)
            return
        sh = res.shape
        tokens = int(res.prompt_lens.sum()) + int(res.lengths.sum())
        formula = analytic_flops(self.mcfg, "generation", res.prompt_lens, res.lengths)
        # HeaPA's widths: the prompt bucket and the token cap; an external engine's prompts
        # as a left-padded batch of them would be (its padding is unknown), its cap the tokens'
        width, cap = ((sh.prompt_len, sh.max_new) if sh is not None
                      else (int(res.prompt_lens.max(initial=0)), int(res.tokens.shape[1])))
        rows = len(res.prompt_lens)
        heapa = heapa_generation_flops(self.mcfg, rows, width, cap)
        if scored:
            heapa += HEAPA_REWARD * heapa_forward_flops(self.mcfg, rows, width + cap)
        if sh is None:  # an external engine's result: its padding is unknown, the formula stands
            self._add("generation", tokens=tokens, padded_tokens=tokens, xla=formula,
                      formula=formula, padded_formula=formula, heapa=heapa)
            return
        key = ("generation", sh.prompt_len, sh.max_new, sh.greedy, sh.use_top_p,
               sh.sample_top_k)
        prefill, step = self._cost(key, sh.rows, lambda r: self.sampler.cost_analysis(
            self._params, dataclasses.replace(sh, rows=r)))
        slots = sh.rows * (sh.prompt_len + sh.steps)
        self._add("generation", tokens=tokens, padded_tokens=slots, xla=prefill + sh.steps * step,
                  formula=formula,
                  padded_formula=dense_flops(self.mcfg, slots, sh.prompt_len + sh.max_new),
                  heapa=heapa)

    def charge_entropy(self, prompt_lens: Sequence[int]) -> None:
        """One `PromptEntropy` call over prompts of these lengths."""
        rows, plen = self.entropy.padded_shape(prompt_lens)
        xla = self._cost(("entropy", plen), rows,
                         lambda r: self.entropy.cost_analysis(self._params, r, plen))
        self._add("entropy", tokens=int(np.sum(prompt_lens)), padded_tokens=rows * plen, xla=xla,
                  formula=analytic_flops(self.mcfg, "entropy", prompt_lens),
                  padded_formula=dense_flops(self.mcfg, rows * plen, plen),
                  heapa=heapa_forward_flops(self.mcfg, len(prompt_lens), plen))

    def charge_logps(self, batch: dict[str, np.ndarray]) -> None:
        """One `Trainer.logps` call on a packed batch (old-policy recompute or reference)."""
        rows, length = batch["tokens"].shape
        xla = self._cost(("old_logprob", length), rows,
                         lambda r: self.trainer.logps_cost(self._params, r, length))
        lens = _row_lengths(batch)
        self._add("old_logprob", tokens=int(lens.sum()), padded_tokens=rows * length, xla=xla,
                  formula=analytic_flops(self.mcfg, "old_logprob", lens),
                  padded_formula=dense_flops(self.mcfg, rows * length, length),
                  heapa=heapa_forward_flops(self.mcfg, len(lens), length))

    def charge_train(self, batch: dict[str, np.ndarray]) -> None:
        """One `Trainer.step` on a packed batch: epochs x minibatches optimizer updates."""
        rows, length = batch["tokens"].shape
        epochs, mbs = self.trainer.epochs, self.trainer.minibatches
        update = self._cost(("train", length), rows // mbs,
                            lambda r: self.trainer.update_cost(self._params, r, length))
        lens = _row_lengths(batch)
        self._add("train", tokens=epochs * int(lens.sum()), padded_tokens=epochs * rows * length,
                  xla=epochs * mbs * update,
                  formula=analytic_flops(self.mcfg, "train", lens, epochs=epochs),
                  padded_formula=3 * epochs * dense_flops(self.mcfg, rows * length, length),
                  heapa=(1 + HEAPA_BACKWARD) * heapa_forward_flops(self.mcfg, len(lens), length))

    # -- reporting and checkpoints ----------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """Cumulative `perf/` metrics: PFLOPs (xla, formula and HeaPA's convention, total and
        per kind), padding ratios and xla / formula; ratios only for kinds charged at least
        once."""
        out: dict[str, float] = {}
        for kind, t in [*self.totals.items(), ("all", self._all())]:
            sfx = "" if kind == "all" else f"/{kind}"
            out[f"perf/pflops{sfx}"] = t["xla_flops"] / 1e15
            out[f"perf/pflops_formula{sfx}"] = t["formula_flops"] / 1e15
            out[f"perf/pflops_heapa{sfx}"] = t["heapa_flops"] / 1e15
            out[f"perf/tokens{sfx}"] = t["tokens"]
            if t["calls"] and t["formula_flops"] > 0:
                out[f"perf/padding_ratio{sfx}"] = t["padded_formula_flops"] / t["formula_flops"]
                out[f"perf/token_padding_ratio{sfx}"] = t["padded_tokens"] / t["tokens"]
                out[f"perf/xla_over_formula{sfx}"] = t["xla_flops"] / t["formula_flops"]
        return out

    def _all(self) -> dict[str, float]:
        return {f: sum(t[f] for t in self.totals.values()) for f in FIELDS}

    def state_dict(self) -> dict[str, dict[str, float]]:
        """The cumulative counters, JSON-serialisable (for checkpoints)."""
        return {k: dict(t) for k, t in self.totals.items()}

    def load_state_dict(self, state: dict[str, dict[str, float]]) -> None:
        """Counters from `state_dict`; a field an older checkpoint lacks starts at 0."""
        for kind in KINDS:
            t = _zeros()
            for f, v in state.get(kind, {}).items():
                t[f] = type(t[f])(v)
            self.totals[kind] = t


def _zeros() -> dict[str, float]:
    return {f: 0.0 if f.endswith("flops") else 0 for f in FIELDS}


def _row_lengths(batch: dict[str, np.ndarray]) -> np.ndarray:
    """Real tokens (prompt + response) of each sequence of a packed batch: `valid` holds each
    token's sequence index within its row (1 in every layout but "pack"), 0 for padding."""
    valid = np.asarray(batch["valid"])
    most = int(valid.max(initial=0))
    lens = np.concatenate([(valid == k).sum(axis=1) for k in range(1, most + 1)]
                          or [np.zeros(0, np.int64)])
    return lens[lens > 0]
