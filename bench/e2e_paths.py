#!/usr/bin/env python3
"""Whole-file commands the way users run them, checked on the GPU machine against NumPy
(integer keys) and gpusort's CPU engine (every key type): every
key type as .npy and raw, descending, output to a pipe (-o -), through a symbolic link, with
--values-out and --argsort at once, a 2 GiB output (past the prefaulted first GiB), scans of
64-bit and float files, compactions and partitions with a payload (every key type, and 2 GiB),
--no-sync and flushed. Prints a line a case and ALL OK or SOME WRONG.

Usage: python3 bench/e2e_paths.py GPUSORT_BINARY [WORKDIR=/tmp] [SIZE_LOG2=24] [BIG_LOG2=29, 0: none]
"""
import os
import subprocess
import sys

import numpy as np


def run(binary, *args, stdout=None):
    r = subprocess.run([binary, "-q", "--progress", "never", *args], stdout=stdout or subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.decode().strip())
    return r.stdout


def cpu_engine(binary, work, args, name):
    """The same command on gpusort's CPU engine (the CPU twin, itself tested against NumPy):
    the reference for float orders (NaN last, -0 before +0) and payloads."""
    out = os.path.join(work, f"paths_ref_{name}")
    run(binary, "--backend", "cpu", *[out if x == "{out}" else x for x in args])
    return out


