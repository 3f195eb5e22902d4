//! Tables read straight with the arrow and parquet crates: one file, or a folder of files of one
//! format (every such file under it, subfolders included, in path order) as one table.
//!
//! A folder's files may differ as datasets written over time do: the table has every column any
//! file has (in first-seen order), a column a file lacks reads as nulls there; two files that give
//! one column different types are refused. CSV columns are typed by arrow-csv's inference over
//! every record (not a sample), merged over a folder's files as [`merged`] says.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReaderBuilder};
use parquet::file::metadata::KeyValue;
use rayon::prelude::*;

use super::TableFormat;
use crate::error::{CliError, CliResult};

/// Rows a batch read holds (DataFusion's and arrow's default).
pub(super) const BATCH_ROWS: usize = 8192;

/// An input table: its files, its schema, and what a Parquet output keeps of it.
pub(super) struct Source {
    pub(super) path: PathBuf,
    pub(super) format: TableFormat,
    files: Vec<PathBuf>,
    /// Each file's schema (a CSV file's as the table types it).
    schemas: Vec<SchemaRef>,
    /// Parquet: each file mapped, and its footer read once (every row group's reader shares it).
    parquet: Vec<(bytes::Bytes, ArrowReaderMetadata)>,
    pub(super) schema: SchemaRef,
    /// A Parquet input's key-value metadata (its first file's), the Arrow schema's copy left out.
    pub(super) key_values: Vec<KeyValue>,
    /// The largest piece read at once, in bytes (a row group's uncompressed size, or a file's).
    pub(super) largest_piece: u64,
}

/// One piece read on its own: a Parquet file's row group, or a whole Arrow or CSV file.
#[derive(Clone, Copy)]
struct Piece {
    file: usize,
    row_group: Option<usize>,
}

impl Source {
    /// Open `path` (a file, or a folder of files of one format) and read its schema; a path that
    /// is not a table the user can sort is refused with one line (exit 2).
    pub(super) fn open(path: &Path) -> CliResult<Source> {
        let meta = std::fs::metadata(path)
            .map_err(|e| CliError::usage(format!("cannot read {}: {e}", path.display())))?;
        let format = super::table_format(path).ok_or_else(|| {
            CliError::usage(format!(
                "{}: a table must end in .parquet, .arrow, .feather, .ipc or .csv (or be a folder of such files)",
                path.display()
            ))
        })?;
        let files = if meta.is_dir() {
            let files = folder_files(path, format);
            if files.is_empty() {
                return Err(CliError::usage(format!(
                    "{} holds no table files",
                    path.display()
                )));
            }
            files
        } else if meta.is_file() {
            vec![path.to_path_buf()]
        } else {
            return Err(CliError::usage(format!(
                "{} is not a regular file (tables are read by position: copy a stream to a file first)",
                path.display()
            )));
        };
        let mut schemas = Vec::with_capacity(files.len());
        let mut key_values = Vec::new();
        let mut csv_types: Vec<Vec<DataType>> = Vec::new();
        let mut largest_piece = 0u64;
        let mut parquet = Vec::new();
        for (i, f) in files.iter().enumerate() {
            let file = open_file(f)?;
            if format != TableFormat::Parquet {
                largest_piece = largest_piece.max(file.metadata().map(|m| m.len()).unwrap_or(0));
            }
            let bad = |what: &str, e: &dyn std::fmt::Display| {
                CliError::usage(format!("{}: not {what} gpusort can read: {e}", f.display()))
            };
            match format {
                TableFormat::Parquet => {
                    let bytes = mapped(f, &file)?;
                    let b = ArrowReaderMetadata::load(&bytes, Default::default())
                        .map_err(|e| bad("a Parquet file", &e))?;
                    if i == 0 {
                        key_values = b
                            .metadata()
                            .file_metadata()
                            .key_value_metadata()
                            .map(|kv| {
                                kv.iter()
                                    .filter(|k| k.key != "ARROW:schema")
                                    .cloned()
                                    .collect()
                            })
                            .unwrap_or_default();
                    }
                    largest_piece = b
                        .metadata()
                        .row_groups()
                        .iter()
                        .map(|g| g.total_byte_size().max(0) as u64)
                        .fold(largest_piece, u64::max);
                    schemas.push(b.schema().clone());
                    parquet.push((bytes, b));
                }
                TableFormat::Arrow => {
                    check_arrow_magic(f)?;
                    let r = arrow::ipc::reader::FileReader::try_new(file, None)
                        .map_err(|e| bad("an Arrow IPC file", &e))?;
                    schemas.push(r.schema());
                }
                TableFormat::Csv => {
                    let (schema, _) = arrow::csv::reader::Format::default()
                        .with_header(true)
                        .infer_schema(std::io::BufReader::new(file), None)
                        .map_err(|e| bad("a CSV file", &e))?;
                    if schema.fields().is_empty() {
                        return Err(CliError::usage(format!(
                            "{}: an empty file has no header line to name its columns",
                            f.display()
                        )));
                    }
                    csv_types.push(
                        schema
                            .fields()
                            .iter()
                            .map(|f| f.data_type().clone())
                            .collect(),
                    );
                    schemas.push(Arc::new(schema));
                }
            }
        }
        if format == TableFormat::Csv {
            // one table: the same header in each file, each column of the type merged over all
            let names: Vec<&String> = schemas[0].fields().iter().map(|f| f.name()).collect();
            for (f, s) in files.iter().zip(&schemas).skip(1) {
                let these: Vec<&String> = s.fields().iter().map(|f| f.name()).collect();
                if these != names {
                    return Err(CliError::usage(format!(
                        "{} and {} have different header lines: a folder's CSV files are one table",
                        files[0].display(),
                        f.display()
                    )));
                }
            }
            let fields: Vec<Field> = names
                .iter()
                .enumerate()
                .map(|(c, name)| {
                    let types: Vec<DataType> = csv_types.iter().map(|t| t[c].clone()).collect();
                    Field::new(name.as_str(), merged(&types), true)
                })
                .collect();
            let schema = Arc::new(Schema::new(fields));
            schemas = vec![schema.clone(); files.len()];
        }
        let schema = merged_schema(&files, &schemas)?;
        Ok(Source {
            path: path.to_path_buf(),
            format,
            files,
            schemas,
            parquet,
            schema,
            key_values,
            largest_piece,
        })
    }

