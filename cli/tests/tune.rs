//! `gpusort tune` on the software adapter: it measures, stores the winners for this adapter,
//! driver and version, and every later run uses them (and says so in `gpusort info`); a file
//! that cannot be read, or a stored value the kernels cannot take, leaves the defaults in use;
//! `--reset` forgets. Results are the same whatever the tuning.

mod common;

use common::*;
use gpusort_tests::rng;
use rand::Rng;

fn info(cache: &std::path::Path) -> String {
    let out = gpusort()
        .env("GPUSORT_CACHE_DIR", cache)
        .arg("info")
        .assert()
        .success();
    String::from_utf8_lossy(&out.get_output().stdout).to_string()
}

#[test]
fn tune_stores_what_later_runs_use() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    assert!(info(&cache).contains("tuning: the defaults"));
    let out = gpusort()
        .env("GPUSORT_CACHE_DIR", &cache)
        .args(["tune", "--quick"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(
        text.contains("sort, keys an invocation")
            && text.contains("64-bit keys only")
            && text.contains("stencil, 2-D star r1")
            && text.contains("stencil, 3-D star r1")
            && text.contains("stored in"),
        "{text}"
    );
    let file = cache.join("tuning.json");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let t = &v["tunings"][0];
    assert_eq!(t["gpusort_version"], env!("CARGO_PKG_VERSION"));
    assert!(t["sort"]["items"].as_u64().is_some() && t["scan"]["scan_wg"].as_u64().is_some());
    assert!(t["sort"]["wide_items"]
        .as_u64()
        .is_some_and(|v| (1..=64).contains(&v)));
    assert!(info(&cache).contains("tuning: measured by `gpusort tune`"));
    let shown = gpusort()
        .env("GPUSORT_CACHE_DIR", &cache)
        .args(["tune", "--show"])
        .assert()
        .success();
    assert!(String::from_utf8_lossy(&shown.get_output().stdout).contains("tuned on"));

    // a later sort and scan with the stored tuning: the same results
    let mut r = rng(5);
    let keys: Vec<u32> = (0..100_000).map(|_| r.random()).collect();
    write_u32(&dir.path().join("k.bin"), &keys);
    let run = |extra: &[&str]| {
        gpusort()
            .current_dir(dir.path())
            .env("GPUSORT_CACHE_DIR", &cache)
            .args([
                "-q",
                "sort",
                "k.bin",
                "--dtype",
                "u32",
                "--algorithm",
                "radix",
                "-o",
                "s.bin",
            ])
            .args(extra)
            .assert()
            .success();
        gpusort()
            .current_dir(dir.path())
            .env("GPUSORT_CACHE_DIR", &cache)
            .args(["-q", "scan", "k.bin", "--dtype", "u32", "-o", "c.bin"])
            .assert()
            .success();
    };
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    let sums: Vec<u32> = keys
        .iter()
        .scan(0u32, |a, &k| {
            *a = a.wrapping_add(k);
            Some(*a)
        })
        .collect();
    run(&[]);
    assert_eq!(read_u32(&dir.path().join("s.bin")), sorted);
    assert_eq!(read_u32(&dir.path().join("c.bin")), sums);

    // stencils with a stored choice of steps a pass (2 in registers, on 3-D grids on
    // 256-invocation tiles) give one step a pass's bytes; a file of an older version without
    // stencils still counts, a K the kernels cannot take leaves the defaults
    assert!(t["stencil"].is_object(), "{t}");
    write_npy(
        &dir.path().join("g3.npy"),
        &[12, 16, 32],
        &random_f32(12 * 16 * 32, 3),
    );
    write_npy(
        &dir.path().join("g2.npy"),
        &[40, 64],
        &random_f32(40 * 64, 4),
    );
    let mut forced = v.clone();
    forced["tunings"][0]["stencil"] = serde_json::json!({
        "lanes_3_rows": 2, "lanes_5_rows": null, "planes_r1": [2, 256, 1]
    });
    std::fs::write(&file, serde_json::to_vec(&forced).unwrap()).unwrap();
    assert!(info(&cache).contains("tuning: measured by"));
    for grid in ["g3", "g2"] {
        for (out, extra) in [("one", &["--on-chip-steps", "1"][..]), ("tuned", &[][..])] {
            gpusort()
                .current_dir(dir.path())
                .env("GPUSORT_CACHE_DIR", &cache)
                .args(["-q", "stencil", &format!("{grid}.npy"), "--steps", "6"])
                .args(extra)
                .args(["-o", &format!("{grid}-{out}.npy")])
                .assert()
                .success();
        }
        assert_eq!(
            std::fs::read(dir.path().join(format!("{grid}-one.npy"))).unwrap(),
            std::fs::read(dir.path().join(format!("{grid}-tuned.npy"))).unwrap(),
            "{grid}: the tuned steps a pass differ from one step a pass"
        );
    }
    let planned = gpusort()
        .current_dir(dir.path())
        .env("GPUSORT_CACHE_DIR", &cache)
        .args(["stencil", "g3.npy", "--steps", "6", "--plan"])
        .assert()
        .success();
    let plan = String::from_utf8_lossy(&planned.get_output().stdout).to_string();
    assert!(
        plan.contains("2 steps per pass in registers, workgroups of 256"),
        "{plan}"
    );
    let mut older = v.clone();
    older["tunings"][0]
        .as_object_mut()
        .unwrap()
        .remove("stencil");
    std::fs::write(&file, serde_json::to_vec(&older).unwrap()).unwrap();
    assert!(info(&cache).contains("tuning: measured by"));
    let mut bad_k = v.clone();
    bad_k["tunings"][0]["stencil"]["lanes_3_rows"] = serde_json::json!(99);
    std::fs::write(&file, serde_json::to_vec(&bad_k).unwrap()).unwrap();
    assert!(info(&cache).contains("tuning: the defaults"));
    std::fs::write(&file, serde_json::to_vec(&v).unwrap()).unwrap();

    // a stored value the kernels cannot take: ignored, the defaults in use
    let mut bad = v.clone();
    bad["tunings"][0]["sort"]["items"] = serde_json::json!(999);
    std::fs::write(&file, serde_json::to_vec(&bad).unwrap()).unwrap();
    assert!(info(&cache).contains("tuning: the defaults"));
    run(&[]);
    assert_eq!(read_u32(&dir.path().join("s.bin")), sorted);

    // a file that is not a tuning file: said on stderr, the defaults in use, results right
    std::fs::write(&file, b"not json").unwrap();
    let out = gpusort()
        .current_dir(dir.path())
        .env("GPUSORT_CACHE_DIR", &cache)
        .args(["sort", "k.bin", "--dtype", "u32", "-o", "s.bin"])
        .assert()
        .success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(err.contains("not a gpusort tuning file"), "{err}");
    assert_eq!(read_u32(&dir.path().join("s.bin")), sorted);

    // --reset forgets this device's tuning
    std::fs::write(&file, serde_json::to_vec(&v).unwrap()).unwrap();
    assert!(info(&cache).contains("measured by"));
    gpusort()
        .env("GPUSORT_CACHE_DIR", &cache)
        .args(["tune", "--reset"])
        .assert()
        .success();
    assert!(info(&cache).contains("tuning: the defaults"));
}

#[test]
fn tune_needs_a_gpu() {
    let out = gpusort()
        .env("GPUSORT_BACKEND", "cpu")
        .arg("tune")
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        err.contains("measures a GPU") && err.lines().count() == 1,
        "{err}"
    );
}
