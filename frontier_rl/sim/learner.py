"""A synthetic learner: a StepContext answered by a model of a policy that learns.

Selectors see the device world only through a StepContext, so the same selector code runs here,
with no model and no accelerator, at 10^5-10^6 prompts and thousands of steps in seconds. The
model is deliberately small; each of its parts stands for one effect that prompt selection
relies on, and each is a config field (`config.sim.*`, defaults in `MODEL_DEFAULTS`).

Prompts and difficulty. Training prompt i has a latent difficulty d_i drawn from a mixture of
difficulty bands k (weights w_k, d ~ N(mu_k, sd_k)); band k is written as an arith sum of k + 2
operands and reported as bucket `band_names[k]` ("2op" ... "5op"), as on the embedded task.
The policy has a scalar skill s and a per-prompt memorisation term m_i (0 at the start):

    p_i = sigmoid(a (s - d_i) + m_i)                 (success probability of one response)

With the defaults (a = 1.5, s_0 = 0, mu = -1.75, -0.25, 1.25, 2.75, sd = 0.75) the held-out
accuracy starts at 90 / 55 / 18 / 3 % per band, and at G = 8 about 16 % of the groups are all
correct and 28 % all wrong (30 % all failed), as early in a real run on the embedded task.

Pool composition (`composition`, "" by default). With "" the training pool is the first
`num_prompts` draws of the mixture. A spec "solved=0.3,unsolved=0.3,frontier=0.4" (parsed by
tasks/composition.py's `parse`, as `pool.composition` on the trainer side) builds it with those
shares instead, by the exact starting pass rate p_i = sigmoid(a (s_0 - d_i)) of each prompt:
*solved* p >= 0.9 (`SOLVED_P`), *unsolved* p <= 0.1 (`UNSOLVED_P`), *frontier* in between (an
exact rate is never 0 or 1; at G = 8 a prompt at p = 0.9 or 0.1 gives a zero-variance group
43 % of the time). Candidates are drawn from the mixture in chunks of max(num_prompts, 4096),
each kept while its class still lacks prompts (round(share x num_prompts), `composition.counts`),
until every class is full or `MAX_CANDIDATES` x num_prompts have been drawn (then a ValueError
names sim.composition and the shares the mixture has). The kept prompts are shuffled; all of it
is drawn from the seed's pool stream. Every context records the pool's measured composition at
the start in `pool_composition` (`measure_pool`): the shares by class and the share of groups of
G expected at zero reward variance (all correct, all wrong or all invalid).

Rollouts. `rollout(indices, n)` draws n responses per prompt: correct with probability p_i;
a failure is invalid (-1) with probability `invalid_rate`, else wrong (0). Every response is
charged to `counters["rollouts"]`.

Learning (`update(groups)`, called by the sim loop between `build_batch` and `after_update`,
where the trainer runs its parameter update). For each trained group j (prompt i_j, G
responses with rewards r_jk and correctness y_jk) the advantages are the trainer's,
A_jk = (r_jk - mean_k r_jk) / (std_k r_jk + 1e-6) with Bessel's std (rl/losses.py), or
(r_jk - b_j) / c_j for a group carrying a global baseline (Reinforce-Ada). The policy-gradient
of the Bernoulli log-odds of prompt i_j is then

    g_j = (1/G) sum_k A_jk (y_jk - p_j)              (= ((G-1)/G) std(y_j) for binary rewards)

so a zero-variance group (all A = 0) teaches nothing. Each group's weight toward the shared
skill is w_j g_j with w_j = 2 sigmoid(hard_bonus (d_j - s)) (1 when hard_bonus = 0: no
transfer bias). Each trained prompt's memorisation moves by its own signal under both rules,

    m_i <- (1 - forget) m_i + eta_mem * g_j          (for i = i_j; forgetting applies to all)

and the skill moves by one of two rules, `update`:

"sgd" (the default; the learner before the Adam rule, unchanged):

    s <- s + eta_skill * sum_j w_j g_j / max(n, B)   (n = groups trained this step)

The step is proportional to the batch-mean signal, so a batch diluted by zero-variance groups
takes a proportionally smaller step. That is plain SGD on the trainer's row-averaged loss; it
is *not* what the trainer does, and it overstates what selection buys (a selector that fills
the batch with informative groups gets a larger step, not only a better one).

"adam": the trainer averages its loss over every row, clips the global norm and applies
AdamW, whose m / sqrt(v) removes the gradient's scale: a diluted batch takes a step of the same
size, only noisier. The rule keeps that and nothing more. The update lives in D directions
(`adam_dims`), of which the skill is the first, e_1; the others stand for everything else the
parameters can move along, which the held-out accuracy does not see. With n the groups trained
and n_inf those whose advantages are not all zero (invalid-vs-wrong groups included: they carry
gradient noise though no skill signal here),

    S     = sum_j w_j g_j / n                        (the mean gradient along e_1)
    sd_N  = sigma * sqrt(n_inf) / n                  (the norm of the noise the informative
                                                      groups' sampled responses add)
    u_t   = S e_1 + sd_N xi_t,  xi_t ~ N(0, I_D / D) (the mean gradient; E|xi|^2 = 1)
    v_t   = S^2 + sd_N^2                             (beta_2 = 0: the exact E|u_t|^2)
          | beta_2 v_{t-1} + (1 - beta_2) |u_t|^2, bias-corrected by 1 - beta_2^t  (beta_2 > 0)
    dtheta = eta_a u_t / sqrt(v_t)                   (no update when v_t = 0)
    s    <- s + e_1 . dtheta = s + eta_a (S + sd_N xi_t1) / sqrt(v_t)

with eta_a = `adam_lr`, sigma = `adam_noise`, D = `adam_dims`, beta_2 = `adam_b2`. Two numbers
are drawn per update: xi_t1 (normal, variance 1 / D) and the rest of |xi_t|^2 (chi-square
with D - 1 degrees of freedom, over D); `update` returns |dtheta| and its cosine with e_1.
Its properties, each pinned by tests/test_sim.py: (a) at beta_2 = 0 the update's
root-mean-square size |dtheta| is eta_a whatever the dilution (u_t and sqrt(v_t) scale alike
with 1/n); (b) more informative groups help only through the signal-to-noise
ratio S / sd_N = sqrt(n_inf) mean_inf(w g) / sigma: the update's cosine with e_1 and the
expected skill step eta_a S / sqrt(S^2 + sd_N^2) grow with n_inf and saturate at 1 and eta_a;
with sigma = 0 every step is eta_a sign(S) and selection cannot help the skill at all; (c)
two free parameters, eta_a and sigma, fitted to real runs by `frontier-rl sim calibrate`
(sim/calibrate.py); D sets only how much of the noise lands on the skill (the spread of runs
over seeds, 1 / sqrt(D) of the noise), beta_2 is 0 unless asked; (d) the draws come from a
stream of their own, so the rest of a run (rollouts, entropy, augmentation) sees the same
random numbers under either rule. Deviations from AdamW, and why: one skill direction among D
stands for the parameters; no first moment (beta_1 = 0): momentum averages noise over steps but
leaves the expected progress per step unchanged, and would add a parameter the calibration
cannot separate from sigma; the per-prompt memorisation keeps the sgd form (it never reaches
the held-out evaluation). The sim has no checkpoint (a run takes seconds); `state()` returns
the rule's state (v_t, t) with the rest, so two runs can be compared state by state.

Invalid-vs-wrong variance (a group of only 0 and -1 outcomes) has non-zero advantages but y = 0
throughout, so it teaches no skill here (it would teach format on a real policy).

Every figure this learner produces (accuracy, headroom, a calibrated prediction) is a model
output: what the model above says, not a measurement of a policy.

Prompt entropy. `prompt_entropy(indices)` answers V_i = 4 p_i (1 - p_i) + sigma_e eps, with
sigma_e chosen so that corr(V, 4p(1-p)) over the initial pool is `entropy_corr` (1 = exact).
Responses carry a mean token entropy 0.2 + 2 p(1-p) + noise, as the scripted context's.

Augmentation (HeaPA). `generate(texts, ...)` continues an arith prefix ("73+5+") as the
embedded policy does: usually one new operand (sometimes two), with probability `gen_invalid`
an empty, ill-formed or token-cap continuation, cut at the stop strings. A prompt added with
`add_prompts` whose `meta["parent"]` names a known prompt gets a difficulty near its parent's,

    d_child = d_parent + aug_size_slope * ln(digits(child) / digits(parent)) + aug_sigma * eps

(the digit ratio is HeaPA's own difficulty factor before clamping), and m_child = 0. A child
whose answer is not the true sum (the teacher's injected label noise, `teacher_error_rate`) or
that draws the sim's own `label_noise` is unsolvable: p = 0 forever. An added prompt with no
known parent gets a difficulty drawn from the mixture.

Evaluation. `evaluate()` is the exact expected accuracy over a fixed held-out set of
`eval_per_band` difficulties per band (memorisation does not transfer to held-out prompts):
acc_k = mean_{d in band k} sigmoid(a (s - d)). No sampling, so curves are smooth and cheap.

Everything is seeded by `seed`; prompt objects are built only when a selector reads
`ctx.prompts[i]`, so a pool costs a few arrays. `time_in_s` accumulates time spent inside this
context so callers can time the selector alone.
"""