    /// The table's rows in order as batches of the table's schema, pieces read `ahead` at a time
    /// on the rayon pool.
    pub(super) fn batches(
        &self,
        ahead: usize,
    ) -> CliResult<impl Iterator<Item = CliResult<RecordBatch>> + '_> {
        let pieces: Vec<Piece> = match self.format {
            TableFormat::Parquet => (self.parquet.iter().enumerate())
                .flat_map(|(i, (_, m))| {
                    (0..m.metadata().num_row_groups()).map(move |g| Piece {
                        file: i,
                        row_group: Some(g),
                    })
                })
                .collect(),
            _ => (0..self.files.len())
                .map(|i| Piece {
                    file: i,
                    row_group: None,
                })
                .collect(),
        };
        let ahead = ahead.max(1);
        let windows: Vec<Vec<Piece>> = pieces.chunks(ahead).map(|w| w.to_vec()).collect();
        Ok(windows.into_iter().flat_map(move |window| {
            let read: Vec<CliResult<Vec<RecordBatch>>> =
                window.par_iter().map(|p| self.read_piece(*p)).collect();
            read.into_iter().flat_map(|r| match r {
                Ok(batches) => batches.into_iter().map(Ok).collect::<Vec<_>>(),
                Err(e) => vec![Err(e)],
            })
        }))
    }

    fn read_piece(&self, p: Piece) -> CliResult<Vec<RecordBatch>> {
        let path = &self.files[p.file];
        let err = |e: &dyn std::fmt::Display| read_failed(path, e);
        let batches: Vec<RecordBatch> = match self.format {
            TableFormat::Parquet => {
                let (bytes, metadata) = &self.parquet[p.file];
                let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(
                    bytes.clone(),
                    metadata.clone(),
                )
                .with_row_groups(p.row_group.into_iter().collect())
                .with_batch_size(BATCH_ROWS)
                .build()
                .map_err(|e| err(&e))?;
                reader.collect::<Result<_, _>>().map_err(|e| err(&e))?
            }
            TableFormat::Arrow => arrow::ipc::reader::FileReader::try_new(open_file(path)?, None)
                .map_err(|e| err(&e))?
                .collect::<Result<_, _>>()
                .map_err(|e| err(&e))?,
            TableFormat::Csv => arrow::csv::ReaderBuilder::new(self.schemas[p.file].clone())
                .with_header(true)
                .with_batch_size(BATCH_ROWS)
                .build(std::io::BufReader::new(open_file(path)?))
                .map_err(|e| err(&e))?
                .collect::<Result<_, _>>()
                .map_err(|e| err(&e))?,
        };
        batches
            .into_iter()
            .map(|b| conform(b, &self.schema))
            .collect()
    }
}

/// A Parquet file's bytes, mapped: the reader takes its pages as slices of the map instead of a
/// seek, a read and a fresh buffer for each.
fn mapped(path: &Path, file: &File) -> CliResult<bytes::Bytes> {
    // SAFETY: a read-only map of a regular file; a change to it during the job is caught by the
    // input watch (files::watch_input), which then refuses to put any output in place.
    let map = unsafe { memmap2::Mmap::map(file) }
        .map_err(|e| CliError::runtime(format!("cannot read {}: {e}", path.display())))?;
    Ok(bytes::Bytes::from_owner(map))
}

