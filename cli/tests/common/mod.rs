//! Helpers the CLI test binaries share: the binary, files of keys, listings.
#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use gpusort_tests::rng;
use rand::Rng;

/// The binary, on a GPU adapter even where the only one is a software adapter (lavapipe in CI),
/// so that these tests exercise the kernels; `--backend cpu` on the command line overrides it.
pub fn gpusort() -> Command {
    let mut c = Command::cargo_bin("gpusort").expect("binary built");
    c.env("GPUSORT_BACKEND", "gpu");
    // no stored tuning of the developer's own: the tests run the defaults (cli/tests/tune.rs
    // points this at its own folder)
    c.env(
        "GPUSORT_CACHE_DIR",
        std::env::temp_dir().join("gpusort-tests-no-stored-tuning"),
    );
    c
}

pub fn write_u32(path: &Path, v: &[u32]) {
    std::fs::write(path, bytemuck::cast_slice::<u32, u8>(v)).unwrap();
}

pub fn read_u32(path: &Path) -> Vec<u32> {
    bytemuck::pod_collect_to_vec(&std::fs::read(path).unwrap())
}

pub fn write_npy<T: npyz::AutoSerialize + Copy>(path: &Path, shape: &[u64], v: &[T]) {
    use npyz::WriterBuilder;
    let mut f = std::fs::File::create(path).unwrap();
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(&mut f)
        .begin_nd()
        .unwrap();
    w.extend(v.iter().copied()).unwrap();
    w.finish().unwrap();
}

pub fn read_npy<T: npyz::Deserialize>(path: &Path) -> (Vec<u64>, Vec<T>) {
    let bytes = std::fs::read(path).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    let shape = npy.shape().to_vec();
    (shape, npy.into_vec().unwrap())
}

pub fn random_u32(n: usize, seed: u64) -> Vec<u32> {
    let mut r = rng(seed);
    (0..n).map(|_| r.random()).collect()
}

/// Every file in `dir` (to show that a failed run left nothing behind).
pub fn listing(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// Every case is refused: exit code 2 and exactly one line on stderr, `gpusort: ...` naming it.
pub fn assert_refused(cases: &[(Vec<String>, &str)]) {
    for (args, needle) in cases {
        let out = gpusort().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.starts_with("gpusort: ") && err.contains(needle),
            "{args:?}: {err}"
        );
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{args:?}: one line, got {err}"
        );
    }
}

pub fn temp_files(dir: &Path) -> Vec<PathBuf> {
    listing(dir)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(".gpusort-"))
        })
        .collect()
}

pub fn write_f32(path: &Path, v: &[f32]) {
    std::fs::write(path, bytemuck::cast_slice::<f32, u8>(v)).unwrap();
}

pub fn random_f32(n: usize, seed: u64) -> Vec<f32> {
    let mut r = rng(seed);
    (0..n).map(|_| r.random_range(-1.0..1.0)).collect()
}

/// Wait (60 s at most) until `dir` holds at least `count` temporary files of gpusort's, then a
/// little longer, into the stall that GPUSORT_TEST_STALL_BEFORE_RENAME_MS holds it in.
pub fn wait_for_temp_files(dir: &Path, count: usize) {
    let start = std::time::Instant::now();
    while temp_files(dir).len() < count {
        assert!(
            start.elapsed().as_secs() < 60,
            "no temporary files appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
}

/// Command-line words as owned strings (for argument lists built from paths).
#[allow(dead_code)]
pub fn strs(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}
