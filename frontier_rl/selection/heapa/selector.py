"""The `heapa` and `ps` selectors: pool + sampler + augmentation + teacher + lineage.

One step (build_batch, then after_update once the policy is updated):

    drain the teacher: accepted (question, answer) pairs become records (cold queue, or the
      heaps at their estimate with aug_entry="heap"), with their parent recorded
    recycle if |pool| < B or |archive| >= recycle_archive_max: lineage refresh (ChildAgg /
      PathAgg), then the archive is reinserted, `recycle_chunk` records per step (more if
      the pool cannot otherwise supply B)
    sample B records (cold first, then the boundary sampler) -> ctx.rollout(..., G)
    pool statistic of each record = mean shaped reward of its own group, matched by record id;
      the record goes to the archive            [with filter_groups: DAPO rounds until B
                                                 non-zero-variance groups or max_rounds]
    after_update: the policy writes n_aug candidates per rolled-out prompt (ctx.generate);
      parsed, deduplicated, and queued for the teacher without waiting

Rollouts of augmented records need them in the context: `ctx.add_prompts(list[Prompt]) ->
list[int]` appends them (id = record_id, answer = the teacher's) and returns their indices.

Selectors and ablations (HeaPA, arXiv 2601.22448: the method, its PS baseline and its ablations):
    heapa                          HeaPA + PathAgg (default: refresh="path")
    heapa, refresh="child"         HeaPA + ChildAgg
    heapa, augment=False           heap sampling only
    heapa, sampling="uniform"      policy augmentation only (uniform draws from the pool)
    ps                             Prioritized Sampling (heapa/ps.py); augment=True is PS+PA

Paper symbols -> config fields (`config.selector.heapa.*`, defined in heapa/config.py):
    alpha -> alpha, N -> capacity, B -> rl.batch_size, G -> rl.group_size, n_aug -> n_aug,
    [d_min, d_max] -> d_min / d_max, "up to 2B candidates" -> candidate_factor,
    archive threshold -> recycle_archive_max, T (PathAgg) -> path_weight_temp.

Where this follows the paper rather than the released verl code, or fixes it (the code's
behaviour stays available where it is a reasonable choice):
 1. Rewards: r = 1 / 0 / -1 (paper; reward_scheme="ternary"); the code scores +-1
    (reward_scheme="pm1": correct +1, anything else -1, plus any shaping).
 2. Accepted augmentations enter the cold queue (paper, slime port; aug_entry="cold"); the verl
    code puts them straight into the heaps at their estimate (aug_entry="heap").
 3. Recycling also triggers when the archive reaches recycle_archive_max (paper; the code has
    only |pool| < B; 0 turns it off). Reinsertion is spread over steps, recycle_chunk records
    per step (0 = all at once, as the code, which only sleeps between 512-record chunks).
 4. Pool statistics and the augmentation parent's reward are keyed by record id (the code
    matches rewards by position and looks the parent reward up under a mismatched text key).
    Nothing sampled is lost: a record that was not rolled out goes back to the pool.
 5. max(low) <= min(high) always holds: an arrival is placed by comparing with both boundary
    items, and rebalancing runs to completion (rebalance_max_moves=0; the code's 4 = local).
 6. Evictions keep the lineage graph and the record index consistent (the code leaves
    dangling edges) and are counted (evicted, evicted_on_arrival).
 7. Augmentation enforces the stop strings and the token cap, and parses only the response
    (the code's rollout ignored both, and its parser read a tail of the prompt).
 8. The teacher rejects answers that are not numbers (the code let gt=None through) and keeps
    JSON number answers (the code dropped them); faults are retried and counted.
 9. Everything is seeded; the whole state (pool, heaps, archive, recycle queue, lineage,
    teacher queue and in-flight work, RNGs) is checkpointed.
10. Augmented records get short sequential ids ("aug/<hex>") rather than uuid4, so runs repeat.
11. The DAPO group filter (filter_groups) returns what it has after max_rounds instead of
    raising.
12. max_cold_frac < 1 caps the cold share of a batch (an addition; 1.0 = paper and code).
    With aug_entry="cold" and most candidates accepted, children arrive about as fast as
    the batch consumes them, so batches can stay cold and the boundary sampler idle: that is
    the paper's rule; max_cold_frac or aug_entry="heap" change it.
13. Easy mixing is sampling="mixed" (the code silently ran medium-only for any string other
    than mixed_easy_medium / mixed / half).
14. The teacher retries once by default (teacher_max_retries=1; the code's max_retries=1
    meant a single attempt) and its worker count defaults to 2 (code: 1).
15. Template difficulty: a bare number counts only inside the DIFFICULTY field (augment.py).
16. PS: a record entering at an estimate starts with visit count ps_prior_count=1 (code: 0,
    so its first rollout overwrote the estimate) (ps.py).
17. With filter_groups, a later round's recycling can evict (at capacity) a record rolled out
    earlier in the same step. The step keeps what it measured (record id, text, index,
    augmented or not) rather than a view of the record, so its group is still trained, counted
    and augmented; the evicted record leaves the lineage as any other eviction does.

Mechanism counters (`mechanisms()`, cumulative since step 0; those the configuration cannot
move are not reported): cold_draws (records drawn from the cold queue), boundary_draws (drawn
by the dual-heap boundary sampler; sampling="mixed" adds easy_draws, sampling="uniform" has
uniform_draws instead), boundary_selective / uniform_selective (those draws made while the
scored pool held more records than the boundary candidate set / the draw, so the rule passed
records over), evicted (every eviction, the initial fill's included), recycled (archive
records reinserted); with augment: evicted_after_fill (evictions after the seeds were loaded:
children, or records recycled once children have grown the pool, arriving at a full pool),
children_rolled_out and children_trained (augmented records rolled out / in a trained batch),
teacher_wrong_labels (children given a wrong answer, when teacher_error_rate > 0), and unless
refresh="none", lineage_refreshes (refresh passes over a non-empty lineage graph) and
parents_refreshed (archived parents whose statistic a refresh changed); with filter_groups:
topup_rounds and groups_discarded (DAPO rounds beyond the first, zero-variance groups dropped).
PS reports priority_draws and priority_selective instead of the boundary and uniform draws, and
has no recycling or lineage refresh. selection/mechanisms.py says which of them prove the
method ran and which are non-zero by construction.

A fair teacher (teacher.py): teacher_error_rate replaces an accepted child's answer by a wrong
one with that probability (decided from the run seed and the candidate id, so runs repeat; the
child keeps its text), and teacher_latency_s delays every verdict (inline: by
⌈teacher_latency_s / teacher_step_s⌉ steps). Both default to 0, the exact instant teacher;
the arith comparison sets the error rate to the paper's 1.2%.
"""

