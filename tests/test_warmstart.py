"""The warm start stops on held-out accuracy, holds its check prompts out of training, and
fails loudly when the cap comes first."""

import json
import os

import ml_collections
import pytest

from frontier_rl import config_lib, train, warmstart


def _pairs(n=400):
    return [(f"{a}+{b}=", str(a + b)) for a in range(20) for b in range(20)][:n]


def test_split_check_holds_prompts_out_of_training():
    pairs = _pairs() * 3  # repeats, as the arith stream has
    train_pairs, check = warmstart.split_check(pairs, 50, seed=0)
    held = {p for p, _ in check}
    assert len(check) == len(held) == 50
    assert not held & {p for p, _ in train_pairs}
    assert len(train_pairs) == len(pairs) - 3 * 50
    assert all(r == str(eval(p[:-1])) for p, r in check)  # noqa: S307 - the pairs above
    assert warmstart.split_check(pairs, 50, seed=0) == (train_pairs, check)
    assert warmstart.split_check(pairs, 50, seed=1)[1] != check
    # never more than half of the distinct prompts
    assert len(warmstart.split_check(_pairs(10), 50, seed=0)[1]) == 5


def test_training_stops_at_the_first_check_that_reaches_the_target(tiny_policy, tokenizer):
    _, graphdef, params = tiny_policy
    seen = []

    def check(_params):
        seen.append(len(seen))
        return [0.1, 0.5, 0.85, 0.95][len(seen) - 1]

    res = warmstart.train(graphdef, params, tokenizer, _pairs(), steps=100, batch_size=16,
                          learning_rate=1e-3, warmup_steps=2, seed=0, check=check,
                          check_every=3, target_acc=0.8)
    assert res.reached and res.steps == 9 and res.check_acc == 0.85
    assert [c[0] for c in res.checks] == [3, 6, 9]
    res = warmstart.train(graphdef, params, tokenizer, _pairs(), steps=5, batch_size=16,
                          learning_rate=1e-3, warmup_steps=2, seed=0, check=lambda p: 0.2,
                          check_every=2, target_acc=0.8)
    assert not res.reached and res.steps == 5 and [c[0] for c in res.checks] == [2, 4, 5]


def test_the_frontier_bucket_must_be_solved_sometimes_too(tiny_policy, tokenizer):
    _, graphdef, params = tiny_policy
    easy = iter([0.9, 0.9, 0.9, 0.9])
    front = iter([0.0, 0.01, 0.08, 0.2])
    res = warmstart.train(graphdef, params, tokenizer, _pairs(), steps=20, batch_size=16,
                          learning_rate=1e-3, warmup_steps=2, seed=0, check=lambda p: next(easy),
                          check_every=2, target_acc=0.8, frontier_check=lambda p: next(front),
                          frontier_min=0.05)
    assert res.reached and res.steps == 6 and res.frontier_acc == 0.08
    assert [c[3] for c in res.checks] == [0.0, 0.01, 0.08]
    front = iter([0.0] * 10)
    res = warmstart.train(graphdef, params, tokenizer, _pairs(), steps=6, batch_size=16,
                          learning_rate=1e-3, warmup_steps=2, seed=0, check=lambda p: 0.9,
                          check_every=2, target_acc=0.8, frontier_check=lambda p: next(front),
                          frontier_min=0.05)
    assert not res.reached


def test_frontier_unreached_is_named_in_the_error(tmp_path, monkeypatch):
    monkeypatch.setattr(warmstart, "exact_match",
                        lambda sampler, params, tok, pairs: 0.0 if all(
                            p.count("+") >= 3 for p, _ in pairs) else 1.0)  # 4op: 3 plus signs
    cfg = _smoke(**{"warmstart.target_acc": 0.8, "warmstart.steps": 20,
                    "warmstart.check_every": 10, "warmstart.check_size": 16,
                    "warmstart.attempts": 2})
    with pytest.raises(train.RunError, match=r"seed 0: held-out exact match 1.000, 4op 0.000 "
                                             r"after 20 steps; seed 1: .*frontier_min=0.1"):
        train.run(cfg, str(tmp_path))


