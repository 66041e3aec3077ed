"""The gradient noise scale of a training run (McCandlish et al., arXiv 1812.06162).

Under Adam, prompt selection can only pay by lowering an update's gradient noise: the dilution
of a batch by zero-variance groups is normalised away, and an update with more informative
groups is only less noisy. That helps where the update's informative batch is below the
critical batch size, which McCandlish et al. measure as the simple noise scale

    B_noise = tr(Sigma) / |G|^2

(Sigma the per-example gradient covariance, G the true gradient), estimated from gradient norms
at two batch sizes taken at the same parameters: with E|g_B|^2 = |G|^2 + tr(Sigma) / B,

    |G|^2  ~  (B_big |g_big|^2 - B_small |g_small|^2) / (B_big - B_small)
    S      ~  (|g_small|^2 - |g_big|^2) / (1 / B_small - 1 / B_big)

each unbiased; their ratio is not, so a run's B_noise is the ratio of the two estimates'
means over the measured steps (their appendix A). Here an "example" is a prompt's group of G
responses: the batch of B groups is cut into `rl.noise_parts` contiguous chunks of B / parts
groups (Trainer.noise), so B_noise is in groups, the unit of "informative groups per update"
it is read beside. `rl.noise_every` sets how often (every that many steps; 0 = never). The
measurement takes one extra forward and backward pass over the step's batch and changes
nothing the run computes.
"""

from __future__ import annotations

import numpy as np


def estimates(small_sq: float, big_sq: float, b_small: float, b_big: float
              ) -> tuple[float, float]:
    """(|G|^2 estimate, tr(Sigma) estimate) from mean |g|^2 at batch b_small and |g|^2 at
    b_big (b_small < b_big, both in examples)."""
    if not 0 < b_small < b_big:
        raise ValueError(f"need 0 < b_small < b_big, got {b_small}, {b_big}")
    g2 = (b_big * big_sq - b_small * small_sq) / (b_big - b_small)
    s = (small_sq - big_sq) / (1.0 / b_small - 1.0 / b_big)
    return float(g2), float(s)


def scale(g2s, ss) -> float:
    """B_noise = mean(tr(Sigma) estimates) / mean(|G|^2 estimates); nan when the mean |G|^2
    estimate is not positive (noise so large the true gradient is not resolved)."""
    g2, s = float(np.mean(g2s)), float(np.mean(ss))
    return s / g2 if g2 > 0 else float("nan")


def pooled(runs) -> float:
    """One B_noise over several runs of the same regime: each run's (mean |G|^2 estimate, mean
    tr(Sigma) estimate, steps measured), weighted by its steps, then `scale` of the pooled
    means (a ratio of means, never a mean of per-run ratios); nan without measured steps."""
    runs = [(g2, s, n) for g2, s, n in runs if n > 0 and np.isfinite(g2) and np.isfinite(s)]
    if not runs:
        return float("nan")
    w = np.asarray([n for _, _, n in runs], float)
    return scale([np.average([g2 for g2, _, _ in runs], weights=w)],
                 [np.average([s for _, s, _ in runs], weights=w)])


def metrics(small_sq: float, big_sq: float, b_small: float, b_big: float) -> dict[str, float]:
    """A step's record: the two norms, the batch sizes and the two estimates (train/gns_*)."""
    g2, s = estimates(small_sq, big_sq, b_small, b_big)
    return {"gns_small_sq": small_sq, "gns_big_sq": big_sq, "gns_b_small": b_small,
            "gns_b_big": b_big, "gns_g2": g2, "gns_s": s}
