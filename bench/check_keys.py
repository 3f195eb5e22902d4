#!/usr/bin/env python3
"""Keys-only `gpusort sort --algorithm radix` against NumPy's sort, on the GPU machine.

Usage: python3 bench/check_keys.py GPUSORT_BINARY [SIZE_LOG2=24] [WORKDIR=/tmp]
Keys-only sorts of 32-bit keys take the radix MSD path from 2^22 keys (radix_msd.wgsl), which
falls back to the LSD passes on the GPU where a 16-bit bucket is too large, so the cases cover
both: random u32, u32 below 2^20 (the top digit the same everywhere), n/1000 distinct values,
the second digit the same everywhere, clustered i32, normal f32 with +-inf, -0.0 and NaN, and
u32 drawn from 2^16 values, each ascending and descending. The expected bytes are NumPy's sort
in gpusort's order (NaN last both ways, -0.0 before +0.0 ascending). Prints a line a case and
ALL OK or SOME WRONG.
"""
import os
import subprocess
import sys

import numpy as np


def sortable(a):
    """The order-preserving u32 image of each key (keyorder.wgsl's encode, ascending)."""
    if a.dtype == np.float32:
        bits = a.view(np.uint32).copy()
        bits[np.isnan(a)] = 0x7FC00000  # every NaN sorts as the canonical one, last
        out = np.where(bits >> 31 == 1, ~bits, bits | np.uint32(0x80000000)).astype(np.uint32)
        out[np.isnan(a)] = 0xFFFFFFFF
        return out
    if a.dtype == np.int32:
        return a.view(np.uint32) ^ np.uint32(0x80000000)
    return a


def expected(a, desc):
    key = sortable(a)
    if desc:
        key = np.where(key == 0xFFFFFFFF, key, ~key) if a.dtype == np.float32 else ~key
    out = a[np.argsort(key, kind="stable")].copy()
    if a.dtype == np.float32:
        out[np.isnan(out)] = np.float32(np.nan)  # canonical quiet NaN, as gpusort writes
        out.view(np.uint32)[np.isnan(out)] = 0x7FC00000
    return out


def main():
    binary = sys.argv[1]
    log = int(sys.argv[2]) if len(sys.argv) > 2 else 24
    work = sys.argv[3] if len(sys.argv) > 3 else "/tmp"
    n = 1 << log
    r = np.random.default_rng(log)
    f = r.standard_normal(n).astype(np.float32)
    f[r.integers(0, n, 64)] = np.nan
    f[r.integers(0, n, 64)] = np.inf
    f[r.integers(0, n, 64)] = -np.inf
    f[r.integers(0, n, 64)] = -0.0
    f[r.integers(0, n, 64)] = 0.0
    cases = {
        "random u32": r.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32),
        "u32 below 2^20": r.integers(0, 2**20, n, dtype=np.uint64).astype(np.uint32),
        "u32 n/1000 distinct": r.choice(
            r.integers(0, 2**32, max(n // 1000, 1), dtype=np.uint64).astype(np.uint32), n
        ),
        "u32 second digit fixed": r.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
        & np.uint32(0xFF00FFFF),
        "i32 clustered": r.normal(0, 1e6, n).astype(np.int32),
        "f32 normal + specials": f,
        "u32 from 2^16 values": r.integers(0, 2**16, n, dtype=np.uint64).astype(np.uint32)
        * np.uint32(65537),
    }
    ok = True
    for name, a in cases.items():
        dtype = {np.uint32: "u32", np.int32: "i32", np.float32: "f32"}[a.dtype.type]
        src = os.path.join(work, "check_keys.bin")
        dst = os.path.join(work, "check_keys.out")
        a.tofile(src)
        for desc in (False, True):
            cmd = [binary, "sort", "--algorithm", "radix", "--dtype", dtype, src, "-o", dst]
            if desc:
                cmd.append("--descending")
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                print(f"{name} desc={desc}: exit {p.returncode}: {p.stderr.strip()[-300:]}")
                ok = False
                continue
            got = np.fromfile(dst, dtype=a.dtype)
            want = expected(a, desc)
            same = got.view(np.uint32).tobytes() == want.view(np.uint32).tobytes()
            wrong = int((got.view(np.uint32) != want.view(np.uint32)).sum())
            print(f"{name} desc={desc}: {'ok' if same else f'WRONG ({wrong} keys)'}")
            ok = ok and same
    print("ALL OK" if ok else "SOME WRONG")


if __name__ == "__main__":
    main()