from __future__ import annotations

import collections
import hashlib
import re
import time

import numpy as np

from frontier_rl.selection.base import (
    REWARD_CORRECT,
    REWARD_WRONG,
    Group,
    StepContext,
    on_primary,
    register,
)
from frontier_rl.selection.common import Tally, read_config, rng_state, set_rng_state
from frontier_rl.selection.heapa import augment, lineage, pool, ps, teacher
from frontier_rl.selection.heapa.config import HEAPA_DEFAULTS, PS_DEFAULTS, checker
from frontier_rl.tasks.base import Prompt

# `_step` key of each kind of draw -> its mechanism counter.
DRAWS = {"sampled_cold": "cold_draws", "sampled_boundary": "boundary_draws",
         "sampled_easy": "easy_draws", "sampled_uniform": "uniform_draws",
         "sampled_prioritized": "priority_draws",
         "sampled_boundary_selective": "boundary_selective",
         "sampled_uniform_selective": "uniform_selective",
         "sampled_prioritized_selective": "priority_selective"}
MECHANISMS = (*DRAWS.values(), "children_rolled_out", "children_trained", "lineage_refreshes",
              "topup_rounds", "groups_discarded", "stage2_dropped", "evicted_after_fill",
              "teacher_wrong_labels")

# Every rejection reason has a metric (select/reject_<reason>), zero when it did not occur.
REASONS = ("empty", "ill_formed", "token_cap", "duplicate", "queue_full", "unsolvable",
           "filter", "no_numeric_answer", "empty_clean", "cjk", "timeout", "connection_error",
           "http_error", "malformed_response", "malformed_json", "overloaded", "exception")

