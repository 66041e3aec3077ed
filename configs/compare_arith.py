"""Matched-budget comparison on the embedded arithmetic task: uniform GRPO, the positive
control, HIVE, HeaPA and uniform at HIVE's number of updates (DS, GRESO, the ablations and the
rest in `:claims` / `:full`), each to the same rollout budget, from two shipped starting points
with three seeds each, with verdicts from paired t-intervals on the pre-registered frontier
bucket (pooled over (start, seed) and per start), Holm over the declared family, each method's
effect as a share of the positive control's headroom, the gradient noise scale per arm, and a
per-(method, seed) proof that each mechanism ran.

  frontier-rl compare --config=configs/compare_arith.py --workdir=runs/compare
  frontier-rl compare --config=configs/compare_arith.py:tuned --workdir=runs/compare
  frontier-rl compare --config=configs/compare_arith.py:controls --workdir=runs/compare
  frontier-rl compare --config=configs/compare_arith.py:claims --workdir=runs/claims

Args:
  ''         uniform, oracle (the positive control), hive, heapa, uniform_b64 (the
             update-matched baseline); seeds 0-2 from configs/starts/arith_s0 and 3-5 from
             arith_s1; 38,400 rollouts each (150 uniform steps of B = 32 x G = 8), all at the
             shared learning rate 3e-4; two runs at once (compare.workers)
  tuned      the same five arms, each tuned on the same learning-rate grid (3e-5, 1e-4, 3e-4)
             on the tuning seeds 10 (s0) and 12 (s1) by the rule declared in TUNE, then run at
             its chosen rate on seeds 0-5 (never seen by the rule): in the default's workdir an
             arm whose chosen rate is 3e-4 reuses the default's runs (experiment/tune.py)
  controls   the default's four arms plus the negative control `oracle_negative`: run in the
             default's workdir it reuses the default's twelve runs and adds three
  claims     every claim of the report and the four ablation arms: uniform, ds, greso, hive,
             hive_random_drop, hive_no_stage1, heapa, heapa_uniform_pool, heap_only,
             heapa_childagg, ps_aug, heapa_hive; seeds 0,1,2
  full       every registered method (no controls); seeds 0,1,2
  field      the default's four arms beside the field's 2026 baselines: speed (SPEED-RL's
             screening), hive_v2 (HIVE v2's Stage 1 with response entropy), mopps (Beta
             posterior, Thompson sampling) and learnability (p(1-p) over a probed pool); run
             in the default's workdir it reuses the default's twelve runs
  field_pflops  the same arms rerun, in another workdir from the same warm start, each to the
             measured PFLOPs uniform spent in `:field` (compare.budget='pflops')
  hive_steps HIVE's claim in its paper's design (HIVE Table 1): DS, GRESO and HIVE for the
             same 50 steps (seeds 0,1,2); the rollouts each spent, DS / HIVE with a paired
             log-ratio interval, and HIVE's accuracy against DS's by two one-sided tests at
             compare.equivalence_margin (1.5 points; why: compare.equivalence_margin_source)
  pilot      what an update gains from more informative groups, the mechanism selection needs
             under Adam: uniform at B = 8 and B = 32 for the same 150 steps on the testbed pool
  pilot_mixed the same on the pool of all four buckets (the testbed before the pilots), B = 16
             and B = 64 for 50 steps
  noise_pilot the gradient noise scale by regime (NOISE_PILOT): uniform at its tuned rate 1e-4
             on the testbed pool and the four-bucket pool at G = 4, 8, 16, 40 steps from both
             starts on the tuning seeds, B_noise every 2 steps (docs/results.md)
  smoke      two methods, one seed, on the smoke-sized task, in seconds (used by tests)

Every preset but pilot_mixed and smoke runs on the same testbed (TESTBED) from the shipped
starts (STARTS: configs/starts/arith_s0, arith_s1, each file checked against its digest), so
the controls measure the headroom of exactly the starting points whose nulls they calibrate;
the results file records the starts' digests and the code's numerics digest. The presets
before this version (claims, full, field, field_pflops, hive_steps, pilot) now run seeds 0-2,
from arith_s0; their published results were measured from the old warm start and are kept in
docs/results/superseded/.

The testbed, chosen by the pilots on the old warm start (docs/results.md, superseded; measure
them again with `:pilot`): a pool of 1,500 prompts, 500 each of 2op, 4op and 5op (no 3op, the
bucket most of whose groups carry gradient: uniform's informative share is about a third),
B = 32, G = 8, 38,400 rollouts (150 uniform steps), AdamW at learning rate 3e-4. At 1e-4 the
positive control's headroom was +2.4 [-0.2, +5.0] points on 4op; at 3e-4 uniform's noisier
updates cost it accuracy (43.9 -> 39.5 on 4op) while the positive control, 32 informative
groups per update against uniform's ~11, did not lose any: a regime where gradient noise
matters, the one where selection can pay under Adam. The default's verdicts are about this
learning rate, which is not uniform's best; `:tuned` gives every arm the same tuning budget.

Each method is a delta merged over the base config (configs/arith_grpo.py's GRPO run); the base
also carries the arith settings of HeaPA's augmentation and teacher, as configs/arith_heapa.py.

Pre-registered before the runs on this testbed: the primary metric is Avg@4 on the frontier
bucket 4op (`compare.metric`; "all" is secondary); verdicts compare each method with uniform
GRPO on the same (start, seed) replicates (`compare.target`), none below 3 seeds, and the
confirmatory family is declared by name: HIVE and HeaPA against uniform (Holm;
`compare.confirmatory`), everything else exploratory; the tuning grid and its rule (TUNE) were
set before any tuning run; power is computed
only at the effects in `compare.effect_sizes` (HeaPA's smallest and largest reported gains),
never at an observed one; rollouts-to-target uses uniform's final 4op accuracy minus 2 points
per seed (`compare.target_margin`); the ablations of `:claims` answer the questions in
`compare.ablations`.

Controls (selection/oracle.py), measured on their own training rollouts: the positive control
rolls out 4 B candidates uncharged and trains on the B groups whose pass rate is nearest 0.5,
filling B, so it takes uniform's steps and updates (it bounds pure selection over the pool at
matched updates, not augmentation or extra rollouts per step); the negative control trains only
on groups of zero reward variance, an exact zero policy gradient (a floor: its policy never
moves), and the report prints its effective share (0 by construction).

Experiment settings, and why (no method's algorithm is changed; `compare.settings_notes` lists
them in the report, and tests/test_mechanisms.py fails if a method's proof counter stays at
zero under them):
- HeaPA (and PS, heapa_hive): capacity N = 1,400, below the 1,500 seeds, so the bound binds
  from the start; archive threshold A_max = 768 and chunk 128 (24 steps of B = 32, so the
  archive recycles several times and lineage refreshes run within the budget); children enter
  the heaps at their estimate (`aug_entry="heap"`, the released code); no capacity check on
  augmentation (`aug_require_capacity=False`): with it, a pool refilled by recycling admits no
  child and the bound never binds.
- A fair teacher: the embedded arith teacher is exact and instant; every augmenting arm
  mislabels 1.2% of its children, the wrong-label rate the HeaPA paper estimates for its LLM
  teacher (`teacher_error_rate`).
- Pre-filter (`:full`): n = 8 offline rollouts per prompt (the paper's 16 would spend 24,000
  of the 38,400 rollouts before the first update; 8 spends 12,000).
- Evaluation: 1,024 held-out 4op prompts (the verdicts' bucket) and 64 in each other bucket,
  4 samples each at T = 0.7, top-p 0.7, drawn with the same sampling seed by every arm at a
  seed (common random numbers: two identical policies score identically); 6 evaluations per
  run plus step 0; no greedy pass.
- Two shipped starts (`compare.starts`), each a warm start of 2op/3op plus a 10% dose of 4op
  examples in every batch (warmstart.frontier_dose), until 80% greedy exact match on held-out
  2op/3op prompts and at least 10% on held-out 4op prompts (`frontier-rl start`, seeds 0 and
  1). Verdicts are pooled over (start, seed) and given per start.
- The gradient noise scale is measured every 10 steps (rl.noise_every).

Hardware: 2 CPU cores (the README gives the measured time). Writes DIR/results.json
(mechanisms per method and seed, steps, updates), DIR/report.md and DIR/plots/*.png;
rerunning after a kill skips finished runs and resumes the interrupted one.
"""

