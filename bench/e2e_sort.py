#!/usr/bin/env python3
"""End-to-end file sort: `gpusort sort` against NumPy + CuPy on the same machine and file.

Usage: python3 bench/e2e_sort.py GPUSORT_BINARY [SIZE_LOG2=28] [WORKDIR=/tmp]
Writes a file of 2^SIZE_LOG2 random u32 (1 GiB at 28), warms the page cache, then times
  gpusort sort FILE --dtype u32 -o OUT       (its own split goes to stderr)
  np.fromfile -> cp.asarray -> cp.sort -> .get() -> tofile, with the same split,
  and NumPy's np.sort on the CPU,
and checks that all outputs agree.
"""
import os
import subprocess
import sys
import time

import numpy as np


def main():
    binary = sys.argv[1]
    log = int(sys.argv[2]) if len(sys.argv) > 2 else 28
    work = sys.argv[3] if len(sys.argv) > 3 else "/tmp"
    path = os.path.join(work, "e2e_keys.u32")
    n = 1 << log
    rng = np.random.default_rng(1)
    rng.integers(0, 2**32, size=n, dtype=np.uint32).tofile(path)
    open(path, "rb").read()  # page cache warm

    out_g = os.path.join(work, "e2e_gpusort.u32")
    for attempt in range(2):  # the first run also warms the driver's shader cache
        t = time.perf_counter()
        r = subprocess.run([binary, "--timings", "sort", path, "--dtype", "u32", "-o", out_g, "--progress", "never"],
                           capture_output=True, text=True)
        total = time.perf_counter() - t
        if r.returncode != 0:
            print(r.stderr)
            sys.exit(1)
    print(f"gpusort sort: {total:.3f} s end to end\n{r.stderr.strip()}")
    # scratch outputs: still a temporary file and a rename, no flush
    t = time.perf_counter()
    r = subprocess.run([binary, "--timings", "--no-sync", "sort", path, "--dtype", "u32", "-o", out_g + ".nosync",
                        "--progress", "never"], capture_output=True, text=True)
    total_nosync = time.perf_counter() - t
    print(f"gpusort --no-sync sort: {total_nosync:.3f} s end to end\n{r.stderr.strip()}")

    try:
        import cupy as cp
        out_c = os.path.join(work, "e2e_cupy.u32")
        for attempt in range(2):
            t0 = time.perf_counter(); a = np.fromfile(path, dtype=np.uint32)
            t1 = time.perf_counter(); d = cp.asarray(a); cp.cuda.Device().synchronize()
            t2 = time.perf_counter(); d = cp.sort(d); cp.cuda.Device().synchronize()
            t3 = time.perf_counter(); h = d.get()
            t4 = time.perf_counter(); h.tofile(out_c)
            t5 = time.perf_counter()
        print(f"NumPy + CuPy: {t5 - t0:.3f} s end to end (read {t1 - t0:.3f}, upload {t2 - t1:.3f}, "
              f"sort {t3 - t2:.3f}, download {t4 - t3:.3f}, write {t5 - t4:.3f})")
        print(f"gpusort / (NumPy + CuPy) time: {total / (t5 - t0):.2f}; "
              f"gpusort --no-sync / (NumPy + CuPy): {total_nosync / (t5 - t0):.2f}")
        # the same pipeline with the durability gpusort gives (fsync before the file counts as
        # written): the fair comparison for crash safety
        t6 = time.perf_counter(); h.tofile(out_c); fd = os.open(out_c, os.O_RDONLY); os.fsync(fd); os.close(fd)
        t7 = time.perf_counter()
        print(f"NumPy + CuPy with an fsync of the output: {t5 - t0 - (t5 - t4) + (t7 - t6):.3f} s end to end "
              f"(write + fsync {t7 - t6:.3f})")
        print(f"gpusort (flushed) / writing and flushing the bytes from memory alone: {total / (t7 - t6):.2f}")
        same = np.array_equal(np.fromfile(out_g, dtype=np.uint32), np.fromfile(out_c, dtype=np.uint32))
        print(f"outputs identical: {same}")
    except ImportError:
        print("cupy not installed: no GPU reference")
    t = time.perf_counter(); np.sort(np.fromfile(path, dtype=np.uint32)); 
    print(f"NumPy np.sort (CPU, read included): {time.perf_counter() - t:.3f} s")


if __name__ == "__main__":
    main()
