"""`frontier-rl bench packed` on the CPU (XLA's segment blocks): what a GPU run of it checks
with cuDNN (launch/gpu_check.sh)."""

import numpy as np
import pytest

from frontier_rl.bench import packed
from frontier_rl.models import transformer


def test_packed_attention_matches_the_float32_reference_like_xla(monkeypatch):
    monkeypatch.setattr(transformer, "SEGMENT_BLOCK", 32)  # rows of 96 attend in blocks
    out = packed.attention_parity("xla", 96, 8)
    assert out["finite"] and out["segments_max"] >= 2, out
    for name in ("out", "dq", "dk", "dv"):
        # bfloat16 inputs: the kernel's error is XLA's own (same maths in blocks)
        assert out[f"{name}_err"] <= 1.5 * out[f"{name}_xla_err"] + 1e-3, (name, out)


@pytest.mark.slow
def test_a_policy_gives_packed_rows_the_log_probs_of_one_sequence_per_row():
    out = packed.policy_parity("xla")
    assert np.isfinite(out["policy_logp_max_diff"]) and out["policy_logp_max_diff"] < 0.05, out
