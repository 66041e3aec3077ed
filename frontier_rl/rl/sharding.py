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


def split_meshes(data: int = -1, fsdp: int = 1, model: int = 1, rollout: int = 0,
                 rollout_model: int = 1, devices: Sequence[jax.Device] | None = None
                 ) -> tuple[Mesh, Mesh]:
    """(the trainer's mesh, the rollout mesh). With `rollout` = 0 they are one mesh over every
    device (generation and the update take turns on it). Otherwise the last `rollout` devices
    are the rollout mesh (data = rollout / rollout_model, fsdp 1, model = rollout_model: the
    sampler holds whole parameters per tensor shard, as a serving engine does) and the trainer's
    mesh is cut from the rest (data = -1 there: all of them). The sampler and the prompt-entropy
    pass run on the rollout mesh while the update runs on the other (rl.staleness >= 1), and the
    pipeline's copy of each version is a `jax.device_put` onto it (`placer`): each role on a
    mesh of its own, as tunix's RLCluster gives its actor and rollout roles."""
    if not rollout:  # make_mesh's own choice of devices when none are given
        mesh = make_mesh(data, fsdp, model, devices)
        return mesh, mesh
    devices = list(devices if devices is not None else jax.devices())
    if rollout >= len(devices):
        raise ValueError(f"mesh.rollout={rollout} leaves none of the {len(devices)} devices "
                         "to the trainer")
    if rollout % rollout_model:
        raise ValueError(f"mesh.rollout_model={rollout_model} does not divide "
                         f"mesh.rollout={rollout}")
    cut = len(devices) - rollout
    return (make_mesh(data, fsdp, model, devices[:cut]),
            make_mesh(rollout // rollout_model, 1, rollout_model, devices[cut:]))


def meshes_of(mesh_config) -> tuple[Mesh, Mesh]:
    """`split_meshes` of a config's `mesh` section: (the trainer's mesh, the rollout mesh)."""
    m = mesh_config
    return split_meshes(m["data"], m["fsdp"], m["model"], m.get("rollout", 0),
                        m.get("rollout_model", 1))


def rollout_placer(mesh: Mesh, rollout_mesh: Mesh):
    """The pipeline's copy of each version for the sampler: `placer(rollout_mesh)` with a
    rollout mesh of its own, None when it shares the trainer's (the pipeline's default copy
    on the trainer's devices)."""
    return None if rollout_mesh is mesh else placer(rollout_mesh)


def placer(mesh: Mesh):
    """`place(params)`: the parameters copied onto `mesh` in its shardings (the rollout mesh's
    sync: new buffers on its devices, so the trainer may donate its own), ready when it
    returns."""
    def place(params):
        return jax.block_until_ready(jax.device_put(params, param_shardings(params, mesh)))

    return place


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


def scaled_mesh(data: int, fsdp: int, model: int, n: int, micro_batch: int = 0
                ) -> tuple[dict[str, int], int]:
    """The mesh of a config written for another device count (a paper's 8 GPUs) on `n`
    devices (a TPU slice), and the micro-batch it then needs: ({"data", "fsdp", "model"},
    rl.micro_batch_size). A mesh that fits `n` (`mesh_shape`) is kept. Otherwise the tensor
    axis is kept where it divides `n` (else the largest divisor of both), and the rest of the
    devices shard rows: all of them on fsdp when the config shards parameters (fsdp > 1:
    each device then holds the fewest parameter bytes), on data otherwise. Every micro-batch
    splits its rows over data x fsdp, so a micro-batch is raised to the next multiple of it
    (the rows per device stay what the config gave each device, or one)."""
    try:
        d, f, m = mesh_shape(data, fsdp, model, n)
        return {"data": d, "fsdp": f, "model": m}, micro_batch
    except ValueError:
        pass
    m = model if n % model == 0 else math.gcd(model, n)
    shards = n // m
    mesh = ({"data": 1, "fsdp": shards, "model": m} if fsdp > 1
            else {"data": shards, "fsdp": 1, "model": m})
    if micro_batch:
        micro_batch = -(-micro_batch // shards) * shards
    return mesh, micro_batch


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


def _fsdp_dim(spec: PartitionSpec) -> int | None:
    """The dimension a stored spec splits over `fsdp` (None: not split over it)."""
    return next((i for i, a in enumerate(spec) if a == "fsdp"), None)


def _all_gather(x, dtype, dim: int):
    """Inside a region manual over `fsdp`: x cast to `dtype`, then all-gathered along `dim`."""
    return jax.lax.all_gather(x.astype(dtype), "fsdp", axis=dim, tiled=True)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3))
def _gather(x, dtype, compute: NamedSharding, stored: NamedSharding):
    """x cast to `dtype`, then laid out as `compute` (an all-gather over fsdp): the gather of a
    function that runs the model forward only (sampling, log-probs). The gather is made in a
    region manual over `fsdp`, after the cast, so that it moves 16-bit weights: left to XLA's
    partitioner, it gathers the stored float32 weights and casts after. Its gradient is cast
    to x's dtype and laid out as `stored`, but the sum of the rows' partial gradients is
    placed by the partitioner where the model's matmul makes it, in the matmul's (compute)
    dtype; a train step reduces its gradients in float32 by `map_rows` (`_manual_gather`)."""
    dim = _fsdp_dim(stored.spec)
    if dim is None or stored.mesh.shape["fsdp"] == 1:
        return jax.lax.with_sharding_constraint(x.astype(dtype), compute)
    manual = PartitionSpec(*(a if i == dim else None for i, a in enumerate(stored.spec)))
    gathered = jax.shard_map(functools.partial(_all_gather, dtype=dtype, dim=dim),
                             mesh=stored.mesh, in_specs=manual, out_specs=PartitionSpec(),
                             axis_names={"fsdp"}, check_vma=False)(x)
    return jax.lax.with_sharding_constraint(gathered, compute)


def _gather_fwd(x, dtype, compute, stored):
    # x's dtype rides along as a zero-size array (residuals must be arrays)
    return _gather(x, dtype, compute, stored), jnp.zeros((0,), x.dtype)


def _gather_bwd(dtype, compute, stored, like, g):
    return (jax.lax.with_sharding_constraint(g.astype(like.dtype), stored),)


_gather.defvjp(_gather_fwd, _gather_bwd)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def _manual_gather(x, dtype, dim: int | None):
    """Inside `map_rows` (a region manual over the mesh): this device's shard x of a
    weight, cast to `dtype` and all-gathered over `fsdp` along `dim` (None: not split, only
    cast). The gradient reaching it is this device's own rows' partial sum, which is cast to
    x's dtype (the float32 master weights) before it is reduce-scattered over `fsdp`: the
    devices' partial gradients are summed in float32 (their sum over `data`, and over `fsdp`
    for a weight not split over it, is shard_map's transpose, after the cast)."""
    return x.astype(dtype) if dim is None else _all_gather(x, dtype, dim)


def _manual_gather_fwd(x, dtype, dim):
    return _manual_gather(x, dtype, dim), jnp.zeros((0,), x.dtype)


def _manual_gather_bwd(dtype, dim, like, g):
    g = g.astype(like.dtype)
    if dim is not None:
        g = jax.lax.psum_scatter(g, "fsdp", scatter_dimension=dim, tiled=True)
    return (g,)


_manual_gather.defvjp(_manual_gather_fwd, _manual_gather_bwd)


def gather_params(params, mesh: Mesh, dtype=None, *, except_layers: bool = False,
                  dims: dict | None = None):
    """The parameters in the compute dtype, gathered over `fsdp` (laid out as
    stored without the `fsdp` axis: `_layouts`).

    FSDP stores each weight split over `fsdp` and gathers it to compute. Left to itself, XLA's
    partitioner contracts the split dimension where the weight lies instead, gathering every
    row's activations onto each device (a [rows, L, intermediate] float32 partial sum per MLP
    matmul): this makes the gather of the (smaller) weights explicit, after the cast so that it
    moves 16-bit weights. Casting first does not change the model's result: it casts each
    weight to the compute dtype where it uses it. A no-op when fsdp = 1 and the parameters are
    stored in the compute dtype.

    `dims`: inside `map_rows`, where `params` are this device's shards, the dimension each is
    split over `fsdp` by '/'-joined path (None: not split); the gather is then
    `_manual_gather`, whose gradient is reduced in float32. Without it, `_gather`.

    `except_layers`: the decoder layers' weights (paths under `layers/`) are left as stored,
    split over `fsdp` and uncast: a scanned model gathers them one layer at a time
    (`LayerGather`).
    """
    dtype = None if dtype is None else jnp.dtype(dtype)

    def one(path, p):
        name = _path_str(path)
        if except_layers and name.startswith("layers/"):
            return p
        if dims is not None:
            return _manual_gather(p, _cast_to(p, dtype), dims[name])
        return _gather_leaf(path, p, mesh, dtype)

    return jax.tree_util.tree_map_with_path(one, params)


def _cast_to(x, dtype):
    """The dtype parameter x is computed in: `dtype` if x is floating (None: x's own)."""
    return dtype if dtype is not None and jnp.issubdtype(x.dtype, jnp.floating) else x.dtype


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
    return _gather(x, _cast_to(x, dtype), compute, stored)


@dataclasses.dataclass(frozen=True)
class LayerGather:
    """Gathers one decoder layer's weights at a time inside a scanned layer stack (as MaxText
    does): the stack is kept split over `fsdp` as the weights are stored, and the scan's body
    gathers layer i's weights (in the compute dtype) when layer i runs, inside the layer's
    rematerialised function, so the backward pass gathers them again instead of keeping every
    layer's gathered copy. A device holds one gathered layer (two while XLA overlaps the next
    layer's gather) instead of the whole gathered model. Inside `map_rows` (`dims`: one
    layer's, by path relative to the layer) each layer's gradient is reduce-scattered in
    float32 (`_manual_gather`) as soon as the backward pass leaves it.

    Set on a merged model as `model.layer_gather` (`models.transformer`) by `gathered_model`.
    """

    mesh: Mesh
    dtype: object
    dims: dict | None = dataclasses.field(default=None, hash=False)

    def stack(self, states):
        """The layers' states stacked [layers, ...], laid out as stored (split as each
        layer's weights are), in the stored dtype."""
        stacked = jax.tree.map(lambda *ws: jnp.stack(ws), *states)
        if self.dims is not None:  # this device's shards, already as stored
            return stacked

        def one(path, x):
            return jax.lax.with_sharding_constraint(x, _layouts(path, x.shape, self.mesh, 1)[0])

        return jax.tree_util.tree_map_with_path(one, stacked)

    def layer(self, state):
        """One layer's state (paths relative to the layer) gathered for compute."""
        return gather_params(state, self.mesh, self.dtype, dims=self.dims)


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


def gathered_model(graphdef, params, mesh: Mesh, dtype=None, *, once: bool = False,
                   dims: dict | None = None):
    """The model a device function computes with: `graphdef` merged with its parameters
    gathered for compute (`gather_params`; `dims`: inside `map_rows`). A scanned model
    (`ModelConfig.scan_layers`) gathers its decoder layers one at a time as each runs
    (`LayerGather`: a train step), or, with `once`, all of them here into one stacked copy
    (`GatheredLayers`: call this before a loop that runs the model many times)."""
    from flax import nnx

    model = nnx.merge(graphdef, params)
    if not getattr(getattr(model, "cfg", None), "scan_layers", False):
        return nnx.merge(graphdef, gather_params(params, mesh, dtype, dims=dims))
    dtype = None if dtype is None else jnp.dtype(dtype)
    model = nnx.merge(graphdef, gather_params(params, mesh, dtype, except_layers=True,
                                              dims=dims))
    if dims is not None:  # one layer's, by path relative to the layer (all are shaped alike)
        dims = {k.split("/", 2)[2]: d for k, d in dims.items() if k.startswith("layers/0/")}
    gather = LayerGather(mesh, dtype, dims)
    if once:
        if dims is not None:
            raise ValueError("gathered_model: once=True gathers outside map_rows")
        stacked = gather.stack([nnx.split(layer)[1] for layer in model.layers])
        model.layer_gather = GatheredLayers(jax.tree_util.tree_map_with_path(
            lambda path, x: _gather_leaf(path, x, mesh, dtype, lead=1), stacked))
    else:
        model.layer_gather = gather
    return model


def map_rows(fn, graphdef, params, mesh: Mesh, dtype, *rows):
    """fn(model, *rows) computed by each device on its own rows, with `model` the policy of
    `graphdef` and `params` (as stored: split over `fsdp`) gathered there in `dtype` by
    `gathered_model`. `rows` are arrays whose leading axis is the batch (split over
    ('data', 'fsdp'), `batch_sharding`), and so are fn's outputs; fn must compute each row on
    its own (a policy's per-token log-probs do). The region is manual over the whole mesh
    (`model` = 1: each device runs the model as a single device would, which is also what
    lets a custom-partitioned op such as cuDNN's attention compile inside it; JAX's custom
    partitioning fails in a region manual over some axes only). With `model` > 1 (tensor
    parallelism, left to XLA's partitioner) fn runs on the gathered model outside any manual
    region, and its gradient sums are where the partitioner places them.

    A train step computes its log-probs this way so that its weight gradients are summed over
    the devices in float32: the gradient with respect to a weight gathered here is each
    device's partial sum over its own rows, and the gather's transpose (`_manual_gather`)
    casts it to the stored float32 before reducing it. Left to XLA's partitioner, the sum
    over rows would be reduced where the model's matmul makes it, in the matmul's dtype: a
    bfloat16 model's partial gradients summed in bfloat16 (XLA:CPU promotes such a reduction
    to float32, XLA:GPU does not).
    """
    if mesh.shape["model"] > 1:
        return fn(gathered_model(graphdef, params, mesh, dtype), *rows)
    fsdp = mesh.shape["fsdp"] > 1
    # each weight's `fsdp` dimension by path, from the global shapes (the local shards inside
    # the region no longer show it)
    dims = {_path_str(path): _fsdp_dim(param_spec(_path_str(path), np.shape(x), mesh))
            if fsdp else None for path, x in jax.tree_util.tree_leaves_with_path(params)}
    specs = jax.tree_util.tree_map_with_path(lambda path, x: PartitionSpec(*(
        "fsdp" if i == dims[_path_str(path)] else None for i in range(np.ndim(x)))), params)

    def local(params, *rows):
        return fn(gathered_model(graphdef, params, mesh, dtype, dims=dims), *rows)

    row = PartitionSpec(BATCH_AXES)
    return jax.shard_map(local, mesh=mesh, in_specs=(specs, *(row,) * len(rows)),
                         out_specs=row, check_vma=False)(params, *rows)


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Leading (row) axis along ('data', 'fsdp'), the rest replicated."""
    return NamedSharding(mesh, PartitionSpec(BATCH_AXES))


def stacked_batch_sharding(mesh: Mesh) -> NamedSharding:
    """Rows on axis 1 of a [slices, rows, ...] stack (minibatches, micro-batches)."""
    return NamedSharding(mesh, PartitionSpec(None, BATCH_AXES))


def kv_cache_sharding(mesh: Mesh, num_kv_heads: int, ndim: int = 5) -> NamedSharding:
    """An array of a KV cache (models.KVCache): a layer's [rows, kv_heads, ., .] (ndim 4) or
    the layers stacked [layers, rows, kv_heads, ., .] (ndim 5). Rows on the batch axes, heads on
    `model` when it divides them (the k/v projections' outputs are split the same way)."""
    heads = "model" if num_kv_heads % mesh.shape["model"] == 0 else None
    return NamedSharding(mesh, PartitionSpec(*[None] * (ndim - 4), BATCH_AXES, heads, None,
                                             None))


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


def config_section():
    """`mesh`: the device mesh, data x fsdp x model, and the rollout mesh beside it."""
    from frontier_rl.run import fields

    def rollout_needs(cfg) -> None:
        if not cfg.mesh.rollout:
            return
        fields.check(cfg, "mesh.rollout_model", lambda x: cfg.mesh.rollout % x == 0,
                     f"a divisor of mesh.rollout={cfg.mesh.rollout}")
        fields.check(cfg, "rl.staleness", lambda x: x >= 1,
                     f">= 1 with mesh.rollout={cfg.mesh.rollout} (a rollout mesh generates "
                     "while the trainer updates; synchronously its devices would wait)")

    return (fields.Section("mesh", config_section.__doc__)
            # data parallel; -1 = every device not used by fsdp x model
            .field("data", -1, lambda x: x == -1 or fields.pos_int(x),
                   "-1 (all devices) or >= 1")
            # parameters, gradients and optimizer state sharded; rows split too
            .field("fsdp", 1, fields.pos_int, "an integer >= 1")
            # tensor parallel (Megatron-style column/row splits)
            .field("model", 1, fields.pos_int, "an integer >= 1")
            # Devices of a rollout mesh of its own (0: the sampler shares the trainer's
            # devices). The last `rollout` devices generate while the rest train (rl.staleness
            # >= 1), each version copied onto them by jax.device_put (`split_meshes`);
            # mesh.data = -1 is then the trainer's rest. The engine must be in this process
            # (rollout/engines.py checks it).
            .field("rollout", 0, fields.nonneg_int,
                   "an integer >= 0 (0 = the sampler shares the trainer's devices)")
            .field("rollout_model", 1, fields.pos_int, "an integer >= 1")  # its tensor axis
            .rule(rollout_needs))