from __future__ import annotations

import dataclasses
import math
import time
import types
from collections.abc import Sequence

import numpy as np

from frontier_rl.selection.base import REWARD_CORRECT, REWARD_INVALID, REWARD_WRONG, Group
from frontier_rl.selection.heapa.augment import arith_difficulty, is_arith_prompt
from frontier_rl.tasks import arith, composition

COUNTERS = ("rollouts", "response_tokens", "prompt_tokens", "entropy_prompts", "entropy_tokens",
            "generated_texts", "control_samples")

MODEL_DEFAULTS = dict(
    # Difficulty mixture of the training pool and the held-out set (one entry per band).
    band_names=("2op", "3op", "4op", "5op"),  # buckets; band k is written with k + 2 operands
    band_weights=(0.25, 0.25, 0.25, 0.25),  # w_k: share of the training pool in band k
    band_mean=(-1.75, -0.25, 1.25, 2.75),  # mu_k: mean latent difficulty of band k
    band_sd=(0.75, 0.75, 0.75, 0.75),  # sd_k: spread of the latent difficulty within band k
    slope=1.5,  # a in p = sigmoid(a (s - d) + m)
    skill0=0.0,  # s_0: initial skill
    eta_skill=0.01,  # eta_skill: skill step per unit of batch-mean policy-gradient signal (sgd)
    # The skill's update rule (module docstring): "sgd" (step ~ batch-mean signal) or "adam"
    # (normalised step of size adam_lr whose direction noise falls with informative groups).
    update="sgd",
    adam_lr=0.004,  # eta_a: root-mean-square skill step per update under "adam"
    adam_noise=4.0,  # sigma: norm of one informative group's gradient noise, units of g
    adam_dims=100,  # D: directions the update lives in; the skill sees 1 / sqrt(D) of the noise
    adam_b2=0.0,  # beta_2: EMA of the second moment; 0 = its exact expectation each step
    eta_mem=0.5,  # eta_mem: memorisation step per unit of a prompt's own signal
    forget=0.001,  # per-step decay of every memorisation term m_i (0 = never forgets)
    hard_bonus=0.0,  # transfer bias toward groups harder than the skill (0 = none)
    invalid_rate=0.01,  # P(invalid, -1 | failure)
    entropy_corr=0.8,  # corr(prompt entropy, 4p(1-p)) over the initial pool, in (0, 1]
    gen_invalid=0.1,  # P(an augmentation continuation is empty / ill-formed / runs on)
    aug_size_slope=6.0,  # d_child - d_parent per unit of ln(digit ratio child / parent)
    aug_sigma=0.3,  # sd of the child's difficulty around that
    label_noise=0.0,  # extra P(a child is unsolvable), on top of wrong teacher labels
    eval_per_band=512,  # held-out difficulties per band
    # Training pool shares by starting pass rate, "solved=..,unsolved=..,frontier=.." (module
    # docstring); "" = the mixture as drawn.
    composition="",
)

