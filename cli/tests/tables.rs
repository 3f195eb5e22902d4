//! Tables through the CLI: `gpusort sort TABLE --by …` and `gpusort sql`, with Parquet, Arrow IPC
//! and CSV in and out, checked against an order computed here; and the bad inputs.

use std::path::Path;

use gpusort_tests::rng;
use rand::Rng;

mod common;
use common::*;

/// Rows of (id, k: nullable i64, x: f64, name), enough of them for the GPU path (over the
/// operator's 65536-row threshold).
struct Rows {
    k: Vec<Option<i64>>,
    x: Vec<f64>,
}

fn rows(n: usize) -> Rows {
    let mut r = rng(9);
    Rows {
        k: (0..n)
            .map(|_| (r.random_range(0..10) != 0).then(|| r.random_range(-30..30)))
            .collect(),
        x: (0..n)
            .map(|_| (r.random_range(-400..400) as f64) / 8.0)
            .collect(),
    }
}

fn write_csv(path: &Path, rows: &Rows) {
    let mut s = String::from("id,k,x,name\n");
    for (i, (k, x)) in rows.k.iter().zip(&rows.x).enumerate() {
        let k = k.map(|v| v.to_string()).unwrap_or_default();
        s.push_str(&format!("{i},{k},{x:?},n{}\n", i % 7));
    }
    std::fs::write(path, s).unwrap();
}

/// The ids in the order `ORDER BY k DESC (nulls first), x, id` gives.
fn expected_k_desc_x(rows: &Rows) -> Vec<u64> {
    let mut ids: Vec<usize> = (0..rows.k.len()).collect();
    ids.sort_by(|&a, &b| {
        let ka = rows.k[a].map_or(i64::MAX as i128 + 1, |v| v as i128);
        let kb = rows.k[b].map_or(i64::MAX as i128 + 1, |v| v as i128);
        kb.cmp(&ka)
            .then(rows.x[a].total_cmp(&rows.x[b]))
            .then(a.cmp(&b))
    });
    ids.into_iter().map(|i| i as u64).collect()
}

/// The `id` column of a table in file order, through `gpusort sql` to CSV (one partition, no
/// parallel reads of file ranges: a query without ORDER BY promises no order otherwise).
fn ids_of(table: &Path, dir: &Path) -> Vec<u64> {
    let out = dir.join(format!(
        "ids-{}.csv",
        table.file_name().unwrap().to_string_lossy()
    ));
    gpusort()
        .args(["-q", "sql", "SELECT id FROM t"])
        .arg("--table")
        .arg(format!("t={}", table.display()))
        .args([
            "--set",
            "datafusion.execution.target_partitions=1",
            "--set",
            "datafusion.optimizer.repartition_file_scans=false",
        ])
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("id"));
    lines.map(|l| l.parse().unwrap()).collect()
}

#[test]
fn sorts_parquet_arrow_and_csv_by_several_keys() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = rows(70_000);
    let csv = d.join("t.csv");
    write_csv(&csv, &data);
    // CSV to Parquet and Arrow through `gpusort sql`
    for ext in ["parquet", "arrow"] {
        gpusort()
            .args(["-q", "sql", "SELECT * FROM t"])
            .arg("--table")
            .arg(format!("t={}", csv.display()))
            .arg("-o")
            .arg(d.join(format!("t.{ext}")))
            .assert()
            .success();
    }
    let want = expected_k_desc_x(&data);
    for (input, output) in [
        ("t.parquet", "s1.parquet"),
        ("t.parquet", "s2.csv"),
        ("t.arrow", "s3.feather"),
        ("t.csv", "s4.parquet"),
    ] {
        for backend in ["gpu", "cpu"] {
            let out = d.join(format!("{backend}-{output}"));
            gpusort()
                .args(["-q", "--backend", backend, "sort"])
                .arg(d.join(input))
                .args(["--by", "k:desc", "--by", "x", "--by", "id", "-o"])
                .arg(&out)
                .assert()
                .success();
            assert_eq!(ids_of(&out, d), want, "{input} -> {output} on {backend}");
        }
    }
    // every column carried, names and order kept
    let all = d.join("all.csv");
    gpusort()
        .args(["-q", "sql", "SELECT * FROM s"])
        .arg("--table")
        .arg(format!("s={}", d.join("gpu-s1.parquet").display()))
        .arg("-o")
        .arg(&all)
        .assert()
        .success();
    let text = std::fs::read_to_string(&all).unwrap();
    assert!(text.starts_with("id,k,x,name\n"), "{}", &text[..40]);
    assert_eq!(text.lines().count(), 70_001);
}

