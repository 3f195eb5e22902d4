//! A stencil job: the grid, the taps, the boundary and the steps.

use std::str::FromStr;

use gpusort_sched::stencil::StencilProblem;

use crate::error::{Error, Result};
use crate::keys::KeyType;

/// Largest radius gpusort accepts (the tap code is unrolled; a 3-D box of radius 8 has 4913 taps).
pub const MAX_RADIUS: u32 = 8;

/// Boundary handling, with scipy.ndimage's names and meanings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Boundary {
    /// Outside values are a constant (`cval`).
    Constant,
    /// The nearest edge value: `a a a | a b c d | d d d`.
    Nearest,
    /// Half-sample symmetric: `d c b a | a b c d | d c b a`.
    Reflect,
    /// Whole-sample symmetric: `d c b | a b c d | c b a`.
    Mirror,
    /// Periodic: `a b c d | a b c d | a b c d`.
    Wrap,
}

impl Boundary {
    /// Every boundary, in the order of [`Boundary::NAMES`].
    pub const ALL: [Boundary; 5] = [
        Boundary::Constant,
        Boundary::Nearest,
        Boundary::Reflect,
        Boundary::Mirror,
        Boundary::Wrap,
    ];
    pub const NAMES: [&'static str; 5] = ["constant", "nearest", "reflect", "mirror", "wrap"];

    pub(super) fn code(self) -> u32 {
        self as u32
    }
}

impl std::fmt::Display for Boundary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(Boundary::NAMES[self.code() as usize])
    }
}

impl FromStr for Boundary {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match Boundary::NAMES.iter().position(|n| *n == s) {
            Some(i) => Ok(Boundary::ALL[i]),
            None => Err(Error::InvalidInput(format!(
                "unknown boundary '{s}' (expected {})",
                Boundary::NAMES.join(", ")
            ))),
        }
    }
}

/// A grid's shape, C order; the first axis is the streaming axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridShape {
    dims: usize,
    extents: [usize; 3],
}

impl GridShape {
    /// A 2-D (`[y, x]`) or 3-D (`[z, y, x]`) shape with no empty axis.
    pub fn new(extents: &[usize]) -> Result<GridShape> {
        if !(2..=3).contains(&extents.len()) {
            return Err(Error::InvalidInput(format!(
                "stencil grids are 2-D or 3-D; got {} axes",
                extents.len()
            )));
        }
        if extents.contains(&0) {
            return Err(Error::InvalidInput(format!(
                "grid shape {extents:?} has an empty axis"
            )));
        }
        // 2-D grids are seen as (rows, 1, x): the streaming axis stays first
        let e = match *extents {
            [y, x] => [y, 1, x],
            [z, y, x] => [z, y, x],
            _ => unreachable!("checked above: 2 or 3 axes"),
        };
        Ok(GridShape {
            dims: extents.len(),
            extents: e,
        })
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The extents as given.
    pub fn extents(&self) -> Vec<usize> {
        match self.dims {
            2 => vec![self.extents[0], self.extents[2]],
            _ => self.extents.to_vec(),
        }
    }

    /// `[rows, ny, nx]`, with `ny = 1` for 2-D grids.
    pub fn as_3d(&self) -> [usize; 3] {
        self.extents
    }

    pub fn cells(&self) -> usize {
        self.extents.iter().product()
    }

    pub fn rows(&self) -> usize {
        self.extents[0]
    }

    pub fn row_cells(&self) -> usize {
        self.extents[1] * self.extents[2]
    }
}

impl std::fmt::Display for GridShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let e: Vec<String> = self.extents().iter().map(|n| n.to_string()).collect();
        f.write_str(&e.join("x"))
    }
}

/// One tap: a neighbour's offset `[dz, dy, dx]` (`dy = 0` for 2-D) and its weight.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tap {
    pub offset: [i32; 3],
    pub weight: f64,
}

