//! Shared helpers for the integration tests: one GPU per mode, seeded inputs of every shape.

use std::sync::OnceLock;

use gpusort_core::{Gpu, GpuOptions};
use rand::{Rng, SeedableRng};

/// The two modes every kernel is tested in: subgroups as the adapter offers them, and forced off.
pub const MODES: [bool; 2] = [false, true];

/// The shared GPU for a mode. A missing adapter fails the test: CI must have lavapipe.
pub fn gpu(no_subgroups: bool) -> &'static Gpu {
    static ON: OnceLock<Gpu> = OnceLock::new();
    static OFF: OnceLock<Gpu> = OnceLock::new();
    let cell = if no_subgroups { &OFF } else { &ON };
    cell.get_or_init(|| {
        // the tests' own choice of adapter (the library reads no environment)
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let options = GpuOptions {
            backend: var("GPUSORT_BACKEND"),
            adapter: var("GPUSORT_ADAPTER"),
            no_subgroups,
            ..Default::default()
        };
        Gpu::new(&options)
            .expect("a GPU adapter is required (on Debian: apt-get install mesa-vulkan-drivers)")
    })
}

/// Sizes around the edges: tiny, powers of two up to 2^max_log and each +-1, a few odd ones.
pub fn edge_sizes(max_log: u32) -> Vec<usize> {
    let mut v = vec![0, 1, 2, 3, 4, 5, 7, 8];
    for k in 4..=max_log {
        let p = 1usize << k;
        v.extend([p - 1, p, p + 1]);
    }
    v.extend([1000, 12345, 70001]);
    v.sort_unstable();
    v.dedup();
    v
}

pub fn rng(seed: u64) -> rand::rngs::StdRng {
    rand::rngs::StdRng::seed_from_u64(seed)
}

/// Input shapes: random, sorted, reversed, all equal, few distinct values.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    Random,
    Sorted,
    Reversed,
    AllEqual,
    FewDistinct,
}

pub const SHAPES: [Shape; 5] = [
    Shape::Random,
    Shape::Sorted,
    Shape::Reversed,
    Shape::AllEqual,
    Shape::FewDistinct,
];

/// `n` random u64 bit patterns shaped as asked (ordered as unsigned before conversion).
pub fn bits(n: usize, shape: Shape, seed: u64) -> Vec<u64> {
    let mut r = rng(seed);
    let mut v: Vec<u64> = match shape {
        Shape::AllEqual => vec![r.random(); n],
        Shape::FewDistinct => (0..n).map(|_| r.random_range(0..4u64) << 40 | 7).collect(),
        _ => (0..n).map(|_| r.random()).collect(),
    };
    match shape {
        Shape::Sorted => v.sort_unstable(),
        Shape::Reversed => v.sort_unstable_by(|a, b| b.cmp(a)),
        _ => {}
    }
    v
}

/// Float specials that must sort right: NaNs of both signs, infinities, zeros, subnormals.
pub fn f32_specials() -> Vec<f32> {
    vec![
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        f32::MIN_POSITIVE / 4.0,
        -f32::MIN_POSITIVE / 4.0,
        f32::MAX,
        f32::MIN,
        1.0,
        -1.0,
    ]
}

pub fn f64_specials() -> Vec<f64> {
    f32_specials()
        .into_iter()
        .map(|x| x as f64)
        .chain([
            f64::MIN_POSITIVE / 8.0,
            f64::from_bits(0x7ff0_0000_0000_0001),
        ])
        .collect()
}

/// A sorter or scanner with one change to its tuning (every tuning gives the same results).
pub trait Tuned {
    type Tuning;
    fn tuned(self, gpu: &Gpu, change: impl FnOnce(&mut Self::Tuning)) -> Self;
}

impl Tuned for gpusort_core::Sorter {
    type Tuning = gpusort_core::sort::SortTuning;
    fn tuned(self, gpu: &Gpu, change: impl FnOnce(&mut Self::Tuning)) -> Self {
        let mut t = self.tuning();
        change(&mut t);
        self.with_tuning(gpu, t).expect("a valid sort tuning")
    }
}

impl Tuned for gpusort_core::Scanner {
    type Tuning = gpusort_core::scan::ScanTuning;
    fn tuned(self, gpu: &Gpu, change: impl FnOnce(&mut Self::Tuning)) -> Self {
        let mut t = *self.tuning();
        change(&mut t);
        self.with_tuning(gpu, t).expect("a valid scan tuning")
    }
}
