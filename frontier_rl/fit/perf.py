"""Hardware peaks and model-FLOPs utilisation (MFU).

MFU = model FLOPs of a step / (step time x peak FLOP/s of the devices it ran on), with model
FLOPs by the formula of accounting.py (2N per forward token, 6N per trained token, causal
attention at half; padding and rematerialisation not counted), as PaLM (Chowdhery et al., 2022,
appendix B) defines it. Peaks are the vendors' dense bfloat16 figures per chip:

| device_kind contains | peak bf16 dense TFLOP/s | source |
|---|---|---|
| H100 / H200 (SXM) | 989 | NVIDIA H100 / H200 datasheets |
| H100 PCIe | 756 | NVIDIA H100 datasheet |
| A100 | 312 | NVIDIA A100 datasheet |
| L4 | 121 | NVIDIA L4 datasheet |
| TPU v4 | 275 | Google Cloud TPU v4 docs |
| TPU v5 lite (v5e) | 197 | Google Cloud TPU v5e docs |
| TPU v5p | 459 | Google Cloud TPU v5p docs |
| TPU v6 lite (v6e) | 918 | Google Cloud TPU v6e (Trillium) docs |

CPUs have no entry: their MFU is reported as NaN rather than against a guessed peak.
"""

from __future__ import annotations

import math

import jax

# (substring of jax's device_kind, lower-cased; peak FLOP/s). First match wins, so the more
# specific names come first.
PEAK_FLOPS: tuple[tuple[str, float], ...] = (
    ("b200", 2250e12),  # NVIDIA's HGX B200 datasheet: dense BF16 per GPU
    ("h100 pcie", 756e12),
    ("h200", 989e12),
    ("h100", 989e12),
    ("a100", 312e12),
    ("l4", 121e12),
    ("tpu v4", 275e12),
    ("tpu v5 lite", 197e12),
    ("tpu v5e", 197e12),
    ("tpu v5p", 459e12),
    ("tpu v5", 459e12),
    ("tpu v6 lite", 918e12),
    ("tpu v6e", 918e12),
)

# Memory of one device (bytes, the vendors' nominal HBM) for the fit check's --device flag.
DEVICE_BYTES: dict[str, int] = {
    "h100": 80 * 10**9,
    "h200": 141 * 10**9,
    "a100": 80 * 10**9,
    "b200": 180 * 10**9,  # DGX B200: 1,440 GB over 8 GPUs
    "v4": 32 * 2**30,
    "v5e": 16 * 2**30,
    "v5p": 95 * 2**30,
    "v6e": 32 * 2**30,
}


def peak_flops(device_kind: str) -> float:
    """Peak dense bf16 FLOP/s of one device of this kind; NaN when unknown (e.g. a CPU)."""
    kind = device_kind.lower()
    for name, peak in PEAK_FLOPS:
        if name in kind:
            return peak
    return math.nan


def mfu(model_flops: float, seconds: float, devices: list | None = None) -> float:
    """Model FLOPs utilisation of `model_flops` done in `seconds` on `devices` (default: all)."""
    devices = jax.devices() if devices is None else devices
    peak = sum(peak_flops(d.device_kind) for d in devices)
    if not seconds > 0 or not peak > 0:
        return math.nan
    return model_flops / seconds / peak


def available_memory_bytes() -> int:
    """MemAvailable of /proc/meminfo in bytes (a tmpfs's pages are memory); 0 if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
