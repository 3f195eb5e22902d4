"""gpusort's Python package against NumPy and SciPy, on the CPU engine and on the GPU kernels
(lavapipe in CI): every function x dtype x edge, errors, and the persistent context."""

import numpy as np
import pytest
import scipy.ndimage as ndi

import gpusort

DTYPES = [np.uint32, np.int32, np.float32, np.uint64, np.int64, np.float64]
SIZES = [0, 1, 2, 7, 1023, 1024, 1025, 4097, 65537]


@pytest.fixture(params=["cpu", "gpu"], autouse=True)
def engine(request):
    gpusort.use(backend=request.param)
    yield request.param
    gpusort.use()


def data(dtype, n, seed=0, kind="random"):
    r = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if kind == "equal":
        return np.full(n, 3, dtype=dt)
    if kind == "small":
        # small values of both signs (unsigned: from 0): signed keys of a narrow width, which the
        # radix sort sorts on the passes that width needs
        low = -1000 if dt.kind != "u" else 0
        return r.integers(low, 1000, n).astype(dt)
    if dt.kind == "f":
        a = r.normal(size=n).astype(dt)
        if kind == "special" and n >= 8:
            a[:8] = [np.nan, -0.0, 0.0, np.inf, -np.inf, 1.0, -1.0, np.nan]
            r.shuffle(a)
        return a
    info = np.iinfo(dt)
    if kind == "special" and n >= 4:
        a = r.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        a[:4] = [info.min, info.max, 0, info.min]
        return a
    return r.integers(info.min, info.max, n, dtype=dt, endpoint=True)