#[test]
fn default_name_in_place_and_descending() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = rows(1000);
    let csv = d.join("small.csv");
    write_csv(&csv, &data);
    // default output: INPUT's name with .sorted before the extension
    gpusort()
        .args(["-q", "sort"])
        .arg(&csv)
        .args(["--by", "id", "--descending"])
        .assert()
        .success();
    let ids = ids_of(&d.join("small.sorted.csv"), d);
    assert_eq!(ids, (0..1000u64).rev().collect::<Vec<_>>());
    // in place
    gpusort()
        .args(["-q", "sort", "--in-place"])
        .arg(&csv)
        .args(["--by", "k:desc:nulls-first", "--by", "x:asc", "--by", "id"])
        .assert()
        .success();
    assert_eq!(ids_of(&csv, d), expected_k_desc_x(&data));
}

#[test]
fn sql_explains_and_prints() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = rows(70_000);
    let csv = d.join("t.csv");
    write_csv(&csv, &data);
    let out = gpusort()
        .args(["-q", "sql", "EXPLAIN SELECT * FROM t ORDER BY x DESC, id"])
        .arg("--table")
        .arg(format!("t={}", csv.display()))
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(text.contains("GpuSortExec"), "{text}");
    let out = gpusort()
        .args(["-q", "sql", "SELECT id FROM t ORDER BY x, id LIMIT 3"])
        .arg("--table")
        .arg(format!("t={}", csv.display()))
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    let mut ids: Vec<usize> = (0..data.x.len()).collect();
    ids.sort_by(|&a, &b| data.x[a].total_cmp(&data.x[b]).then(a.cmp(&b)));
    for id in &ids[..3] {
        assert!(text.contains(&format!("| {id} ")), "{id} in\n{text}");
    }
}

#[test]
fn bad_tables_and_flags_are_one_line_exit_2_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let csv = d.join("t.csv");
    write_csv(&csv, &rows(100));
    std::fs::write(d.join("old.feather"), b"FEA1\0\0\0\0 a feather v1 file").unwrap();
    let existing = d.join("keep.parquet");
    std::fs::write(&existing, b"the user's file").unwrap();
    // (paths as arguments)
    let (table, keep) = (csv.display().to_string(), existing.display().to_string());
    let cases: Vec<Vec<String>> = vec![
        // a column that is not there
        strs(&["sort", &table, "--by", "nope", "-o", &keep]),
        // no keys
        strs(&["sort", &table, "-o", &keep]),
        // array flags on a table
        strs(&["sort", &table, "--by", "id", "--dtype", "u32", "-o", &keep]),
        // a table key on an array
        strs(&["sort", &d.join("x.bin").display().to_string(), "--by", "id"]),
        // the input as its own output
        strs(&["sort", &table, "--by", "id", "-o", &table]),
        // an output format that is not a table
        strs(&[
            "sort",
            &table,
            "--by",
            "id",
            "-o",
            &d.join("o.bin").display().to_string(),
        ]),
        // a table file that is not one
        strs(&[
            "sort",
            &keep,
            "--by",
            "id",
            "-o",
            &d.join("o.parquet").display().to_string(),
        ]),
        // a Feather v1 file
        strs(&[
            "sort",
            &d.join("old.feather").display().to_string(),
            "--by",
            "id",
            "-o",
            &d.join("o.arrow").display().to_string(),
        ]),
        // bad SQL, a missing table, a bad --table
        strs(&["sql", "SELEC 1"]),
        strs(&["sql", "SELECT * FROM missing", "-o", &keep]),
        strs(&["sql", "SELECT 1", "--table", "noequals"]),
        strs(&[
            "sql",
            "SELECT 1",
            "--table",
            &format!("t={}", d.join("absent.parquet").display()),
        ]),
    ];
    let before = listing(d);
    for args in cases {
        let out = gpusort().arg("-q").args(&args).assert().code(2);
        let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert_eq!(listing(d), before, "{args:?} wrote something");
        assert_eq!(std::fs::read(&existing).unwrap(), b"the user's file");
    }
}

