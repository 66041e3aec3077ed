"""Golden outputs of verl's own loss, KL, rollout-correction and advantage functions on fixed
inputs, for tests/test_verl_conformance.py.

Runs in the venv launch/verl_conformance.sh makes (verl without its dependencies, the CPU torch
wheel); frontier_rl is not imported. Each case records the verl function it called, its
arguments and its outputs (float64 lists), with the inputs, so the test needs neither torch nor
verl:

  launch/verl_conformance.sh          (makes the venv once, then runs this)
  python launch/verl_goldens.py --out tests/fixtures/verl_goldens.json
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math

import numpy as np
import torch
import verl
from verl.trainer.ppo import core_algos
from verl.trainer.ppo import rollout_corr_helper as rc
from verl.workers.config import ActorConfig

CORE = "verl.trainer.ppo.core_algos"
RC = "verl.trainer.ppo.rollout_corr_helper"
AGGREGATIONS = {"token_mean": "token-mean", "seq_mean_token_mean": "seq-mean-token-mean",
                "token_sum": "token-sum", "seq_mean_token_sum": "seq-mean-token-sum",
                "seq_mean_token_sum_norm": "seq-mean-token-sum-norm"}
NORM_LEN = 8  # loss_scale_factor: a constant other than the mask's width (6)


def _list(x) -> list:
    return np.asarray(x.detach().double() if torch.is_tensor(x) else x, np.float64).tolist()


def _t(x) -> torch.Tensor:
    return torch.tensor(np.asarray(x, np.float32))


def inputs(seed: int = 0) -> dict:
    """Five responses of up to 6 tokens (lengths 6, 3, 1, 4, 0: the last is padding only),
    log-probs near -1.5, new-vs-old log-ratios of ~0.3 nats with a few past every clip, and a
    rollout engine's log-probs ~0.2 nats away."""
    rng = np.random.default_rng(seed)
    b, t = 5, 6
    lengths = np.array([6, 3, 1, 4, 0])
    mask = (np.arange(t)[None] < lengths[:, None]).astype(np.float32)
    old = (-1.5 + 0.5 * rng.standard_normal((b, t))).astype(np.float32)
    delta = 0.3 * rng.standard_normal((b, t))
    delta[0, 1], delta[1, 0], delta[3, 2] = 0.9, -0.8, 0.5  # past the 0.2 / 0.28 clip range
    new = (old + delta).astype(np.float32)
    rollout = (old + 0.2 * rng.standard_normal((b, t))).astype(np.float32)
    ref = (new + 0.4 * rng.standard_normal((b, t))).astype(np.float32)
    adv = np.array([1.0, -0.7, 0.4, -1.3, 0.0], np.float32)
    loss_mat = rng.standard_normal((b, t)).astype(np.float32)
    return {"mask": mask, "old_logp": old, "logp": new, "rollout_logp": rollout,
            "ref_logp": ref, "advantages": adv, "loss_mat": loss_mat}


def extreme_inputs() -> dict:
    """Log-ratios past verl's [-20, 20] clamp: +25 on a negative advantage's token (its
    ratio is dual-clipped only at c = 1e10), -30 and +22 elsewhere."""
    old = np.full((2, 3), -1.0, np.float32)
    new = old.copy()
    new[0, 0] += 25.0
    new[1, 1] -= 30.0
    new[1, 2] += 22.0
    return {"mask": np.ones((2, 3), np.float32), "old_logp": old, "logp": new,
            "advantages": np.array([-1.0, 0.5], np.float32)}


def actor_config(eps_low: float, eps_high: float, clip_ratio_c: float, agg: str) -> ActorConfig:
    return ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1,
                       clip_ratio=eps_low, clip_ratio_low=eps_low, clip_ratio_high=eps_high,
                       clip_ratio_c=clip_ratio_c, loss_agg_mode=agg)


