"""Command line: `frontier-rl <command> [flags]` (also `python -m frontier_rl ...`).

Commands:
  train    --config=configs/<exp>.py[:arg] --workdir=DIR [--config.<field>=value ...]
           [--coordinator=HOST:PORT --num_processes=P --process_id=I]   (one of P processes;
           SLURM and TPU pods need none of these; launch/ has the scripts)
  compare  --config=configs/compare_arith.py[:arg] --workdir=DIR   (matched-budget comparison)
  sim      --config=configs/sim_<exp>.py[:arg] [--workdir=DIR]       (the synthetic learner)
  sim      calibrate --workdir=DIR --fit=uniform,oracle --predict=hive,oracle_negative
           [--update=adam|sgd|adam,sgd] [--sim_seeds=5]   (fits the learner's update rule to a
           finished comparison's curves, predicts the held-out arms: DIR/calibration.json)
  bench    sampler | train_step | entropy | flops  [--bench_config=default] [--repeats=N] [--json]
           (train_step --bench_config=realistic: each batch layout on drawn response lengths)
  bench    packed [--repeats=N] [--json]   (packed vs one-per-row attention: errors, times)
  bench    warmstart --config=configs/compare_arith.py [--seeds=0-9] [--json] [--workdir=DIR]
  bench    selection --selector=NAME [--sizes=10000,100000,1000000] [--json]
  bench    engine --config=configs/arith_grpo.py --workdir=DIR [--repeats=N] [--json]
           (step time embedded vs through `frontier-rl serve`; identical metrics checked)
  bench    sync --bench_config=qwen2.5-0.5b [--repeats=N] [--json] [--workdir=DIR]
  bench    staleness --config=configs/compare_arith.py --workdir=DIR [--repeats=N] [--json]
           [--pin_cores]
           (seconds per weight sync to `frontier-rl serve`, by phase, old path vs new)
  fit      --config=configs/scale.py:<preset> [--mesh=data=D,fsdp=F,model=M]
           [--device=h100|h200|a100|b200|v4|v5e|v5p|v6e] [--json]
           (memory per device, no device needed)
           [--target=h100x8|a100-80gbx8|h200x8|b200x8|v5e-8|v5p-8|... [--hosts=N]]
           (every program compiled by the target's own GPU / TPU compiler; exit 3: does not
           fit, the whole GPU included beside an external engine; exit 4: a compile error other
           than the compiler's refusal of a program over the device's memory)
           [--propose=false] [--apply=PATH]   (a run that does not fit: the smallest change
           of its knobs that fits, as --config. overrides; --apply writes a config copy with it)
  export   --workdir=DIR [--step=N] --out=HF_DIR   (a Hugging Face checkpoint of the policy)
  eval     --config=configs/<exp>.py[:arg] --workdir=DIR [--step=N | --model=HF_DIR]
           (the per-benchmark table of eval.sets -> DIR/eval/<step_N|model>/eval.md, .json)
  data     prepare --src=FILE.parquet|.jsonl --name=NAME [--data_dir=DIR]   (a TFDS corpus)
  serve    --model=HF_DIR | --workdir=DIR [--port=P]   (the JAX sampler over SGLang's HTTP API)
  start    --config=configs/compare_arith.py --seeds=N --out=DIR   (a testbed's shipped starting
           point: warm-started as a run would be, written with its files' digests; says
           whether it is in the regime and whether it equals the start already at DIR)
  protocol --config=configs/<paper config>.py[:arg]   (each protocol setting, its value and
           source: paper, code (a released file), follows (GRESO for HIVE) or ours (a reason))

Any config leaf can be overridden on the command line, e.g. `--config.rl.learning_rate=3e-4`.
`train` and `compare` hold DIR/.lock while they run (run/lock.py); --break_lock takes over one that
another host left. Errors are one line, without a traceback: exit 2 for an unknown command or
a config file that does not load, 130 for Ctrl-C, 1 for the rest (fit adds 3 and 4, above).
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
import traceback

from absl import app, flags
from absl import logging as absl_logging
from ml_collections import config_flags

from frontier_rl.run.errors import RunError

COMMANDS = ("train", "compare", "sim", "bench", "fit", "export", "eval", "data", "serve",
            "protocol", "start")

FLAGS = flags.FLAGS
config_flags.DEFINE_config_file("config", None, "Experiment config file (configs/<exp>.py[:arg]).",
                                lock_config=True)
flags.DEFINE_string("workdir", None, "Run directory: checkpoints, metrics.jsonl, TensorBoard.")
flags.DEFINE_bool("allow_config_change", False,
                  "train: resume a run (or use a cached warm start) made with another config, "
                  "recording the change in DIR/config_changes.jsonl, instead of stopping.")
flags.DEFINE_bool("break_lock", False,
                  "train, compare: take over a workdir lock (DIR/.lock) that names another "
                  "host, which this host cannot check; only once that run is known to be gone.")
flags.DEFINE_bool("report_only", False,
                  "compare: write results.json and report.md from the finished runs, running "
                  "nothing (a report made again by newer code).")
flags.DEFINE_bool("detach", False,
                  "compare: return once the launcher has started every run elsewhere "
                  "(compare.launcher='slurm': the jobs are submitted); rerun to follow them.")
flags.DEFINE_bool("dry_run", False,
                  "compare: print what the launcher would execute (for SLURM, each run's "
                  "batch script) and run nothing.")
flags.DEFINE_bool("json", False, "bench: print the figures as one JSON object on the last line.")
flags.DEFINE_integer("repeats", 10, "bench: timed repetitions after warm-up.")
flags.DEFINE_bool("pin_cores", False, "bench staleness with a server it starts: the server on "
                  "the last CPU core, the trainer on the others.")
flags.DEFINE_string("bench_config", "default", "bench: the named work to time.")
flags.DEFINE_string("selector", "uniform", "bench selection: the registered selector to time.")
flags.DEFINE_string("seeds", "0-9", "bench warmstart: seeds, e.g. 0-9 or 0,2,5; start: one seed.")
flags.DEFINE_list("sizes", ["10000", "100000", "1000000"], "bench selection: pool sizes.")
flags.DEFINE_string("mesh", "", "fit: the mesh, e.g. data=1,fsdp=8 (default: the config's).")
flags.DEFINE_string("device", "h100", "fit: the device whose memory to compare with.")
flags.DEFINE_string("target", "", "fit: compile with this target's own compiler, e.g. h100x8, "
                    "h200x8, v5e-8, v5p-8 (frontier_rl/fit/targets.py); default: CPU estimate.")
flags.DEFINE_integer("hosts", 1, "fit --target: GPU hosts (e.g. 2 x h100x8).")
flags.DEFINE_bool("propose", True, "fit: when a program does not fit, search the run's knobs "
                  "for the smallest change that fits and print it (frontier_rl/fit/propose.py).")
flags.DEFINE_string("apply", "", "fit: write the proposal, when one fits, as a config copy at "
                    "this path (it loads --config and sets the command line's overrides and "
                    "the proposal's).")
flags.DEFINE_integer("step", None, "export: the checkpoint step (default: the newest).")
flags.DEFINE_string("out", None, "export: the output directory; start: the start's directory.")
flags.DEFINE_string("model", None, "eval: a Hugging Face checkpoint directory to evaluate.")
flags.DEFINE_string("src", None, "data prepare: the corpus file (.parquet or .jsonl).")
flags.DEFINE_string("name", None, "data prepare: the TFDS dataset name to write.")
flags.DEFINE_string("data_dir", None, "data prepare: the TFDS data dir (~/tensorflow_datasets).")
flags.DEFINE_string("coordinator", None, "train, multi-process: host:port of process 0 (not "
                    "needed under SLURM or on a TPU pod, where JAX finds it).")
flags.DEFINE_integer("num_processes", None, "train, multi-process: how many processes.")
flags.DEFINE_integer("process_id", None, "train, multi-process: this process's rank.")
flags.DEFINE_list("fit", ["uniform", "oracle"], "sim calibrate: the arms whose curves the "
                  "learner's update rule is fitted to.")
flags.DEFINE_list("predict", [], "sim calibrate: the held-out arms to predict.")
flags.DEFINE_list("update", ["adam"], "sim calibrate: the learner's update rules to fit "
                  "(adam, sgd or both).")
flags.DEFINE_integer("sim_seeds", 5, "sim calibrate: learner seeds per setting and arm.")
flags.DEFINE_integer("port", 30000, "serve: the port to listen on.")
flags.DEFINE_string("host", "127.0.0.1", "serve: the address to listen on.")


def _train(argv: list[str]) -> int:
    from frontier_rl import train
    from frontier_rl.run import distributed

    distributed.initialize(FLAGS.coordinator, FLAGS.num_processes, FLAGS.process_id)
    if FLAGS.config is None:
        raise RunError("--config is required (e.g. --config=configs/arith_grpo.py)")
    if "compare" in FLAGS.config:
        raise RunError(
            "this config is a comparison (it has compare.*): run it with `frontier-rl "
            "compare`; `train` would train its base alone and ignore compare.*")
    train.run(FLAGS.config, FLAGS.workdir, allow_config_change=FLAGS.allow_config_change)
    return 0


def _compare(argv: list[str]) -> int:
    from frontier_rl.experiment import compare

    if FLAGS.config is None:
        raise RunError("--config is required (e.g. --config=configs/compare_arith.py)")
    compare.run(FLAGS.config, FLAGS.workdir, report_only=FLAGS.report_only,
                detach=FLAGS.detach, dry_run=FLAGS.dry_run)
    return 0


def _start(argv: list[str]) -> int:
    from frontier_rl.experiment import starts

    if FLAGS.config is None:
        raise RunError("--config is required (e.g. --config=configs/compare_arith.py)")
    if not FLAGS.seeds.isdigit():
        raise RunError(f"--seeds={FLAGS.seeds!r}: start makes one start, from one "
                       "seed (e.g. --seeds=0)")
    starts.make(FLAGS.config, int(FLAGS.seeds), FLAGS.out)
    return 0


def _sim(argv: list[str]) -> int:
    from frontier_rl.sim import run as sim_run

    if len(argv) > 2:
        if argv[2] != "calibrate":
            raise RunError(f"sim has one subcommand, calibrate; got {argv[2]!r}")
        from frontier_rl.sim import calibrate

        calibrate.main(FLAGS.workdir, FLAGS.fit, FLAGS.predict, FLAGS.update, FLAGS.sim_seeds)
        return 0
    if FLAGS.config is None:
        raise RunError("--config is required (e.g. --config=configs/sim_heapa.py)")
    if "controls" in FLAGS.config:  # headroom, harm, HIVE/DS (sim/controls.py)
        from frontier_rl.sim import controls as sim_controls

        sim_controls.main(FLAGS.config, FLAGS.workdir)
    else:
        sim_run.main(FLAGS.config, FLAGS.workdir)
    return 0


def _bench(argv: list[str]) -> int:
    from frontier_rl.bench import command as bench_command

    bench_command.main(argv[2] if len(argv) > 2 else None, FLAGS)
    return 0


def _fit(argv: list[str]) -> int:
    from frontier_rl.fit import command as fit
    from frontier_rl.fit import propose as fit_propose

    if FLAGS.config is None:
        raise RunError("--config is required (e.g. --config=configs/scale.py:"
                       "qwen2.5-math-1.5b)")
    report = fit.main(
        FLAGS.config, FLAGS.mesh, FLAGS.device, FLAGS.json, target=FLAGS.target,
        hosts=FLAGS.hosts, after=fit_propose.hook(
            search=FLAGS.propose, apply=FLAGS.apply,
            source=(config_flags.get_config_filename(FLAGS["config"]),
                    config_flags.get_override_values(FLAGS["config"])),
            command=shlex.join(["frontier-rl", *sys.argv[1:]])))
    if report.get("error_kind") == fit.COMPILE_ERROR:
        return 4  # an error of the run, not a memory verdict
    if FLAGS.target and not report["fits"]:
        return 3  # launch/run_gpu.sh stops on it
    return 0


def _eval(argv: list[str]) -> int:
    from frontier_rl.evaluation import suite as eval_suite

    if FLAGS.config is None:
        raise RunError("--config is required (e.g. --config=configs/math_grpo.py)")
    eval_suite.run(FLAGS.config, FLAGS.workdir, step=FLAGS.step, model=FLAGS.model)
    return 0


def _data(argv: list[str]) -> int:
    from frontier_rl import data

    if len(argv) < 3 or argv[2] != "prepare":
        raise RunError("data needs a subcommand: data prepare --src=FILE --name=NAME")
    data.main(FLAGS.src, FLAGS.name, FLAGS.data_dir)
    return 0


def _serve(argv: list[str]) -> int:
    from frontier_rl.rollout import serve

    serve.main(FLAGS.model, FLAGS.workdir, FLAGS.port, FLAGS.host)
    return 0


def _protocol(argv: list[str]) -> int:
    from frontier_rl.experiment import protocol

    if FLAGS.config is None or not FLAGS.config.get("protocol"):
        raise RunError("--config must be a paper config (configs/math_*.py, "
                       "compare_math.py; not :smoke): only those carry sources")
    from frontier_rl.experiment import hub_fetch

    print(protocol.table(FLAGS.config) + hub_fetch.hub_table(FLAGS.config))
    return 0


def _export(argv: list[str]) -> int:
    from frontier_rl import policy

    if not FLAGS.workdir:
        raise RunError("--workdir is required (the run directory to export)")
    out = policy.export_run(FLAGS.workdir, FLAGS.out, FLAGS.step)
    print(f"exported {FLAGS.workdir} to {out}")
    return 0


# Each command's run: argv -> exit status (cli.py's docstring lists the commands' flags).
_RUNS = {"train": _train, "compare": _compare, "sim": _sim, "bench": _bench, "fit": _fit,
         "export": _export, "eval": _eval, "data": _data, "serve": _serve,
         "protocol": _protocol, "start": _start}


def _main(argv: list[str]) -> int:
    from frontier_rl import config_lib, train
    from frontier_rl.experiment.workers import Interrupted
    from frontier_rl.run import lock

    if len(argv) < 2 or argv[1] not in COMMANDS:
        print(f"usage: frontier-rl {{{'|'.join(COMMANDS)}}} [flags]; see --help", file=sys.stderr)
        return 2
    command = argv[1]
    if FLAGS.break_lock:  # read by lock.hold here and in a comparison's worker processes
        os.environ[lock.BREAK_ENV] = "1"
    try:
        return _RUNS[command](argv)
    except Interrupted as e:  # Ctrl-C in a comparison of worker processes: each checkpointed
        print(f"frontier-rl {command}: {e}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print(f"frontier-rl {command}: {_interrupted(command)}", file=sys.stderr)
        return 130
    except (config_lib.ConfigError, train.RunError, FileNotFoundError, ValueError) as e:
        print(f"frontier-rl {command}: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # a full disk, a quota, a permission, outside a training step
        from frontier_rl.run import checkpoint

        where = f" ({e.filename})" if e.filename else ""
        print(f"frontier-rl {command}: error: {checkpoint.failure_reason(e)}{where}",
              file=sys.stderr)
        return 1
    except MemoryError:
        print(f"frontier-rl {command}: error: out of host memory; lower the config's sizes "
              "(rl.batch_size, rl.group_size, rollout.max_new_tokens)", file=sys.stderr)
        return 1


def _interrupted(command: str) -> str:
    """What Ctrl-C in this process (not a comparison's workers) leaves: the step in progress is
    lost, every checkpoint written before it is kept."""
    if command not in ("train", "compare") or not FLAGS.workdir:
        return "interrupted"
    where = ("the newest checkpoint in" if command == "train"
             else "each run's newest checkpoint under")
    return (f"interrupted; {where} {os.path.abspath(FLAGS.workdir)} is kept; the same command "
            "resumes from it")


def _flag(argv: list[str], name: str) -> str:
    for arg in argv:
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
    return ""


def _fit_on_target(argv: list[str]) -> None:
    """`fit --target`: the target's compiler lives in a virtualenv of its own
    (launch/target_env.sh), never in the trainer's. When this Python lacks it and that
    virtualenv exists, `fit` re-runs there (on this checkout's code); otherwise `fit` says so
    and falls back to the CPU estimate. The launch scripts' overlap flags are set for the
    target's compiler before JAX starts, so the programs compiled are the ones a run builds."""
    from frontier_rl.fit import targets  # imports nothing that starts JAX

    # Compile-only devices: the default backend stays the CPU (a CUDA plugin asked to start
    # would look for a driver).
    os.environ["JAX_PLATFORMS"] = "cpu"

    target = targets.parse(_flag(argv, "target"), int(_flag(argv, "hosts") or 1))
    if not targets.compiler_installed(target.kind):
        python = targets.target_python(target.kind)
        venv = os.path.dirname(os.path.dirname(python)) if python else ""
        if python and os.path.abspath(venv) != os.path.abspath(sys.prefix):
            root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                filter(None, [root, os.environ.get("PYTHONPATH", "")]))}
            print(f"fit: compiling for {target.name} with the {target.kind.upper()} compiler "
                  f"of {venv}", flush=True)
            os.execve(python, [python, "-m", "frontier_rl.cli", *argv[1:]], env)
    targets.set_overlap_flags(target.kind, os.environ)
    if target.kind == "tpu":  # no TPU VM here: keep libtpu from probing for one
        os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v5litepod-8")
        os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
        # libtpu takes a machine-wide lockfile (/tmp/libtpu_lockfile) for the chips it would
        # drive; compile-only devices drive none, so several TPU fits may run at once
        os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    os.environ.setdefault("FRONTIER_RL_FIT_TARGET_DEVICES", str(target.devices))


