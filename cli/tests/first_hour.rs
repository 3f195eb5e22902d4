//! What a new user meets in the first hour, through the CLI: the CPU engine against the GPU
//! kernels for every command and key type, quiet output and its rules, help that helps, exit
//! codes and formats, and a plain `gpusort bench` that finishes on a software adapter.

use std::path::Path;

use gpusort_tests::rng;
use rand::Rng;

mod common;
use common::*;

/// `gpusort ARGS` in `dir` on the given backend; (stdout, stderr), asserting success.
fn run_ok(dir: &Path, backend: &str, args: &[&str]) -> (Vec<u8>, String) {
    let out = gpusort()
        .current_dir(dir)
        .args(["--backend", backend])
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{backend} {args:?}: {err}");
    (out.stdout, err)
}

fn raw_of<T: bytemuck::Pod>(v: &[T]) -> Vec<u8> {
    bytemuck::cast_slice(v).to_vec()
}

/// Keys of every type with the awkward values in them (NaN, ±0, ±inf, extremes, duplicates).
fn files_of_every_type(d: &Path, n: usize) -> Vec<(&'static str, String)> {
    let mut r = rng(n as u64);
    let u: Vec<u32> = (0..n)
        .map(|i| if i % 5 == 0 { 7 } else { r.random() })
        .collect();
    let i: Vec<i32> = (0..n).map(|_| r.random_range(-1000..1000)).collect();
    let mut f: Vec<f32> = (0..n).map(|_| r.random_range(-1.0..1.0)).collect();
    let mut d64: Vec<f64> = (0..n).map(|_| r.random_range(-1e6..1e6)).collect();
    for (k, x) in [
        f32::NAN,
        -0.0,
        0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -f32::NAN,
    ]
    .into_iter()
    .enumerate()
    {
        f[k * 13 % n] = x;
        d64[k * 17 % n] = x as f64;
    }
    let u64s: Vec<u64> = (0..n).map(|_| r.random()).collect();
    let i64s: Vec<i64> = (0..n).map(|_| r.random_range(-5..5)).collect();
    let files = [
        ("u32", raw_of(&u)),
        ("i32", raw_of(&i)),
        ("f32", raw_of(&f)),
        ("u64", raw_of(&u64s)),
        ("i64", raw_of(&i64s)),
        ("f64", raw_of(&d64)),
    ];
    files
        .into_iter()
        .map(|(t, bytes)| {
            let name = format!("{t}.bin");
            std::fs::write(d.join(&name), bytes).unwrap();
            (t, name)
        })
        .collect()
}

