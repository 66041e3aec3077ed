#!/usr/bin/env python
"""Converts locally downloaded benchmarks (and DAPO-Math-17k) into the files the paper configs
read. Nothing is fetched: each benchmark's public source, expected row count and columns are
listed in frontier_rl/data/benchmarks.py (and printed by --list).

  python launch/prepare_benchmarks.py --list
  python launch/prepare_benchmarks.py --src_dir=downloads --out_dir=data/eval
  python launch/prepare_benchmarks.py --src_dir=downloads --out_dir=data/eval \
      --names=aime24,math500
  python launch/prepare_benchmarks.py --dapo_math=downloads/dapo-math-17k.parquet \
      --train_out=data/train/dapo_math_17k.parquet

Benchmarks are looked for as SRC/<name>/<file> (the file names of each source, e.g.
downloads/math500/test.jsonl) or SRC/<name>.jsonl|.parquet|.csv; each becomes
OUT/<name>.jsonl with rows {"id", "prompt", "answer", "data_source"}. A row count other than
the expected one is reported as a warning. --dapo_math writes DAPO-Math-17k's verl rows with
the bare problem as the user message (DAPO's own "Answer:" instruction removed).
"""

import argparse
import logging
import os
import sys

from frontier_rl.data import benchmarks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print the benchmarks and exit")
    ap.add_argument("--src_dir", help="folder holding the downloaded benchmarks")
    ap.add_argument("--out_dir", default="data/eval")
    ap.add_argument("--names", default="", help="comma-separated; default: every one found")
    ap.add_argument("--dapo_math", help="DAPO-Math-17k verl parquet to convert")
    ap.add_argument("--train_out", default="data/train/dapo_math_17k.parquet")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(message)s")
    if args.list:
        for b in benchmarks.BENCHMARKS.values():
            print(f"{b.name:14s} {b.rows:5d} rows  {b.source}  files {list(b.files)}")
        return 0
    if args.dapo_math:
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = benchmarks.dapo_math_rows(benchmarks.read_table(args.dapo_math))
        os.makedirs(os.path.dirname(os.path.abspath(args.train_out)), exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), args.train_out)
        print(f"wrote {len(rows):,} rows to {args.train_out}")
    if args.src_dir:
        names = [n for n in args.names.split(",") if n] or None
        written = benchmarks.prepare(args.src_dir, args.out_dir, names)
        for name, path in written.items():
            print(f"{name}: {path}")
        missing = sorted(set(benchmarks.BENCHMARKS) - set(written))
        if missing and not names:
            print(f"not found under {args.src_dir}: {missing}")
    if not (args.src_dir or args.dapo_math):
        ap.error("give --src_dir and/or --dapo_math (or --list)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
