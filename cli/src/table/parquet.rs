//! Parquet written on every core. One `ArrowWriter` encodes and compresses every column of every
//! row group on one thread, which bounds a sorted table's whole command; here whole row groups
//! are cut from the stream, each (row group, column) is encoded on the rayon pool while the next
//! row groups gather, and an appender thread adds the finished chunks to the file in order — the
//! same file layout and metadata as `ArrowWriter`.

use std::io::Write;
use std::mem::take;
use std::sync::Arc;

use arrow::array::{new_empty_array, RecordBatch};
use arrow::datatypes::SchemaRef;
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnChunk, ArrowColumnWriter, ArrowRowGroupWriterFactory,
};
use parquet::arrow::ArrowWriter;
use parquet::errors::{ParquetError, Result};
use parquet::file::properties::{WriterProperties, DEFAULT_MAX_ROW_GROUP_ROW_COUNT};
use parquet::file::writer::SerializedFileWriter;
use rayon::prelude::*;

pub struct ParallelParquetWriter<W: Write + Send + 'static> {
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    /// Parquet leaf columns of each Arrow field (1 for primitive fields).
    leaves: Vec<usize>,
    group_rows: usize,
    /// Row groups encoded together: about eight tasks for every thread of the pool, so the
    /// last wave of a round leaves few threads idle.
    groups_in_flight: usize,
    pending: Vec<RecordBatch>,
    pending_rows: usize,
    groups_started: usize,
    /// Rounds being encoded, in order, to the appender (a bounded queue: the producer waits
    /// when appending falls behind).
    rounds: Option<std::sync::mpsc::SyncSender<Round>>,
    /// The thread that appends each round's chunks to the file, in order, off the caller's.
    appender: Option<std::thread::JoinHandle<Result<Appended<W>>>>,
}

/// What the appender hands back: the file writer, and seconds spent appending.
type Appended<W> = (SerializedFileWriter<W>, f64);

/// One round's encoding, in the background: its column chunks, row group by row group.
type Round = std::thread::JoinHandle<Result<Vec<ArrowColumnChunk>>>;

type Task = (
    Arc<Vec<Vec<RecordBatch>>>,
    usize,
    usize,
    Vec<ArrowColumnWriter>,
);

impl<W: Write + Send + 'static> ParallelParquetWriter<W> {
    pub fn try_new(w: W, schema: SchemaRef, props: WriterProperties) -> Result<Self> {
        let group_rows = props
            .max_row_group_row_count()
            .unwrap_or(DEFAULT_MAX_ROW_GROUP_ROW_COUNT)
            .max(1);
        let leaves = schema
            .fields()
            .iter()
            .map(|f| Ok(compute_leaves(f, &new_empty_array(f.data_type()))?.len()))
            .collect::<Result<Vec<_>>>()?;
        let (file, factory) =
            ArrowWriter::try_new(w, schema.clone(), Some(props))?.into_serialized_writer()?;
        let columns = schema.fields().len().max(1);
        let per_group: usize = leaves.iter().sum();
        let (rounds, queued) = std::sync::mpsc::sync_channel::<Round>(1);
        let appender = std::thread::spawn(move || append_rounds(file, queued, per_group));
        Ok(Self {
            factory,
            schema,
            leaves,
            group_rows,
            groups_in_flight: (8 * rayon::current_num_threads()).div_ceil(columns).max(1),
            pending: Vec::new(),
            pending_rows: 0,
            groups_started: 0,
            rounds: Some(rounds),
            appender: Some(appender),
        })
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.pending_rows += batch.num_rows();
        self.pending.push(batch.clone());
        if self.pending_rows >= self.group_rows * self.groups_in_flight {
            self.encode(false)?;
        }
        Ok(())
    }

    /// Cut the pending rows into whole row groups (and, at the end, the last partial one).
    fn cut(&mut self, last: bool) -> Vec<Vec<RecordBatch>> {
        let mut groups: Vec<Vec<RecordBatch>> = Vec::new();
        let mut current = Vec::new();
        let mut current_rows = 0;
        for mut batch in take(&mut self.pending) {
            while current_rows + batch.num_rows() >= self.group_rows {
                let room = self.group_rows - current_rows;
                current.push(batch.slice(0, room));
                groups.push(take(&mut current));
                current_rows = 0;
                batch = batch.slice(room, batch.num_rows() - room);
            }
            if batch.num_rows() > 0 {
                current_rows += batch.num_rows();
                current.push(batch);
            }
        }
        if last && current_rows > 0 {
            groups.push(take(&mut current));
            current_rows = 0;
        }
        self.pending = current;
        self.pending_rows = current_rows;
        groups
    }

    /// Start encoding the whole row groups pending on the rayon pool, then append the round
    /// encoded before it, so encoding, appending and the producer of the batches overlap.
    fn encode(&mut self, last: bool) -> Result<()> {
        let groups = Arc::new(self.cut(last));
        let mut tasks: Vec<Task> = Vec::new();
        for g in 0..groups.len() {
            let mut writers = self
                .factory
                .create_column_writers(self.groups_started + g)?
                .into_iter();
            for (f, &n) in self.leaves.iter().enumerate() {
                tasks.push((groups.clone(), g, f, writers.by_ref().take(n).collect()));
            }
        }
        self.groups_started += groups.len();
        if tasks.is_empty() {
            return Ok(());
        }
        let schema = self.schema.clone();
        let round = std::thread::spawn(move || {
            let chunks: Vec<Result<Vec<ArrowColumnChunk>>> = tasks
                .into_par_iter()
                .map(|(groups, g, f, mut writers)| {
                    let field = &schema.fields()[f];
                    for batch in &groups[g] {
                        for (w, leaf) in writers
                            .iter_mut()
                            .zip(compute_leaves(field, batch.column(f))?)
                        {
                            w.write(&leaf)?;
                        }
                    }
                    writers.into_iter().map(|w| w.close()).collect()
                })
                .collect();
            let mut all = Vec::new();
            for c in chunks {
                all.extend(c?);
            }
            Ok(all)
        });
        let sent = self.rounds.as_ref().map(|tx| tx.send(round).is_ok());
        if sent != Some(true) {
            // the appender stopped: its error is the one to report
            return self.finish_appending().map(drop);
        }
        Ok(())
    }

    /// Close the queue and wait for the appender: the file writer and its appending time.
    fn finish_appending(&mut self) -> Result<Appended<W>> {
        drop(self.rounds.take());
        self.appender
            .take()
            .ok_or_else(|| ParquetError::General("the Parquet writer has stopped".into()))?
            .join()
            .map_err(|_| ParquetError::General("the Parquet appender thread panicked".into()))?
    }

    /// Write the last row groups and the footer; returns the underlying writer.
    pub fn into_inner(mut self) -> Result<W> {
        self.encode(true)?;
        let (file, appended_s) = self.finish_appending()?;
        tracing::debug!(
            "Parquet: {} row groups, appended in {appended_s:.3} s",
            self.groups_started
        );
        file.into_inner()
    }
}

