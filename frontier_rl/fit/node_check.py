"""launch/run_gpu.sh's first check of a colocated node, before it compiles or starts anything:
the whole GPU's sum (node_memory.size) for a run of CONFIG on GPUs of one kind.

  python -m frontier_rl.fit.node_check --gpu=h100 --config=CONFIG [--config.FIELD=VALUE ...]

JAX's share and SGLang's settings are read from the environment as run_gpu.sh exports them
(XLA_PYTHON_CLIENT_MEM_FRACTION, SGLANG_MEM, SGLANG_TP, SGLANG_ARGS). Prints one line; exit
status node_memory.NODE_DOES_NOT_FIT, with the advice naming both figures, when the sum
exceeds a GPU. Arithmetic on the config: nothing is compiled.
"""
from __future__ import annotations

import sys

from frontier_rl.fit import command as fit
from frontier_rl.fit import gpu_specs, node_memory


def model_params(config) -> tuple[int | None, str]:
    """(the policy's parameter count, where it came from): the config's model, else its
    model.preset's shape when model.path cannot be read here, else None."""
    from frontier_rl.models import presets

    try:
        return fit.model_config(config).num_params(), "the config's model"
    except (OSError, ValueError) as e:
        if config.model.preset:
            return (presets.preset_config(config.model.preset).num_params(),
                    f"model.preset {config.model.preset}, model.path unreadable here")
        return None, f"unknown ({type(e).__name__}: {str(e)[:200]})"


def main(argv: list[str] | None = None) -> int:
    from absl import flags
    from ml_collections import config_flags

    argv = list(sys.argv if argv is None else argv)
    values = flags.FlagValues()
    flags.DEFINE_string("gpu", None, "a key of gpu_specs.GPU_MEMORY_BYTES, e.g. h100",
                        flag_values=values)
    config = config_flags.DEFINE_config_file("config", None, flag_values=values)
    values(argv, known_only=True)
    if values.gpu not in gpu_specs.GPU_MEMORY_BYTES:
        print(f"node_check: --gpu={values.gpu!r} is not one of "
              f"{sorted(gpu_specs.GPU_MEMORY_BYTES)}", file=sys.stderr)
        return 2
    share, source = fit.mem_fraction(colocated=True)
    params, where = model_params(config.value)
    node = node_memory.size(device_bytes=gpu_specs.GPU_MEMORY_BYTES[values.gpu],
                            jax_share=share, jax_source=source, params=params)
    print(f"[node] {node_memory.summary(node)} (parameters: {where})")
    for line in node["advice"]:
        print(f"node_check: {line}", file=sys.stderr)
    return 0 if node["fits"] else node_memory.NODE_DOES_NOT_FIT


if __name__ == "__main__":
    sys.exit(main())
