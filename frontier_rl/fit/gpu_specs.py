"""NVIDIA GPU descriptions for compiling without the GPU (JAX compile-only devices).

`jax.experimental.topologies.get_topology_desc(platform="cuda", target_config=TEXT,
topology="1x1x8")` (topology "PxHxD": partitions x hosts x GPUs per host) builds devices of a
GPU model that is not on this machine, from TEXT, a text-format
`stream_executor.GpuTargetConfigProto`: the device's description (SM count, shared memory,
registers, L2, clocks, memory size and bandwidth, compute capability, per-dtype unit rates)
that XLA otherwise reads from the driver. A program lowered for those devices compiles with
the real GPU compiler (jax[cuda12]: no driver and no GPU needed), and its
`memory_analysis()` is the one the GPU would get.

`GPU_TARGET_CONFIGS[name]` is that text, `GPU_MEMORY_BYTES[name]` the device memory in bytes.
The numbers are those of the descriptions XLA keeps for real devices, as queried from them, in
github.com/openxla/xla, xla/backends/gpu/target_config/specs/*.txtpb (cited per GPU below);
this module writes them out itself rather than shipping those files.

Dropped: `collective_memory_granularity` (in XLA's newer H100/H200/B200 specs). The proto of
jaxlib 0.10.2 has no such field and its text parser rejects the whole config when it is
present; the field only sizes XLA's collective-memory allocations, not the program or its
memory analysis. Every other field of those specs parses in jaxlib 0.10.2 and is kept.
"""

from __future__ import annotations

# --- a small text-proto writer -------------------------------------------------------------


class _Enum(str):
    """A proto enum value: written bare (NONE), not quoted."""


def _text(fields: dict, indent: int = 0) -> str:
    pad = "  " * indent
    lines = []
    for key, value in fields.items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict):
                lines.append(f"{pad}{key} {{")
                lines.append(_text(item, indent + 1))
                lines.append(f"{pad}}}")
            elif isinstance(item, _Enum):
                lines.append(f"{pad}{key}: {item}")
            elif isinstance(item, bool):
                lines.append(f"{pad}{key}: {'true' if item else 'false'}")
            elif isinstance(item, str):
                lines.append(f'{pad}{key}: "{item}"')
            else:
                lines.append(f"{pad}{key}: {item!r}")
    return "\n".join(line for line in lines if line)


# xla.PrimitiveType numbers, the keys of the unit-rate maps.
S8, S32, U8, U32, F16, F32, F64, BF16 = 2, 4, 6, 8, 10, 11, 12, 16
F8E5M2, F8E4M3FN, F8E4M3B11FNUZ, F8E5M2FNUZ, F8E4M3FNUZ = 19, 20, 23, 24, 25
F8E4M3, F8E3M4, F4E2M1FN, F8E8M0FNU = 28, 29, 32, 33
# Two 8-bit-or-narrower float types of XLA newer than jaxlib 0.10.2's PrimitiveType enum; the
# map key is an int32, so jaxlib 0.10.2 parses them and no program of it ever looks them up.
_NEWER_SMALL_FLOATS = (35, 36)


def _rates(clock_ghz: float, units_per_core: int, ops: dict[int, int],
           clock_overrides: dict[int, float] | None = None) -> dict:
    """An ExecutionUnitDescription: for each dtype key, units per SM and ops per unit-clock."""
    clock_overrides = clock_overrides or {}
    return {"rate_infos": [
        {"key": dtype, "value": {"clock_rate_ghz": clock_overrides.get(dtype, clock_ghz),
                                 "units_per_core": units_per_core, "ops_per_clock": n}}
        for dtype, n in ops.items()]}


def _scalar_rates(clock_ghz: float, units: dict[int, tuple[int, int]]) -> dict:
    return {"rate_infos": [
        {"key": dtype, "value": {"clock_rate_ghz": clock_ghz, "units_per_core": per_core,
                                 "ops_per_clock": n}}
        for dtype, (per_core, n) in units.items()]}


# Limits every CUDA GPU here (sm_80, sm_90, sm_100) reports alike.
_CUDA_LIMITS = {
    "threads_per_block_limit": 1024,
    "threads_per_warp": 32,
    "shared_memory_per_block": 48 * 1024,
    "threads_per_core_limit": 2048,
    "block_dim_limit_x": 2**31 - 1,
    "block_dim_limit_y": 65535,
    "block_dim_limit_z": 65535,
    "registers_per_core_limit": 65536,
    "registers_per_block_limit": 65536,
    "thread_dim_limit_x": 1024,
    "thread_dim_limit_y": 1024,
    "thread_dim_limit_z": 64,
}