/// The appender: each round's chunks, once encoded, appended to the file in order.
fn append_rounds<W: Write + Send>(
    mut file: SerializedFileWriter<W>,
    rounds: std::sync::mpsc::Receiver<Round>,
    per_group: usize,
) -> Result<Appended<W>> {
    let mut appended_s = 0.0;
    for round in rounds {
        let chunks = round
            .join()
            .map_err(|_| ParquetError::General("a Parquet encoding thread panicked".into()))??;
        let t = std::time::Instant::now();
        let mut chunks = chunks.into_iter();
        while chunks.len() > 0 {
            let mut row_group = file.next_row_group()?;
            for chunk in chunks.by_ref().take(per_group) {
                chunk.append_to_row_group(&mut row_group)?;
            }
            row_group.close()?;
        }
        appended_s += t.elapsed().as_secs_f64();
    }
    Ok((file, appended_s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Float64Array, Int32Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    fn batch(schema: &SchemaRef, from: i32, n: i32) -> RecordBatch {
        let ints: ArrayRef = Arc::new(Int32Array::from_iter(
            (from..from + n).map(|i| (i % 7 != 0).then_some(i)),
        ));
        let floats: ArrayRef = Arc::new(Float64Array::from_iter_values(
            (from..from + n).map(|i| f64::from(i) * 0.5),
        ));
        let strings: ArrayRef = Arc::new(StringArray::from_iter_values(
            (from..from + n).map(|i| format!("row {i}")),
        ));
        RecordBatch::try_new(schema.clone(), vec![ints, floats, strings]).unwrap()
    }

    /// Batches that straddle row groups, a final partial group, and an empty batch come back
    /// as the same rows, in row groups of the configured size, as ArrowWriter writes them.
    #[test]
    fn same_rows_and_row_groups_as_arrow_writer() {
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("i", DataType::Int32, true),
            Field::new("f", DataType::Float64, false),
            Field::new("s", DataType::Utf8, false),
        ]));
        let sizes = [5, 0, 13, 40, 1, 64, 9];
        let props = || {
            WriterProperties::builder()
                .set_max_row_group_row_count(Some(16))
                .build()
        };
        let mut parallel =
            ParallelParquetWriter::try_new(tempfile::tempfile().unwrap(), schema.clone(), props())
                .unwrap();
        let mut plain =
            ArrowWriter::try_new(tempfile::tempfile().unwrap(), schema.clone(), Some(props()))
                .unwrap();
        let mut from = 0;
        let mut batches = Vec::new();
        for n in sizes {
            let b = batch(&schema, from, n);
            from += n;
            parallel.write(&b).unwrap();
            plain.write(&b).unwrap();
            batches.push(b);
        }
        let ours = parallel.into_inner().unwrap();
        let theirs = plain.into_inner().unwrap();
        let read = |b: std::fs::File| {
            let r = ParquetRecordBatchReaderBuilder::try_new(b).unwrap();
            let groups: Vec<i64> = r
                .metadata()
                .row_groups()
                .iter()
                .map(|g| g.num_rows())
                .collect();
            let rows = r.build().unwrap().map(|b| b.unwrap()).collect::<Vec<_>>();
            (
                groups,
                arrow::compute::concat_batches(&schema, &rows).unwrap(),
            )
        };
        let (our_groups, our_rows) = read(ours);
        let (their_groups, their_rows) = read(theirs);
        assert_eq!(our_groups, their_groups);
        assert_eq!(our_groups.iter().sum::<i64>(), i64::from(from));
        assert_eq!(our_rows, their_rows);
        assert_eq!(
            our_rows,
            arrow::compute::concat_batches(&schema, &batches).unwrap()
        );
    }

    #[test]
    fn an_empty_table_is_a_valid_file() {
        let schema: SchemaRef = Arc::new(Schema::new(vec![Field::new("i", DataType::Int32, true)]));
        let w = ParallelParquetWriter::try_new(
            tempfile::tempfile().unwrap(),
            schema,
            WriterProperties::default(),
        )
        .unwrap();
        let r = ParquetRecordBatchReaderBuilder::try_new(w.into_inner().unwrap()).unwrap();
        assert_eq!(r.metadata().file_metadata().num_rows(), 0);
    }
}
