//! Tables: `gpusort sort data.parquet --by col[:desc] -o out.parquet` and `gpusort sql`.
//! Parquet, Arrow IPC and CSV (with a header) in and out; every column carried, the schema and
//! metadata kept; outputs land as every other command's do (a flushed temporary file, put in
//! place when the job has succeeded).
//!
//! - The table sort (cargo feature `tables`, on by default): read.rs reads a file or a folder
//!   with the arrow and parquet crates, sort.rs sorts through gpusort-arrow (in memory, or in
//!   spilled runs and a merge under `--memory-budget`), write.rs writes; csv_rows.rs reorders a
//!   CSV file's records without retyping them.
//! - `gpusort sql` (cargo feature `sql`, off by default: DataFusion is most of a build's time
//!   and size): sql.rs, DataFusion with the GPU sort operator (gpusort-datafusion).
//!
//! A build without a feature knows its formats and flags, and refuses its jobs with one line.

use std::path::{Path, PathBuf};

#[cfg(feature = "tables")]
mod csv_rows;
#[cfg(feature = "tables")]
mod outcome;
#[cfg(feature = "tables")]
mod parquet;
#[cfg(feature = "tables")]
mod read;
#[cfg(feature = "tables")]
mod sort;
#[cfg(feature = "sql")]
mod sql;
#[cfg(feature = "tables")]
mod write;

#[cfg(feature = "tables")]
pub use sort::sort;
#[cfg(feature = "sql")]
pub use sql::sql;

/// The table formats, known by file extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableFormat {
    Parquet,
    /// Arrow IPC file format (`.arrow`, `.feather`, `.ipc`).
    Arrow,
    /// CSV with a header line.
    Csv,
}

impl TableFormat {
    pub fn of(path: &Path) -> Option<TableFormat> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "parquet" | "pq" => TableFormat::Parquet,
            "arrow" | "feather" | "ipc" => TableFormat::Arrow,
            "csv" => TableFormat::Csv,
            _ => return None,
        })
    }
}

/// One `--by` key: `COL`, `COL:desc`, `COL:asc:nulls-first`, … (nulls sort as the largest
/// values by default, as in DataFusion's SQL: last ascending, first descending).
#[derive(Clone, Debug, PartialEq)]
pub struct ByKey {
    pub column: String,
    /// None: `--descending` decides.
    pub descending: Option<bool>,
    pub nulls_first: Option<bool>,
}

pub fn parse_by(s: &str) -> Result<ByKey, String> {
    let mut column = s;
    let mut descending = None;
    let mut nulls_first = None;
    // options are read from the right, so a column name may itself contain ':'
    while let Some((rest, word)) = column.rsplit_once(':') {
        match word.to_ascii_lowercase().as_str() {
            "asc" if descending.is_none() => descending = Some(false),
            "desc" if descending.is_none() => descending = Some(true),
            "nulls-first" if nulls_first.is_none() => nulls_first = Some(true),
            "nulls-last" if nulls_first.is_none() => nulls_first = Some(false),
            _ => break,
        }
        column = rest;
    }
    if column.is_empty() {
        return Err(format!(
            "{s:?}: expected COLUMN[:asc|:desc][:nulls-first|:nulls-last]"
        ));
    }
    Ok(ByKey {
        column: column.to_string(),
        descending,
        nulls_first,
    })
}

/// What a table sort needs from `gpusort sort`'s flags.
pub struct TableSort<'a> {
    pub input: &'a Path,
    pub output: Option<&'a Path>,
    pub in_place: bool,
    pub by: &'a [ByKey],
    /// `--descending`: the direction of keys that name none.
    pub descending: bool,
    pub memory_budget: Option<u64>,
    pub tmp_dir: Option<&'a Path>,
}

/// The format of a table path: by extension, or for a folder (a partitioned dataset) by the
/// extension of the table files in it.
pub fn table_format(path: &Path) -> Option<TableFormat> {
    if path.is_dir() {
        let entries = std::fs::read_dir(path).ok()?;
        return entries
            .filter_map(|e| e.ok())
            .find_map(|e| TableFormat::of(&e.path()));
    }
    TableFormat::of(path)
}

