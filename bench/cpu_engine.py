#!/usr/bin/env python3
"""The CPU engine against NumPy and SciPy on this machine's CPU (no GPU needed).

    GPUSORT_BINARY=target/release/gpusort python3 bench/cpu_engine.py [--log2 22] [--side 2048]

Cases (the issue's first-hour figures): a 2^22 u32 sort and a 2048^2 radius-2 star stencil of
20 steps. For each, the best of 5 runs of
- NumPy/SciPy in memory (np.sort; scipy.ndimage.correlate applied 20 times, reflect),
- NumPy/SciPy end to end from file to file (np.fromfile, the work, tofile + fsync),
- gpusort end to end (`--backend cpu`, process start to a flushed, renamed output), and the
  engine's own time from `--timings` where it prints one.
Results are checked against each other.
"""
import argparse
import os
import re
import subprocess
import tempfile
import time

import numpy as np
import scipy.ndimage as ndi

BIN = os.environ.get("GPUSORT_BINARY", "target/release/gpusort")


def best(f, reps=5):
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return min(times), out


def write_synced(a, path):
    with open(path, "wb") as f:
        a.tofile(f)
        f.flush()
        os.fsync(f.fileno())


def gpusort(*args):
    p = subprocess.run([BIN, "--backend", "cpu", "--timings", *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(p.stderr)
    return p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2", type=int, default=22)
    ap.add_argument("--side", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    print(f"CPU: {os.cpu_count()} threads; NumPy {np.__version__}; gpusort binary {BIN}")
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as d:
        keys = rng.integers(0, 2**32, 2**a.log2, dtype=np.uint32)
        src, dst = os.path.join(d, "k.bin"), os.path.join(d, "out.bin")
        keys.tofile(src)
        t_np, want = best(lambda: np.sort(keys))
        t_np_e2e, _ = best(lambda: write_synced(np.sort(np.fromfile(src, np.uint32)), dst))
        t_gs, err = best(lambda: gpusort("sort", src, "--dtype", "u32", "-o", dst))
        got = np.fromfile(dst, np.uint32)
        assert np.array_equal(got, want), "sorts differ"
        m = re.search(r"sort ([0-9.]+) s", err)
        engine = float(m.group(1)) if m else float("nan")
        print(f"sort 2^{a.log2} u32: np.sort {t_np:.3f} s, NumPy file to file {t_np_e2e:.3f} s, "
              f"gpusort file to file {t_gs:.3f} s (its sort {engine:.3f} s): "
              f"{t_np / t_gs:.2f}x np.sort, {t_np_e2e / t_gs:.2f}x NumPy end to end, "
              f"engine {t_np / engine:.2f}x np.sort")

        n = a.side
        grid = rng.random((n, n), dtype=np.float32)
        w = np.zeros((5, 5), np.float32)
        w[2, :] = 1.0 / 9
        w[:, 2] = 1.0 / 9
        gsrc, gdst = os.path.join(d, "g.bin"), os.path.join(d, "gout.bin")
        grid.tofile(gsrc)

        def scipy_steps(g):
            for _ in range(a.steps):
                g = ndi.correlate(g, w, mode="reflect")
            return g

        t_sp, want = best(lambda: scipy_steps(grid), reps=3)
        t_sp_e2e, _ = best(
            lambda: write_synced(scipy_steps(np.fromfile(gsrc, np.float32).reshape(n, n)), gdst), reps=3
        )
        t_gs, _ = best(lambda: gpusort("stencil", gsrc, "--shape", f"{n}x{n}", "--radius", "2",
                                       "--steps", str(a.steps), "-o", gdst), reps=3)
        got = np.fromfile(gdst, np.float32).reshape(n, n)
        err = float(np.max(np.abs(got - want)))
        assert err < 1e-4, f"stencils differ by {err}"
        print(f"stencil {n}^2 r2 star, {a.steps} steps: scipy {t_sp:.3f} s, SciPy file to file "
              f"{t_sp_e2e:.3f} s, gpusort file to file {t_gs:.3f} s: {t_sp / t_gs:.2f}x scipy, "
              f"{t_sp_e2e / t_gs:.2f}x SciPy end to end (largest difference {err:.1e})")


if __name__ == "__main__":
    main()