def test_an_attempt_outside_the_regime_is_redone_with_the_next_seed(tmp_path, monkeypatch):
    calls = []

    def fake(sampler, params, tok, pairs):
        calls.append(1)
        return 0.0 if len(calls) <= 4 else 1.0  # attempt 1: two checks x (easy, 4op) fail

    monkeypatch.setattr(warmstart, "exact_match", fake)
    cfg = _smoke(**{"warmstart.target_acc": 0.8, "warmstart.steps": 20,
                    "warmstart.check_every": 10, "warmstart.check_size": 16,
                    "warmstart.attempts": 2})
    train.run(cfg, str(tmp_path))
    info = json.load(open(tmp_path / "warmstart" / warmstart.RESULT_NAME))
    assert info["attempts"] == 2 and info["seed"] == 1 and info["steps"] == 10
    assert info["failed"] == ["seed 0: held-out exact match 0.000, 4op 0.000 after 20 steps"]


@pytest.fixture(scope="module")
def fitted(tiny_policy, tokenizer):
    """The tiny policy fitted to 16 sums: a policy that really stops (EOS) and answers."""
    _, graphdef, params = tiny_policy
    pairs = _pairs(16)
    res = warmstart.train(graphdef, params, tokenizer, pairs, steps=150, batch_size=16,
                          learning_rate=1e-2, warmup_steps=5, seed=0)
    return res.params, pairs


def _greedy(tiny_policy, tokenizer, params, prompts):
    from frontier_rl.rollout.context import decode_responses, encode_prompt
    from frontier_rl.rollout.sampler import Sampler

    cfg, graphdef, _ = tiny_policy
    sampler = Sampler(graphdef, cfg, eos_id=tokenizer.eos_token_id,
                      pad_id=tokenizer.pad_token_id, prompt_buckets=(8, 16), max_new_tokens=4)
    res = sampler.sample(params, [encode_prompt(tokenizer, p) for p in prompts], 1, greedy=True)
    return sampler, decode_responses(tokenizer, res), list(res.finished)


def test_exact_match_scores_the_policy_greedy_output(tiny_policy, tokenizer, fitted):
    params, pairs = fitted
    prompts = [p for p, _ in pairs]
    sampler, said, finished = _greedy(tiny_policy, tokenizer, params, prompts)
    assert sum(finished) >= 8, "the fitted policy must stop on most prompts for this test"
    # references equal to what the policy says when it stopped score 1; the others 0
    refs = [(p, t if f else t + "x") for p, t, f in zip(prompts, said, finished, strict=True)]
    assert warmstart.exact_match(sampler, params, tokenizer, refs) == sum(finished) / 16
    # the true answers: the share the policy got right and stopped after
    right = sum(t == r and f for t, (_, r), f in zip(said, pairs, finished, strict=True))
    assert right >= 8
    assert warmstart.exact_match(sampler, params, tokenizer, pairs) == right / 16
    assert warmstart.exact_match(sampler, params, tokenizer, [(p, "999") for p in prompts]) == 0


def test_the_gate_passes_and_fails_on_a_policy_that_really_answers(tiny_policy, tokenizer,
                                                                     fitted):
    params, pairs = fitted
    cfg, graphdef, _ = tiny_policy
    sampler, _, _ = _greedy(tiny_policy, tokenizer, params, [pairs[0][0]])
    acc = warmstart.exact_match(sampler, params, tokenizer, pairs)

    def check(p):
        return warmstart.exact_match(sampler, p, tokenizer, pairs)

    wrong = [(p, "999") for p, _ in pairs]  # no policy says this: the frontier stays at 0

    def never(p):
        return warmstart.exact_match(sampler, p, tokenizer, wrong)

    kw = dict(steps=2, batch_size=16, learning_rate=1e-9, warmup_steps=1, seed=0, check=check,
              check_every=1, target_acc=acc)
    res = warmstart.train(graphdef, params, tokenizer, pairs, **kw)
    assert res.reached and res.steps == 1 and res.check_acc == pytest.approx(acc, abs=1 / 16)
    res = warmstart.train(graphdef, params, tokenizer, pairs, frontier_check=never,
                          frontier_min=0.05, **kw)
    assert not res.reached and res.steps == 2 and res.frontier_acc == 0.0
    res = warmstart.train(graphdef, params, tokenizer, pairs, **{**kw, "target_acc": 1.01})
    assert not res.reached


