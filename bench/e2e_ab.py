#!/usr/bin/env python3
"""A/B of whole-file CLI commands: two or more gpusort binaries interleaved, wall clock from
process start, each run after `sync`; min / median of the rounds, outputs compared.

Usage: python3 bench/e2e_ab.py BINARY_A,BINARY_B[,...] [ROUNDS=3] [--replace]
(--replace: each run replaces the output of the binary's previous run, as a command run again
does; otherwise the output is removed first)
Times sort, scan and compact (--no-sync and flushed) and partition (--no-sync)
of 2^28 random u32 in /tmp.
"""
import os, subprocess, sys, time
import numpy as np
bins = sys.argv[1].split(",")
rounds = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 3
replace = "--replace" in sys.argv[2:]
work = "/tmp"
path = os.path.join(work, "ab_keys.u32")
n = 1 << 28
np.random.default_rng(1).integers(0, 2**32, size=n, dtype=np.uint32).tofile(path)
open(path, "rb").read()
cmds = {
    "sort --no-sync": ["--timings", "--no-sync", "sort", path, "--dtype", "u32", "-o", "{out}"],
    "sort flushed": ["--timings", "sort", path, "--dtype", "u32", "-o", "{out}"],
    "scan --no-sync": ["--timings", "--no-sync", "scan", path, "--dtype", "u32", "-o", "{out}"],
    "scan flushed": ["--timings", "scan", path, "--dtype", "u32", "-o", "{out}"],
    "compact --no-sync": ["--timings", "--no-sync", "compact", path, "--dtype", "u32", "--below", "2147483648", "-o", "{out}"],
    "compact flushed": ["--timings", "compact", path, "--dtype", "u32", "--below", "2147483648", "-o", "{out}"],
    "partition --no-sync": ["--timings", "--no-sync", "partition", path, "--dtype", "u32", "--pivot", "2147483648", "-o", "{out}"],
}
res = {}
for b in bins:  # warm-up: shader caches, page cache of the binary
    subprocess.run([b] + [a.replace("{out}", "/tmp/ab_out") for a in cmds["sort --no-sync"]], capture_output=True)
for r in range(rounds):
    for name, args in cmds.items():
        for b in bins:
            out = f"/tmp/ab_out_{os.path.basename(b)}"
            if os.path.exists(out) and not replace:
                os.remove(out)
            subprocess.run(["sync"])
            t = time.perf_counter()
            p = subprocess.run([b] + [a.replace("{out}", out) for a in args], capture_output=True, text=True)
            wall = time.perf_counter() - t
            line = " | ".join(l for l in p.stderr.strip().splitlines())
            res.setdefault((name, b), []).append(wall)
            print(f"round {r} {name:18s} {os.path.basename(b)}: {wall:.3f} s rc={p.returncode} :: {line}", flush=True)
print("\nsummary (min / median of rounds)")
for (name, b), ws in res.items():
    print(f"{name:18s} {os.path.basename(b)}: {min(ws):.3f} / {sorted(ws)[len(ws)//2]:.3f} s")
outs = [f"/tmp/ab_out_{os.path.basename(b)}" for b in bins]
print("last outputs identical:", all(open(o, 'rb').read() == open(outs[0], 'rb').read() for o in outs[1:]))