/// Every command and key type on the CPU engine gives the bytes the GPU kernels give (f32
/// scans: within the --verify tolerance, since both add in their own order), and --verify
/// passes on both.
#[test]
fn the_cpu_engine_matches_the_gpu_for_every_command_and_type() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let n = 40_000;
    let files = files_of_every_type(d, n);
    write_u32(&d.join("v.bin"), &(0..n as u32).collect::<Vec<_>>());
    for (t, name) in &files {
        let name = name.as_str();
        let mut jobs: Vec<Vec<&str>> = vec![
            vec!["sort", name, "--dtype", t, "--verify"],
            vec!["sort", name, "--dtype", t, "--descending"],
            vec![
                "sort",
                name,
                "--dtype",
                t,
                "--argsort",
                "perm.bin",
                "--values",
                "v.bin",
                "--values-out",
                "vo.bin",
            ],
            vec![
                "sort",
                name,
                "--dtype",
                t,
                "--segment-size",
                "1000",
                "--verify",
            ],
            vec![
                "sort",
                name,
                "--dtype",
                t,
                "--algorithm",
                "radix",
                "--key-bits",
                "4..20",
                "--verify",
            ],
            vec![
                "sort",
                name,
                "--dtype",
                t,
                "--memory-budget",
                "256K",
                "--argsort",
                "perm.bin",
            ],
            vec![
                "partition",
                name,
                "--dtype",
                t,
                "--pivot",
                "0",
                "--values",
                "v.bin",
                "--values-out",
                "vo.bin",
                "--verify",
            ],
            vec!["compact", name, "--dtype", t, "--nonzero", "--verify"],
            vec!["compact", name, "--dtype", t, "--at-least", "3"],
        ];
        jobs.push(vec!["scan", name, "--dtype", t, "--verify"]);
        jobs.push(vec!["scan", name, "--dtype", t, "--exclusive"]);
        if !t.starts_with('f') {
            jobs.push(vec!["scan", name, "--dtype", t, "--op", "max"]);
            jobs.push(vec![
                "scan",
                name,
                "--dtype",
                t,
                "--op",
                "xor",
                "--exclusive",
            ]);
        }
        for job in jobs {
            let mut outputs = vec![];
            for backend in ["cpu", "gpu"] {
                let mut args = job.clone();
                args.extend(["-o", "out.bin"]);
                let (stdout, _) = run_ok(d, backend, &args);
                let mut got = vec![std::fs::read(d.join("out.bin")).unwrap(), stdout];
                for extra in ["perm.bin", "vo.bin"] {
                    if job.contains(&extra) {
                        got.push(std::fs::read(d.join(extra)).unwrap());
                    }
                }
                outputs.push(got);
            }
            let float_sum = t.starts_with('f') && job[0] == "scan";
            if float_sum {
                let widen = |b: &[u8]| -> Vec<f32> {
                    if *t == "f32" {
                        bytemuck::pod_collect_to_vec(b)
                    } else {
                        bytemuck::pod_collect_to_vec::<u8, f64>(b)
                            .iter()
                            .map(|&x| x as f32)
                            .collect()
                    }
                };
                let (a, b) = (widen(&outputs[0][0]), widen(&outputs[1][0]));
                let close = |x: &f32, y: &f32| {
                    x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-3 * y.abs().max(1.0)
                };
                assert!(a.iter().zip(&b).all(|(x, y)| close(x, y)), "{job:?}");
            } else {
                assert!(
                    outputs[0] == outputs[1],
                    "{job:?}: the CPU engine differs from the GPU"
                );
            }
        }
    }
    // many files, and stencils (bit-identical to the twin on the CPU, --verify on both)
    std::fs::create_dir(d.join("many")).unwrap();
    for backend in ["cpu", "gpu"] {
        run_ok(
            d,
            backend,
            &[
                "sort",
                "--dtype",
                "u32",
                "u32.bin",
                "v.bin",
                "--out-dir",
                &format!("many/{backend}"),
            ],
        );
        run_ok(
            d,
            backend,
            &[
                "compact",
                "--dtype",
                "u32",
                "u32.bin",
                "v.bin",
                "--below",
                "100",
                "--out-dir",
                &format!("many/c{backend}"),
            ],
        );
    }
    for f in ["u32.bin", "v.bin"] {
        for (a, b) in [("cpu", "gpu"), ("ccpu", "cgpu")] {
            assert!(
                std::fs::read(d.join("many").join(a).join(f)).unwrap()
                    == std::fs::read(d.join("many").join(b).join(f)).unwrap(),
                "{a} {f}"
            );
        }
    }
    write_f32(&d.join("g.bin"), &random_f32(48 * 40, 3));
    for extra in [
        &["--radius", "2"][..],
        &["--stencil", "box", "--boundary", "wrap"],
        &["--dtype", "f32", "--boundary", "constant", "--cval", "0.5"],
    ] {
        for backend in ["cpu", "gpu"] {
            let mut args = vec![
                "stencil", "g.bin", "--shape", "48x40", "--steps", "3", "--verify", "-o",
            ];
            args.push(if backend == "cpu" { "sc.bin" } else { "sg.bin" });
            args.extend(extra);
            run_ok(d, backend, &args);
        }
        let (a, b): (Vec<f32>, Vec<f32>) = (
            bytemuck::pod_collect_to_vec(&std::fs::read(d.join("sc.bin")).unwrap()),
            bytemuck::pod_collect_to_vec(&std::fs::read(d.join("sg.bin")).unwrap()),
        );
        assert!(
            a.iter()
                .zip(&b)
                .all(|(x, y)| (x - y).abs() <= 1e-5 * y.abs().max(1.0)),
            "{extra:?}"
        );
    }
}

