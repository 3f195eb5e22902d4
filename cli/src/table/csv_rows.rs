//! CSV to CSV: a sort reorders the file's records and changes nothing else. The key columns are
//! typed as a CSV column is typed for any other output (arrow-csv's inference over every record)
//! and sorted stably by gpusort-arrow (ties keep their input order); then the header and every record are written back as the very bytes they were (quoting,
//! leading zeros, number spellings, line ends), in the new order. A file without records keeps
//! its header. A folder of CSV files is one table: the same header in each, written once.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Array, ArrayRef, StringBuilder};
use arrow::compute::{cast, concat, SortOptions};
use arrow::datatypes::DataType;
use gpusort_arrow::{KeyColumn, SortEngine};
use memmap2::Mmap;

use super::outcome::{arrow_side, TableTimes};
use super::read::merged;
use super::ByKey;
use crate::error::{CliError, CliResult};
use gpusort_files::{shown, Output};

/// A CSV file's bytes split into its header and its records (each with the line end that
/// follows it, blank lines after it included).
struct Records {
    /// The header line's end (where the first record starts).
    header_end: usize,
    /// Where each record starts; one more entry: the end of the file.
    starts: Vec<usize>,
    /// The header's field names.
    names: Vec<String>,
    /// The line end the file uses ("\r\n" or "\n"), for a last record that has none.
    line_end: &'static [u8],
    /// The cells of each column named in `keys`, as text (empty cells are nulls, as arrow-csv
    /// reads them).
    keys: Vec<ArrayRef>,
}

/// Split `bytes` into records, keeping the text of the columns named `keys`.
fn split(path: &Path, bytes: &[u8], keys: &[&str]) -> CliResult<Records> {
    let bad = |e: csv::Error| {
        let at = e
            .position()
            .map(|p| format!(" (line {})", p.line()))
            .unwrap_or_default();
        CliError::usage(format!(
            "{}: not a CSV file gpusort can read{at}: {e}",
            path.display()
        ))
    };
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(bytes);
    let mut record = csv::ByteRecord::new();
    let mut starts = Vec::new();
    let mut names = Vec::new();
    let mut header_end = bytes.len();
    let mut fields = None;
    let mut key_columns = Vec::new();
    let mut builders: Vec<StringBuilder> = keys.iter().map(|_| StringBuilder::new()).collect();
    loop {
        // the reader stops after a record's first terminator byte (the \r of \r\n) and skips
        // blank lines when it reads the next one: those bytes end the record before
        let mut at = reader.position().byte() as usize;
        while at < bytes.len() && (bytes[at] == b'\n' || bytes[at] == b'\r') {
            at += 1;
        }
        if !reader.read_byte_record(&mut record).map_err(bad)? {
            break;
        }
        match fields {
            None => {
                names = record
                    .iter()
                    .map(|f| String::from_utf8_lossy(f).into_owned())
                    .collect();
                fields = Some(record.len());
                key_columns = keys
                    .iter()
                    .map(|k| {
                        names.iter().position(|n| n.as_str() == *k).ok_or_else(|| {
                            CliError::usage(format!(
                                "{} has no column {k:?} (columns: {})",
                                path.display(),
                                names.join(", ")
                            ))
                        })
                    })
                    .collect::<CliResult<Vec<usize>>>()?;
            }
            Some(_) => {
                if starts.is_empty() {
                    header_end = at;
                }
                starts.push(at);
                for (b, &c) in builders.iter_mut().zip(&key_columns) {
                    match record.get(c) {
                        Some(f) if !f.is_empty() => b.append_value(String::from_utf8_lossy(f)),
                        _ => b.append_null(),
                    }
                }
            }
        }
    }
    if names.is_empty() {
        return Err(CliError::usage(format!(
            "{}: an empty file has no header line to name its columns",
            path.display()
        )));
    }
    starts.push(bytes.len());
    let first_end = bytes[..header_end.min(bytes.len())]
        .iter()
        .position(|&b| b == b'\n');
    let line_end: &'static [u8] = match first_end {
        Some(i) if i > 0 && bytes[i - 1] == b'\r' => b"\r\n",
        _ => b"\n",
    };
    Ok(Records {
        header_end,
        starts,
        names,
        line_end,
        keys: builders
            .iter_mut()
            .map(|b| Arc::new(b.finish()) as ArrayRef)
            .collect(),
    })
}

/// The types of the file's columns (arrow-csv's inference over every record, as read.rs types
/// them for other outputs).
fn column_types(path: &Path, bytes: &[u8]) -> CliResult<Vec<DataType>> {
    let (schema, _) = arrow::csv::reader::Format::default()
        .with_header(true)
        .infer_schema(bytes, None)
        .map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
    Ok(schema
        .fields()
        .iter()
        .map(|f| f.data_type().clone())
        .collect())
}

/// One input file, mapped, and its records.
struct Mapped {
    map: Option<Mmap>,
    records: Records,
}

