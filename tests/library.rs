//! The library's promises about itself, checked on its sources: no environment variable that
//! could change a result is read by the library crates, the core crate's families depend on each other one way only, and the
//! CPU twins and the kernels are built apart.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable source folder") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Code lines of a file: comments dropped, so a doc comment may name a variable.
fn code(path: &Path) -> Vec<(usize, String)> {
    std::fs::read_to_string(path)
        .expect("readable source")
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split("//").next().unwrap_or("").to_string()))
        .collect()
}

/// The environment reads the library crates may make, none of which changes a result: the file
/// crate's test hooks (debug builds only: a pause at a delicate moment), the system's folder for
/// temporary files (where scratch goes when no output names a folder) and the host's name on
/// Windows (whose leftovers of killed runs are whose).
const ALLOWED_ENV_READS: [(&str, &str); 3] = [
    ("gpusort-files/src/lib.rs", "std::env::var(var)"),
    ("gpusort-files/src/", "std::env::temp_dir()"),
    ("gpusort-files/src/platform.rs", "\"COMPUTERNAME\""),
];

#[test]
fn the_library_crates_read_no_environment_variable() {
    let mut files = Vec::new();
    for krate in [
        "crates/gpusort-core/src",
        "crates/gpusort-sched/src",
        "crates/gpusort-files/src",
        "crates/gpusort-bench/src",
    ] {
        rust_files(&root().join(krate), &mut files);
    }
    assert!(
        files.len() > 20,
        "found the sources ({} files)",
        files.len()
    );
    let mut found = Vec::new();
    for f in &files {
        for (n, line) in code(f) {
            if [
                "std::env",
                "env::var",
                "var_os(",
                "option_env!",
                "with_env()",
            ]
            .iter()
            .any(|p| line.contains(p))
                && !ALLOWED_ENV_READS.iter().any(|(file, read)| {
                    f.to_string_lossy().replace('\\', "/").contains(file) && line.contains(read)
                })
            {
                found.push(format!("{}:{n}: {}", f.display(), line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "environment reads in the library:\n{}",
        found.join("\n")
    );
}

/// The folders of gpusort-core, lowest first: each may use those before it, never one after
/// (the twins sit above the job types they describe, the CPU engine above the twins it is
/// checked against, and `multi` on top, spreading jobs over devices and the engine).
const FAMILIES: [&str; 9] = [
    "keys",
    "device",
    "scan",
    "sort",
    "stencil",
    "reference",
    "cpu_engine",
    "schedule",
    "multi",
];

#[test]
fn the_core_families_depend_one_way() {
    let src = root().join("crates/gpusort-core/src");
    let mut uses: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for family in FAMILIES {
        let mut files = Vec::new();
        rust_files(&src.join(family), &mut files);
        assert!(
            !files.is_empty(),
            "crates/gpusort-core/src/{family}/ exists"
        );
        for f in &files {
            for (_, line) in code(f) {
                for other in FAMILIES {
                    if other != family && line.contains(&format!("crate::{other}")) {
                        uses.entry(family).or_default().insert(other);
                    }
                }
            }
        }
    }
    // every folder is in the order, so a new one cannot slip past it
    let folders: BTreeSet<String> = std::fs::read_dir(&src)
        .expect("readable source folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let listed: BTreeSet<String> = FAMILIES.iter().map(|f| f.to_string()).collect();
    assert_eq!(
        folders, listed,
        "every folder of gpusort-core/src has its place in FAMILIES"
    );
    let rank = |f: &str| FAMILIES.iter().position(|x| *x == f).expect("a family");
    let upward: Vec<String> = uses
        .iter()
        .flat_map(|(f, used)| {
            used.iter()
                .filter(|u| rank(u) > rank(f))
                .map(move |u| format!("{f} uses {u}"))
        })
        .collect();
    assert!(
        upward.is_empty(),
        "families must depend downward only ({FAMILIES:?}): {upward:?}"
    );
    // and the facades are where the architecture says
    for (family, facade) in [
        ("sort", "pub struct Sorter"),
        ("scan", "pub struct Scanner"),
        ("device", "pub struct Gpu"),
    ] {
        let text = std::fs::read_to_string(src.join(family).join("mod.rs")).expect("mod.rs");
        assert!(text.contains(facade), "{family}/mod.rs holds `{facade}`");
    }
}

/// The CPU twins (`reference/`) are what the kernels are checked against, so neither side is
/// built from the other: the twins import no kernel code (generation, pipelines, devices, the
/// engines), and no kernel generation imports a twin (shared rules live in the job types, such
/// as `stencil::map_axis`, or in `sort::radix_layout`).
#[test]
fn the_reference_twins_and_the_kernels_are_built_apart() {
    let src = root().join("crates/gpusort-core/src");
    let mut twins = Vec::new();
    rust_files(&src.join("reference"), &mut twins);
    assert!(
        !twins.is_empty(),
        "crates/gpusort-core/src/reference/ exists"
    );
    let kernel_code = [
        "crate::device",
        "crate::wgsl",
        "_wgsl",
        "kernel",
        "crate::cpu_engine",
        "crate::multi",
        "crate::schedule",
        "crate::sort::radix::",
    ];
    let mut found = Vec::new();
    for f in &twins {
        for (n, line) in code(f) {
            if let Some(k) = kernel_code.iter().find(|k| line.contains(*k)) {
                found.push(format!("{}:{n}: a twin uses {k}", f.display()));
            }
        }
    }
    let mut all = Vec::new();
    rust_files(&src, &mut all);
    let generation = |f: &Path| {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
        name.ends_with("_wgsl.rs") || ["wgsl.rs", "kernel.rs"].contains(&name)
    };
    for f in all.iter().filter(|f| generation(f)) {
        for (n, line) in code(f) {
            if line.contains("crate::reference") {
                found.push(format!(
                    "{}:{n}: kernel generation uses a twin",
                    f.display()
                ));
            }
        }
    }
    // the key order the engines and the external sort use is `keys::order`, not a twin's
    for f in all.iter().filter(|f| !f.starts_with(src.join("reference"))) {
        for (n, line) in code(f) {
            if line.contains("reference::keys::") || line.contains("reference::radix::") {
                found.push(format!("{}:{n}: the key order from a twin", f.display()));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// A caller's device made with wgpu's default limits and no features: gpusort adapts (bitonic
/// sorts, workgroup-memory scans), names what the radix sort lacks, and refuses a device below
/// what any kernel needs with a clear error.
#[test]
fn a_callers_device_with_default_limits() {
    use gpusort_core::scan::{ScanOp, Scanner};
    use gpusort_core::{wgpu, Algorithm, Gpu, SortOrder, Sorter};
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::PRIMARY;
    let instance = wgpu::Instance::new(desc);
    let adapter = pollster::block_on(instance.request_adapter(&Default::default()))
        .expect("an adapter (CI has lavapipe)");
    let device = |limits: wgpu::Limits| {
        pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            required_limits: limits,
            ..Default::default()
        }))
        .expect("a device")
    };
    let (d, q) = device(wgpu::Limits::default());
    let gpu = Gpu::from_device(d, q, None).expect("default limits are enough");
    assert!(gpu.subgroups().is_none());
    let mut keys: Vec<i32> = (0..50_000).map(|i| (i * 7919 % 65_521) - 30_000).collect();
    let mut want = keys.clone();
    want.sort_unstable();
    let sorter = Sorter::new(&gpu).unwrap();
    sorter.sort(&gpu, &mut keys, SortOrder::default()).unwrap();
    assert_eq!(keys, want);
    let err = Sorter::new(&gpu)
        .unwrap()
        .with_algorithm(Algorithm::Radix)
        .sort(&gpu, &mut keys, SortOrder::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("storage buffers"), "{err}");
    let sums = Scanner::new(&gpu)
        .unwrap()
        .scan(&gpu, &want, ScanOp::Add, true)
        .unwrap();
    let mut acc = 0i32;
    let want_sums: Vec<i32> = want
        .iter()
        .map(|&k| {
            acc = acc.wrapping_add(k);
            acc
        })
        .collect();
    assert_eq!(sums, want_sums);
    // many small sorts and a scan in merged launches
    use gpusort_core::schedule::{Batch, Scheduler, Work};
    let mut data: Vec<u32> = (0..20_000u32)
        .map(|i| i.wrapping_mul(2_654_435_761) >> 7)
        .collect();
    let mut batch = Batch::default();
    let sort = Work::Sort {
        key_type: gpusort_core::KeyType::U32,
        descending: false,
    };
    let first = batch.add(sort, 0, 5000, &[]);
    batch.add(sort, 5000, 300, &[]);
    let scan = Work::Scan {
        key_type: gpusort_core::KeyType::U32,
        op: ScanOp::Add,
        inclusive: true,
    };
    batch.add(scan, 0, 5000, &[first]);
    let want = gpusort_core::schedule::reference(&batch, &data);
    Scheduler::new(&gpu)
        .unwrap()
        .run_host(&gpu, &batch, &mut data)
        .unwrap();
    assert_eq!(data, want);
    // below what the compaction kernels bind
    let (d, q) = device(wgpu::Limits::downlevel_defaults());
    let err = Gpu::from_device(d, q, Some(&adapter.get_info()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("storage buffers per shader stage"), "{err}");
}

/// `GpuOptions::pipeline_cache`: the file appears when the `Gpu` is dropped, a second `Gpu`
/// starts from it and sorts alike, and a file of garbage (a foreign or truncated cache) is an
/// empty cache, not an error.
#[test]
fn the_pipeline_cache_is_kept_and_survives_garbage() {
    use gpusort_core::{Gpu, GpuOptions, SortOrder, Sorter};
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("pipelines");
    let options = GpuOptions {
        backend: Some("vulkan".into()),
        pipeline_cache: Some(folder.clone()),
        ..Default::default()
    };
    let keys: Vec<u32> = (0..30_000u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let mut want = keys.clone();
    want.sort_unstable();
    let sort = || {
        let gpu = Gpu::new(&options).expect("a Vulkan adapter (CI has lavapipe)");
        let cached = gpu
            .features
            .contains(gpusort_core::wgpu::Features::PIPELINE_CACHE);
        let mut k = keys.clone();
        Sorter::new(&gpu)
            .unwrap()
            .sort(&gpu, &mut k, SortOrder::default())
            .unwrap();
        assert_eq!(k, want);
        cached
    };
    if !sort() {
        // a driver without application pipeline caches: nothing may be written
        assert!(!folder.exists());
        return;
    }
    let files: Vec<_> = std::fs::read_dir(&folder).unwrap().flatten().collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let file = files[0].path();
    assert!(file.extension().is_some_and(|e| e == "bin"), "{file:?}");
    assert!(sort(), "from the kept cache");
    std::fs::write(&file, b"not a pipeline cache at all").unwrap();
    assert!(sort(), "from garbage");
    let leftovers = std::fs::read_dir(&folder).unwrap().flatten().count();
    assert_eq!(leftovers, 1, "no temporary files left");
}