import ml_collections

from frontier_rl import config_lib, selection
from frontier_rl.experiment import launchers

ARGS = ("", "tuned", "claims", "full", "controls", "field", "field_pflops", "hive_steps", "pilot",
        "pilot_mixed", "noise_pilot", "smoke")
# `:field`: the default's four arms and the field's 2026 baselines, on the same testbed
FIELD = "uniform,oracle,hive,heapa,speed,hive_v2,mopps,learnability"
# `:field_pflops`: the same arms, each to the PFLOPs (XLA's cost analysis, every program) uniform
# spent on its 38,400 rollouts in `:field` (0.002324, 0.002321 and 0.002319 at seeds 0-2), set
# before the rerun: arms that spend fewer PFLOPs per rollout (fewer updates, HIVE's discards,
# SPEED's screening) get more rollouts
FIELD_PFLOPS = 0.00232
# Pilot pools (task.bucket_weights over 2op, 3op, 4op, 5op): "sparse" drops 3op, the bucket most
# of whose groups carry gradient, so that uniform's informative share is low; "mixed" is the
# four buckets in equal shares (the testbed before the pilots).
POOLS = {"sparse": (1.0, 0.0, 1.0, 1.0), "mixed": (1.0, 1.0, 1.0, 1.0)}
# The controls are measured on their own training rollouts (selection/oracle.py). The positive
# control rolls out 4 B candidates (uniform's informative share on the testbed pool is about a
# third, so 4 B hold B informative groups in most steps) and fills B; the negative control
# draws 2 B at a time until B of them have zero reward variance (the pool's 2op and 5op supply
# them). Only the trained groups are charged, so both take uniform's steps and updates.
ORACLE = {"measure": "rollouts", "fill": True, "candidates": 4}
NEGATIVE = {"measure": "rollouts", "mode": "extremes", "candidates": 2, "max_rounds": 8}
# The testbed (README, "Choosing the testbed"): the pool, the batch, the budget and the warm
# start every preset but the pilots and smoke shares.
TESTBED = dict(pool="sparse", train_size=1500, batch_size=32, rollout_budget=38400,
               learning_rate=3e-4, warmstart_cache="runs/warmstart/compare_arith")
