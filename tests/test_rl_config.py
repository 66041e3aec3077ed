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