def same(got, want):
    """Equal element for element, NaN equal to NaN; dtypes and shapes too."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    assert np.array_equal(got, want, equal_nan=np.dtype(got.dtype).kind == "f")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kind", ["random", "special", "equal", "small"])
def test_sort_and_argsort_match_numpy(dtype, n, kind):
    a = data(dtype, n, n, kind)
    before = a.copy()
    same(gpusort.sort(a), np.sort(a, kind="stable"))
    same(a, before)  # the input is not modified
    # -0.0 and +0.0 equal, in input order, as NumPy's stable sort: bit for bit
    assert gpusort.sort(a).tobytes() == np.sort(a, kind="stable").tobytes()
    same(gpusort.argsort(a), np.argsort(a, kind="stable"))


def test_large_sorts_match_numpy_bit_for_bit(engine):
    """Arrays a CPU engine of few threads sorts by NumPy's sort of each side of a split around a
    sampled median (gpusort._sorted_by_halves): NaN, ±0 (in input order), all-equal arrays
    (every key equal to the pivot), every dtype, on two and three engine threads, bit for bit as
    np.sort(kind="stable"); the split itself at a zero pivot: tests/cpu_engine.rs."""
    import subprocess
    import sys

    if engine != "cpu":
        return  # (the GPU engine sorts an array whole: the tests above)
    code = (
        "import numpy as np, gpusort, sys\n"
        "sys.path.insert(0, %r)\n"
        "from test_gpusort import data, DTYPES\n"
        "gpusort.use(backend='cpu')\n"
        "for n in (2**19 + 3, 3 * 2**18 + 5):\n"
        "    for dt in DTYPES:\n"
        "        for kind in ('special', 'equal'):\n"
        "            a = data(dt, n, n, kind)\n"
        "            if kind == 'special' and np.dtype(dt).kind == 'f':\n"
        "                a[n // 3 : n // 3 + 500] = 0.0\n"
        "                a[n // 2 : n // 2 + 500] = -0.0\n"
        "                a[::4099] = np.nan\n"
        "            got, want = gpusort.sort(a), np.sort(a, kind='stable')\n"
        "            assert got.tobytes() == want.tobytes(), (dt, n, kind)\n"
        "print('parts', gpusort.info()['threads'])\n"
    ) % str(__import__("pathlib").Path(__file__).parent)
    for threads in ("2", "3"):
        env = dict(__import__("os").environ, RAYON_NUM_THREADS=threads)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        assert r.stdout.split() == ["parts", threads]


def test_split_sorts_from_many_threads_and_after_fork(engine):
    """The split sort's helper thread (gpusort._sorted_by_halves) serves one caller at a time:
    callers on several threads at once still get np.sort's answer (those finding it busy sort
    both halves themselves), and a child made by os.fork() after the parent used the engine
    (multiprocessing's default start on Linux), which inherits neither the helper's nor the
    engine's threads, starts its own rather than waiting on its parent's forever."""
    import os
    import subprocess
    import sys

    if engine != "cpu":
        return  # (the GPU engine sorts an array whole)
    code = (
        "import numpy as np, gpusort, os, threading\n"
        "gpusort.use(backend='cpu')\n"
        "r = np.random.default_rng(5)\n"
        "arrays = [r.integers(0, 2**32, 2**19 + 17 * i, dtype=np.uint32) for i in range(6)]\n"
        "wrong = []\n"
        "def work(a):\n"
        "    for _ in range(3):\n"
        "        if gpusort.sort(a).tobytes() != np.sort(a).tobytes():\n"
        "            wrong.append(a.size)\n"
        "ts = [threading.Thread(target=work, args=(a,)) for a in arrays]\n"
        "[t.start() for t in ts]\n"
        "[t.join() for t in ts]\n"
        "assert not wrong, wrong\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    a = arrays[1]\n"
        "    ok = gpusort.sort(a).tobytes() == np.sort(a).tobytes()\n"
        "    ok &= (gpusort.argsort(a) == np.argsort(a, kind='stable')).all()\n"
        "    ok &= (gpusort.cumsum(a) == np.cumsum(a)).all()\n"
        "    g = r.random((300, 400))\n"
        "    ok &= gpusort.stencil(g, radius=1, steps=2).shape == g.shape\n"
        "    os._exit(0 if ok else 3)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "assert os.waitstatus_to_exitcode(status) == 0, status\n"
        "print('ok')\n"
    )
    env = dict(os.environ, RAYON_NUM_THREADS="2")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["ok"]


def test_a_forked_child_of_a_gpu_parent_is_told_what_to_do():
    """A child made by os.fork() after the parent opened a GPU cannot use the parent's device
    (it waited forever before): its first call raises GpuError saying so and what to do instead,
    gpusort.use() gives it a context of its own, and the parent goes on unharmed."""
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np, gpusort, os\n"
        "gpusort.use(backend='gpu')\n"
        "a = np.arange(5000, dtype=np.uint32)[::-1].copy()\n"
        "assert (gpusort.sort(a) == np.sort(a)).all()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    try:\n"
        "        gpusort.sort(a)\n"
        "        os._exit(3)\n"
        "    except gpusort.GpuError as e:\n"
        "        if 'forked' not in str(e) or 'spawn' not in str(e):\n"
        "            os._exit(4)\n"
        "    gpusort.use(backend='cpu')\n"
        "    os._exit(0 if (gpusort.sort(a) == np.sort(a)).all() else 5)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "assert os.waitstatus_to_exitcode(status) == 0, status\n"
        "assert (gpusort.sort(a) == np.sort(a)).all()\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["ok"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_descending_keeps_nan_last(dtype):
    a = data(dtype, 5000, 1, "special")
    got = gpusort.sort(a, descending=True)
    finite = a[~np.isnan(a)] if np.dtype(dtype).kind == "f" else a
    want = np.sort(finite, kind="stable")[::-1]
    same(got[: want.size], want)
    assert np.all(np.isnan(got[want.size:]))
    p = gpusort.argsort(a, descending=True)
    assert p.dtype == np.int64
    same(a[p], got)


@pytest.mark.parametrize("dtype", DTYPES)
def test_values_rows_and_non_contiguous_inputs(dtype):
    a = data(dtype, 3000, 2)
    v = np.arange(3000, dtype=np.float64) * 0.5
    keys, moved = gpusort.sort(a, values=v)
    order = np.argsort(a, kind="stable")
    same(keys, a[order])
    same(moved, v[order])
    grid = data(dtype, 40 * 75, 3).reshape(40, 75)
    same(gpusort.sort(grid), np.sort(grid, axis=-1, kind="stable"))
    same(gpusort.argsort(grid), np.argsort(grid, axis=-1, kind="stable"))
    strided = grid[:, ::3]
    same(gpusort.sort(strided), np.sort(strided, axis=-1, kind="stable"))
    with pytest.raises(ValueError):
        gpusort.sort(a, values=v[:-1])
    with pytest.raises(ValueError):
        gpusort.sort(np.array(1, dtype=dtype))


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.uint64, np.float64])
def test_sorts_along_any_axis_as_numpy(dtype):
    cube = data(dtype, 6 * 35 * 9, 4, "special").reshape(6, 35, 9)
    for axis in (0, 1, 2, -1, -2, -3, None):
        want = np.sort(cube, axis=axis, kind="stable")
        got = gpusort.sort(cube, axis=axis)
        same(got, want)
        assert got.flags["C_CONTIGUOUS"]
        p = gpusort.argsort(cube, axis=axis)
        assert p.dtype == np.int64 and p.shape == want.shape
        if axis is None:
            same(cube.reshape(-1)[p], want)
        else:
            same(np.take_along_axis(cube, p, axis=axis), want)
    values = np.arange(cube.size, dtype=np.float32).reshape(cube.shape)
    keys, moved = gpusort.sort(cube, 0, values=values)
    order = np.argsort(cube, axis=0, kind="stable")
    same(keys, np.take_along_axis(cube, order, axis=0))
    same(moved, np.take_along_axis(values, order, axis=0))
    same(gpusort.sort(np.array(5, dtype=dtype), axis=None), np.array([5], dtype=dtype))
    same(gpusort.sort(np.zeros((0, 4), dtype=dtype), axis=0), np.zeros((0, 4), dtype=dtype))
    for bad in (3, -4):
        with pytest.raises(ValueError):
            gpusort.sort(cube, axis=bad)
        with pytest.raises(ValueError):
            gpusort.argsort(cube, axis=bad)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 1025, 70001])
def test_cumsum_and_scans_match_numpy(dtype, n, engine):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        a = np.random.default_rng(n).random(n).astype(dt)
    else:
        a = np.random.default_rng(n).integers(0, 1000, n).astype(dt)
    want = np.cumsum(a)
    got = gpusort.cumsum(a)
    assert got.dtype == want.dtype
    if dt.kind == "f" and engine == "cpu":
        # without a GPU float sums add in NumPy's order: its bits, a leading -0.0 kept; exclusive
        # ones are NumPy's shifted by one after +0.0
        assert got.tobytes() == want.tobytes()
        signed = a.copy()
        signed[:1] = -0.0
        assert gpusort.cumsum(signed).tobytes() == np.cumsum(signed).tobytes()
        shifted = np.concatenate([np.zeros(min(n, 1), dt), np.cumsum(signed)[:-1]])
        assert gpusort.cumsum(signed, exclusive=True).tobytes() == shifted.tobytes()
        assert gpusort.scan(a).tobytes() == want.tobytes()
    elif dt.kind == "f":
        assert np.allclose(got, want, rtol=1e-5 if dt == np.float32 else 1e-12)
    else:
        same(got, want)
        ex = gpusort.cumsum(a, exclusive=True)
        same(ex, np.concatenate([np.zeros(min(n, 1), want.dtype), want[:-1]]))
        for op, ufunc in [("max", np.maximum), ("min", np.minimum), ("and", np.bitwise_and),
                          ("or", np.bitwise_or), ("xor", np.bitwise_xor)]:
            got = gpusort.scan(a, op)
            assert got.dtype == a.dtype
            if n:
                same(got, ufunc.accumulate(a))
    with pytest.raises(ValueError):
        gpusort.scan(a, "mul")


@pytest.mark.parametrize("dtype", DTYPES)
def test_scans_read_views_in_place_and_leave_them_alone(dtype):
    # contiguous inputs are read where they lie (no copy), strided ones copied; neither changes,
    # and a result never shares memory with its input
    dt = np.dtype(dtype)
    base = (np.random.default_rng(5).integers(-500, 500, 30001)).astype(dt)
    keep = base.copy()
    for view in (base, base[::3], base[7:]):
        got = gpusort.cumsum(view)
        if dt.kind == "f":
            assert np.allclose(got, np.cumsum(view), rtol=1e-5 if dt == np.float32 else 1e-12)
        else:
            same(got, np.cumsum(view))
        assert not np.shares_memory(got, base)
    same(base, keep)
    base.setflags(write=False)
    if dt.kind != "f":
        same(gpusort.scan(base, "max"), np.maximum.accumulate(base))


def test_large_results_recycle_freed_memory_and_show_only_new_values(engine):
    # a result of 1 MiB and more returns its memory to gpusort when NumPy frees it, and the next
    # result of about that size reuses it: the values are always the new call's
    pooled = lambda: gpusort.info()["result_pool_bytes"]
    gpusort.release_memory()
    assert pooled() == 0
    n = 3 << 20  # 12 MiB of 32-bit elements
    r = np.random.default_rng(21)
    x = r.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    first = gpusort.scan(x, "or")  # (a sort may be NumPy's own on the CPU engine)
    same(first, np.bitwise_or.accumulate(x))
    assert pooled() == 0
    view = first[5:]  # a view keeps the memory in use
    del first
    assert pooled() == 0
    del view
    block = pooled()
    assert block >= n * 4
    # the same size, other data and another call: the block is taken, every value written anew
    y = r.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    got = gpusort.scan(y, "max")
    assert pooled() == 0
    same(got, np.maximum.accumulate(y))
    kept = got.copy()
    # a smaller result (90%) takes a freed block too; a live result is never handed out again
    z = r.integers(-1000, 1000, n * 9 // 10).astype(np.int32)
    other = gpusort.cumsum(z)  # int64: a size no block serves
    same(other, np.cumsum(z))
    same(got, kept)
    del got
    assert pooled() == block
    part = gpusort.scan(z, "add")
    assert pooled() == 0
    same(part, np.cumsum(z, dtype=np.int32))
    # argsorts' int64 permutations and stencils' grids come from the pool too
    del other, part
    assert pooled() >= block
    w = r.random(n // 2)  # float64: 12 MiB
    for _ in range(2):
        order = gpusort.argsort(w)  # int64: 12 MiB
        same(order, np.argsort(w, kind="stable"))
        del order
    g = r.random((1024, 3 << 10)).astype(np.float32)
    want = ndi.correlate(g, np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]], np.float32) / 5, mode="reflect")
    for _ in range(2):
        got = gpusort.stencil(g, weights=np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]]) / 5)
        assert np.allclose(got, want, rtol=1e-5, atol=1e-6)
        del got
    assert 0 < pooled() <= gpusort.info()["result_pool_limit"]
    freed = gpusort.release_memory()
    assert freed > 0 and pooled() == 0


def test_integer_scans_wrap():
    a = np.array([np.iinfo(np.int32).max, 1, 1], dtype=np.int32)
    same(gpusort.scan(a), np.array([2147483647, -2147483648, -2147483647], dtype=np.int32))
    same(gpusort.cumsum(a), np.cumsum(a))  # widened: no wrap
    b = np.array([2**64 - 1, 2], dtype=np.uint64)
    same(gpusort.scan(b), np.array([2**64 - 1, 1], dtype=np.uint64))


@pytest.mark.parametrize("dtype", DTYPES)
def test_partition_and_compact_match_masks(dtype):
    a = data(dtype, 20001, 4, "special")
    v = np.arange(a.size, dtype=np.int64)
    pivot = 0
    # before the pivot in the sort order: for floats -0.0 comes before +0.0, and NaN after all
    below = a < pivot
    if np.dtype(dtype).kind == "f":
        below |= (a == 0) & np.signbit(a)
    out, split = gpusort.partition_by(a, pivot)
    assert split == int(np.count_nonzero(below))
    same(out, np.concatenate([a[below], a[~below]]))
    out, moved, split = gpusort.partition_by(a, pivot, values=v)
    same(moved, np.concatenate([v[below], v[~below]]))
    # compact compares as NumPy's masks do: ±0.0 equal, NaN never kept
    same(gpusort.compact(a, below=pivot), a[a < pivot])
    same(gpusort.compact(a, at_least=pivot), a[a >= pivot])
    kept, kv = gpusort.compact(a, at_least=pivot, values=v)
    same(kv, v[a >= pivot])
    same(gpusort.compact(a, nonzero=True), a[a != 0])
    kept, kv = gpusort.compact(a, nonzero=True, values=v)
    same(kv, v[a != 0])
    with pytest.raises(ValueError):
        gpusort.compact(a)
    with pytest.raises(ValueError):
        gpusort.compact(a, below=1, nonzero=True)


def test_pivots_a_dtype_cannot_hold_are_refused():
    f = np.ones(10, np.float32)
    for bad in [1e40, -1e40, 1e-50]:
        with pytest.raises(ValueError, match="float32"):
            gpusort.partition_by(f, bad)
    # compact compares instead, as NumPy's a < p does
    same(gpusort.compact(np.ones(3, np.uint32), below=-1), np.ones(0, np.uint32))
    same(gpusort.compact(np.ones(3, np.int32), at_least=2**40), np.ones(0, np.int32))
    out, split = gpusort.partition_by(f, np.inf)
    assert split == 10


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cval", [np.nan, np.inf, -np.inf])
def test_a_non_finite_constant_boundary_is_scipys(engine, dtype, cval):
    """cval=nan or ±inf as scipy.ndimage.correlate takes them: NaN and infinities where the
    boundary reaches, the same finite values elsewhere (1-D, 2-D and 3-D grids)."""
    r = np.random.default_rng(8)
    for shape in [(40,), (23, 31), (7, 9, 11)]:
        g = r.random(shape).astype(dtype)
        w = r.random((3,) * len(shape))
        want = g
        for _ in range(2):
            want = ndi.correlate(want, w.astype(dtype), mode="constant", cval=cval)
        got = gpusort.stencil(g, weights=w, boundary="constant", cval=cval, steps=2)
        assert got.dtype == g.dtype and got.shape == g.shape
        assert np.array_equal(np.isnan(got), np.isnan(want)), shape
        assert np.array_equal(np.isinf(got), np.isinf(want)), shape
        tol = 1e-5 if dtype == np.float32 else 1e-12
        finite = np.isfinite(want)
        assert finite.any() and np.allclose(got[finite], want[finite], rtol=tol, atol=tol)
        assert np.array_equal(got[np.isinf(want)], want[np.isinf(want)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("boundary", ["reflect", "constant", "nearest", "mirror", "wrap"])
def test_stencils_match_scipy(dtype, boundary):
    r = np.random.default_rng(5)
    g = r.random((37, 50)).astype(dtype)
    w = np.zeros((5, 5))
    w[2, :] = 1 / 9
    w[:, 2] = 1 / 9
    want = g
    for _ in range(3):
        want = ndi.correlate(want, w.astype(dtype), mode=boundary, cval=0.25)
    got = gpusort.stencil(g, radius=2, boundary=boundary, cval=0.25, steps=3)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert got.dtype == g.dtype and got.shape == g.shape
    assert np.allclose(got, want, rtol=tol, atol=tol)
    wr = r.random((3, 3, 3))
    cube = r.random((9, 10, 11)).astype(dtype)
    got = gpusort.stencil(cube, weights=wr, boundary=boundary, steps=2)
    want = ndi.correlate(ndi.correlate(cube, wr.astype(dtype), mode=boundary), wr.astype(dtype), mode=boundary)
    assert np.allclose(got, want, rtol=tol, atol=tol)


NARROW = [np.int8, np.uint8, np.int16, np.uint16, np.float16, np.bool_]


def narrow(dtype, n, seed):
    r = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return r.random(n) < 0.3
    if dt.kind == "f":
        a = (r.normal(size=n) * 100).astype(dt)
        if n >= 8:
            a[:8] = [np.nan, -0.0, 0.0, np.inf, -np.inf, 65504, -65504, 6e-8]
            r.shuffle(a)
        return a
    info = np.iinfo(dt)
    return r.integers(info.min, info.max, n, dtype=dt, endpoint=True)


@pytest.mark.parametrize("dtype", NARROW)
@pytest.mark.parametrize("n", [0, 1, 1000, 40001])
def test_narrow_dtypes_answer_in_their_own_dtype(dtype, n):
    a = narrow(dtype, n, n)
    same(gpusort.sort(a), np.sort(a, kind="stable"))
    got = gpusort.sort(a, descending=True)
    assert got.dtype == a.dtype
    p = gpusort.argsort(a)
    same(a[p], np.sort(a, kind="stable"))
    if np.dtype(dtype).kind != "f":
        same(p, np.argsort(a, kind="stable"))  # -0.0/+0.0 aside, the same stable order
    if np.dtype(dtype).kind in "iu":
        same(gpusort.cumsum(a), np.cumsum(a))
        same(gpusort.scan(a, "add"), np.cumsum(a).astype(a.dtype))  # wraps as a's dtype
        same(gpusort.scan(a, "max"), np.maximum.accumulate(a))
        same(gpusort.scan(a, "xor", exclusive=True)[1:] if n else gpusort.scan(a, "xor"),
             np.bitwise_xor.accumulate(a)[:-1] if n else a)
    if np.dtype(dtype).kind == "b":
        same(gpusort.cumsum(a), np.cumsum(a))
        same(gpusort.compact(a, nonzero=True), a[a != 0])
        return
    pivot = 1 if np.dtype(dtype).kind in "iu" else 0.5
    out, split = gpusort.partition_by(a, pivot)
    below = gpusort.compact(a, below=pivot)
    assert out.dtype == a.dtype and below.dtype == a.dtype
    same(out[:split], below)
    same(gpusort.compact(a, at_least=pivot), a[a >= pivot])
    if np.dtype(dtype).kind in "iu":
        same(below, a[a < pivot])


def test_byte_swapped_arrays_keep_their_dtype():
    a = np.random.default_rng(5).integers(-1000, 1000, 5000).astype(">i4")
    same(gpusort.sort(a), np.sort(a, kind="stable"))
    same(gpusort.argsort(a), np.argsort(a, kind="stable"))
    same(gpusort.cumsum(a), np.cumsum(a))
    f = a.astype(">f8") / 7
    same(gpusort.sort(f), np.sort(f, kind="stable"))
    same(gpusort.compact(f, below=0.0), f[f < 0])


def test_bad_types_and_arguments_raise_the_right_exception():
    for dtype in [np.complex64, object, "U3", "datetime64[s]"]:
        with pytest.raises(TypeError):
            gpusort.sort(np.zeros(4, dtype=dtype))
    for dtype in [np.float16, np.bool_]:
        with pytest.raises(TypeError):
            gpusort.scan(np.zeros(4, dtype=dtype))
    with pytest.raises(TypeError):
        gpusort.cumsum(np.zeros(4, dtype=np.float16))
    with pytest.raises(ValueError):
        gpusort.partition_by(np.zeros(4, dtype=np.int8), 300)
    with pytest.raises(TypeError):
        gpusort.stencil(np.zeros((4, 4), np.int32))
    with pytest.raises(ValueError):
        gpusort.stencil(np.zeros((2, 2, 2, 2), np.float32))
    with pytest.raises(ValueError):
        gpusort.stencil(np.zeros((4, 4), np.float32), boundary="sideways")
    with pytest.raises(ValueError):
        gpusort.stencil(np.zeros((4, 4), np.float32), weights=np.ones((2, 2)))
    with pytest.raises(ValueError):
        gpusort.use(backend="abacus")
    # arguments beyond what the engine takes, or contradicting each other: ValueError, not
    # OverflowError or a silent choice
    for kw in ({"radius": 2**40}, {"steps": 2**32}, {"radius": 0}):
        with pytest.raises(ValueError):
            gpusort.stencil(np.zeros((4, 4), np.float32), **kw)
    with pytest.raises(ValueError, match="disagrees"):
        gpusort.stencil(np.zeros((8, 8), np.float32), radius=2, weights=np.ones((3, 3)) / 9)
    assert issubclass(gpusort.GpuError, RuntimeError)
    # multiprocessing's workers send errors back pickled
    import pickle

    back = pickle.loads(pickle.dumps(gpusort.GpuError("device lost")))
    assert type(back) is gpusort.GpuError and str(back) == "device lost"


def test_one_context_serves_many_calls(engine):
    first = gpusort.info()
    assert first["engine"] == engine
    for i in range(200):
        a = data(np.uint32, 100 + i, i)
        same(gpusort.sort(a), np.sort(a))
    assert gpusort.info() == first


def _interrupted(code, after_s, timeout_s, env=None):
    """Run `code` in a fresh interpreter (in `env`), send it SIGINT `after_s` seconds after it
    prints "ready", and return its exit code and the rest of its output."""
    import signal
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(after_s)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=timeout_s)
    return p.returncode, out


def _interrupted_timings(code, timeout_s, env=None):
    """`_interrupted` 1 s after "ready" for a `code` that exits 3 after printing "interrupted
    after T s next N s busy B s ...": (T, N, B, its output)."""
    returncode, out = _interrupted(code, after_s=1.0, timeout_s=timeout_s, env=env)
    assert returncode == 3, out
    words = out.split()
    return float(words[2]), float(words[5]), float(words[8]), out


def test_ctrl_c_interrupts_a_long_call(engine):
    """A long call (a stencil of many steps) is interrupted by SIGINT within a second, with
    KeyboardInterrupt, instead of running to its end."""
    import textwrap

    code = textwrap.dedent(
        f"""
        import os, signal, sys, time, numpy as np, gpusort
        # Python's own handler, even where the parent left SIGINT ignored (a shell's background
        # job does): the test is of gpusort's calls under it
        signal.signal(signal.SIGINT, signal.default_int_handler)
        gpusort.use(backend="{engine}")
        g = np.zeros((1024, 1024), np.float32)
        gpusort.stencil(g, steps=1)  # the context and kernels exist before the long call
        t = time.time()
        try:
            print("ready", flush=True)
            gpusort.stencil(g, radius=4, stencil="box", steps=100000)
        except KeyboardInterrupt:
            took = time.time() - t
            # the work stops too (the CPU engine's steps, and the GPU's submissions: lavapipe's
            # run on the CPU): the process then uses next to no CPU time
            time.sleep(0.5)
            before = sum(os.times()[:2])
            time.sleep(1.0)
            busy = sum(os.times()[:2]) - before
            print("interrupted after %.2f s, busy %.2f s of 1 after" % (took, busy), flush=True)
            # a GPU's interrupted work still runs on its worker thread: leave without finalising
            os._exit(3)
        """
    )
    # the signal must find the long call running (it runs for minutes): sent at once, on a loaded
    # machine it could land before the call began, and an interpreter leaving with a traceback
    # then waits on the driver's threads
    returncode, out = _interrupted(code, after_s=2.0, timeout_s=30)
    assert returncode == 3, out
    # (measured from just before the call: the 2 s before the signal, then at most 3 s)
    took = float(out.split()[2].rstrip(","))
    assert took < 5.0, out
    busy = float(out.split()[5])
    assert busy < 0.3, out  # (two cores at work would be 2.0)


import time  # noqa: E402  (used by the test above)


def test_ctrl_c_stops_a_streamed_gpu_scan():
    """A long scan on the GPU engine (lavapipe here) stops between its chunks on SIGINT: the
    call raises KeyboardInterrupt within a second or so, and the next call does not queue behind
    the rest of the abandoned one (on the GPU engine in either mode of the fixture: the CPU
    engine's cumsum is NumPy's own on few cores)."""
    import textwrap

    code = textwrap.dedent(
        """
        import os, signal, time, numpy as np, gpusort
        signal.signal(signal.SIGINT, signal.default_int_handler)
        gpusort.use(backend="gpu")
        a = np.ones(1 << 28, np.uint32)
        small = a[: 1 << 20]
        gpusort.cumsum(small, dtype=np.uint32)  # the context and kernels exist first
        t = time.time()
        gpusort.cumsum(small, dtype=np.uint32)
        alone = time.time() - t
        t = time.time()
        try:
            print("ready", flush=True)
            gpusort.cumsum(a, dtype=np.uint32)
            print("finished after %.2f s" % (time.time() - t), flush=True)
            os._exit(4)
        except KeyboardInterrupt:
            took = time.time() - t
            t = time.time()
            r = gpusort.cumsum(small, dtype=np.uint32)
            after = time.time() - t
            assert int(r[-1]) == len(small)
            # the abandoned scan's chunks stopped too (lavapipe's work runs on the CPU)
            time.sleep(0.5)
            before = sum(os.times()[:2])
            time.sleep(1.0)
            busy = sum(os.times()[:2]) - before
            print("interrupted after %.2f s next %.2f s busy %.2f s alone %.2f s"
                  % (took, after, busy, alone), flush=True)
            os._exit(3)
        """
    )
    # (the whole scan takes several seconds on lavapipe: 4 s for 2^27 elements on 2 cores)
    took, after, busy, out = _interrupted_timings(code, timeout_s=60)
    assert took < 4.0, out
    # at most the chunks already submitted finish before the next call's work
    assert after < 2.0, out
    assert busy < 0.3, out  # (two cores at work would be 2.0)


def test_ctrl_c_stops_a_cpu_engine_sort():
    """A long sort on the CPU engine stops its threads on SIGINT: KeyboardInterrupt within a
    second or so, the cores idle after it, and the next call at once. (Eight engine threads, so
    that the engine answers rather than NumPy: it does from 8 threads.)"""
    import os
    import textwrap

    code = textwrap.dedent(
        """
        import os, signal, time, numpy as np, gpusort
        signal.signal(signal.SIGINT, signal.default_int_handler)
        gpusort.use(backend="cpu")
        assert gpusort.info()["threads"] == 8
        a = np.random.default_rng(1).random(1 << 27)
        small = a[: 1 << 16]
        gpusort.sort(small)
        t = time.time()
        try:
            print("ready", flush=True)
            gpusort.argsort(a)
            print("finished after %.2f s" % (time.time() - t), flush=True)
            os._exit(4)
        except KeyboardInterrupt:
            took = time.time() - t
            t = time.time()
            r = gpusort.sort(small)
            after = time.time() - t
            assert np.array_equal(r, np.sort(small))
            time.sleep(0.5)
            before = sum(os.times()[:2])
            time.sleep(1.0)
            busy = sum(os.times()[:2]) - before
            print("interrupted after %.2f s next %.2f s busy %.2f s" % (took, after, busy),
                  flush=True)
            os._exit(3)
        """
    )
    env = dict(os.environ, RAYON_NUM_THREADS="8")
    # (the whole argsort takes several times longer on 2 cores)
    took, after, busy, out = _interrupted_timings(code, timeout_s=120, env=env)
    assert took < 4.0, out
    assert after < 1.0, out
    assert busy < 0.3, out  # (two cores at work would be 2.0)


def test_a_stored_tuning_is_used(engine, tmp_path):
    """The tuning `gpusort tune` stored for this GPU (in GPUSORT_CACHE_DIR here) is what a fresh
    process's context uses; results are the same."""
    if engine != "gpu":
        return
    import json
    import subprocess
    import sys

    a = gpusort.info()
    (tmp_path / "tuning.json").write_text(json.dumps({"tunings": [{
        "adapter": a["adapter"], "backend": a["backend"], "driver": a["driver"].strip(),
        "gpusort_version": "0.1.0", "date": "2026-11-26T00:00:00Z",
        "sort": {"items": 7, "payload_items": 6}, "scan": {"scan_wg": 256, "scan_rounds": 4},
    }]}))
    code = (
        "import numpy as np, gpusort; gpusort.use(backend='gpu');"
        "a = np.random.default_rng(1).integers(0, 2**32, 300_000, dtype=np.uint32);"
        "assert (gpusort.sort(a) == np.sort(a)).all();"
        "assert (gpusort.cumsum(a) == np.cumsum(a)).all();"
        "print(gpusort.info()['tuned'])"
    )
    env = dict(__import__("os").environ, GPUSORT_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2026-11-26T00:00:00Z"
    env["GPUSORT_CACHE_DIR"] = str(tmp_path / "none")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "None", out.stderr


def test_tune_measures_stores_and_is_used(engine, tmp_path, monkeypatch):
    """gpusort.tune() runs the library's tuner on the GPU in use, stores its result where
    `gpusort tune` does (GPUSORT_CACHE_DIR here) and the next calls run with it; the CPU engine
    has nothing to tune."""
    import json

    monkeypatch.setenv("GPUSORT_CACHE_DIR", str(tmp_path))
    if engine != "gpu":
        with pytest.raises(ValueError, match="tune measures a GPU"):
            gpusort.tune(quick=True)
        assert not (tmp_path / "tuning.json").exists()
        return
    r = gpusort.tune(quick=True)
    assert r["path"] == str(tmp_path / "tuning.json")
    stored = json.loads((tmp_path / "tuning.json").read_text())["tunings"]
    assert len(stored) == 1 and stored[0] == r["tuning"]
    i = gpusort.info()
    assert r["tuning"]["adapter"] == i["adapter"] and i["tuned"] == r["tuning"]["date"]
    assert min(r["sort_gain"], r["scan_gain"], r["stencil_gain"]) >= 1.0
    assert 1 <= r["tuning"]["sort"]["wide_items"] <= 64
    a = data(np.uint64, 70001, 9, "random")
    same(gpusort.argsort(a), np.argsort(a, kind="stable"))


def test_naming_adapters_or_devices_asks_for_gpus(engine):
    """An adapter or a device list names GPUs: refused beside backend "cpu" (the context in use
    stays), a GPU context otherwise, also where the only adapter is a software one."""
    before = gpusort.info()["engine"]
    with pytest.raises(ValueError, match="adapter and devices name GPUs"):
        gpusort.use(backend="cpu", devices="0,0")
    with pytest.raises(ValueError, match="adapter and devices name GPUs"):
        gpusort.use(backend="cpu", adapter=0)
    assert gpusort.info()["engine"] == before
    gpusort.use(devices="1")
    assert gpusort.info()["engine"] == "gpu"
    a = data(np.float32, 5000, 4)
    same(gpusort.sort(a), np.sort(a, kind="stable"))


def test_several_devices_give_one_devices_results(engine):
    # two devices on the one adapter CI has; every sort spread over both (a sort this small
    # would otherwise stay on the first device)
    gpusort.use(backend="gpu", devices="0,0", _spread_always=True)
    assert len(gpusort.info()["devices"]) == 2
    results = []
    for dtype in DTYPES:
        a = data(dtype, 40001, 3, "random")
        same(gpusort.sort(a), np.sort(a, kind="stable"))
        same(gpusort.argsort(a), np.argsort(a, kind="stable"))
        results.append(gpusort.sort(a, descending=True))
    g = np.random.default_rng(5).random((301, 40)).astype(np.float32)
    spread = gpusort.stencil(g, radius=1, boundary="wrap", steps=13)
    gpusort.use(backend="gpu")
    assert len(gpusort.info()["devices"]) == 1
    same(spread, gpusort.stencil(g, radius=1, boundary="wrap", steps=13))
    for dtype, got in zip(DTYPES, results):
        same(got, gpusort.sort(data(dtype, 40001, 3, "random"), descending=True))
    with pytest.raises(ValueError):
        gpusort.use(devices="0")
    with pytest.raises(ValueError):
        gpusort.use(adapter="0", devices="0,0")


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_signed_zeros_are_equal_and_keep_their_order_as_in_numpy(dtype):
    rng = np.random.default_rng(7)
    a = rng.choice(np.array([0.0, -0.0, 1.0, -1.0, np.nan], dtype=dtype), size=(3, 4099))
    for axis in (-1, 0, None):
        want = np.argsort(a, axis=axis, kind="stable")
        np.testing.assert_array_equal(gpusort.argsort(a, axis=axis), want)
        got = gpusort.sort(a, axis=axis)
        exp = np.sort(a, axis=axis, kind="stable")
        # bit for bit: which zero is where, too
        assert got.tobytes() == exp.tobytes()
    k, v = gpusort.sort(a[0], values=np.arange(a.shape[1]))
    np.testing.assert_array_equal(v, np.argsort(a[0], kind="stable"))
    assert k.tobytes() == np.sort(a[0], kind="stable").tobytes()
    np.testing.assert_array_equal(gpusort.argsort(np.array([0.0, -0.0], dtype)), [0, 1])


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint8, np.uint16])
@pytest.mark.parametrize("op", ["max", "min"])
def test_exclusive_max_and_min_start_from_the_dtypes_own_identity(dtype, op):
    a = np.array([-5, -3, 7, 2] if np.dtype(dtype).kind == "i" else [5, 3, 7, 2], dtype=dtype)
    info = np.iinfo(dtype)
    ufunc = np.maximum if op == "max" else np.minimum
    identity = info.min if op == "max" else info.max
    want = np.concatenate([[identity], ufunc.accumulate(a)[:-1]]).astype(dtype)
    np.testing.assert_array_equal(gpusort.scan(a, op, exclusive=True), want)


