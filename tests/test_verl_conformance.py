"""Every registered loss, aggregation, KL estimator, rollout correction and advantage estimator
against verl's own functions.

tests/fixtures/verl_goldens.json holds the outputs of verl 0.9.1's functions (its `meta` names
each one and the verl and torch versions) on fixed inputs, made by launch/verl_conformance.sh
(verl without its dependencies and the CPU torch in a venv of their own). The tests run
frontier_rl's functions on the same inputs and ask for agreement to 1e-6 (relative and
absolute): values, metrics and d loss / d log pi.
"""

import dataclasses
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from frontier_rl.rl import losses, objectives

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDENS = json.load(open(os.path.join(ROOT, "tests", "fixtures", "verl_goldens.json")))
CASES = GOLDENS["cases"]
TOL = dict(rtol=1e-6, atol=1e-6)
# verl's policy-loss functions behind each registered loss
VERL_LOSS = {"grpo": "vanilla", "dapo": "vanilla", "gspo": "gspo", "cispo": "cispo"}


def _inputs(name="inputs"):
    return {k: jnp.asarray(np.asarray(v, np.float32)) for k, v in GOLDENS[name].items()}


def _ids(cases):
    return [c["case"] for c in cases]


def test_goldens_are_verls_and_cover_every_registered_mode():
    meta = GOLDENS["meta"]
    assert meta["verl_version"] == "0.9.1" and meta["torch_version"].startswith("2.13.0")
    assert "verl.trainer.ppo.core_algos.compute_policy_loss_vanilla" in meta["functions"]
    assert set(objectives.loss_names()) <= set(VERL_LOSS)
    assert {c["args"]["loss_mode"] for c in CASES["policy"]} == set(VERL_LOSS.values())
    assert {c["aggregation"] for c in CASES["aggregation"]} == set(losses.AGGREGATIONS)
    assert {c["estimator"] for c in CASES["kl"]} == set(losses.KL_ESTIMATORS) - {"k2+"}
    assert {c["rollout_is"] for c in CASES["rollout_is"]} == set(losses.ROLLOUT_IS)
    assert {c["rollout_rs"] for c in CASES["rejection"]} == set(losses.ROLLOUT_RS) - {""}
    assert {c["estimator"] for c in CASES["advantages"]} == set(objectives.estimator_names())


@pytest.mark.parametrize("case", CASES["aggregation"], ids=_ids(CASES["aggregation"]))
def test_aggregation(case):
    x = _inputs()
    got = losses.aggregate(x["loss_mat"], x["mask"], case["aggregation"],
                           norm_len=case["norm_len"])
    np.testing.assert_allclose(float(got), case["value"], **TOL)


def _policy_cases():
    out = []
    for name in objectives.loss_names():
        for case in CASES["policy"]:
            if case["args"]["loss_mode"] == VERL_LOSS[name]:
                out.append(pytest.param(name, case, id=f"{name}:{case['case']}"))
    return out


@pytest.mark.parametrize("name,case", _policy_cases())
def test_policy_loss(name, case):
    x = _inputs("extreme_inputs" if case.get("inputs") == "extreme" else "inputs")
    cfg = losses.LossConfig(
        name=name, aggregation=case["aggregation"], eps_low=case["eps_low"],
        eps_high=case["eps_high"], clip_ratio_c=case["clip_ratio_c"], norm_len=8,
        tis_cap=case.get("tis_cap", 0.0), rollout_is=case.get("rollout_is", "token"))

    def f(logp):
        return losses.policy_loss(logp, x["old_logp"], x["advantages"], x["mask"], cfg,
                                  rollout_logp=x.get("rollout_logp"))

    (loss, m), grad = jax.value_and_grad(f, has_aux=True)(x["logp"])
    np.testing.assert_allclose(float(loss), case["pg_loss"], **TOL)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(case["grad_logp"]), **TOL)
    np.testing.assert_allclose(float(m["clip_frac"]), case["clip_frac"], **TOL)
    np.testing.assert_allclose(float(m["ppo_kl"]), case["ppo_kl"], **TOL)
    if "dual_clip_frac" in m:
        np.testing.assert_allclose(float(m["dual_clip_frac"]), case["dual_clip_frac"], **TOL)


