"""CUB's radix sort kernel by kernel (CuPy's sort, timed by the CUDA profiler through PyTorch's
Kineto): how its time splits into the histogram, the scan and each onesweep pass, per key set.
The reference for where gpusort's keys-only passes lose time (docs/BENCHMARKS.md, issue 66).
    python3 bench/cub_kernels.py [--sizes 24,26] [--dtypes u32,f32,u64] [--keys uniform,zipf]
"""
import argparse
import cupy as cp
import torch
from torch.profiler import ProfilerActivity, profile

import keysets

ap = argparse.ArgumentParser()
ap.add_argument("--sizes", default="24,26")
ap.add_argument("--dtypes", default="u32,f32,u64")
ap.add_argument("--keys", default="uniform,zipf")
ap.add_argument("--reps", type=int, default=5)
a = ap.parse_args()

print(torch.cuda.get_device_name(0), "cupy", cp.__version__)
for s in [int(x) for x in a.sizes.split(",")]:
    n = 1 << s
    for dt in a.dtypes.split(","):
        for name in a.keys.split(","):
            if not keysets.applies(dt, name):
                continue
            x = keysets.generate(dt, name, n, 1, xp=cp)
            for what in ("sort", "argsort"):
                f = (lambda: cp.sort(x)) if what == "sort" else (lambda: cp.argsort(x))
                for _ in range(3):
                    f()
                cp.cuda.Device().synchronize()
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(a.reps):
                        f()
                    cp.cuda.Device().synchronize()
                rows = []
                for ev in prof.key_averages():
                    t = getattr(ev, "device_time_total", None)
                    if t is None:
                        t = getattr(ev, "cuda_time_total", 0)
                    if t > 0 and ev.device_type.name == "CUDA":
                        rows.append((ev.key[:70], ev.count // a.reps, t / a.reps))
                if not rows:  # this torch names kernel events otherwise: its own table
                    print(prof.key_averages().table(row_limit=12))
                total = sum(r[2] for r in rows)
                print(f"== {what} {dt} {name} 2^{s}: {total:.1f} us a sort")
                for k, c, t in rows:
                    print(f"   {c:2d}x {t / max(c, 1):9.1f} us  {k}")