def test_numpy_sort_signatures_and_checked_flags():
    a = np.array([3, 1, 2], dtype=np.int32)
    for kind in (None, "quicksort", "mergesort", "heapsort", "stable"):
        np.testing.assert_array_equal(gpusort.sort(a, -1, kind), [1, 2, 3])
        np.testing.assert_array_equal(gpusort.argsort(a, kind=kind), [1, 2, 0])
    with pytest.raises(ValueError):
        gpusort.sort(a, kind="bogo")
    with pytest.raises(ValueError):
        gpusort.argsort(a, order="x")
    with pytest.raises(TypeError):
        gpusort.sort(a, descending="no")
    np.testing.assert_array_equal(gpusort.sort(a, descending=np.bool_(True)), [3, 2, 1])
    assert isinstance(gpusort.__version__, str) and gpusort.__version__


def test_a_failed_use_keeps_the_engine_in_use(engine):
    before = gpusort.info()["engine"]
    with pytest.raises((ValueError, gpusort.GpuError)):
        gpusort.use(adapter="no adapter has this name")
    assert gpusort.info()["engine"] == before
    a = data(np.float32, 1000, 3)
    same(gpusort.sort(a), np.sort(a))


def test_compact_compares_as_numpy_masks_do():
    f = np.array([-0.0, 0.0, np.nan, -1.0, 2.0, np.inf, -np.inf], np.float32)
    for p in [0.0, -0.0, 1.5, np.nan, np.inf, -np.inf, 1e40, 1e-50]:
        with np.errstate(over="ignore"):
            below, at_least = f < np.float32(p), f >= np.float32(p)
        got = gpusort.compact(f, below=p)
        assert got.tobytes() == f[below].tobytes(), p
        got = gpusort.compact(f, at_least=p)
        assert got.tobytes() == f[at_least].tobytes(), p
    i = np.array([1, 2, 3], np.int32)
    same(gpusort.compact(i, below=2.5), i[i < 2.5])
    same(gpusort.compact(i, at_least=2.5), i[i >= 2.5])
    same(gpusort.compact(i, below=float("nan")), i[:0])
    u = np.array([0, 7, 255], np.uint8)
    same(gpusort.compact(u, below=300), u)
    same(gpusort.compact(u, at_least=300), u[:0])
    same(gpusort.compact(u, at_least=-4), u)
    k, v = gpusort.compact(u, below=300, values=np.arange(3))
    same(v, np.arange(3))