#[test]
fn the_datafusion_bench_suite_checks_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("df.json");
    let out = gpusort()
        .args([
            "bench",
            "--suite",
            "datafusion",
            "--sizes",
            "13",
            "--reps",
            "1",
            "--json",
        ])
        .arg(&json)
        .arg("--data-dir")
        .arg(dir.path())
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(text.contains("GpuSortExec"), "{text}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let cases = v["cases"].as_array().unwrap();
    // DataFusion and GpuSortExec, from memory and from Parquet; the GPU rows checked
    assert_eq!(cases.len(), 4, "{cases:?}");
    assert!(cases
        .iter()
        .filter(|c| c["case"].as_str().unwrap().contains("GpuSortExec"))
        .all(|c| c["note"].as_str().unwrap().contains("same rows")));
    assert!(dir.path().join("orderby-2^13").is_dir());
}

/// Owned arguments from borrowed ones.

#[test]
fn csv_sorts_keep_every_cell_as_written_and_the_header() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // leading zeros, number spellings, quoting, CRLF line ends and a last line without one
    let z = d.join("z.csv");
    std::fs::write(&z, "id,zip,code\n2,00123,007\n1,02134,1e5\n").unwrap();
    gpusort()
        .args(["-q", "sort", "--in-place"])
        .arg(&z)
        .args(["--by", "id"])
        .assert()
        .success();
    assert_eq!(
        std::fs::read_to_string(&z).unwrap(),
        "id,zip,code\n1,02134,1e5\n2,00123,007\n"
    );
    // numbers compare as numbers (007 < 1e5), not as text
    gpusort()
        .args(["-q", "sort", "--in-place"])
        .arg(&z)
        .args(["--by", "code:desc"])
        .assert()
        .success();
    assert_eq!(
        std::fs::read_to_string(&z).unwrap(),
        "id,zip,code\n1,02134,1e5\n2,00123,007\n"
    );
    let q = d.join("q.csv");
    std::fs::write(
        &q,
        "name,n\r\n\"b, c\",3\r\n\"x \"\"y\"\"\",1\r\nplain,\r\n\"multi\nline\",2",
    )
    .unwrap();
    let out = d.join("q.sorted.csv");
    gpusort()
        .args(["-q", "sort"])
        .arg(&q)
        .args(["--by", "n"])
        .assert()
        .success();
    // nulls last ascending; the moved last record gets the file's line end
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "name,n\r\n\"x \"\"y\"\"\",1\r\n\"multi\nline\",2\r\n\"b, c\",3\r\nplain,\r\n"
    );
    // equal keys keep their order (a stable sort)
    let s = d.join("s.csv");
    let mut text = String::from("k,i\n");
    for i in 0..2000 {
        text.push_str(&format!("{},{i}\n", i % 3));
    }
    std::fs::write(&s, &text).unwrap();
    gpusort()
        .args(["-q", "sort", "--in-place"])
        .arg(&s)
        .args(["--by", "k"])
        .assert()
        .success();
    let got = std::fs::read_to_string(&s).unwrap();
    let mut lines: Vec<&str> = text.lines().skip(1).collect();
    lines.sort_by_key(|l| l.split(',').next().unwrap().parse::<u32>().unwrap());
    assert_eq!(got, format!("k,i\n{}\n", lines.join("\n")));
}