# Outcome values (correct, wrong, invalid): the task's default, and each reward_scheme's.
TERNARY = (1.0, 0.0, -1.0)
SCHEMES = {"ternary": TERNARY, "pm1": (1.0, -1.0, -1.0)}


def _value(outcomes: np.ndarray, values) -> np.ndarray:
    return np.where(outcomes == REWARD_CORRECT, values[0],
                    np.where(outcomes == REWARD_WRONG, values[1], values[2]))


def text_key(text: str) -> int:
    """Stable 53-bit hash of a normalised problem text (dedup; exact in any JSON reader)."""
    norm = re.sub(r"\s+", " ", text.strip().lower())
    return int.from_bytes(hashlib.blake2b(norm.encode(), digest_size=8).digest(), "big") >> 11


# ----------------------------------------------------------------------------- the selector


@register("heapa", defaults=HEAPA_DEFAULTS, validate=checker("heapa", HEAPA_DEFAULTS))
class Heapa:
    kind = "heapa"
    defaults = HEAPA_DEFAULTS

    def __init__(self, cfg, *, num_prompts: int, seed: int):
        self.check_config(cfg)
        self.c = c = read_config(cfg, self.defaults)
        if num_prompts < 1:
            raise ValueError("the training pool is empty")
        self.num_prompts = num_prompts
        self.seed = seed
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 0x4EA9A]))
        self.pool = self._make_pool()
        self.lineage = lineage.Lineage()
        self.teacher = teacher.AsyncTeacher(
            workers=c.teacher_workers, queue_size=c.teacher_queue,
            timeout_s=c.teacher_timeout_s, max_retries=c.teacher_max_retries,
            backoff_s=c.teacher_backoff_s, latency_s=c.teacher_latency_s,
            step_s=c.teacher_step_s)
        self.fmt = ""  # resolved augmentation format ("arith" / "template")
        self.template = c.prompt_template  # "" until resolved from the context (_resolve)
        self.augmenter: augment.Augmenter | None = None
        self.seeded = False
        self.seen: set[int] = set()
        self.next_cid = 0
        self.next_rid = 0
        self.step = 0
        self.counters: collections.Counter = collections.Counter()
        self.mech = Tally(*MECHANISMS)
        # This step's rolled-out records as measured: (record id, text or None, index, stat).
        # Not views: a later round's recycling may evict the record (filter_groups).
        self._observed: list[tuple[str, str | None, int, float]] = []
        self._step: collections.Counter = collections.Counter()
        self._last: dict[str, float] = {}
        self._host_s = 0.0
        self._ctx_s = 0.0
        self._sampled_stats: list[float] = []
        self._by_index: dict[int, bool] = {}  # this step's rolled-out index -> augmented
        self._kept = 0
        self._aug_in_batch = 0
        self._evicted_seen = 0  # pool evictions already counted (or made by the seed fill)

    @classmethod
    def check_config(cls, cfg) -> None:
        checker(cls.kind, cls.defaults)(cfg)

    @classmethod
    def proof_counters(cls, cfg) -> tuple[list[str], list[str]]:
        sampling = "uniform" if cfg.sampling == "uniform" else "boundary"
        proof, info = [f"{sampling}_selective"], ["cold_draws", f"{sampling}_draws"]
        if cfg.sampling == "mixed":
            info.append("easy_draws")
        info.append("evicted")
        cls._augment_counters(cfg, proof, info)
        archive = proof if cfg.recycle_archive_max > 0 else info  # recycling needs a threshold
        archive.append("recycled")
        if cfg.augment and cfg.refresh != "none":  # a lineage needs children
            archive += ["lineage_refreshes", "parents_refreshed"]
        if cfg.filter_groups:
            proof += ["topup_rounds", "groups_discarded"]
        return proof, info

    @staticmethod
    def _augment_counters(cfg, proof: list[str], info: list[str]) -> None:
        if cfg.augment:
            # without the capacity check children enter a full pool and evict; with it the
            # bound need not bind again after the fill
            (info if cfg.aug_require_capacity else proof).append("evicted_after_fill")
            proof += ["children_rolled_out", "children_trained"]
            if cfg.teacher_error_rate > 0:
                info.append("teacher_wrong_labels")

    def _make_pool(self):
        c = self.c
        return pool.Pool(alpha=c.alpha, capacity=c.capacity, candidate_factor=c.candidate_factor,
                         sampling=c.sampling, rebalance_max_moves=c.rebalance_max_moves,
                         max_cold_frac=c.max_cold_frac, seed=self.seed, on_evict=self._evicted)

    def _evicted(self, rec) -> None:
        self.lineage.remove(rec.rid, rec.parent)

    # ------------------------------------------------------------------ set-up

    def _resolve(self, ctx: StepContext) -> None:
        """Picks the augmentation format, the prompt template and the teacher (once; all are
        checkpointed). The template is the config's, else the task's own rendering of a new
        question (ctx.prompt_wrapper): the policy's chat template, never a guess at it."""
        c = self.c
        prompts = ctx.prompts
        if not self.template:
            self.template = getattr(ctx, "prompt_wrapper", "") or "{prompt}"
        if not self.fmt:
            fmt = c.aug_format
            if fmt == "auto":
                head = [prompts[i].text for i in range(min(len(prompts), 64))]
                fmt = "arith" if all(augment.is_arith_prompt(t) for t in head) else "template"
            self.fmt = fmt
        self._build_augmenter()

    def _build_augmenter(self) -> None:
        c = self.c
        if not c.augment or self.augmenter is not None:
            return
        self.augmenter = augment.Augmenter(
            fmt=self.fmt, n_aug=c.n_aug, max_new_tokens=c.aug_max_new_tokens,
            temperature=c.aug_temperature, d_min=c.d_min, d_max=c.d_max,
            arith_mode=c.arith_prefix, prompt_template=self.template,
            est_fallback=c.est_fallback, rng=self.rng)
        kind = c.teacher if c.teacher != "auto" else ("arith" if self.fmt == "arith" else "http")
        if kind == "arith":
            self.teacher.teacher = teacher.ArithTeacher(
                max_operands=c.arith_max_operands, max_digits=c.arith_max_digits,
                reverse_digits=c.reverse_digits)
        else:
            if not c.teacher_url:
                raise ValueError(f"selector.{self.kind}.teacher_url is empty: augmentation of "
                                 "text prompts needs an OpenAI-compatible teacher endpoint "
                                 "(or set augment=False)")
            self.teacher.teacher = teacher.HttpTeacher(
                c.teacher_url, model=c.teacher_model, api_key_env=c.teacher_api_key_env,
                timeout_s=c.teacher_timeout_s, max_tokens=c.teacher_max_tokens,
                max_tokens_field=c.teacher_max_tokens_field,
                reasoning_effort=c.teacher_reasoning_effort, d_min=c.d_min, d_max=c.d_max,
                max_question_chars=c.max_question_chars)

    def _body(self, text: str) -> str:
        return text if self.fmt == "arith" else augment.unwrap(text, self.template)

    def wrap(self, question: str) -> str:
        """The prompt text of a new question: the task's rendering (template path)."""
        return question if self.fmt == "arith" else self.template.format(prompt=question)

    def _seed(self, ctx: StepContext) -> None:
        """The training prompts enter the cold queue (id = prompt id, index = position)."""
        prompts = ctx.prompts
        n = min(self.num_prompts, len(prompts))
        self._resolve(ctx)
        order = self.rng.permutation(n).tolist() if self.c.shuffle_seeds else range(n)
        recs = []
        for i in order:
            p = prompts[i]
            recs.append(pool.Record(p.id, index=i))
            if self.c.augment:
                self.seen.add(text_key(self._body(p.text)))
        self.pool.add_many(recs)
        self.seeded = True
        self._evicted_seen = self.pool.counters["evicted"]  # the fill's evictions do not count

    # ------------------------------------------------------------------ build_batch

    def build_batch(self, ctx: StepContext) -> list[Group]:
        t0 = time.perf_counter()
        self._ctx_s = 0.0
        self.step = int(getattr(ctx, "step", self.step + 1))
        self._step = collections.Counter()
        self._observed = []
        self._sampled_stats = []
        self._by_index = {}
        self._last = {}
        if not self.seeded:
            self._seed(ctx)
        self._drain(ctx)
        B, G = ctx.batch_size, ctx.group_size
        kept: list[Group] = []
        last: list[Group] = []
        rounds = discarded = 0
        while True:
            self._ensure_supply(B)
            recs = self._sample(ctx, B)
            if not recs:
                break
            self._sampled_stats += [r.stat for r in recs if r.stat is not None]
            groups = self._rollout(ctx, recs, G)
            rounds += 1
            if not self.c.filter_groups:
                kept = groups
                break
            informative = [g for g in groups if not g.zero_variance]
            kept += informative
            discarded += len(groups) - len(informative)
            last = groups
            if len(kept) >= B or rounds >= self.c.max_rounds:
                break
        if self.c.filter_groups:
            if len(kept) > B:
                kept = kept[:B]
            elif not kept:
                kept = last
                discarded -= len(last)  # trained after all (zero advantage)
                self.counters["filter_short"] += 1
            self.mech.add("topup_rounds", max(0, rounds - 1))
            self.mech.add("groups_discarded", discarded)
        self._step["rounds"] = rounds
        self._kept = len(kept)
        self._aug_in_batch = sum(1 for g in kept if self._by_index.get(g.index, False))
        for key, name in DRAWS.items():
            self.mech.add(name, self._step[key])
        self.mech.add("children_rolled_out", self._step["aug_groups"])
        self.mech.add("children_trained", self._aug_in_batch)
        self._count_evictions()
        self._host_s = time.perf_counter() - t0 - self._ctx_s
        return kept

    def _count_evictions(self) -> None:
        """Adds the pool's evictions since the last call to evicted_after_fill (the seed fill's
        evictions were set aside in `_seed`)."""
        ev = self.pool.counters["evicted"]
        self.mech.add("evicted_after_fill", ev - self._evicted_seen)
        self._evicted_seen = ev

    def _sample(self, ctx: StepContext, k: int) -> list[pool.RecordView]:
        """Takes one round's k records out of the pool (heapa_hive gates them here)."""
        recs = self.pool.sample(k)
        for key, v in self.pool.last.items():
            self._step[f"sampled_{key}"] += v
        return recs

    def _ensure_supply(self, need: int) -> None:
        c, p = self.c, self.pool
        for _ in range(2):
            trigger = p.size < need or (c.recycle_archive_max
                                        and len(p.archive) >= c.recycle_archive_max)
            if not p.recycling and p.archive and trigger:
                p.begin_recycle(self._refresh(apply=False))
            if p.recycling:
                p.recycle_some(c.recycle_chunk, need=need)
            if p.size >= need or not p.archive:
                break

    def _refresh(self, apply: bool) -> dict[str, float]:
        mode = getattr(self.c, "refresh", "none")
        if mode == "none":
            return {}
        t0 = time.perf_counter()
        values, info = self.lineage.refresh(self.pool.records, mode=mode,
                                            temp=self.c.path_weight_temp, blend=self.c.blend)
        if apply:
            self.pool.refresh_archive(values)
        self.counters["refreshes"] += 1
        self.counters["cycle_detected"] += int(info["cycle"])
        self.mech.add("lineage_refreshes", info["nodes"] > 0)
        self._last.update({f"refresh_{k}": v for k, v in info.items()})
        self._last["refresh_ms"] = 1e3 * (time.perf_counter() - t0)
        return values

    @staticmethod
    def _register_new(ctx: StepContext, recs: list[pool.RecordView]) -> None:
        """Gives augmented records not yet known to the context an index in ctx.prompts."""
        new = [r for r in recs if r.index < 0]
        if new:
            idx = ctx.add_prompts([Prompt(id=r.rid, text=r.text, answer=r.answer, bucket="aug",
                                          meta={"parent": r.parent}) for r in new])
            for r, i in zip(new, idx, strict=True):
                r.index = int(i)

    def _rollout(self, ctx: StepContext, recs: list[pool.RecordView], G: int) -> list[Group]:
        t = time.perf_counter()
        self._register_new(ctx, recs)
        groups = ctx.rollout([r.index for r in recs], G)
        self._ctx_s += time.perf_counter() - t
        by_index = {r.index: r for r in recs}
        stats = self._stats(groups, getattr(ctx, "reward_values", TERNARY))
        seen = set()
        for g, s in zip(groups, stats, strict=True):
            rec = by_index.get(g.index)
            if rec is None or (g.prompt_id != rec.rid and not rec.aug):
                raise RuntimeError(
                    f"group for prompt {g.prompt_id!r} (index {g.index}) matches no sampled "
                    "record: ctx.prompts changed under the selector (a resumed run must rebuild "
                    "the same task)")
            if rec.rid in seen:
                continue
            seen.add(rec.rid)
            self.pool.observe(rec, s, self.step)
            self._observed.append((rec.rid, rec.text, rec.index, s))
            self._by_index[g.index] = rec.aug
            self._step["aug_groups" if rec.aug else "seed_groups"] += 1
            self._step["aug_stat_sum" if rec.aug else "seed_stat_sum"] += s
        back = [rec for rec in recs if rec.rid not in seen]
        if back:  # sampled but not rolled out: back to the pool, nothing lost
            self.pool.restore_many(back)
            self.counters["returned_unrolled"] += len(back)
        return groups

    def _stats(self, groups: list[Group], values=TERNARY) -> list[float]:
        """Pool statistic per group: the mean reward with each outcome valued by the
        configured scheme (1/0/-1 or +-1) instead of the task's reward variant `values`
        (correct, wrong, invalid), any length shaping kept."""
        scheme = SCHEMES[self.c.reward_scheme]
        out = []
        for g in groups:
            r = np.asarray(g.rewards, np.float64)
            o = np.asarray(g.outcomes)
            if tuple(values) != scheme:
                r = r - _value(o, values) + _value(o, scheme)
            out.append(float(r.mean()) if r.size else float("nan"))
        return out

    # ------------------------------------------------------------------ teacher results

    def _drain(self, ctx: StepContext) -> None:
        # Which verdicts a drain returns depends on the wall clock: process 0 decides, for all.
        drained = on_primary(ctx, lambda: self.teacher.drain(step=self.step))
        for cand, verdict in drained:
            if not verdict.ok:
                self._step[f"reject_{verdict.reason}"] += 1
                continue
            text = self.wrap(verdict.question)
            if verdict.question.strip() != cand.text.strip():
                key = text_key(verdict.question)
                if key in self.seen:
                    self._step["reject_duplicate"] += 1
                    continue
                self.seen.add(key)
            answer = verdict.answer
            if self.c.teacher_error_rate > 0:
                rng = np.random.default_rng([self.seed, 0x7EAC, cand.cid])
                if rng.random() < self.c.teacher_error_rate:
                    answer = teacher.wrong_answer(answer, rng, is_arith=self.fmt == "arith",
                                                  reverse_digits=self.c.reverse_digits)
                    self.mech.add("teacher_wrong_labels")
            rec = pool.Record(f"aug/{self.next_rid:x}", text=text, answer=answer,
                              stat=cand.est if self.c.aug_entry == "heap" else None,
                              est=cand.est, aug=True, parent=cand.parent, d=cand.d)
            self.next_rid += 1
            self.pool.add(rec)
            if rec.rid in self.pool.records:
                self.lineage.add(rec.rid, cand.parent if cand.parent in self.pool.records
                                 else None)
            self._step["aug_accepted"] += 1

    # ------------------------------------------------------------------ after_update

    def after_update(self, ctx: StepContext, groups: list[Group]) -> None:
        t0 = time.perf_counter()
        ctx_s = 0.0
        c = self.c
        if c.augment and self._observed and self.augmenter is not None:
            want = len(self._observed) * c.n_aug
            if c.aug_require_capacity and self.pool.capacity_remaining() < want:
                self.counters["aug_skipped_capacity"] += 1
            else:
                parents = [(rid, text if text is not None else ctx.prompts[index].text, s)
                           for rid, text, index, s in self._observed]
                t = time.perf_counter()
                cands, rejects = self.augmenter.propose(ctx.generate, parents, self.step,
                                                        self.next_cid)
                ctx_s += time.perf_counter() - t
                self.next_cid += len(cands)
                fresh = []
                for cand in cands:
                    key = text_key(cand.text)
                    if key in self.seen:
                        rejects["duplicate"] += 1
                        continue
                    self.seen.add(key)
                    fresh.append(cand)
                # Only process 0 queries the teacher; its drains are broadcast (_drain).
                rejects["queue_full"] += on_primary(ctx, lambda: self.teacher.submit(fresh))
                self._step["aug_candidates"] += len(cands) + sum(
                    v for k, v in rejects.items() if k not in ("duplicate", "queue_full")
                    and not k.startswith("note_"))
                self._step["aug_submitted"] += len(fresh) - rejects["queue_full"]
                for k, v in rejects.items():
                    self._step[k if k.startswith("note_") else f"reject_{k}"] += v
        if getattr(c, "refresh_every", 0) and self.step % c.refresh_every == 0:
            self._refresh(apply=True)
        self._count_evictions()
        self._host_s += time.perf_counter() - t0 - ctx_s
        self._finish_metrics()

    # ------------------------------------------------------------------ metrics

    def _finish_metrics(self) -> None:
        st, m = self._step, self._last
        m.update(self.pool.metrics())
        for k in ("sampled_cold", "sampled_boundary", "sampled_easy", "sampled_uniform",
                  "sampled_prioritized", "rounds", "aug_candidates", "aug_submitted",
                  "aug_accepted", "note_no_difficulty"):
            m[k] = float(st[k])
        for r in REASONS:
            m[f"reject_{r}"] = float(st[f"reject_{r}"])
        m["aug_rejected"] = float(sum(st[f"reject_{r}"] for r in REASONS))
        if self._sampled_stats:
            q = np.quantile(np.asarray(self._sampled_stats), [0.1, 0.25, 0.5, 0.75, 0.9])
            for name, v in zip(("q10", "q25", "q50", "q75", "q90"), q.tolist(), strict=True):
                m[f"sampled_stat_{name}"] = v
            m["sampled_stat_mean"] = float(np.mean(self._sampled_stats))
        if self._kept:
            m["aug_share"] = self._aug_in_batch / self._kept
        for src in ("aug", "seed"):
            if st[f"{src}_groups"]:
                m[f"{src}_reward"] = st[f"{src}_stat_sum"] / st[f"{src}_groups"]
        queued, inflight = self.teacher.depth()
        service, age, n = self.teacher.take_latency()
        m.update({"teacher_queue": float(queued), "teacher_inflight": float(inflight),
                  "teacher_done": float(n)})
        if n:
            m["teacher_latency_ms"] = 1e3 * service
            m["teacher_age_s"] = age
        tc = self.teacher.counters_snapshot()  # worker threads add keys meanwhile
        m["teacher_faults"] = float(sum(v for k, v in tc.items() if k.startswith("fault_")))
        m["teacher_dropped"] = float(tc.get("dropped_queue_full", 0))
        m["lineage_edges"] = float(self.lineage.num_edges)
        m["aug_skipped_capacity"] = float(self.counters["aug_skipped_capacity"])
        m["returned_unrolled"] = float(self.counters["returned_unrolled"])
        m["time_ms"] = 1e3 * self._host_s

    def metrics(self) -> dict[str, float]:
        if "time_ms" not in self._last:  # build_batch ran without after_update
            self._finish_metrics()
        return dict(self._last)

    def _mechanism_names(self) -> list[str]:
        """The counters this configuration can move (see the module docstring)."""
        c = self.c
        names = ["cold_draws"]
        names += {"boundary": ["boundary_draws", "boundary_selective"],
                  "mixed": ["boundary_draws", "boundary_selective", "easy_draws"],
                  "uniform": ["uniform_draws", "uniform_selective"]}[c.sampling]
        names += ["evicted", "recycled"]
        if c.augment and c.refresh != "none":  # the lineage graph holds augmented children
            names += ["lineage_refreshes", "parents_refreshed"]
        return names + self._common_mechanism_names()

    def _common_mechanism_names(self) -> list[str]:
        names = []
        if self.c.augment:  # without children the records after the fill fit the bound
            names += ["evicted_after_fill", "children_rolled_out", "children_trained"]
            if self.c.teacher_error_rate > 0:
                names.append("teacher_wrong_labels")
        if self.c.filter_groups:
            names += ["topup_rounds", "groups_discarded"]
        return names

    def mechanisms(self) -> dict[str, int]:
        pc = self.pool.counters
        counts = {**self.mech.counts, "evicted": pc["evicted"], "recycled": pc["recycled"],
                  "parents_refreshed": pc["refreshed"]}
        return {k: int(counts[k]) for k in self._mechanism_names()}

    # ------------------------------------------------------------------ checkpointing

    def state_dict(self) -> dict:
        return {
            "kind": self.kind, "version": 1, "fmt": self.fmt, "template": self.template,
            "seeded": self.seeded,
            "step": self.step, "next_cid": self.next_cid, "next_rid": self.next_rid,
            "seen": sorted(self.seen), "counters": dict(self.counters),
            "mechanisms": self.mech.state_dict(),
            "rng": rng_state(self.rng), "pool": self.pool.state_dict(),
            "teacher": self.teacher.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        if state.get("kind") != self.kind:
            raise ValueError(f"checkpoint holds a {state.get('kind')!r} selector state, "
                             f"not {self.kind!r}")
        self.fmt = state["fmt"]
        # A state from before the template was checkpointed: the config's (or the identity).
        self.template = state.get("template") or self.c.prompt_template or "{prompt}"
        self.seeded = bool(state["seeded"])
        self.step = int(state["step"])
        self.next_cid = int(state["next_cid"])
        self.next_rid = int(state["next_rid"])
        self.seen = set(state["seen"])
        self.counters = collections.Counter(state["counters"])
        self.mech.load_state_dict(state.get("mechanisms"))
        set_rng_state(self.rng, state["rng"])
        self.pool.load_state_dict(state["pool"])
        self._evicted_seen = self.pool.counters["evicted"]
        self.lineage.rebuild(self.pool.records)
        self.augmenter = None
        if self.fmt:
            self._build_augmenter()
        self.teacher.load_state_dict(state["teacher"])
        self._by_index = {}

    def close(self) -> None:
        """Stops the teacher's threads (they are daemons, so exiting works without this)."""
        self.teacher.close()


@register("ps", defaults=PS_DEFAULTS, validate=checker("ps", PS_DEFAULTS))
class PrioritizedSampling(Heapa):
    """Prioritized Sampling (§4.6) with HeaPA's augmentation machinery (PS+PA: augment=True)."""

    kind = "ps"
    defaults = PS_DEFAULTS

    @classmethod
    def proof_counters(cls, cfg) -> tuple[list[str], list[str]]:
        proof, info = ["priority_selective"], ["cold_draws", "priority_draws", "evicted"]
        cls._augment_counters(cfg, proof, info)  # no archive
        if cfg.filter_groups:
            proof += ["topup_rounds", "groups_discarded"]
        return proof, info

    def _make_pool(self):
        c = self.c
        return ps.PSPool(capacity=c.capacity, epsilon=c.ps_epsilon,
                         temperature=c.ps_temperature, prior_count=c.ps_prior_count,
                         max_cold_frac=c.max_cold_frac, seed=self.seed, on_evict=self._evicted)

    def _mechanism_names(self) -> list[str]:
        return (["cold_draws", "priority_draws", "priority_selective", "evicted"]
                + self._common_mechanism_names())
