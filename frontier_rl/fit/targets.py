"""Compile targets: the GPUs and TPUs `frontier-rl fit --target=NAME` compiles a run's programs
for, with the target's own compiler and no device present (JAX's compile-only devices,
`jax.experimental.topologies`).

Names (docs/architecture.md has the table):
  GPU  `<gpu>x<N>` with N GPUs per host, e.g. `h100x8`, `h200x8`, `a100-80gbx8`, `b200x8`; the
       hosts come from `--hosts` (topology "1x<hosts>x<N>": one partition of hosts x GPUs).
       The compiler is XLA:GPU from the `jax[cuda12]` plugin, given a
       `stream_executor.GpuTargetConfigProto` (gpu_specs.py). It never fails on memory: the
       caller compares the peak with the budget.
  TPU  Cloud TPU slice names, e.g. `v4-8`, `v5e-8`, `v5e-256`, `v5p-8`, `v6e-8`: the number is
       TensorCores for v4 / v5p (two per chip, one megacore device) and chips for v5e / v6e,
       as Google Cloud names them. The compiler is libtpu's; a program over the chip's HBM
       fails to compile (RESOURCE_EXHAUSTED), as on the chip.

Nothing here starts a backend: `devices()` needs the target's compiler installed (the JAX
plugin of the target venv made by launch/target_env.sh) and is only called by `fit`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import re

from frontier_rl.fit import gpu_specs

# TPU generations: (topology prefix, chip config, HBM bytes per device, cores per chip in the
# slice name). v4 and v5p run their two TensorCores as one megacore device.
_TPU = {
    "v4": ("v4", "megacore", 32 * 2**30, 2),
    "v5e": ("v5e", "default", 16 * 2**30, 1),
    "v5p": ("v5p", "megacore", 95 * 2**30, 2),
    "v6e": ("v6e", "default", 32 * 2**30, 1),
}
# Chips of a slice -> its topology dimensions (Cloud TPU's published slice shapes).
_TPU_TOPOLOGIES = {  # chips -> topology dimensions
    "v4": {4: "2x2x1", 8: "2x2x2", 16: "2x2x4", 32: "2x4x4", 64: "4x4x4"},
    "v5p": {4: "2x2x1", 8: "2x2x2", 16: "2x2x4", 32: "2x4x4", 64: "4x4x4"},
    "v5e": {1: "1x1", 4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16",
            256: "16x16"},
    "v6e": {1: "1x1", 4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16",
            256: "16x16"},
}

# XLA flags that overlap the collectives of a sharded train step with compute (the per-layer
# gathers of LayerGather, the gradient reduce-scatters): the launch scripts export them
# (launch/env.sh) and `fit --target` compiles with them. GPU: XLA's latency-hiding scheduler
# and the pipelining of collectives out of the layer loop (XLA's GPU flag list,
# xla/debug_options_flags.cc). TPU: libtpu's asynchronous collective fusion, as MaxText's TPU
# recipes set it.
OVERLAP_FLAGS = {
    "gpu": ("--xla_gpu_enable_latency_hiding_scheduler=true",
            "--xla_gpu_enable_pipelined_all_gather=true",
            "--xla_gpu_enable_pipelined_reduce_scatter=true",
            "--xla_gpu_enable_pipelined_all_reduce=true",
            "--xla_gpu_enable_while_loop_double_buffering=true"),
    "tpu": ("--xla_tpu_enable_async_collective_fusion=true",
            "--xla_tpu_enable_async_collective_fusion_fuse_all_gather=true",
            "--xla_tpu_enable_async_collective_fusion_multiple_steps=true",
            "--xla_tpu_overlap_compute_collective_tc=true",
            "--xla_enable_async_all_gather=true"),
}

# The versions `fit --target` was tested with, per target kind. It reaches into JAX's internals
# (jax._src.cudnn.fused_attention_stablehlo.check_compute_capability,
# jax._src.lib._jax.hlo_module_cost_analysis, jax.experimental.topologies' compile-only devices)
# and passes compiler flags (OVERLAP_FLAGS), any of which another release may move or drop;
# setup.py pins JAX to this release's series.
TESTED_VERSIONS = {
    "gpu": {"jax": "0.10.2", "jaxlib": "0.10.2", "jax-cuda12-plugin": "0.10.2"},
    "tpu": {"jax": "0.10.2", "jaxlib": "0.10.2", "libtpu": "0.0.42.1"},
}


def installed_versions(kind: str) -> dict[str, str | None]:
    """{distribution: version installed in this Python (None: absent)} of TESTED_VERSIONS[kind]."""
    from importlib import metadata

    out: dict[str, str | None] = {}
    for name in TESTED_VERSIONS[kind]:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def untested_versions(kind: str) -> str:
    """One line naming each of the target compiler's packages whose installed version is not
    the tested one ("" when all are)."""
    have = installed_versions(kind)
    odd = [f"{name} {have[name] or 'absent'} (tested {want})"
           for name, want in TESTED_VERSIONS[kind].items() if have[name] != want]
    if not odd:
        return ""
    return (f"untested {kind.upper()} compiler versions: {', '.join(odd)}; the figures may "
            "differ, and fit --target relies on JAX internals of the tested release "
            "(frontier_rl/fit/targets.py TESTED_VERSIONS)")


@dataclasses.dataclass(frozen=True)
class Target:
    """One compile target: `kind` "gpu" or "tpu", `chip` (a key of gpu_specs or _TPU),
    `devices` JAX devices in all, `hosts`, HBM bytes per device."""

    name: str
    kind: str
    chip: str
    devices: int
    hosts: int
    memory_bytes: int
    topology: str  # the topology string the compiler is given

    @property
    def platform(self) -> str:
        """The JAX platform of the target (what `attention=auto` resolves against)."""
        return "gpu" if self.kind == "gpu" else "tpu"

    def compile_devices(self) -> list:
        """The target's compile-only devices (needs its compiler installed)."""
        from jax.experimental import topologies

        if self.kind == "gpu":
            topo = topologies.get_topology_desc(
                platform="cuda", target_config=gpu_specs.GPU_TARGET_CONFIGS[self.chip],
                topology=self.topology)
        else:
            prefix, chip_config, _, _ = _TPU[self.chip]
            per_host = (2, 2, 1) if self.devices >= 4 else (1, 1, 1)
            topo = topologies.get_topology_desc(
                topology_name=self.topology, platform="tpu", chip_config_name=chip_config,
                chips_per_host_bounds=per_host, num_slices=1, wrap=(False, False, False))
        devices = list(topo.devices)
        if len(devices) != self.devices:
            raise RuntimeError(f"target {self.name}: the compiler gave {len(devices)} devices "
                               f"for topology {self.topology}, expected {self.devices}")
        return devices