SOLVED_P = 0.9  # a prompt whose exact starting pass rate is >= this is "solved"
UNSOLVED_P = 0.1  # <= this "unsolved"; strictly between the two "frontier"
UPDATES = ("sgd", "adam")  # the values of `update`
MAX_CANDIDATES = 100  # candidates drawn per training prompt at most when composing the pool

_MAX_NEW_DEFAULT = 8
_ID_PREFIX = "sim/"


def validate_model(c) -> None:
    """Raises ValueError naming `sim.<field>` on the first bad model field."""

    def fail(field, allowed):
        raise ValueError(f"sim.{field}={getattr(c, field)!r} is not allowed: {allowed}")

    def num(field, lo=None, hi=None, lo_open=False):
        v = getattr(c, field)
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        if ok and lo is not None:
            ok = v > lo if lo_open else v >= lo
        if ok and hi is not None:
            ok = v <= hi
        if not ok:
            left = "(" if lo_open else "["
            fail(field, f"a number in {left}{'-inf' if lo is None else lo}, "
                        f"{'inf' if hi is None else hi}]")

    k = len(c.band_names)
    if k < 1 or not all(isinstance(n, str) and n for n in c.band_names):
        fail("band_names", "a non-empty tuple of names")
    for f in ("band_weights", "band_mean", "band_sd"):
        v = getattr(c, f)
        if len(v) != k or not all(isinstance(x, (int, float)) and math.isfinite(x) for x in v):
            fail(f, f"{k} numbers, one per band in sim.band_names")
    if min(c.band_weights) < 0 or sum(c.band_weights) <= 0:
        fail("band_weights", "numbers >= 0 with a positive sum")
    if min(c.band_sd) < 0:
        fail("band_sd", "numbers >= 0")
    num("slope", 0.0, lo_open=True)
    num("skill0")
    num("eta_skill", 0.0)
    num("eta_mem", 0.0)
    if c.update not in UPDATES:
        fail("update", f"one of {list(UPDATES)}")
    num("adam_lr", 0.0)
    num("adam_noise", 0.0)
    num("adam_b2", 0.0, 0.999)
    v = c.adam_dims
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        fail("adam_dims", "an integer >= 1")
    num("forget", 0.0, 1.0)
    num("hard_bonus", 0.0)
    num("invalid_rate", 0.0, 1.0)
    num("entropy_corr", 0.0, 1.0, lo_open=True)
    num("gen_invalid", 0.0, 1.0)
    num("aug_size_slope")
    num("aug_sigma", 0.0)
    num("label_noise", 0.0, 1.0)
    v = c.eval_per_band
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        fail("eval_per_band", "an integer >= 1")
    spec = c.composition
    if not isinstance(spec, str):
        fail("composition", '"" or a spec such as "solved=0.3,unsolved=0.3,frontier=0.4"')
    if spec:
        try:
            composition.parse(spec)
        except ValueError as e:
            reason = str(e).removeprefix(f"pool.composition={spec!r}: ")
            fail("composition", reason)


