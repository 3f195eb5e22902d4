#!/usr/bin/env python3
"""Reference figures from CuPy (CUB) on the same GPU, printed beside gpusort's bench JSON.

Usage: python3 bench/cupy_reference.py [gpusort-bench.json] [--sizes 16,18,...]
Measures cupy.sort and cupy.argsort of random u32 keys (GPU-resident, CUDA events, median of 10)
and, given gpusort's JSON, prints the ratio of each gpusort sort case to cupy.sort.
"""
import json
import sys

try:
    import cupy as cp
except ImportError:  # the bench machine has CuPy; elsewhere say so and stop
    print("cupy is not installed: nothing to compare against", file=sys.stderr)
    sys.exit(0)


def timed(fn, reps=10):
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    fn()
    times = []
    for _ in range(reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    times.sort()
    return times[len(times) // 2]


def main():
    args = sys.argv[1:]
    report = None
    sizes = [16, 18, 20, 22, 24, 26]
    if "--sizes" in args:
        i = args.index("--sizes")
        sizes = [int(s) for s in args[i + 1].split(",")]
        del args[i : i + 2]
    if args:
        report = json.load(open(args[0]))
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"CuPy {cp.__version__} on {name}")
    rows = []
    for log in sizes:
        n = 1 << log
        keys = cp.random.randint(0, 2**32, size=n, dtype=cp.uint64).astype(cp.uint32)
        t_sort = timed(lambda: cp.sort(keys))
        t_arg = timed(lambda: cp.argsort(keys))
        rows.append((log, n, t_sort, t_arg))
        print(f"2^{log}: cupy.sort {t_sort*1e3:.3f} ms ({n/t_sort/1e9:.2f} GKeys/s), "
              f"cupy.argsort {t_arg*1e3:.3f} ms ({n/t_arg/1e9:.2f} GKeys/s)")
    if report:
        print("\ngpusort vs cupy.sort (time ratio; < 1 means gpusort is faster):")
        for log, n, t_sort, _ in rows:
            for c in report["cases"]:
                if c["n"] == n and c["case"].startswith("bitonic"):
                    print(f"2^{log}: {c['case']}: {c['stats']['median_s']*1e3:.3f} ms, "
                          f"{c['stats']['median_s']/t_sort:.2f}x cupy.sort")
    json.dump([{"log2": l, "n": n, "cupy_sort_s": s, "cupy_argsort_s": a} for l, n, s, a in rows],
              sys.stdout if not report else open("/dev/null", "w"))


if __name__ == "__main__":
    main()
