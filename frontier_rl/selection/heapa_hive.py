"""HeaPA-HIVE: HeaPA's pool and boundary candidates, verified by HIVE's Stage-2 entropy gate.

A composite of two methods (HeaPA, arXiv 2601.22448, and HIVE's Stage 2, arXiv 2603.25184);
neither paper runs it. Each round of a
step, where HeaPA would take k records (cold first, then boundary), this selector:

1. splits the k as HeaPA does: n_c from the cold queue (`Pool.cold_share`), n_b = k - n_c from
   the boundary;
2. takes M_c = ⌈ρ n_c⌉ cold records (FIFO order) and M_b = ⌈ρ n_b⌉ boundary candidates (the
   sampler's alternating order: min(HIGH), max(LOW), ...), ρ = overdraw, or 1 / k_keep when
   overdraw = 0; the cold part is gated only with gate_cold (else M_c = n_c);
3. asks `ctx.prompt_entropy` once for all candidates of the parts being gated: V_t(x), the
   current policy's mean next-token entropy over the prompt;
4. applies HIVE's Stage-2 gate to each part separately (`hive.stage2`): the band sorts by V
   descending (ties by boundary order), drops the top ⌊M k_off⌋ and keeps the next ⌊M k_keep⌋;
   the median gate keeps V >= median(V);
5. takes the part's n records: in-band candidates first, then (top-up, when the band kept fewer
   than n) out-of-band ones, each in boundary order;
6. puts every candidate not taken back into the pool with its statistic unchanged (boundary
   ones into the heap side they left, exactly as HeaPA's sampler puts back its unpicked
   candidates; cold ones at the back of the cold queue), then rolls out the k taken.

So a round rolls out exactly k = B prompts x G responses, as HeaPA does: at matched rollout
budgets the two differ only in which B prompts are chosen, plus the entropy pass (one forward
over M_c + M_b prompts, charged to FLOPs by the context). Everything after the rollout (pool
statistic by record id, archive, recycling with lineage refresh, on-policy augmentation, the
asynchronous teacher, DAPO's filter_groups rounds, checkpointing) is HeaPA's code, unchanged.

Why it might help. HeaPA ranks a record by its pool statistic: the mean reward of its last
group, measured when it was last rolled out (possibly many updates ago), or, for an augmented
child, an estimate from its parent's reward and the policy's difficulty guess. Near the
boundary those statistics are noisy and stale. Prompt entropy is a fresh, generation-free
reading of the current policy: HIVE keeps the middle band (the top is dominated by degenerate,
non-reasoning prompts, the bottom by prompts the policy is confident about, i.e. likely all
correct). HeaPA already draws 2B boundary candidates and keeps B uniformly at random; here the
entropy band replaces that coin, so the over-draw it pays for buys information. Cold records
have no statistic at all, and the gate is the only online check on them (gate_cold).

Symbols -> config fields (`config.selector.heapa_hive.*`): every field of
`config.selector.heapa` (heapa/config.py: alpha, N -> capacity, n_aug, d_min / d_max, ...) with
its meaning there, except candidate_factor (HeaPA's "up to 2B candidates"), which `overdraw`
replaces; plus HIVE's Stage-2 fields under HIVE's names: k_off, k_keep, gate ("band" or
"median"). New: overdraw (ρ = candidates per prompt rolled out; 0 = 1 / k_keep, which at
HIVE's k_keep = 0.5 is HeaPA's 2B) and gate_cold. B and G are rl.batch_size and rl.group_size.

Metrics (select/*), besides all of HeaPA's: gate_candidates (candidates gated this step),
gate_rejected (outside the band), gate_reject_frac, gate_topped_up (out-of-band candidates
rolled out to make up B), gate_returned (candidates put back), gate_v_lo / gate_v_hi (the
band's edges on V: the lowest and highest V kept, averaged over the step's gated sets).
Mechanism counters: HeaPA's (heapa/selector.py; boundary_selective counts the boundary records
taken while the scored pool held more than the M_b candidates) plus stage2_dropped, the gated
candidates the gate sent back to the pool instead of the rollout (cumulative). stage2_dropped is
non-zero by construction (M - n of every gated part), so it is information, not proof that
entropy chose well (selection/mechanisms.py).

Deviations from the two methods it composes:
- HIVE gates a stream filtered by its Stage 1 (history) and rolls out whatever the band keeps,
  rounded down to a multiple of G, in rounds until B_t non-zero-variance groups. Here the
  candidates come from HeaPA's pool (no Stage 1: the pool's ordering plays its part), the band
  does not round to G (group_size=1: the batch is exactly B by construction, so rounding would
  only send in-band candidates to the top-up), and there is one rollout of B per round, as in
  HeaPA (filter_groups adds DAPO rounds, each gated).
- HeaPA picks B of its 2B boundary candidates uniformly at random; here the gate picks them.
  The pool's rng is therefore not drawn for boundary picks. sampling must be "boundary": the
  easy-mixing and uniform ablations have no boundary candidates to gate.
- A rejected cold record goes to the back of the cold queue (HIVE's rejected prompts come back
  on the stream's next pass); putting it at the front would make persistent rejects occupy the
  head of the queue, and the over-draw, at every step.
- The gate is applied per part (cold, boundary), so a batch has HeaPA's cold/boundary mix; one
  band over both parts would let entropy decide that mix as well.
"""

