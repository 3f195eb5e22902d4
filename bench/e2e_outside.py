#!/usr/bin/env python3
"""Where a one-shot command's wall time goes outside its own split: process start to the first
log line ("GPU ready"), the outcome line, and the process's end (stderr lines timestamped as
they arrive), three runs of `gpusort -v --timings --no-sync sort`.

Usage: python3 bench/e2e_outside.py GPUSORT_BINARY U32_FILE
"""
import subprocess, sys, time
binary, path = sys.argv[1], sys.argv[2]
for r in range(3):
    t0 = time.perf_counter()
    p = subprocess.Popen([binary, "-v", "--timings", "--no-sync", "sort", path, "--dtype", "u32", "-o", "/tmp/outside.u32",
                          "--progress", "never"], stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        print(f"{time.perf_counter() - t0:7.3f} {line.rstrip()[:200]}")
    p.wait()
    print(f"{time.perf_counter() - t0:7.3f} exited rc={p.returncode}\n", flush=True)
