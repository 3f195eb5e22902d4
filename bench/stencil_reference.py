#!/usr/bin/env python3
"""Stencil references on the GPU machine: semantics against scipy.ndimage, speed against CuPy.

Usage: python3 bench/stencil_reference.py GPUSORT_BINARY [WORKDIR=/tmp] [SIDE_LOG2=14]
                                           [PARTS=agree,incore,ooc]

1. Agreement: `gpusort stencil` on small 2-D and 3-D .npy grids (rows of a multiple of 4 cells
   and not), every boundary mode, star, box and asymmetric dense weights, several steps, one step
   per pass and streamed (--on-chip-steps 2, 3 and 4 where a pass fits), against
   scipy.ndimage.correlate applied step by step (cupyx.scipy.ndimage where SciPy is missing).
   Prints the largest difference.
2. Speed, in core: a hand-written CuPy kernel (taps unrolled, weights as constants, one cell per
   thread) for every stencil `gpusort bench --suite stencil` measures (2-D and 3-D, star and box,
   reflect) on grids of SIDE^2 f32 cells, timed with CUDA events per step, and
   cupyx.scipy.ndimage.correlate for the same step.
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
    streamed = 0
    # the last shape: several tiles along y and strips along x of the 3-D passes in registers
    for d, shape in [(2, (37, 29)), (2, (37, 28)), (3, (11, 9, 13)), (3, (11, 9, 12)),
                     (3, (40, 70, 260))]:
        grid = rng.uniform(-1, 1, size=shape).astype(np.float32)
        gpath = os.path.join(work, f"agree{d}.npy")
        np.save(gpath, grid)
        for mode in ["constant", "nearest", "reflect", "mirror", "wrap"]:
            kinds = [("star", 1), ("star", 3), ("box", 2), ("weights", 1), ("weights", 2)]
            if shape[0] >= 40:
                kinds = [("star", 1), ("weights", 1)]
            for kind, r in kinds:
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
                steps = 4
                want = grid.astype(np.float64)
                for _ in range(steps):
                    want = nd.correlate(want, np.asarray(w, dtype=np.float64), mode=mode, cval=0.5)
                # one step per pass, then the streamed passes where a tile fits (exit 2 otherwise)
                for k in [1, 2, 3, 4]:
                    out = os.path.join(work, "agree_out.npy")
                    r_ = subprocess.run([binary, "--progress", "never", "-q", "--backend", "gpu",
                                         "stencil", gpath,
                                         "--boundary", mode, "--cval", "0.5", "--steps", str(steps),
                                         "--on-chip-steps", str(k), "-o", out] + extra,
                                        capture_output=True, text=True)
                    if r_.returncode == 2 and k > 1:
                        continue
                    if r_.returncode != 0:
                        print("FAILED:", d, mode, kind, r, k, r_.stderr.strip())
                        sys.exit(1)
                    got = np.load(out)
                    # relative to the values' size: dense random weights grow them step by step
                    diff = float(np.max(np.abs(got - want))) / max(1.0, float(np.max(np.abs(want))))
                    worst = max(worst, diff)
                    count += 1
                    streamed += k > 1
                    if diff > 1e-4:
                        print(f"MISMATCH {shape} {mode} {kind} r{r} K={k}: max |diff| {diff}")
    print(f"agreement with {SCIPY}.ndimage.correlate: {count} cases ({streamed} streamed), "
          f"max |diff| {worst:.3g} relative to the largest value (f32 result vs f64 reference)")


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


def hand_kernel(d, weights):
    """A hand-written CUDA kernel for one step of `weights` (reflect boundary), one cell per
    thread, taps unrolled with their weights as constants: the CuPy baseline of the bench."""
    r = weights.shape[0] // 2
    taps = []
    for idx in np.ndindex(weights.shape):
        if weights[idx] != 0:
            taps.append(([i - r for i in idx], float(weights[idx])))
    if d == 2:
        head = "long long c = i; int y = c / nx, x = c % nx; int z = 0;"
        at = lambda o: f"src[(long long)RF(y + {o[0]}, ny) * nx + RF(x + {o[1]}, nx)]"
    else:
        head = ("long long c = i; int x = c % nx; int y = (c / nx) % ny; int z = c / ((long long)nx * ny);")
        at = lambda o: (f"src[((long long)RF(z + {o[0]}, nz) * ny + RF(y + {o[1]}, ny)) * nx"
                        f" + RF(x + {o[2]}, nx)]")
    body = "\n".join(f"acc += {w!r}f * {at(o)};" for o, w in taps)
    return cp.ElementwiseKernel(
        "raw float32 src, int32 nz, int32 ny, int32 nx",
        "float32 dst",
        f"""
        #define RF(q, n) ((q) < 0 ? -(q) - 1 : ((q) >= (n) ? 2 * (n) - (q) - 1 : (q)))
        {head}
        float acc = 0.0f;
        {body}
        dst = acc;
        """,
        f"gpusort_hand_{d}d_{len(taps)}",
    )


def in_core(side_log):
    """The hand kernel and cupyx.scipy.ndimage.correlate for every stencil of `gpusort bench
    --suite stencil` (reflect, f32) on grids of 2^(2·side_log) cells, per step, against a copy."""
    from cupyx.scipy import ndimage as cnd
    cells = 1 << (2 * side_log)
    side = 1 << side_log
    cube = 1 << ((2 * side_log) // 3)
    shapes = {2: (side, side), 3: (cube, cube, cells // (cube * cube))}
    a2 = cp.random.random(cells, dtype=cp.float32)
    b2 = cp.empty_like(a2)
    tc = cuda_time(lambda: cp.copyto(b2, a2))
    print(f"in core, {cells} f32 cells: cupy copy {tc * 1e3:.3f} ms = {cells * 8 / tc / 1e9:.0f} GB/s "
          f"= {cells / tc / 1e9:.1f} GCells/s")
    cases = [(2, "star", r) for r in range(1, 5)] + [(2, "box", r) for r in range(1, 4)] + \
            [(3, "star", r) for r in range(1, 5)] + [(3, "box", 1)]
    for d, kind, r in cases:
        w = star(d, r) if kind == "star" else np.ones((2 * r + 1,) * d) / (2 * r + 1) ** d
        shape = shapes[d]
        a = a2.reshape(shape)
        b = b2.reshape(shape)
        k = hand_kernel(d, w)
        nz, ny, nx = (1,) + shape if d == 2 else shape
        t = cuda_time(lambda: k(a, nz, ny, nx, b))
        wc = cp.asarray(w, dtype=cp.float32)
        t2 = cuda_time(lambda: cnd.correlate(a, wc, mode="reflect"), reps=3)
        print(f"in core {'x'.join(map(str, shape))} {d}-D {kind} r{r}: CuPy hand kernel "
              f"{t * 1e3:.3f} ms/step = {cells / t / 1e9:.1f} GCells/s; "
              f"cupyx.scipy.ndimage.correlate {t2 * 1e3:.3f} ms = {cells / t2 / 1e9:.1f} GCells/s")


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
