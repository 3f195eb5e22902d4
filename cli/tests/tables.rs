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
fn strs(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}
