#!/usr/bin/env python3
"""Stencil references on the GPU machine: semantics against scipy.ndimage, speed against CuPy.

Usage: python3 bench/stencil_reference.py GPUSORT_BINARY [WORKDIR=/tmp] [SIDE_LOG2=14]
                                           [PARTS=agree,incore,ooc]

1. Agreement: `gpusort stencil` on small 2-D and 3-D .npy grids, every boundary mode, star,
   box and asymmetric dense weights, several steps, against scipy.ndimage.correlate applied step
   by step (cupyx.scipy.ndimage where SciPy is missing). Prints the largest difference.
2. Speed, in core: a hand-written CuPy elementwise kernel for the 2-D radius-2 star (reflect) on
   a SIDE x SIDE f32 grid, timed with CUDA events per step — the baseline `gpusort bench --suite
   stencil` is compared with — and cupyx.scipy.ndimage.correlate for the same step.
3. Out of core: `gpusort stencil` end to end on a grid larger than its --gpu-memory budget,
   planned (reuse of overlaps, T steps per residency) vs the naive streamer (halos re-sent, one
   step per transfer), with the plan's prediction.
"""
import os
import subprocess
import sys
import time

import numpy as np
import cupy as cp

try:
    from scipy import ndimage as nd
    SCIPY = "scipy"
except ImportError:  # the device may lack SciPy; CuPy's port has the same semantics
    from cupyx.scipy import ndimage as _cnd

    class nd:  # noqa: N801
        @staticmethod
        def correlate(a, w, mode, cval):
            return cp.asnumpy(_cnd.correlate(cp.asarray(a), cp.asarray(w), mode=mode, cval=cval))

    SCIPY = "cupyx.scipy"


def run(binary, args):
    r = subprocess.run([binary, "--progress", "never"] + args, capture_output=True, text=True)
    if r.returncode != 0:
        print("FAILED:", " ".join(args), r.stderr.strip())
        sys.exit(1)
    return r


def star(d, r):
    w = np.zeros((2 * r + 1,) * d)
    for axis in range(d):
        idx = [r] * d
        for k in range(2 * r + 1):
            idx[axis] = k
            w[tuple(idx)] = 1
    return w / w.sum()


def agreement(binary, work):
    rng = np.random.default_rng(7)
    worst = 0.0
    count = 0
    for d, shape in [(2, (37, 29)), (3, (11, 9, 13))]:
        grid = rng.uniform(-1, 1, size=shape).astype(np.float32)
        gpath = os.path.join(work, f"agree{d}.npy")
        np.save(gpath, grid)
        for mode in ["constant", "nearest", "reflect", "mirror", "wrap"]:
            for kind, r in [("star", 1), ("star", 3), ("box", 2), ("weights", 1), ("weights", 2)]:
                if kind == "star":
                    w = star(d, r)
                    extra = ["--stencil", "star", "--radius", str(r)]
                elif kind == "box":
                    w = np.ones((2 * r + 1,) * d) / (2 * r + 1) ** d
                    extra = ["--stencil", "box", "--radius", str(r)]
                else:
                    w = rng.uniform(-0.5, 0.5, size=(2 * r + 1,) * d).astype(np.float32)
                    wpath = os.path.join(work, "agree_w.npy")
                    np.save(wpath, w)
                    extra = ["--weights", wpath]
                steps = 3
                out = os.path.join(work, "agree_out.npy")
                run(binary, ["-q", "stencil", gpath, "--boundary", mode, "--cval", "0.5",
                             "--steps", str(steps), "-o", out] + extra)
                got = np.load(out)
                want = grid.astype(np.float64)
                for _ in range(steps):
                    want = nd.correlate(want, np.asarray(w, dtype=np.float64), mode=mode, cval=0.5)
                diff = float(np.max(np.abs(got - want)))
                worst = max(worst, diff)
                count += 1
                if diff > 1e-4:
                    print(f"MISMATCH {d}-D {mode} {kind} r{r}: max |diff| {diff}")
    print(f"agreement with {SCIPY}.ndimage.correlate: {count} cases, max |diff| {worst:.3g} "
          f"(f32 result vs f64 reference)")