def _fake_devices_for_fit(argv: list[str]) -> None:
    """`fit` sizes a mesh of fake CPU devices: create them before JAX starts."""
    if len(argv) < 2 or argv[1] != "fit":
        return
    from frontier_rl.fit.command import devices_needed  # imports nothing that starts JAX

    n = devices_needed(argv) or 8
    if _flag(argv, "target"):
        _fit_on_target(argv)
        n = max(n, int(os.environ["FRONTIER_RL_FIT_TARGET_DEVICES"]))
    flags_env = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags_env:
        os.environ["XLA_FLAGS"] = (f"{flags_env} "
                                   f"--xla_force_host_platform_device_count={n}").strip()
    os.environ["JAX_PLATFORMS"] = "cpu"


def _config_file_error(error: BaseException, argv: list[str]) -> str | None:
    """The one line for an error raised by the --config file's own code (it does not compile,
    raises while it is imported or in get_config, or has no get_config), else None. The error
    may come wrapped: config_flags re-raises a config's ValueError and TypeError with the
    traceback as text, and absl wraps that in turn."""
    given = _flag(argv, "config").split(":", 1)[0]
    if not given:
        return None
    path = os.path.realpath(given)
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, SyntaxError) and e.filename and os.path.realpath(e.filename) == path:
            return f"config file {given} line {e.lineno}: {e.msg}"
        frames = traceback.extract_tb(e.__traceback__)
        lines = [f.lineno for f in frames if os.path.realpath(f.filename) == path]
        if lines and isinstance(e, ValueError):  # the config's own check: its words suffice
            return str(e) if str(e).startswith(given) else f"config file {given}: {e}"
        if lines:
            return f"config file {given} line {lines[-1]}: {type(e).__name__}: {e}"
        if (isinstance(e, AttributeError) and "get_config" in str(e)
                and any(f.name == "parse" and "config_flags" in f.filename for f in frames)):
            return (f"config file {given} has no get_config(arg=None) function (see "
                    "configs/arith_grpo.py)")
        e = e.__cause__ or e.__context__
    return None


