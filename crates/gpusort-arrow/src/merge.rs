//! Sorted runs merged into one sorted stream: the external sort's last step.

use arrow::array::RecordBatch;
use arrow::compute::{interleave_record_batch, SortOptions};
use arrow::datatypes::Schema;
use arrow::row::{RowConverter, Rows, SortField};
use std::cmp::Ordering;

use crate::error::Result;

/// A sorted run: its batches in order, each sorted by the merge's keys and after the one before.
pub type Run = Box<dyn Iterator<Item = Result<RecordBatch>> + Send>;

/// Runs merged by the key columns `keys` (column index, order) into batches of at most
/// `batch_size` rows. Rows with equal keys come from the earlier run first, and within a run in
/// its order: runs cut from a table in input order and sorted stably merge into a stable sort.
pub struct Merge {
    keys: Vec<usize>,
    converter: RowConverter,
    runs: Vec<Cursor>,
    /// The runs not yet drained, as a binary min-heap by (current row, run index).
    heap: Vec<usize>,
    /// The batches the pending output rows come from (each run's current one among them).
    held: Vec<RecordBatch>,
    pending: Vec<(usize, usize)>,
    batch_size: usize,
    started: bool,
}

struct Cursor {
    source: Run,
    rows: Option<Rows>,
    /// The current batch's place in `held`, and the next row.
    slot: usize,
    at: usize,
    len: usize,
}

impl Merge {
    /// `schema`: the runs' (where the key columns' types come from).
    pub fn new(
        schema: &Schema,
        keys: &[(usize, SortOptions)],
        runs: Vec<Run>,
        batch_size: usize,
    ) -> Result<Merge> {
        let converter = RowConverter::new(
            keys.iter()
                .map(|&(c, o)| SortField::new_with_options(schema.field(c).data_type().clone(), o))
                .collect(),
        )?;
        Ok(Merge {
            keys: keys.iter().map(|&(c, _)| c).collect(),
            converter,
            runs: runs
                .into_iter()
                .map(|source| Cursor {
                    source,
                    rows: None,
                    slot: 0,
                    at: 0,
                    len: 0,
                })
                .collect(),
            heap: Vec::new(),
            held: Vec::new(),
            pending: Vec::new(),
            batch_size: batch_size.max(1),
            started: false,
        })
    }

    /// Load run `r`'s next non-empty batch; false where the run is drained.
    fn advance(&mut self, r: usize) -> Result<bool> {
        loop {
            let Some(batch) = self.runs[r].source.next().transpose()? else {
                self.runs[r].rows = None;
                return Ok(false);
            };
            if batch.num_rows() == 0 {
                continue;
            }
            let columns: Vec<_> = self.keys.iter().map(|&c| batch.column(c).clone()).collect();
            let cursor = &mut self.runs[r];
            cursor.rows = Some(self.converter.convert_columns(&columns)?);
            cursor.len = batch.num_rows();
            cursor.at = 0;
            cursor.slot = self.held.len();
            self.held.push(batch);
            return Ok(true);
        }
    }

    fn less(&self, a: usize, b: usize) -> bool {
        let (x, y) = (&self.runs[a], &self.runs[b]);
        let rx = x
            .rows
            .as_ref()
            .expect("a run in the heap has rows")
            .row(x.at);
        let ry = y
            .rows
            .as_ref()
            .expect("a run in the heap has rows")
            .row(y.at);
        match rx.cmp(&ry) {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => a < b,
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < n && self.less(self.heap[l], self.heap[m]) {
                m = l;
            }
            if r < n && self.less(self.heap[r], self.heap[m]) {
                m = r;
            }
            if m == i {
                return;
            }
            self.heap.swap(i, m);
            i = m;
        }
    }

    /// The pending rows as one batch; the held batches shrink to the runs' current ones.
    fn emit(&mut self) -> Result<RecordBatch> {
        let refs: Vec<&RecordBatch> = self.held.iter().collect();
        let out = interleave_record_batch(&refs, &self.pending)?;
        self.pending.clear();
        let mut held = Vec::with_capacity(self.heap.len());
        for &r in &self.heap {
            let c = &mut self.runs[r];
            held.push(self.held[c.slot].clone());
            c.slot = held.len() - 1;
        }
        self.held = held;
        Ok(out)
    }

