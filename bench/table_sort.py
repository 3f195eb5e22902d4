#!/usr/bin/env python3
"""`gpusort sort one.parquet --by k --by x -o out.parquet` against pyarrow's own sort of the same
file on the same machine, wall clock of whole jobs (read, sort, write; gpusort's output flushed
and renamed, pyarrow's written with its defaults), and gpusort's output checked row for row
against pyarrow's (both sorts are stable).

The table is the datafusion suite's: 2^LOG rows of k (Int64, uniform over +-2^40), x (Float64,
normal-like), and four payload columns (Int64, Float64, Int32, Float32), one zstd Parquet file.

    bench/table_sort.py GPUSORT [--log 27] [--reps 3] [--dir /tmp/tables]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def make_table(n, seed=7):
    r = np.random.default_rng(seed)
    return pa.table(
        {
            "k": r.integers(-(2**40), 2**40, n, dtype=np.int64),
            "x": r.standard_normal(n).round(3),
            "p_i64": r.integers(0, 2**62, n, dtype=np.int64),
            "p_f64": r.random(n),
            "p_i32": r.integers(0, 2**31 - 1, n, dtype=np.int32),
            "p_f32": r.random(n, dtype=np.float32),
        }
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gpusort")
    ap.add_argument("--log", type=int, default=27)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ref-reps", type=int, default=1, help="pyarrow's runs (each a minute or more at 2^27)")
    ap.add_argument("--dir", default="/tmp/tables")
    ap.add_argument("--gpusort-args", default="", help="extra flags before `sort`")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    src = os.path.join(a.dir, f"one-{a.log}.parquet")
    n = 1 << a.log
    if not os.path.exists(src):
        t = time.perf_counter()
        pq.write_table(make_table(n), src, compression="zstd", row_group_size=1 << 20)
        print(f"made {src} ({os.path.getsize(src) / 2**30:.2f} GiB) in {time.perf_counter() - t:.1f} s", flush=True)
    out = os.path.join(a.dir, "gpusort.parquet")
    ref = os.path.join(a.dir, "pyarrow.parquet")
    g, p = [], []
    for rep in range(a.reps):
        t = time.perf_counter()
        cmd = [a.gpusort, *a.gpusort_args.split(), "sort", src, "--by", "k", "--by", "x", "-o", out, "--timings"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        g.append(time.perf_counter() - t)
        if res.returncode != 0:
            sys.exit(f"gpusort failed: {res.stderr}")
        print(f"gpusort sort: {g[-1]:.2f} s  | {' | '.join(res.stderr.strip().splitlines())}", flush=True)
        if rep >= a.ref_reps:
            continue
        t = time.perf_counter()
        table = pq.read_table(src)
        table = table.sort_by([("k", "ascending"), ("x", "ascending")])
        pq.write_table(table, ref, compression="zstd")
        p.append(time.perf_counter() - t)
        print(f"pyarrow read, sort_by, write: {p[-1]:.2f} s", flush=True)
        del table
    got = pq.read_table(out)
    want = pq.read_table(ref)
    same = got.schema.equals(want.schema) and got.equals(want)
    print(f"2^{a.log} rows: gpusort {statistics.median(g):.2f} s (runs {', '.join(f'{x:.2f}' for x in g)}), "
          f"pyarrow {statistics.median(p):.2f} s (runs {', '.join(f'{x:.2f}' for x in p)}), "
          f"ratio {statistics.median(p) / statistics.median(g):.2f}x; outputs equal: {same}")
    if not same:
        sys.exit("gpusort's output differs from pyarrow's")


if __name__ == "__main__":
    main()