/// A folder of CSV files sorted into one CSV file: every record keeps its bytes, the header comes
/// once, keys compare by the type the files' columns share (integers beside floats: numbers), and
/// equal keys keep the order of file names, then of records; files whose headers differ are one
/// line and exit 2.
#[test]
fn a_folder_of_csv_files_sorts_into_one_keeping_every_cell() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("parts");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("a.csv"), "k,zip\n10,007\n2,00123\n2,first\n").unwrap();
    std::fs::write(d.join("b.csv"), "k,zip\n2.5,\"0, 1\"\n2,second\n-1,1e5").unwrap();
    std::fs::write(d.join("c.csv"), "k,zip\n").unwrap();
    let out = dir.path().join("out.csv");
    gpusort()
        .args(["-q", "sort"])
        .arg(&d)
        .args(["--by", "k", "-o"])
        .arg(&out)
        .assert()
        .success();
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "k,zip\n-1,1e5\n2,00123\n2,first\n2,second\n2.5,\"0, 1\"\n10,007\n"
    );
    std::fs::write(d.join("d.csv"), "k,other\n1,x\n").unwrap();
    let run = gpusort()
        .args(["-q", "sort"])
        .arg(&d)
        .args(["--by", "k", "-o"])
        .arg(dir.path().join("never.csv"))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("one table") && err.lines().count() == 1,
        "{err}"
    );
    assert!(!dir.path().join("never.csv").exists());
}

#[test]
fn a_csv_of_a_header_alone_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path().join("h.csv");
    std::fs::write(&h, "a,b\n").unwrap();
    for _ in 0..2 {
        gpusort()
            .args(["-q", "sort", "--in-place"])
            .arg(&h)
            .args(["--by", "a"])
            .assert()
            .success();
        assert_eq!(std::fs::read_to_string(&h).unwrap(), "a,b\n");
    }
}

#[test]
fn parquet_sorts_keep_types_metadata_and_read_back_beside_their_input() {
    use datafusion::arrow::array::{
        ArrayRef, BinaryArray, Int64Array, LargeStringArray, StringArray,
    };
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::record_batch::RecordBatch;
    use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use datafusion::parquet::file::metadata::KeyValue;
    use datafusion::parquet::file::properties::WriterProperties;
    use std::collections::HashMap;
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d");
    std::fs::create_dir(&d).unwrap();
    let n = 70_000i64;
    let meta = |k: &str, v: &str| HashMap::from([(k.to_string(), v.to_string())]);
    let schema = Arc::new(Schema::new_with_metadata(
        vec![
            Field::new("x", DataType::Int64, false).with_metadata(meta("unit", "m")),
            Field::new("s", DataType::Utf8, true),
            Field::new("ls", DataType::LargeUtf8, false),
            Field::new("b", DataType::Binary, true),
        ],
        meta("owner", "the user"),
    ));
    let x: Vec<i64> = (0..n).map(|i| (i * 7919) % n).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(x.clone())),
        Arc::new(StringArray::from_iter(
            x.iter().map(|v| (v % 5 != 0).then(|| format!("s{v}"))),
        )),
        Arc::new(LargeStringArray::from_iter_values(
            x.iter().map(|v| format!("l{v}")),
        )),
        Arc::new(BinaryArray::from_iter(
            x.iter()
                .map(|v| (v % 3 != 0).then(|| v.to_le_bytes().to_vec())),
        )),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns).unwrap();
    let input = d.join("in.parquet");
    let props = WriterProperties::builder()
        .set_key_value_metadata(Some(vec![KeyValue::new(
            "made-by".to_string(),
            "test".to_string(),
        )]))
        .build();
    write_parquet(&input, &batch, props);

    let out = d.join("out.parquet");
    gpusort()
        .args(["-q", "sort"])
        .arg(&d)
        .args(["--by", "x"])
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let r = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&out).unwrap()).unwrap();
    // as the input reads back: its schema, with the file's key-value metadata merged in
    let read_in =
        ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&input).unwrap()).unwrap();
    assert_eq!(
        r.schema().fields(),
        schema.fields(),
        "types, nullability, field metadata"
    );
    assert_eq!(
        r.schema().as_ref(),
        read_in.schema().as_ref(),
        "the schema's metadata"
    );
    assert_eq!(
        r.schema().metadata().get("owner").map(String::as_str),
        Some("the user")
    );
    let kv = r.metadata().file_metadata().key_value_metadata().unwrap();
    assert!(kv
        .iter()
        .any(|k| k.key == "made-by" && k.value.as_deref() == Some("test")));
    let rows: usize = r.build().unwrap().map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(rows, n as usize);
    // the folder, input and output together, reads as one table
    let text = gpusort()
        .args(["-q", "sql", "SELECT count(*) AS c FROM t", "--table"])
        .arg(format!("t={}", d.display()))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert!(String::from_utf8_lossy(&text).contains(&(2 * n).to_string()));
}

