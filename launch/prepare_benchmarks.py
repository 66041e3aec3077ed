#!/usr/bin/env python
"""Converts locally downloaded benchmarks and training corpora into the files the paper configs
read. Nothing is fetched: each benchmark's public source, expected row count and columns are
listed in frontier_rl/data/benchmarks.py (and printed by --list), as is each training corpus's
selection rule and its source.

  python launch/prepare_benchmarks.py --list
  python launch/prepare_benchmarks.py --src_dir=downloads --out_dir=data/eval
  python launch/prepare_benchmarks.py --src_dir=downloads --out_dir=data/eval \
      --names=aime24,math500
  python launch/prepare_benchmarks.py --dapo_math=downloads/dapo-math-17k.parquet \
      --train_out=data/train/dapo_math_17k.parquet
  python launch/prepare_benchmarks.py --math=downloads/lighteval-MATH/data       # math.parquet
  python launch/prepare_benchmarks.py --dapo_math=downloads/dapo-math-17k.parquet \
      --math=downloads/lighteval-MATH/data --dapo_plus_math     # HIVE's DAPO+MATH
  python launch/prepare_benchmarks.py --dapo_math=downloads/dapo-math-17k.parquet \
      --dapo_14k                                                # HeaPA's 14k subset
  python launch/prepare_benchmarks.py --openr1=downloads/OpenR1-Math-220k/data \
      --openr1_30k --openr1_heapa          # HIVE's 30k subset, HeaPA's OpenR1-Math
  python launch/prepare_benchmarks.py --numina=downloads/NuminaMath-CoT/data \
      --numina_n=30000 --numina_seed=0     # 2608.17941's NuminaMath (our subset)

Benchmarks are looked for as SRC/<name>/<file> (the file names of each source, e.g.
downloads/math500/test.jsonl) or SRC/<name>.jsonl|.parquet|.csv; each becomes
OUT/<name>.jsonl with rows {"id", "prompt", "answer", "data_source"}. A row count other than
the expected one is reported as a warning. --dapo_math writes DAPO-Math-17k's verl rows with
the bare problem as the user message (DAPO's own "Answer:" instruction removed). A training
corpus input is a file or a folder (its .parquet/.jsonl/.json/.csv files in sorted order, e.g.
a download's train-0000i-of-0000n shards); each corpus prints its counts (rows read, removed
and why, written).
"""

import argparse
import logging
import sys

