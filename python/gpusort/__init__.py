"""gpusort: sort, scan, partition, compact and stencil NumPy arrays on any GPU (Vulkan, Metal,
DX12 through wgpu), or on all CPU cores where there is no hardware GPU.

Functions follow NumPy's semantics wherever NumPy has the function:

    >>> import numpy as np, gpusort
    >>> gpusort.sort(np.array([3, 1, 2], dtype=np.uint32))
    array([1, 2, 3], dtype=uint32)

One device context per process is made on first use and kept (``gpusort.use`` chooses another);
the GIL is released while the work runs, and Ctrl-C interrupts a long call: KeyboardInterrupt is
raised within 50 ms, and work that comes in parts stops within a fraction of a second (stencils
between batches of steps or submissions, the GPU's scans between chunks, the CPU engine's sorts
and scans between the pieces its threads take), leaving the next call free; a GPU sort is one
submission and ends on its own. Arrays of dtypes
uint32, int32, float32, uint64, int64 and float64 are supported, in either byte order; bool,
8- and 16-bit integers and float16 run as the 32-bit dtype that holds them exactly (scans: not
float16 or bool), with results in their own dtype. Other dtypes raise TypeError, bad arguments
ValueError, failures on the device ``gpusort.GpuError``. Inputs are never modified.
The memory of large results is recycled once NumPy frees them (``gpusort.release_memory``).
"""

from __future__ import annotations

import os
import tempfile
import threading

import numpy as np

# Mesa's Vulkan drivers complain on stderr when XDG_RUNTIME_DIR is unset (headless machines);
# compute needs no display, so point it somewhere harmless if the process has none.
os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())

from . import _native
from ._native import GpuError

try:
    from importlib.metadata import version as _version

    __version__ = _version("gpusort")
except Exception:  # not installed as a distribution (a source tree on sys.path)
    __version__ = "0.1.0"

__all__ = [
    "sort",
    "argsort",
    "cumsum",
    "scan",
    "partition_by",
    "compact",
    "stencil",
    "info",
    "use",
    "tune",
    "release_memory",
    "GpuError",
]

_KEY_DTYPES = tuple(
    np.dtype(t) for t in ("uint32", "int32", "float32", "uint64", "int64", "float64")
)

# Narrower dtypes run as the 32-bit dtype that holds every value exactly and in the same order;
# results go back to the caller's dtype (and byte order), so each function still answers as
# NumPy does for them.
_WIDER = {
    np.dtype(k): np.dtype(v)
    for k, v in (
        ("int8", "int32"),
        ("int16", "int32"),
        ("uint8", "uint32"),
        ("uint16", "uint32"),
        ("float16", "float32"),
        ("bool", "uint32"),
    )
}


# Where the CPU engine has fewer threads than this, NumPy's own sort and cumsum answer instead:
# NumPy sorts on one core with AVX-512 and its sorts beat the engine's on 2 threads (1.1-2.1x),
# while on 16 threads the engine sorts 3.7-4.2x faster than np.sort
# (docs/BENCHMARKS.md); the engine's per-thread speed puts the break-even at 3-6 threads.
_ENGINE_THREADS_OVER_NUMPY = 8
_context = None  # _native.info() of the context in use: asked once, forgotten by use()
# NumPy's sort of a side on a thread of its own pays from sides of 2^18 elements (2 cores,
# measured for the parts-then-merge this split replaced: docs/BENCHMARKS.md)
_PART_SORT_MIN = 1 << 18


def _context_info():
    """What the context in use is (engine, threads), asked of the native side once."""
    global _context
    if _context is None:
        _context = _native.info()
    return _context


def _numpy_faster():
    """Whether NumPy's own sort and cumsum are the faster way for this context (a CPU engine
    with few threads). Either way the answer is NumPy's."""
    i = _context_info()
    return i["engine"] == "cpu" and i["threads"] < _ENGINE_THREADS_OVER_NUMPY


def _into(res, out):
    """`res`, or written into `out` (NumPy's "same_kind" casting) and `out` returned."""
    if out is None:
        return res
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a NumPy array, not {type(out).__name__}")
    if out.shape != res.shape:
        raise ValueError(f"out has shape {out.shape}; the result's is {res.shape}")
    if not np.can_cast(res.dtype, out.dtype, "same_kind"):
        raise TypeError(
            f"cannot cast the result's dtype {res.dtype} to out's {out.dtype} "
            "(NumPy's same_kind rule)"
        )
    out[...] = res
    return out