@contextlib.contextmanager
def compiling_for(target: Target, devices: list):
    """The context `fit` compiles a target's programs in. On a GPU target, JAX's cuDNN
    attention checks the compute capability of the *local* GPU at trace time
    (jax/_src/cudnn/fused_attention_stablehlo.py, `check_compute_capability`); with no local
    GPU it answers "older than every requirement", which limits head dims to 128 and refuses
    Hopper-only layouts. For the compile it answers for the target's devices instead (their
    `compute_capability`, e.g. "9.0" on an H100), and restores JAX's check after. Not
    modelled by a compile without the device: cuDNN's own shape validation and its workspace
    (XLA runs its cuDNN passes only with a device), so a cuDNN kernel's workspace is counted
    as 0 bytes."""
    if target.kind != "gpu":
        yield
        return
    from jax._src.cudnn import fused_attention_stablehlo as fa

    have = tuple(int(x) for x in str(getattr(devices[0], "compute_capability", "0.0"))
                 .split("."))
    original = fa.check_compute_capability
    fa.check_compute_capability = lambda cap: have >= tuple(int(x) for x in cap.split("."))
    try:
        yield
    finally:
        fa.check_compute_capability = original


def names() -> list[str]:
    """Examples of every kind of name `parse` takes (the docs' table)."""
    gpus = [f"{g}x8" for g in gpu_specs.GPU_TARGET_CONFIGS]
    tpus = [f"{g}-{n}" for g, n in (("v4", 8), ("v5e", 8), ("v5e", 256), ("v5p", 8),
                                    ("v6e", 8))]
    return gpus + tpus


