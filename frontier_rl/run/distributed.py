"""One run across processes: initialisation, the host <-> global array boundary, preemption.

Multi-host JAX runs one process per host (a GPU node, a TPU VM, or, for tests, a group of fake
CPU devices), all running this same program. The design choice that makes selection simple:

* **Every process runs the same deterministic host program on the same inputs.** Device
  functions take and return *global* arrays over the whole mesh; their outputs are gathered to
  every process (`to_host`, an all-gather), so each process holds the identical rollouts,
  rewards and entropies, and the host-side selector (pure Python + numpy, seeded) makes the
  identical decision on each. Only process 0 writes files (`is_primary`). The selector state
  in a checkpoint is therefore the same whichever process wrote it.
* **What depends on the wall clock is decided once, by process 0, and broadcast**
  (`broadcast_object`): a response's reward (the verifier's timeout can fire on one host and
  not another for a borderline response) and the teacher's finished verdicts (which verdicts
  a drain returns depends on when it runs; only process 0 queries the teacher). Every other
  decision follows from these by the same seeded code on every process.
* **Agreement is checked every step**: the trainer hashes the packed batch (tokens, masks,
  advantages, old log-probs) on every process and compares the digests (`check_agree`, one
  all-gather of 8 bytes per process); processes that have diverged stop with an error naming
  the step, instead of training on different batches or hanging in a collective.
* **Host batches enter the mesh whole**: every process holds the same global numpy batch, so
  `to_global` builds the global array with `jax.make_array_from_callback`, each process
  copying out the rows its own devices hold. No data crosses hosts, and the array equals what
  one process with all the devices would have built (which is why a 2-process run's metrics
  equal a 1-process run's). `jax.make_array_from_process_local_data` would be the tool if each
  host built only its own rows; here that would need a second, partitioned batch builder for no
  saving, since packing a batch is cheap host work.

With one process both helpers are no-ops, so single-host runs are untouched.

Preemption: `Preemption` turns SIGTERM (SLURM preemption, TPU maintenance events, a plain
`kill`) into a flag the training loop reads at each step boundary, agreed across processes
(any process signalled stops all), so the run checkpoints that step and exits 0.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import signal
import sys
import threading

import jax
import numpy as np

from frontier_rl.run.errors import RunError

log = logging.getLogger("frontier_rl")

_initialized = False


def initialize(coordinator: str | None = None, num_processes: int | None = None,
               process_id: int | None = None) -> None:
    """Joins the processes of one run (`jax.distributed.initialize`); call before any JAX
    computation.

    Explicit flags win; `FRONTIER_RL_COORDINATOR`/`FRONTIER_RL_NUM_PROCESSES`/
    `FRONTIER_RL_PROCESS_ID` (set by launch/multihost_local.sh) fill in what the flags leave
    out. Otherwise JAX's own cluster detection (jax/_src/clusters/) finds the coordinator and
    ranks:

    * on a Cloud TPU VM, always, even on one host: JAX's GCE detector reads the worker list and
      rank from the VM's metadata server (no environment variable names them there), and
      orbax's checkpointer needs the distributed client;
    * in a SLURM step of more than one task. JAX would then give each process one GPU, number
      SLURM_LOCALID (its default assumes one task per GPU); here each process gets its share of
      the GPUs it sees (`slurm_local_devices`): all of them with one task per node, as
      launch/slurm.sbatch starts it.

    With none of these, one process runs alone and nothing is initialised. On the CPU,
    cross-process collectives use gloo.
    """
    global _initialized
    if _initialized:
        return
    env = os.environ
    coordinator = coordinator or env.get("FRONTIER_RL_COORDINATOR") or None
    if num_processes is None and env.get("FRONTIER_RL_NUM_PROCESSES"):
        num_processes = int(env["FRONTIER_RL_NUM_PROCESSES"])
    if process_id is None and env.get("FRONTIER_RL_PROCESS_ID"):
        process_id = int(env["FRONTIER_RL_PROCESS_ID"])
    explicit = coordinator is not None or (num_processes or 1) > 1
    tpu = on_cloud_tpu_vm(env)
    if not (explicit or tpu or _slurm_step(env) or _gke_tpu(env)):
        return
    if "cpu" in (env.get("JAX_PLATFORMS") or "").split(","):
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    kwargs = {}
    if _slurm_step(env) and not tpu:
        local = slurm_local_devices(env)
        if local is not None:
            kwargs["local_device_ids"] = local
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                               process_id=process_id, **kwargs)
    _initialized = True


def on_cloud_tpu_vm(env=None) -> bool:
    """Whether this is a Cloud TPU VM JAX will run on: libtpu installed and TPU chips on the PCI
    bus, as JAX's own start-up (`jax._src.cloud_tpu_init`) found when jax was imported, and the
    TPU backend not excluded by JAX_PLATFORMS."""
    env = os.environ if env is None else env
    platforms = (env.get("JAX_PLATFORMS") or "").split(",")
    if platforms != [""] and "tpu" not in platforms:
        return False
    try:
        from jax._src import cloud_tpu_init
    except ImportError:  # a JAX without the module: only the environment can tell
        return False
    return bool(getattr(cloud_tpu_init, "running_in_cloud_tpu_vm", False))


def _gke_tpu(env) -> bool:
    """A TPU pod on GKE, where the worker list and rank are environment variables."""
    return bool(env.get("TPU_WORKER_HOSTNAMES") or env.get("TPU_PROCESS_ADDRESSES")) and (
        env.get("TPU_WORKER_ID") is not None)


_SLURM_VARS = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID",
               "SLURM_LOCALID")  # what JAX's SlurmCluster.is_env_present requires


def _slurm_step(env) -> bool:
    """A step launched by srun with more than one task (JAX's SLURM detector applies)."""
    return all(v in env for v in _SLURM_VARS) and int(env["SLURM_NTASKS"]) > 1


def _tasks_on_node(env) -> int:
    """Tasks of this step on this node, from SLURM_STEP_TASKS_PER_NODE ("8(x2)", "2(x3),1")
    and SLURM_NODEID; else SLURM_NTASKS over the step's nodes."""
    spec = env.get("SLURM_STEP_TASKS_PER_NODE", "")
    if spec and "SLURM_NODEID" in env:
        counts = []
        for part in spec.split(","):
            n, _, rep = part.partition("(x")
            counts += [int(n)] * (int(rep.rstrip(")")) if rep else 1)
        node = int(env["SLURM_NODEID"])
        if node < len(counts):
            return counts[node]
    nodes = int(env.get("SLURM_STEP_NUM_NODES", env.get("SLURM_NNODES", "1")))
    return max(1, int(env["SLURM_NTASKS"]) // max(1, nodes))


def _visible_gpus(env) -> int:
    """NVIDIA GPUs this process may use, without starting CUDA: CUDA_VISIBLE_DEVICES (SLURM
    sets it for --gpus-per-node), else the driver's list (/proc/driver/nvidia/gpus)."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip()])
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def slurm_local_devices(env=None) -> list[int] | None:
    """The local GPU ids (`local_device_ids`) of this SLURM task: the GPUs it sees split evenly
    over the node's tasks, this task taking block SLURM_LOCALID. One task per node gets every
    GPU; one task per GPU gets [SLURM_LOCALID] (JAX's default); a task that sees fewer GPUs
    than the node has tasks (SLURM bound GPUs to tasks, --gpus-per-task) gets all it sees.
    None where JAX should decide: no NVIDIA GPU is visible (CPU, TPU) or JAX_LOCAL_DEVICE_IDS
    names them. RunError if the GPUs do not split evenly."""
    env = os.environ if env is None else env
    if env.get("JAX_LOCAL_DEVICE_IDS"):
        return None
    gpus = _visible_gpus(env)
    if gpus == 0:
        return None
    tasks, local = _tasks_on_node(env), int(env["SLURM_LOCALID"])
    if gpus < tasks:
        return list(range(gpus))
    if gpus % tasks:
        raise RunError(f"SLURM started {tasks} tasks on this node, which sees {gpus} GPUs: each "
                       "task needs the same number of GPUs (launch/slurm.sbatch runs one task "
                       "per node with all its GPUs)")
    per = gpus // tasks
    return list(range(local * per, (local + 1) * per))


def is_primary() -> bool:
    """Whether this process writes the run's files (config, metrics, caches, exports)."""
    return jax.process_index() == 0


def barrier(name: str, timeout_s: float = 1800.0) -> None:
    """Every process waits here until all arrive, through the coordination service (no device
    collective). Called before the first collective a run makes: XLA:CPU's gloo gives each new
    communicator 30 s for all its processes to connect, and process 0's own work (warm-start
    cache, records) or a loaded host can put the processes further apart than that."""
    if jax.process_count() == 1:
        return
    from jax._src import distributed as jax_distributed  # the client JAX's own tests wait on

    client = jax_distributed.global_state.client
    if client is not None:
        client.wait_at_barrier(f"frontier_rl:{name}", int(timeout_s * 1000))


def describe(mesh) -> str:
    """One line: processes, global and local devices, the mesh."""
    return (f"{jax.process_count()} process(es), {jax.device_count()} {jax.default_backend()} "
            f"devices ({jax.local_device_count()} per process), mesh {dict(mesh.shape)}")


def to_global(x, sharding):
    """A host array every process holds identically -> a global array laid out by `sharding`
    (each process fills its own devices' shards). With one process, `x` itself: jit places it."""
    if jax.process_count() == 1:
        return x
    x = np.asarray(x)
    return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])


def to_host(tree):
    """Global arrays -> the same full numpy arrays on every process (an all-gather across
    processes; `jax.device_get` with one)."""
    if jax.process_count() == 1:
        return jax.device_get(tree)
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(tree, tiled=True)


def gather(tree):
    """Arrays every process can read whole for writing a file: `tree` itself on one process,
    an all-gather (`to_host`) across several (a collective: every process calls it)."""
    return tree if jax.process_count() == 1 else to_host(tree)


def any_process(flag: bool) -> bool:
    """True on every process if `flag` is true on any."""
    if jax.process_count() == 1:
        return bool(flag)
    from jax.experimental import multihost_utils

    return bool(np.any(multihost_utils.process_allgather(np.int32(bool(flag)))))


def broadcast_object(obj):
    """Process 0's `obj` (any picklable value) on every process; `obj` itself with one process.
    A collective: every process calls it (the others' `obj` is ignored)."""
    if jax.process_count() == 1:
        return obj
    from jax.experimental import multihost_utils

    data = np.frombuffer(pickle.dumps(obj), np.uint8) if is_primary() else np.zeros(0, np.uint8)
    size = int(multihost_utils.broadcast_one_to_all(np.int64(data.size)))
    buf = data if is_primary() else np.zeros(size, np.uint8)
    return pickle.loads(np.asarray(multihost_utils.broadcast_one_to_all(buf)).tobytes())


def digest(tree) -> bytes:
    """8 bytes that change with any leaf's values, shape or dtype (leaves in tree order)."""
    h = hashlib.sha256()
    for leaf in jax.tree.leaves(tree):
        a = np.ascontiguousarray(np.asarray(leaf))
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.digest()[:8]


def check_agree(what: str, tree, step: int | None = None) -> None:
    """Stops the run (RunError, on every process) if the processes hold different `tree`s.
    A collective: every process calls it; a no-op with one process."""
    if jax.process_count() == 1:
        return
    from jax.experimental import multihost_utils

    mine = np.frombuffer(digest(tree), np.uint8)
    every = np.asarray(multihost_utils.process_allgather(mine)).reshape(jax.process_count(), -1)
    differ = [i for i in range(len(every)) if not np.array_equal(every[i], every[0])]
    if differ:
        at = "" if step is None else f" at step {step}"
        raise RunError(
            f"processes disagree on {what}{at}: process(es) {differ} differ from process 0. "
            "Every process must build the same batch; a decision made from the wall clock, "
            "a file or an unseeded random source on one host only diverges them")


class CtrlC:
    """Ctrl-C (SIGINT) raises KeyboardInterrupt as Python's own handler does, and is also
    remembered, so that one Python drops still stops the run: a KeyboardInterrupt raised inside
    a garbage-collection callback is only printed ("Exception ignored in ... _xla_gc_callback",
    measured once in 20 Ctrl-Cs on a loaded machine) and the run went on to exit 0. `check()`
    at each step boundary raises it again, and the dropped one's printout is left out (the
    run still stops in one line). Off the main thread it does nothing."""

    def __init__(self):
        self.pressed = False
        self._previous = None
        self._hook = None

    def install(self) -> CtrlC:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._hook = sys.unraisablehook
            sys.unraisablehook = self._unraisable
        return self

    def uninstall(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            sys.unraisablehook = self._hook
            self._previous = self._hook = None

    def _unraisable(self, unraisable) -> None:
        if not (self.pressed and isinstance(unraisable.exc_value, KeyboardInterrupt)):
            self._hook(unraisable)

    def _handle(self, signum, frame) -> None:
        self.pressed = True
        raise KeyboardInterrupt

    def check(self) -> None:
        if self.pressed:
            raise KeyboardInterrupt


class Preemption:
    """SIGTERM -> a flag read at step boundaries (`requested`); a second SIGTERM ends the
    process at once. `install`/`uninstall` (or `with`) set and restore the handler. Off the main
    thread (where signals cannot be caught) it only ever reports False."""

    def __init__(self):
        self._flag = threading.Event()
        self._previous = None

    def install(self) -> Preemption:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    def uninstall(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None

    __enter__ = install

    def __exit__(self, *exc) -> None:
        self.uninstall()

    def _handle(self, signum, frame) -> None:
        if self._flag.is_set():  # a second SIGTERM: stop now, the previous way
            self.uninstall()
            os.kill(os.getpid(), signal.SIGTERM)
            return
        log.warning("SIGTERM: checkpointing at the end of this step, then exiting")
        self._flag.set()

    def requested(self) -> bool:
        """Whether any process has been sent SIGTERM (a collective: call on every process)."""
        return any_process(self._flag.is_set())