/// Without a flag, where the only adapter is a software one, jobs run on the CPU engine and
/// the outcome line says so; `--backend gpu` runs the kernels on the software adapter.
#[test]
fn a_software_adapter_means_the_cpu_engine() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_u32(&d.join("k.bin"), &random_u32(5000, 4));
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("gpusort"))
        .current_dir(d)
        .env_remove("GPUSORT_BACKEND")
        .args(["sort", "k.bin", "--dtype", "u32"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("with the CPU engine (") && err.contains("no hardware GPU"),
        "{err}"
    );
    let (_, err) = run_ok(
        d,
        "gpu",
        &["sort", "k.bin", "--dtype", "u32", "-o", "g.bin"],
    );
    assert!(err.contains("with the bitonic sort"), "{err}");
}

/// Quiet by default: one outcome line per job on stderr, in user words; nothing with -q; the
/// time split with -v or --timings, one line of the same shape; no Debug names; no colour
/// codes in pipes; --progress always draws into a pipe.
#[test]
fn output_is_quiet_and_plain() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_u32(&d.join("k.bin"), &random_u32(3000, 5));
    write_f32(&d.join("g.bin"), &random_f32(400, 6));
    let debug_names = [
        "Some(",
        "None",
        "GpuTimestamps",
        "(Bitonic)",
        "(Radix)",
        "safe mode",
        "Safe",
        "Merged",
        "\u{1b}[",
    ];
    for backend in ["cpu", "gpu"] {
        for args in [
            &["sort", "k.bin", "--dtype", "u32", "-o", "o.bin"][..],
            &[
                "sort",
                "k.bin",
                "--dtype",
                "u32",
                "-o",
                "o.bin",
                "--argsort",
                "p.bin",
            ],
            &["scan", "k.bin", "--dtype", "u32", "-o", "o.bin"],
            &[
                "compact",
                "k.bin",
                "--dtype",
                "u32",
                "--nonzero",
                "-o",
                "o.bin",
            ],
            &["stencil", "g.bin", "--shape", "20x20", "-o", "o.bin"],
            &[
                "sort",
                "k.bin",
                "g.bin",
                "--dtype",
                "u32",
                "--out-dir",
                "out",
            ],
        ] {
            let (_, err) = run_ok(d, backend, args);
            assert_eq!(err.lines().count(), 1, "{backend} {args:?}: {err}");
            assert!(
                !debug_names.iter().any(|n| err.contains(n)),
                "{backend} {args:?}: {err}"
            );
            let mut quiet = vec!["-q"];
            quiet.extend(args);
            assert!(run_ok(d, backend, &quiet).1.is_empty(), "{args:?} -q");
            for flag in ["-v", "--timings"] {
                let mut loud = vec![flag];
                loud.extend(args);
                let (_, err) = run_ok(d, backend, &loud);
                let timing: Vec<&str> = err.lines().filter(|l| l.starts_with("time: ")).collect();
                if args[0] == "sort" && args.len() == 6 {
                    // the command's split, then the final step's wait for the flush
                    assert_eq!(timing.len(), 2, "{flag} {args:?}: {err}");
                    assert!(timing[1].starts_with("time: final flush "), "{err}");
                }
                assert!(!err.contains('\u{1b}'), "no colour into a pipe: {err}");
            }
        }
    }
    let (_, err) = run_ok(
        d,
        "gpu",
        &["stencil", "g.bin", "--shape", "20x20", "-o", "o.bin"],
    );
    assert!(
        err.starts_with("1 step of") && err.contains("-> o.bin"),
        "{err}"
    );
    let (_, err) = run_ok(
        d,
        "gpu",
        &[
            "--progress",
            "always",
            "sort",
            "k.bin",
            "--dtype",
            "u32",
            "-o",
            "o.bin",
        ],
    );
    assert!(
        err.contains('\r') || err.lines().count() > 1,
        "a bar was drawn: {err:?}"
    );
}

