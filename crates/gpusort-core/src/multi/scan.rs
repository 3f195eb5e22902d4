//! Scans, compactions and partitions over a device group: one contiguous part per device.
//!
//! Before the devices start, the host's cores reduce every part but the last (a scan's carries)
//! or count each part's matches (a split's output offsets) — one read of the input at memory
//! speed. Then each device streams its part as one device would ([`Scanner::scan_streamed`]
//! with its part's carry as the running value it starts from, [`Scanner::split_streamed`]) and
//! its results are handed on with their final positions. Integer scans and every split give one
//! device's bytes; f32/f64 additions are associated differently (the parts before are summed on
//! the host), within the rounding of a sum.

use std::ops::Range;

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::keys::{KeyType, SortKey};
use crate::multi::{on_each, split_even, DeviceGroup};
use crate::reference::scan::{combine64, combine_bits, holds, identity64};
use crate::scan::streamed::{ScanStream, SplitStream};
use crate::scan::{Predicate, ScanOp, Scanner};

/// The operator on element bits (32-bit elements in the low word).
#[derive(Clone, Copy)]
struct Combine {
    t: KeyType,
    op: ScanOp,
    code: u32,
    identity: u64,
}

impl Combine {
    fn new(t: KeyType, op: ScanOp) -> Result<Combine> {
        if t.is_wide() {
            return Ok(Combine {
                t,
                op,
                code: 0,
                identity: identity64(t, op),
            });
        }
        let (code, identity) = op
            .code(t)
            .ok_or_else(|| Error::InvalidInput(format!("a {op:?} scan of {t} is not supported")))?;
        Ok(Combine {
            t,
            op,
            code,
            identity: identity as u64,
        })
    }

    fn apply(&self, a: u64, b: u64) -> u64 {
        if self.t.is_wide() {
            combine64(self.t, self.op, a, b)
        } else {
            combine_bits(self.code, a as u32, b as u32) as u64
        }
    }

    fn bits<T: SortKey>(x: &T) -> u64 {
        let b = bytemuck::bytes_of(x);
        match b.len() {
            8 => u64::from_le_bytes(b.try_into().expect("8 bytes")),
            _ => u32::from_le_bytes(b.try_into().expect("4 bytes")) as u64,
        }
    }

    fn value<T: SortKey>(bits: u64) -> T {
        if T::TYPE.is_wide() {
            bytemuck::cast(bits)
        } else {
            bytemuck::cast(bits as u32)
        }
    }

    /// Everything in `data` combined, in blocks on all cores.
    fn reduce<T: SortKey>(&self, data: &[T]) -> u64 {
        let blocks: Vec<u64> = data
            .par_chunks(1 << 16)
            .map(|c| {
                c.iter()
                    .fold(self.identity, |acc, x| self.apply(acc, Self::bits(x)))
            })
            .collect();
        blocks
            .into_iter()
            .fold(self.identity, |acc, x| self.apply(acc, x))
    }
}

/// The devices' parts of `n` elements: whole chunks each.
fn parts(group: &DeviceGroup, n: usize, chunk: usize) -> Vec<Range<usize>> {
    split_even(n, group.len(), chunk.max(4) / 4 * 4)
}

/// [`Scanner::scan_streamed`] (or, for 64-bit elements, the 64-bit scan) over every device of
/// `group` (`scanners[d]` built on device d): `sink(first element, results)` gets every chunk
/// once, from the devices' threads, in no particular order across devices.
pub fn scan_streamed<T: SortKey>(
    group: &DeviceGroup,
    scanners: &[Scanner],
    input: &[T],
    job: &ScanStream<T>,
    sink: &(dyn Fn(usize, &[T]) -> Result<()> + Sync),
) -> Result<()> {
    let ScanStream {
        op, chunk, before, ..
    } = *job;
    let combine = Combine::new(T::TYPE, op)?;
    let parts = parts(group, input.len(), chunk);
    // what everything before each part combines to
    let totals: Vec<u64> = parts[..parts.len() - 1]
        .iter()
        .map(|r| combine.reduce(&input[r.clone()]))
        .collect();
    let mut carries = vec![before.map_or(combine.identity, |b| Combine::bits(&b))];
    for t in totals {
        let last = *carries.last().expect("one carry at least");
        carries.push(combine.apply(last, t));
    }
    let items: Vec<_> = parts.into_iter().zip(carries).collect();
    on_each(group, items, |d, gpu, (range, carry)| {
        let first = range.start;
        let data = &input[range];
        let before = (d > 0 || before.is_some()).then(|| Combine::value::<T>(carry));
        let at = |k: usize, piece: &[T]| sink(first + k, piece);
        let part = ScanStream { before, ..*job };
        if T::TYPE.is_wide() {
            scanners[d]
                .scanner64(gpu)
                .scan_streamed(gpu, data, &part, at)
        } else {
            scanners[d].scan_streamed(gpu, data, &part, at)
        }
    })?;
    Ok(())
}

