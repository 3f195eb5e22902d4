//! `gpusort._native`: the Rust half of the `gpusort` Python package. The Python half
//! (`gpusort/__init__.py`) gives NumPy's semantics (dtypes, shapes, widening, arguments); this
//! half runs jobs on contiguous 1-D (stencils: N-D) arrays of the six key types, on one device
//! context per process (created on first use, kept), with the GIL released while the work runs
//! on a worker thread, and Ctrl-C answered within 50 ms.

mod pool;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gpusort_core::scan::scan64::Scanner64;
use gpusort_core::scan::streamed::{ScanStream, SplitStream};
use gpusort_core::scan::{Predicate, ScanOp, Scanner};
use gpusort_core::stencil::{Boundary, GridShape, Stencil, StencilJob, StencilKernel};
use gpusort_core::{Gpu, GpuOptions, HostSort, SortKey, SortOrder, Sorter};
use numpy::{
    IntoPyArray, PyArrayMethods, PyReadonlyArray1, PyReadonlyArrayDyn, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::pool::ResultBuf;

// named by its full module path, so that pickle (multiprocessing's workers) finds it again
pyo3::create_exception!(
    gpusort._native,
    GpuError,
    PyRuntimeError,
    "A failure on the device (or of gpusort itself) while doing valid work."
);

/// Where jobs run.
enum Engine {
    Cpu,
    Gpu(Box<GpuContext>),
}

struct GpuContext {
    gpu: Arc<Gpu>,
    sorter: Sorter,
    scanner: Scanner,
    scanner64: Scanner64,
    /// When `gpusort tune` measured the tuning in use, if it did.
    tuned: Option<String>,
    /// The stencils' steps a pass from that tuning (the defaults without one).
    stencil_tuning: gpusort_core::stencil::StencilTuning,
    /// `use(devices=...)` naming several: the group (this device first) and a sorter each.
    group: Option<(gpusort_core::multi::DeviceGroup, Vec<Sorter>)>,
    /// Spread every sort over the group (tests): the results are the same.
    spread_always: bool,
}

/// Where `gpusort tune` and `gpusort.tune()` keep their measurements: the library's place in the
/// user's cache directory, or `tuning.json` in `GPUSORT_CACHE_DIR` (as the CLI reads it).
fn tuning_path() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("GPUSORT_CACHE_DIR").filter(|d| !d.is_empty());
    gpusort_core::tuning::TuningFile::path(dir.as_deref().map(std::path::Path::new))
}

/// The tuning stored for this device; None (the defaults) where there is none or it cannot be
/// read.
fn stored_tuning(gpu: &Gpu) -> Option<gpusort_core::tuning::StoredTuning> {
    gpusort_core::tuning::TuningFile::stored(&tuning_path()?, gpu)
        .ok()
        .flatten()
}

/// What `gpusort.use()` asked for.
#[derive(Clone, Default)]
struct Settings {
    backend: Option<String>,
    adapter: Option<String>,
    devices: Option<String>,
    spread_always: bool,
}

static SETTINGS: Mutex<Option<Settings>> = Mutex::new(None);
/// The engine in use and the id of the process that made it (a forked child inherits both).
static ENGINE: Mutex<Option<(u32, Arc<Engine>)>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn to_py(e: gpusort_core::Error) -> PyErr {
    match e {
        gpusort_core::Error::InvalidInput(m) => PyValueError::new_err(m),
        other => GpuError::new_err(other.to_string()),
    }
}

/// The process's engine: made on first use from the settings, then kept. A child made by
/// `os.fork()` inherits its parent's: the CPU engine's is replaced by its own (its threads are
/// the pool's, made again: `pool`), but a GPU context is the parent's device, which a forked
/// child cannot use (drivers keep threads and handles that fork does not copy; a call there
/// waited forever): an error that says what to do instead, the context never touched.
fn engine() -> PyResult<Arc<Engine>> {
    let mut slot = lock(&ENGINE);
    let pid = std::process::id();
    match slot.as_ref() {
        Some((made_in, e)) if *made_in == pid => return Ok(e.clone()),
        Some((made_in, e)) if matches!(**e, Engine::Gpu(_)) => {
            return Err(GpuError::new_err(format!(
                "the GPU context was made in process {made_in}, which forked this one: a forked \
                 child cannot use it. Start workers with multiprocessing's \"spawn\" or \
                 \"forkserver\" method (or use gpusort in the workers only), or call \
                 gpusort.use() here for a context of this process's own (the CPU engine always \
                 works; a GPU opened again after fork, where the driver allows it)"
            )));
        }
        Some(_) => forget_inherited(&mut slot),
        None => {}
    }
    let settings = lock(&SETTINGS).clone().unwrap_or_default();
    let backend = settings.backend.as_deref().unwrap_or("auto");
    let options = GpuOptions {
        backend: match backend {
            "auto" | "gpu" | "cpu" => None,
            other => Some(other.to_string()),
        },
        adapter: settings.adapter.clone(),
        ..GpuOptions::default()
    };
    // the library decides, as for the CLI and DataFusion
    let asked = match backend {
        "auto" => gpusort_core::engine::Backend::Auto,
        "cpu" => gpusort_core::engine::Backend::Cpu,
        _ => gpusort_core::engine::Backend::Gpu,
    };
    // a named adapter or device list asks for GPUs, as on the CLI
    let named = settings.adapter.is_some() || settings.devices.is_some();
    let cpu = matches!(
        gpusort_core::engine::choose(asked, named, &options).map_err(to_py)?,
        gpusort_core::engine::Choice::Cpu { .. }
    );
    let e = Arc::new(if cpu {
        Engine::Cpu
    } else {
        // several devices where `devices` names more than one (the first leads)
        let gpus: Vec<Arc<Gpu>> = match settings.devices.as_deref() {
            Some(spec) => {
                let spec = gpusort_core::multi::DeviceSpec::parse(spec).map_err(to_py)?;
                gpusort_core::multi::DeviceGroup::open(&options, &spec)
                    .map_err(to_py)?
                    .gpus()
                    .to_vec()
            }
            None => vec![Arc::new(Gpu::new(&options).map_err(to_py)?)],
        };
        let sorter_for = |gpu: &Gpu| {
            let tuning = stored_tuning(gpu).map_or_else(Default::default, |t| t.sort);
            Sorter::new(gpu).and_then(|s| s.with_tuning(gpu, tuning))
        };
        let gpu = gpus[0].clone();
        let stored = stored_tuning(&gpu);
        let scan_tuning = stored.as_ref().map_or_else(Default::default, |t| t.scan);
        let sorter = sorter_for(&gpu).map_err(to_py)?;
        let scanner = Scanner::new(&gpu)
            .and_then(|s| s.with_tuning(&gpu, scan_tuning))
            .map_err(to_py)?;
        let scanner64 = scanner.scanner64(&gpu);
        let group = if gpus.len() > 1 {
            let sorters = gpus
                .iter()
                .map(|g| sorter_for(g))
                .collect::<gpusort_core::Result<Vec<_>>>()
                .map_err(to_py)?;
            let group = gpusort_core::multi::DeviceGroup::from_shared(gpus).map_err(to_py)?;
            Some((group, sorters))
        } else {
            None
        };
        Engine::Gpu(Box::new(GpuContext {
            gpu,
            sorter,
            scanner,
            scanner64,
            stencil_tuning: stored.as_ref().map(|t| t.stencil).unwrap_or_default(),
            tuned: stored.map(|t| t.date),
            group,
            spread_always: settings.spread_always,
        }))
    });
    *slot = Some((pid, e.clone()));
    Ok(e)
}