# The testbed's starting points: shipped files (configs/starts/, made by `frontier-rl start
# --config=configs/compare_arith.py --seeds=N --out=...`), loaded instead of retrained, each
# with the RL seeds run from it; a (start, seed) pair is one replicate.
# The default runs seeds 0-5; `:tuned` tunes on 10 and 12 and confirms on 0-5.
STARTS = {"s0": {"path": "configs/starts/arith_s0", "seeds": "0,1,2,10"},
          "s1": {"path": "configs/starts/arith_s1", "seeds": "3,4,5,12"}}
# `:tuned`: every arm on the same learning-rate grid (AlgoPerf's equal tuning budget), on
# tuning seeds apart from the confirmation seeds (Eimer et al. 2023). The grid brackets the
# rates measured before it was set: uniform better at 1e-4 than at 3e-4 (by 3.0 to 4.5 points
# on 4op, two earlier starts), the positive control not worse at 3e-4.
TUNE = dict(grid={"rl": {"learning_rate": (3e-5, 1e-4, 3e-4)}}, seeds="10,12",
            rule="best_mean", shared={"rl": {"learning_rate": 3e-4}},
            rule_source=(
                "the highest mean final 4op Avg@4 over the tuning seeds, the pre-registered "
                "endpoint; set with the grid before any tuning run"))