STAR2 = cp.ElementwiseKernel(
    "raw float32 src, int32 ny, int32 nx",
    "float32 dst",
    """
    int y = i / nx, x = i % nx;
    #define RY(q) ((q) < 0 ? -(q) - 1 : ((q) >= ny ? 2 * ny - (q) - 1 : (q)))
    #define RX(q) ((q) < 0 ? -(q) - 1 : ((q) >= nx ? 2 * nx - (q) - 1 : (q)))
    float acc = 0.0f;
    const float w = 1.0f / 9.0f;
    acc += w * src[RY(y - 2) * nx + x];
    acc += w * src[RY(y - 1) * nx + x];
    acc += w * src[y * nx + RX(x - 2)];
    acc += w * src[y * nx + RX(x - 1)];
    acc += w * src[y * nx + x];
    acc += w * src[y * nx + RX(x + 1)];
    acc += w * src[y * nx + RX(x + 2)];
    acc += w * src[RY(y + 1) * nx + x];
    acc += w * src[RY(y + 2) * nx + x];
    dst = acc;
    """,
    "gpusort_star2",
)


def cuda_time(f, reps=10):
    f()
    cp.cuda.Device().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(reps):
        start.record()
        f()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
    return float(np.median(times))


def in_core(side_log):
    side = 1 << side_log
    a = cp.random.random((side, side), dtype=cp.float32)
    b = cp.empty_like(a)
    cells = side * side
    steps = 8

    def eight():
        x, y = a, b
        for _ in range(steps):
            STAR2(x, side, side, y)
            x, y = y, x

    t = cuda_time(eight) / steps
    tc = cuda_time(lambda: cp.copyto(b, a))
    print(f"in core {side}x{side} f32: CuPy elementwise star r2 {t * 1e3:.3f} ms/step = "
          f"{cells / t / 1e9:.1f} GCells/s; cupy copy {cells * 8 / tc / 1e9:.0f} GB/s")
    from cupyx.scipy import ndimage as cnd
    w = cp.asarray(star(2, 2), dtype=cp.float32)
    t2 = cuda_time(lambda: cnd.correlate(a, w, mode="reflect"))
    print(f"in core {side}x{side} f32: cupyx.scipy.ndimage.correlate {t2 * 1e3:.3f} ms/step = "
          f"{cells / t2 / 1e9:.1f} GCells/s")


def out_of_core(binary, work, side_log, steps, budget):
    side = 1 << side_log
    path = os.path.join(work, f"ooc_{side}.raw")
    if not os.path.exists(path):
        np.random.default_rng(3).random((side, side), dtype=np.float32).tofile(path)
    open(path, "rb").read()
    shape = f"{side}x{side}"
    common = ["stencil", path, "--shape", shape, "--radius", "2", "--steps", str(steps)]
    if budget:
        common += ["--gpu-memory", budget]
    plan = run(binary, common + ["--plan"]).stdout
    print(plan.strip())
    results = {}
    for name, extra in [("planned", []), ("naive", ["--naive-streaming"])]:
        out = os.path.join(work, f"ooc_out_{name}.raw")
        t = time.perf_counter()
        r = run(binary, common + ["-o", out] + extra)
        wall = time.perf_counter() - t
        results[name] = wall
        print(f"out of core {shape} x {steps} steps, budget {budget or 'default'}, {name}: "
              f"{wall:.3f} s wall = {side * side * steps / wall / 1e9:.2f} GCells·steps/s; "
              f"{r.stderr.strip().splitlines()[-1]}")
    same = open(os.path.join(work, "ooc_out_planned.raw"), "rb").read() == \
        open(os.path.join(work, "ooc_out_naive.raw"), "rb").read()
    print(f"planned vs naive: {results['naive'] / results['planned']:.2f}x faster; "
          f"results identical: {same}")
    for name in ["planned", "naive"]:
        os.remove(os.path.join(work, f"ooc_out_{name}.raw"))


def main():
    binary = sys.argv[1]
    work = sys.argv[2] if len(sys.argv) > 2 else "/tmp"
    side_log = int(sys.argv[3]) if len(sys.argv) > 3 else 14
    parts = sys.argv[4].split(",") if len(sys.argv) > 4 else ["agree", "incore", "ooc"]
    print(cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "CuPy", cp.__version__)
    if "agree" in parts:
        agreement(binary, work)
    if "incore" in parts:
        in_core(side_log)
    if "ooc" in parts:
        out_of_core(binary, work, side_log, 16, "256M")
        out_of_core(binary, work, side_log + 1, 16, None)


if __name__ == "__main__":
    main()