def test_the_loss_counts_response_tokens_and_eos_only(tokenizer):
    from frontier_rl.rollout.context import encode_prompt

    pairs = [("1+2=", "3"), ("10+20=", "30")]
    tokens, valid, mask = next(warmstart.make_batches(tokenizer, pairs, batch_size=2, seed=0))
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    for row, v, m in zip(tokens, valid, mask, strict=True):
        text = tokenizer.decode([t for t in row if t not in (eos, pad)])
        answer = "30" if "20" in text else "3"
        # targets are tokens[1:]: the mask marks exactly the answer's tokens and the EOS
        targets = row[1:][m > 0]
        assert tokenizer.decode(targets[:-1]) == answer and targets[-1] == eos
        assert m.sum() == len(answer) + 1
        prompt = "1+2=" if answer == "3" else "10+20="
        assert v.sum() == len(encode_prompt(tokenizer, prompt)) + len(answer) + 1


def test_pairs_encoded_in_one_call_equal_each_encoded_alone(tokenizer):
    from frontier_rl.rollout.context import encode_prompt

    pairs = [(f"{a}*{b}-{a}=", str(a * b - a)) for a in range(0, 120, 7) for b in (0, 3, 11)]
    pairs += [("", "7"), ("1+1=", "")]
    want = [(encode_prompt(tokenizer, p), tokenizer.encode(r, add_special_tokens=False))
            for p, r in pairs]
    assert warmstart.encode_pairs(tokenizer, pairs) == want
    assert warmstart.encode_pairs(tokenizer, []) == []


def test_a_dose_puts_that_share_of_frontier_rows_in_every_batch(tokenizer):
    easy = [(f"{a}+{b}=", str(a + b)) for a in range(10) for b in range(10)]
    hard = [(f"{a}+{b}+{c}=", str(a + b + c)) for a in range(5) for b in range(5)
            for c in range(5)]
    batches = warmstart.make_batches(tokenizer, easy, batch_size=20, seed=0, dose_pairs=hard,
                                     dose=0.25)
    plus = tokenizer.encode("+", add_special_tokens=False)[0]
    seen = set()
    for _ in range(10):
        tokens, _, _ = next(batches)
        n_plus = (tokens == plus).sum(axis=1)
        assert (n_plus == 2).sum() == 5 and (n_plus == 1).sum() == 15
        seen |= {tuple(r) for r in tokens[n_plus == 2]}
    assert len(seen) == 50  # 10 batches x 5 distinct frontier rows: an epoch has 125
    none = next(warmstart.make_batches(tokenizer, easy, batch_size=20, seed=0))[0]
    assert ((none == plus).sum(axis=1) == 1).all()


def _smoke(**over):
    c = config_lib.shrink_for_smoke(config_lib.default_config())
    c.log.progress = False
    c.log.tensorboard = False
    c.rl.num_steps = 0
    for k, v in over.items():
        sec, leaf = k.split(".")
        c[sec][leaf] = v
    return config_lib.validate(c)


def test_unreached_target_is_a_clear_error_and_caches_nothing(tmp_path):
    cfg = _smoke(**{"warmstart.target_acc": 0.99, "warmstart.steps": 20,
                    "warmstart.check_every": 10, "warmstart.check_size": 32,
                    "warmstart.attempts": 1})
    with pytest.raises(train.RunError, match=r"no attempt of 1 reached the regime \(seed 0: "
                                             r"held-out .* after 20 steps; targets "
                                             r"warmstart.target_acc=0.99"):
        train.run(cfg, str(tmp_path))
    assert not os.path.exists(tmp_path / "warmstart")


def test_reached_target_is_recorded_with_the_cache(tmp_path, monkeypatch):
    # the check itself is tested above; here a policy that "reaches" 0.9 at the second check
    calls = []

    def fake_exact_match(sampler, params, tokenizer, pairs):
        calls.append(len(pairs))
        return 0.5 if len(calls) == 1 else 0.9

    monkeypatch.setattr(warmstart, "exact_match", fake_exact_match)
    cfg = _smoke(**{"warmstart.target_acc": 0.8, "warmstart.steps": 100,
                    "warmstart.check_every": 10, "warmstart.check_size": 16,
                    "warmstart.frontier_min": 0.0})
    train.run(cfg, str(tmp_path))
    info = json.load(open(tmp_path / "warmstart" / warmstart.RESULT_NAME))
    assert calls == [16, 16]
    assert info["steps"] == 20 and info["check_acc"] == 0.9 and info["check_prompts"] == 16
    assert [c[0] for c in info["checks"]] == [10, 20]
    first = json.loads(open(tmp_path / "metrics.jsonl").readline())
    assert first["warmstart/steps"] == 20 and first["warmstart/check_acc"] == 0.9
    assert len(first["evalset/correct_counts"]) == first["task/eval_prompts"]
    assert len(first["evalset/prompt_buckets"]) == first["task/eval_prompts"]
    # a rerun loads the cache and still records where the warm start stopped
    train.run(cfg, str(tmp_path))
    assert calls == [16, 16]