def parse(name: str, hosts: int = 1) -> Target:
    """The target called `name` (see the module docstring); ValueError naming the known ones."""
    name = name.strip().lower()
    m = re.fullmatch(r"(v4|v5e|v5p|v6e)-(\d+)", name)
    if m:
        gen, count = m.group(1), int(m.group(2))
        prefix, _, hbm, cores = _TPU[gen]
        if count % cores:
            raise ValueError(f"--target={name}: a {gen} slice counts {cores} cores per chip")
        chips = count // cores
        dims = _TPU_TOPOLOGIES[gen].get(chips)
        if dims is None:
            raise ValueError(f"--target={name}: {chips} {gen} chips is not a slice this table "
                             f"knows ({sorted(_TPU_TOPOLOGIES[gen])} chips)")
        if hosts != 1:
            raise ValueError(f"--hosts={hosts}: a TPU slice's name gives its hosts; leave "
                             "--hosts at 1")
        # compile-only topologies are described as hosts of 2x2x1 chips
        return Target(name, "tpu", gen, chips, max(1, chips // 4), hbm, f"{prefix}:{dims}")
    m = re.fullmatch(r"([a-z0-9-]+?)(?:x(\d+))?", name)
    if m and m.group(1) in gpu_specs.GPU_TARGET_CONFIGS:
        per_host = int(m.group(2) or 1)
        if not 1 <= per_host <= 16:
            raise ValueError(f"--target={name}: {per_host} GPUs per host (1-16)")
        if not isinstance(hosts, int) or hosts < 1:
            raise ValueError(f"--hosts={hosts!r} must be an integer >= 1")
        chip = m.group(1)
        return Target(name if hosts == 1 else f"{name} x {hosts} hosts", "gpu", chip,
                      per_host * hosts, hosts, gpu_specs.GPU_MEMORY_BYTES[chip],
                      f"1x{hosts}x{per_host}")
    raise ValueError(f"--target={name!r} is not a known target: GPUs "
                     f"{sorted(gpu_specs.GPU_TARGET_CONFIGS)} as <gpu>x<gpus per host> "
                     "(e.g. h100x8, with --hosts for more hosts), TPU slices "
                     f"{sorted(_TPU)} as <generation>-<count> (e.g. v5e-8, v5p-8)")


def compiler_installed(kind: str) -> bool:
    """Whether this Python has the target's compiler (JAX's CUDA plugin, or libtpu)."""
    import importlib.util

    mods = ("jax_cuda12_plugin", "jax_cuda13_plugin") if kind == "gpu" else ("libtpu",)
    return any(importlib.util.find_spec(m) is not None for m in mods)


def gpu_name_to_target(gpu_name: str) -> str:
    """The target chip of an `nvidia-smi --query-gpu=name` line, e.g. "NVIDIA H100 80GB HBM3"
    -> "h100"; ValueError when the table has no such GPU."""
    s = gpu_name.lower()
    for key, pattern in (("b200", r"b200"), ("h200", r"h200"), ("h100", r"h100"),
                         ("a100-80gb", r"a100.*80"), ("a100-40gb", r"a100")):
        if re.search(pattern, s) and key in gpu_specs.GPU_TARGET_CONFIGS:
            return key
    raise ValueError(f"no compile target for GPU {gpu_name!r}: known "
                     f"{sorted(gpu_specs.GPU_TARGET_CONFIGS)}")


def gib(n: float) -> float:
    return n / 2**30 if math.isfinite(n) else n


_COLLECTIVE = re.compile(
    r"=\s+(?P<shape>.+?)\s+(?P<op>all-gather|all-reduce|reduce-scatter|all-to-all|"
    r"collective-permute)(?:-start)?\(")
_DTYPE = re.compile(r"\b(pred|[su](?:4|8|16|32|64)|bf16|f16|f32|f64|f8e\w+?)\[")


def collectives(hlo_text: str) -> dict[str, int]:
    """{"<op> <dtype>": count} of the collectives in a compiled program's HLO text (an
    asynchronous pair counted once, at its start)."""
    out: dict[str, int] = {}
    for line in hlo_text.splitlines():
        m = _COLLECTIVE.search(line)
        if not m:
            continue
        for dtype in sorted(set(_DTYPE.findall(m.group("shape")))) or ["?"]:
            key = f"{m.group('op')} {dtype}"
            out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def flops(compiled, kind: str) -> float:
    """XLA's cost-analysis FLOPs of a compiled program (per device; a loop body counted once).
    A compile-only GPU executable reports no cost analysis, so XLA's HLO cost analysis is run
    on its optimised module with the CPU client. NaN when neither is available."""
    try:
        if kind == "gpu":
            import jax
            from jax._src.lib import _jax

            module = compiled.runtime_executable().hlo_modules()[0]
            cost = _jax.hlo_module_cost_analysis(jax.devices("cpu")[0].client, module)
        else:
            cost = compiled.cost_analysis()
            cost = cost[0] if isinstance(cost, (list, tuple)) else cost
        return float(cost.get("flops", math.nan)) if cost else math.nan
    except Exception:  # a private API that moved: the figure is informative only
        return math.nan


def measure(compiled, kind: str) -> dict:
    """What `fit --target` reports of one compiled program, per device: peak bytes (the
    compiler's own figure: live buffers at the worst point of its schedule), arguments,
    outputs, donated aliases, temporaries, FLOPs and collectives by kind and dtype."""
    ma = compiled.memory_analysis()
    return {"peak": int(getattr(ma, "peak_memory_in_bytes", 0) or 0),
            "arguments": int(ma.argument_size_in_bytes), "outputs": int(ma.output_size_in_bytes),
            "aliased": int(ma.alias_size_in_bytes), "temporaries": int(ma.temp_size_in_bytes),
            "flops": flops(compiled, kind), "collectives": collectives(compiled.as_text())}


def estimate_device(target: Target) -> str:
    """The perf.DEVICE_BYTES entry `fit`'s CPU estimate uses for a target whose compiler is
    not installed."""
    return {"a100-40gb": "a100", "a100-80gb": "a100"}.get(target.chip, target.chip)


def target_python(kind: str) -> str | None:
    """The Python of the target compiler's virtualenv (launch/target_env.sh): the
    FRONTIER_RL_TARGET_PYTHON it exported, else the one it makes for this JAX version; None
    when there is none."""
    import os

    import jax

    explicit = os.environ.get("FRONTIER_RL_TARGET_PYTHON", "")
    cache = os.environ.get("FRONTIER_RL_TARGET_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "frontier_rl")
    for path in (explicit, os.path.join(cache, f"venv-target-{kind}-jax{jax.__version__}",
                                        "bin", "python")):
        if path and f"-{kind}-" in path and os.access(path, os.X_OK):
            return path
    return None


def set_overlap_flags(kind: str, env) -> None:
    """Adds OVERLAP_FLAGS[kind] to XLA_FLAGS (GPU) or LIBTPU_INIT_ARGS (TPU) in `env`, keeping
    any flag already set there."""
    var = "XLA_FLAGS" if kind == "gpu" else "LIBTPU_INIT_ARGS"
    have = env.get(var, "")
    names = {f.split("=", 1)[0] for f in have.split()}
    extra = [f for f in OVERLAP_FLAGS[kind] if f.split("=", 1)[0] not in names]
    env[var] = " ".join([have, *extra]).strip()