def test_cumsum_takes_numpys_axis_dtype_and_out(engine):
    rng = np.random.default_rng(70)
    grid = rng.integers(-1000, 1000, size=(3, 5, 4)).astype(np.int32)
    for axis in (None, 0, 1, 2, -1):
        np.testing.assert_array_equal(gpusort.cumsum(grid, axis=axis), np.cumsum(grid, axis=axis))
        got = gpusort.cumsum(grid, axis=axis, dtype=np.int8)
        assert got.dtype == np.int8
        np.testing.assert_array_equal(got, np.cumsum(grid, axis=axis, dtype=np.int8))
    # rows long enough to be scanned one by one on the engine
    long = rng.integers(0, 100, size=(2, 1 << 15)).astype(np.uint32)
    np.testing.assert_array_equal(gpusort.cumsum(long, axis=1), np.cumsum(long, axis=1))
    ex = gpusort.cumsum(long, axis=1, exclusive=True)
    np.testing.assert_array_equal(ex[:, 1:], np.cumsum(long, axis=1)[:, :-1])
    assert (ex[:, 0] == 0).all()
    ex = gpusort.cumsum(grid, axis=0, exclusive=True)
    np.testing.assert_array_equal(ex[1:], np.cumsum(grid, axis=0)[:-1])
    # out: filled and returned; the sums made as without it, then cast into it, as NumPy does
    a = np.array([2**31 - 1, 1, 1], np.int32)
    out = np.empty(3, np.int32)
    assert gpusort.cumsum(a, out=out) is out
    np.testing.assert_array_equal(out, np.cumsum(a, out=np.empty(3, np.int32)))
    f = np.array([16777216, 1, 1])
    out = np.empty(3, np.float32)
    gpusort.cumsum(f, out=out)
    np.testing.assert_array_equal(out, np.cumsum(f, out=np.empty(3, np.float32)))
    with pytest.raises(ValueError):
        gpusort.cumsum(a, out=np.empty(4, np.int32))
    with pytest.raises(TypeError):
        gpusort.cumsum(a, out=[0, 0, 0])