impl Mapped {
    fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

fn map_file(path: &Path) -> CliResult<Option<Mmap>> {
    let file = std::fs::File::open(path)
        .map_err(|e| CliError::usage(format!("cannot read {}: {e}", path.display())))?;
    if let Ok(meta) = file.metadata() {
        gpusort_files::watch_input(path, &meta);
        if meta.len() == 0 {
            return Ok(None);
        }
    }
    // SAFETY: a read-only map of a regular file; a change to it during the job is caught by the
    // input watch (files::watch_input), which then refuses to put any output in place.
    unsafe { Mmap::map(&file) }
        .map(Some)
        .map_err(|e| CliError::runtime(format!("cannot read {}: {e}", path.display())))
}

/// Sort the CSV files `inputs` (one file, or a folder's files as one table: the same header in
/// each) by `by` (directions as resolved by the caller: `(ascending, nulls_first)` per key) into
/// `dest`, record text unchanged; the first file's header leads.
pub(super) fn sort(
    engine: &SortEngine,
    inputs: &[PathBuf],
    by: &[(ByKey, bool, bool)],
    dest: &Path,
) -> CliResult<TableTimes> {
    let start = Instant::now();
    let names: Vec<&str> = by.iter().map(|(k, _, _)| k.column.as_str()).collect();
    let mut files = Vec::with_capacity(inputs.len());
    let mut types_of: Vec<Vec<DataType>> = Vec::new();
    for path in inputs {
        let map = map_file(path)?;
        let bytes: &[u8] = map.as_deref().unwrap_or(&[]);
        let records = split(path, bytes, &names)?;
        if let Some(first) = files.first() {
            let first: &Mapped = first;
            if first.records.names != records.names {
                return Err(CliError::usage(format!(
                    "{} has the columns {}, {} has {}: a folder's CSV files are one table",
                    inputs[0].display(),
                    first.records.names.join(", "),
                    path.display(),
                    records.names.join(", ")
                )));
            }
        }
        // a file of a header alone says nothing of its columns' types
        if records.starts.len() > 1 {
            types_of.push(column_types(path, bytes)?);
        }
        files.push(Mapped { map, records });
    }
    let Some(head) = files.first() else {
        return Err(CliError::usage(
            "a folder without CSV files has no table to sort",
        ));
    };
    // where each file's records start among all of them
    let mut first_row = Vec::with_capacity(files.len() + 1);
    let mut rows = 0usize;
    for f in &files {
        first_row.push(rows);
        rows += f.records.starts.len() - 1;
    }
    first_row.push(rows);
    // the key columns, typed; a stable sort keeps ties in input order
    let mut columns = Vec::new();
    for (i, (key, ascending, nulls_first)) in by.iter().enumerate() {
        let c = head
            .records
            .names
            .iter()
            .position(|n| *n == key.column)
            .expect("split found it");
        let parts: Vec<&dyn Array> = files.iter().map(|f| f.records.keys[i].as_ref()).collect();
        let text = concat(&parts).map_err(|e| CliError::runtime(e.to_string()))?;
        let column_type: Vec<DataType> =
            types_of.iter().filter_map(|t| t.get(c).cloned()).collect();
        let typed = match merged(&column_type) {
            DataType::Utf8 => text,
            t => cast(&text, &t).unwrap_or(text),
        };
        columns.push(KeyColumn {
            values: typed,
            options: SortOptions {
                descending: !ascending,
                nulls_first: *nulls_first,
            },
        });
    }
    let order = match rows {
        0 => Vec::new(),
        _ => gpusort_arrow::permutation(engine, &columns, rows).map_err(arrow_side)?,
    };
    drop(columns);
    let first_row_s = start.elapsed().as_secs_f64();

    let out = Output::create(dest)?;
    let mut w = out.sequential()?;
    let err = |e: std::io::Error| CliError::runtime(format!("cannot write {}: {e}", shown(dest)));
    use std::io::Write;
    let header = &head.bytes()[..head.records.header_end];
    w.write_all(header).map_err(err)?;
    if rows > 0 && !header.ends_with(b"\n") {
        w.write_all(head.records.line_end).map_err(err)?;
    }
    for &r in &order {
        let r = r as usize;
        let f = first_row.partition_point(|&s| s <= r) - 1;
        let (file, k) = (&files[f], r - first_row[f]);
        let (from, to) = (file.records.starts[k], file.records.starts[k + 1]);
        let text = &file.bytes()[from..to];
        w.write_all(text).map_err(err)?;
        if !text.ends_with(b"\n") {
            w.write_all(head.records.line_end).map_err(err)?;
        }
    }
    w.flush().map_err(err)?;
    drop(w);
    let write_s = start.elapsed().as_secs_f64() - first_row_s;
    let t = Instant::now();
    out.commit()?;
    Ok(TableTimes {
        rows: rows as u64,
        first_row_s,
        write_s,
        commit_s: t.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_keep_their_bytes_and_line_ends() {
        let text = b"id,zip\r\n2,\"00123\"\r\n1,02134";
        let r = split(Path::new("t.csv"), text, &["zip"]).unwrap();
        assert_eq!(r.names, ["id", "zip"]);
        assert_eq!(&text[..r.header_end], b"id,zip\r\n");
        assert_eq!(r.starts, [8, 19, text.len()]);
        assert_eq!(r.line_end, b"\r\n");
        let zip = r.keys[0]
            .as_any()
            .downcast_ref::<arrow::array::StringArray>();
        assert_eq!(zip.unwrap().value(0), "00123");
        assert!(split(Path::new("t.csv"), text, &["nope"]).is_err());
        let header_only = split(Path::new("h.csv"), b"a,b", &["a"]).unwrap();
        assert_eq!(header_only.starts, [3]);
        assert_eq!(header_only.header_end, 3);
        assert!(split(Path::new("e.csv"), b"", &[]).is_err());
    }
}
