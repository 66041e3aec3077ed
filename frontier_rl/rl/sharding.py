"""Device mesh and sharding rules.

The mesh has three named axes (`config.mesh.*`):
  * `data`: pure data parallelism; rows (sequences) are split along it, parameters replicated.
  * `fsdp`: rows are split along it too, and so are parameters, gradients and optimizer state
    (ZeRO-3 / FSDP): each weight matrix is stored split on its non-tensor-parallel dimension
    and gathered, in the compute dtype, by the device function that uses it
    (`gather_params`).
  * `model`: tensor parallelism, Megatron style. Column-parallel projections (q/k/v, gate/up,
    the LM head) split their output dimension, row-parallel ones (o, down) their input, the
    embedding its vocabulary; the attention heads, hence the KV cache, follow.

So the batch axis of every per-row array is split over ("data", "fsdp") (`batch_sharding`) and
row counts are padded to a multiple of data x fsdp (`row_multiple`). On one device every spec
is a no-op, but the rules are the ones a multi-device mesh uses, so scaling out is a change of
`config.mesh` only. Tests run them on a fake 8-device CPU mesh.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

AXES = ("data", "fsdp", "model")
BATCH_AXES = ("data", "fsdp")  # the row (batch) axis of activations, rollouts and batches

# (regex over the '/'-joined parameter path, spec). First match wins; unmatched -> replicated.
# Kernels are stored [in, out], the embedding [vocab, hidden], the LM head [hidden, vocab].
PARAM_RULES: tuple[tuple[str, PartitionSpec], ...] = (
    (r"embed_tokens/embedding$", PartitionSpec("model", "fsdp")),
    (r"lm_head/kernel$", PartitionSpec("fsdp", "model")),
    (r"(q_proj|k_proj|v_proj|gate_proj|up_proj)/kernel$", PartitionSpec("fsdp", "model")),
    (r"(q_proj|k_proj|v_proj)/bias$", PartitionSpec("model")),
    (r"(o_proj|down_proj)/kernel$", PartitionSpec("model", "fsdp")),
)


def make_mesh(data: int = -1, fsdp: int = 1, model: int = 1,
              devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A ('data', 'fsdp', 'model') mesh over `devices` (default: all of them).

    data=-1 takes every device not used by fsdp x model; otherwise data x fsdp x model must
    equal the device count.
    """
    devices = list(devices if devices is not None else jax.devices())
    shape = mesh_shape(data, fsdp, model, len(devices))
    return Mesh(np.asarray(devices).reshape(shape), AXES)


def mesh_shape(data: int, fsdp: int, model: int, n: int) -> tuple[int, int, int]:
    """(data, fsdp, model) of the mesh `make_mesh` builds over `n` devices, data=-1 resolved;
    ValueError naming the fields when they do not fit `n` (launch/run_gpu.sh checks a config
    with it before starting SGLang)."""
    for name, size in (("fsdp", fsdp), ("model", model)):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"mesh.{name}={size!r} must be an integer >= 1")
    if n % (fsdp * model):
        raise ValueError(f"mesh.fsdp={fsdp} x mesh.model={model} = {fsdp * model} does not "
                         f"divide the {n} available devices")
    if data == -1:
        data = n // (fsdp * model)
    if isinstance(data, bool) or not isinstance(data, int) or data < 1:
        raise ValueError(f"mesh.data={data!r} must be -1 (the rest) or an integer >= 1")
    if data * fsdp * model != n:
        raise ValueError(f"mesh.data={data} x mesh.fsdp={fsdp} x mesh.model={model} = "
                         f"{data * fsdp * model} != {n} available devices")
    return data, fsdp, model


def row_multiple(mesh: Mesh) -> int:
    """Row counts must be a multiple of this: the devices the batch axis is split over."""
    return mesh.shape["data"] * mesh.shape["fsdp"]


def _path_str(path) -> str:
    parts = []
    for k in path:
        for attr in ("key", "name", "idx"):
            if hasattr(k, attr):
                parts.append(str(getattr(k, attr)))
                break
    return "/".join(p for p in parts if p != "value")


def _axis_size(mesh: Mesh, axis) -> int:
    names = axis if isinstance(axis, tuple) else (axis,)
    return math.prod(mesh.shape[a] for a in names)


