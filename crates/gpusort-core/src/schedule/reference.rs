//! The CPU reference of a batch, and the self-test batch that proves the merged launch on a
//! device.

use gpusort_sched::{Task, TaskGraph};

use crate::keys::KeyType;
use crate::scan::ScanOp;

use super::batch::*;

pub(super) fn cast<T: bytemuck::Pod>(words: &[u32]) -> &[T] {
    bytemuck::cast_slice(words)
}

pub(super) fn words_of<T: bytemuck::Pod>(values: &[T]) -> Vec<u32> {
    bytemuck::cast_slice(values).to_vec()
}

/// The CPU reference of a batch: each task in dependency order on a copy of `data`.
pub fn reference(batch: &Batch, data: &[u32]) -> Vec<u32> {
    use crate::reference::{keys::sorted, scan::scan};
    let mut out = data.to_vec();
    let mut g = TaskGraph::default();
    for t in &batch.tasks {
        g.add(Task {
            name: String::new(),
            blocks: 1,
            workgroup_memory: 0,
            deps: t.deps.clone(),
        });
    }
    let order = g.topological_order().expect("an acyclic batch");
    for i in order {
        let t = &batch.tasks[i];
        let region = &mut out[t.offset as usize..(t.offset + t.n) as usize];
        match t.work {
            Work::Sort {
                key_type,
                descending,
            } => {
                let order = crate::SortOrder {
                    descending,
                    segment_size: None,
                };
                let sorted: Vec<u32> = match key_type {
                    KeyType::F32 => words_of(&sorted(cast::<f32>(region), order)),
                    KeyType::I32 => words_of(&sorted(cast::<i32>(region), order)),
                    _ => sorted::<u32>(region, order),
                };
                region.copy_from_slice(&sorted);
            }
            Work::Scan {
                key_type,
                op,
                inclusive,
            } => {
                let scanned: Vec<u32> = match key_type {
                    KeyType::F32 => words_of(&scan(cast::<f32>(region), op, inclusive)),
                    KeyType::I32 => words_of(&scan(cast::<i32>(region), op, inclusive)),
                    _ => scan::<u32>(region, op, inclusive),
                };
                region.copy_from_slice(&scanned);
            }
            Work::Split {
                key_type,
                test,
                keep_rest,
                dst,
                count_at,
            } => {
                let src = out[t.offset as usize..(t.offset + t.n) as usize].to_vec();
                let (words, count) = split(key_type, &src, test, keep_rest);
                out[dst as usize..dst as usize + words.len()].copy_from_slice(&words);
                out[count_at as usize] = count;
            }
        }
    }
    out
}

/// The CPU twin of a split task on 32-bit words of `key_type`: what it writes to its
/// destination (the passing elements, then for a partition the rest), and the passing count.
pub fn split(key_type: KeyType, src: &[u32], test: Test, keep_rest: bool) -> (Vec<u32>, u32) {
    match key_type {
        KeyType::F32 => split_words::<f32>(src, test, keep_rest),
        KeyType::I32 => split_words::<i32>(src, test, keep_rest),
        _ => split_words::<u32>(src, test, keep_rest),
    }
}

pub(super) fn split_words<T: crate::SortKey>(
    src: &[u32],
    test: Test,
    keep_rest: bool,
) -> (Vec<u32>, u32) {
    use crate::scan::Predicate;
    let pivot = |bits: u32| bytemuck::cast::<u32, T>(bits);
    let pred = match test {
        Test::Below(p) => Predicate::Below(pivot(p)),
        Test::AtLeast(p) => Predicate::AtLeast(pivot(p)),
        Test::NonZero => Predicate::NonZero,
    };
    let values: &[T] = bytemuck::cast_slice(src);
    let (kept, split) = if keep_rest {
        let (all, _, split) = crate::reference::scan::partition(values, None, &pred);
        (all, split)
    } else {
        let (kept, _) = crate::reference::scan::compact(values, None, &pred);
        let n = kept.len();
        (kept, n)
    };
    (words_of(&kept), split as u32)
}

/// The self-test: chains of multi-block sorts and scans over shared regions, so a block that ran
/// before its producer finished would change the result.
pub(super) fn self_test_batch() -> (Batch, Vec<u32>) {
    let n = 3 * MAX_CAP + 123;
    let data = crate::bench::random_u32(2 * n as usize, 7);
    let mut b = Batch::default();
    let sort = Work::Sort {
        key_type: KeyType::U32,
        descending: false,
    };
    let scan = Work::Scan {
        key_type: KeyType::U32,
        op: ScanOp::Xor,
        inclusive: true,
    };
    let a = b.add(sort, 0, n, &[]);
    let c = b.add(scan, 0, n, &[a]);
    let d = b.add(sort, n, n, &[]);
    b.add(scan, n, n, &[c, d]);
    (b, data)
}