def _parse_flags(argv: list[str]) -> list[str]:
    """absl's flag parsing, with a mistake in a flag or a config override (an unknown field, a
    missing config file, a value of the wrong type) ending in one line, not a traceback. A
    config file that cannot be loaded is a usage error (exit 2) naming the file and line."""
    command = argv[1] if len(argv) > 1 else ""
    try:
        rest = FLAGS(argv)
        if FLAGS["config"].present:  # config_flags reports a bad file lazily: fail here
            _ = "seed" in FLAGS.config
        return rest
    except Exception as e:  # a config file's code may raise anything
        message = _config_file_error(e, argv)
        if message is not None:
            print(f"frontier-rl {command}: error: {message}", file=sys.stderr)
            sys.exit(2)
        if isinstance(e, flags.Error):
            message = str(e)
        elif isinstance(e, (AttributeError, KeyError, TypeError, ValueError, OSError)):
            message = str(e).strip("\"'")
            if isinstance(e, (AttributeError, KeyError)):
                overrides = [a.split("=", 1)[0][2:] for a in argv[2:]
                             if a.startswith("--config.")]
                bad = next((o for o in overrides if o.split(".")[-1] == message),
                           next((o for o in overrides if f".{message}." in f"{o}."), ""))
                message = (f"--{bad or 'config.' + message}: no such field ({message!r} is not "
                           "in the config); see the config file for its fields")
        else:
            raise
    lines = [line.strip() for line in message.splitlines() if line.strip()] or [message]
    first = lines[0] if not lines[0].endswith(":") else f"{lines[0]} {lines[-1]}"
    if "No such file or directory" in message or "Attempted" in message:
        path = _flag(argv, "config").split(":", 1)[0]
        first = f"--config={path}: no such config file"
    print(f"frontier-rl {command}: error: {first}", file=sys.stderr)
    sys.exit(1)


def main() -> None:
    from frontier_rl import numerics

    numerics.pin_cpu()  # before JAX starts: the same float rounding on every x86-64 machine
    try:
        _fake_devices_for_fit(sys.argv)
    except ValueError as e:  # fit's --mesh, read before JAX starts
        print(f"frontier-rl fit: error: {e}", file=sys.stderr)
        sys.exit(1)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    def entry(argv):
        absl_logging.set_verbosity(absl_logging.WARNING)
        sys.exit(_main(argv))

    app.run(entry, flags_parser=_parse_flags)


if __name__ == "__main__":
    main()