def _plain(a, what="a"):
    """`a` as an ndarray; masked arrays are refused rather than silently unmasked."""
    if isinstance(a, np.ma.MaskedArray):
        raise TypeError(
            f"{what} is a masked array, which gpusort does not take: pass {what}.compressed() "
            f"(the unmasked values) or {what}.filled(value)"
        )
    return np.asarray(a)


def _keys(a, what="a"):
    """(`a` as an array of a dtype the kernels take, `a`'s own dtype): native byte order, and
    8/16-bit integers, float16 and bool widened (not copied where it need not be)."""
    arr = _plain(a, what)
    own = arr.dtype
    native = own.newbyteorder("=")
    if native in _KEY_DTYPES:
        return (arr if own.isnative else arr.astype(native)), own
    if native in _WIDER:
        return arr.astype(_WIDER[native]), own
    raise TypeError(
        f"{what} has dtype {own}; gpusort handles uint32, int32, float32, uint64, int64 and "
        "float64 (and bool, 8- and 16-bit integers and float16 through them)"
    )


def _own(out, own):
    """A result computed in a wider or native-order dtype, as `own` (exact: its values came
    from `own`, or wrap as NumPy's arithmetic in `own` does)."""
    return out if out.dtype == own else out.astype(own)


def _flat(arr):
    """A C-contiguous 1-D view or copy of `arr`."""
    return np.ascontiguousarray(arr).reshape(-1)


def _rows(arr):
    """(flat keys, segment size or None) for a sort along the last axis."""
    if arr.ndim == 0:
        raise ValueError("a 0-d array has no axis to sort along")
    segment = arr.shape[-1] if arr.ndim > 1 else None
    return _flat(arr), segment


def _to_last(arr, axis):
    """`arr` with `axis` moved last (``axis=None``: flattened, as NumPy's sorts take it)."""
    if axis is None:
        return arr.reshape(-1)
    if arr.ndim == 0:
        raise ValueError("a 0-d array has no axis to sort along")
    return np.moveaxis(arr, axis, -1)  # AxisError (a ValueError) for an axis out of range


def _from_last(out, axis):
    """A result sorted along the last axis, back to `axis`, C-contiguous as NumPy returns it."""
    if axis is None or axis in (-1, out.ndim - 1):
        return out
    return np.ascontiguousarray(np.moveaxis(out, -1, axis))


_KINDS = (None, "quicksort", "mergesort", "heapsort", "stable")


def _sort_options(kind, order, descending):
    """NumPy's `kind` (accepted and ignored: every gpusort sort is stable, which is every kind's
    result NumPy allows), `order` (for structured arrays, which gpusort does not take) and a
    boolean `descending`."""
    if kind not in _KINDS:
        raise ValueError(f"kind {kind!r} is not one of {', '.join(map(repr, _KINDS))}")
    if order is not None:
        raise ValueError("order= names fields of structured arrays, which gpusort does not sort")
    if not isinstance(descending, (bool, np.bool_)):
        raise TypeError(f"descending must be True or False, not {descending!r}")
    return bool(descending)


def _sorted(arr, descending, want_permutation):
    flat, segment = _rows(arr)
    if flat.size == 0:
        return flat.copy(), np.zeros(0, dtype=np.int64)
    if segment == 0:
        segment = None
    keys, perm = _native.sort(flat, bool(descending), segment, want_permutation)
    return keys, perm


def _signed_zeros(arr):
    """Whether float `arr` holds a -0.0 (NumPy's sorts treat -0.0 and +0.0 as equal)."""
    if arr.dtype.kind != "f" or arr.size == 0:
        return False
    word = np.uint32 if arr.itemsize == 4 else np.uint64
    sign = 1 << (8 * arr.itemsize - 1)
    bits = np.ascontiguousarray(arr).view(word)
    return bool(np.any(bits == word(sign)))


