#!/usr/bin/env python3
"""Reference figures from CuPy (CUB) on the same GPU, printed beside gpusort's bench JSON.

Usage: python3 bench/cupy_reference.py [gpusort-bench.json] [--sizes 16,18,...] [--scan-sizes 20,24,28]
       [--warm-ms 1000]
Measures cupy.sort and cupy.argsort of random u32 keys, and cupy.cumsum and cupy.nonzero (plus
the boolean-mask compaction x[x < 2^31]) at the scan sizes (GPU-resident, CUDA events, median of
10, after a second of the case itself so the GPU is at its working clocks); given gpusort's JSON, prints each gpusort case's time over CuPy's.

With --matrix, every "sort|argsort|key-value TYPE SET" case of the JSON (gpusort bench
--dtypes/--keys) is timed in CuPy on the very same array (bench/keysets.py builds it as the
bench does): cupy.sort, cupy.argsort, and for key-value an argsort and two gathers (CuPy has no
pairs sort); then the ratio table, gpusort's time over CuPy's, per case and size.
"""
import os
import json
import sys
import time

try:
    import cupy as cp
except ImportError:  # the bench machine has CuPy; elsewhere say so and stop
    print("cupy is not installed: nothing to compare against", file=sys.stderr)
    sys.exit(0)


WARM_S = 1.0  # --warm-ms: each case runs this long before it is timed (gpusort bench's --warmup)


def timed(fn, reps=10):
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    fn()
    # an idle GPU lowers its clocks; a second of the case itself brings them back (as gpusort
    # bench does before each of its cases), so both sides are timed at the same clocks
    cp.cuda.Device().synchronize()
    begin = time.perf_counter()
    while time.perf_counter() - begin < WARM_S:
        fn()
        cp.cuda.Device().synchronize()
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
    global WARM_S
    args = sys.argv[1:]
    report = None
    sizes = [16, 18, 20, 22, 24, 26]
    scan_sizes = []
    if "--sizes" in args:
        i = args.index("--sizes")
        sizes = [int(s) for s in args[i + 1].split(",") if s]
        del args[i : i + 2]
    if "--warm-ms" in args:
        i = args.index("--warm-ms")
        WARM_S = float(args[i + 1]) / 1e3
        del args[i : i + 2]
    if "--scan-sizes" in args:
        i = args.index("--scan-sizes")
        scan_sizes = [int(s) for s in args[i + 1].split(",") if s]
        del args[i : i + 2]
    matrix = "--matrix" in args
    if matrix:
        args.remove("--matrix")
    if args:
        report = json.load(open(args[0]))
    if matrix and report:
        # three CuPy calls a case and some 60 cases a size: a shorter warm-up (unless asked for)
        # keeps a whole matrix within one device run
        if "--warm-ms" not in sys.argv:
            WARM_S = 0.3
        matrix_table(report)
        return
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
        print("\ngpusort vs CuPy (time ratio; < 1 means gpusort is faster):")
        for log, n, t_sort, t_arg in rows:
            for c in report["cases"]:
                if c["n"] == n and c["case"].startswith(("bitonic", "radix")):
                    ref, what = (t_arg, "cupy.argsort") if "argsort" in c["case"] else (t_sort, "cupy.sort")
                    print(f"2^{log}: {c['case']}: {c['stats']['median_s']*1e3:.3f} ms, "
                          f"{c['stats']['median_s']/ref:.2f}x {what}")
    scan_rows = []
    for log in scan_sizes:
        n = 1 << log
        x = cp.random.randint(0, 2**32, size=n, dtype=cp.uint64).astype(cp.uint32)
        out = cp.empty_like(x)
        t_cumsum = timed(lambda: cp.cumsum(x, dtype=cp.uint32, out=out))
        t_nonzero = timed(lambda: cp.nonzero(x < (1 << 31)))
        t_mask = timed(lambda: x[x < (1 << 31)])
        scan_rows.append((log, n, t_cumsum, t_nonzero, t_mask))
        print(f"2^{log}: cupy.cumsum {t_cumsum*1e3:.3f} ms ({8*n/t_cumsum/1e9:.0f} GB/s at 8 B/elem), "
              f"cupy.nonzero(x < 2^31) {t_nonzero*1e3:.3f} ms, x[x < 2^31] {t_mask*1e3:.3f} ms")
    if report:
        for log, n, t_cumsum, t_nonzero, t_mask in scan_rows:
            for c in report["cases"]:
                if c["n"] == n and c["suite"] == "scan" and not c["case"].startswith("vec4"):
                    ref, what = (t_cumsum, "cupy.cumsum") if "scan" in c["case"] else (t_mask, "x[x < 2^31]")
                    print(f"2^{log}: {c['case']}: {c['stats']['median_s']*1e3:.3f} ms, "
                          f"{c['stats']['median_s']/ref:.2f}x {what}")
    json.dump([{"log2": l, "n": n, "cupy_sort_s": s, "cupy_argsort_s": a} for l, n, s, a in rows],
              sys.stdout if not report else open("/dev/null", "w"))


def matrix_table(report):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import keysets

    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"CuPy {cp.__version__} on {name}; gpusort {report.get('gpusort_version')} "
          f"({report.get('commit')}) from {report.get('date')} on {report.get('device')}")
    cases = {}
    for c in report["cases"]:
        parts = c["case"].split(" ")
        if len(parts) == 3 and parts[0] in ("sort", "argsort", "key-value") and not c.get("skipped"):
            cases.setdefault((parts[1], parts[2], c["n"]), {})[parts[0]] = c["stats"]["median_s"]
    print("| keys | n | sort | cupy.sort | ratio | argsort | cupy.argsort | ratio | key-value | CuPy | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    worst = []
    for (dtype, set_name, n), ours in sorted(cases.items(), key=lambda kv: (keysets.DTYPES.index(kv[0][0]), keysets.KEY_SETS.index(kv[0][1]), kv[0][2])):
        log = n.bit_length() - 1
        keys = keysets.generate(dtype, set_name, n, keysets.seed_of(log, dtype), xp=cp)
        values = cp.arange(n, dtype=cp.uint32)
        ref = {
            "sort": timed(lambda: cp.sort(keys)),
            "argsort": timed(lambda: cp.argsort(keys)),
            "key-value": timed(lambda: (lambda p: (keys[p], values[p]))(cp.argsort(keys))),
        }
        cells = []
        for what in ("sort", "argsort", "key-value"):
            if what in ours:
                r = ours[what] / ref[what]
                worst.append((r, f"{what} {dtype} {set_name} 2^{log}"))
                cells += [f"{ours[what]*1e3:.3f} ms", f"{ref[what]*1e3:.3f} ms", f"{r:.2f}"]
            else:
                cells += ["", f"{ref[what]*1e3:.3f} ms", ""]
        print(f"| {dtype} {set_name} | 2^{log} | " + " | ".join(cells) + " |")
        del keys, values
        cp.get_default_memory_pool().free_all_blocks()
    worst.sort(reverse=True)
    print("\nslowest against CuPy:", ", ".join(f"{w} {r:.2f}x" for r, w in worst[:10]))


if __name__ == "__main__":
    main()
