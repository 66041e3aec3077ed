"""Which `mech/` counters prove that a run exercised its selection method, and which are shown
only as information.

A selector counts its mechanism's events (selection/base.py `mechanisms`). A counter is proof
(`required_mechanisms`) only if it could stay at zero were the mechanism idle or ineffective
under the run's settings: a comparison run that leaves one of its method's proof counters at
zero did not test the method. A counter that is non-zero by construction, whatever the prompts,
the policy or the mechanism's inputs, proves nothing and is information
(`information_mechanisms`): kept, logged and shown, never accepted as proof. Some questions no
counter can answer, e.g. whether HIVE's entropy gate keeps better prompts than a coin would;
those are the ablation arms' (hive stage2="random", heapa sampling="uniform", ...).

Each selector declares its own split, beside its code: the classmethod `proof_counters(cfg)` of
its class (selection/base.py `Selector`), computed from its config section. `register` refuses
a selector that does not declare one, and this module only asks the registry
(`selection.proof_counters`). The lists below say why each counter is where its selector puts
it.

Proof, and why each can be zero:
- pool_passes (stream methods but prefilter, pcl, reinforce_ada): 0 when the budget ends within
  the first pass, so no prompt is revisited and history-based rules never act.
- topup_rounds, groups_discarded (ds; greso, hive: topup_rounds; heapa family with
  filter_groups): 0 when the first round always yields enough non-zero-variance groups.
- skipped (greso), stage1_rejected (hive with stage1 on): 0 until a prompt has a zero-variance
  history and the exploration coin turns it away.
- prefiltered_out (prefilter): 0 when no prompt's offline pass rate falls outside the band.
- value_decided (pcl, k > 1): prompts chosen because their V was strictly nearer τ than every
  candidate left out; 0 while V is the same for every candidate (e.g. all unseen), when the
  choice is the random tie-break.
- extra_rounds (reinforce_ada): 0 when every prompt has both a correct and a wrong response
  after its first round.
- boundary_selective / uniform_selective / priority_selective (heapa and heapa_hive by their
  sampling; ps): draws made while the scored pool held more records than the rule's candidate
  set (the 2B boundary candidates; the B draws), so the rule passed records over; 0 while the
  pool is no bigger, when every scored record is drawn whatever the rule.
- evicted_after_fill (augmenting heapa family without the capacity check): evictions after the
  seeds were loaded, i.e. children (or records recycled once children have grown the pool)
  arriving at a full pool; 0 when no child is accepted or the pool never fills again.
- children_rolled_out, children_trained (augmenting): 0 when no child is accepted, or none is
  drawn.
- recycled (heapa, heapa_hive with an archive threshold): 0 when the archive never reaches
  the threshold and the pool never runs short.
- lineage_refreshes, parents_refreshed (heapa, heapa_hive with children, recycling and a
  refresh mode): 0 without children in the graph / when a refresh moves no statistic.
- screened_out, carried (speed): screened prompts outside the pass-rate band / ready groups a
  step leaves to a later one; 0 when every screened prompt is in the band / a step never
  qualifies more than B.
- entropy_prior_flips (hive_v2 with lam < 1 and stage1 on): Stage-1 decisions on prompts with
  a recorded response entropy that come out otherwise under the pool's mean entropy score, with
  the same draw; 0 when every recorded entropy is the same.
- posterior_flips (mopps): chosen prompts the same Thompson draw, read under the prior instead
  of the prompt's posterior, would not have chosen; 0 while no posterior has moved.
- learnability_decided / weighted_draws (learnability, by its rule, cand_ratio > 1): kept
  prompts scored strictly above every candidate left out / drawn by p(1 - p) weights; 0 while
  every probe agrees (all scores 0, the uniform fallback).

Information, and why it is non-zero by construction:
- stage2_dropped (hive, heapa_hive): the band drops at least half of every gated set whatever
  the entropies, and heapa_hive over-draws 1 / k_keep candidates per prompt; it shows that the
  gate ran, not that entropy chose (that is the stage2="random" ablation's question).
- p_easy_moves, p_hard_moves (greso, hive): after the first epoch p moves by Δp every step
  unless it sits at a clip bound.
- cold_draws (heapa family): the seeds start in the cold queue and are drawn first.
- boundary_draws, easy_draws, uniform_draws, priority_draws: every draw of a scored record is
  one, including draws from a pool no bigger than the draw (the *_selective counts are the
  proof).
- evicted (heapa family): includes the initial fill (1,500 seeds into N = 1,400 evict 100 at
  step 0); also evicted_after_fill where the capacity check may keep the bound from binding.
- value_selected, value_fitted (pcl): m prompts per step when k > 1 / every rolled-out prompt.
- offline_rollouts (prefilter): n per pool prompt, spent before the first step.
- resampled_prompts (reinforce_ada): non-zero exactly when extra_rounds is.
- screen_rollouts, continued (speed): every step screens and continues its qualified prompts.
- thompson_draws, posterior_updates (mopps): one per candidate / rolled-out prompt a step.
- probed_prompts, probe_rollouts, uniform_fallbacks (learnability): every candidate is probed;
  the fallback counts the steps the proof counter cannot move.
- pool_passes where the method need not pass its pool (prefilter, pcl, reinforce_ada).
- teacher_wrong_labels (teacher_error_rate > 0): the injected label noise, not a mechanism.
- recycled, lineage_refreshes, parents_refreshed where the configuration does not make them
  proof (no archive threshold; no children).
"""

from __future__ import annotations

import ml_collections

from frontier_rl import selection


def _split(cfg: ml_collections.ConfigDict) -> tuple[list[str], list[str]]:
    """(proof, information) counters of the config's method, as its selector declares them."""
    name = cfg.selector.name
    return selection.proof_counters(name, cfg.selector.get(name))


def required_mechanisms(cfg: ml_collections.ConfigDict) -> list[str]:
    """The `mech/` counters (selection/base.py `mechanisms`) that must be > 0 for a run of this
    config to have exercised its method: those that could stay at zero were the mechanism idle
    or ineffective (module docstring)."""
    return _split(cfg)[0]


def information_mechanisms(cfg: ml_collections.ConfigDict) -> list[str]:
    """The other counters the config's selector reports: non-zero by construction (or not made
    proof by this configuration), shown but never accepted as proof (module docstring)."""
    return _split(cfg)[1]