def policy_case(name: str, x: dict, mode: str, agg: str, eps_low: float, eps_high: float,
                clip_ratio_c: float = 10.0, is_weights: torch.Tensor | None = None) -> dict:
    """verl's registered policy loss `mode` on x: its loss, metrics and d loss / d logp."""
    logp = _t(x["logp"]).requires_grad_(True)
    mask = _t(x["mask"])
    adv = _t(x["advantages"])[:, None] * mask
    fn = core_algos.get_policy_loss_fn(mode)
    cfg = actor_config(eps_low, eps_high, clip_ratio_c, AGGREGATIONS[agg])
    # as verl's ppo_loss sets it from actor.loss_scale_factor
    cfg.global_batch_info["loss_scale_factor"] = NORM_LEN
    loss, metrics = fn(old_log_prob=_t(x["old_logp"]), log_prob=logp, advantages=adv,
                       response_mask=mask, loss_agg_mode=AGGREGATIONS[agg], config=cfg,
                       rollout_is_weights=is_weights)
    (grad,) = torch.autograd.grad(loss, logp)
    return {"case": name, "function": f"{CORE}.{fn.__name__}",
            "args": {"loss_mode": mode, "loss_agg_mode": AGGREGATIONS[agg],
                     "clip_ratio_low": eps_low, "clip_ratio_high": eps_high,
                     "clip_ratio_c": clip_ratio_c, "loss_scale_factor": NORM_LEN},
            "aggregation": agg, "eps_low": eps_low, "eps_high": eps_high,
            "clip_ratio_c": clip_ratio_c,
            "pg_loss": float(loss.detach()), "grad_logp": _list(grad),
            "clip_frac": metrics["actor/pg_clipfrac"], "ppo_kl": metrics["actor/ppo_kl"],
            "dual_clip_frac": metrics["actor/pg_clipfrac_lower"]}