/// Leave an engine a parent process made where it lies: never dropped here, since dropping a GPU
/// context would call into a device this process cannot use.
fn forget_inherited(slot: &mut Option<(u32, Arc<Engine>)>) {
    if let Some(inherited) = slot.take() {
        std::mem::forget(inherited);
    }
}

/// Whether the call this worker thread runs was given up by its caller (Ctrl-C): long loops
/// check it between parts of their work and stop, so that the cores are free for the next call.
/// (The library's own streamed jobs check the same flag: `gpusort_core::cancel`.)
fn cancelled() -> bool {
    gpusort_core::cancel::requested()
}

/// The CPU engine's threads for this process. rayon's global pool cannot be made again, and a
/// child made by `os.fork()` (multiprocessing's default start on Linux) inherits the pool but
/// none of its threads: work sent there would wait forever. So the engine runs on a pool of our
/// own, made again in a process whose id differs from the one that made it; the parent's pool is
/// left alone there (its threads do not exist to be told to stop).
fn pool() -> Arc<rayon::ThreadPool> {
    static POOL: Mutex<Option<(u32, Arc<rayon::ThreadPool>)>> = Mutex::new(None);
    let mut slot = POOL.lock().unwrap_or_else(|p| p.into_inner());
    let pid = std::process::id();
    match slot.as_ref() {
        Some((made_in, p)) if *made_in == pid => p.clone(),
        _ => {
            if let Some(inherited) = slot.take() {
                std::mem::forget(inherited);
            }
            // (RAYON_NUM_THREADS sets the count, as for rayon's global pool)
            let p = Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .thread_name(|i| format!("gpusort-engine-{i}"))
                    .build()
                    .expect("a thread pool for the CPU engine"),
            );
            *slot = Some((pid, p.clone()));
            p
        }
    }
}

/// Elements up to which a CPU-engine scan that runs in one pass runs on the calling thread (with
/// the GIL released): about a millisecond, short enough that Ctrl-C waits for it, where the hop
/// to the pool and back cost a tenth of a 2^20-element cumsum on two cores.
const SCAN_HERE_UP_TO: usize = 1 << 21;

/// [`run`], but a CPU-engine scan of `n` elements that runs in one pass of at most
/// [`SCAN_HERE_UP_TO`] runs right here.
fn run_scan<R: Send + 'static>(
    py: Python<'_>,
    n: usize,
    job: impl FnOnce(&Engine) -> gpusort_core::Result<R> + Send + 'static,
) -> PyResult<R> {
    let engine = engine()?;
    if !(matches!(*engine, Engine::Cpu)
        && n <= SCAN_HERE_UP_TO
        && gpusort_core::cpu_engine::scan_in_one_pass(n))
    {
        return run(py, job);
    }
    let done =
        py.detach(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&engine))));
    match done {
        Ok(result) => result.map_err(to_py),
        Err(_) => Err(GpuError::new_err(
            "the scan stopped without a result (a gpusort bug)",
        )),
    }
}