def _numpy_sort(x, axis):
    """np.sort of `x` with -0.0 and +0.0, and NaNs, in their input order and bits, as NumPy's
    stable kind leaves them: its default kind is faster and gives the same values."""
    if x.ndim == 0 or (x.ndim > 1 and axis is not None):
        if x.dtype.kind != "f":
            return np.sort(x, axis=axis)
        signed = bool(np.any((x == 0) & np.signbit(x))) or bool(np.isnan(x).any())
        return np.sort(x, axis=axis, kind="stable" if signed else None)
    flat = x.reshape(-1)
    res = _sorted_by_halves(flat)
    if x.dtype.kind != "f":
        return res
    # NaNs last with their input bits in their input order, as the stable kind leaves them (the
    # default kind may write a NaN of its own: float16 on AVX-512 CPUs, NumPy 2.4)
    if res.size and np.isnan(res[-1]):
        nans = np.isnan(flat)
        res[res.size - int(np.count_nonzero(nans)) :] = flat[nans]
    # the zeros sit together in the result (found by bisection): in the input's order of signs
    zero = res.dtype.type(0)  # (of the array's dtype: a Python 0 would convert the array)
    lo, hi = np.searchsorted(res, zero, "left"), np.searchsorted(res, zero, "right")
    if hi > lo:
        res[lo:hi] = flat[flat == 0]
    return res


class _Helper:
    """One thread kept for the second half of a split sort (starting a thread a call cost a
    noticeable share of a 2^20-key sort on two cores). One caller at a time uses it; a caller
    that finds it busy sorts both halves itself."""

    def __init__(self):
        self._lock = threading.Lock()  # one caller's job at a time; others sort on their own
        self._job = None
        self._ready = threading.Semaphore(0)
        self._done = threading.Semaphore(0)
        self._thread = None

    def _loop(self):
        while True:
            self._ready.acquire()
            job, self._job = self._job, None
            try:
                job[1] = None
                job[0]()
            except BaseException as e:  # (MemoryError): raised again by the caller's thread
                job[1] = e
            self._done.release()

    def run_beside(self, there, here):
        """`there()` on the helper thread while `here()` runs on the caller's (both here, one
        after the other, while another caller's job holds the helper); the first exception of
        either is raised once both are done."""
        if not self._lock.acquire(blocking=False):
            here()
            there()
            return
        try:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="gpusort-sort-half",
                                                daemon=True)
                self._thread.start()
            job = [there, None]
            self._job = job
            self._ready.release()
            try:
                here()
            finally:
                self._wait_done()
        finally:
            self._lock.release()
        if job[1] is not None:
            raise job[1]

    def _wait_done(self):
        """Until the helper's job is done, through Ctrl-C too (raised once it is done): the next
        caller must not take this job's end for its own."""
        pending = None
        while True:
            try:
                self._done.acquire()
                break
            except BaseException as e:  # (KeyboardInterrupt)
                pending = pending or e
        if pending is not None:
            raise pending


_helper = _Helper()


def _helper_after_fork():
    """A forked child has no helper thread: it starts its own when it needs one."""
    global _helper
    _helper = _Helper()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_helper_after_fork)


def _sorted_by_halves(flat):
    """np.sort of 1-D `flat` on two threads: the engine splits it around the median of a sample
    (keys below, equal, above), then NumPy sorts the low side here and the high side on a
    helper thread (its sort releases the GIL); nothing is left to merge. Arrays of fewer than
    2 * `_PART_SORT_MIN` elements, and arrays whose sample's median leaves one side with over
    three quarters of the keys, are NumPy's sort whole."""
    split = None
    if _context_info()["threads"] >= 2 and flat.size >= 2 * _PART_SORT_MIN and flat.dtype in _KEY_DTYPES:
        split = _native.split_halves(flat)
    if split is None:
        return np.sort(flat)
    res, lo, hi = split
    _helper.run_beside(res[hi:].sort, res[:lo].sort)
    return res