from __future__ import annotations

import math
import time

import numpy as np

from frontier_rl.selection.base import StepContext, register
from frontier_rl.selection.common import Checker, is_num, read_config
from frontier_rl.selection.heapa import pool
from frontier_rl.selection.heapa.config import HEAPA_DEFAULTS, checker
from frontier_rl.selection.heapa.selector import Heapa
from frontier_rl.selection.hive import stage2

GATE_DEFAULTS = dict(
    gate="band",  # HIVE Stage 2: "band" (Table 4, deployed) or "median" (Eq. 9)
    k_off=0.25,  # k_off: top fraction of the candidates by prompt entropy dropped by the band
    k_keep=0.5,  # k_keep: fraction kept by the band below the dropped top
    overdraw=0.0,  # ρ: candidates drawn per prompt rolled out; 0 = 1 / k_keep
    gate_cold=True,  # gate the cold records too (over-drawn from the FIFO); False: as HeaPA
)

_HEAPA_FIELDS = {k: v for k, v in HEAPA_DEFAULTS.items() if k != "candidate_factor"}
DEFAULTS = {**_HEAPA_FIELDS, **GATE_DEFAULTS}
_check_heapa = checker("heapa", HEAPA_DEFAULTS)


def validate(section) -> None:
    """Raises ValueError naming selector.heapa_hive.<field>, its value and the allowed range."""
    cfg = vars(read_config(section, DEFAULTS))
    try:
        _check_heapa({k: cfg[k] for k in _HEAPA_FIELDS})
    except ValueError as e:
        raise ValueError(str(e).replace("selector.heapa.", "selector.heapa_hive.", 1)) from None
    c = Checker("heapa_hive", section, DEFAULTS)
    c("sampling", lambda x: x == "boundary",
      "'boundary' (the gate replaces the boundary sampler's uniform pick)")
    c("gate", lambda x: x in ("band", "median"), "'band' or 'median'")
    c("k_off", lambda x: is_num(x, 0, 1, hi_open=True), "a number in [0, 1)")
    c("k_keep", lambda x: is_num(x, 0, 1, lo_open=True), "a number in (0, 1]")
    c("k_keep", lambda x: c.cfg.k_off + x <= 1 + 1e-12,
      f"a number with k_off + k_keep <= 1 (k_off={c.cfg.k_off})")
    c("overdraw", lambda x: x == 0 or is_num(x, 1, 64), "0 (= 1 / k_keep) or a number in [1, 64]")
    c("gate_cold", lambda x: isinstance(x, bool), "True or False")


