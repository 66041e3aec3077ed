"""`frontier-rl bench <name>`: the bench a name runs, with the flags it reads (cli.py parses them).

`sampler`, `train_step`, `entropy`, `flops` and `verify` time a named work of `--bench_config`
(bench/__init__.py); `engine`, `staleness`, `sync`, `packed`, `warmstart` and `selection` are
modules of their own here, each imported only when it runs.
"""

from __future__ import annotations

from absl import flags

from frontier_rl import bench
from frontier_rl.run.errors import RunError


def main(name: str | None, values: flags.FlagValues) -> None:
    """Runs bench `name` (None: none was given) with the command line's flags; a missing name or
    a missing flag the bench needs is a RunError that says what to give."""
    if name is None:
        raise RunError(f"bench needs one of {sorted(bench.BENCHES)}")
    if name == "engine":
        from frontier_rl.bench import engine

        if values.config is None:
            raise RunError("bench engine needs --config (e.g. "
                           "configs/arith_grpo.py) and --workdir")
        engine.main(values.config, values.workdir, repeats=values.repeats, as_json=values.json)
    elif name == "staleness":
        from frontier_rl.bench import staleness

        if values.config is None or not values.workdir:
            raise RunError("bench staleness needs --config (e.g. "
                           "configs/compare_arith.py) and --workdir")
        staleness.main(values.config, values.workdir, repeats=values.repeats,
                       as_json=values.json, pin_cores=values.pin_cores)
    elif name == "sync":
        from frontier_rl.bench import sync

        sync.main(values.bench_config, repeats=values.repeats, as_json=values.json,
                  workdir=values.workdir)
    elif name == "packed":
        from frontier_rl.bench import packed

        packed.main(repeats=values.repeats, as_json=values.json)
    elif name == "warmstart":
        from frontier_rl.bench import warmstart

        if values.config is None:
            raise RunError("bench warmstart needs --config (e.g. "
                           "configs/compare_arith.py) and --seeds")
        warmstart.main(values.config, values.seeds, as_json=values.json,
                       workdir=values.workdir)
    elif name == "selection":
        from frontier_rl.bench import selection

        selection.main(values.selector, sizes=[int(s) for s in values.sizes],
                       repeats=values.repeats, as_json=values.json)
    else:
        bench.main(name, config_name=values.bench_config, repeats=values.repeats,
                   as_json=values.json)
