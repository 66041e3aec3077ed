"""The RL fields of the config and the DAPO config file's variants."""

import importlib.util
import os

import pytest

from frontier_rl import config_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "configs", name))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_adv_std_norm_defaults_on_and_must_be_a_bool():
    c = config_lib.default_config()
    assert c.rl.adv_std_norm is True
    c.rl.adv_std_norm = False
    config_lib.validate(c)
    with c.ignore_type():  # as a config built from a dict (JSON, a sweep) may hold it
        c.rl.adv_std_norm = "no"
    with pytest.raises(config_lib.ConfigError, match=r"rl.adv_std_norm='no' is not allowed"):
        config_lib.validate(c)


@pytest.mark.parametrize("arg", ["", "smoke"])
def test_arith_dapo_default_is_the_papers_dapo(arg):
    c = _load("arith_dapo.py").get_config(arg)
    assert c.rl.loss == "dapo" and c.rl.kl_coef == 0.0
    assert (c.rl.eps_low, c.rl.eps_high) == (0.2, 0.28)
    assert c.rl.overlong_buffer > 0
    assert c.selector.name == "ds"  # dynamic sampling


@pytest.mark.parametrize("arg", ["no_ds", "no_ds,smoke"])
def test_arith_dapo_no_ds_is_the_loss_recipe_with_uniform_selection(arg):
    c = _load("arith_dapo.py").get_config(arg)
    assert c.rl.loss == "dapo" and (c.rl.eps_low, c.rl.eps_high) == (0.2, 0.28)
    assert c.rl.overlong_buffer > 0
    assert c.selector.name == "uniform"


def test_arith_dapo_rejects_unknown_args():
    with pytest.raises(ValueError, match="unknown arg"):
        _load("arith_dapo.py").get_config("ds_off")


def test_loss_aggregation_entropy_and_dual_clip_fields():
    c = config_lib.default_config()
    assert (c.rl.loss_agg, c.rl.entropy_coef, c.rl.clip_ratio_c) == ("", 0.0, 10.0)
    c.rl.loss_agg, c.rl.entropy_coef, c.rl.clip_ratio_c = "token_mean", 0.001, 0.0
    config_lib.validate(c)  # GRESO's loss: token-mean, entropy bonus, no dual clip
    for field, value, message in (("loss_agg", "sum", "'token_mean'"),
                                  ("entropy_coef", -0.1, "a number >= 0"),
                                  ("clip_ratio_c", 0.5, "0 \\(no dual clip\\)")):
        bad = config_lib.default_config()
        bad.rl[field] = value
        with pytest.raises(config_lib.ConfigError, match=f"rl.{field}={value!r}.*{message}"):
            config_lib.validate(bad)


@pytest.mark.parametrize("loss", ["grpo", "dapo"])
def test_overlong_shaping_applies_with_either_loss(loss):
    """HeaPA keeps its overlong buffer in the GRPO recipe too: the shaper adds the penalty
    whenever rl.overlong_buffer > 0."""
    import numpy as np

    from frontier_rl.rl import update

    c = config_lib.default_config()
    c.rl.loss, c.rl.overlong_buffer, c.rl.overlong_penalty = loss, 4, 1.0
    c.rollout.max_new_tokens = 12
    # lengths 8 (no penalty), 10 (-(10 - 8) / 4 = -0.5), 12 (-1)
    got = update.reward_shaper(c)(np.ones(3, np.float32), np.array([8, 10, 12]))
    np.testing.assert_allclose(got, [1.0, 0.5, 0.0])