def test_zero_d_argsort_and_masked_arrays_as_numpy_would_have_them(engine):
    np.testing.assert_array_equal(gpusort.argsort(np.array(3)), np.argsort(np.array(3)))
    masked = np.ma.array([3, 1, 2], mask=[0, 1, 0])
    for f in (gpusort.sort, gpusort.argsort, gpusort.cumsum, lambda m: gpusort.scan(m, "max")):
        with pytest.raises(TypeError, match="masked"):
            f(masked)


def test_out_takes_results_as_numpy_does():
    r = np.random.default_rng(11)
    a = r.normal(size=(3, 1000)).astype(np.float32)
    a[0, :3] = [-0.0, 0.0, np.nan]
    want = np.sort(a, kind="stable")
    out = np.empty_like(a)
    assert gpusort.sort(a, out=out) is out
    same(out, want)
    b = a.copy()
    gpusort.sort(b, out=b)  # in place
    same(b, want)
    out = np.empty(a.shape, np.float64)  # a wider float: NumPy's same_kind cast
    gpusort.sort(a, out=out)
    same(out, want.astype(np.float64))
    idx = np.empty(a.shape, np.int32)
    assert gpusort.argsort(a, axis=0, out=idx) is idx
    same(idx, np.argsort(a, axis=0, kind="stable").astype(np.int32))
    ints = r.integers(-9, 9, 5000).astype(np.int32)
    acc = np.empty(5000, np.int64)
    gpusort.scan(ints, "max", exclusive=True, out=acc)
    same(acc, np.concatenate([[np.iinfo(np.int32).min], np.maximum.accumulate(ints)[:-1]]).astype(np.int64))
    g = r.random((20, 30))
    res = np.empty_like(g)
    assert gpusort.stencil(g, radius=1, out=res) is res
    same(res, gpusort.stencil(g, radius=1))
    with pytest.raises(ValueError, match="shape"):
        gpusort.sort(a, out=np.empty(3, np.float32))
    with pytest.raises(TypeError, match="same_kind"):
        gpusort.argsort(a, out=np.empty(a.shape, np.uint8))
    with pytest.raises(TypeError, match="same_kind"):
        gpusort.sort(a, out=np.empty(a.shape, np.int32))
    with pytest.raises(ValueError, match="values"):
        gpusort.sort(a, values=a, out=np.empty_like(a))
    with pytest.raises(TypeError):
        gpusort.scan(ints, out=[0] * 5000)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("boundary", ["reflect", "constant", "nearest", "mirror", "wrap"])