/// Help: global options under their own heading in every subcommand, every option described,
/// the usage on a bare `gpusort` (exit 2), errors pointing to the subcommand's help, and the
/// completions and man page generated from the same definitions.
#[test]
fn help_that_helps() {
    for sub in [
        "sort",
        "scan",
        "partition",
        "compact",
        "stencil",
        "sql",
        "info",
        "bench",
    ] {
        let out = gpusort().args([sub, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success());
        let (own, global) = help
            .split_once("Global options:")
            .unwrap_or_else(|| panic!("{sub}: {help}"));
        assert!(
            global.contains("--backend") && !own.contains("--backend"),
            "{sub}: {help}"
        );
    }
    // every option of every subcommand is described
    use clap::CommandFactory;
    let cli = gpusort::Cli::command();
    for sub in cli.get_subcommands() {
        for arg in sub.get_arguments().chain(cli.get_arguments()) {
            assert!(
                arg.get_help().is_some() || arg.get_long_help().is_some(),
                "gpusort {}: --{} has no description",
                sub.get_name(),
                arg.get_id()
            );
        }
    }
    let out = gpusort().output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let usage = String::from_utf8_lossy(&out.stderr);
    assert!(usage.contains("Usage: gpusort"), "{usage:?}");
    let out = gpusort().args(["scan", "--bogus"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err.contains("(see gpusort scan --help)") && err.lines().count() == 1,
        "{err}"
    );
    for shell in ["bash", "zsh", "fish"] {
        let out = gpusort().args(["completions", shell]).output().unwrap();
        assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("gpusort"));
    }
    let out = gpusort().arg("man").output().unwrap();
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains(".TH gpusort"));
}

/// Exit codes and formats: a bad adapter name or index is exit 2 with the list; a missing
/// --out-dir is created; a .npz is refused with a hint; (n, 1) arrays are 1-D.
#[test]
fn exit_codes_and_formats() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let keys = random_u32(500, 7);
    write_u32(&d.join("k.bin"), &keys);
    for adapter in ["no-such-gpu", "99"] {
        let out = gpusort()
            .current_dir(d)
            .args(["--adapter", adapter, "sort", "k.bin", "--dtype", "u32"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{adapter}: {err}");
        assert!(
            err.contains("there are [0]") && err.lines().count() == 1,
            "{err}"
        );
    }
    // --out-dir created (with parents); removed again when the job fails
    run_ok(
        d,
        "gpu",
        &["sort", "--dtype", "u32", "k.bin", "--out-dir", "new/deeper"],
    );
    let mut want = keys.clone();
    want.sort_unstable();
    assert_eq!(read_u32(&d.join("new/deeper/k.bin")), want);
    write_u32(&d.join("big.bin"), &random_u32(70_000, 8));
    let out = std::process::Command::new("bash")
        .current_dir(d)
        .env("GPUSORT_BACKEND", "gpu")
        .arg("-c")
        .arg(format!(
            "ulimit -f 64 && exec '{}' -q sort --dtype u32 k.bin big.bin --out-dir gone/deeper",
            assert_cmd::cargo::cargo_bin("gpusort").display()
        ))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !d.join("gone").exists(),
        "the folders it created are gone with the job"
    );
    // a zip archive (.npz) is refused with a hint
    std::fs::write(d.join("a.npz"), b"PK\x03\x04rest of a zip").unwrap();
    let out = gpusort()
        .current_dir(d)
        .args(["sort", "a.npz", "--dtype", "u32"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err.contains("zip archive") && err.contains("numpy.save"),
        "{err}"
    );
    // a column array sorts as 1-D
    write_npy(&d.join("col.npy"), &[500, 1], &keys);
    run_ok(d, "gpu", &["sort", "col.npy", "-o", "col_sorted.npy"]);
    assert_eq!(read_npy::<u32>(&d.join("col_sorted.npy")).1, want);
}

/// Plain `gpusort bench`, as the README shows it, finishes on lavapipe with every suite in
/// its table, each within 100 columns, and exports every case.
#[test]
fn plain_bench_finishes_on_a_software_adapter() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (stdout, err) = run_ok(
        d,
        "gpu",
        &[
            "bench",
            "--json",
            "b.json",
            "--markdown",
            "b.md",
            "--plot",
            "b.svg",
        ],
    );
    let text = String::from_utf8_lossy(&stdout);
    for suite in ["sort", "scan", "transfer", "stencil", "sched"] {
        assert!(text.lines().any(|l| l == suite), "{suite} header: {text}");
    }
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    assert!(text.matches("cases measured").count() == 5, "{text}");
    assert!(err.contains("quick set"), "{err}");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("b.json")).unwrap()).unwrap();
    let cases = v["cases"].as_array().unwrap();
    assert!(cases.len() > 40, "{}", cases.len());
    assert!(std::fs::read_to_string(d.join("b.md"))
        .unwrap()
        .contains("| n | case |"));
    // the plot: a panel per suite and unit, a line per case
    let svg = std::fs::read_to_string(d.join("b.svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    for panel in ["sort (GKeys/s)", "scan (GB/s)", "stencil", "sched"] {
        assert!(svg.contains(panel), "panel {panel}");
    }
    assert!(
        svg.contains("argsort f64 uniform"),
        "the key-type matrix is drawn"
    );
    // what a later run needs to be compared with this one
    assert_eq!(v["gpusort_version"], env!("CARGO_PKG_VERSION"));
    for key in ["commit", "driver", "date", "device"] {
        assert!(v[key].as_str().is_some_and(|s| !s.is_empty()), "{key}: {v}");
    }
    assert!(v["date"].as_str().unwrap().ends_with('Z'), "{}", v["date"]);
    let measured = cases.iter().find(|c| c["skipped"].is_null()).unwrap();
    assert_eq!(
        measured["stats"]["samples_s"].as_array().unwrap().len() as u64,
        measured["stats"]["runs"].as_u64().unwrap()
    );
    // --compare: every case of the suite found in the saved run, with its change
    let (stdout, _) = run_ok(
        d,
        "gpu",
        &["bench", "--suite", "scan", "--compare", "b.json"],
    );
    let text = String::from_utf8_lossy(&stdout);
    assert!(text.contains("compared with"), "{text}");
    let changes = text
        .lines()
        .filter(|l| l.contains('%') && l.contains(" -> "))
        .count();
    let scan_cases = cases
        .iter()
        .filter(|c| c["suite"] == "scan" && c["skipped"].is_null())
        .count();
    assert_eq!(changes, scan_cases, "{text}");
    // a file that is not a bench export: one line, exit 2, nothing measured
    std::fs::write(d.join("bad.json"), "{}").unwrap();
    let out = gpusort()
        .current_dir(d)
        .args(["bench", "--compare", "bad.json"])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        err.contains("not a bench export") && err.lines().count() == 1,
        "{err}"
    );
}