/// `batch` as a Parquet file at `path`, written with `props`.
fn write_parquet(
    path: &Path,
    batch: &datafusion::arrow::record_batch::RecordBatch,
    props: datafusion::parquet::file::properties::WriterProperties,
) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = datafusion::parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(props))
        .unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
}

/// Parquet files of every codec files in the wild use (snappy, gzip, lz4, zstd, brotli, none)
/// read and sort: the table build keeps the parquet crate's codecs.
#[test]
fn parquet_files_of_every_common_codec_sort() {
    use datafusion::arrow::array::{ArrayRef, Int64Array};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::record_batch::RecordBatch;
    use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use datafusion::parquet::basic::{BrotliLevel, Compression, GzipLevel, ZstdLevel};
    use datafusion::parquet::file::properties::WriterProperties;
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
    let x: Vec<i64> = (0..5000).map(|i| (i * 7919) % 5000).collect();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(Int64Array::from(x)) as ArrayRef],
    )
    .unwrap();
    for (name, codec) in [
        ("snappy", Compression::SNAPPY),
        ("gzip", Compression::GZIP(GzipLevel::default())),
        ("lz4", Compression::LZ4_RAW),
        ("zstd", Compression::ZSTD(ZstdLevel::default())),
        ("brotli", Compression::BROTLI(BrotliLevel::default())),
        ("none", Compression::UNCOMPRESSED),
    ] {
        let input = dir.path().join(format!("{name}.parquet"));
        let props = WriterProperties::builder().set_compression(codec).build();
        write_parquet(&input, &batch, props);
        let out = dir.path().join(format!("{name}.sorted.parquet"));
        gpusort()
            .args(["-q", "sort"])
            .arg(&input)
            .args(["--by", "x", "-o"])
            .arg(&out)
            .assert()
            .success();
        let r = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&out).unwrap())
            .unwrap()
            .build()
            .unwrap();
        let got: Vec<i64> = r
            .flat_map(|b| {
                let b = b.unwrap();
                let c = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                c.values().to_vec()
            })
            .collect();
        assert_eq!(got, (0..5000).collect::<Vec<i64>>(), "{name}");
    }
}