def _fit(spec: PartitionSpec, shape: tuple[int, ...], mesh: Mesh) -> PartitionSpec:
    """Drops axes that do not divide the dimension (tiny test models), keeping the rest."""
    if len(spec) > len(shape):
        return PartitionSpec()
    out = []
    for dim, axis in zip(shape, tuple(spec) + (None,) * (len(shape) - len(spec)), strict=True):
        out.append(axis if axis is None or dim % _axis_size(mesh, axis) == 0 else None)
    return PartitionSpec(*out)


def param_spec(name: str, shape: tuple[int, ...], mesh: Mesh) -> PartitionSpec:
    """The spec PARAM_RULES give the parameter at '/'-joined path `name`, fitted to `shape`."""
    for pattern, spec in PARAM_RULES:
        if re.search(pattern, name):
            return _fit(spec, shape, mesh)
    return PartitionSpec()


def param_shardings(params, mesh: Mesh):
    """NamedShardings for a parameter pytree (arrays or ShapeDtypeStructs), by PARAM_RULES."""

    def one(path, leaf):
        return NamedSharding(mesh, param_spec(_path_str(path), np.shape(leaf), mesh))

    return jax.tree_util.tree_map_with_path(one, params)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3))
def _gather(x, dtype, compute: NamedSharding, stored: NamedSharding):
    """x cast to `dtype`, then laid out as `compute` (an all-gather over fsdp). Its gradient is
    cast to x's dtype (float32 master weights) before it is laid out as `stored`, so the
    reduce-scatter over fsdp sums float32 partial gradients rather than 16-bit ones."""
    return jax.lax.with_sharding_constraint(x.astype(dtype), compute)


def _gather_fwd(x, dtype, compute, stored):
    # x's dtype rides along as a zero-size array (residuals must be arrays)
    return _gather(x, dtype, compute, stored), jnp.zeros((0,), x.dtype)


def _gather_bwd(dtype, compute, stored, like, g):
    return (jax.lax.with_sharding_constraint(g.astype(like.dtype), stored),)


_gather.defvjp(_gather_fwd, _gather_bwd)


def gather_params(params, mesh: Mesh, dtype=None, *, except_layers: bool = False):
    """The parameters in the compute dtype, gathered over `fsdp` (laid out as
    stored without the `fsdp` axis: `_layouts`).

    FSDP stores each weight split over `fsdp` and gathers it to compute. Left to itself, XLA's
    partitioner contracts the split dimension where the weight lies instead, gathering every
    row's activations onto each device (a [rows, L, intermediate] float32 partial sum per MLP
    matmul): this makes the gather of the (smaller) weights explicit, after the cast so that it
    moves 16-bit weights, while the gradient flowing back is reduce-scattered in the weights'
    own (float32) dtype. Casting first does not change the model's result: it casts each weight
    to the compute dtype where it uses it. A no-op when fsdp = 1 and the parameters are stored
    in the compute dtype.

    `except_layers`: the decoder layers' weights (paths under `layers/`) are left as stored,
    split over `fsdp` and uncast: a scanned model gathers them one layer at a time
    (`LayerGather`).
    """
    dtype = None if dtype is None else jnp.dtype(dtype)

    def one(path, p):
        if except_layers and _path_str(path).startswith("layers/"):
            return p
        return _gather_leaf(path, p, mesh, dtype)

    return jax.tree_util.tree_map_with_path(one, params)


def _layouts(path, shape, mesh: Mesh, lead: int = 0) -> tuple[NamedSharding, NamedSharding]:
    """(stored, compute) shardings of the parameter at `path` with `lead` leading axes added
    (a stack of layers), by PARAM_RULES: compute is stored without the `fsdp` axis."""
    spec = param_spec(_path_str(path), tuple(shape)[lead:], mesh)
    stored = PartitionSpec(*(None,) * lead, *spec)
    compute = PartitionSpec(*(None,) * lead, *(None if a == "fsdp" else a for a in spec))
    return NamedSharding(mesh, stored), NamedSharding(mesh, compute)


def _gather_leaf(path, x, mesh: Mesh, dtype, lead: int = 0):
    """One parameter (or a stack of them, `lead` axes) cast to `dtype` if floating and
    gathered for compute (`_gather`)."""
    stored, compute = _layouts(path, np.shape(x), mesh, lead)
    to = dtype if dtype is not None and jnp.issubdtype(x.dtype, jnp.floating) else x.dtype
    return _gather(x, to, compute, stored)


