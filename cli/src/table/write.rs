//! Table outputs: Parquet (encoded on every core), Arrow IPC or CSV, written to a flushed
//! temporary file that is put in place only when the whole job has succeeded.

use std::path::Path;
use std::time::Instant;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use super::outcome::TableTimes;
use super::parquet::ParallelParquetWriter;
use super::TableFormat;
use crate::error::{CliError, CliResult};
use gpusort_files::{shown, Output};

/// One table output being written.
pub(super) struct Sink {
    out: Output,
    dest: std::path::PathBuf,
    writer: TableWriter<gpusort_files::StreamWriter>,
    rows: u64,
    started: Instant,
    first_row_s: Option<f64>,
}

impl Sink {
    /// Start `dest` in `format` with the table's `schema` (its types and metadata, as the input
    /// had them) and, for Parquet, the input's key-value metadata. `started`: when the job began
    /// (the time to the first row is reading and sorting).
    pub(super) fn create(
        dest: &Path,
        schema: SchemaRef,
        format: TableFormat,
        key_values: Vec<KeyValue>,
        started: Instant,
    ) -> CliResult<Sink> {
        let out = Output::create(dest)?;
        let file = out.sequential()?;
        let writer = TableWriter::new(file, schema, format, key_values)?;
        Ok(Sink {
            out,
            dest: dest.to_path_buf(),
            writer,
            rows: 0,
            started,
            first_row_s: None,
        })
    }

    pub(super) fn write(&mut self, batch: &RecordBatch) -> CliResult {
        let started = self.started;
        self.first_row_s
            .get_or_insert_with(|| started.elapsed().as_secs_f64());
        self.rows += batch.num_rows() as u64;
        self.writer.write(batch)
    }

    /// Finish the file, flush it, and put it in place.
    pub(super) fn commit(self) -> CliResult<TableTimes> {
        self.writer.finish(&self.dest)?;
        let total = self.started.elapsed().as_secs_f64();
        let first_row_s = self.first_row_s.unwrap_or(total);
        let t = Instant::now();
        self.out.commit()?;
        Ok(TableTimes {
            rows: self.rows,
            first_row_s,
            write_s: total - first_row_s,
            commit_s: t.elapsed().as_secs_f64(),
        })
    }
}

fn runtime(e: impl std::fmt::Display) -> CliError {
    CliError::runtime(e.to_string())
}

enum TableWriter<W: std::io::Write + Send + 'static> {
    Parquet(ParallelParquetWriter<W>),
    Arrow(arrow::ipc::writer::FileWriter<W>),
    Csv(arrow::csv::Writer<W>),
}

impl<W: std::io::Write + Send + 'static> TableWriter<W> {
    fn new(
        w: W,
        schema: SchemaRef,
        format: TableFormat,
        key_values: Vec<KeyValue>,
    ) -> CliResult<Self> {
        Ok(match format {
            // zstd level 1: a few percent larger than level 3 and written several times faster
            TableFormat::Parquet => TableWriter::Parquet(
                ParallelParquetWriter::try_new(
                    w,
                    schema,
                    WriterProperties::builder()
                        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).map_err(runtime)?))
                        // a column with more distinct values than fit 256 KiB is written plain:
                        // as small after zstd, and encoded a third faster than after filling
                        // the default 1 MiB dictionary first
                        .set_dictionary_page_size_limit(256 << 10)
                        .set_key_value_metadata((!key_values.is_empty()).then_some(key_values))
                        .build(),
                )
                .map_err(runtime)?,
            ),
            TableFormat::Arrow => TableWriter::Arrow(
                arrow::ipc::writer::FileWriter::try_new(w, &schema).map_err(runtime)?,
            ),
            TableFormat::Csv => {
                TableWriter::Csv(arrow::csv::WriterBuilder::new().with_header(true).build(w))
            }
        })
    }

    fn write(&mut self, batch: &RecordBatch) -> CliResult {
        match self {
            TableWriter::Parquet(w) => w.write(batch).map_err(runtime),
            TableWriter::Arrow(w) => w.write(batch).map_err(runtime),
            TableWriter::Csv(w) => w.write(batch).map_err(runtime),
        }
    }

    fn finish(self, dest: &Path) -> CliResult {
        let err = |e: &dyn std::fmt::Display| {
            CliError::runtime(format!("cannot write {}: {e}", shown(dest)))
        };
        let mut inner = match self {
            TableWriter::Parquet(w) => w.into_inner().map_err(|e| err(&e))?,
            TableWriter::Arrow(mut w) => {
                w.finish().map_err(|e| err(&e))?;
                w.into_inner().map_err(|e| err(&e))?
            }
            TableWriter::Csv(w) => w.into_inner(),
        };
        std::io::Write::flush(&mut inner).map_err(|e| err(&e))
    }
}
