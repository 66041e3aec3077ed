"""pool.composition: the training pool cut to asked shares of prompts the starting policy
solves / cannot solve / sits at the frontier of (tasks/composition.py)."""

import json
import os

import ml_collections
import numpy as np
import pytest

from frontier_rl import config_lib, train
from frontier_rl.run import metrics
from frontier_rl.run.errors import RunError
from frontier_rl.tasks import composition
from frontier_rl.tasks.base import Prompt


def _prompts(n):
    return [Prompt(id=f"p{i}", text=f"q{i}", answer="0", bucket="b") for i in range(n)]


def _cfg(spec, size=0, k=8):
    return ml_collections.ConfigDict({"composition": spec, "size": size, "k": k})


def _measure(rates):
    """A starting policy whose measured pass rates are `rates` (what the context returns)."""
    calls = []

    def measure(indices, k):
        calls.append((list(indices), k))
        return np.asarray(rates)[indices]

    return measure, calls


def test_parse_names_the_field_and_checks_the_shares():
    assert composition.parse("solved=0.25, frontier=0.75") == {
        "solved": 0.25, "unsolved": 0.0, "frontier": 0.75}
    for bad, words in (("solved=0.5", "sum to 1"), ("easy=1", "'easy' is not one of"),
                       ("frontier=0.5,frontier=0.5", "at most once"),
                       ("frontier=x", "not class=share"), ("frontier=1.5,solved=-0.5", "[0, 1]")):
        with pytest.raises(ValueError, match="pool.composition") as e:
            composition.parse(bad)
        assert words in str(e.value)


def test_the_pool_has_the_asked_shares_of_measured_classes(tmp_path):
    rng = np.random.default_rng(0)
    rates = rng.choice([0.0, 1.0, 0.25, 0.5, 0.875], size=600)
    measure, calls = _measure(rates)
    pool, m = composition.apply(_cfg("solved=0.2,unsolved=0.3,frontier=0.5", size=200),
                                _prompts(600), measure, 0, str(tmp_path), lambda s: None)
    assert len(pool) == 200 and calls == [(list(range(600)), 8)]
    kept = rates[[int(p.id[1:]) for p in pool]]
    assert np.sum(kept == 1) == 40 and np.sum(kept == 0) == 60
    assert np.sum((kept > 0) & (kept < 1)) == 100
    assert m["pool/frontier"] == 0.5 and m["pool/candidates"] == 600
    assert m["pool/candidate_solved"] == pytest.approx(np.mean(rates == 1))


def test_a_resume_reads_the_pool_back_without_measuring(tmp_path):
    rates = np.tile([0.0, 1.0, 0.5, 0.5], 50)
    measure, calls = _measure(rates)
    cfg = _cfg("unsolved=0.5,frontier=0.5", size=40)
    first, m1 = composition.apply(cfg, _prompts(200), measure, 3, str(tmp_path), lambda s: None)
    again, m2 = composition.apply(cfg, _prompts(200), measure, 3, str(tmp_path), lambda s: None)
    assert [p.id for p in again] == [p.id for p in first] and m1 == m2 and len(calls) == 1
    with pytest.raises(ValueError, match="use a new workdir"):
        composition.apply(_cfg("frontier=1", size=40), _prompts(200), measure, 3,
                          str(tmp_path), lambda s: None)
    assert json.load(open(tmp_path / composition.FILE))["pool_shares"]["unsolved"] == 0.5


def test_too_few_candidates_of_a_class_is_an_error_with_the_counts(tmp_path):
    measure, _ = _measure(np.array([0.0] * 90 + [0.5] * 10))
    with pytest.raises(ValueError, match=r"asks for 25 frontier prompts .* found 10 "
                                         r"\(solved 0, unsolved 90, frontier 10\)"):
        composition.apply(_cfg("frontier=0.5,unsolved=0.5", size=50), _prompts(100), measure,
                          0, str(tmp_path), lambda s: None)


def test_seed_changes_the_draw_not_the_shares(tmp_path):
    rates = np.tile([0.0, 0.5], 100)
    ids = []
    for seed in (0, 1):
        measure, _ = _measure(rates)
        os.makedirs(tmp_path / str(seed))
        pool, _ = composition.apply(_cfg("unsolved=0.5,frontier=0.5", size=40), _prompts(200),
                                    measure, seed, str(tmp_path / str(seed)), lambda s: None)
        ids.append([p.id for p in pool])
    assert ids[0] != ids[1]


def test_train_measures_the_starting_policy_and_records_the_composition(tmp_path):
    """The smoke policy answers nothing correctly: every candidate is unsolved, so a pool of
    unsolved prompts is composed (and recorded), and asking for frontier prompts fails in one
    line naming the field and the counts."""
    c = config_lib.shrink_for_smoke(config_lib.default_config())
    c.log.progress = c.log.tensorboard = False
    c.eval.every = 0
    c.rl.num_steps = 2
    c.pool.composition, c.pool.size, c.pool.k = "unsolved=1", 16, 2
    train.run(config_lib.validate(c), str(tmp_path / "a"))
    rec = metrics.read(os.path.join(tmp_path, "a", "metrics.jsonl"))[0]
    assert rec["pool/unsolved"] == 1.0 and rec["pool/candidates"] > 16
    saved = json.load(open(tmp_path / "a" / composition.FILE))
    assert len(saved["ids"]) == 16
    c.pool.composition = "frontier=1"
    with pytest.raises(RunError, match=r"pool.composition asks for 16 frontier prompts"):
        train.run(config_lib.validate(c), str(tmp_path / "b"))