# The software the descriptions were recorded under (XLA's specs record it with the device).
_RECORDED_SOFTWARE = {
    "driver_version": "13.0.0",
    "runtime_version": "12.8.0",
    "compile_time_toolkit_version": "12.8.0",
    "dnn_version": "9.10.0",
    "cub_version": "3.1.2",
}


def _config(device: dict, dnn: tuple[int, int, int]) -> str:
    major, minor, patch = dnn
    return _text({
        "gpu_device_info": {**_CUDA_LIMITS, **device},
        "platform_name": "CUDA",
        "dnn_version_info": {"major": major, "minor": minor, "patch": patch},
        "device_description_str": device["name"],
    }) + "\n"


def _cc(major: int, accelerated: bool) -> dict:
    return {"major": major, "minor": 0,
            "feature_extension": _Enum("ACCELERATED_FEATURES" if accelerated else "NONE")}


# --- A100 (GA100, sm_80: 108 SMs, 40 MiB L2, 164 KiB shared memory per SM) -------------------

_A100_COMMON = {
    "shared_memory_per_core": 164 * 1024,
    "shared_memory_per_block_optin": 163 * 1024,
    "core_count": 108,
    "fpus_per_core": 64,
    "l2_cache_size": 40 * 1024 * 1024,
    "clock_rate_ghz": 1.41,
    "cuda_compute_capability": _cc(8, accelerated=False),
    "device_vendor": "NVIDIA Corporation",
    "platform_version": "Compute Capability 8.0",
    "device_address_bits": 64,
    "pcie_bandwidth": 32 * 2**30,
    "ecc_enabled": True,
}

# openxla/xla: xla/backends/gpu/target_config/specs/a100_sxm_40.txtpb (NVIDIA A100-SXM4-40GB).
_A100_40GB = {
    **_A100_COMMON,
    "memory_bandwidth": 1_555_200_000_000,  # 1555 GB/s HBM2
    "device_memory_size": 42_331_013_120,
    "model_str": "sm_8.0 with 42298834944B RAM, 108 cores, 1410000KHz clock, "
                 "1215000KHz mem clock, 41943040B L2$",
    "name": "NVIDIA A100-SXM4-40GB",
    **_RECORDED_SOFTWARE,
}

# openxla/xla: xla/backends/gpu/target_config/specs/a100_sxm_80.txtpb (NVIDIA A100-SXM4-80GB):
# memory size and bandwidth (2039 GB/s HBM2e) and the SM figures. That spec is an older, shorter
# recording (no vendor, name, PCIe, ECC or software versions, and cuDNN 8.9.4); those fields are
# taken from the 40GB SXM4 part above (same GA100 chip and board family) so both A100s describe
# the same software. Its model string is written the way XLA's other specs write it, with the
# 80GB part's public 1593 MHz memory clock (5120-bit HBM2e: 2 x 640 B x 1593 MHz = 2039 GB/s).
_A100_80GB = {
    **_A100_COMMON,
    "memory_bandwidth": 2_039_040_000_000,
    "device_memory_size": 85_100_068_864,
    "model_str": "sm_8.0 with 85100068864B RAM, 108 cores, 1410000KHz clock, "
                 "1593000KHz mem clock, 41943040B L2$",
    "name": "NVIDIA A100-SXM4-80GB",
    **_RECORDED_SOFTWARE,
}

# --- Hopper (GH100, sm_90a: 132 SMs, 50 MiB L2, 228 KiB shared memory per SM) ----------------
# Unit rates per SM, as XLA's H100 SXM and H200 specs record them (identical: same chip).

_HOPPER_SCALAR = _scalar_rates(1.98, {
    S32: (64, 1), U32: (64, 1), F16: (128, 2), F32: (128, 1), F64: (64, 1), BF16: (128, 2)})
_HOPPER_MATRIX = _rates(1.8295201, 4, {
    S8: 1024, U8: 1024, F16: 512, F32: 256, F64: 32, BF16: 512,
    F8E5M2: 1024, F8E4M3FN: 1024, F8E4M3B11FNUZ: 1024, F8E5M2FNUZ: 1024, F8E4M3FNUZ: 1024,
    F8E4M3: 1024, F8E3M4: 1024, F8E8M0FNU: 1024,
    **{k: 1024 for k in _NEWER_SMALL_FLOATS}},
    clock_overrides={F64: 1.98})