def sort(a, axis=-1, kind=None, order=None, *, descending=False, values=None, out=None):
    """A sorted copy of `a`, like ``np.sort(a, axis, kind="stable")``: along the last axis by
    default (each row of a 2-D array on its own), along `axis`, or of the flattened array with
    ``axis=None``. NaN sorts last; -0.0 and +0.0 are equal, in their input order, as in NumPy;
    ``descending=True`` is the exact reverse apart from NaNs, which stay last. The sort is
    stable.

    With ``values`` (an array of the same shape, any dtype) returns ``(sorted_keys, values in
    that order)``. ``kind`` is accepted as NumPy's and changes nothing (the sort is always
    stable); ``order`` (structured arrays) is refused. ``out``: an array of the result's shape
    to write it into (``sort(a, out=a)`` sorts in place); not with ``values``.
    Without a GPU, on a CPU of few cores, NumPy's own sort answers (it is faster there), on the
    two sides of a split around a sampled median, a thread each.
    """
    descending = _sort_options(kind, order, descending)
    if out is not None and values is not None:
        raise ValueError("out= takes the sorted keys alone: not with values=")
    if values is None and not descending and _numpy_faster():
        # NumPy's answer by NumPy, for the dtypes the engine takes (checked on an empty array
        # of the same dtype: no widened copy)
        x = _plain(a)
        _keys(np.empty(0, x.dtype))
        return _into(_numpy_sort(x, axis), out)
    arr, own = _keys(a)
    if out is not None:
        return _into(sort(a, axis, kind, order, descending=descending), out)
    moved = _to_last(arr, axis)
    if _signed_zeros(arr):
        # ±0 equal and stable: the order argsort gives (it treats them so), applied to `a`
        perm = argsort(moved, descending=descending)
        keys = np.take_along_axis(moved, perm, axis=-1)
        if values is None:
            return _own(_from_last(keys, axis), own)
        vals = _plain(values, "values")
        if vals.shape != arr.shape:
            raise ValueError(f"values have shape {vals.shape} but the keys {arr.shape}")
        taken = np.take_along_axis(_to_last(vals, axis), perm, axis=-1)
        return _own(_from_last(keys, axis), own), _from_last(taken, axis)
    if values is None:
        keys, _ = _sorted(moved, descending, False)
        return _own(_from_last(keys.reshape(moved.shape), axis), own)
    vals = _plain(values, "values")
    if vals.shape != arr.shape:
        raise ValueError(f"values have shape {vals.shape} but the keys {arr.shape}")
    vals = _to_last(vals, axis)
    keys, perm = _sorted(moved, descending, True)
    taken = _flat(vals)[perm] if perm.size else _flat(vals).copy()
    return (
        _own(_from_last(keys.reshape(moved.shape), axis), own),
        _from_last(taken.reshape(moved.shape), axis),
    )


def argsort(a, axis=-1, kind=None, order=None, *, descending=False, out=None):
    """The indices that sort `a` along `axis` (the last by default; the flattened array with
    ``axis=None``), like ``np.argsort(a, axis, kind="stable")`` (int64); NaN last; -0.0 and
    +0.0 equal, in their input order, as in NumPy. ``kind``, ``order`` and ``out`` as in
    ``sort``."""
    descending = _sort_options(kind, order, descending)
    if out is not None:
        return _into(argsort(a, axis, kind, order, descending=descending), out)
    arr, _ = _keys(a)
    if arr.ndim == 0:
        return np.zeros(1, dtype=np.int64)  # NumPy takes a 0-d array as one element
    if _signed_zeros(arr):
        arr = arr + arr.dtype.type(0)  # -0.0 + 0.0 is +0.0; every other value (NaNs too) stays
    moved = _to_last(arr, axis)
    flat, segment = _rows(moved)
    if flat.size == 0:
        perm = np.zeros(0, dtype=np.int64)
    else:
        perm = _native.argsort(flat, bool(descending), segment or None)
    if moved.ndim > 1 and perm.size:
        rows = moved.size // moved.shape[-1]
        perm = perm.reshape(rows, moved.shape[-1]) - (
            np.arange(rows, dtype=np.int64) * moved.shape[-1]
        )[:, None]
    return _from_last(perm.reshape(moved.shape), axis)


_OPS = ("add", "max", "min", "and", "or", "xor")


def _scannable(a):
    """`a` widened as `_keys` does, refused where a scan in its own dtype would not be NumPy's
    (float16 adds round at every step in NumPy; bool has no arithmetic of its own)."""
    arr, own = _keys(a)
    if own.kind == "b" or own.newbyteorder("=") == np.dtype("float16"):
        raise TypeError(
            f"a scan of {own} is not supported: cast to float32 (float16) or an integer (bool)"
        )
    return arr, own