#[test]
fn sql_writes_only_through_its_output_rules() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let csv = d.join("t.csv");
    write_csv(&csv, &rows(100));
    let parquet = d.join("v.parquet");
    gpusort()
        .args(["-q", "sort"])
        .arg(&csv)
        .args(["--by", "id", "-o"])
        .arg(&parquet)
        .assert()
        .success();
    let before = std::fs::read(&parquet).unwrap();
    let listed = listing(d);
    let table = format!("t={}", parquet.display());
    let copy = format!(
        "COPY (SELECT * FROM t ORDER BY x) TO '{}'",
        parquet.display()
    );
    let other = format!(
        "COPY (SELECT * FROM t) TO '{}'",
        d.join("new.parquet").display()
    );
    assert_refused(&[
        (
            strs(&["sql", &copy, "--table", &table]),
            "COPY and INSERT are refused",
        ),
        (
            strs(&["sql", &other, "--table", &table]),
            "COPY and INSERT are refused",
        ),
    ]);
    assert_eq!(std::fs::read(&parquet).unwrap(), before);
    assert_eq!(listing(d), listed);
    // -o - writes CSV to standard output
    let out = gpusort()
        .args([
            "-q",
            "sql",
            "SELECT id FROM t ORDER BY id LIMIT 3",
            "--table",
            &table,
            "-o",
            "-",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(String::from_utf8_lossy(&out), "id\n0\n1\n2\n");
}

/// A random sweep of CSV sorts: integer, float (NaN, ±inf, spellings), string and boolean
/// columns with nulls and quoting, random keys and directions. gpusort's output holds the input's
/// records byte for byte, in the order DataFusion's own sort gives (`gpusort.enabled=false`,
/// with the row id last: ties keep their input order).
#[test]
fn random_csv_sorts_match_datafusions_order_and_keep_the_text() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let columns = ["i", "f", "s", "b"];
    for round in 0..6u64 {
        let mut r = rng(100 + round);
        let n = r.random_range(1..400);
        let mut text = String::from("id,i,f,s,b\n");
        let mut records = Vec::new();
        for id in 0..n {
            let i = match r.random_range(0..8) {
                0 => String::new(),
                1 => format!("00{}", r.random_range(0..20)),
                _ => r.random_range(-50..50).to_string(),
            };
            let f = match r.random_range(0..12) {
                0 => String::new(),
                1 => "NaN".into(),
                2 => "inf".into(),
                3 => "-inf".into(),
                4 => format!("{}e1", r.random_range(-9..9)),
                5 => "-0.0".into(),
                _ => format!("{:.2}", r.random_range(-100.0..100.0)),
            };
            let s = match r.random_range(0..6) {
                0 => String::new(),
                1 => format!("\"q, {}\"", r.random_range(0..5)),
                2 => format!("\"say \"\"{}\"\"\"", r.random_range(0..5)),
                _ => format!("w{}", r.random_range(0..30)),
            };
            let b = ["true", "false", ""][r.random_range(0..3)];
            let rec = format!("{id},{i},{f},{s},{b}");
            text.push_str(&rec);
            text.push('\n');
            records.push(rec);
        }
        let input = d.join(format!("r{round}.csv"));
        std::fs::write(&input, &text).unwrap();
        let keys: Vec<(String, bool)> = (0..r.random_range(1..3))
            .map(|_| {
                (
                    columns[r.random_range(0..4)].to_string(),
                    r.random_bool(0.5),
                )
            })
            .collect();
        let by: Vec<String> = keys
            .iter()
            .map(|(c, desc)| format!("{c}:{}", if *desc { "desc" } else { "asc" }))
            .collect();
        let out = d.join(format!("r{round}.out.csv"));
        let mut cmd = gpusort();
        cmd.args(["-q", "sort"]).arg(&input).arg("-o").arg(&out);
        for b in &by {
            cmd.args(["--by", b]);
        }
        cmd.assert().success();
        let got = std::fs::read_to_string(&out).unwrap();
        let mut lines = got.lines();
        assert_eq!(lines.next(), Some("id,i,f,s,b"), "round {round}");
        // csv records here hold no newline: one a line
        let got_records: Vec<&str> = lines.collect();
        let mut a: Vec<&str> = got_records.clone();
        let mut b: Vec<&str> = records.iter().map(|s| s.as_str()).collect();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b, "round {round}: the records, byte for byte");
        let got_ids: Vec<u64> = got_records
            .iter()
            .map(|l| l.split(',').next().unwrap().parse().unwrap())
            .collect();
        // DataFusion's own sort of the same file, nulls as gpusort's default (largest)
        let order: Vec<String> = keys
            .iter()
            .map(|(c, desc)| match desc {
                true => format!("{c} DESC NULLS FIRST"),
                false => format!("{c} ASC NULLS LAST"),
            })
            .chain(["id".to_string()])
            .collect();
        let ref_out = d.join(format!("r{round}.ref.csv"));
        gpusort()
            .args(["-q", "sql"])
            .arg(format!("SELECT id FROM t ORDER BY {}", order.join(", ")))
            .arg("--table")
            .arg(format!("t={}", input.display()))
            .args(["--set", "gpusort.enabled=false", "-o"])
            .arg(&ref_out)
            .assert()
            .success();
        let want: Vec<u64> = std::fs::read_to_string(&ref_out)
            .unwrap()
            .lines()
            .skip(1)
            .map(|l| l.parse().unwrap())
            .collect();
        assert_eq!(got_ids, want, "round {round}: by {by:?}");
    }
}

