"""Which `mech/` counters prove that a run exercised its selection method.

A selector counts its mechanism's events (selection/base.py `mechanisms`); a comparison run that
leaves a counter of its method's proof list at zero did not test the method.
"""

from __future__ import annotations

import ml_collections


def required_mechanisms(cfg: ml_collections.ConfigDict) -> list[str]:
    """The `mech/` counters (selection/base.py `mechanisms`) that must be > 0 for a run of this
    config to have exercised its method: what makes the method differ from its neighbours."""
    name = cfg.selector.name
    s = cfg.selector.get(name, {})
    stream = ["pool_passes"]
    if name == "uniform":
        return stream
    if name == "ds":
        return stream + ["topup_rounds", "groups_discarded"]
    if name == "greso":
        return stream + ["skipped", "topup_rounds", "p_easy_moves", "p_hard_moves"]
    if name == "hive":
        return stream + ["stage1_rejected", "stage2_dropped", "topup_rounds", "p_easy_moves",
                         "p_hard_moves"]
    if name == "prefilter":
        return ["offline_rollouts", "prefiltered_out"]
    if name == "pcl":
        return ["value_selected"]
    if name == "reinforce_ada":  # spends many responses per prompt: it need not pass the pool
        return ["extra_rounds"]
    if name in ("heapa", "heapa_hive", "ps"):
        augment = s.get("augment", name != "ps")
        out = ["cold_draws"]
        if name == "ps":
            out.append("priority_draws")
        else:
            out.append("uniform_draws" if s.get("sampling") == "uniform" else "boundary_draws")
        # the bound binds once children arrive (if they may enter a full pool), or from the
        # start if the seeds overflow it
        if (augment and not (name == "ps" and s.get("aug_require_capacity", True))) or s.get(
                "capacity", 0) < cfg.task.get("train_size", 0):
            out.append("evicted")
        if augment:
            out += ["children_rolled_out", "children_trained"]
        if name != "ps" and s.get("recycle_archive_max", 0) > 0:  # PS has no archive
            out.append("recycled")
            if augment and s.get("refresh", "path") != "none":  # a lineage needs children
                out += ["lineage_refreshes", "parents_refreshed"]
        if name == "heapa_hive":
            out.append("stage2_dropped")
        return out
    return []
