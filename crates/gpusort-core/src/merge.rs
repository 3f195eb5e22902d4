//! Inputs larger than one storage binding: sort pieces on the GPU, then merge on the host.
//!
//! Pieces are sorted stably and merged taking the earliest piece on ties, so the result is the
//! same stable order one big sort gives. Segmented sorts cut pieces on segment boundaries and
//! need no merge at all.

use rayon::prelude::*;

use crate::bitonic::{BitonicSorter, SortStats};
use crate::cpu::keys::sortable;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::keys::{SortKey, SortOrder};

pub(crate) fn sort_in_pieces<T: SortKey>(
    sorter: &BitonicSorter,
    gpu: &Gpu,
    keys: &mut [T],
    values: Option<&mut [u32]>,
    want_permutation: bool,
    order: SortOrder,
    max_piece: usize,
) -> Result<(Option<Vec<u32>>, SortStats)> {
    let mut piece = max_piece;
    if let Some(s) = order.segment_size {
        let s = s as usize;
        if s > max_piece {
            return Err(Error::TooLarge(format!(
                "segments of {s} keys exceed the {max_piece} one GPU sort holds"
            )));
        }
        piece = max_piece / s * s;
    }
    tracing::info!(
        n = keys.len(),
        piece,
        "input exceeds one binding: sorting in pieces"
    );
    let mut perm: Vec<u32> = Vec::with_capacity(keys.len());
    let mut stats = None;
    for (i, chunk) in keys.chunks_mut(piece).enumerate() {
        let (p, s) = sorter.sort_host(gpu, chunk, None, true, order)?;
        let offset = (i * piece) as u32;
        perm.extend(p.unwrap_or_default().into_iter().map(|x| x + offset));
        stats.get_or_insert(s);
    }
    // the merge compares what the sort compared: the key-bit range only, when there is one
    let bits = sorter.key_bits();
    let merge_key = |k: &T| match &bits {
        Some(r) => crate::cpu::radix::key_on_bits(k, order.descending, r),
        None => sortable(k, order.descending),
    };
    if order.segment_size.is_none() {
        // Pairwise merges of the sorted pieces, the pairs of a round in parallel, on (sort order
        // as u64, position in the piece-sorted array); ties take the earlier piece, so the order
        // stays stable. A binary-heap k-way merge took 12 s for 2^28 keys in two pieces on the
        // GPU machine's CPU; this is a few linear passes.
        let mut runs: Vec<Vec<(u64, u32)>> = keys
            .chunks(piece)
            .enumerate()
            .map(|(c, k)| {
                k.iter()
                    .enumerate()
                    .map(|(j, k)| (merge_key(k), (c * piece + j) as u32))
                    .collect()
            })
            .collect();
        while runs.len() > 1 {
            runs = runs
                .par_chunks(2)
                .map(|pair| match pair {
                    [a, b] => merge_two(a, b),
                    [a] => a.clone(),
                    _ => unreachable!("chunks of at most two"),
                })
                .collect();
        }
        let merged = runs.pop().unwrap_or_default();
        let piece_sorted = keys.to_vec();
        let piece_perm = std::mem::take(&mut perm);
        for (out, &(_, pos)) in keys.iter_mut().zip(&merged) {
            *out = piece_sorted[pos as usize];
        }
        perm = merged
            .iter()
            .map(|&(_, pos)| piece_perm[pos as usize])
            .collect();
    }
    if let Some(v) = values {
        let src = v.to_vec();
        for (dst, &i) in v.iter_mut().zip(&perm) {
            *dst = src[i as usize];
        }
    }
    Ok((
        want_permutation.then_some(perm),
        stats.expect("at least one piece"),
    ))
}

/// Stable merge of two sorted runs: on equal keys the left run's element comes first.
fn merge_two(a: &[(u64, u32)], b: &[(u64, u32)]) -> Vec<(u64, u32)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if b[j].0 < a[i].0 {
            out.push(b[j]);
            j += 1;
        } else {
            out.push(a[i]);
            i += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}
