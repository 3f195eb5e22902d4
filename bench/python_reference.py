#!/usr/bin/env python3
"""The Python package against CuPy (CUB) and NumPy/SciPy on the GPU machine, host arrays in and
out as NumPy users call them.

    PYTHONPATH=DIR_WITH_gpusort python3 bench/python_reference.py [--sizes 26,28]

For float32 and uint32 arrays of 2^26 and 2^28 elements: gpusort.sort / argsort / cumsum against
`cupy.asnumpy(cupy.<f>(cupy.asarray(a)))` and NumPy (np.argsort with kind="stable", as
gpusort's); the 16384^2 radius-2 star stencil (one step) against cupyx.scipy.ndimage.correlate
(with its transfers) and scipy.ndimage.correlate. Best of 3 after a warm-up call (NumPy/SciPy:
one run at the largest sizes), each result dropped before the next call as in a loop (so gpusort's
results reuse recycled memory); "fresh" is gpusort with that memory freed before each call.
Results are checked against each other.
"""
import argparse
import time

import cupy as cp
import cupyx.scipy.ndimage as cnd
import numpy as np
import scipy.ndimage as ndi

import gpusort


def best(f, reps=3):
    f()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def best_fresh(f, reps=3):
    """`best`, with gpusort's recycled result memory freed before each call: the time of a call
    whose result lands in fresh pages (the first call, or results the caller keeps)."""
    f()
    times = []
    for _ in range(reps):
        gpusort.release_memory()
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def once(f):
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="26,28")
    ap.add_argument("--side", type=int, default=16384)
    ap.add_argument("--calls", default="sort,argsort,cumsum,stencil",
                    help="which of sort, argsort, cumsum, stencil to measure")
    a = ap.parse_args()
    calls = a.calls.split(",")
    print("gpusort", gpusort.info())
    print("cupy", cp.__version__, cp.cuda.runtime.getDeviceProperties(0)["name"].decode())
    rng = np.random.default_rng(1)
    rows = []
    for log in [int(s) for s in a.sizes.split(",")]:
        n = 1 << log
        for dtype in (np.float32, np.uint32):
            x = rng.random(n, dtype=np.float32) if dtype == np.float32 else rng.integers(0, 2**32, n, dtype=np.uint32)
            for name, ours, theirs, numpy_f in [
                ("sort", gpusort.sort, lambda v: cp.asnumpy(cp.sort(cp.asarray(v))), np.sort),
                ("argsort", gpusort.argsort, lambda v: cp.asnumpy(cp.argsort(cp.asarray(v))),
                 lambda v: np.argsort(v, kind="stable")),
                ("cumsum", gpusort.cumsum, lambda v: cp.asnumpy(cp.cumsum(cp.asarray(v))), np.cumsum),
            ]:
                if name not in calls:
                    continue
                t_ours = best(lambda: ours(x))
                t_fresh = best_fresh(lambda: ours(x))
                t_cupy = best(lambda: theirs(x))
                t_np, want = once(lambda: numpy_f(x))
                got = ours(x)
                if name == "cumsum" and dtype == np.float32:
                    # NumPy's sequential float32 sum drifts far from the true sum at these
                    # lengths: compare with the float64 sum instead
                    exact = np.cumsum(x, dtype=np.float64)
                    ok = bool(np.allclose(got, exact, rtol=1e-4))
                elif name == "argsort":
                    ok = np.array_equal(x[got], x[want])
                else:
                    ok = np.array_equal(got, want)
                rows.append((f"{name} {np.dtype(dtype).name} 2^{log}", t_ours, t_cupy, t_np, ok))
                print(f"{rows[-1][0]}: gpusort {t_ours:.4f} s (fresh {t_fresh:.4f} s), cupy {t_cupy:.4f} s "
                      f"({t_ours / t_cupy:.2f}x its time), numpy {t_np:.3f} s "
                      f"({t_np / t_ours:.1f}x faster), same result: {ok}", flush=True)
            if "cumsum" in calls:
                # the host's own floor for an array in, a new array out: x.copy() (a fresh
                # array's page faults and one pass over the bytes)
                print(f"x.copy() {np.dtype(dtype).name} 2^{log}: {best(lambda: x.copy()):.4f} s",
                      flush=True)
    if "stencil" not in calls:
        return
    n = a.side
    g = rng.random((n, n), dtype=np.float32)
    w = np.zeros((5, 5), np.float32)
    w[2, :] = 1 / 9
    w[:, 2] = 1 / 9
    t_ours = best(lambda: gpusort.stencil(g, radius=2))
    t_fresh = best_fresh(lambda: gpusort.stencil(g, radius=2))
    t_cupy = best(lambda: cp.asnumpy(cnd.correlate(cp.asarray(g), cp.asarray(w), mode="reflect")))
    t_sp, want = once(lambda: ndi.correlate(g, w, mode="reflect"))
    got = gpusort.stencil(g, radius=2)
    ok = bool(np.allclose(got, want, rtol=1e-5, atol=1e-6))
    print(f"stencil r2 star {n}^2 f32, 1 step: gpusort {t_ours:.4f} s (fresh {t_fresh:.4f} s), cupyx correlate "
          f"{t_cupy:.4f} s ({t_ours / t_cupy:.2f}x its time), scipy {t_sp:.3f} s "
          f"({t_sp / t_ours:.1f}x faster), same result: {ok}", flush=True)


if __name__ == "__main__":
    main()