@register("heapa_hive", defaults=DEFAULTS, validate=validate)
class HeapaHive(Heapa):
    kind = "heapa_hive"
    defaults = DEFAULTS

    @classmethod
    def check_config(cls, cfg) -> None:
        validate(cfg)

    @classmethod
    def proof_counters(cls, cfg) -> tuple[list[str], list[str]]:
        proof, info = super().proof_counters(cfg)
        return proof, info + ["stage2_dropped"]  # non-zero by construction (over-drawn)

    def _make_pool(self):
        c = self.c
        return pool.Pool(alpha=c.alpha, capacity=c.capacity, sampling=c.sampling,
                         rebalance_max_moves=c.rebalance_max_moves,
                         max_cold_frac=c.max_cold_frac, seed=self.seed, on_evict=self._evicted)

    def _overdrawn(self, n: int) -> int:
        """M = ⌈ρ n⌉ candidates for n records (ρ = overdraw, or 1 / k_keep)."""
        rho = self.c.overdraw or 1.0 / self.c.k_keep
        return math.ceil(rho * n - 1e-9)

    def _sample(self, ctx: StepContext, k: int) -> list[pool.RecordView]:
        c, p, st = self.c, self.pool, self._step
        k = min(int(k), p.size)
        if k <= 0:
            return []
        n_cold = p.cold_share(k)
        n_bnd = k - n_cold
        scored = p.n_scored
        cold, bnd = p.take_candidates(self._overdrawn(n_cold) if c.gate_cold else n_cold,
                                      self._overdrawn(n_bnd))
        parts = [(cold, n_cold, c.gate_cold), (bnd, n_bnd, True)]
        gated = [recs for recs, n, on in parts if on and len(recs) > n]
        v = np.zeros(0)
        if gated:
            t = time.perf_counter()
            flat = [r for recs in gated for r in recs]
            try:
                self._register_new(ctx, flat)
                v = np.asarray(ctx.prompt_entropy([r.index for r in flat]), np.float64)
            except BaseException:
                p.return_candidates(cold + bnd)  # a failed context call loses no record
                raise
            self._ctx_s += time.perf_counter() - t
        out: list[pool.RecordView] = []
        back: list[pool.RecordView] = []
        start = 0
        for name, (recs, n, on) in zip(("cold", "boundary"), parts, strict=True):
            m = len(recs)
            if on and m > n:
                vs = v[start:start + m]
                start += m
                pos, _ = stage2(vs, np.arange(m), gate=c.gate, k_off=c.k_off, k_keep=c.k_keep,
                                group_size=1)
                in_band = np.zeros(m, bool)
                in_band[pos] = True
                order = np.concatenate([pos, np.flatnonzero(~in_band)]).tolist()
                st["gate_candidates"] += m
                st["gate_rejected"] += m - pos.size
                st["gate_topped_up"] += max(0, n - pos.size)
                if pos.size:
                    vb = vs[pos]
                    st["gate_sets"] += 1
                    st["gate_v_lo_sum"] += float(vb.min())
                    st["gate_v_hi_sum"] += float(vb.max())
            else:
                order = list(range(m))
            out += [recs[i] for i in order[:n]]
            back += [recs[i] for i in order[n:]]
            st[f"sampled_{name}"] += min(n, m)
            if name == "boundary" and scored > m:  # records away from the boundary passed over
                st["sampled_boundary_selective"] += min(n, m)
        st["gate_returned"] += len(back)
        self.counters["gate_returned"] += len(back)
        self.mech.add("stage2_dropped", len(back))
        p.return_candidates(back)
        return out

    def _mechanism_names(self) -> list[str]:
        return super()._mechanism_names() + ["stage2_dropped"]

    def _finish_metrics(self) -> None:
        super()._finish_metrics()
        st, m = self._step, self._last
        for key in ("gate_candidates", "gate_rejected", "gate_topped_up", "gate_returned"):
            m[key] = float(st[key])
        m["gate_reject_frac"] = (st["gate_rejected"] / st["gate_candidates"]
                                 if st["gate_candidates"] else 0.0)
        if st["gate_sets"]:  # the band's edges on V, averaged over this step's gated sets
            m["gate_v_lo"] = st["gate_v_lo_sum"] / st["gate_sets"]
            m["gate_v_hi"] = st["gate_v_hi_sum"] / st["gate_sets"]