/// The sort suite's key sets by name (`all` for every one), the stencil suite's stencils; an
/// unknown name or type is one line naming what there is, exit 2, before anything is measured.
#[test]
fn bench_key_sets_and_types_by_name() {
    for (args, says) in [
        (["--keys", "zebra"], "the key sets are uniform"),
        (["--dtypes", "u16"], "--dtypes"),
        (["--stencils", "2d-star-r9"], "the stencils are 2d-star-r1"),
    ] {
        let out = gpusort().arg("bench").args(args).assert().code(2);
        let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert!(err.contains(says) && err.lines().count() == 1, "{err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let (stdout, _) = run_ok(
        dir.path(),
        "gpu",
        &[
            "bench", "--suite", "sort", "--sizes", "12", "--reps", "1", "--dtypes", "f32,i64",
            "--keys", "all",
        ],
    );
    let text = String::from_utf8_lossy(&stdout);
    for case in [
        "sort f32 normal",
        "argsort f32 clustered",
        "key-value i64 timestamps",
        "sort i64 nearly",
    ] {
        assert!(text.contains(case), "{case}: {text}");
    }
    assert!(
        !text.contains("f32 timestamps") && !text.contains("u32 uniform"),
        "{text}"
    );
    let (stdout, _) = run_ok(
        dir.path(),
        "gpu",
        &[
            "bench",
            "--suite",
            "stencil",
            "--sizes",
            "12",
            "--reps",
            "1",
            "--gpu-only",
            "--stencils",
            "2d-box-r1",
        ],
    );
    let text = String::from_utf8_lossy(&stdout);
    assert!(text.contains("2-D box r1, 4 cells"), "{text}");
    assert!(!text.contains("star"), "{text}");
}