/// The taps of a stencil, in the order of its dense weights array (C order), zero weights left
/// out — the order both the kernel and the CPU twin sum in.
#[derive(Clone, Debug, PartialEq)]
pub struct Stencil {
    pub(super) dims: usize,
    pub(super) radius: u32,
    pub(super) taps: Vec<Tap>,
}

impl Stencil {
    fn check(dims: usize, radius: u32) -> Result<()> {
        if !(2..=3).contains(&dims) {
            return Err(Error::InvalidInput(format!(
                "stencils are 2-D or 3-D, not {dims}-D"
            )));
        }
        if !(1..=MAX_RADIUS).contains(&radius) {
            return Err(Error::InvalidInput(format!(
                "radius must be between 1 and {MAX_RADIUS}, not {radius}"
            )));
        }
        Ok(())
    }

    /// The offset `[dz, dy, dx]` of element `i` of a dense `(2R+1)^dims` weights array (C order);
    /// 2-D offsets `(dy, dx)` become `(dz, 0, dx)`, as rows stay the streaming axis.
    fn offset_of(i: usize, dims: usize, radius: u32) -> [i32; 3] {
        let side = 2 * radius as usize + 1;
        let mut off = [0i32; 3];
        let mut rest = i;
        for d in (0..dims).rev() {
            off[d] = (rest % side) as i32 - radius as i32;
            rest /= side;
        }
        if dims == 2 {
            off = [off[0], 0, off[1]];
        }
        off
    }

    /// The dense weights of a `(2R+1)^dims` array in C order: 1 where `keep` says so.
    fn dense(dims: usize, radius: u32, keep: impl Fn([i32; 3]) -> bool) -> Vec<f64> {
        (0..(2 * radius as usize + 1).pow(dims as u32))
            .map(|i| f64::from(u8::from(keep(Stencil::offset_of(i, dims, radius)))))
            .collect()
    }

    /// Equal weights on the axes (a cross of `2·dims·R + 1` points) summing to 1.
    pub fn star(dims: usize, radius: u32) -> Result<Stencil> {
        Stencil::check(dims, radius)?;
        let mut w = Stencil::dense(dims, radius, |o| o.iter().filter(|&&d| d != 0).count() <= 1);
        let n = (2 * dims as u32 * radius + 1) as f64;
        w.iter_mut().for_each(|x| *x /= n);
        Stencil::from_weights(dims, radius, &w)
    }

    /// Equal weights on the whole `(2R+1)^dims` box, summing to 1.
    pub fn boxed(dims: usize, radius: u32) -> Result<Stencil> {
        Stencil::check(dims, radius)?;
        let mut w = Stencil::dense(dims, radius, |_| true);
        let n = w.len() as f64;
        w.iter_mut().for_each(|x| *x /= n);
        Stencil::from_weights(dims, radius, &w)
    }