def build() -> dict:
    x = inputs()
    mask = _t(x["mask"])
    cases: dict[str, list] = {"aggregation": [], "policy": [], "kl": [], "rollout_is": [],
                              "rejection": [], "advantages": []}

    for agg, mode in AGGREGATIONS.items():
        value = core_algos.agg_loss(_t(x["loss_mat"]), mask, mode,
                                    loss_scale_factor=NORM_LEN if "norm" in mode else None)
        cases["aggregation"].append({
            "case": agg, "function": f"{CORE}.agg_loss",
            "args": {"loss_agg_mode": mode,
                     "loss_scale_factor": NORM_LEN if "norm" in mode else None},
            "aggregation": agg, "norm_len": NORM_LEN, "value": float(value)})

    for agg in AGGREGATIONS:  # the clipped surrogate ("grpo", "dapo") under every aggregation
        cases["policy"].append(policy_case(f"vanilla/{agg}", x, "vanilla", agg, 0.2, 0.28))
    cases["policy"].append(policy_case("vanilla/symmetric_clip", x, "vanilla", "token_mean",
                                       0.2, 0.2, clip_ratio_c=3.0))
    cases["policy"].append(policy_case("gspo/seq_mean_token_mean", x, "gspo",
                                       "seq_mean_token_mean", 0.0003, 0.0004))
    cases["policy"].append(policy_case("gspo/wide_clip", x, "gspo", "token_mean", 0.2, 0.28))
    cases["policy"].append(policy_case("cispo/token_mean", x, "cispo", "token_mean", 10.0, 0.2))
    cases["policy"].append(policy_case("cispo/tight", x, "cispo", "seq_mean_token_mean",
                                       0.1, 0.1))
    # the log-ratio clamp: with c = 1e10 the dual clip no longer hides exp(25) vs exp(20)
    cases["policy"].append(dict(policy_case("vanilla/extreme", extreme_inputs(), "vanilla",
                                            "token_mean", 0.2, 0.28, clip_ratio_c=1e10),
                                inputs="extreme"))
    # ... and at c = 10 the dual clip caps that token's loss at -A c
    cases["policy"].append(dict(policy_case("vanilla/dual_clip", extreme_inputs(), "vanilla",
                                            "seq_mean_token_mean", 0.2, 0.28,
                                            clip_ratio_c=10.0),
                                inputs="extreme"))
    # TIS weights in the loss: sequence-level, cap 2
    seq_w, _ = rc.compute_rollout_correction_weights(
        _t(x["old_logp"]) - _t(x["rollout_logp"]), mask, rollout_is="sequence",
        rollout_is_threshold=2.0)
    cases["policy"].append(dict(
        policy_case("vanilla/sequence_is", x, "vanilla", "token_mean", 0.2, 0.28,
                    is_weights=seq_w),
        is_function=f"{RC}.compute_rollout_correction_weights", rollout_is="sequence",
        tis_cap=2.0))

    for est in ("k1", "abs", "k2", "k3", "k1+", "abs+", "k3+"):
        logp = _t(x["logp"]).requires_grad_(True)
        kl = core_algos.kl_penalty(logp, _t(x["ref_logp"]), est)
        (grad,) = torch.autograd.grad(kl.sum(), logp)
        agg = core_algos.agg_loss(kl, mask, "seq-mean-token-mean")
        cases["kl"].append({"case": est, "function": f"{CORE}.kl_penalty",
                            "args": {"kl_penalty": est}, "estimator": est,
                            "value": _list(kl), "grad_logp": _list(grad),
                            "seq_mean_token_mean": float(agg.detach())})
    # verl's own spellings of the same estimators
    for alias, est in (("kl", "k1"), ("mse", "k2"), ("low_var_kl", "k3"),
                       ("low_var_kl+", "k3+")):
        kl = core_algos.kl_penalty(_t(x["logp"]), _t(x["ref_logp"]), alias)
        cases["kl"].append({"case": alias, "function": f"{CORE}.kl_penalty",
                            "args": {"kl_penalty": alias}, "estimator": est,
                            "value": _list(kl)})

    log_ratio = _t(x["old_logp"]) - _t(x["rollout_logp"])
    for level in ("token", "sequence"):
        w, _ = rc.compute_rollout_correction_weights(log_ratio, mask, rollout_is=level,
                                                     rollout_is_threshold=2.0)
        cases["rollout_is"].append({"case": level,
                                    "function": f"{RC}.compute_rollout_correction_weights",
                                    "args": {"rollout_is": level, "rollout_is_threshold": 2.0},
                                    "rollout_is": level, "tis_cap": 2.0, "weights": _list(w)})
    for option, spec in (("seq_sum_k1", "0.7_1.25"), ("seq_sum_k1", "0.5_2.0"),
                         ("seq_mean_k1", "0.9_1.05")):
        kept, _ = rc.compute_rollout_rejection_mask(log_ratio, mask, rollout_rs=option,
                                                    rollout_rs_threshold=spec)
        lower, upper = (float(v) for v in spec.split("_"))
        cases["rejection"].append({
            "case": f"{option}/{spec}", "function": f"{RC}.compute_rollout_rejection_mask",
            "args": {"rollout_rs": option, "rollout_rs_threshold": spec},
            # verl bounds 1 / rho; frontier_rl bounds rho = exp(old_logp - rollout_logp)
            "rollout_rs": "sequence" if option.startswith("seq_sum") else "geometric",
            "rs_low": 1.0 / upper, "rs_high": 1.0 / lower, "mask": _list(kept)})

    # outcome advantages: three groups of four, rewards on each response's last token
    rewards = np.array([1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.5, 1.0, 1.0, 1.0, 1.0], np.float32)
    lengths = np.array([5, 2, 7, 3, 1, 8, 4, 6, 2, 2, 5, 3])
    width = int(lengths.max())
    rmask = (np.arange(width)[None] < lengths[:, None]).astype(np.float32)
    token_rewards = np.zeros_like(rmask)
    token_rewards[np.arange(len(rewards)), lengths - 1] = rewards
    index = np.repeat(np.arange(3), 4)
    estimators = (
        ("grpo", core_algos.compute_grpo_outcome_advantage, {"norm_adv_by_std_in_grpo": True}),
        ("grpo", core_algos.compute_grpo_outcome_advantage, {"norm_adv_by_std_in_grpo": False}),
        ("rloo", core_algos.compute_rloo_outcome_advantage, {}),
        ("reinforce_plus_plus_baseline",
         core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage, {}),
    )
    for name, fn, kwargs in estimators:
        adv, _ = fn(token_level_rewards=_t(token_rewards), response_mask=_t(rmask),
                    index=index, **kwargs)
        cases["advantages"].append({
            "case": name + ("" if kwargs.get("norm_adv_by_std_in_grpo", True) else "/no_std"),
            "function": f"{CORE}.{fn.__name__}", "args": {"epsilon": 1e-6, **kwargs},
            "estimator": name, "std_norm": kwargs.get("norm_adv_by_std_in_grpo", True),
            "advantages": _list(adv[:, 0])})

    return {
        "meta": {
            "source": "verl's own functions, run by launch/verl_goldens.py",
            "verl_version": verl.__version__,
            "verl_dist_version": importlib.metadata.version("verl"),
            "torch_version": torch.__version__,
            "functions": sorted({c["function"] for group in cases.values() for c in group}
                                | {f"{RC}.compute_rollout_correction_weights"}),
        },
        "inputs": {k: _list(v) for k, v in x.items()},
        "extreme_inputs": {k: _list(v) for k, v in extreme_inputs().items()},
        "advantage_inputs": {"rewards": _list(rewards), "lengths": lengths.tolist(),
                             "group_size": 4},
        "cases": cases,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = build()
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, allow_nan=False)
        f.write("\n")
    n = sum(len(v) for v in out["cases"].values())
    print(f"verl {out['meta']['verl_version']}, torch {out['meta']['torch_version']}: {n} cases")
    assert all(math.isfinite(c.get("pg_loss", 0.0)) for c in out["cases"]["policy"])


if __name__ == "__main__":
    main()
