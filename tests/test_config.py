"""Configs validate when built and name the bad field, value and allowed range."""

import importlib.util
import os

import pytest

from frontier_rl import config_lib
from frontier_rl.run import fields

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "configs", name))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(os.path.join(ROOT, "configs"))
                                        if f.endswith(".py")))
def test_every_config_builds(name):
    mod = load(name)
    assert config_lib.validate(mod.get_config())
    assert mod.__doc__ and "frontier-rl" in mod.__doc__  # says how to run it


@pytest.mark.parametrize("field,value,message", [
    ("rl.learning_rate", -1.0, "rl.learning_rate=-1.0 is not allowed: a number > 0"),
    ("rl.group_size", 1, "rl.group_size=1"),
    ("rl.minibatches", 3, "a divisor of rl.batch_size * rl.group_size = 512"),
    ("rollout.top_p", 1.5, "rollout.top_p=1.5"),
    ("selector.name", "nope", "selector.name='nope'"),
    ("model.num_heads", 3, "a multiple of model.num_kv_heads=2"),
    ("checkpoint.max_to_keep", 1, "falls back to the previous one"),
    ("rl.tis_cap", 0.5, "rl.tis_cap=0.5 is not allowed: 0 (off) or a cap >= 1"),
    ("rl.recompute_old_logp", "yes", "rl.recompute_old_logp='yes'"),
    ("rollout.rows_per_call", 4, "an integer >= rl.group_size=8 (whole prompts)"),
    ("eval.top_k", 0, "eval.top_k=0 is not allowed: -1 (off) or an integer >= 1"),
    ("eval.top_k", -2, "eval.top_k=-2 is not allowed"),
    ("rollout.top_k", 0, "rollout.top_k=0 is not allowed: -1 (off) or an integer >= 1"),
])
def test_bad_values_name_the_field(field, value, message):
    c = config_lib.default_config()
    section, leaf = field.split(".")
    c[section][leaf] = value
    with pytest.raises(config_lib.ConfigError, match=message.replace("*", r"\*")
                       .replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        config_lib.validate(c)


def test_top_k_defaults_off_and_accepts_k():
    """Sampling top-k is off (-1, SGLang's "disabled") unless set, so the default run draws as
    before; any k >= 1 validates."""
    c = config_lib.default_config()
    assert (c.eval.top_k, c.rollout.top_k) == (-1, -1)
    c.eval.top_k, c.rollout.top_k = 50, 1
    assert config_lib.validate(c)


def test_dapo_forbids_kl():
    c = load("arith_dapo.py").get_config()
    c.rl.kl_coef = 0.1
    with pytest.raises(config_lib.ConfigError, match="DAPO has no KL"):
        config_lib.validate(c)


@pytest.mark.parametrize("field,value,message", [
    ("rollout.top_p", 0.9, "rollout.top_p=0.9 is not allowed: 1.0 with rl.recompute_old_logp="),
    ("rl.tis_cap", 2.0, "TIS needs the trainer's log-probs"),
    ("rollout.top_k", 50, "rollout.top_k=50 is not allowed: -1 (off) with rl.recompute_old_logp="),
])
def test_trusting_engine_logps_excludes_what_needs_the_trainers(field, value, message):
    c = config_lib.default_config()
    c.rl.recompute_old_logp = "never"
    config_lib.validate(c)
    section, leaf = field.split(".")
    c[section][leaf] = value
    with pytest.raises(config_lib.ConfigError, match=message.replace("(", r"\(")
                       .replace(")", r"\)").replace(".", r"\.")):
        config_lib.validate(c)


def test_unknown_config_arg():
    with pytest.raises(ValueError, match="unknown arg"):
        load("arith_grpo.py").get_config("huge")


def test_set_fields_sets_dotted_paths_and_names_unknown_ones():
    c = config_lib.set_fields(config_lib.default_config(),
                              {"rl.learning_rate": 3e-4, "rollout.sglang.retries": 2})
    assert c.rl.learning_rate == 3e-4 and c.rollout.sglang.retries == 2
    with pytest.raises(config_lib.ConfigError, match="no section 'rollout.nope'"):
        config_lib.set_fields(c, {"rollout.nope.x": 1})
    with pytest.raises(config_lib.ConfigError, match="no field 'rl.lr'"):
        config_lib.set_fields(c, {"rl.lr": 1})


def _script_default(script, var):
    """The default a launch script gives `var` (`VAR="${N:-default}"`)."""
    import re

    with open(os.path.join(ROOT, "launch", script)) as f:
        return re.search(rf'^{var}="\$\{{\d:-([^}}]+)\}}"', f.read(), re.M).group(1)


@pytest.mark.parametrize("url", ["http://127.0.0.1:30000", "http://localhost:30000/",
                                 "http://0.0.0.0:30000"])
def test_teacher_on_the_rollout_server_is_refused(url):
    # The paper configs' teacher is SGLang's default port; pointing the rollout engine there
    # (any loopback spelling) is refused before anything starts, naming the teacher's field.
    c = load("math_heapa.py").get_config()
    assert c.selector.heapa.teacher_url == "http://127.0.0.1:30000/v1"
    config_lib.set_fields(c, {"rollout.engine": "sglang", "rollout.sglang.url": url})
    with pytest.raises(config_lib.ConfigError,
                       match=r"selector\.heapa\.teacher_url='http://127\.0\.0\.1:30000/v1' is "
                             r"not allowed: the teacher's host:port is the rollout server's"):
        config_lib.validate(c)
    c.selector.heapa.augment = False  # no teacher calls: nothing to refuse
    config_lib.validate(c)


def test_launch_scripts_rollout_port_is_not_the_teachers():
    port = _script_default("run_gpu.sh", "PORT")
    assert port == _script_default("sglang_server.sh", "PORT") == "31000"
    for name in ("math_heapa.py", "math_hive.py"):
        c = load(name).get_config()
        config_lib.set_fields(c, {"rollout.engine": "sglang",
                                  "rollout.sglang.url": f"http://127.0.0.1:{port}"})
        config_lib.validate(c)  # what launch/run_gpu.sh passes
    c = load("math_heapa.py").get_config()
    config_lib.set_fields(c, {"rollout.engine": "sglang",
                              "rollout.sglang.url": "http://10.0.0.2:30000",
                              "selector.heapa.teacher_url": "http://10.0.0.3:30000/v1"})
    config_lib.validate(c)  # another host, same port: a different server


_BAD = {int: (-1, 0, -5, 10**9, 3, 1), float: (-1.0, 0.0, -0.5, 1.5, 1e9, 2.0),
        str: ("x", "", "bogus")}


def test_every_declared_field_is_in_the_default_config_and_refused_by_its_own_check():
    """A field is spelled once, in its component's section (run/fields.py): its default is
    the default config's, and a value its check refuses fails validation naming that field
    first (the fields declared before it hold their defaults)."""
    checked = 0
    base = config_lib.default_config()
    for section in config_lib.sections():
        assert section.origin.startswith("frontier_rl"), section.name
        for f in section.fields:
            assert base[section.name][f.name] == f.default, (section.name, f.name)
            if f.ok is None or (f.when is not None and not f.when(base)):
                continue
            bad = [v for v in _BAD.get(type(f.default), ()) if not fields.passes(f.ok, v)]
            if not bad:
                continue
            c = config_lib.default_config()
            c[section.name][f.name] = bad[0]
            with pytest.raises(config_lib.ConfigError,
                               match=rf"^{section.name}\.{f.name}={bad[0]!r} is not allowed"):
                config_lib.validate(c)
            checked += 1
    assert checked >= 100, checked

