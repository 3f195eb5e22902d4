#!/usr/bin/env python3
"""The CPU engine against NumPy and SciPy on this machine's CPU (no GPU needed).

    GPUSORT_BINARY=target/release/gpusort python3 bench/cpu_engine.py [--log2 22] [--side 2048]

Cases (the issue's first-hour figures): a 2^22 u32 sort and a 2048^2 radius-2 star stencil of
20 steps. For each, the best of 5 runs of
- NumPy/SciPy in memory (np.sort; scipy.ndimage.correlate applied 20 times, reflect),
- NumPy/SciPy end to end from file to file (np.fromfile, the work, tofile + fsync),
- the same as a command (`python3 -c ...`: interpreter start and imports included), which is
  what a shell user compares a `gpusort` command with,
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
        cmd = ("import numpy as np, os; a = np.sort(np.fromfile('%s', np.uint32)); "
               "f = open('%s', 'wb'); a.tofile(f); f.flush(); os.fsync(f.fileno())" % (src, dst))
        t_np_cmd, _ = best(lambda: subprocess.run(["python3", "-c", cmd], check=True))
        t_gs, err = best(lambda: gpusort("sort", src, "--dtype", "u32", "-o", dst))
        got = np.fromfile(dst, np.uint32)
        assert np.array_equal(got, want), "sorts differ"
        m = re.search(r"sort ([0-9.]+) s", err)
        engine = float(m.group(1)) if m else float("nan")
        print(f"sort 2^{a.log2} u32: np.sort {t_np:.3f} s, NumPy file to file {t_np_e2e:.3f} s, "
              f"as a command {t_np_cmd:.3f} s; gpusort command {t_gs:.3f} s (its sort {engine:.3f} s)")
        print(f"  speed-ups (> 1: gpusort faster): command vs command {t_np_cmd / t_gs:.2f}x, "
              f"gpusort command vs NumPy in-process file to file {t_np_e2e / t_gs:.2f}x, "
              f"engine sort vs np.sort {t_np / engine:.2f}x")

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
        scmd = ("import numpy as np, os, scipy.ndimage as ndi\n"
                "g = np.fromfile('%s', np.float32).reshape(%d, %d)\n"
                "w = np.zeros((5, 5), np.float32); w[2, :] = 1 / 9; w[:, 2] = 1 / 9\n"
                "for _ in range(%d): g = ndi.correlate(g, w, mode='reflect')\n"
                "f = open('%s', 'wb'); g.tofile(f); f.flush(); os.fsync(f.fileno())"
                % (gsrc, n, n, a.steps, gdst))
        t_sp_cmd, _ = best(lambda: subprocess.run(["python3", "-c", scmd], check=True), reps=3)
        t_gs, _ = best(lambda: gpusort("stencil", gsrc, "--shape", f"{n}x{n}", "--radius", "2",
                                       "--steps", str(a.steps), "-o", gdst), reps=3)
        got = np.fromfile(gdst, np.float32).reshape(n, n)
        err = float(np.max(np.abs(got - want)))
        assert err < 1e-4, f"stencils differ by {err}"
        print(f"stencil {n}^2 r2 star, {a.steps} steps: scipy {t_sp:.3f} s, SciPy file to file "
              f"{t_sp_e2e:.3f} s, as a command {t_sp_cmd:.3f} s; gpusort command {t_gs:.3f} s "
              f"(largest difference {err:.1e})")
        print(f"  speed-ups: command vs command {t_sp_cmd / t_gs:.2f}x, gpusort command vs SciPy "
              f"in memory {t_sp / t_gs:.2f}x")


if __name__ == "__main__":
    main()