    /// A dense `(2R+1)^dims` weights array in C order (scipy.ndimage.correlate's `weights`).
    pub fn from_weights(dims: usize, radius: u32, weights: &[f64]) -> Result<Stencil> {
        Stencil::check(dims, radius)?;
        let side = 2 * radius as usize + 1;
        if weights.len() != side.pow(dims as u32) {
            return Err(Error::InvalidInput(format!(
                "a radius-{radius} {dims}-D stencil needs {} weights, got {}",
                side.pow(dims as u32),
                weights.len()
            )));
        }
        if let Some(bad) = weights.iter().find(|w| !w.is_finite()) {
            return Err(Error::InvalidInput(format!(
                "stencil weights must be finite, found {bad}"
            )));
        }
        let taps = weights
            .iter()
            .enumerate()
            .filter(|(_, &w)| w != 0.0)
            .map(|(i, &w)| Tap {
                offset: Stencil::offset_of(i, dims, radius),
                weight: w,
            })
            .collect();
        Ok(Stencil { dims, radius, taps })
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    pub fn radius(&self) -> u32 {
        self.radius
    }

    pub fn taps(&self) -> &[Tap] {
        &self.taps
    }

    /// Largest |offset| per axis of the 3-D view.
    pub(super) fn reach(&self) -> [i32; 3] {
        let mut r = [0; 3];
        for t in &self.taps {
            for (r, o) in r.iter_mut().zip(t.offset) {
                *r = (*r).max(o.abs());
            }
        }
        r
    }
}

/// Grid cell types: f32, and f64 where the device has SHADER_F64.
pub trait StencilValue:
    bytemuck::Pod + Send + Sync + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self>
{
    const TYPE: KeyType;
    fn from_f64(v: f64) -> Self;
}

impl StencilValue for f32 {
    const TYPE: KeyType = KeyType::F32;
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

impl StencilValue for f64 {
    const TYPE: KeyType = KeyType::F64;
    fn from_f64(v: f64) -> Self {
        v
    }
}

/// Everything that fixes a stencil job's kernel and results.
#[derive(Clone, Debug, PartialEq)]
pub struct StencilJob {
    pub shape: GridShape,
    pub stencil: Stencil,
    pub boundary: Boundary,
    /// The outside value of `Boundary::Constant`.
    pub cval: f64,
    pub steps: u32,
    pub dtype: KeyType,
}

impl StencilJob {
    /// Check the job against itself (the device is checked by [`StencilKernel::new`](super::StencilKernel::new)).
    pub fn validate(&self) -> Result<()> {
        if !matches!(self.dtype, KeyType::F32 | KeyType::F64) {
            return Err(Error::InvalidInput(format!(
                "stencil grids hold f32 or f64, not {}",
                self.dtype
            )));
        }
        if self.stencil.dims != self.shape.dims {
            return Err(Error::InvalidInput(format!(
                "a {}-D stencil cannot run on the {}-D grid {}",
                self.stencil.dims, self.shape.dims, self.shape
            )));
        }
        if self.steps == 0 {
            return Err(Error::InvalidInput("steps must be at least 1".into()));
        }
        for (axis, &n) in self.shape.extents().iter().enumerate() {
            if self.stencil.radius as usize > n {
                return Err(Error::InvalidInput(format!(
                    "radius {} is larger than the grid {} (axis {axis} has {n} cells)",
                    self.stencil.radius, self.shape
                )));
            }
        }
        Ok(())
    }

    pub fn cell_bytes(&self) -> u64 {
        self.dtype.size() as u64
    }

    pub fn row_bytes(&self) -> u64 {
        self.shape.row_cells() as u64 * self.cell_bytes()
    }

    /// The problem as the planner sees it.
    pub fn problem(&self) -> StencilProblem {
        StencilProblem {
            rows: self.shape.rows() as u64,
            row_cells: self.shape.row_cells() as u64,
            cell_bytes: self.cell_bytes(),
            radius: self.stencil.radius as u64,
            steps: self.steps as u64,
            periodic: self.boundary == Boundary::Wrap,
        }
    }
}

/// The distinct tap rows `(dz, dy)` of a stencil, in tap order.
pub(super) fn tap_rows(job: &StencilJob) -> Vec<(i32, i32)> {
    let mut rows = Vec::new();
    for t in job.stencil.taps() {
        let [dz, dy, _] = t.offset;
        if !rows.contains(&(dz, dy)) {
            rows.push((dz, dy));
        }
    }
    rows
}

/// The boundary rule (scipy.ndimage's modes): where coordinate `i` reads from along an axis of extent `n` (`None`: the constant value).
pub fn map_axis(boundary: Boundary, i: i64, n: i64) -> Option<i64> {
    if (0..n).contains(&i) {
        return Some(i);
    }
    Some(match boundary {
        Boundary::Constant => return None,
        Boundary::Nearest => i.clamp(0, n - 1),
        Boundary::Reflect => {
            let m = i.rem_euclid(2 * n);
            if m >= n {
                2 * n - 1 - m
            } else {
                m
            }
        }
        Boundary::Mirror => {
            if n == 1 {
                0
            } else {
                let m = i.rem_euclid(2 * n - 2);
                if m >= n {
                    2 * n - 2 - m
                } else {
                    m
                }
            }
        }
        Boundary::Wrap => i.rem_euclid(n),
    })
}