/// Run `job` on a worker thread with the GIL released; Ctrl-C (a pending signal) returns
/// KeyboardInterrupt at once and cancels the job: it stops at its next check (`cancelled`), or
/// its result is dropped when it finishes.
fn run<R: Send + 'static>(
    py: Python<'_>,
    job: impl FnOnce(&Engine) -> gpusort_core::Result<R> + Send + 'static,
) -> PyResult<R> {
    let engine = engine()?;
    let (tx, rx) = std::sync::mpsc::channel();
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = cancel.clone();
    // CPU-engine jobs start on the engine's own threads (a thread made per call cost ~20 µs, a
    // tenth of a 2^20-element cumsum); GPU jobs, which wait on the device, on a thread of their
    // own. A panic drops the sender (the error below) instead of ending the process, as a
    // panic on the pool's threads would.
    let on_pool = matches!(*engine, Engine::Cpu);
    let work = move || {
        let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            gpusort_core::cancel::watching(&flag, || job(&engine))
        }));
        if let Ok(result) = done {
            let _ = tx.send(result);
        }
    };
    if on_pool {
        pool().spawn(work);
    } else {
        std::thread::spawn(work);
    }
    // a Mutex makes the receiver shareable with the detached closure; only this thread uses it
    let rx = Mutex::new(rx);
    loop {
        match py.detach(|| lock(&rx).recv_timeout(Duration::from_millis(50))) {
            Ok(result) => return result.map_err(to_py),
            Err(RecvTimeoutError::Timeout) => {
                if let Err(interrupt) = py.check_signals() {
                    cancel.store(true, Ordering::Relaxed);
                    return Err(interrupt);
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(GpuError::new_err(
                    "the worker thread stopped without a result (a gpusort bug)",
                ))
            }
        }
    }
}

/// Call `$body` with `$arr` a read-only 1-D array and `$t` its element type, for the six key
/// types; any other dtype is a TypeError.
macro_rules! with_keys {
    ($a:expr, |$arr:ident: $t:ident| $body:expr) => {{
        let a = $a;
        if let Ok($arr) = a.extract::<PyReadonlyArray1<'_, u32>>() {
            #[allow(dead_code)]
            type $t = u32;
            $body
        } else if let Ok($arr) = a.extract::<PyReadonlyArray1<'_, i32>>() {
            #[allow(dead_code)]
            type $t = i32;
            $body
        } else if let Ok($arr) = a.extract::<PyReadonlyArray1<'_, f32>>() {
            #[allow(dead_code)]
            type $t = f32;
            $body
        } else if let Ok($arr) = a.extract::<PyReadonlyArray1<'_, u64>>() {
            #[allow(dead_code)]
            type $t = u64;
            $body
        } else if let Ok($arr) = a.extract::<PyReadonlyArray1<'_, i64>>() {
            #[allow(dead_code)]
            type $t = i64;
            $body
        } else if let Ok($arr) = a.extract::<PyReadonlyArray1<'_, f64>>() {
            #[allow(dead_code)]
            type $t = f64;
            $body
        } else {
            Err(PyTypeError::new_err(
                "gpusort takes 1-D arrays of uint32, int32, float32, uint64, int64 or float64",
            ))
        }
    }};
}

/// A 1-D input's elements as the worker thread reads them: the NumPy array's own memory where it
/// is contiguous (no copy), else a contiguous copy.
enum Input<T> {
    Borrowed {
        /// A reference to the array, so that it outlives the job even when Ctrl-C returns first.
        _owner: Py<PyAny>,
        ptr: *const T,
        len: usize,
    },
    Copied(Vec<T>),
}

// SAFETY: a Borrowed input points into an array kept alive by `_owner` (a reference the job holds
// until it ends; a NumPy array with a reference held elsewhere cannot be resized in place), and
// the worker only reads it. Python code writing into the same array while a call runs is the
// caller's race, as with any NumPy function that releases the GIL.
unsafe impl<T: Sync> Send for Input<T> {}

impl<T> Input<T> {
    /// `s`, the contiguous elements of the array `owner`.
    fn borrowed(owner: &Bound<'_, PyAny>, s: &[T]) -> Input<T> {
        Input::Borrowed {
            _owner: owner.clone().unbind(),
            ptr: s.as_ptr(),
            len: s.len(),
        }
    }

    fn as_slice(&self) -> &[T] {
        match self {
            // SAFETY: see the Send impl: `len` elements at `ptr` stay alive and readable
            Input::Borrowed { ptr, len, .. } => unsafe { std::slice::from_raw_parts(*ptr, *len) },
            Input::Copied(v) => v,
        }
    }
}

fn input<T: numpy::Element + Copy + Send + Sync>(a: &PyReadonlyArray1<'_, T>) -> Input<T> {
    match a.as_slice() {
        Ok(s) => Input::borrowed(a.as_any(), s),
        Err(_) => Input::Copied(a.as_array().iter().copied().collect()),
    }
}

/// [`input`] of an N-D array, in C order.
fn input_nd<T: numpy::Element + Copy + Send + Sync>(a: &PyReadonlyArrayDyn<'_, T>) -> Input<T> {
    match a.as_slice() {
        Ok(s) => Input::borrowed(a.as_any(), s),
        Err(_) => Input::Copied(a.as_array().iter().copied().collect()),
    }
}

/// The array's elements as a vector, copied on all cores (one thread copying 256 MiB took
/// 150-220 ms on the GPU machine: longer than the sort itself).
fn owned<T: numpy::Element + bytemuck::Zeroable + Copy + Send + Sync>(
    a: &PyReadonlyArray1<'_, T>,
) -> Vec<T> {
    match a.as_slice() {
        Ok(s) => par_copy(s, |x| x),
        Err(_) => a.as_array().iter().copied().collect(),
    }
}

/// `f` of every element of `s`, in a new vector (fresh huge pages: `transfer::zeroed_vec`)
/// filled in parallel pieces.
fn par_copy<A: Copy + Send + Sync, B: bytemuck::Zeroable + Copy + Send + Sync>(
    s: &[A],
    f: impl Fn(A) -> B + Sync,
) -> Vec<B> {
    let mut out: Vec<B> = gpusort_core::device::transfer::zeroed_vec(s.len());
    par_map_into(s, &mut out, f);
    out
}

