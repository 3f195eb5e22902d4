#!/usr/bin/env python3
"""`gpusort sort --algorithm radix` with --argsort against NumPy's stable argsort, on the GPU machine.

Usage: python3 bench/check_sort.py GPUSORT_BINARY [SIZE_LOG2=24] [WORKDIR=/tmp]
Cases: random u32, u32 with five distinct keys (n + 3), f32 with NaN, -0.0, +0.0 and +-inf, u64
(n / 4 - 1), each ascending and descending. The expected order is gpusort's: stable, NaN last in
both directions, -0.0 before +0.0 ascending. Prints one line a case and ALL OK or SOME WRONG.
"""
import os
import subprocess
import sys

import numpy as np


def reference(a, desc):
    """Stable argsort in gpusort's order."""
    if a.dtype == np.float32:
        bits = a.view(np.uint32)
        key = np.where(bits >> 31 == 1, ~bits, bits | np.uint32(0x80000000)).astype(np.uint32)
        nan = np.isnan(a)
        kept = np.flatnonzero(~nan)
        k = ~key[~nan] if desc else key[~nan]
        return np.concatenate([kept[np.argsort(k, kind="stable")], np.flatnonzero(nan)])
    return np.argsort(~a if desc else a, kind="stable")


def main():
    binary = sys.argv[1]
    log = int(sys.argv[2]) if len(sys.argv) > 2 else 24
    work = sys.argv[3] if len(sys.argv) > 3 else "/tmp"
    rng = np.random.default_rng(7)
    n = 1 << log
    special = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf], np.float32)
    cases = {
        "u32": rng.integers(0, 2**32, size=n, dtype=np.uint32),
        "u32 (5 keys)": rng.integers(0, 5, size=n + 3, dtype=np.uint32) * np.uint32(0x01010101),
        "f32": np.concatenate([rng.standard_normal(n - 5).astype(np.float32), special]),
        "u64": rng.integers(0, 2**64, size=n // 4 - 1, dtype=np.uint64),
    }
    ok = True
    for name, a in cases.items():
        dtype = {"uint32": "u32", "float32": "f32", "uint64": "u64"}[str(a.dtype)]
        src = os.path.join(work, f"check_sort.{dtype}")
        a.tofile(src)
        for desc in (False, True):
            out, idx = src + ".out", src + ".idx"
            cmd = [binary, "sort", src, "--dtype", dtype, "--algorithm", "radix", "-o", out,
                   "--argsort", idx, "--progress", "never", "-q"] + (["--descending"] if desc else [])
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{name} descending={desc}: FAILED {r.stderr.strip()[-300:]}")
                ok = False
                continue
            ref = reference(a, desc)
            got = np.fromfile(idx, dtype=np.uint32)
            keys = np.fromfile(out, dtype=a.dtype)
            good_idx = np.array_equal(got, ref)
            # bit patterns: -0.0 and +0.0 differ, and every NaN comes out canonical
            want = a[ref]
            finite = ~np.isnan(want) if a.dtype == np.float32 else slice(None)
            good_keys = keys.shape == want.shape and np.array_equal(keys[finite].view(np.uint8), want[finite].view(np.uint8))
            print(f"{name} n={a.size} descending={desc}: argsort {'ok' if good_idx else 'WRONG'}, "
                  f"keys {'ok' if good_keys else 'WRONG'}")
            ok = ok and good_idx and good_keys
    print("ALL OK" if ok else "SOME WRONG")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
