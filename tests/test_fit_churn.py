"""`frontier-rl fit`'s compile churn (fit/churn.py): the programs it counts are the programs a run's
own sampler, entropy pass and trainer compile for the same calls and lengths."""

import json

import numpy as np
import pytest

from frontier_rl.entropy import PromptEntropy
from frontier_rl.fit import churn, compile_cache
from frontier_rl.fit import command as fit
from frontier_rl.fit.shapes import PROMPT_BUCKETS, ROW_BUCKETS
from frontier_rl.rl import batch as batch_lib
from frontier_rl.rl import sharding, update
from frontier_rl.rollout.sampler import Sampler
from frontier_rl.selection.base import Group


def _config():
    """HIVE (rollouts of varying size, entropy passes) with packed train batches of short
    prompts and a long cap, so sequences of different lengths pack into different shapes."""
    from configs import arith_hive

    c = arith_hive.get_config()
    c.rl.batch_size, c.rl.packing = 16, "pack"
    c.rollout.rows_per_call = 96  # rollouts of 256 and 128 rows go in calls of 96, 64 and 32
    c.fit.prompt_len, c.rollout.max_new_tokens = 8, 48
    return c


def _drifting(seen: list):
    """Response lengths whose mean moves from call to call (a run's lengths drift), recorded."""
    def responses(rng, rows, cap):
        mean = (0.1, 0.3, 0.6, 0.9)[len(seen) % 4] * cap
        out = np.minimum(rng.geometric(1 / mean, rows), cap)
        seen.append(out)
        return out
    return responses


def _compiles(fun: str) -> float:
    return compile_cache.compile_log().metrics().get(f"perf/compiles/{fun}", 0.0)


def _groups(lengths, group_size: int, cap: int) -> list[Group]:
    groups = []
    for j in range(len(lengths) // group_size):
        n = np.asarray(lengths[j * group_size:(j + 1) * group_size], np.int32)
        tokens = np.zeros((group_size, cap), np.int32)
        for k, m in enumerate(n):
            tokens[k, :m] = 3
        rewards = np.float32([k % 2 for k in range(group_size)])
        groups.append(Group(index=j, prompt_id=str(j), outcomes=rewards.astype(np.int8),
                            rewards=rewards, lengths=n, mean_entropy=np.zeros(group_size),
                            tokens=tokens, logps=np.where(tokens > 0, -1.0, 0.0)))
    return groups


@pytest.fixture(scope="module")
def played():
    c = _config()
    return c, fit.simulate(c, steps=6)


def test_the_count_is_the_programs_the_run_compiles(played, tiny_policy):
    """Replay the run's calls through its own sampler, entropy pass and trainer, with the
    lengths the count drew: the compiles they make are the programs the count says. A count
    that ignored the lengths (every response at the cap) or the layout would differ."""
    c, sim = played
    cfg, graphdef, params = tiny_policy
    mesh = sharding.make_mesh()
    cap, plen = c.rollout.max_new_tokens, c.fit.prompt_len
    trainer = update.make_trainer(c, graphdef, mesh)
    sampler = Sampler(graphdef, cfg, eos_id=-1, pad_id=0, prompt_buckets=PROMPT_BUCKETS,
                      max_new_tokens=cap, mesh=mesh)
    entropy = PromptEntropy(graphdef, pad_id=0, prompt_buckets=PROMPT_BUCKETS, mesh=mesh,
                            micro_batch=c.rollout.entropy_batch)
    rollout = fit._engine_calls  # the engine's split of a generate call into sampler calls
    rows = [r for k, p, n in sim["calls"] if k == "rollout"
            for r in rollout(p, n, c.rollout.rows_per_call)]
    variants = {(cap, False, False, -1): {"purposes": ["rollout"], "rows": rows}}
    seen: list = []
    kw = dict(prompt_len=plen, max_new=cap, row_multiple=trainer.row_multiple,
              sampler_rows=sampler.padded_rows, entropy_shape=entropy.padded_shape, logps=True)
    counted = churn.count(sim["calls"], {}, layout="pack", responses=_drifting(seen), **kw)
    counted_sampler = churn.count(sim["calls"], variants, layout="pack", **kw)["sampler"]

    before = {f: _compiles(f) for f in ("jit__generate_impl", "jit__impl", "jit__logps_impl")}
    prompt = [1] * plen
    for r in rows:
        sampler.sample(params, [prompt] * (r // c.rl.group_size), c.rl.group_size, seed=0)
    for k, p, _ in sim["calls"]:
        if k == "entropy":
            entropy(params, [prompt] * p)
    shapes = set()
    updates = [(p, g) for k, p, g in sim["calls"] if k == "update"]
    assert len(seen) == len(updates)
    for (p, g), lengths in zip(updates, seen, strict=True):
        batch = batch_lib.pack(_groups(lengths, g, cap), [prompt] * p, pad_id=0,
                               prompt_buckets=PROMPT_BUCKETS, row_buckets=ROW_BUCKETS,
                               row_multiple=trainer.row_multiple, layout=trainer.layout)
        shapes.add(batch["tokens"].shape)
        trainer.logps(params, batch["tokens"], batch["valid"])
    compiled = {f: _compiles(f) - before[f] for f in before}

    assert counted_sampler["programs"] == compiled["jit__generate_impl"] >= 2
    assert counted["entropy"]["programs"] == compiled["jit__impl"] >= 1
    assert counted["logps"]["programs"] == compiled["jit__logps_impl"] == len(shapes) >= 3
    assert set(counted["logps"]["shapes"]) == shapes
    # and the bound holds every shape met
    assert shapes <= churn.train_bound(p * g, p * g, plen, max_new=cap, layout="pack",
                                       row_multiple=trainer.row_multiple)
    assert counted["logps"]["programs"] <= counted["logps"]["bound"]

    # A count blind to the lengths, or to the layout, is caught.
    blind = churn.count(sim["calls"], {}, layout="pack",
                        responses=lambda rng, r, cap: np.full(r, cap), **kw)
    assert blind["logps"]["programs"] != compiled["jit__logps_impl"]
    seen.clear()
    trim = churn.count(sim["calls"], {}, layout="trim", responses=_drifting(seen), **kw)
    assert set(trim["logps"]["shapes"]) != shapes


def test_fit_reports_and_prints_the_churn(played, capsys):
    c, sim = played
    r = fit.check(c, fit.parse_mesh("data=1"), "h200", say=lambda *a, **k: 0, sim=sim,
                  kinds=())
    ch = r["churn"]
    assert ch["layout"] == "pack" and ch["prompt_bucket"] == 8
    assert ch["logps"]["programs"] == 0  # no KL, the sampler's log-probs serve
    assert 1 <= ch["train_step"]["programs"] <= ch["train_step"]["bound"]
    assert ch["train_step"]["row_padding"] >= 1 and ch["sampler"]["programs"] >= 2
    # a token cap of 48 decodes in segments of 16, 16 and 16 steps: 3 loops a program
    assert ch["sampler"]["segments"] == 3 * ch["sampler"]["programs"]
    json.dumps(r)  # `fit --json` writes it
    fit.print_report(r)
    out = capsys.readouterr().out
    assert "compile churn" in out and "train_step" in out