/// A folder of CSV files (in subfolders, with hidden and bookkeeping files beside them) sorted
/// under a memory budget small enough that every file is a run of its own: more runs than one
/// merge takes, merged in two levels. The order is the in-memory sort's (ties in input order:
/// the files in path order), for a numeric and a text key, on both backends; the spill folder
/// is left empty.
#[test]
fn a_folder_beyond_the_memory_budget_sorts_in_spilled_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = rows(70 * 600);
    let parts = d.join("parts");
    for f in 0..70usize {
        let sub = parts.join(if f < 35 { "a" } else { "b" });
        std::fs::create_dir_all(&sub).unwrap();
        let mut s = String::from("id,k,x,name\n");
        for i in f * 600..(f + 1) * 600 {
            let k = data.k[i].map(|v| v.to_string()).unwrap_or_default();
            s.push_str(&format!("{i},{k},{:?},n{}\n", data.x[i], i % 7));
        }
        std::fs::write(sub.join(format!("{f:02}.csv")), s).unwrap();
    }
    std::fs::write(parts.join("_SUCCESS"), "").unwrap();
    std::fs::write(parts.join(".hidden.csv"), "id,k,x,name\n999999,1,1.0,x\n").unwrap();
    let spill = d.join("spill");
    std::fs::create_dir(&spill).unwrap();
    let by_name: Vec<u64> = {
        let mut ids: Vec<u64> = (0..data.k.len() as u64).collect();
        ids.sort_by_key(|&i| (i % 7, i));
        ids
    };
    for backend in ["gpu", "cpu"] {
        for (keys, want) in [
            (vec!["k:desc", "x"], expected_k_desc_x(&data)),
            (vec!["name"], by_name.clone()),
        ] {
            let out = d.join(format!("{backend}-{}.parquet", keys.len()));
            let mut cmd = gpusort();
            cmd.args(["-q", "--backend", backend, "sort"]).arg(&parts);
            for k in &keys {
                cmd.args(["--by", k]);
            }
            cmd.args(["--memory-budget", "64K", "--tmp-dir"])
                .arg(&spill)
                .arg("-o")
                .arg(&out)
                .assert()
                .success();
            assert_eq!(ids_of(&out, d), want, "{backend} by {keys:?}");
            assert!(listing(&spill).is_empty(), "spilled runs are removed");
        }
    }
    // without --tmp-dir the runs go beside the output, and leave nothing there either
    let outs = d.join("outs");
    std::fs::create_dir(&outs).unwrap();
    gpusort()
        .args(["-q", "sort"])
        .arg(&parts)
        .args([
            "--by",
            "k:desc",
            "--by",
            "x",
            "--memory-budget",
            "64K",
            "-o",
        ])
        .arg(outs.join("t.parquet"))
        .assert()
        .success();
    assert_eq!(listing(&outs), vec![outs.join("t.parquet")]);
    assert_eq!(ids_of(&outs.join("t.parquet"), d), expected_k_desc_x(&data));
}

/// A folder of Parquet files written over time: a column only some files have reads as nulls in
/// the others; two files that give one column different types are refused with one line.
#[test]
fn a_folder_of_parquet_files_with_different_columns_is_one_table() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = rows(100);
    let csv = d.join("t.csv");
    write_csv(&csv, &data);
    let ds = d.join("ds");
    std::fs::create_dir(&ds).unwrap();
    let sql = |query: &str, out: &Path| {
        gpusort()
            .args(["-q", "sql", query])
            .arg("--table")
            .arg(format!("t={}", csv.display()))
            .arg("-o")
            .arg(out)
            .assert()
            .success();
    };
    sql("SELECT id, k FROM t WHERE id < 50", &ds.join("p1.parquet"));
    sql(
        "SELECT id, name AS extra, k FROM t WHERE id >= 50",
        &ds.join("p2.parquet"),
    );
    let out = d.join("out.csv");
    gpusort()
        .args(["-q", "sort"])
        .arg(&ds)
        .args(["--by", "id:desc", "-o"])
        .arg(&out)
        .assert()
        .success();
    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("id,k,extra"));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 100);
    assert!(rows[0].starts_with("99,") && rows[0].ends_with(&format!(",n{}", 99 % 7)));
    assert!(
        rows[99].starts_with("0,") && rows[99].ends_with(','),
        "{}",
        rows[99]
    );
    // id as text in a third file: refused, nothing written
    sql(
        "SELECT CAST(id AS VARCHAR) AS id, k FROM t",
        &ds.join("p3.parquet"),
    );
    let bad = d.join("bad.csv");
    let o = gpusort()
        .args(["sort"])
        .arg(&ds)
        .args(["--by", "k", "-o"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("column \"id\"") && err.contains("p3.parquet"),
        "{err}"
    );
    assert!(!bad.exists());
}
