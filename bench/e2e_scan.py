#!/usr/bin/env python3
"""End-to-end file scan, compaction and partition: `gpusort scan` / `compact` / `partition`
(streamed in chunks)
against NumPy + CuPy and NumPy alone on the same machine and file.

Usage: python3 bench/e2e_scan.py GPUSORT_BINARY [SIZE_LOG2=28] [WORKDIR=/tmp]
Writes 2^SIZE_LOG2 random u32 (1 GiB at 28), warms the page cache, then times, best of three:
  gpusort scan FILE --dtype u32 -o OUT          (inclusive sum, wrapping; flushed, and --no-sync)
  gpusort compact FILE --dtype u32 --below 2147483648 -o OUT
  gpusort partition FILE --dtype u32 --pivot 2147483648 -o OUT
  np.fromfile -> cp.asarray -> cp.cumsum / x[x < 2^31] / concatenate(x[x < 2^31], x[x >= 2^31])
    -> .get() -> tofile (+ fsync, as gpusort)
  NumPy alone: the same on the CPU, then tofile (+ fsync)
and writing + flushing each result from memory alone (a durable result's bound), each timed
run started after os.sync(), and checks that the outputs agree. GPUSORT_STREAM_CHUNK_BYTES in the environment sets
gpusort's chunk size.
"""
import os
import subprocess
import sys
import time

import numpy as np


def fsynced(path, arr):
    arr.tofile(path)
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def best(f, reps=3):
    """Best of `reps`, each started with no dirty pages pending (os.sync), so that one job's
    writeback does not slow the next."""
    times = []
    for _ in range(reps):
        os.sync()
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    binary = sys.argv[1]
    log = int(sys.argv[2]) if len(sys.argv) > 2 else 28
    work = sys.argv[3] if len(sys.argv) > 3 else "/tmp"
    path = os.path.join(work, "e2e_scan.u32")
    n = 1 << log
    rng = np.random.default_rng(2)
    rng.integers(0, 2**32, size=n, dtype=np.uint32).tofile(path)
    open(path, "rb").read()  # page cache warm
    pivot = 2**31
    jobs = {
        "scan": (["scan"], lambda x: np.cumsum(x, dtype=np.uint32)),
        "compact": (["compact", "--below", str(pivot)], lambda x: x[x < pivot]),
        "partition": (["partition", "--pivot", str(pivot)],
                      lambda x: np.concatenate((x[x < pivot], x[x >= pivot]))),
    }
    try:
        import cupy as cp
    except ImportError:
        cp = None
    for name, (args, ref) in jobs.items():
        out_g = os.path.join(work, f"e2e_{name}_gpusort.u32")
        cmd = [binary, *args, path, "--dtype", "u32", "-o", out_g, "--progress", "never", "-q"]
        subprocess.run(cmd, check=True, capture_output=True)  # driver shader cache warm
        # (partition prints the split index on stdout: captured)
        tg = best(lambda: subprocess.run(cmd, check=True, capture_output=True))
        print(f"gpusort {name}: {tg:.3f} s end to end")
        x = np.fromfile(path, dtype=np.uint32)
        want = ref(x)
        print(f"  output equals NumPy's: {np.array_equal(np.fromfile(out_g, dtype=np.uint32), want)}")
        nosync = [binary, "--no-sync", *cmd[1:]]
        tgn = best(lambda: subprocess.run(nosync, check=True, capture_output=True))
        print(f"gpusort --no-sync {name}: {tgn:.3f} s end to end")
        out_r = os.path.join(work, f"e2e_{name}_ref.u32")
        # the physical bound of a durable result: its bytes written and flushed from memory,
        # each timed write replacing the file before it, as each timed gpusort run does
        fsynced(out_r, want)
        tw = best(lambda: fsynced(out_r, want))
        print(f"writing and flushing the result from memory alone: {tw:.3f} s; gpusort (flushed) "
              f"takes {tg / tw:.2f}x as long")
        if cp is not None:
            cref = {"scan": lambda d: cp.cumsum(d, dtype=cp.uint32), "compact": lambda d: d[d < pivot],
                    "partition": lambda d: cp.concatenate((d[d < pivot], d[d >= pivot]))}[name]
            parts = {}

            def cupy_job(sync=True):
                t0 = time.perf_counter(); a = np.fromfile(path, dtype=np.uint32)
                t1 = time.perf_counter(); d = cp.asarray(a); cp.cuda.Device().synchronize()
                t2 = time.perf_counter(); d = cref(d); cp.cuda.Device().synchronize()
                t3 = time.perf_counter(); h = d.get()
                t4 = time.perf_counter(); fsynced(out_r, h) if sync else h.tofile(out_r)
                t5 = time.perf_counter()
                parts.update(read=t1 - t0, upload=t2 - t1, kernel=t3 - t2, download=t4 - t3, write=t5 - t4)
            cupy_job()
            tc = best(cupy_job)
            split = ", ".join(f"{k} {v:.3f}" for k, v in parts.items())
            print(f"NumPy + CuPy {name} (with fsync): {tc:.3f} s ({split}); {versus(tc, tg)}")
            tcn = best(lambda: cupy_job(sync=False))
            print(f"NumPy + CuPy {name} (no fsync): {tcn:.3f} s; gpusort --no-sync takes "
                  f"{tgn / tcn:.2f}x its time")
        tn = best(lambda: fsynced(out_r, ref(np.fromfile(path, dtype=np.uint32))), reps=2)
        print(f"NumPy alone {name} (CPU, with fsync): {tn:.3f} s; {versus(tn, tg)}")


def versus(other, tg):
    """'gpusort is N.NNx faster', or, where it took longer, 'gpusort takes N.NNx as long'."""
    if other >= tg:
        return f"gpusort is {other / tg:.2f}x faster"
    return f"gpusort takes {tg / other:.2f}x as long"


if __name__ == "__main__":
    main()