def test_stencils_of_one_axis_and_empty_grids_match_scipy(dtype, boundary):
    r = np.random.default_rng(6)
    g = r.normal(size=1001).astype(dtype)
    for radius, kind in [(1, "star"), (3, "box")]:
        w = np.full(2 * radius + 1, 1 / (2 * radius + 1))
        want = g
        for _ in range(3):
            want = ndi.correlate(want, w, mode=boundary, cval=0.5)
        got = gpusort.stencil(g, radius=radius, stencil=kind, boundary=boundary, cval=0.5, steps=3)
        assert got.dtype == g.dtype and got.shape == g.shape
        if dtype == np.float64:
            same(got, want)  # bit-identical, as the 2-D and 3-D stencils
        else:
            assert np.allclose(got, want, rtol=1e-6, atol=1e-6)
    w = r.random(5)
    same(gpusort.stencil(g.astype(np.float64), weights=w, boundary=boundary), ndi.correlate(g.astype(np.float64), w, mode=boundary))
    for shape in [(0,), (0, 5), (3, 0, 4)]:
        empty = np.zeros(shape, dtype)
        got = gpusort.stencil(empty, boundary=boundary)
        assert got.shape == shape and got.dtype == empty.dtype


def test_partition_is_partition_by_under_its_old_name():
    a = np.array([5, 1, 4, 2, 3], np.int32)
    with pytest.warns(DeprecationWarning, match="partition_by"):
        old = gpusort.partition(a, 3)
    new = gpusort.partition_by(a, 3)
    same(old[0], new[0])
    assert old[1] == new[1] == 2


