"""The sort bench's key sets in NumPy: the same arrays `gpusort bench --keys` sorts (see
crates/gpusort-bench/src/keysets.rs), from the same counter-based generator, so that CuPy is timed on
identical input. `generate(dtype, name, n, seed)` returns a NumPy array; `xp=cupy` builds it on
the GPU instead (the same bits, in a fraction of the time: the CuPy matrix fits one device call).
"""
import contextlib

import numpy as np

KEY_SETS = ["uniform", "unit", "normal", "small", "pm20", "timestamps", "sorted", "reverse",
            "nearly", "equal", "zipf", "clustered", "prices", "sizes", "prefix", "few"]
DTYPES = ["u32", "i32", "f32", "u64", "i64", "f64"]
NUMPY = {"u32": np.uint32, "i32": np.int32, "f32": np.float32,
         "u64": np.uint64, "i64": np.int64, "f64": np.float64}
CODE = {"u32": 0, "i32": 1, "f32": 2, "u64": 3, "i64": 4, "f64": 5}

U = np.uint64


def applies(dtype, name):
    if name in ("unit", "normal", "clustered", "prices"):
        return dtype[0] == "f"
    if name in ("pm20", "timestamps", "prefix"):
        return dtype[0] != "f"
    return name in KEY_SETS


def words(seed, start, count, xp=np):
    """Words start..start+count of the stream `seed` (splitmix64 of seed + (i+1)*phi)."""
    quiet = np.errstate(over="ignore") if xp is np else contextlib.nullcontext()
    with quiet:
        z = U(seed) + (xp.arange(start + 1, start + count + 1, dtype=U) * U(0x9E3779B97F4A7C15))
        z = (z ^ (z >> U(30))) * U(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> U(27))) * U(0x94D049BB133111EB)
        return z ^ (z >> U(31))


def _bits(dtype, name, seed, n, xp=np):
    """The keys as uint64 bit patterns (the low 32 bits for 32-bit types)."""
    wide = dtype[1:] == "64"
    z = words(seed, 0, n, xp)

    def floats(x):
        if dtype == "f32":
            return x.astype(np.float32).view(np.uint32).astype(U)
        return x.view(U)

    def ints(v):  # v: int64
        if wide:
            return v.view(U)
        return v.astype(np.uint32).astype(U) if dtype == "u32" else v.astype(np.int32).view(np.uint32).astype(U)

    if name in ("uniform", "sorted", "reverse", "nearly"):
        if dtype == "f32":
            return floats((z >> U(40)).astype(np.float64) / float(1 << 23) - 1.0)
        if dtype == "f64":
            return floats((z >> U(11)).astype(np.float64) / float(1 << 52) - 1.0)
        return z if wide else z >> U(32)
    if name == "unit":
        if dtype == "f32":
            return floats((z >> U(40)).astype(np.float64) / float(1 << 24))
        return floats((z >> U(11)).astype(np.float64) / float(1 << 53))
    if name == "clustered":
        if dtype == "f32":
            return floats(1.0 + (z >> U(40)).astype(np.float64) / float(1 << 24))
        return floats(1.0 + (z >> U(11)).astype(np.float64) / float(1 << 53))
    if name == "normal":
        w = words(seed, 0, 12 * n, xp).reshape(n, 12)
        acc = xp.zeros(n, dtype=np.float64)
        for k in range(12):  # in order, as the Rust side adds them
            acc = acc + (w[:, k] >> U(11)).astype(np.float64) / float(1 << 53)
        return floats(acc - 6.0)
    if name == "small":
        v = z % U(1000)
        return floats(v.astype(np.float64)) if dtype[0] == "f" else v
    if name == "pm20":
        v = z % U(1 << 21)
        if dtype in ("u32", "u64"):
            return v
        return ints(v.astype(np.int64) - (1 << 20))
    if name == "timestamps":
        if wide:
            return U(1_700_000_000_000_000) + z % U(31_536_000_000_000)
        return U(1_700_000_000) + z % U(31_536_000)
    if name == "equal":
        return xp.full(n, int(_bits(dtype, "uniform", seed, 1)[0]), dtype=U)
    if name == "zipf":
        if dtype[0] == "f":
            return floats(((z >> U(32)) >> (z & U(31))).astype(np.float64))
        if wide:
            return z >> (z & U(63))
        return (z >> U(32)) >> (z & U(31))
    if name == "prices":
        return floats((z % U(100_000)).astype(np.float64) / 100.0)
    if name == "sizes":
        e = (z >> U(58)) % (U(63) if wide else U(31))
        v = (U(1) << e) | (z & ((U(1) << e) - U(1)))
        return floats(v.astype(np.float64)) if dtype[0] == "f" else v
    if name == "prefix":
        if wide:
            return U(0x5EED5EED00000000) | (z >> U(32))
        return U(0x5EED0000) | (z >> U(48))
    if name == "few":
        return _bits(dtype, "uniform", seed, 8, xp)[(z % U(8)).astype(np.int64)]
    raise ValueError(name)


def generate(dtype, name, n, seed, xp=np):
    """The key set as an array of `xp` (NumPy, or CuPy to build it on the GPU)."""
    if not applies(dtype, name):
        raise ValueError(f"{name} is not a key set of {dtype}")
    b = _bits(dtype, name, seed, n, xp)
    t = NUMPY[dtype]
    a = b.view(t) if dtype[1:] == "64" else b.astype(np.uint32).view(t)
    if name in ("sorted", "reverse", "nearly"):
        # no set holds both zeros, so any sort gives the stable sort's bits
        a = np.sort(a, kind="stable") if xp is np else xp.sort(a)
        if name == "reverse":
            a = a[::-1].copy()
        if name == "nearly":
            # the swaps in order, on the host: a later swap may touch an earlier one's keys
            host = a if xp is np else xp.asnumpy(a)
            swaps = (words(seed ^ 0x5EED, 0, 2 * (n // 100)) % U(n)).astype(np.int64)
            _swap_in_order(host, swaps[0::2], swaps[1::2])
            a = host if xp is np else xp.asarray(host)
    return a


def _swap_in_order(a, first, second):
    """a[i], a[k] = a[k], a[i] for each (i, k) in turn."""
    for i, k in zip(first.tolist(), second.tolist()):
        a[i], a[k] = a[k], a[i]


def seed_of(log, dtype):
    """The seed `gpusort bench` uses for a size 2^log and key type."""
    return log * 1000 + CODE[dtype] * 10