    fn start(&mut self) -> Result<()> {
        self.started = true;
        for r in 0..self.runs.len() {
            if self.advance(r)? {
                self.heap.push(r);
            }
        }
        for i in (0..self.heap.len() / 2).rev() {
            self.sift_down(i);
        }
        Ok(())
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        if !self.started {
            self.start()?;
        }
        while let Some(&r) = self.heap.first() {
            let c = &mut self.runs[r];
            self.pending.push((c.slot, c.at));
            c.at += 1;
            if c.at == c.len && !self.advance(r)? {
                let last = self.heap.pop().expect("the heap has r");
                if !self.heap.is_empty() {
                    self.heap[0] = last;
                }
            }
            if !self.heap.is_empty() {
                self.sift_down(0);
            }
            if self.pending.len() == self.batch_size {
                return self.emit().map(Some);
            }
        }
        match self.pending.is_empty() {
            true => Ok(None),
            false => self.emit().map(Some),
        }
    }
}

impl Iterator for Merge {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Result<RecordBatch>> {
        self.next_batch().transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray, Int64Array, UInt32Array};
    use arrow::datatypes::{DataType, Field, Int64Type, UInt32Type};
    use std::sync::Arc;

    /// Runs of (key, position) merged: keys in order, equal keys by position (runs cut from one
    /// table in order), batches of every size, empty runs and batches among them.
    #[test]
    fn merges_runs_stably_in_batches_of_any_size() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("pos", DataType::UInt32, false),
        ]));
        let n = 3000u32;
        let keys: Vec<Option<i64>> = (0..n)
            .map(|i| (i % 17 != 0).then_some((i as i64 * 7919) % 23 - 11))
            .collect();
        for (runs_of, piece, out) in [
            (700usize, 64usize, 100usize),
            (3000, 1, 7),
            (1, 5, 1),
            (333, 1000, 4096),
        ] {
            let mut runs: Vec<Run> = Vec::new();
            for start in (0..n as usize).step_by(runs_of) {
                let end = (start + runs_of).min(n as usize);
                let mut rows: Vec<usize> = (start..end).collect();
                // DESC, nulls first, stable
                rows.sort_by(|&a, &b| match (keys[a], keys[b]) {
                    (None, None) => Ordering::Equal,
                    (None, _) => Ordering::Less,
                    (_, None) => Ordering::Greater,
                    (Some(x), Some(y)) => y.cmp(&x),
                });
                let mut batches = vec![RecordBatch::new_empty(schema.clone())];
                for part in rows.chunks(piece) {
                    batches.push(
                        RecordBatch::try_new(
                            schema.clone(),
                            vec![
                                Arc::new(Int64Array::from(
                                    part.iter().map(|&r| keys[r]).collect::<Vec<_>>(),
                                )),
                                Arc::new(UInt32Array::from(
                                    part.iter().map(|&r| r as u32).collect::<Vec<_>>(),
                                )),
                            ],
                        )
                        .unwrap(),
                    );
                }
                runs.push(Box::new(batches.into_iter().map(Ok)));
            }
            runs.push(Box::new(std::iter::empty()));
            let options = SortOptions {
                descending: true,
                nulls_first: true,
            };
            let merged: Vec<RecordBatch> = Merge::new(&schema, &[(0, options)], runs, out)
                .unwrap()
                .collect::<Result<_>>()
                .unwrap();
            assert!(merged
                .iter()
                .all(|b| b.num_rows() <= out && b.num_rows() > 0));
            let got: Vec<u32> = merged
                .iter()
                .flat_map(|b| b.column(1).as_primitive::<UInt32Type>().values().to_vec())
                .collect();
            let mut want: Vec<u32> = (0..n).collect();
            want.sort_by(|&a, &b| match (keys[a as usize], keys[b as usize]) {
                (None, None) => Ordering::Equal,
                (None, _) => Ordering::Less,
                (_, None) => Ordering::Greater,
                (Some(x), Some(y)) => y.cmp(&x),
            });
            assert_eq!(
                got, want,
                "runs of {runs_of}, batches of {piece}, out {out}"
            );
            let nulls: usize = merged
                .iter()
                .map(|b| b.column(0).as_primitive::<Int64Type>().null_count())
                .sum();
            assert_eq!(nulls, keys.iter().filter(|k| k.is_none()).count());
        }
    }
}