@pytest.mark.parametrize("dtype", DTYPES + NARROW)
def test_numpy_and_the_engine_answer_alike(dtype, engine, monkeypatch):
    """Without a GPU on a CPU of few cores, sort and cumsum are NumPy's own; the engine's
    answers (forced here) are the same, so the choice changes only the time."""
    if engine != "cpu":
        return same(gpusort.sort(np.ones(3, dtype)), np.sort(np.ones(3, dtype)))
    a = data(dtype, 65537, 12, "special") if dtype not in NARROW else (np.arange(65537) % 1999 - 999).astype(dtype)
    answers = {}
    for numpy_faster in [True, False]:
        monkeypatch.setattr(gpusort, "_numpy_faster", lambda v=numpy_faster: v)
        rows = a[: 256 * 256].reshape(256, 256)
        answers[numpy_faster] = [gpusort.sort(a), gpusort.sort(rows, axis=0), gpusort.sort(a, axis=None)]
        if np.dtype(dtype) not in (np.dtype(np.float16), np.dtype(np.bool_)):
            answers[numpy_faster].append(gpusort.cumsum(a if np.dtype(dtype).kind != "f" else np.round(a)))
    for x, y in zip(answers[True], answers[False]):
        same(x, y)
    same(answers[True][0], np.sort(a, kind="stable"))


