#!/usr/bin/env python3
"""gpusort's Python calls against NumPy's on this machine's CPU, with no GPU (the CPU engine):
time ratios gpusort / NumPy, lower is better, for sort, argsort and cumsum.

    python3 bench/python_cpu.py [--sizes 20,22,24] [--dtypes uint32,int32,float32,int64,uint64,float64]

NumPy's counterparts: np.sort (its default kind: every kind gives the same values),
np.argsort(kind="stable") (gpusort's argsort is stable) and np.cumsum. Uniform random arrays;
best of 9, the two calls taken in turn, after a warm-up call of each. Results are checked against NumPy's.
"""
import argparse
import time

import numpy as np

import gpusort


def best_pair(f, g, reps=9):
    """The best of `reps` timings of `f` and of `g`, taken in turn (f, g, f, g, ...) after a
    warm-up call of each, so that both meet the machine in the same state."""
    f()
    g()
    tf, tg = [], []
    for _ in range(reps):
        for fn, times in ((f, tf), (g, tg)):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
    return min(tf), min(tg)


def array(dtype, n, rng):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(n).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="20,22,24")
    ap.add_argument("--dtypes", default="uint32,int32,float32,int64,uint64,float64")
    args = ap.parse_args()
    gpusort.use("cpu")
    info = gpusort.info()
    print(f"gpusort {gpusort.__version__}, engine {info['engine']} ({info['threads']} threads), "
          f"NumPy {np.__version__}")
    rng = np.random.default_rng(7)
    calls = {
        "sort": (gpusort.sort, np.sort),
        "argsort": (gpusort.argsort, lambda a: np.argsort(a, kind="stable")),
        "cumsum": (gpusort.cumsum, np.cumsum),
    }
    print("| dtype | n | " + " | ".join(f"{c} (ms) | NumPy | ratio" for c in calls) + " |")
    print("|---|---|" + "---|---|---|" * len(calls))
    worst = []
    for log2 in map(int, args.sizes.split(",")):
        for dtype in args.dtypes.split(","):
            a = array(dtype, 1 << log2, rng)
            cells = []
            for name, (ours, theirs) in calls.items():
                got, want = ours(a), theirs(a)
                if name == "cumsum" and a.dtype.kind == "f":
                    assert np.allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(a).sum()), name
                else:
                    assert np.array_equal(got, want), (name, dtype, log2)
                t_ours, t_np = best_pair(lambda: ours(a), lambda: theirs(a))
                cells.append(f"{t_ours * 1e3:.1f} | {t_np * 1e3:.1f} | {t_ours / t_np:.2f}")
                worst.append((t_ours / t_np, f"{name} {dtype} 2^{log2}"))
            print(f"| {dtype} | 2^{log2} | " + " | ".join(cells) + " |", flush=True)
    worst.sort(reverse=True)
    print("slowest against NumPy: " + ", ".join(f"{w} {r:.2f}" for r, w in worst[:5]))


if __name__ == "__main__":
    main()