def test_the_rate_holds_its_peak_until_the_plateau_is_crossed():
    peak = 1e-2
    assert warmstart.rate(0, peak, 10, None, 100) == 0.0
    assert warmstart.rate(5, peak, 10, None, 100) == pytest.approx(5e-3)
    assert warmstart.rate(5_000, peak, 10, None, 100) == peak  # on the plateau: no decay
    assert warmstart.rate(300, peak, 10, 300, 100) == peak
    assert warmstart.rate(350, peak, 10, 300, 100) == pytest.approx(peak * (0.05 + 0.95 * 0.5))
    assert warmstart.rate(400, peak, 10, 300, 100) == pytest.approx(0.05 * peak)
    assert warmstart.rate(9_000, peak, 10, 300, 100) == pytest.approx(0.05 * peak)


def test_the_decay_starts_at_the_first_check_past_the_escape_level(tiny_policy, tokenizer,
                                                                   monkeypatch):
    """The rates the steps are given: the peak through checks below escape_acc, then the decay
    from the check that crossed it; without an escape level, decay over the cap."""
    _, graphdef, params = tiny_policy
    seen = []
    real_rate = warmstart.rate
    monkeypatch.setattr(warmstart, "rate", lambda count, *a: seen.append(
        (count, a[2])) or real_rate(count, *a))
    accs = iter([0.1, 0.2, 0.5, 0.6, 0.7, 0.9])
    res = warmstart.train(graphdef, params, tokenizer, _pairs(), steps=100, batch_size=16,
                          learning_rate=1e-3, warmup_steps=2, seed=0, check=lambda p: next(accs),
                          check_every=3, target_acc=0.8, escape_acc=0.4, decay_steps=50)
    assert res.reached and res.steps == 18
    assert [d for c, d in seen if c < 9] == [None] * 9  # checks at 3 and 6 stay below 0.4
    assert {d for c, d in seen if c >= 9} == {9}  # the check at step 9 crossed it
    seen.clear()
    warmstart.train(graphdef, params, tokenizer, _pairs(), steps=6, batch_size=16,
                    learning_rate=1e-3, warmup_steps=2, seed=0)
    assert {d for c, d in seen} == {2}


def test_the_stall_rules_start_and_restart_the_decay_only_when_progress_stops(
        tiny_policy, tokenizer, monkeypatch):
    """escape_by starts the decay of a policy that never crosses escape_acc; patience restarts
    it from the peak once it is at its floor with no gain; a trajectory that keeps improving is
    given exactly the rates it had without the rules."""
    _, graphdef, params = tiny_policy
    seen = []
    real_rate = warmstart.rate
    monkeypatch.setattr(warmstart, "rate", lambda count, *a: seen.append(
        (count, a[2])) or real_rate(count, *a))

    def run(accs, **kw):
        seen.clear()
        it = iter(accs)
        res = warmstart.train(graphdef, params, tokenizer, _pairs(), steps=len(accs) * 2,
                              batch_size=16, learning_rate=1e-3, warmup_steps=1, seed=0,
                              check=lambda p: next(it), check_every=2, target_acc=0.8,
                              escape_acc=0.4, decay_steps=4, **kw)
        return res, [d for _, d in seen]

    # never crosses 0.4: the decay waits forever without escape_by, starts at step 6 with it
    creep = [0.1, 0.2, 0.1, 0.2, 0.3, 0.2]
    res, decays = run(creep)
    assert set(decays) == {None} and res.restarts == ()
    res, decays = run(creep, escape_by=6)
    assert decays[6:] == [6] * 6 and res.restarts == (6,)
    # escapes at step 2, decays to its floor at step 6, then stalls at 0.5: with patience 2
    # the checks at 6 and 8 bring no gain of 0.01 over the best (0.5 at step 4), so step 8
    # restarts the decay; it is at its floor again at 12 with no gain since 8: again, and at 16.
    stall = [0.45, 0.5, 0.5, 0.505, 0.5, 0.5, 0.5, 0.5, 0.5]
    res, decays = run(stall)
    assert set(decays[2:]) == {2} and res.restarts == ()
    res, decays = run(stall, patience=2)
    assert res.restarts == (8, 12, 16)
    assert decays[2:8] == [2] * 6 and decays[8:12] == [8] * 4 and decays[12:16] == [12] * 4
    # still improving: the rules never fire and the rates are those without them
    rising = [0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.85]
    _, plain = run(rising)
    res, decays = run(rising, escape_by=4, patience=2)
    assert decays == plain and res.restarts == () and res.reached


