#!/usr/bin/env python3
"""Where a one-shot command's wall time goes outside its own split: process start to the first
log line ("GPU ready"), the outcome line, the final flush, and the process's end (stderr lines
timestamped as they arrive), three runs of `gpusort -vv --timings sort` of a u32 file.

Usage: python3 bench/e2e_outside.py GPUSORT_BINARY U32_FILE [--flushed]
(--no-sync unless --flushed; each run starts after `sync`)
"""
import os, subprocess, sys, time
binary, path = sys.argv[1], sys.argv[2]
flushed = "--flushed" in sys.argv[3:]
for r in range(3):
    os.sync()
    t0 = time.perf_counter()
    args = [binary, "-vv", "--timings"] + ([] if flushed else ["--no-sync"])
    p = subprocess.Popen(args + ["sort", path, "--dtype", "u32", "-o", "/tmp/outside.u32",
                          "--progress", "never"], stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        print(f"{time.perf_counter() - t0:7.3f} {line.rstrip()[:200]}")
    p.wait()
    print(f"{time.perf_counter() - t0:7.3f} exited rc={p.returncode}\n", flush=True)