/// `f` of every element of `s`, in a result array's memory (recycled where it can be).
fn result_of<A: Copy + Send + Sync, B: numpy::Element + bytemuck::Pod + Send + Sync>(
    s: &[A],
    f: impl Fn(A) -> B + Sync,
) -> ResultBuf<B> {
    let mut out = ResultBuf::new(s.len());
    par_map_into(s, out.as_mut_slice(), f);
    out
}

/// `f` of every element of `s` into `out` (the same length), in parallel pieces.
fn par_map_into<A: Copy + Send + Sync, B: Copy + Send + Sync>(
    s: &[A],
    out: &mut [B],
    f: impl Fn(A) -> B + Sync,
) {
    use rayon::prelude::*;
    pool().install(|| {
        out.par_chunks_mut(1 << 20)
            .zip(s.par_chunks(1 << 20))
            .for_each(|(d, src)| {
                for (d, &x) in d.iter_mut().zip(src) {
                    *d = f(x);
                }
            })
    });
}

/// The order of a sort of `len` keys, refused past the u32 positions a permutation holds.
fn sort_order(len: usize, descending: bool, segment: Option<u32>) -> PyResult<SortOrder> {
    if len as u64 > u32::MAX as u64 {
        return Err(PyValueError::new_err(
            "arrays of more than 2^32 elements are not supported",
        ));
    }
    Ok(SortOrder {
        descending,
        segment_size: segment,
    })
}

/// Sort `a` (segments of `segment` keys on their own); returns (keys, permutation as int64 or
/// None).
#[pyfunction]
#[pyo3(signature = (a, descending, segment, want_permutation))]
fn sort<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    descending: bool,
    segment: Option<u32>,
    want_permutation: bool,
) -> PyResult<(Bound<'py, PyAny>, Option<Bound<'py, PyAny>>)> {
    with_keys!(a, |arr: T| {
        let order = sort_order(arr.len(), descending, segment)?;
        // the keys copied into the result on the worker, with the GIL released
        let data = input(&arr);
        let (keys, perm) = run(py, move |e| {
            let mut buf = result_of(data.as_slice(), |x| x);
            let keys = buf.as_mut_slice();
            let perm = sort_on(e, keys, want_permutation, order)?;
            // NumPy's index type, widened on all cores
            let perm = perm.map(|p| result_of(&p, i64::from));
            Ok((buf, perm))
        })?;
        Ok((
            keys.into_pyarray(py)?.into_any(),
            match perm {
                Some(p) => Some(p.into_pyarray(py)?.into_any()),
                None => None,
            },
        ))
    })
}

/// Sort `keys` in place on the engine (a device group where `use(devices=…)` made one); the
/// permutation when `want_permutation`.
fn sort_on<T: SortKey>(
    e: &Engine,
    keys: &mut [T],
    want_permutation: bool,
    order: SortOrder,
) -> gpusort_core::Result<Option<Vec<u32>>> {
    Ok(match e {
        Engine::Cpu => gpusort_core::cpu_engine::sort(keys, None, want_permutation, order, None)?,
        Engine::Gpu(g) => match &g.group {
            Some((group, sorters)) => {
                use gpusort_core::multi::sort::{sort_host_spread, Spread};
                let spread = if g.spread_always {
                    Spread::Always
                } else {
                    Spread::WhenItPays
                };
                sort_host_spread(
                    group,
                    sorters,
                    keys,
                    HostSort {
                        permutation: want_permutation,
                        order,
                        ..HostSort::default()
                    },
                    spread,
                )?
                .0
            }
            None => {
                g.sorter
                    .sort_host(
                        &g.gpu,
                        keys,
                        HostSort {
                            permutation: want_permutation,
                            order,
                            ..HostSort::default()
                        },
                    )?
                    .0
            }
        },
    })
}

/// `a` (1-D) split around the median of a sample of its keys into a new array: the keys below
/// it, those equal to it, those above it (NaNs among them), with where the equal ones start and
/// end; or None where one side would hold over three quarters of the keys. NumPy's sort of each
/// side on a thread of its own then sorts the whole (gpusort/__init__.py).
#[pyfunction]
fn split_halves<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
) -> PyResult<Option<(Bound<'py, PyAny>, usize, usize)>> {
    with_keys!(a, |arr: T| {
        let x = input(&arr);
        let split = run(py, move |_| {
            let mut out = ResultBuf::<T>::new(x.as_slice().len());
            let bounds = gpusort_core::cpu_engine::split_halves(x.as_slice(), out.as_mut_slice())?;
            Ok(bounds.map(|b| (out, b)))
        })?;
        match split {
            Some((out, (lo, hi))) => Ok(Some((out.into_pyarray(py)?.into_any(), lo, hi))),
            None => Ok(None),
        }
    })
}

/// The permutation that sorts `a` (segments of `segment` keys on their own), as int64: on the
/// CPU engine without moving the keys themselves.
#[pyfunction]
#[pyo3(signature = (a, descending, segment))]
fn argsort<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    descending: bool,
    segment: Option<u32>,
) -> PyResult<Bound<'py, PyAny>> {
    with_keys!(a, |arr: T| {
        let order = sort_order(arr.len(), descending, segment)?;
        let data = input(&arr);
        let perm = run(py, move |e| {
            let perm = match e {
                Engine::Cpu => gpusort_core::cpu_engine::argsort(data.as_slice(), order, None)?,
                Engine::Gpu(_) => {
                    let mut keys = result_of(data.as_slice(), |x| x);
                    sort_on(e, keys.as_mut_slice(), true, order)?
                        .expect("a permutation was asked for")
                }
            };
            Ok(result_of(&perm, i64::from))
        })?;
        Ok(perm.into_pyarray(py)?.into_any())
    })
}