def main():
    binary = sys.argv[1]
    work = sys.argv[2] if len(sys.argv) > 2 else "/tmp"
    rng = np.random.default_rng(5)
    n = (1 << (int(sys.argv[3]) if len(sys.argv) > 3 else 24)) + 3
    big_log = int(sys.argv[4]) if len(sys.argv) > 4 else 29
    ok = True

    def check(name, got, want):
        nonlocal ok
        same = got.tobytes() == want.tobytes()
        ok &= same
        print(f"{'ok   ' if same else 'WRONG'} {name}", flush=True)

    data = {
        "u32": rng.integers(0, 2**32, n, dtype=np.uint32),
        "i32": rng.integers(-2**20, 2**20, n, dtype=np.int32),
        "u64": (rng.integers(0, 2**31, n, dtype=np.uint64) + np.uint64(1_700_000_000_000_000)),
        "i64": rng.integers(-2**62, 2**62, n, dtype=np.int64),
        "f32": rng.normal(size=n).astype(np.float32),
        "f64": rng.uniform(-1, 1, n),
    }
    for t in ("f32", "f64"):
        data[t][:6] = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0]
    for t, a in data.items():
        for ext in ("npy", "bin"):
            src = os.path.join(work, f"paths_{t}.{ext}")
            np.save(src, a) if ext == "npy" else a.tofile(src)
            if ext == "npy":
                src_read = lambda p: np.load(p)
            else:
                src_read = lambda p: np.fromfile(p, dtype=a.dtype)
            for desc in (False, True):
                out = os.path.join(work, f"paths_{t}_out.{ext}")
                flags = ["--dtype", t] if ext == "bin" else []
                run(binary, "--no-sync" if desc else "--timings", "sort", src, *flags, "-o", out,
                    *(["--descending"] if desc else []))
                args = ["sort", src, *flags, "-o", "{out}", *(["--descending"] if desc else [])]
                ref = src_read(cpu_engine(binary, work, args, f"{t}.{ext}"))
                check(f"sort {t} .{ext}{' descending' if desc else ''}", src_read(out), ref)
                if t[0] != "f":
                    check(f"  the same against NumPy", src_read(out), np.sort(a)[::-1 if desc else 1])
        # a pipe, a link, three outputs at once, a scan
        src = os.path.join(work, f"paths_{t}.bin")
        piped = run(binary, "sort", src, "--dtype", t, "-o", "-")
        want = np.fromfile(cpu_engine(binary, work, ["sort", src, "--dtype", t, "-o", "{out}"], t), dtype=a.dtype)
        check(f"sort {t} -o - (pipe)", np.frombuffer(piped, dtype=a.dtype), want)
        target = os.path.join(work, f"paths_{t}_target.bin")
        link = os.path.join(work, f"paths_{t}_link.bin")
        for p in (target, link):
            if os.path.lexists(p):
                os.remove(p)
        open(target, "wb").close()
        os.symlink(target, link)
        run(binary, "sort", src, "--dtype", t, "-o", link)
        check(f"sort {t} through a link", np.fromfile(target, dtype=a.dtype), want)
        vals = np.arange(n, dtype=np.uint32)
        vsrc = os.path.join(work, "paths_values.bin")
        vals.tofile(vsrc)
        out, vout, perm = (os.path.join(work, f"paths_{t}_{k}.bin") for k in ("k", "v", "p"))
        run(binary, "sort", src, "--dtype", t, "--values", vsrc, "--values-out", vout, "--argsort", perm,
            "-o", out)
        check(f"sort {t} keys with --values-out and --argsort", np.fromfile(out, dtype=a.dtype), want)
        rv, rp = (os.path.join(work, f"paths_ref_{t}_{k}.bin") for k in ("v", "p"))
        run(binary, "--backend", "cpu", "sort", src, "--dtype", t, "--values", vsrc, "--values-out", rv,
            "--argsort", rp, "-o", os.path.join(work, "paths_ref_k.bin"))
        check(f"sort {t} --values-out", np.fromfile(vout, dtype=np.uint32), np.fromfile(rv, dtype=np.uint32))
        check(f"sort {t} --argsort", np.fromfile(perm, dtype=np.uint32), np.fromfile(rp, dtype=np.uint32))
        # compaction and partition with a payload, .npy, --no-sync (mapped outputs) and flushed
        # (a compaction's positioned appends), against the CPU engine
        nsrc = os.path.join(work, f"paths_{t}.npy")
        pivot = {"u32": "2147483648", "u64": "1700000001000000000"}.get(t, "0")
        for job, pflag in (("compact", "--below"), ("partition", "--pivot")):
            for flag in ("--no-sync", "--timings"):
                out, vout = (os.path.join(work, f"paths_{t}_{job}_{k}.npy") for k in ("k", "v"))
                args = [job, nsrc, pflag, pivot, "--values", vsrc, "--values-out", vout, "-o", out]
                run(binary, flag, *args)
                rk, rv = (os.path.join(work, f"paths_ref_{t}_{job}_{k}.npy") for k in ("k", "v"))
                run(binary, "--backend", "cpu", *args[:-4], "--values-out", rv, "-o", rk)
                check(f"{job} {t} {flag}", np.load(out), np.load(rk))
                check(f"{job} {t} {flag} --values-out", np.load(vout), np.load(rv))
        if t[0] != "f":
            sout = os.path.join(work, f"paths_{t}_scan.bin")
            run(binary, "scan", src, "--dtype", t, "-o", sout)
            check(f"scan {t}", np.fromfile(sout, dtype=a.dtype), np.cumsum(a, dtype=a.dtype))
    # past the prefaulted first GiB: 2 GiB of u32, --no-sync and flushed
    if big_log == 0:
        print("ALL OK" if ok else "SOME WRONG")
        sys.exit(0 if ok else 1)
    big = rng.integers(0, 2**32, 1 << big_log, dtype=np.uint32)
    bsrc = os.path.join(work, "paths_big.u32")
    big.tofile(bsrc)
    want = np.sort(big)
    for flag in ("--no-sync", "--timings"):
        bout = os.path.join(work, "paths_big_out.u32")
        run(binary, flag, "sort", bsrc, "--dtype", "u32", "-o", bout)
        check(f"sort 2 GiB u32 {flag}", np.fromfile(bout, dtype=np.uint32), want)
    sout = os.path.join(work, "paths_big_scan.u32")
    run(binary, "--no-sync", "scan", bsrc, "--dtype", "u32", "-o", sout)
    check("scan 2 GiB u32", np.fromfile(sout, dtype=np.uint32), np.cumsum(big, dtype=np.uint32))
    low = big < 2**31
    for job, pflag, want in (("compact", "--below", big[low]),
                             ("partition", "--pivot", np.concatenate((big[low], big[~low])))):
        for flag in ("--no-sync", "--timings"):
            run(binary, flag, job, bsrc, "--dtype", "u32", pflag, str(2**31), "-o", sout)
            check(f"{job} 2 GiB u32 {flag}", np.fromfile(sout, dtype=np.uint32), want)
    print("ALL OK" if ok else "SOME WRONG")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