@dataclasses.dataclass(frozen=True)
class SimPrompt:
    """Duck-types `tasks.Prompt` (id, text, answer, bucket, meta)."""

    id: str
    text: str
    answer: str
    bucket: str
    meta: dict = dataclasses.field(default_factory=dict, hash=False)


def _operands(rng: np.random.Generator, shape) -> np.ndarray:
    """Operand values of 1-3 digits (a 1-digit operand may be 0), as on the embedded task."""
    k = rng.integers(1, 4, shape)
    lo = np.where(k > 1, 10 ** (k - 1), 0)
    return rng.integers(lo, 10**k)


def _write(value: int, reverse: bool) -> str:
    s = str(int(value))
    return s[::-1] if reverse else s


class _Prompts(Sequence):
    """ctx.prompts: base prompts built on demand, added prompts stored as given."""

    def __init__(self, ctx: SimContext):
        self._ctx = ctx

    def __len__(self) -> int:
        return self._ctx.size

    def __getitem__(self, i):
        t0 = time.perf_counter()
        try:
            if isinstance(i, slice):
                return [self._ctx.prompt(j) for j in range(*i.indices(len(self)))]
            i = int(i)
            if i < 0:
                i += len(self)
            if not 0 <= i < len(self):
                raise IndexError(i)
            return self._ctx.prompt(i)
        finally:
            self._ctx.time_in_s += time.perf_counter() - t0


class _Grow:
    """A numpy array with amortised appends (children arrive a few hundred per step)."""

    def __init__(self, init: np.ndarray):
        self.buf = init.copy()
        self.n = init.size

    def append(self, values: np.ndarray) -> None:
        need = self.n + values.size
        if need > self.buf.size:
            new = np.empty(max(need, 2 * self.buf.size), self.buf.dtype)
            new[: self.n] = self.buf[: self.n]
            self.buf = new
        self.buf[self.n: need] = values
        self.n = need

    @property
    def view(self) -> np.ndarray:
        return self.buf[: self.n]


