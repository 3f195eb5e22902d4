#!/usr/bin/env python3
"""What the GPU driver alone takes to start, in a minimal program with no gpusort and no wgpu:
Vulkan's vkCreateInstance, vkEnumeratePhysicalDevices and vkCreateDevice (one compute queue, no
extensions) through the loader, and CUDA's cuInit and cuCtxCreate for comparison — the floor
under any tool's "process start to first kernel" on this machine (issue 40's 50 ms).

Usage: python3 bench/driver_start.py [RUNS=3]   (each run in a fresh process)
"""
import ctypes as C
import subprocess
import sys
import time

CHILD = r'''
import ctypes as C, time
t0 = time.perf_counter()
vk = C.CDLL("libvulkan.so.1")
class InstanceInfo(C.Structure):
    _fields_ = [("sType", C.c_uint32), ("pNext", C.c_void_p), ("flags", C.c_uint32),
                ("pApp", C.c_void_p), ("layers", C.c_uint32), ("layerNames", C.c_void_p),
                ("exts", C.c_uint32), ("extNames", C.c_void_p)]
class QueueInfo(C.Structure):
    _fields_ = [("sType", C.c_uint32), ("pNext", C.c_void_p), ("flags", C.c_uint32),
                ("family", C.c_uint32), ("count", C.c_uint32), ("prio", C.POINTER(C.c_float))]
class DeviceInfo(C.Structure):
    _fields_ = [("sType", C.c_uint32), ("pNext", C.c_void_p), ("flags", C.c_uint32),
                ("queues", C.c_uint32), ("queueInfos", C.POINTER(QueueInfo)),
                ("layers", C.c_uint32), ("layerNames", C.c_void_p),
                ("exts", C.c_uint32), ("extNames", C.c_void_p), ("features", C.c_void_p)]
t1 = time.perf_counter()
inst = C.c_void_p()
assert vk.vkCreateInstance(C.byref(InstanceInfo(sType=1)), None, C.byref(inst)) == 0
t2 = time.perf_counter()
n = C.c_uint32(0)
vk.vkEnumeratePhysicalDevices(inst, C.byref(n), None)
phys = (C.c_void_p * n.value)()
assert vk.vkEnumeratePhysicalDevices(inst, C.byref(n), phys) == 0
t3 = time.perf_counter()
fams = C.c_uint32(0)
vk.vkGetPhysicalDeviceQueueFamilyProperties(C.c_void_p(phys[0]), C.byref(fams), None)
props = (C.c_uint32 * (6 * fams.value))()
vk.vkGetPhysicalDeviceQueueFamilyProperties(C.c_void_p(phys[0]), C.byref(fams), props)
family = next(i for i in range(fams.value) if props[6 * i] & 2)
prio = C.c_float(1.0)
q = QueueInfo(sType=2, family=family, count=1, prio=C.pointer(prio))
dev = C.c_void_p()
t4 = time.perf_counter()
assert vk.vkCreateDevice(C.c_void_p(phys[0]), C.byref(DeviceInfo(sType=3, queues=1, queueInfos=C.pointer(q))), None, C.byref(dev)) == 0
t5 = time.perf_counter()
print(f"vulkan: loader {t1 - t0:.3f} s, vkCreateInstance {t2 - t1:.3f} s, "
      f"vkEnumeratePhysicalDevices {t3 - t2:.3f} s ({n.value} devices), vkCreateDevice {t5 - t4:.3f} s; "
      f"total {t5 - t0:.3f} s")
try:
    cu = C.CDLL("libcuda.so.1")
    t0 = time.perf_counter()
    assert cu.cuInit(0) == 0
    t1 = time.perf_counter()
    d = C.c_int()
    cu.cuDeviceGet(C.byref(d), 0)
    ctx = C.c_void_p()
    assert cu.cuCtxCreate_v2(C.byref(ctx), 0, d) == 0
    t2 = time.perf_counter()
    print(f"cuda: cuInit {t1 - t0:.3f} s, cuCtxCreate {t2 - t1:.3f} s; total {t2 - t0:.3f} s")
except OSError as e:
    print(f"cuda: not here ({e})")
'''

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
for r in range(runs):
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
    wall = time.perf_counter() - t
    print(f"run {r}: process {wall:.3f} s")
    print(out.stdout.strip() or out.stderr.strip()[-500:])