def scan(a, op="add", *, exclusive=False, out=None):
    """The running `op` of the flattened `a` (inclusive unless ``exclusive``), in `a`'s dtype:
    integers take add, max, min, and, or, xor (wrapping on overflow), floats add. Float sums add
    in NumPy's cumsum order without a GPU (its bits); on the GPU in another order (the last bits
    may differ). ``out``: an
    array of the result's shape to write it into (NumPy's same_kind casting)."""
    if out is not None:
        return _into(scan(a, op, exclusive=exclusive), out)
    arr, own = _scannable(a)
    if op not in _OPS:
        raise ValueError(f"unknown op {op!r} (one of {', '.join(_OPS)})")
    if arr.dtype.kind == "f" and op != "add":
        raise ValueError(f"a {op} scan of {own} is not supported (floats: add)")
    flat = _flat(arr)
    if flat.size == 0:
        return _own(flat.copy(), own)
    # 8- and 16-bit integers run as 32-bit ones: their sums wrap back exactly in astype
    out = _own(_native.scan(flat, op, not exclusive), own)
    if exclusive and op in ("max", "min") and own.kind in "iu" and arr.dtype != own:
        # the first element is the identity of `a`'s own dtype, not the wider one's cut to it
        info = np.iinfo(own)
        out[0] = info.min if op == "max" else info.max
    return out


# rows at least this long are scanned one by one on the engine; shorter rows along an axis take
# NumPy's own cumsum, where a call per row would cost more than the sums
_ROW_SCAN_MIN = 1 << 15


def cumsum(a, axis=None, dtype=None, out=None, *, exclusive=False):
    """``np.cumsum(a, axis, dtype, out)``: along `axis` (None: the flattened array), in `dtype`
    (default: NumPy's rule, signed integers and bool widen to int64, unsigned ones to uint64),
    cast into `out` where given, as NumPy does.
    ``exclusive=True`` starts from 0 and leaves out each element itself. Without a GPU float sums
    add in NumPy's order (its bits); on the GPU in another order (the last bits may differ).
    Rows along an axis shorter than 2^15 elements are NumPy's own cumsum (a call per row costs
    more there)."""
    arr = _plain(a)
    if out is not None and not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a NumPy array, not {type(out).__name__}")
    acc = None if dtype is None else np.dtype(dtype)
    x = arr.reshape(-1) if axis is None else np.moveaxis(arr, axis, -1)
    # the dtypes the engine's cumsum takes, whichever answers (an empty slice: no copy)
    probe = x.reshape(-1)[:0]
    _scannable(probe.astype(acc if acc is not None else np.int32 if probe.dtype.kind == "b" else probe.dtype))
    # on a CPU of few cores the engine is the faster too (integer sums in one pass, 32-bit ones
    # widened as it reads them; float sums in NumPy's order: the same bits)
    if x.ndim <= 1:
        res = _cumsum_flat(x, acc, exclusive)
    elif x.shape[-1] >= _ROW_SCAN_MIN:
        rows = x.reshape(-1, x.shape[-1])
        res = np.stack([_cumsum_flat(r, acc, exclusive) for r in rows]).reshape(x.shape)
    else:
        res = np.cumsum(x, axis=-1, dtype=acc)
        if exclusive:
            shifted = np.zeros_like(res)
            shifted[..., 1:] = res[..., :-1]
            res = shifted
    if axis is not None:
        res = np.ascontiguousarray(np.moveaxis(res, -1, axis))
    if out is None:
        return res
    if out.shape != res.shape:
        raise ValueError(f"out has shape {out.shape}; the result's is {res.shape}")
    out[...] = res
    return out


def _cumsum_flat(x, acc, exclusive):
    """The cumsum of 1-D `x` on the engine: in `acc` where given, else by NumPy's dtype rule."""
    if acc is not None:
        return scan(x.astype(acc, copy=False), "add", exclusive=exclusive)
    if x.dtype.kind == "b":
        x = x.astype(np.int32)  # np.cumsum counts bools in int64
    arr, _ = _scannable(x)
    flat = _flat(arr)
    if flat.size == 0:
        return np.cumsum(flat)
    # the native side widens int32 and uint32 while it copies, as np.cumsum's dtype rule asks
    return _native.cumsum(flat, not exclusive)