fn open_file(path: &Path) -> CliResult<File> {
    let file = File::open(path)
        .map_err(|e| CliError::usage(format!("cannot read {}: {e}", path.display())))?;
    if let Ok(meta) = file.metadata() {
        gpusort_files::watch_input(path, &meta);
    }
    Ok(file)
}

/// A file that opened as a table but failed part way: bad data is the user's (exit 2), an
/// interrupted read is not (exit 1).
fn read_failed(path: &Path, e: &dyn std::fmt::Display) -> CliError {
    let line = format!("{}: {}", path.display(), e.to_string().replace('\n', " "));
    match line.contains("os error") || line.contains("Io error") || line.contains("IO error") {
        true => CliError::runtime(line),
        false => CliError::usage(line),
    }
}

/// Arrow IPC files open with "ARROW1"; Feather v1 (pre-2017 feather) with "FEA1".
pub(super) fn check_arrow_magic(path: &Path) -> CliResult {
    let mut magic = [0u8; 6];
    let read = File::open(path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut magic))
        .unwrap_or(0);
    if read < 6 || &magic != b"ARROW1" {
        let what = match &magic[..4] == b"FEA1" {
            true => "a Feather v1 file, which gpusort does not read (write it again with pyarrow.feather.write_feather(table, path), version 2)",
            false => "not an Arrow IPC file",
        };
        return Err(CliError::usage(format!("{} is {what}", path.display())));
    }
    Ok(())
}

/// The files of `format` under `dir` (subfolders included), in path order; hidden files and
/// folders (a leading '.' or '_', as Spark's and Hive's bookkeeping) left out.
pub(super) fn folder_files(dir: &Path, format: TableFormat) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(d) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let hidden = p
                .file_name()
                .and_then(|n| n.to_str())
                .is_none_or(|n| n.starts_with('.') || n.starts_with('_'));
            if hidden {
                continue;
            }
            if p.is_dir() {
                folders.push(p);
            } else if TableFormat::of(&p) == Some(format) {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

/// A key column's type over several files: theirs where they agree, Float64 for integers and
/// floats, else text (as DataFusion's inference merges them).
pub(super) fn merged(types: &[DataType]) -> DataType {
    match types {
        [] => DataType::Utf8,
        [first, rest @ ..] if rest.iter().all(|t| t == first) => first.clone(),
        _ if types
            .iter()
            .all(|t| matches!(t, DataType::Int64 | DataType::Float64)) =>
        {
            DataType::Float64
        }
        _ => DataType::Utf8,
    }
}

/// The table's schema over its files: every column of any file, in first-seen order (nullable
/// where some file lacks it), the first file's metadata.
fn merged_schema(files: &[PathBuf], schemas: &[SchemaRef]) -> CliResult<SchemaRef> {
    let first = &schemas[0];
    if schemas.iter().all(|s| s.fields() == first.fields()) {
        return Ok(first.clone());
    }
    let mut fields: Vec<Field> = Vec::new();
    for (f, s) in files.iter().zip(schemas) {
        for field in s.fields() {
            match fields.iter().position(|x| x.name() == field.name()) {
                Some(i) if fields[i].data_type() != field.data_type() => {
                    let first_with = files
                        .iter()
                        .zip(schemas)
                        .find(|(_, s)| s.field_with_name(field.name()).is_ok())
                        .map(|(f, _)| f.display().to_string())
                        .unwrap_or_default();
                    return Err(CliError::usage(format!(
                        "column {:?} is {} in {first_with} but {} in {}: a folder's files are one table",
                        field.name(),
                        fields[i].data_type(),
                        field.data_type(),
                        f.display()
                    )));
                }
                Some(i) => {
                    if field.is_nullable() {
                        fields[i] = fields[i].clone().with_nullable(true);
                    }
                }
                None => fields.push(field.as_ref().clone()),
            }
        }
    }
    let fields: Vec<Field> = fields
        .into_iter()
        .map(|f| {
            let everywhere = schemas.iter().all(|s| s.field_with_name(f.name()).is_ok());
            match everywhere {
                true => f,
                false => f.with_nullable(true),
            }
        })
        .collect();
    Ok(Arc::new(Schema::new_with_metadata(
        fields,
        first.metadata().clone(),
    )))
}

/// `batch` in the table's schema: its columns by name, nulls for a column its file lacks.
fn conform(batch: RecordBatch, schema: &SchemaRef) -> CliResult<RecordBatch> {
    if batch.schema().fields() == schema.fields() {
        return RecordBatch::try_new(schema.clone(), batch.columns().to_vec())
            .map_err(|e| CliError::runtime(e.to_string()));
    }
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| match batch.schema().index_of(f.name()) {
            Ok(i) => batch.column(i).clone(),
            Err(_) => new_null_array(f.data_type(), batch.num_rows()),
        })
        .collect();
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| CliError::runtime(e.to_string()))
}