@pytest.mark.parametrize("case", CASES["kl"], ids=_ids(CASES["kl"]))
def test_kl_estimator(case):
    x = _inputs()
    est = case["estimator"]
    value, grad = jax.value_and_grad(
        lambda lp: jnp.sum(losses.kl_penalty(lp, x["ref_logp"], est)))(x["logp"])
    np.testing.assert_allclose(np.asarray(losses.kl_penalty(x["logp"], x["ref_logp"], est)),
                               np.asarray(case["value"]), **TOL)
    if "grad_logp" not in case:  # verl's alias spelling: the value only
        return
    np.testing.assert_allclose(np.asarray(grad), np.asarray(case["grad_logp"]), **TOL)
    # as the loss's KL term: verl's agg_loss of kl_penalty
    cfg = losses.LossConfig(kl_coef=0.5, kl_estimator=est)
    _, m = losses.policy_loss(x["logp"], x["logp"], x["advantages"], x["mask"], cfg,
                              ref_logp=x["ref_logp"])
    np.testing.assert_allclose(float(m["kl_ref"]), case["seq_mean_token_mean"], **TOL)


@pytest.mark.parametrize("case", CASES["rollout_is"], ids=_ids(CASES["rollout_is"]))
def test_rollout_is_weights(case):
    x = _inputs()
    cfg = losses.LossConfig(tis_cap=case["tis_cap"], rollout_is=case["rollout_is"])
    weight, _ = losses.is_weights(x["old_logp"], x["rollout_logp"], cfg,
                                  losses.sequence_sums(x["mask"]))
    np.testing.assert_allclose(np.asarray(weight * x["mask"]), np.asarray(case["weights"]),
                               **TOL)


@pytest.mark.parametrize("case", CASES["rejection"], ids=_ids(CASES["rejection"]))
def test_rejection(case):
    x = _inputs()
    cfg = losses.LossConfig(rollout_rs=case["rollout_rs"], rs_low=case["rs_low"],
                            rs_high=case["rs_high"])
    keep = losses.rejection_keep(x["old_logp"], x["rollout_logp"], x["mask"], cfg)
    np.testing.assert_array_equal(np.asarray(keep * x["mask"]), np.asarray(case["mask"]))


@pytest.mark.parametrize("case", CASES["advantages"], ids=_ids(CASES["advantages"]))
def test_advantage_estimator(case):
    a = GOLDENS["advantage_inputs"]
    opts = dict(objectives.estimator(case["estimator"]).defaults, std_norm=case["std_norm"])
    got = objectives.estimator(case["estimator"]).fn(
        np.asarray(a["rewards"], np.float32), a["group_size"], np.asarray(a["lengths"]), opts)
    np.testing.assert_allclose(got, case["advantages"], **TOL)


def test_log_ratio_clamp_is_what_the_extreme_case_checks():
    """Without the clamp the extreme case's loss is another (so the golden pins it)."""
    case = next(c for c in CASES["policy"] if c["case"] == "vanilla/extreme")
    x = _inputs("extreme_inputs")
    cfg = losses.LossConfig(aggregation="token_mean", clip_ratio_c=case["clip_ratio_c"],
                            log_ratio_clamp=0.0)
    loss, _ = losses.policy_loss(x["logp"], x["old_logp"], x["advantages"], x["mask"], cfg)
    assert abs(float(loss) - case["pg_loss"]) > 1e6
    on = dataclasses.replace(cfg, log_ratio_clamp=20.0)
    loss, _ = losses.policy_loss(x["logp"], x["old_logp"], x["advantages"], x["mask"], on)
    np.testing.assert_allclose(float(loss), case["pg_loss"], **TOL)