class SimContext:
    """StepContext over the model of the module docstring.

    Args:
      model: the model fields (`MODEL_DEFAULTS`; a ConfigDict, dict or namespace; missing fields
        take their defaults).
      num_prompts: training prompts drawn from the mixture.
      batch_size, group_size: B and G, as the trainer's context exposes them.
      seed: seeds every draw.
      reverse_digits: digit order of the prompt texts and answers (= task.reverse_digits).
    """

    def __init__(self, model=None, *, num_prompts: int, batch_size: int = 256,
                 group_size: int = 8, seed: int = 0, reverse_digits: bool = True):
        values = dict(MODEL_DEFAULTS)
        if model is not None:
            items = model.items() if hasattr(model, "items") else vars(model).items()
            values.update({k: v for k, v in items if k in MODEL_DEFAULTS})
        self.c = c = types.SimpleNamespace(**values)
        validate_model(c)
        if num_prompts < 1:
            raise ValueError(f"num_prompts={num_prompts} is not allowed: an integer >= 1")
        self.num_base = int(num_prompts)
        self.batch_size = int(batch_size)
        self.group_size = int(group_size)
        self.seed = int(seed)
        self.reverse = bool(reverse_digits)
        self.step = 0
        self.params = None
        self.counters = {k: 0 for k in COUNTERS}
        self.time_in_s = 0.0
        self.prompts = _Prompts(self)

        ss = np.random.SeedSequence([self.seed, 0x51A])
        # The 7th stream feeds only the adam rule's noise; the first six are what they were
        # with six (SeedSequence children depend on their index alone).
        pool_ss, eval_ss, roll_ss, ent_ss, gen_ss, aug_ss, upd_ss = ss.spawn(7)
        self._upd_rng = np.random.default_rng(upd_ss)
        self._adam_v = 0.0  # v_t of the adam rule (beta_2 > 0)
        self._adam_t = 0  # its updates so far (bias correction)
        self._rng = np.random.default_rng(roll_ss)
        self._ent_rng = np.random.default_rng(ent_ss)
        self._gen_rng = np.random.default_rng(gen_ss)
        self._aug_rng = np.random.default_rng(aug_ss)

        self._weights = np.asarray(c.band_weights, np.float64) / np.sum(c.band_weights)
        self._mu = np.asarray(c.band_mean, np.float64)
        self._sd = np.asarray(c.band_sd, np.float64)
        band, d, drawn = self._pool(np.random.default_rng(pool_ss), self.num_base)
        self.band = band.astype(np.int8)
        self._d = _Grow(d)
        self._m = _Grow(np.zeros(self.num_base))
        self._dead = _Grow(np.zeros(self.num_base, bool))
        n_ops = 2 + band
        # Operand values of every base prompt, drawn at once (texts are formatted on demand).
        self._ops = _operands(np.random.default_rng(pool_ss.spawn(1)[0]),
                              (self.num_base, 1 + len(self._weights))).astype(np.int32)
        self._plen = _Grow((1 + 3 * n_ops).astype(np.int32))  # BOS + ~2 digits and '+' per op
        self._rlen = _Grow(np.full(self.num_base, 4, np.int32))  # ~3 answer digits + EOS
        self.extra: list = []
        self._index_by_id: dict[str, int] = {}
        self.skill = float(c.skill0)
        self._behaviour: tuple[float, np.ndarray] | None = None  # `behave`

        erng = np.random.default_rng(eval_ss)
        self.eval_d = [erng.normal(self._mu[k], self._sd[k], c.eval_per_band)
                       for k in range(len(c.band_names))]
        u0 = 4.0 * self.success(np.arange(self.num_base)) * (1.0 - self.success(
            np.arange(self.num_base)))
        sd_u = float(np.std(u0)) or 0.1
        r = float(c.entropy_corr)
        self._entropy_sd = sd_u * math.sqrt(max(0.0, 1.0 / (r * r) - 1.0))
        self.step_stats = {"groups": 0, "easy": 0, "hard": 0, "rollouts": 0}
        self.pool_composition = self.measure_pool()
        self.pool_composition["candidates"] = drawn
        # A list to record every device call in (`frontier-rl fit` sizes the run's programs
        # from it), or None: (kind, prompts, n) with kind "rollout" (n responses per prompt),
        # "entropy" (n = 1), "generate" (n = the token cap) or "update" (trained groups,
        # n = their size).
        self.calls: list | None = None

    def _record(self, kind: str, prompts: int, n: int) -> None:
        if self.calls is not None and prompts:
            self.calls.append((kind, int(prompts), int(n)))

    # ------------------------------------------------------------------ the model

    def _draw(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        band = rng.choice(len(self._weights), size=n, p=self._weights)
        return band, rng.normal(self._mu[band], self._sd[band])

    def _start_class(self, d: np.ndarray) -> np.ndarray:
        """Class index (into composition.CLASSES) of each difficulty by its exact starting pass
        rate (memorisation 0): solved p >= SOLVED_P, unsolved p <= UNSOLVED_P, else frontier."""
        return _classify(1.0 / (1.0 + np.exp(-self.c.slope * (self.c.skill0 - d))))

    def _pool(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(band, difficulty, candidates drawn) of the training pool (module docstring)."""
        spec = self.c.composition
        if not spec:
            band, d = self._draw(rng, n)
            return band, d, n
        want = composition.counts(composition.parse(spec), n)
        need = [want[name] for name in composition.CLASSES]
        kept: list[tuple[np.ndarray, np.ndarray]] = []
        seen = np.zeros(len(need), np.int64)
        chunk, drawn = max(n, 4096), 0
        while any(need) and drawn < MAX_CANDIDATES * n:
            band, d = self._draw(rng, chunk)
            drawn += chunk
            cls = self._start_class(d)
            seen += np.bincount(cls, minlength=len(need))
            for k, left in enumerate(need):
                if left:
                    pos = np.flatnonzero(cls == k)[:left]
                    kept.append((band[pos], d[pos]))
                    need[k] -= pos.size
        if any(need):
            have = ", ".join(f"{name} {seen[k] / drawn:.3f}"
                             for k, name in enumerate(composition.CLASSES))
            short = ", ".join(f"{left} {name}" for left, name in
                              zip(need, composition.CLASSES, strict=True) if left)
            raise ValueError(
                f"sim.composition={spec!r}: {drawn:,} candidates from the mixture (sim.band_*) "
                f"left {short} of the {n:,} prompts unfilled (the mixture's shares at the start: "
                f"{have}; solved p >= {SOLVED_P}, unsolved p <= {UNSOLVED_P}); change "
                "sim.composition or the mixture")
        band = np.concatenate([b for b, _ in kept])
        d = np.concatenate([x for _, x in kept])
        order = rng.permutation(n)
        return band[order], d[order], drawn

    def measure_pool(self) -> dict:
        """The base pool's composition now (exact pass rates, class thresholds of the module
        docstring) and the share of groups of G expected at zero reward variance."""
        idx = np.arange(self.num_base)
        p = self.success(idx)
        cls = _classify(p)
        g, r = self.group_size, float(self.c.invalid_rate)
        correct, wrong, invalid = p**g, ((1 - p) * (1 - r))**g, ((1 - p) * r)**g
        n = max(idx.size, 1)
        return {
            "spec": self.c.composition,
            "shares": {name: float(np.sum(cls == k)) / n
                       for k, name in enumerate(composition.CLASSES)},
            "thresholds": {"solved": SOLVED_P, "unsolved": UNSOLVED_P},
            "group_size": g,
            "zero_variance": float(np.mean(correct + wrong + invalid)),
            "all_correct": float(np.mean(correct)),
            "all_failed": float(np.mean((1 - p)**g)),
            "mean_pass_rate": float(np.mean(p)),
        }

    @property
    def size(self) -> int:
        return self._d.n

    @property
    def difficulty(self) -> np.ndarray:
        """d_i of every rollable prompt (read-only view)."""
        return self._d.view

    @property
    def memorisation(self) -> np.ndarray:
        return self._m.view

    def snapshot(self) -> tuple[float, np.ndarray]:
        """The policy now (skill, memorisation): what a stale build generates from
        (rl.staleness, sim/run.py), as the trainer's engine generates from a copy of the
        parameters."""
        return self.skill, self._m.view.copy()

    def behave(self, policy: tuple[float, np.ndarray] | None) -> None:
        """Rollouts, pass rates, prompt entropy and generation read `policy` (a `snapshot`)
        until the next call; None = the current policy. Updates and evaluation always read
        the current one. A prompt added after the snapshot has no memorisation in it."""
        self._behaviour = policy

    def success(self, idx) -> np.ndarray:
        """p_i for the given indices under the behaviour policy (`behave`; by default the
        current skill and memorisation)."""
        if self._behaviour is None:
            return self._success(idx, self.skill, self._m.buf)
        return self._success(idx, *self._behaviour)

    def _success(self, idx, skill: float, m: np.ndarray) -> np.ndarray:
        idx = np.asarray(idx, np.int64)
        mem = m[idx] if m.size >= self.size else np.where(
            idx < m.size, m[np.minimum(idx, m.size - 1)], 0.0)
        z = self.c.slope * (skill - self._d.buf[idx]) + mem
        p = 1.0 / (1.0 + np.exp(-z))
        dead = self._dead.buf[idx]
        if dead.any():
            p = np.where(dead, 0.0, p)
        return p

    def evaluate(self) -> dict[str, float]:
        """Exact expected held-out accuracy per band, and their mean ("mean")."""
        a, s = self.c.slope, self.skill
        out = {name: float(np.mean(1.0 / (1.0 + np.exp(-a * (s - d)))))
               for name, d in zip(self.c.band_names, self.eval_d, strict=True)}
        out["mean"] = float(np.mean(list(out.values())))
        return out

    def state(self) -> dict:
        """The learner's state (for tests and determinism checks)."""
        return {"skill": self.skill, "m": self._m.view.copy(), "d": self._d.view.copy(),
                "counters": dict(self.counters), "adam_v": self._adam_v,
                "adam_t": self._adam_t}

    def update(self, groups: Sequence[Group]) -> dict[str, float]:
        """One parameter update from the trained groups (module docstring); returns its stats."""
        t0 = time.perf_counter()
        groups = list(groups)
        if not groups:
            return {"signal": 0.0, "informative": 0.0}
        self._record("update", len(groups), max(g.size for g in groups))
        idx = np.fromiter((g.index for g in groups), np.int64, len(groups))
        p = self._success(idx, self.skill, self._m.buf)  # the current policy's gradient
        sizes = {g.size for g in groups}
        if len(sizes) == 1:
            r = np.stack([g.rewards for g in groups]).astype(np.float64)
            y = np.stack([g.outcomes for g in groups]) == REWARD_CORRECT
            adv = _advantages(r)
            custom = [j for j, g in enumerate(groups) if g.adv_baseline is not None]
            for j in custom:
                g = groups[j]
                adv[j] = (r[j] - g.adv_baseline) / (g.adv_scale or 1.0)
            sig = np.mean(adv * (y - p[:, None]), axis=1)
            moving = int(np.sum(np.any(adv != 0, axis=1)))
        else:
            sig = np.empty(len(groups))
            moving = 0
            for j, g in enumerate(groups):
                rj = np.asarray(g.rewards, np.float64)[None]
                if g.adv_baseline is not None:
                    aj = (rj - g.adv_baseline) / (g.adv_scale or 1.0)
                else:
                    aj = _advantages(rj)
                sig[j] = np.mean(aj * ((np.asarray(g.outcomes) == REWARD_CORRECT) - p[j]))
                moving += int(np.any(aj != 0))
        c = self.c
        w = sig
        if c.hard_bonus:
            w = sig * 2.0 / (1.0 + np.exp(-c.hard_bonus * (self._d.buf[idx] - self.skill)))
        before = self.skill
        if c.update == "adam":
            step, norm, cos = self._adam_step(float(np.sum(w)) / len(groups), moving,
                                              len(groups))
            self.skill += step
        else:
            self.skill += c.eta_skill * float(np.sum(w)) / max(len(groups), self.batch_size)
            norm = abs(self.skill - before)
            cos = float(np.sign(self.skill - before))
        m = self._m.view
        if c.forget:
            m *= 1.0 - c.forget
        np.add.at(m, idx, c.eta_mem * sig)
        self.time_in_s += time.perf_counter() - t0
        return {"signal": float(np.mean(sig)), "informative": float(np.mean(sig != 0)),
                "step": self.skill - before, "update_norm": norm, "cos": cos}

    def _adam_step(self, signal: float, moving: int, n: int) -> tuple[float, float, float]:
        """(skill step, |dtheta|, cosine of dtheta with e_1) of the adam rule (module
        docstring): S = `signal`, n_inf = `moving`."""
        c = self.c
        sd = c.adam_noise * math.sqrt(moving) / n
        dims = int(c.adam_dims)
        if sd > 0:
            rng = self._upd_rng
            along = signal + sd * float(rng.standard_normal()) / math.sqrt(dims)
            rest = float(rng.chisquare(dims - 1)) / dims if dims > 1 else 0.0
            sq = along * along + sd * sd * rest
        else:
            along, sq = signal, signal * signal
        if c.adam_b2 > 0:
            self._adam_t += 1
            self._adam_v = c.adam_b2 * self._adam_v + (1.0 - c.adam_b2) * sq
            v = self._adam_v / (1.0 - c.adam_b2 ** self._adam_t)
        else:
            v = signal * signal + sd * sd
        if v <= 0 or sq <= 0:
            return 0.0, 0.0, 0.0
        scale = c.adam_lr / math.sqrt(v)
        return scale * along, scale * math.sqrt(sq), along / math.sqrt(sq)

    # ------------------------------------------------------------------ prompts

    def _text(self, i: int) -> tuple[str, str]:
        ops = self._ops[i, : 2 + int(self.band[i])].tolist()
        text = "+".join(_write(v, self.reverse) for v in ops) + "="
        return text, arith.format_answer(sum(ops), self.reverse)

    def prompt(self, i: int):
        if i >= self.num_base:
            return self.extra[i - self.num_base]
        text, answer = self._text(i)
        return SimPrompt(id=f"{_ID_PREFIX}{i}", text=text, answer=answer,
                         bucket=self.c.band_names[int(self.band[i])])

    def _prompt_id(self, i: int) -> str:
        return self.extra[i - self.num_base].id if i >= self.num_base else f"{_ID_PREFIX}{i}"

    def index_of(self, prompt_id: str) -> int | None:
        idx = self._index_by_id.get(prompt_id)
        if idx is not None:
            return idx
        if prompt_id.startswith(_ID_PREFIX):
            tail = prompt_id[len(_ID_PREFIX):]
            if tail.isdigit() and int(tail) < self.num_base:
                return int(tail)
        return None

    # ------------------------------------------------------------------ trainer-side helpers

    def begin_step(self, step: int, params=None) -> None:
        self.step = step
        self.params = params
        self.step_stats = {"groups": 0, "easy": 0, "hard": 0, "rollouts": 0}

    # ------------------------------------------------------------------ StepContext

    def rollout(self, indices: Sequence[int], n: int) -> list[Group]:
        groups = self._groups(indices, n)
        if groups:
            self._record("rollout", len(groups), n)
            self.charge(groups)
        return groups

    def control_rollout(self, indices: Sequence[int], n: int) -> list[Group]:
        """Groups as `rollout` draws them, uncharged (control arms, selection/oracle.py):
        counted in `control_samples` until the control `charge`s those it trains on."""
        groups = self._groups(indices, n)
        self.counters["control_samples"] += n * len(groups)
        return groups

    def charge(self, groups: Sequence[Group]) -> None:
        """Books groups this context drew as rollouts: responses, tokens, the step's tally."""
        t0 = time.perf_counter()
        idx = np.asarray([g.index for g in groups], np.int64)
        outcomes = np.stack([g.outcomes for g in groups])
        k, n = outcomes.shape
        self.counters["rollouts"] += k * n
        self.counters["response_tokens"] += int(sum(int(g.lengths.sum()) for g in groups))
        self.counters["prompt_tokens"] += n * int(self._plen.buf[idx].sum())
        st = self.step_stats
        st["groups"] += k
        st["rollouts"] += k * n
        st["easy"] += int((outcomes == REWARD_CORRECT).all(axis=1).sum())
        st["hard"] += int((outcomes == REWARD_WRONG).all(axis=1).sum())
        self.time_in_s += time.perf_counter() - t0

    def _groups(self, indices: Sequence[int], n: int) -> list[Group]:
        """n scored responses of each prompt as Groups, counted nowhere."""
        t0 = time.perf_counter()
        idx = np.asarray(indices, np.int64).reshape(-1)
        if idx.size == 0:
            return []
        if idx.min() < 0 or idx.max() >= self.size:
            raise IndexError(f"prompt index out of range [0, {self.size})")
        p = self.success(idx)[:, None]
        u = self._rng.random((idx.size, n))
        correct = u < p
        # One draw decides both: the top invalid_rate share of the failure mass is invalid.
        invalid = u >= 1.0 - (1.0 - p) * self.c.invalid_rate
        outcomes = np.where(correct, REWARD_CORRECT,
                            np.where(invalid, REWARD_INVALID, REWARD_WRONG)).astype(np.int8)
        rewards = outcomes.astype(np.float32)
        pq = p * (1.0 - p)
        ent = (0.2 + 2.0 * pq + 0.05 * self._ent_rng.standard_normal((idx.size, n))).astype(
            np.float32)
        lengths = np.repeat(self._rlen.buf[idx][:, None], n, axis=1)
        groups = [Group(index=i, prompt_id=self._prompt_id(i), outcomes=outcomes[r],
                        rewards=rewards[r], lengths=lengths[r], mean_entropy=ent[r])
                  for r, i in enumerate(idx.tolist())]
        self.time_in_s += time.perf_counter() - t0
        return groups

    def pass_rates(self, indices: Sequence[int], k: int = 0) -> np.ndarray:
        """The exact current pass rate p_i of each prompt (control arms; k is not needed here):
        free, never charged, counted in `control_samples` as one per prompt."""
        idx = np.asarray(indices, np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= self.size):
            raise IndexError(f"prompt index out of range [0, {self.size})")
        self.counters["control_samples"] += int(idx.size)
        return self.success(idx)

    def prompt_entropy(self, indices: Sequence[int]) -> np.ndarray:
        t0 = time.perf_counter()
        idx = np.asarray(indices, np.int64).reshape(-1)
        self._record("entropy", idx.size, 1)
        p = self.success(idx)
        noise = self._ent_rng.standard_normal(idx.size) * self._entropy_sd
        out = (4.0 * p * (1.0 - p) + noise).astype(np.float32)
        self.counters["entropy_prompts"] += int(idx.size)
        self.counters["entropy_tokens"] += int(self._plen.buf[idx].sum())
        self.time_in_s += time.perf_counter() - t0
        return out

    def generate(self, texts: Sequence[str], *, max_new_tokens: int = _MAX_NEW_DEFAULT,
                 temperature: float = 1.0, stop: Sequence[str] = ()) -> list[str]:
        """Continues each text as the embedded policy would (see module docstring).

        A text ending in '+' gets one or two operands; any other text gets a whole new sum
        (ending in '='). Cut at the first stop string; charged as rollouts.
        """
        t0 = time.perf_counter()
        rng = self._gen_rng
        k = len(texts)
        self._record("generate", k, max_new_tokens)
        u = rng.random((k, 2))
        kinds = rng.integers(0, 3, k)
        ops = _operands(rng, (k, 5)).tolist()
        n_full = rng.integers(2, 6, k)
        out, tokens = [], 0
        for j, text in enumerate(texts):
            if u[j, 0] < self.c.gen_invalid:
                gen = ("", "+", "1" * max_new_tokens)[int(kinds[j])]
            elif text.endswith("+"):
                n = 1 + int(u[j, 1] < 0.2)
                gen = "+".join(_write(v, self.reverse) for v in ops[j][:n])
            else:
                gen = "+".join(_write(v, self.reverse) for v in ops[j][: n_full[j]]) + "="
            gen = gen[:max_new_tokens]
            tokens += len(gen) + 1
            for s in stop:
                gen = gen.split(s, 1)[0]
            out.append(gen)
        self.counters["rollouts"] += len(out)
        self.counters["generated_texts"] += len(out)
        self.counters["response_tokens"] += tokens
        self.time_in_s += time.perf_counter() - t0
        return out

    def add_prompts(self, prompts: Sequence) -> list[int]:
        """Makes new prompts rollable; children of known prompts start near their parent."""
        t0 = time.perf_counter()
        out = []
        new_d, new_dead, new_plen, new_rlen = [], [], [], []
        for pr in prompts:
            idx = self.index_of(pr.id)
            if idx is None:
                idx = self.size + len(new_d)
                self.extra.append(pr)
                self._index_by_id[pr.id] = idx
                d, dead = self._child(pr)
                new_d.append(d)
                new_dead.append(dead)
                new_plen.append(len(pr.text) + 1)
                new_rlen.append(len(str(pr.answer)) + 1)
            out.append(idx)
        if new_d:
            n = len(new_d)
            self._d.append(np.asarray(new_d))
            self._m.append(np.zeros(n))
            self._dead.append(np.asarray(new_dead, bool))
            self._plen.append(np.asarray(new_plen, np.int32))
            self._rlen.append(np.asarray(new_rlen, np.int32))
        self.time_in_s += time.perf_counter() - t0
        return out

    def _child(self, pr) -> tuple[float, bool]:
        """(difficulty, unsolvable) of a newly added prompt."""
        c = self.c
        meta = getattr(pr, "meta", None) or {}
        parent = meta.get("parent")
        pidx = self.index_of(parent) if isinstance(parent, str) else None
        text = getattr(pr, "text", "")
        rng = self._aug_rng
        if pidx is None or pidx >= self.size:
            d = float(self._draw(rng, 1)[1][0])
        else:
            ratio = 1.0
            ptext = self.prompt(pidx).text
            if is_arith_prompt(text) and is_arith_prompt(ptext):
                ratio = max(arith_difficulty(ptext, text), 1e-3)
            d = (float(self._d.buf[pidx]) + c.aug_size_slope * math.log(ratio)
                 + c.aug_sigma * float(rng.standard_normal()))
        dead = bool(rng.random() < c.label_noise)
        if is_arith_prompt(text):
            dead = dead or str(getattr(pr, "answer", "")) != arith.solve(text, self.reverse)
        return d, dead


def _classify(p: np.ndarray) -> np.ndarray:
    """Class index (into composition.CLASSES) of exact pass rates: solved p >= SOLVED_P,
    unsolved p <= UNSOLVED_P, frontier in between."""
    return np.where(p >= SOLVED_P, 0, np.where(p <= UNSOLVED_P, 1, 2))


def _advantages(r: np.ndarray) -> np.ndarray:
    """Within-group GRPO advantages of rows of rewards, as rl/losses.group_advantages."""
    if r.shape[1] < 2:
        return np.zeros_like(r)
    mean = r.mean(axis=1, keepdims=True)
    std = r.std(axis=1, ddof=1, keepdims=True)
    return (r - mean) / (std + 1e-6)