def _pivot(p, dtype, what):
    """`p` as a one-element array of `dtype`, refused where `dtype` cannot hold it."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        try:
            v = int(p)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"{what} {p!r} is not a valid {dtype}") from None
        info = np.iinfo(dtype)
        if v != p or not info.min <= v <= info.max:
            raise ValueError(f"{what} {p!r} is not a valid {dtype} ({info.min} to {info.max})")
        return np.array([v], dtype=dtype)
    v = float(p)
    with np.errstate(over="ignore", under="ignore"):
        cast = np.array([v], dtype=dtype)
    if (np.isinf(cast[0]) and not np.isinf(v)) or (cast[0] == 0 and v != 0):
        info = np.finfo(dtype)
        raise ValueError(
            f"{what} {p!r} is not a valid {dtype} (finite values up to ±{info.max}, "
            f"the smallest nonzero ±{info.smallest_subnormal}, or ±inf)"
        )
    return cast


def _split(a, kind, pivot, keep_rest, values, what):
    arr, own = _keys(a)
    flat = _flat(arr)
    vals = None
    if values is not None:
        vals = _flat(_plain(values, "values"))
        if vals.shape != flat.shape:
            raise ValueError(f"values have {vals.size} elements but the array {flat.size}")
    p = None
    if pivot is not None:
        # checked against the caller's dtype (bool: as the integers it compares like), then
        # exact in the wider one
        check = own.newbyteorder("=") if own.kind != "b" else arr.dtype
        p = _pivot(pivot, check, what).astype(arr.dtype)
    if flat.size == 0:
        out = (_own(flat.copy(), own), 0)
        return out if vals is None else (out[0], vals.copy(), 0)
    out, at, count = _native.split(flat, kind, p, keep_rest, vals is not None)
    out = _own(out, own)
    if vals is None:
        return out, count
    return out, vals[at], count


def partition_by(a, pivot, *, values=None):
    """A stable split of the flattened `a` by value: the elements before `pivot` in the sort
    order (NaN last, -0.0 before +0.0) first, then the rest, both in input order. Returns
    ``(array, split_index)``, or ``(array, values_moved, split_index)`` with ``values``.
    (Not ``np.partition(a, kth)``, which places the kth smallest element.)"""
    return _split(a, "below", pivot, True, values, "pivot")


def partition(a, pivot, *, values=None):
    """The earlier name of ``partition_by`` (deprecated: ``np.partition`` means another
    thing)."""
    import warnings

    warnings.warn(
        "gpusort.partition(a, pivot) is now gpusort.partition_by(a, pivot): np.partition(a, kth) "
        "means another thing",
        DeprecationWarning,
        stacklevel=2,
    )
    return partition_by(a, pivot, values=values)


def _threshold(arr, own, p, kind):
    """NumPy's ``a < p`` / ``a >= p`` for `arr`'s dtype as the kernels' total-order predicate:
    ("pivot", value), or ("all", None) / ("none", None) where every or no element compares
    true. Integers take any real threshold (2.5, or 300 for uint8: compared, not refused);
    floats take it rounded to their dtype as NumPy does; ±0.0 compare equal; NaN compares false."""
    if isinstance(p, (bool, np.bool_)):
        p = int(p)
    if arr.dtype.kind in "iub":
        try:
            x = float(p) if not isinstance(p, (int, np.integer)) else None
        except (TypeError, ValueError):
            raise ValueError(f"{kind} {p!r} is not a number") from None
        if x is not None and np.isnan(x):
            return "none", None
        info = np.iinfo(own.newbyteorder("=") if own.kind != "b" else arr.dtype)
        # a < x  <=>  a < ceil(x);  a >= x  <=>  a >= ceil(x)  (integers)
        t = int(p) if x is None else (int(np.ceil(x)) if np.isfinite(x) else (1 if x > 0 else -1) * (1 << 70))
        if t > info.max:
            return ("all" if kind == "below" else "none"), None
        if t <= info.min:
            return ("none" if kind == "below" else "all"), None
        return "pivot", t
    try:
        x = float(p)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{kind} {p!r} is not a number") from None
    if np.isnan(x):
        return "none", None
    # rounded to the caller's own float dtype, as NumPy compares a Python float with it
    t = own.newbyteorder("=").type
    with np.errstate(over="ignore", under="ignore"):
        v = t(x)
    if v == 0:
        # -0.0 in the total order: below it the negatives, at least it both zeros and above
        v = -t(0)
    return "pivot", v


def compact(a, *, below=None, at_least=None, nonzero=False, values=None):
    """The elements of the flattened `a` that match one predicate, in order, as NumPy's boolean
    masks give them: ``below=p`` (``a[a < p]``), ``at_least=p`` (``a[a >= p]``) or
    ``nonzero=True`` (``a[a != 0]``). Comparisons are NumPy's: -0.0 equals +0.0, NaN compares
    false (a NaN threshold keeps nothing), and a threshold of another type compares as NumPy
    does (``below=2.5`` on integers, ``below=300`` on uint8). With ``values`` returns
    ``(kept, values_kept)``."""
    given = [x is not None for x in (below, at_least)] + [bool(nonzero)]
    if sum(given) != 1:
        raise ValueError("give exactly one of below=, at_least= or nonzero=True")
    if nonzero:
        out = _split(a, "nonzero", None, False, values, "nonzero")
        return out[0] if values is None else (out[0], out[1])
    kind = "below" if below is not None else "at_least"
    arr, own = _keys(a)
    how, pivot = _threshold(arr, own, below if below is not None else at_least, kind)
    flat = _flat(np.asarray(a))
    vals = None if values is None else _flat(_plain(values, "values"))
    if vals is not None and vals.shape != flat.shape:
        raise ValueError(f"values have {vals.size} elements but the array {flat.size}")
    if how != "pivot":
        keep = slice(None) if how == "all" else slice(0, 0)
        kept = flat[keep].copy()
        return kept if vals is None else (kept, vals[keep].copy())
    out = _split(a, kind, pivot, False, values, kind)
    kept = out[0]
    taken = None if values is None else out[1]
    if kind == "at_least" and kept.dtype.kind == "f":
        # the total order puts NaN above everything; NumPy's NaN >= p is false
        real = ~np.isnan(kept)
        if not real.all():
            kept = kept[real]
            taken = None if taken is None else taken[real]
    return kept if values is None else (kept, taken)


_BOUNDARIES = ("reflect", "constant", "nearest", "mirror", "wrap")


def stencil(grid, *, radius=None, stencil="star", weights=None, boundary="reflect", cval=0.0, steps=1, out=None):
    """`steps` Jacobi steps of a stencil over a 1-D, 2-D or 3-D float32/float64 grid: equal
    weights summing to 1 on a ``"star"`` (the axes) or ``"box"`` of `radius`, or ``weights``, a
    dense (2R+1)^d array applied like ``scipy.ndimage.correlate(grid, weights, mode=boundary,
    cval=cval)`` each step. Grids larger than GPU memory stream through it in sub-blocks. An
    empty grid gives an empty result; ``cval`` may be NaN or ±inf, as in SciPy; ``out`` as in
    ``sort``. float64 grids give SciPy's values bit for bit; float32 grids are weighed and summed
    in float32 (SciPy sums in float64 and rounds once), so their cells may differ from SciPy's by
    a few ulps a step (a decision for speed on every GPU: few have fast float64)."""
    g = _plain(grid, "grid")
    if g.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"stencil grids are float32 or float64, not {g.dtype}")
    if g.ndim not in (1, 2, 3):
        raise ValueError(f"stencil grids are 1-D, 2-D or 3-D, not {g.ndim}-D")
    if boundary not in _BOUNDARIES:
        raise ValueError(f"unknown boundary {boundary!r} (one of {', '.join(_BOUNDARIES)})")
    if stencil not in ("star", "box"):
        raise ValueError(f"unknown stencil {stencil!r} (star or box)")
    if int(steps) != steps or not 1 <= steps < 2**32:
        raise ValueError(f"steps must be an integer from 1 to 2**32 - 1, not {steps!r}")
    w = None
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        side = w.shape[0] if w.ndim else 0
        if w.ndim != g.ndim or any(n != side for n in w.shape) or side % 2 == 0:
            raise ValueError(
                f"weights have shape {w.shape}; a {g.ndim}-D grid needs a (2R+1)^{g.ndim} array"
            )
        # the weights give the radius; one given beside them must agree
        if radius is not None and radius != side // 2:
            raise ValueError(f"radius={radius!r} disagrees with weights of shape {w.shape}")
        radius = side // 2
    if radius is None:
        radius = 1
    if int(radius) != radius or not 1 <= radius < 2**32:
        raise ValueError(f"radius must be an integer from 1 to 2**32 - 1, not {radius!r}")
    cv = float(_pivot(cval, g.dtype, "cval")[0])
    if g.size == 0:
        return _into(g.copy(), out)  # as scipy.ndimage.correlate: nothing to weigh
    if g.ndim == 1:
        # a 1-D grid as identical rows of a 2-D one (as many as the radius, which the 2-D job
        # needs an axis to hold), its weights the middle row of a square: the other rows weigh
        # nothing (zero weights are no taps), so every boundary gives the 1-D answer
        r = int(radius)
        side = 2 * r + 1
        row = w if w is not None else np.full(side, 1.0 / side)  # star and box: the one axis
        square = np.zeros((side, side))
        square[r] = row
        rows = np.ascontiguousarray(np.broadcast_to(g, (r, g.size)))
        res = _native.stencil(rows, r, stencil, _flat(square), boundary, cv, int(steps))[0]
        return _into(np.ascontiguousarray(res), out)
    if w is not None:
        w = _flat(w)
    res = _native.stencil(
        np.ascontiguousarray(g), int(radius), stencil, w, boundary, cv, int(steps)
    )
    return _into(res, out)


def info():
    """Where gpusort runs: engine ("gpu" or "cpu"), adapter, backend, driver, subgroups and
    limits (GPU), "devices" (the adapters a call uses), "tuned" (when `gpusort tune` measured the tuning in use for this GPU, None for
    the defaults), CPU threads, and the memory kept for recycling large results
    ("result_pool_bytes", at most "result_pool_limit"; see `release_memory`). Makes the context
    if it was not made yet."""
    return _native.info()


def tune(quick=False, verbose=False):
    """Measure the fastest tuning of the GPU in use and keep it, as ``gpusort tune`` does: the
    sort's, scans' and stencils' candidate shapes are timed on this device (every candidate's
    result checked) and the fastest stored in the user's cache directory (``GPUSORT_CACHE_DIR``
    moves it), where later processes, the CLI and this process's next calls find it. `quick`:
    small sizes and a few candidates (seconds; what a software adapter gets anyway); `verbose`:
    each decision printed to stderr. A full run takes a few minutes on a large GPU.

    Returns a dict: "tuning" (what was stored: adapter, driver, date and each family's
    settings), "path" (the file), and "sort_gain", "scan_gain", "stencil_gain" (the tuned
    speed over the defaults' on the cases timed; 1.0 where the defaults were kept). Raises
    ValueError on the CPU engine (``use(backend="gpu")`` tunes a software adapter)."""
    import json

    text, path, gains = _native.tune(bool(quick), bool(verbose))
    return {
        "tuning": json.loads(text),
        "path": path,
        "sort_gain": gains[0],
        "scan_gain": gains[1],
        "stencil_gain": gains[2],
    }


def release_memory():
    """Free the host memory gpusort keeps for recycling; returns the bytes freed.

    The memory of a large result (8 MiB and up) goes back to gpusort when NumPy frees the array,
    and the next result of about the same size reuses it: a fresh array costs its size in page
    faults, a large part of a fast call (like CuPy's and PyTorch's caching allocators, for host
    memory). At most an eighth of the machine's memory (4 GiB at most) is kept idle; this frees
    it now."""
    return _native.release_memory()


def use(backend=None, adapter=None, devices=None, _spread_always=False):
    """Choose where later calls run: backend "auto" (default: a hardware GPU if there is one,
    else the CPU engine), "cpu", "gpu" (any adapter, software ones too), "vulkan", "metal",
    "dx12" or "gl"; `adapter` a substring of the adapter's name or its index; `devices` several
    GPUs for each call: "all", a count (2), or a list of indices or names ("0,1"; one named
    twice gives two devices on it). Sorts too large for one GPU sort are split by key range
    over them and stencils held in slabs across them, with the results one device gives; other
    calls run on the first. Replaces the context in use; where it fails, the context in use
    stays."""
    global _context
    _context = None
    given = {"adapter": adapter, "devices": devices}
    try:
        _native.use_device(
            backend,
            None if adapter is None else str(adapter),
            None if devices is None else str(devices),
            bool(_spread_always),
        )
    except (ValueError, GpuError) as e:
        # the library names a setting in words (adapter "x"); a Python user reads arguments
        msg = str(e)
        for name, value in given.items():
            if value is not None:
                for quoted in (f'"{value}"', f"'{value}'", f"{value}:"):
                    said = f"{name}={str(value)!r}" + (":" if quoted.endswith(":") else "")
                    msg = msg.replace(f"{name} {quoted}", said)
        raise type(e)(msg) from None