#[derive(clap::Args, Debug)]
pub struct SqlArgs {
    /// The query, in DataFusion's SQL. `EXPLAIN …` shows whether GpuSortExec runs.
    #[arg(value_name = "QUERY")]
    pub query: String,
    /// A table the query reads: NAME=PATH (.parquet, .arrow/.feather/.ipc, or .csv with a
    /// header). Repeat for more tables.
    #[arg(long = "table", value_name = "NAME=PATH", value_parser = parse_table)]
    pub tables: Vec<(String, PathBuf)>,
    /// Write the result here (format by extension) instead of printing it as a table.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Host memory the query may hold (e.g. 8G); sorts beyond it spill sorted runs to disk.
    #[arg(long, value_name = "BYTES")]
    pub memory_budget: Option<String>,
    /// Where spilled runs go (default: the system's temporary folder).
    #[arg(long, value_name = "DIR")]
    pub tmp_dir: Option<PathBuf>,
    /// A DataFusion setting for this query, KEY=VALUE (e.g. gpusort.enabled=false runs
    /// DataFusion's own sort; datafusion.execution.target_partitions=8). Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_setting)]
    pub settings: Vec<(String, String)>,
}

fn parse_setting(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("expected KEY=VALUE, got {s:?}"))?;
    if k.trim().is_empty() {
        return Err(format!("expected KEY=VALUE, got {s:?}"));
    }
    Ok((k.trim().to_string(), v.trim().to_string()))
}

fn parse_table(s: &str) -> Result<(String, PathBuf), String> {
    let (name, path) = s
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=PATH, got {s:?}"))?;
    if name.is_empty() || path.is_empty() {
        return Err(format!("expected NAME=PATH, got {s:?}"));
    }
    Ok((name.to_string(), PathBuf::from(path)))
}

/// `gpusort sort TABLE --by …` in a build without tables: refused (exit 2), naming the build.
#[cfg(not(feature = "tables"))]
pub fn sort(_: &crate::Global, _: &TableSort) -> crate::error::CliResult {
    Err(crate::error::CliError::usage(
        "this gpusort was built without table support (Parquet, Arrow, CSV): \
         build it with the default features (cargo install gpusort)",
    ))
}

/// `gpusort sql …` in a build without DataFusion: refused (exit 2), naming the build.
#[cfg(not(feature = "sql"))]
pub fn sql(_: &crate::Global, _: &SqlArgs) -> crate::error::CliResult {
    Err(crate::error::CliError::usage(
        "this gpusort was built without `gpusort sql` (DataFusion, a build of half an hour): \
         build it with `--features sql` (cargo install gpusort --features sql)",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_keys_parse_from_the_right() {
        assert_eq!(
            parse_by("price:desc").unwrap(),
            ByKey {
                column: "price".into(),
                descending: Some(true),
                nulls_first: None
            }
        );
        let k = parse_by("a:b:asc:nulls-first").unwrap();
        assert_eq!((k.column.as_str(), k.descending), ("a:b", Some(false)));
        assert_eq!(k.nulls_first, Some(true));
        assert_eq!(
            parse_by("x:DESC:NULLS-LAST").unwrap().nulls_first,
            Some(false)
        );
        assert!(parse_by(":desc").is_err());
        assert_eq!(parse_by("time:zone").unwrap().column, "time:zone");
    }

    #[test]
    fn formats_by_extension() {
        assert_eq!(
            TableFormat::of(Path::new("a.PARQUET")),
            Some(TableFormat::Parquet)
        );
        assert_eq!(
            TableFormat::of(Path::new("a.feather")),
            Some(TableFormat::Arrow)
        );
        assert_eq!(TableFormat::of(Path::new("a.csv")), Some(TableFormat::Csv));
        assert_eq!(TableFormat::of(Path::new("a.bin")), None);
        assert_eq!(
            gpusort_files::default_name(Path::new("d/x.parquet"), "sorted"),
            Path::new("d/x.sorted.parquet")
        );
    }
}