_HOPPER_COMMON = {
    "shared_memory_per_core": 228 * 1024,
    "shared_memory_per_block_optin": 227 * 1024,
    "core_count": 132,
    "fpus_per_core": 128,
    "l2_cache_size": 50 * 1024 * 1024,
    "clock_rate_ghz": 1.98,
    "cuda_compute_capability": _cc(9, accelerated=True),
    "scalar_unit_description": _HOPPER_SCALAR,
    "matrix_unit_description": _HOPPER_MATRIX,
    "device_vendor": "NVIDIA Corporation",
    "platform_version": "Compute Capability 9.0a",
    "device_address_bits": 64,
    "pcie_bandwidth": 32 * 2**30,
    "ecc_enabled": True,
    "device_interconnect_info": {"active_links": 18},  # NVLink 4: 18 links
}

# openxla/xla: xla/backends/gpu/target_config/specs/h100_sxm.txtpb (NVIDIA H100 80GB HBM3, SXM5).
_H100 = {
    **_HOPPER_COMMON,
    "memory_bandwidth": 3_352_320_000_000,  # 3.35 TB/s HBM3
    "device_memory_size": 84_942_979_072,
    "model_str": "sm_9.0a with 84942979072B RAM, 132 cores, 1980000KHz clock, "
                 "2619000KHz mem clock, 52428800B L2$",
    "name": "NVIDIA H100 80GB HBM3",
    **_RECORDED_SOFTWARE,
}

# openxla/xla: xla/backends/gpu/target_config/specs/h200.txtpb (NVIDIA H200 141GB HBM3e).
_H200 = {
    **_HOPPER_COMMON,
    "memory_bandwidth": 4_800_000_000_000,  # 4.8 TB/s HBM3e
    "device_memory_size": 151_397_597_184,
    "model_str": "sm_9.0a with 151397597184B RAM, 132 cores, 1980000KHz clock, "
                 "3750000KHz mem clock, 52428800B L2$",
    "name": "NVIDIA H200 141GB HBM3e",
    **_RECORDED_SOFTWARE,
}

# --- Blackwell B200 (sm_100a: 148 SMs, 126.5 MiB L2) ---------------------------------------
# openxla/xla: xla/backends/gpu/target_config/specs/b200.txtpb (NVIDIA B200).

_B200 = {
    "shared_memory_per_core": 228 * 1024,
    "shared_memory_per_block_optin": 227 * 1024,
    "core_count": 148,
    "fpus_per_core": 128,
    "memory_bandwidth": 7_672_320_000_000,  # 7.7 TB/s HBM3e
    "l2_cache_size": 132_644_864,
    "clock_rate_ghz": 1.965,
    "device_memory_size": 191_514_411_008,
    "cuda_compute_capability": _cc(10, accelerated=True),
    "scalar_unit_description": _scalar_rates(1.965, {
        S32: (64, 1), U32: (64, 1), F16: (128, 1), F32: (128, 1), F64: (64, 1),
        BF16: (128, 1)}),
    "matrix_unit_description": _rates(1.8353101, 4, {
        S8: 2048, U8: 2048, F16: 1024, F32: 512, F64: 16, BF16: 1024,
        F8E5M2: 2048, F8E4M3FN: 2048, F8E4M3B11FNUZ: 2048, F8E5M2FNUZ: 2048,
        F8E4M3FNUZ: 2048, F8E4M3: 2048, F8E3M4: 2048, F4E2M1FN: 4096, F8E8M0FNU: 2048,
        **{k: 2048 for k in _NEWER_SMALL_FLOATS}},
        clock_overrides={F64: 1.965}),
    "device_vendor": "NVIDIA Corporation",
    "platform_version": "Compute Capability 10.0a",
    "model_str": "sm_10.0a with 191514411008B RAM, 148 cores, 1965000KHz clock, "
                 "3996000KHz mem clock, 132644864B L2$",
    "device_address_bits": 64,
    "pcie_bandwidth": 64 * 2**30,
    "ecc_enabled": True,
    "name": "NVIDIA B200",
    **_RECORDED_SOFTWARE,
    "device_interconnect_info": {"active_links": 18},  # NVLink 5: 18 links
}

_DEVICES = {
    "a100-40gb": _A100_40GB,
    "a100-80gb": _A100_80GB,
    "h100": _H100,
    "h200": _H200,
    "b200": _B200,
}

# cuDNN version each config names in dnn_version_info: the 9.10.0 its gpu_device_info records.
# XLA's specs are not consistent here (h100_sxm.txtpb records dnn_version "9.10.0" but
# dnn_version_info 8.9.4; b200.txtpb 9.7; a100_sxm_80.txtpb 8.9.4); one version for all five.
_DNN = (9, 10, 0)

GPU_TARGET_CONFIGS: dict[str, str] = {
    name: _config(device, _DNN) for name, device in _DEVICES.items()}

GPU_MEMORY_BYTES: dict[str, int] = {
    name: device["device_memory_size"] for name, device in _DEVICES.items()}