fn scan_op(op: &str) -> PyResult<ScanOp> {
    Ok(match op {
        "add" => ScanOp::Add,
        "max" => ScanOp::Max,
        "min" => ScanOp::Min,
        "and" => ScanOp::And,
        "or" => ScanOp::Or,
        "xor" => ScanOp::Xor,
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown op {other:?} (add, max, min, and, or, xor)"
            )))
        }
    })
}

fn scan_keys<T: SortKey + numpy::Element>(
    e: &Engine,
    data: &[T],
    op: ScanOp,
    inclusive: bool,
) -> gpusort_core::Result<ResultBuf<T>> {
    // every element of the result is written by the scan (a recycled block's old bytes too)
    let mut buf = ResultBuf::new(data.len());
    let out = buf.as_mut_slice();
    match e {
        Engine::Cpu => gpusort_core::cpu_engine::scan(data, out, op, inclusive)?,
        Engine::Gpu(g) if T::TYPE.is_wide() => {
            g.scanner64.scan_into(&g.gpu, data, out, op, inclusive)?
        }
        Engine::Gpu(g) => {
            // chunk by chunk: the input copied into staging while the GPU scans the chunk
            // before, results copied straight into `out` (at any length: no one binding limit)
            let chunk = gpusort_core::scan::streamed::chunk_elements_for(
                &g.gpu,
                T::TYPE.size(),
                data.len(),
            );
            let job = ScanStream::new(op, inclusive, chunk);
            g.scanner
                .scan_into(&g.gpu, data, out, &job, |_, _| Ok(()))?;
        }
    }
    Ok(buf)
}

/// The sum scan of 32-bit integers `data` in 64 bits (NumPy's cumsum widens them): the GPU
/// widens them as it reads them, and so does the CPU engine.
fn cumsum_widened<S: SortKey, T: SortKey + numpy::Element>(
    e: &Engine,
    data: &[S],
    inclusive: bool,
    widen: impl Fn(S) -> T + Sync,
    add: impl Fn(T, T) -> T + Sync,
) -> gpusort_core::Result<ResultBuf<T>> {
    // every element written by the scan
    let mut buf = ResultBuf::new(data.len());
    match e {
        Engine::Gpu(g) => g.scanner64.scan_widened_into(
            &g.gpu,
            data,
            buf.as_mut_slice(),
            ScanOp::Add,
            inclusive,
        )?,
        Engine::Cpu => {
            gpusort_core::cpu_engine::sum_widened(data, buf.as_mut_slice(), inclusive, widen, add)?
        }
    }
    Ok(buf)
}

/// The scan of `a` with `op` (its dtype kept; integers wrap).
#[pyfunction]
fn scan<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    op: &str,
    inclusive: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let op = scan_op(op)?;
    with_keys!(a, |arr: T| {
        let t = <T as SortKey>::TYPE;
        let ok = match t.is_wide() {
            true => gpusort_core::scan::scan64::supports(t, op),
            false => op.code(t).is_some(),
        };
        if !ok {
            return Err(PyValueError::new_err(format!(
                "a {op:?} scan of {t} is not supported (integers: add, max, min, and, or, xor; floats: add)"
            )));
        }
        let data = input(&arr);
        let n = data.as_slice().len();
        let out = run_scan(py, n, move |e| scan_keys(e, data.as_slice(), op, inclusive))?;
        Ok(out.into_pyarray(py)?.into_any())
    })
}

fn split_keys<T: SortKey>(
    e: &Engine,
    data: Vec<T>,
    pred: Predicate<T>,
    keep_rest: bool,
    want_index: bool,
) -> gpusort_core::Result<(Vec<T>, Option<Vec<u32>>, usize)> {
    let index: Option<Vec<u32>> = want_index.then(|| (0..data.len() as u32).collect());
    match e {
        Engine::Cpu => gpusort_core::cpu_engine::split(&data, index.as_deref(), &pred, keep_rest),
        Engine::Gpu(g) => {
            // each chunk's matching elements drained straight to their place at the front of
            // the result, the others to a second buffer that follows them at the end
            let n = data.len();
            let sized = |on: bool| if on { n } else { 0 };
            use gpusort_core::device::transfer::zeroed_vec;
            let mut kept = zeroed_vec::<T>(n);
            let mut kept_at = zeroed_vec::<u32>(sized(want_index));
            let mut rest = zeroed_vec::<T>(sized(keep_rest));
            let mut rest_at = zeroed_vec::<u32>(sized(keep_rest && want_index));
            let (mut kept_end, mut rest_end) = (0, 0);
            let chunk = gpusort_core::scan::streamed::chunk_elements_for(
                &g.gpu,
                T::TYPE.size(),
                data.len(),
            );
            let job = SplitStream {
                payload: index.as_deref(),
                predicate: pred,
                chunk,
                rest: keep_rest,
            };
            let count = g.scanner.split_streamed_with(
                &g.gpu,
                &data,
                &job,
                |c| {
                    let (k, r) = (c.kept, c.len() - c.kept);
                    c.elements_into(0, &mut kept[kept_end..kept_end + k]);
                    if want_index {
                        c.payload_into(0, &mut kept_at[kept_end..kept_end + k]);
                    }
                    if keep_rest {
                        c.elements_into(k, &mut rest[rest_end..rest_end + r]);
                        if want_index {
                            c.payload_into(k, &mut rest_at[rest_end..rest_end + r]);
                        }
                    }
                    kept_end += k;
                    rest_end += r;
                },
                |()| Ok(()),
            )?;
            kept.truncate(count);
            kept.extend_from_slice(&rest[..rest_end]);
            // (the index buffers are empty where no index was asked for: truncating keeps that)
            kept_at.truncate(count);
            rest_at.truncate(rest_end);
            kept_at.extend_from_slice(&rest_at);
            Ok((kept, want_index.then_some(kept_at), count))
        }
    }
}