def test_a_failed_use_names_the_argument_and_keeps_the_context():
    before = gpusort.info()["engine"]
    with pytest.raises(ValueError, match="adapter='no such adapter'"):
        gpusort.use(adapter="no such adapter")
    with pytest.raises(ValueError, match="devices='7'"):
        gpusort.use(backend="gpu", devices=7)
    assert gpusort.info()["engine"] == before
    same(gpusort.sort(np.array([2, 1], np.int32)), np.array([1, 2], np.int32))


def _random_array(r, dtype, shape):
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    if dt.kind == "f":
        a = r.normal(scale=10, size=n)
        ties = r.random(n) < 0.2
        a[ties] = np.round(a[ties])  # repeats
        specials = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf])
        pick = r.random(n) < 0.1
        a[pick] = r.choice(specials, int(pick.sum()))
        return a.astype(dt).reshape(shape)
    if dt.kind == "b":
        return (r.random(n) < 0.5).reshape(shape)
    info = np.iinfo(dt)
    a = r.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    few = r.random(n) < 0.3
    a[few] = r.integers(-3, 4, int(few.sum())).astype(dt)  # repeats, and wraps for unsigned
    return a.reshape(shape)


def test_random_calls_answer_as_numpy(engine):
    """Property test (seeded, as Hypothesis would draw them): random dtypes, shapes, axes and
    values (NaN, ±0, ±inf, repeats, extremes) through sort, argsort, cumsum, scan and compact,
    each against NumPy's answer."""
    r = np.random.default_rng(2026)
    dtypes = DTYPES + NARROW
    checked = 0
    for draw in range(120):
        dtype = dtypes[r.integers(len(dtypes))]
        ndim = int(r.integers(0, 4))
        shape = tuple(int(x) for x in r.integers(0, 9 if ndim > 1 else 3000, ndim))
        a = _random_array(r, dtype, shape)
        axes = [None] + list(range(-ndim, ndim))
        axis = axes[r.integers(len(axes))]
        call = ["sort", "argsort", "cumsum", "scan", "compact"][r.integers(5)]
        what = f"draw {draw}: {call} {a.dtype} {shape} axis={axis}"
        if call in ("sort", "argsort"):
            if ndim == 0 and axis is not None:
                continue
            if call == "sort":
                same(gpusort.sort(a, axis=axis), np.sort(a, axis=axis, kind="stable"))
            else:
                got = gpusort.argsort(a, axis=axis)
                assert np.array_equal(got, np.argsort(a, axis=axis, kind="stable")), what
        elif call == "cumsum":
            if np.dtype(dtype) == np.dtype(np.float16) or (ndim == 0 and axis is not None):
                continue
            want = np.cumsum(a, axis=axis)
            got = gpusort.cumsum(a, axis=axis)
            assert got.dtype == want.dtype and got.shape == want.shape, what
            if want.dtype.kind == "f":
                scale = np.nansum(np.abs(np.where(np.isfinite(a), a, 0))) + 1
                assert np.allclose(got, want, rtol=1e-4, atol=1e-5 * scale, equal_nan=True), what
            else:
                assert np.array_equal(got, want), what
        elif call == "scan":
            if np.dtype(dtype).kind not in "iu":
                continue
            same(gpusort.scan(a, "max"), np.maximum.accumulate(a.reshape(-1)))
        else:
            t = [0, 0.5, -1, 2**40, np.nan, -0.0][r.integers(6)]
            if np.dtype(dtype).kind == "b":
                continue
            with np.errstate(invalid="ignore", over="ignore"):
                want = a.reshape(-1)[a.reshape(-1) < t]
            same(gpusort.compact(a, below=t), want)
        checked += 1
    assert checked >= 80  # most draws compared (the rest had no NumPy counterpart)
