"""Device mesh and sharding rules.

The mesh has two named axes: `data` (the batch is split along it) and `model` (weight matrices
are split along their hidden/intermediate dimension, Megatron style). On one CPU both have size
1 and every spec is a no-op, but the rules are the ones a multi-device mesh uses, so scaling out
is a change of `config.mesh` only. Tests run them on a fake 4-device CPU mesh.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

# (regex over the '/'-joined parameter path, spec). First match wins; unmatched -> replicated.
PARAM_RULES: tuple[tuple[str, PartitionSpec], ...] = (
    (r"embed_tokens/embedding$", PartitionSpec("model", None)),
    (r"lm_head/kernel$", PartitionSpec(None, "model")),
    (r"(q_proj|k_proj|v_proj|gate_proj|up_proj)/kernel$", PartitionSpec(None, "model")),
    (r"(q_proj|k_proj|v_proj)/bias$", PartitionSpec("model")),
    (r"(o_proj|down_proj)/kernel$", PartitionSpec("model", None)),
)


def make_mesh(data: int = -1, model: int = 1, devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A ('data', 'model') mesh; data=-1 takes every device not used by `model`."""
    devices = list(devices if devices is not None else jax.devices())
    if model < 1 or len(devices) % model:
        raise ValueError(f"mesh.model={model} does not divide the {len(devices)} devices")
    if data == -1:
        data = len(devices) // model
    if data * model != len(devices):
        raise ValueError(
            f"mesh.data={data} x mesh.model={model} != {len(devices)} available devices"
        )
    return Mesh(np.asarray(devices).reshape(data, model), ("data", "model"))


def _path_str(path) -> str:
    parts = []
    for k in path:
        for attr in ("key", "name", "idx"):
            if hasattr(k, attr):
                parts.append(str(getattr(k, attr)))
                break
    return "/".join(p for p in parts if p != "value")


def _fit(spec: PartitionSpec, shape: tuple[int, ...], mesh: Mesh) -> PartitionSpec:
    """Drops axes that do not divide the dimension (tiny test models), keeping the rest."""
    if len(spec) > len(shape):
        return PartitionSpec()
    out = []
    for dim, axis in zip(shape, tuple(spec) + (None,) * (len(shape) - len(spec)), strict=True):
        out.append(axis if axis is None or dim % mesh.shape[axis] == 0 else None)
    return PartitionSpec(*out)


def param_shardings(params, mesh: Mesh):
    """NamedShardings for a parameter pytree, following PARAM_RULES."""

    def one(path, leaf):
        name = _path_str(path)
        for pattern, spec in PARAM_RULES:
            if re.search(pattern, name):
                return NamedSharding(mesh, _fit(spec, np.shape(leaf), mesh))
        return NamedSharding(mesh, PartitionSpec())

    return jax.tree_util.tree_map_with_path(one, params)


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Leading (row) axis along `data`, the rest replicated."""
    return NamedSharding(mesh, PartitionSpec("data"))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())