/// `np.cumsum(a)` of a 1-D array: int32 widened to int64 and uint32 to uint64 (as NumPy does)
/// while the elements are copied, then an add scan in the result's dtype.
#[pyfunction]
fn cumsum<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    inclusive: bool,
) -> PyResult<Bound<'py, PyAny>> {
    if let Ok(arr) = a.extract::<PyReadonlyArray1<'_, i32>>() {
        let data = input(&arr);
        let out = run_scan(py, data.as_slice().len(), move |e| {
            cumsum_widened(e, data.as_slice(), inclusive, i64::from, i64::wrapping_add)
        })?;
        return Ok(out.into_pyarray(py)?.into_any());
    }
    if let Ok(arr) = a.extract::<PyReadonlyArray1<'_, u32>>() {
        let data = input(&arr);
        let out = run_scan(py, data.as_slice().len(), move |e| {
            cumsum_widened(e, data.as_slice(), inclusive, u64::from, u64::wrapping_add)
        })?;
        return Ok(out.into_pyarray(py)?.into_any());
    }
    scan(py, a, "add", inclusive)
}

/// A stable split of `a`: elements before `pivot` (kind "below"), not before it ("at_least"), or
/// nonzero ("nonzero") first; the rest after them with `keep_rest`. Returns (elements, input
/// positions or None, how many hold). `pivot` is a one-element array of `a`'s dtype.
#[pyfunction]
#[pyo3(signature = (a, kind, pivot, keep_rest, want_index))]
fn split<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    kind: &str,
    pivot: Option<&Bound<'py, PyAny>>,
    keep_rest: bool,
    want_index: bool,
) -> PyResult<(Bound<'py, PyAny>, Option<Bound<'py, PyAny>>, usize)> {
    let kind = kind.to_string();
    with_keys!(a, |arr: T| {
        let p: Option<T> = match pivot {
            Some(p) => {
                let p = p.extract::<PyReadonlyArray1<'_, T>>().map_err(|_| {
                    PyTypeError::new_err(
                        "the pivot must be a one-element array of the array's dtype",
                    )
                })?;
                owned(&p).first().copied()
            }
            None => None,
        };
        let pred = match (kind.as_str(), p) {
            ("below", Some(p)) => Predicate::Below(p),
            ("at_least", Some(p)) => Predicate::AtLeast(p),
            ("nonzero", _) => Predicate::NonZero,
            _ => return Err(PyValueError::new_err("a split needs a kind and its pivot")),
        };
        let data = owned(&arr);
        let (out, at, count) = run(py, move |e| {
            split_keys(e, data, pred, keep_rest, want_index)
        })?;
        Ok((
            out.into_pyarray(py).into_any(),
            at.map(|v| v.into_pyarray(py).into_any()),
            count,
        ))
    })
}

fn stencil_grid<T: gpusort_core::stencil::StencilValue + numpy::Element>(
    e: &Engine,
    grid: &[T],
    job: StencilJob,
) -> gpusort_core::Result<ResultBuf<T>> {
    // every cell of the result is written (a recycled block's old bytes too)
    let mut buf = ResultBuf::new(grid.len());
    match e {
        Engine::Cpu => {
            let out = buf.as_mut_slice();
            let cells = grid.len();
            // steps in batches of about 2^28 cell-taps (a fraction of a second), the call's
            // cancel flag checked between them; K steps are K single steps, bit for bit
            let taps = job.stencil.taps().len().max(1);
            let batch = ((1usize << 28) / (cells * taps).max(1)).clamp(1, u32::MAX as usize) as u32;
            let zero = T::from_f64(0.0);
            let mut scratch = vec![zero; if job.steps > 1 { cells } else { 0 }];
            let mut other = vec![zero; if job.steps > batch { cells } else { 0 }];
            let run_steps = |from: &[T], to: &mut [T], scratch: &mut [T], steps: u32| {
                gpusort_core::cpu_engine::stencil(
                    from,
                    to,
                    scratch,
                    job.shape,
                    &job.stencil,
                    job.boundary,
                    job.cval,
                    steps,
                )
            };
            let mut done = batch.min(job.steps);
            run_steps(grid, out, &mut scratch, done);
            let mut in_out = true; // where the latest grid lies: `out` or `other`
            while done < job.steps {
                if cancelled() {
                    return Err(gpusort_core::Error::Cancelled);
                }
                let steps = batch.min(job.steps - done);
                match in_out {
                    true => run_steps(out, &mut other, &mut scratch, steps),
                    false => run_steps(&other, out, &mut scratch, steps),
                }
                in_out = !in_out;
                done += steps;
            }
            if !in_out {
                out.copy_from_slice(&other);
            }
            Ok(buf)
        }
        Engine::Gpu(g) => {
            use gpusort_sched::stencil::{plan, Budget, Speeds, Streaming};
            let gpu = &g.gpu;
            let kernel = planned_stencil(gpu, &job, &g.stencil_tuning)?;
            if let Some((group, _)) = &g.group {
                if gpusort_core::multi::stencil::fits(group, &job) {
                    // each device holds its slabs; the first device's kernel choice on all
                    let mut kernels = vec![kernel];
                    for other in &group.gpus()[1..] {
                        kernels.push(StencilKernel::with_choice(
                            other,
                            &job,
                            kernels[0].choice(),
                        )?);
                    }
                    let (out, _) = gpusort_core::multi::stencil::apply(group, &kernels, grid)?;
                    return Ok(ResultBuf::from_vec(out));
                }
            }
            let budget = Budget {
                memory: 4 * gpu.max_binding(),
                max_binding: gpu.max_binding(),
            };
            let guess = Speeds {
                upload_bytes_per_s: 1e10,
                download_bytes_per_s: 1e10,
                cells_per_s: 1e11,
            };
            let bad = |e: gpusort_sched::stencil::StencilPlanError| {
                gpusort_core::Error::InvalidInput(e.to_string())
            };
            let mut chosen =
                plan(&job.problem(), budget, guess, None, Streaming::Reuse).map_err(bad)?;
            if !chosen.in_core {
                // out of core: the choice of steps per residency needs this device's speeds
                let measured = gpusort_core::stencil::measure_speeds(gpu, &kernel, 32 << 20)?;
                chosen =
                    plan(&job.problem(), budget, measured, None, Streaming::Reuse).map_err(bad)?;
            }
            // submissions that stop on Ctrl-C (`cancelled`), so the next call finds the GPU free
            let out = buf.as_mut_slice();
            gpusort_core::stencil::apply_into_until(gpu, &kernel, &chosen, grid, out, &cancelled)?;
            Ok(buf)
        }
    }
}