@dataclasses.dataclass(frozen=True)
class LayerGather:
    """Gathers one decoder layer's weights at a time inside a scanned layer stack (as MaxText
    does): the stack is kept split over `fsdp` as the weights are stored, and the scan's body
    gathers layer i's weights (in the compute dtype) when layer i runs, inside the layer's
    rematerialised function, so the backward pass gathers them again instead of keeping every
    layer's gathered copy. A device holds one gathered layer (two while XLA overlaps the next
    layer's gather) instead of the whole gathered model, and each layer's gradient is
    reduce-scattered in float32 (`_gather`) as soon as the backward pass leaves it.

    Set on a merged model as `model.layer_gather` (`models.transformer`) by `gathered_model`.
    """

    mesh: Mesh
    dtype: object

    def stack(self, states):
        """The layers' states stacked [layers, ...], laid out as stored (split as each
        layer's weights are), in the stored dtype."""

        def one(path, x):
            return jax.lax.with_sharding_constraint(x, _layouts(path, x.shape, self.mesh, 1)[0])

        stacked = jax.tree.map(lambda *ws: jnp.stack(ws), *states)
        return jax.tree_util.tree_map_with_path(one, stacked)

    def layer(self, state):
        """One layer's state (paths relative to the layer) gathered for compute."""
        return gather_params(state, self.mesh, self.dtype)


class GatheredLayers:
    """The decoder layers' weights stacked and gathered once, for a function that runs the
    model many times without a backward pass (the sampler's decode loop): one gathered copy,
    made before the loop, instead of one gather per layer per step. Same interface as
    `LayerGather`."""

    def __init__(self, stacked):
        self.stacked = stacked

    def stack(self, states):
        return self.stacked

    def layer(self, state):
        return state


def gathered_model(graphdef, params, mesh: Mesh, dtype=None, *, once: bool = False):
    """The model a device function computes with: `graphdef` merged with its parameters
    gathered for compute (`gather_params`). A scanned model (`ModelConfig.scan_layers`) gathers
    its decoder layers one at a time as each runs (`LayerGather`: a train step), or, with
    `once`, all of them here into one stacked copy (`GatheredLayers`: call this before a loop
    that runs the model many times)."""
    from flax import nnx

    model = nnx.merge(graphdef, params)
    if not getattr(getattr(model, "cfg", None), "scan_layers", False):
        return nnx.merge(graphdef, gather_params(params, mesh, dtype))
    dtype = None if dtype is None else jnp.dtype(dtype)
    model = nnx.merge(graphdef, gather_params(params, mesh, dtype, except_layers=True))
    gather = LayerGather(mesh, dtype)
    if once:
        stacked = gather.stack([nnx.split(layer)[1] for layer in model.layers])
        model.layer_gather = GatheredLayers(jax.tree_util.tree_map_with_path(
            lambda path, x: _gather_leaf(path, x, mesh, dtype, lead=1), stacked))
    else:
        model.layer_gather = gather
    return model


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Leading (row) axis along ('data', 'fsdp'), the rest replicated."""
    return NamedSharding(mesh, PartitionSpec(BATCH_AXES))


def stacked_batch_sharding(mesh: Mesh) -> NamedSharding:
    """Rows on axis 1 of a [slices, rows, ...] stack (minibatches, micro-batches)."""
    return NamedSharding(mesh, PartitionSpec(None, BATCH_AXES))


def kv_cache_sharding(mesh: Mesh, num_kv_heads: int) -> NamedSharding:
    """A KV cache [layers, rows, slots, kv_heads, head_dim]: rows on the batch axes, heads on
    `model` when it divides them (the k/v projections' outputs are split the same way)."""
    heads = "model" if num_kv_heads % mesh.shape["model"] == 0 else None
    return NamedSharding(mesh, PartitionSpec(None, BATCH_AXES, None, heads, None))


def split_rows(tree, k: int):
    """[R, ...] -> [k, R / k, ...]: slice j holds rows j, j + k, j + 2k, ... A row-sharded
    array splits without moving data when R / k is a multiple of the row shards, since every
    device then holds R / (k x shards) rows of each slice."""
    return jax.tree.map(
        lambda x: x.reshape((x.shape[0] // k, k) + x.shape[1:]).swapaxes(0, 1), tree)


def merge_rows(tree, k: int):
    """The inverse of `split_rows`."""
    return jax.tree.map(lambda x: x.swapaxes(0, 1).reshape((-1,) + x.shape[2:]), tree)


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())