/// One chunk of a group split, with where its elements go: the matching ones at `kept_at` of
/// the matching output, the others (when asked for) at `rest_at` among all the others.
pub struct PlacedSplit<'a, T> {
    pub range: Range<usize>,
    pub elements: &'a [T],
    pub payload: Option<&'a [u32]>,
    pub kept: usize,
    pub kept_at: usize,
    pub rest_at: usize,
}

/// Where each device's part of a split starts and how many of its elements match: counted on
/// the host's cores before the devices start, so that every chunk knows its final place.
#[derive(Clone, Debug)]
pub struct SplitPlan {
    pub parts: Vec<Range<usize>>,
    pub matched: Vec<usize>,
}

impl SplitPlan {
    /// The parts of `input` for `group` in chunks of `chunk` elements, with their matches.
    pub fn new<T: SortKey>(
        group: &DeviceGroup,
        input: &[T],
        predicate: &Predicate<T>,
        chunk: usize,
    ) -> SplitPlan {
        let parts = parts(group, input.len(), chunk);
        let matched = parts
            .iter()
            .map(|r| {
                input[r.clone()]
                    .par_iter()
                    .filter(|x| holds(*x, predicate))
                    .count()
            })
            .collect();
        SplitPlan { parts, matched }
    }

    /// How many elements match in all.
    pub fn total(&self) -> usize {
        self.matched.iter().sum()
    }
}

/// [`Scanner::split_streamed`] over every device of `group`, by `plan` (made for this input,
/// predicate, group and chunk): `sink` gets every chunk once with its final place, from the
/// devices' threads. Returns how many matched.
pub fn split_streamed<T: SortKey>(
    group: &DeviceGroup,
    scanners: &[Scanner],
    input: &[T],
    job: &SplitStream<'_, T>,
    plan: &SplitPlan,
    sink: &(dyn Fn(PlacedSplit<'_, T>) -> Result<()> + Sync),
) -> Result<usize> {
    let payload = job.payload;
    crate::scan::check_payload(input.len(), payload)?;
    if plan.parts.len() != group.len() || plan.parts.last().map(|r| r.end) != Some(input.len()) {
        return Err(Error::InvalidInput(
            "the split plan was made for another input or group".into(),
        ));
    }
    let mut bases = Vec::new();
    let (mut k, mut o) = (0usize, 0usize);
    for (r, &m) in plan.parts.iter().zip(&plan.matched) {
        bases.push((k, o));
        k += m;
        o += r.len() - m;
    }
    let items: Vec<_> = plan.parts.iter().cloned().zip(bases).collect();
    let kept = on_each(group, items, |d, gpu, (range, (kbase, obase))| {
        let first = range.start;
        let (mut k, mut o) = (kbase, obase);
        let part = SplitStream {
            payload: payload.map(|p| &p[range.clone()]),
            ..*job
        };
        scanners[d].split_streamed(gpu, &input[range.clone()], &part, |c| {
            let placed = PlacedSplit {
                range: first + c.range.start..first + c.range.end,
                elements: c.elements,
                payload: c.payload,
                kept: c.kept,
                kept_at: k,
                rest_at: o,
            };
            k += c.kept;
            o += c.range.len() - c.kept;
            sink(placed)
        })
    })?;
    let kept: usize = kept.into_iter().sum();
    if kept != plan.total() {
        return Err(Error::VerificationFailed(format!(
            "the devices kept {kept} elements where the host counted {}",
            plan.total()
        )));
    }
    Ok(kept)
}
