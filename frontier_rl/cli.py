"""Command line: `frontier-rl <command> [flags]` (also `python -m frontier_rl ...`).

Commands:
  train    --config=configs/<exp>.py[:arg] --workdir=DIR [--config.<field>=value ...]
  compare  --config=configs/compare_arith.py[:arg] --workdir=DIR   (matched-budget comparison)
  sim      --config=configs/sim_<exp>.py[:arg] [--workdir=DIR]       (the synthetic learner)
  bench    sampler | train_step | entropy | flops  [--bench_config=default] [--repeats=N] [--json]
  bench    selection --selector=NAME [--sizes=10000,100000,1000000] [--json]

Any config leaf can be overridden on the command line, e.g. `--config.rl.learning_rate=3e-4`.
"""

from __future__ import annotations

import logging
import os
import sys

from absl import app, flags
from absl import logging as absl_logging
from ml_collections import config_flags

COMMANDS = ("train", "compare", "sim", "bench")

FLAGS = flags.FLAGS
config_flags.DEFINE_config_file("config", None, "Experiment config file (configs/<exp>.py[:arg]).",
                                lock_config=True)
flags.DEFINE_string("workdir", None, "Run directory: checkpoints, metrics.jsonl, TensorBoard.")
flags.DEFINE_bool("json", False, "bench: print the figures as one JSON object on the last line.")
flags.DEFINE_integer("repeats", 10, "bench: timed repetitions after warm-up.")
flags.DEFINE_string("bench_config", "default", "bench: the named work to time.")
flags.DEFINE_string("selector", "uniform", "bench selection: the registered selector to time.")
flags.DEFINE_list("sizes", ["10000", "100000", "1000000"], "bench selection: pool sizes.")


def _main(argv: list[str]) -> int:
    from frontier_rl import config_lib, train

    if len(argv) < 2 or argv[1] not in COMMANDS:
        print(f"usage: frontier-rl {{{'|'.join(COMMANDS)}}} [flags]; see --help", file=sys.stderr)
        return 2
    command = argv[1]
    try:
        if command == "train":
            if FLAGS.config is None:
                raise train.RunError("--config is required (e.g. --config=configs/arith_grpo.py)")
            train.run(FLAGS.config, FLAGS.workdir)
        elif command == "compare":
            from frontier_rl import compare

            if FLAGS.config is None:
                raise train.RunError(
                    "--config is required (e.g. --config=configs/compare_arith.py)")
            compare.run(FLAGS.config, FLAGS.workdir)
        elif command == "sim":
            from frontier_rl.sim import run as sim_run

            if FLAGS.config is None:
                raise train.RunError("--config is required (e.g. --config=configs/sim_heapa.py)")
            sim_run.main(FLAGS.config, FLAGS.workdir)
        elif command == "bench":
            from frontier_rl import bench

            if len(argv) < 3:
                raise train.RunError(f"bench needs one of {sorted(bench.BENCHES)}")
            if argv[2] == "selection":
                from frontier_rl import bench_selection

                bench_selection.main(FLAGS.selector, sizes=[int(s) for s in FLAGS.sizes],
                                     repeats=FLAGS.repeats, as_json=FLAGS.json)
            else:
                bench.main(argv[2], config_name=FLAGS.bench_config, repeats=FLAGS.repeats,
                           as_json=FLAGS.json)
    except (config_lib.ConfigError, train.RunError, FileNotFoundError, ValueError) as e:
        print(f"frontier-rl {command}: error: {e}", file=sys.stderr)
        return 1
    return 0


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    def entry(argv):
        absl_logging.set_verbosity(absl_logging.WARNING)
        sys.exit(_main(argv))

    app.run(entry)