def test_the_dose_rises_only_while_the_easy_target_is_met_and_the_frontier_is_not(
        tiny_policy, tokenizer, monkeypatch):
    _, graphdef, params = tiny_policy
    doses = []
    real = warmstart.make_batches
    monkeypatch.setattr(warmstart, "make_batches", lambda *a, **kw: doses.append(
        kw["dose"]) or real(*a, **kw))
    hard = [(f"{a}+{b}+{c}=", str(a + b + c)) for a in range(5) for b in range(5)
            for c in range(5)]
    easy = iter([0.5, 0.9, 0.9, 0.7, 0.9, 0.9, 0.9, 0.9])
    front = iter([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.02, 0.2])
    res = warmstart.train(graphdef, params, tokenizer, _pairs(), steps=100, batch_size=20,
                          learning_rate=1e-3, warmup_steps=2, seed=0, check=lambda p: next(easy),
                          check_every=2, target_acc=0.8, frontier_check=lambda p: next(front),
                          frontier_min=0.1, dose_pairs=hard, dose=0.1, dose_max=0.35)
    # checks 2, 3, 5, 6, 7 pass the easy target with the frontier short: +0.1 each, capped
    assert doses == pytest.approx([0.1, 0.2, 0.3, 0.35])
    assert res.reached and res.steps == 16 and res.dose == pytest.approx(0.35)
    doses.clear()  # a policy that reaches both at once: one stream at the starting dose
    res = warmstart.train(graphdef, params, tokenizer, _pairs(), steps=100, batch_size=20,
                          learning_rate=1e-3, warmup_steps=2, seed=0, check=lambda p: 0.9,
                          check_every=2, target_acc=0.8, frontier_check=lambda p: 0.2,
                          frontier_min=0.1, dose_pairs=hard, dose=0.1, dose_max=0.5)
    assert doses == [0.1] and res.steps == 2 and res.dose == 0.1


def test_bench_with_a_workdir_caches_where_a_comparison_looks(tmp_path, monkeypatch):
    from frontier_rl.bench import warmstart as bench_warmstart
    from frontier_rl.experiment import compare

    calls = []

    def fake_exact_match(sampler, params, tokenizer, pairs):
        calls.append(len(pairs))
        return 0.9

    monkeypatch.setattr(warmstart, "exact_match", fake_exact_match)
    cfg = _smoke(**{"warmstart.target_acc": 0.8, "warmstart.steps": 40,
                    "warmstart.check_every": 10, "warmstart.check_size": 16,
                    "warmstart.frontier_min": 0.0})
    first = bench_warmstart.main(cfg, "3", verbose=False, workdir=str(tmp_path))["seeds"][0]
    assert first["steps"] == 10 and first["attempts"] == 1 and not first["cached"]
    assert first["easy_acc"] == 0.9
    cache = tmp_path / "warmstart" / "s3"
    assert (cache / "model.safetensors").exists()
    assert json.load(open(cache / warmstart.RESULT_NAME))["seed"] == 3
    n_calls = len(calls)
    # a second bench reads the cache: same figures, no training, marked cached
    again = bench_warmstart.main(cfg, "3", verbose=False, workdir=str(tmp_path))["seeds"][0]
    assert len(calls) == n_calls and again["cached"]
    assert {k: again[k] for k in ("steps", "easy_acc", "attempts", "seconds")} == {
        k: first[k] for k in ("steps", "easy_acc", "attempts", "seconds")}
    # ... and a comparison in the same directory starts seed 3 from it
    spec = ml_collections.ConfigDict(cfg.to_dict())
    spec.compare = _compare_section()
    spec.compare.run, spec.compare.seeds = "uniform", "3"
    [run] = compare.plan(spec, str(tmp_path))
    assert run.config.warmstart.cache_dir == str(cache)


def _compare_section():
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "configs", "compare_arith.py")
    spec = importlib.util.spec_from_file_location("compare_arith", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.get_config("smoke").compare