# `:noise_pilot`: the gradient noise scale by regime at uniform's tuned rate (the tuning stage's
# choice), set before its runs: uniform on each pool at G = 4, 8 and 16 for 40 steps from both
# starts on the tuning seeds (never read by a verdict), measuring B_noise every 2 steps. The
# testbed is the cell (sparse, G = 8); a regime where B_noise is far above the informative
# groups per update is one where selection can pay under Adam. Model size is not varied: another
# model needs its own shipped starts (`frontier-rl start`).
NOISE_PILOT = dict(pools=("sparse", "mixed"), group_sizes=(4, 8, 16), learning_rate=1e-4,
                   steps=40, noise_every=2, seeds="10,12", well_above=4.0, well_above_source=(
                       "McCandlish et al. (arXiv 1812.06162, eq. 2.8): a step at batch B makes "
                       "1 / (1 + B_noise / B) of the progress of a noiseless one, so at B_noise "
                       ">= 4 B an update makes at most 20% of it and more informative groups "
                       "per update raise it almost in proportion; set before the runs"))
# Confirmation seeds: the default's 0-5, which the rule never sees (it reads seeds 10 and 12
# only), so an arm whose chosen rate is the shared one reuses the default's runs when `:tuned`
# runs in the default's workdir; the others run there on the same seeds.
TUNED_SEEDS = "0,1,2,3,4,5"


def _methods() -> ml_collections.ConfigDict:
    # HeaPA's teacher is an LLM: the paper estimates a 1.2% wrong-label rate among accepted
    # augmented queries (HeaPA, arXiv 2601.22448, efficiency analysis). The embedded arith
    # teacher is exact, so every augmenting arm gets the paper's rate (the selector default
    # stays 0, right for a real LLM teacher that already errs).
    fair = {"teacher_error_rate": 0.012}
    m = {
        "uniform": {"selector": {"name": "uniform"}},
        "ds": {"selector": {"name": "ds"}},
        "greso": {"selector": {"name": "greso"}},
        "pcl": {"selector": {"name": "pcl"}},
        "prefilter": {"selector": {"name": "prefilter"}},
        "reinforce_ada": {"selector": {"name": "reinforce_ada"}},
        "hive": {"selector": {"name": "hive"}},
        # ablations of HIVE: Stage 2 by a random drop at the same rate; no Stage 1
        "hive_random_drop": {"selector": {"name": "hive", "hive": {"stage2": "random"}}},
        "hive_no_stage1": {"selector": {"name": "hive", "hive": {"stage1": False}}},
        "heapa": {"selector": {"name": "heapa", "heapa": dict(fair)}},
        "heapa_childagg": {"selector": {"name": "heapa",
                                        "heapa": {"refresh": "child", **fair}}},
        # ablations of HeaPA: no augmentation; uniform draws from the same evolving pool
        "heap_only": {"selector": {"name": "heapa", "heapa": {"augment": False}}},
        "heapa_uniform_pool": {"selector": {"name": "heapa",
                                            "heapa": {"sampling": "uniform", **fair}}},
        "ps": {"selector": {"name": "ps"}},
        # the update-matched baseline: uniform at the batch that gives it HIVE's optimizer
        # updates at matched rollouts (B = 64: 75 steps, 300 updates, where HIVE's discards
        # leave it about 75 steps), so "selection" is told apart from "fewer, larger updates"
        "uniform_b64": {"selector": {"name": "uniform"}, "rl": {"batch_size": 64}},
        "ps_aug": {"selector": {"name": "ps", "ps": {"augment": True, **fair}}},
        # controls, not methods (selection/oracle.py): each candidate's current pass rate,
        # measured with k samples outside the budget; nearest 0.5 / only 0 or 1
        "oracle": {"selector": {"name": "oracle", "oracle": dict(ORACLE)}},
        "oracle_negative": {"selector": {"name": "oracle", "oracle": dict(NEGATIVE)}},
    }
    # the field's 2026 baselines (issue text: MoPPS, SPEED-RL, learnability sampling, HIVE v2),
    # each at its paper's settings (`frontier-rl protocol` and each selector's docstring)
    m.update({name: {"selector": {"name": name}}
              for name in ("speed", "hive_v2", "mopps", "learnability")})
    if "heapa_hive" in selection.names():
        m["heapa_hive"] = {"selector": {"name": "heapa_hive", "heapa_hive": dict(fair)}}
    return ml_collections.ConfigDict(m)