/// The stencil kernels for `job`: measured once per job description and process where the job
/// is large enough (`StencilKernel::planned` measures on every call), else the device's
/// defaults or `gpusort tune`'s choice; the choice never changes a result.
fn planned_stencil(
    gpu: &gpusort_core::Gpu,
    job: &StencilJob,
    tuning: &gpusort_core::stencil::StencilTuning,
) -> gpusort_core::Result<StencilKernel> {
    use gpusort_core::stencil::{self, KernelChoice};
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static CHOSEN: OnceLock<Mutex<HashMap<String, KernelChoice>>> = OnceLock::new();
    if !stencil::worth_measuring(job) {
        // the device's defaults (K steps a pass in registers where they pay), or its tuning
        return StencilKernel::planned_tuned(gpu, job, tuning);
    }
    let key = format!("{job:?}");
    let cache = CHOSEN.get_or_init(Default::default);
    let known = cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key)
        .copied();
    let choice = match known {
        Some(c) => c,
        None => {
            let c = stencil::choose_kernel(gpu, job, 64 << 20)?;
            cache
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key, c);
            c
        }
    };
    StencilKernel::with_choice(gpu, job, choice)
}

/// `steps` Jacobi steps of a stencil over a C-contiguous 2-D or 3-D float32/float64 grid; the
/// weights, if given, are a flat (2R+1)^d float64 array.
#[pyfunction]
#[pyo3(signature = (grid, radius, kind, weights, boundary, cval, steps))]
// (the Python call's own keyword arguments, one parameter each)
#[allow(clippy::too_many_arguments)]
fn stencil<'py>(
    py: Python<'py>,
    grid: &Bound<'py, PyAny>,
    radius: u32,
    kind: &str,
    weights: Option<PyReadonlyArray1<'py, f64>>,
    boundary: &str,
    cval: f64,
    steps: u32,
) -> PyResult<Bound<'py, PyAny>> {
    let boundary: Boundary = boundary.parse().map_err(to_py)?;
    macro_rules! typed {
        ($t:ty) => {{
            let arr = grid.extract::<PyReadonlyArrayDyn<'_, $t>>()?;
            let dims: Vec<usize> = arr.shape().to_vec();
            let shape = GridShape::new(&dims).map_err(to_py)?;
            let stencil = match &weights {
                Some(w) => Stencil::from_weights(dims.len(), radius, &owned(w)),
                None if kind == "box" => Stencil::boxed(dims.len(), radius),
                None => Stencil::star(dims.len(), radius),
            }
            .map_err(to_py)?;
            let job = StencilJob {
                shape,
                stencil,
                boundary,
                cval,
                steps,
                dtype: <$t as gpusort_core::stencil::StencilValue>::TYPE,
            };
            job.validate().map_err(to_py)?;
            let cells = input_nd(&arr);
            let out = run(py, move |e| stencil_grid(e, cells.as_slice(), job))?;
            let flat = out.into_pyarray(py)?;
            Ok(flat.reshape(dims)?.into_any())
        }};
    }
    if grid.extract::<PyReadonlyArrayDyn<'_, f32>>().is_ok() {
        typed!(f32)
    } else if grid.extract::<PyReadonlyArrayDyn<'_, f64>>().is_ok() {
        typed!(f64)
    } else {
        Err(PyTypeError::new_err("stencil grids are float32 or float64"))
    }
}

/// The engine in use (made now if it was not), as a dict.
#[pyfunction]
fn info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let e = engine()?;
    let d = PyDict::new(py);
    d.set_item("threads", pool().current_num_threads())?;
    // large results' recycled memory (pool.rs): bytes idle now, and the most it keeps
    d.set_item("result_pool_bytes", pool::held())?;
    d.set_item("result_pool_limit", pool::limit())?;
    match e.as_ref() {
        Engine::Cpu => {
            d.set_item("engine", "cpu")?;
        }
        Engine::Gpu(g) => {
            let a = &g.gpu.adapter;
            d.set_item("engine", "gpu")?;
            d.set_item("adapter", &a.name)?;
            d.set_item("backend", &a.backend)?;
            d.set_item("device_type", &a.device_type)?;
            d.set_item("driver", format!("{} {}", a.driver, a.driver_info))?;
            d.set_item("subgroups", g.gpu.subgroups().is_some())?;
            // when `gpusort tune` measured the tuning in use; None: the defaults
            d.set_item("tuned", g.tuned.clone())?;
            d.set_item("max_buffer_size", g.gpu.limits.max_buffer_size)?;
            d.set_item("max_storage_binding", g.gpu.max_binding())?;
            d.set_item(
                "f64_shaders",
                g.gpu.features.contains(wgpu::Features::SHADER_F64),
            )?;
            let devices: Vec<String> = match &g.group {
                Some((group, _)) => group
                    .gpus()
                    .iter()
                    .map(|x| x.adapter.name.clone())
                    .collect(),
                None => vec![a.name.clone()],
            };
            d.set_item("devices", devices)?;
        }
    }
    Ok(d)
}