from frontier_rl.data import benchmarks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print the benchmarks and exit")
    ap.add_argument("--src_dir", help="folder holding the downloaded benchmarks")
    ap.add_argument("--out_dir", default="data/eval")
    ap.add_argument("--names", default="", help="comma-separated; default: every one found")
    ap.add_argument("--dapo_math", help="DAPO-Math-17k verl parquet to convert")
    ap.add_argument("--train_out", default=benchmarks.TRAIN_OUT["dapo_math"])
    ap.add_argument("--math", help="MATH train (hendrycks / lighteval MATH: problem, level, "
                    "type, solution), a file or a folder; writes --math_out")
    ap.add_argument("--math_out", default=benchmarks.TRAIN_OUT["math"])
    ap.add_argument("--dapo_plus_math", action="store_true",
                    help="with --dapo_math and --math: HIVE's DAPO+MATH")
    ap.add_argument("--dapo_plus_math_out", default=benchmarks.TRAIN_OUT["dapo_math+math"])
    ap.add_argument("--dapo_14k", action="store_true",
                    help="with --dapo_math: HeaPA's CJK-free de-duplicated 14k subset")
    ap.add_argument("--dapo_14k_out", default=benchmarks.TRAIN_OUT["dapo_math_14k"])
    ap.add_argument("--openr1", help="open-r1/OpenR1-Math-220k (default config, train split), "
                    "a file or a folder of shards")
    ap.add_argument("--openr1_30k", action="store_true",
                    help="with --openr1: HIVE's Open-R1 subset (--openr1_n rows)")
    ap.add_argument("--openr1_n", type=int, default=benchmarks.OPENR1_SUBSET)
    ap.add_argument("--openr1_seed", type=int, default=None,
                    help="draw the subset with this seed (ours) instead of GRESO's first rows")
    ap.add_argument("--openr1_out", default=benchmarks.TRAIN_OUT["openr1_math_30k"])
    ap.add_argument("--openr1_heapa", action="store_true",
                    help="with --openr1: HeaPA's OpenR1-Math (length and ASCII filter)")
    ap.add_argument("--openr1_heapa_out", default=benchmarks.TRAIN_OUT["openr1_math_heapa"])
    ap.add_argument("--numina", help="AI-MO/NuminaMath-CoT (train split: problem, solution, "
                    "source), a file or a folder of shards; writes --numina_out")
    ap.add_argument("--numina_n", type=int, default=benchmarks.NUMINA_SUBSET,
                    help="problems to draw after de-duplication (0: every one)")
    ap.add_argument("--numina_seed", type=int, default=benchmarks.NUMINA_SEED)
    ap.add_argument("--numina_out", default=benchmarks.TRAIN_OUT["numina_math"])
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(message)s")
    if args.list:
        for b in benchmarks.BENCHMARKS.values():
            print(f"{b.name:14s} {b.rows:5d} rows  {b.source}  files {list(b.files)}")
        return 0
    if not (args.src_dir or args.dapo_math or args.math or args.openr1 or args.numina):
        ap.error("give --src_dir, --dapo_math, --math, --openr1 and/or --numina (or --list)")
    if args.dapo_plus_math and not (args.dapo_math and args.math):
        ap.error("--dapo_plus_math needs --dapo_math and --math")
    if args.dapo_14k and not args.dapo_math:
        ap.error("--dapo_14k needs --dapo_math")
    if (args.openr1_30k or args.openr1_heapa) and not args.openr1:
        ap.error("--openr1_30k and --openr1_heapa need --openr1")
    if args.openr1 and not (args.openr1_30k or args.openr1_heapa):
        ap.error("--openr1 needs --openr1_30k and/or --openr1_heapa")

    def wrote(rows: list[dict], path: str, counts: dict | None = None) -> None:
        benchmarks.write_parquet(rows, path)
        detail = ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}"
                           for k, v in (counts or {}).items())
        print(f"wrote {len(rows):,} rows to {path}" + (f" ({detail})" if detail else ""))

    dapo = benchmarks.read_tables(args.dapo_math) if args.dapo_math else None
    math = benchmarks.read_tables(args.math) if args.math else None
    if dapo is not None:
        wrote(benchmarks.dapo_math_rows(dapo), args.train_out)
    if math is not None:
        wrote(benchmarks.math_rows(math, args.math), args.math_out)
    if args.dapo_plus_math:
        rows, counts = benchmarks.dapo_plus_math_rows(dapo, math, args.dapo_math, args.math)
        wrote(rows, args.dapo_plus_math_out, counts)
    if args.dapo_14k:
        rows, counts = benchmarks.dapo_14k_rows(dapo, args.dapo_math)
        wrote(rows, args.dapo_14k_out, counts)
    if args.openr1:
        openr1 = benchmarks.read_tables(args.openr1)
        if args.openr1_30k:
            rows, counts = benchmarks.openr1_rows(openr1, args.openr1, args.openr1_n,
                                                  args.openr1_seed)
            wrote(rows, args.openr1_out, counts)
        if args.openr1_heapa:
            rows, counts = benchmarks.openr1_heapa_rows(openr1, args.openr1)
            wrote(rows, args.openr1_heapa_out, counts)
    if args.numina:
        rows, counts = benchmarks.numina_rows(benchmarks.read_tables(args.numina), args.numina,
                                              args.numina_n, args.numina_seed)
        wrote(rows, args.numina_out, counts)
    if args.src_dir:
        names = [n for n in args.names.split(",") if n] or None
        written = benchmarks.prepare(args.src_dir, args.out_dir, names)
        for name, path in written.items():
            print(f"{name}: {path}")
        missing = sorted(set(benchmarks.BENCHMARKS) - set(written))
        if missing and not names:
            print(f"not found under {args.src_dir}: {missing}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
