#!/usr/bin/env python3
"""CUDA's host<->GPU copy speed on this machine, the reference for `gpusort bench --suite transfer`.

Usage: python3 bench/transfer_reference.py [SIZE_LOG2=28]
Copies 2^SIZE_LOG2 u32 (1 GiB at 28) with PyTorch: from pinned (page-locked) host memory, which
is what CUDA's copy engine reads at link speed, and from ordinary pageable memory (what a NumPy
array is); each way, wall clock around a synchronised copy, best of 5 after a warm-up.
"""
import sys
import time

import torch


def best(f, reps=5):
    f()
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        f()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    log = int(sys.argv[1]) if len(sys.argv) > 1 else 28
    n = 1 << log
    nbytes = 4 * n
    dev = torch.empty(n, dtype=torch.int32, device="cuda")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {nbytes >> 20} MiB")
    for kind, pinned in (("pinned", True), ("pageable", False)):
        host = torch.empty(n, dtype=torch.int32, pin_memory=pinned)
        host.fill_(7)
        up = best(lambda: dev.copy_(host, non_blocking=pinned))
        down = best(lambda: host.copy_(dev, non_blocking=pinned))
        print(f"torch {kind:8s} host -> GPU {nbytes / up / 1e9:6.1f} GB/s   "
              f"GPU -> host {nbytes / down / 1e9:6.1f} GB/s")


if __name__ == "__main__":
    main()