/// Measure the fastest tuning of the GPU in use (the library's tuner, as `gpusort tune` runs it)
/// and store it where `gpusort tune` does; the context is then made afresh from it. Returns what
/// was stored, as JSON text, the file's path, and each family's speed-up over the defaults.
#[pyfunction]
#[pyo3(signature = (quick=false, verbose=false))]
fn tune(py: Python<'_>, quick: bool, verbose: bool) -> PyResult<(String, String, [f64; 3])> {
    let path = tuning_path().ok_or_else(|| {
        PyValueError::new_err("no cache directory for the tuning: set GPUSORT_CACHE_DIR")
    })?;
    let at = path.clone();
    let (text, gains) = run(py, move |e| {
        let Engine::Gpu(g) = e else {
            return Err(gpusort_core::Error::InvalidInput(
                "tune measures a GPU, and calls here run on the CPU engine; use(backend=\"gpu\") \
                 tunes a software adapter"
                    .into(),
            ));
        };
        let say = |line: &str| {
            if verbose {
                eprintln!("{line}");
            }
        };
        let tuned = gpusort_core::tune::measure(&g.gpu, quick, &say)?;
        let stored = gpusort_core::tuning::StoredTuning::measured(&g.gpu, &tuned);
        let mut file = gpusort_core::tuning::TuningFile::load(&at).unwrap_or_default();
        file.insert(stored.clone());
        file.save(&at)?;
        let text = serde_json::to_string(&stored).expect("a tuning serialises");
        Ok((text, [tuned.sort_gain, tuned.scan_gain, tuned.stencil_gain]))
    })?;
    // later calls run with the stored tuning
    lock(&ENGINE).take();
    Ok((text, path.display().to_string(), gains))
}

/// Free the memory kept for recycling large result arrays (pool.rs); returns the bytes freed.
#[pyfunction]
fn release_memory() -> usize {
    pool::release()
}

/// Choose where later calls run: backend "auto" (a hardware GPU if there is one, else the CPU
/// engine), "cpu", "gpu" (any adapter, software ones too), "vulkan", "metal", "dx12" or "gl";
/// `adapter` a name substring or index; `devices` several ("all", a count, or a list such as
/// "0,1"). Replaces the context in use.
#[pyfunction]
#[pyo3(signature = (backend=None, adapter=None, devices=None, spread_always=false))]
fn use_device(
    backend: Option<String>,
    adapter: Option<String>,
    devices: Option<String>,
    spread_always: bool,
) -> PyResult<()> {
    if adapter.is_some() && devices.is_some() {
        return Err(PyValueError::new_err(
            "adapter and devices both choose devices: give one of them",
        ));
    }
    if let Some(d) = devices.as_deref() {
        gpusort_core::multi::DeviceSpec::parse(d).map_err(to_py)?;
    }
    // the CPU engine has no devices to name: refused rather than ignored
    if backend.as_deref() == Some("cpu") && (adapter.is_some() || devices.is_some()) {
        return Err(PyValueError::new_err(
            "backend \"cpu\" runs on the CPU engine: adapter and devices name GPUs",
        ));
    }
    if let Some(b) = backend.as_deref() {
        const KNOWN: [&str; 7] = ["auto", "cpu", "gpu", "vulkan", "metal", "dx12", "gl"];
        if !KNOWN.contains(&b) {
            return Err(PyValueError::new_err(format!(
                "unknown backend {b:?} ({})",
                KNOWN.join(", ")
            )));
        }
    }
    // a choice that fails leaves the one in use in place (settings and context)
    let previous = lock(&SETTINGS).replace(Settings {
        backend,
        adapter,
        devices,
        spread_always,
    });
    let in_use = {
        let mut slot = lock(&ENGINE);
        if slot
            .as_ref()
            .is_some_and(|(made_in, _)| *made_in != std::process::id())
        {
            forget_inherited(&mut slot);
        }
        slot.take()
    };
    match engine() {
        Ok(_) => Ok(()),
        Err(e) => {
            *lock(&SETTINGS) = previous;
            *lock(&ENGINE) = in_use;
            Err(e)
        }
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(sort, m)?)?;
    m.add_function(wrap_pyfunction!(argsort, m)?)?;
    m.add_function(wrap_pyfunction!(split_halves, m)?)?;
    m.add_function(wrap_pyfunction!(scan, m)?)?;
    m.add_function(wrap_pyfunction!(cumsum, m)?)?;
    m.add_function(wrap_pyfunction!(split, m)?)?;
    m.add_function(wrap_pyfunction!(stencil, m)?)?;
    m.add_function(wrap_pyfunction!(info, m)?)?;
    m.add_function(wrap_pyfunction!(release_memory, m)?)?;
    m.add_function(wrap_pyfunction!(use_device, m)?)?;
    m.add_function(wrap_pyfunction!(tune, m)?)?;
    m.add("GpuError", m.py().get_type::<GpuError>())?;
    Ok(())
}