def get_config(arg: str | None = None):
    arg = arg or ""
    if arg not in ARGS:
        raise ValueError(f"configs/compare_arith.py: unknown arg {arg!r} (use one of {ARGS})")
    c = config_lib.default_config()
    c.rl.loss = "grpo"
    with c.task.unlocked():
        c.task.data_seed = 0  # one task for every seed
        c.task.bucket_weights = POOLS[TESTBED["pool"]]
    c.task.train_size = TESTBED["train_size"]
    c.rl.batch_size = TESTBED["batch_size"]
    c.rl.learning_rate = TESTBED["learning_rate"]
    # Every comparison on this testbed starts from the same cached warm start, so the controls
    # measure the headroom of exactly the starting point whose nulls they calibrate.
    c.warmstart.cache_dir = TESTBED["warmstart_cache"]
    # The frontier bucket 4op is the pre-registered metric: 1,024 eval prompts there, 64 in
    # each other bucket (they are secondary), 4 samples each.
    c.task.eval_per_bucket = 64
    c.task.eval_sizes = "4op:1024"
    c.eval.k = 4
    c.eval.greedy = False
    config_lib.augment_on_arith(c)
    for name in ("heapa", "ps", "heapa_hive"):
        if name not in c.selector:
            continue
        s = c.selector[name]
        s.capacity = 1400
        s.recycle_archive_max = 768
        s.recycle_chunk = 128
        s.aug_entry = "heap"
    # Children are admitted to a full pool and evict (see the module docstring).
    for name in ("heapa", "ps", "heapa_hive"):
        if name in c.selector:
            c.selector[name].aug_require_capacity = False
    c.selector.prefilter.n = 8
    c.log.tensorboard = False

    c.compare = ml_collections.ConfigDict()
    c.compare.methods = _methods()  # name -> delta over the base config
    c.compare.run = "uniform,oracle,hive,heapa,uniform_b64"  # methods to run, in this order
    # two shipped starts, three RL seeds each: verdicts per start and pooled over (start, seed)
    c.compare.starts = ml_collections.ConfigDict(STARTS)
    c.compare.seeds = "0,1,2,3,4,5"
    c.compare.budget = "rollouts"  # matched rollouts; "steps": matched updates (compare.steps)
    # rollouts per run (every generated response counts): 150 uniform steps of B = 32 x G = 8
    c.compare.rollout_budget = TESTBED["rollout_budget"]
    c.compare.steps = 0  # steps per run when budget = "steps"
    # generated response tokens / measured PFLOPs per run when budget = "tokens" / "pflops":
    # the same comparison rerun at another budget, from the same warm-start cache
    c.compare.token_budget = 0
    c.compare.pflops_budget = 0.0
    c.compare.evals = 6  # held-out evaluations per run, evenly spaced (+ step 0)
    c.compare.metric = "4op"  # the pre-registered primary bucket (the frontier); "all" secondary
    c.compare.target = "uniform"  # reference of the paired differences and of the target
    c.compare.target_value = 0.0  # > 0: a fixed rollouts-to-target target (points on metric)
    c.compare.target_margin = 2.0  # target = compare.target's final accuracy minus this
    # HIVE vs DS / GRESO accuracy is "equivalent" when the 90% paired interval lies in
    # +-this many points (two one-sided tests, stats.equivalence); fixed before the runs.
    c.compare.equivalence_margin = 1.5
    c.compare.equivalence_margin_source = (
        "below the smallest gain the papers report for a method over its baseline (HeaPA, "
        "arXiv 2601.22448, Tables 1-2: +1.8 points), so 'equivalent' rules out an effect of "
        "the size they claim; declared with this testbed, before its runs")
    # Pre-registered effects, the only ones power is computed at (never the observed effect).
    c.compare.effect_sizes = ml_collections.ConfigDict({
        "heapa_smallest": {"points": 1.8, "source": "HeaPA (arXiv 2601.22448) Tables 1-2, its "
                                                     "smallest gain over uniform GRPO"},
        "heapa_largest": {"points": 7.2, "source": "HeaPA (arXiv 2601.22448) Tables 1-2, its "
                                                    "largest gain over uniform GRPO"},
    })
    # The confirmatory family (Holm): every method's primary verdict against compare.target
    # and every paper claim with a paired test; everything else in the report is exploratory.
    c.compare.confirmatory = ["hive", "heapa"]
    c.compare.rollout_reference = "ds"  # rollouts-to-target ratios are against this method
    c.compare.shared_start = True  # one warm start for every seed and every preset
    # Runs at once, each in its own process (experiment/workers.py): two fill 2 cores.
    c.compare.workers = 2
    # where the runs execute (experiment/launchers.py): "local" on this machine, or "slurm",
    # one SLURM job per run (docs/cluster.md); a CPU run needs no GPU and minutes, not a day
    c.compare.launcher = "local"
    c.compare.slurm = launchers.slurm_settings(gpus_per_node=0, cpus_per_task=2, time_min=60)
    # name -> (method, ablation, question); the default's: HIVE against uniform at HIVE's own
    # number of optimizer updates (the update-matched arm)
    c.compare.ablations = ml_collections.ConfigDict({
        "update_matched": dict(method="hive", ablation="uniform_b64", question=(
            "does HIVE beat uniform at its own number of updates (fewer, larger batches)?"))})

    if arg in ("claims", "full"):
        c.compare.ablations = ml_collections.ConfigDict({
            "hive_stage2": dict(method="hive", ablation="hive_random_drop", question=(
                "does prompt entropy carry information beyond dropping at the same rate?")),
            "hive_stage1": dict(method="hive", ablation="hive_no_stage1", question=(
                "does the history-based Stage 1 add accuracy beyond Stage 2 alone?")),
            "heapa_sampling": dict(method="heapa", ablation="heapa_uniform_pool", question=(
                "does boundary sampling beat uniform draws from the same evolving pool?")),
            "heapa_augment": dict(method="heapa", ablation="heap_only", question=(
                "do augmented children add accuracy beyond the heaps alone?")),
        })
    c.compare.settings_notes = ml_collections.ConfigDict({
        "heapa": "capacity N=1,400 (< 1,500 seeds), archive threshold 768, chunk 128, children "
                 "enter the heaps (aug_entry=heap), no capacity check on augmentation: so that "
                 "recycling and lineage refreshes act within the budget; measured on the "
                 "testbed, the bound evicts after the initial fill too (evicted_after_fill "
                 "118-285 per seed in the default comparison)",
        "heapa_family": "every augmenting arm's teacher mislabels 1.2% of children (the HeaPA "
                        "paper's estimate); the embedded teacher is otherwise exact and instant",
        "prefilter": "n=8 offline rollouts per prompt (the paper's 16 would spend 24,000 of "
                     ":full's 38,400 rollouts before the first update)",
    })
    if arg == "claims":
        names = ["uniform", "ds", "greso", "hive", "hive_random_drop", "hive_no_stage1",
                 "heapa", "heapa_uniform_pool", "heap_only", "heapa_childagg", "ps_aug"]
        if "heapa_hive" in c.compare.methods:
            names.append("heapa_hive")
        c.compare.run = ",".join(names)
        c.compare.seeds = "0,1,2"
    elif arg == "full":
        c.compare.run = ",".join(m for m in c.compare.methods.keys()
                                 if not m.startswith("oracle"))
        c.compare.seeds = "0,1,2"
    elif arg == "field":  # the default's runs (reused in the same workdir) + the 2026 arms
        c.compare.run = FIELD
        c.compare.seeds = "0,1,2"
    elif arg == "field_pflops":  # the same arms rerun to matched measured PFLOPs
        c.compare.run = FIELD
        c.compare.seeds = "0,1,2"
        c.compare.budget = "pflops"
        c.compare.pflops_budget = FIELD_PFLOPS
    elif arg == "tuned":  # an equal tuning budget for every arm, then fresh seeds (tune.py)
        c.compare.seeds = TUNED_SEEDS
        c.compare.tune = ml_collections.ConfigDict(
            dict(TUNE, arms="uniform,oracle,hive,heapa,uniform_b64"))
    elif arg == "controls":  # the default's runs (reused in the same workdir) + the floor
        c.compare.run = "uniform,oracle,hive,heapa,uniform_b64,oracle_negative"
    elif arg == "hive_steps":  # HIVE Table 1's design: the same steps, rollouts reported
        c.compare.run = "ds,greso,hive"
        c.compare.seeds = "0,1,2"
        c.compare.budget = "steps"
        c.compare.steps = 50
        c.compare.evals = 5
        c.compare.target = "ds"
    elif arg in ("pilot", "pilot_mixed"):
        # How much an update gains from more informative groups, the mechanism selection needs
        # under Adam: uniform at B and 4 B at matched steps from one shared warm start.
        small, large = (8, 32) if arg == "pilot" else (16, 64)
        with c.task.unlocked():
            c.task.bucket_weights = POOLS["sparse" if arg == "pilot" else "mixed"]
        if arg == "pilot_mixed":  # another pool, so another warm start (DIR/warmstart)
            c.warmstart.cache_dir = ""
            c.compare.starts = ml_collections.ConfigDict()
        c.compare.methods[f"uniform_b{small}"] = {"selector": {"name": "uniform"},
                                                  "rl": {"batch_size": small}}
        c.compare.methods[f"uniform_b{large}"] = {"selector": {"name": "uniform"},
                                                  "rl": {"batch_size": large}}
        c.compare.run = f"uniform_b{small},uniform_b{large}"
        c.compare.target = f"uniform_b{small}"
        c.compare.rollout_reference = f"uniform_b{small}"
        c.compare.seeds = "0,1,2"
        c.compare.budget = "steps"
        c.compare.steps = 150 if arg == "pilot" else 50
        c.compare.evals = 3
    elif arg == "noise_pilot":
        p = NOISE_PILOT
        cells = [(pool, g) for pool in p["pools"] for g in p["group_sizes"]]
        for pool, g in cells:
            c.compare.methods[f"g{g}_{pool}"] = {
                "selector": {"name": "uniform"}, "task": {"bucket_weights": POOLS[pool]},
                "rl": {"group_size": g, "learning_rate": p["learning_rate"],
                       "noise_every": p["noise_every"]}}
        c.compare.run = ",".join(f"g{g}_{pool}" for pool, g in cells)
        c.compare.target = c.compare.rollout_reference = f"g8_{TESTBED['pool']}"
        c.compare.ablations = ml_collections.ConfigDict()
        c.compare.seeds = p["seeds"]
        c.compare.budget = "steps"
        c.compare.steps = p["steps"]
        c.compare.evals = 1
    elif arg == "smoke":
        config_lib.shrink_for_smoke(c)
        c.warmstart.cache_dir = ""
        c.compare.starts = ml_collections.ConfigDict()  # the smoke model trains its own
        c.compare.shared_start = False
        c.compare.workers = 1
        c.compare.run = "uniform,hive"
        c.compare.seeds = "0"
        c.compare.rollout_budget = 96
        c.compare.evals = 2
        c.compare.metric = "all"
        c.log.progress = False
    return config_lib.validate(c)
