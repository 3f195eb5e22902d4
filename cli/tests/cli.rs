//! The `gpusort` binary on real files (here, beside the binary, so cargo builds it for them): formats, outputs, and every bad input of the sort command.

use std::path::{Path, PathBuf};

use gpusort_core::reference::keys as reference;
use gpusort_core::SortOrder;
use gpusort_tests::*;
use rand::Rng;

mod common;
use common::*;

#[test]
fn sorts_raw_u32_both_ways_with_and_without_subgroups() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("keys.bin");
    let keys = random_u32(100_001, 1);
    write_u32(&input, &keys);
    for no_sg in ["0", "1"] {
        for desc in [false, true] {
            let out = dir.path().join(format!("out-{no_sg}-{desc}.bin"));
            let mut cmd = gpusort();
            cmd.env("GPUSORT_NO_SUBGROUPS", no_sg)
                .args(["-q", "sort", "--dtype", "u32", "--verify"])
                .arg(&input)
                .arg("-o")
                .arg(&out);
            if desc {
                cmd.arg("--descending");
            }
            cmd.assert().success();
            assert_eq!(
                read_u32(&out),
                reference::sorted(
                    &keys,
                    SortOrder {
                        descending: desc,
                        segment_size: None
                    }
                )
            );
        }
    }
    assert_eq!(read_u32(&input), keys, "the input is untouched");
}

/// A file larger than one storage binding (lavapipe: 128 MiB) sorts as one GPU job through the
/// direct path, each buffer bound as two ranges: the same bytes as the reference.
#[test]
fn sorts_a_file_beyond_one_binding_as_one_job() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("wide.u64");
    let out = dir.path().join("wide-sorted.u64");
    let mut r = rng(12);
    // past 128 MiB of u64 keys; only the low 24 bits vary, so three digit passes run
    let keys: Vec<u64> = (0..(1usize << 24) + 1001)
        .map(|_| 0x0abc_0000_0000_0000 | r.random_range(0..1u64 << 24))
        .collect();
    std::fs::write(&input, bytemuck::cast_slice::<u64, u8>(&keys)).unwrap();
    let done = gpusort()
        // (software adapters sort bitonic unless asked: lavapipe is one)
        .args(["sort", "--dtype", "u64", "--algorithm", "radix"])
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let said = String::from_utf8_lossy(&done.get_output().stderr).to_string();
    assert!(said.contains("one GPU job beyond one binding"), "{said}");
    let got: Vec<u64> = bytemuck::pod_collect_to_vec(&std::fs::read(&out).unwrap());
    let mut want = keys;
    want.sort_unstable();
    assert!(got == want, "the sorted file differs from the reference");
}

#[test]
fn sorts_npy_of_every_dtype_and_writes_npy() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = rng(2);
    let f: Vec<f32> = (0..5000)
        .map(|i| {
            if i % 97 == 0 {
                f32::NAN
            } else {
                r.random_range(-1e3..1e3)
            }
        })
        .collect();
    let p = dir.path().join("f.npy");
    write_npy(&p, &[f.len() as u64], &f);
    gpusort()
        .args(["-q", "sort"])
        .arg(&p)
        .arg("-o")
        .arg(dir.path().join("fo.npy"))
        .assert()
        .success();
    let (shape, got): (_, Vec<f32>) = read_npy(&dir.path().join("fo.npy"));
    assert_eq!(shape, vec![5000]);
    let want = reference::sorted(&f, SortOrder::default());
    assert_eq!(
        got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        want.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );

    let i: Vec<i64> = (0..3000).map(|_| r.random()).collect();
    let p = dir.path().join("i.npy");
    write_npy(&p, &[i.len() as u64], &i);
    gpusort()
        .args(["-q", "sort", "--descending", "--dtype", "i64"])
        .arg(&p)
        .arg("-o")
        .arg(dir.path().join("io.npy"))
        .assert()
        .success();
    let (_, got): (_, Vec<i64>) = read_npy(&dir.path().join("io.npy"));
    assert_eq!(
        got,
        reference::sorted(
            &i,
            SortOrder {
                descending: true,
                segment_size: None
            }
        )
    );
}

/// N-D .npy arrays sort along their last axis, each row on its own, as `np.sort` does: the
/// result, `--values-out` and `--argsort` (positions within each row, as `np.argsort(a,
/// axis=-1)`) keep the shape, on the GPU, the CPU engine and the external sort, and in many-file
/// jobs; a `--segment-size` other than the rows and values of another shape are refused.
#[test]
fn npy_arrays_of_several_axes_sort_each_row() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = rng(31);
    let (rows, n) = (200usize, 251usize);
    // few distinct keys: the stable order of ties shows in the permutation
    let keys: Vec<i32> = (0..rows * n).map(|_| r.random_range(-20..20)).collect();
    let vals: Vec<u32> = (0..rows * n).map(|_| r.random()).collect();
    let (k, v) = (dir.path().join("k.npy"), dir.path().join("v.npy"));
    write_npy(&k, &[rows as u64, n as u64], &keys);
    write_npy(&v, &[rows as u64, n as u64], &vals);
    for descending in [false, true] {
        // each row's stable argsort
        let perm: Vec<u32> = keys
            .chunks(n)
            .flat_map(|row| {
                let mut p: Vec<u32> = (0..n as u32).collect();
                match descending {
                    false => p.sort_by_key(|&i| row[i as usize]),
                    true => p.sort_by_key(|&i| std::cmp::Reverse(row[i as usize])),
                }
                p
            })
            .collect();
        let at = |i: usize| i / n * n + perm[i] as usize;
        let want_k: Vec<i32> = (0..keys.len()).map(|i| keys[at(i)]).collect();
        let want_v: Vec<u32> = (0..keys.len()).map(|i| vals[at(i)]).collect();
        for (how, extra) in [
            ("gpu", &[][..]),
            ("cpu", &["--backend", "cpu"][..]),
            ("external", &["--memory-budget", "64K"][..]),
        ] {
            let (o, vo, po) = (
                dir.path().join(format!("o-{how}-{descending}.npy")),
                dir.path().join(format!("vo-{how}-{descending}.npy")),
                dir.path().join(format!("po-{how}-{descending}.npy")),
            );
            let mut cmd = gpusort();
            cmd.args(["sort", "--verify"]).args(extra).arg(&k);
            if descending {
                cmd.arg("--descending");
            }
            cmd.arg("-o").arg(&o).arg("--values").arg(&v);
            cmd.arg("--values-out").arg(&vo).arg("--argsort").arg(&po);
            let done = cmd.assert().success();
            let what = format!("{how} descending={descending}");
            let err = String::from_utf8_lossy(&done.get_output().stderr).to_string();
            assert_eq!(
                err.contains("externally"),
                how == "external",
                "{what}: {err}"
            );
            let shape = vec![rows as u64, n as u64];
            let (s, got): (_, Vec<i32>) = read_npy(&o);
            assert_eq!((&s, &got), (&shape, &want_k), "{what}: keys");
            let (s, got): (_, Vec<u32>) = read_npy(&vo);
            assert_eq!((&s, &got), (&shape, &want_v), "{what}: values");
            let (s, got): (_, Vec<u32>) = read_npy(&po);
            assert_eq!((&s, &got), (&shape, &perm), "{what}: argsort");
        }
    }
    // 3-D floats with NaN, the plain GPU path (keys only, written from the download)
    let shape = [3u64, 4, 70];
    let f: Vec<f32> = (0..840)
        .map(|i| match i % 31 {
            0 => f32::NAN,
            1 => -0.0,
            _ => r.random_range(-5.0..5.0),
        })
        .collect();
    let (fk, fo) = (dir.path().join("f.npy"), dir.path().join("fo.npy"));
    write_npy(&fk, &shape, &f);
    gpusort()
        .args(["-q", "sort"])
        .arg(&fk)
        .arg("-o")
        .arg(&fo)
        .assert()
        .success();
    let (s, got): (_, Vec<f32>) = read_npy(&fo);
    assert_eq!(s, shape.to_vec());
    let want = reference::sorted(
        &f,
        SortOrder {
            descending: false,
            segment_size: Some(70),
        },
    );
    assert_eq!(
        got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        want.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
    // a --segment-size equal to the rows is the same sort; an empty array keeps its shape
    let same = dir.path().join("same.npy");
    gpusort()
        .args(["-q", "sort", "--segment-size", "70"])
        .arg(&fk)
        .arg("-o")
        .arg(&same)
        .assert()
        .success();
    assert_eq!(std::fs::read(&same).unwrap(), std::fs::read(&fo).unwrap());
    let (e, eo) = (dir.path().join("e.npy"), dir.path().join("eo.npy"));
    write_npy::<u32>(&e, &[0, 5], &[]);
    gpusort()
        .args(["-q", "sort"])
        .arg(&e)
        .arg("-o")
        .arg(&eo)
        .assert()
        .success();
    assert_eq!(read_npy::<u32>(&eo).0, vec![0, 5]);
    // refused, nothing written
    let v1 = dir.path().join("v1.npy");
    write_npy(&v1, &[(rows * n) as u64 / 2, 2], &vals[..]);
    let (k_s, fk_s, v1_s) = (
        k.display().to_string(),
        fk.display().to_string(),
        v1.display().to_string(),
    );
    let before = listing(dir.path());
    let out = dir.path().join("never.npy").display().to_string();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_refused(&[
        (
            s(&["sort", &fk_s, "--segment-size", "7", "-o", &out]),
            "last axis",
        ),
        (
            s(&[
                "sort",
                &k_s,
                "--values",
                &v1_s,
                "--values-out",
                &out,
                "-o",
                &out,
            ]),
            "shape",
        ),
        (
            s(&[
                "sort",
                &k_s,
                &fk_s,
                "--segment-size",
                "70",
                "--out-dir",
                &out,
            ]),
            "last axis",
        ),
    ]);
    assert_eq!(listing(dir.path()), before);
    // several files as one job, each sorted along its last axis (the merged launch on the GPU,
    // the CPU engine, two devices): the bytes of the single-file sorts
    let one = dir.path().join("one.npy");
    gpusort()
        .args(["-q", "sort"])
        .arg(&k)
        .arg("-o")
        .arg(&one)
        .assert()
        .success();
    for (how, extra) in [
        ("gpu", &[][..]),
        ("cpu", &["--backend", "cpu"][..]),
        ("two", &["--devices", "0,0", "--spread-always"][..]),
    ] {
        let out = dir.path().join(format!("many-{how}"));
        gpusort()
            .args(["-q"])
            .args(extra)
            .arg("sort")
            .arg(&k)
            .arg(&fk)
            .arg("--out-dir")
            .arg(&out)
            .assert()
            .success();
        let read = |p: &Path| std::fs::read(p).unwrap();
        assert_eq!(read(&out.join("k.npy")), read(&one), "{how}");
        assert_eq!(read(&out.join("f.npy")), read(&fo), "{how}");
    }
}

#[test]
fn in_place_values_argsort_and_segments() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("k.bin");
    let mut r = rng(3);
    let keys: Vec<u32> = (0..20_000).map(|_| r.random_range(0..50)).collect();
    write_u32(&input, &keys);
    let vals: Vec<u32> = (0..20_000).map(|i| i * 3).collect();
    let vin = dir.path().join("v.bin");
    write_u32(&vin, &vals);
    let vout = dir.path().join("vo.bin");
    let perm = dir.path().join("perm.npy");
    gpusort()
        .args([
            "-q",
            "sort",
            "--dtype",
            "u32",
            "--in-place",
            "--verify",
            "--values",
        ])
        .arg(&vin)
        .arg("--values-out")
        .arg(&vout)
        .arg("--argsort")
        .arg(&perm)
        .arg(&input)
        .assert()
        .success();
    let p = reference::argsort(&keys, SortOrder::default());
    assert_eq!(
        read_u32(&input),
        reference::sorted(&keys, SortOrder::default())
    );
    assert_eq!(
        read_u32(&vout),
        p.iter().map(|&i| vals[i as usize]).collect::<Vec<_>>()
    );
    assert_eq!(read_npy::<u32>(&perm).1, p);

    let seg = dir.path().join("seg.bin");
    write_u32(&seg, &keys);
    gpusort()
        .args([
            "-q",
            "sort",
            "--dtype",
            "u32",
            "--segment-size",
            "1000",
            "--in-place",
        ])
        .arg(&seg)
        .assert()
        .success();
    assert_eq!(
        read_u32(&seg),
        reference::sorted(
            &keys,
            SortOrder {
                descending: false,
                segment_size: Some(1000)
            }
        )
    );
    // the radix path's segments: the same keys, and the stable permutation
    let radix_in = dir.path().join("seg_radix_in.bin");
    write_u32(&radix_in, &keys);
    let radix_out = dir.path().join("seg_radix.bin");
    let radix_perm = dir.path().join("seg_radix.perm");
    gpusort()
        .args([
            "-q",
            "sort",
            "--dtype",
            "u32",
            "--segment-size",
            "1000",
            "--algorithm",
            "radix",
        ])
        .arg(&radix_in)
        .arg("-o")
        .arg(&radix_out)
        .arg("--argsort")
        .arg(&radix_perm)
        .assert()
        .success();
    let order = SortOrder {
        descending: false,
        segment_size: Some(1000),
    };
    assert_eq!(read_u32(&radix_out), reference::sorted(&keys, order));
    assert_eq!(read_u32(&radix_perm), reference::argsort(&keys, order));
    std::fs::remove_file(&radix_in).unwrap();
    std::fs::remove_file(&radix_out).unwrap();
    std::fs::remove_file(&radix_perm).unwrap();
    assert_eq!(
        listing(dir.path()).len(),
        5,
        "no temporary files left behind"
    );
}

/// `GPUSORT_DUMP_WGSL=DIR` writes every kernel a run compiles, whole (constants and common code
/// included), so tools outside the process (the `shader_stats` example) see exactly what ran;
/// the run itself is unchanged.
#[test]
fn dumps_the_kernels_it_compiles() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("keys.bin");
    let keys = random_u32(5_000, 7);
    write_u32(&input, &keys);
    let dump = dir.path().join("kernels");
    let out = dir.path().join("out.bin");
    gpusort()
        .env("GPUSORT_DUMP_WGSL", &dump)
        .args(["-q", "sort", "--dtype", "u32", "--algorithm", "radix"])
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let order = SortOrder {
        descending: false,
        segment_size: None,
    };
    assert_eq!(read_u32(&out), reference::sorted(&keys, order));
    let files = listing(&dump);
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("radix-") && n.ends_with(".wgsl")),
        "{names:?}"
    );
    for f in &files {
        let source = std::fs::read_to_string(f).unwrap();
        let module = naga::front::wgsl::parse_str(&source)
            .unwrap_or_else(|e| panic!("{}: {}", f.display(), e.emit_to_string(&source)));
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::all(),
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("{}: {}", f.display(), e.emit_to_string(&source)));
        assert!(!module.entry_points.is_empty(), "{}", f.display());
    }
}

#[test]
fn default_output_name_and_empty_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("empty.bin");
    std::fs::write(&input, b"").unwrap();
    gpusort()
        .args(["-q", "sort", "--dtype", "f64"])
        .arg(&input)
        .assert()
        .success();
    assert_eq!(
        std::fs::read(dir.path().join("empty.sorted.bin"))
            .unwrap()
            .len(),
        0
    );
    let one = dir.path().join("one.bin");
    write_u32(&one, &[42]);
    gpusort()
        .args(["-q", "sort", "--dtype", "u32"])
        .arg(&one)
        .assert()
        .success();
    assert_eq!(read_u32(&dir.path().join("one.sorted.bin")), vec![42]);
}

/// Each bad input: exit code 2, one line on stderr naming the problem, input untouched, nothing written.
#[test]
fn bad_inputs_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_u32(&d.join("ok.bin"), &[3, 1, 2]);
    std::fs::write(d.join("odd.bin"), [1u8, 2, 3, 4, 5]).unwrap();
    std::fs::write(d.join("bad.npy"), b"not numpy at all").unwrap();
    let mut huge = b"\x93NUMPY\x01\x00".to_vec();
    huge.extend([0xff, 0xff]);
    std::fs::write(d.join("huge.npy"), &huge).unwrap();
    write_npy(&d.join("two.npy"), &[2, 2], &[1u32, 2, 3, 4]);
    write_npy(&d.join("scalar.npy"), &[], &[7u32]);
    {
        use npyz::WriterBuilder;
        let mut f = std::fs::File::create(d.join("fortran.npy")).unwrap();
        let mut w = npyz::WriteOptions::new()
            .default_dtype()
            .shape(&[3])
            .order(npyz::Order::Fortran)
            .writer(&mut f)
            .begin_nd()
            .unwrap();
        w.extend([1u32, 2, 3]).unwrap();
        w.finish().unwrap();
    }
    write_npy(&d.join("three.npy"), &[3], &[1u32, 2, 3]);
    let mut truncated = std::fs::read(d.join("three.npy")).unwrap();
    std::fs::remove_file(d.join("three.npy")).unwrap();
    truncated.truncate(truncated.len() - 3);
    std::fs::write(d.join("truncated.npy"), &truncated).unwrap();
    std::fs::write(d.join("empty.npy"), b"").unwrap();
    write_npy(&d.join("f32.npy"), &[3], &[1.0f32, 2.0, 3.0]);
    write_npy(&d.join("u8.npy"), &[3], &[1u8, 2, 3]);
    write_u32(&d.join("vals.bin"), &[1, 2]);
    let before = listing(d);
    let before_bytes: Vec<Vec<u8>> = before.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let s = |p: &str| d.join(p).to_string_lossy().into_owned();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "sort".into(),
                s("missing.bin"),
                "--dtype".into(),
                "u32".into(),
            ],
            "cannot read",
        ),
        (
            vec!["sort".into(), s("odd.bin"), "--dtype".into(), "u32".into()],
            "not a multiple",
        ),
        (vec!["sort".into(), s("ok.bin")], "--dtype"),
        (
            vec!["sort".into(), s("ok.bin"), "--dtype".into(), "u16".into()],
            "invalid value",
        ),
        (vec!["sort".into(), s("bad.npy")], "not a valid .npy"),
        (vec!["sort".into(), s("huge.npy")], "header length"),
        (vec!["scan".into(), s("two.npy")], "2-D"),
        (vec!["sort".into(), s("scalar.npy")], "0-D"),
        (vec!["sort".into(), s("fortran.npy")], "Fortran"),
        (vec!["sort".into(), s("truncated.npy")], "not a valid .npy"),
        (vec!["sort".into(), s("empty.npy")], "not a valid .npy"),
        (
            vec!["sort".into(), s("f32.npy"), "--dtype".into(), "u32".into()],
            "holds f32",
        ),
        (vec!["sort".into(), s("u8.npy")], "dtype '|u1'"),
        (
            vec![
                "sort".into(),
                s("ok.bin"),
                "--dtype".into(),
                "u32".into(),
                "--values".into(),
                s("vals.bin"),
                "--values-out".into(),
                s("vo.bin"),
            ],
            "has 2 values",
        ),
        (
            vec![
                "sort".into(),
                s("ok.bin"),
                "--dtype".into(),
                "u32".into(),
                "-o".into(),
                s("nowhere/out.bin"),
            ],
            "does not exist",
        ),
        (
            vec![
                "sort".into(),
                s("ok.bin"),
                "--dtype".into(),
                "u32".into(),
                "-o".into(),
                s("ok.bin"),
            ],
            "--in-place",
        ),
        (
            vec![
                "sort".into(),
                s("ok.bin"),
                "--dtype".into(),
                "u32".into(),
                "--segment-size".into(),
                "0".into(),
            ],
            "segment-size",
        ),
        (
            vec![
                "sort".into(),
                d.to_string_lossy().into_owned(),
                "--dtype".into(),
                "u32".into(),
            ],
            "directory",
        ),
    ];
    assert_refused(&cases);
    assert_eq!(listing(d), before, "nothing written");
    let after: Vec<Vec<u8>> = before.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert_eq!(after, before_bytes, "inputs untouched");
}

/// `--key-bits A..B`: the radix sort on those bits only, in the CPU twin's stable order (with and
/// without --verify, and through the plain path); wrong ranges and combinations refused.
#[test]
fn key_bits_sort_on_a_bit_range() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("k.bin");
    let keys = random_u32(30_000, 8);
    write_u32(&input, &keys);
    let (perm, _) = gpusort_core::reference::radix::argsort(&keys, false, 8..20);
    let want: Vec<u32> = perm.iter().map(|&i| keys[i as usize]).collect();
    for verify in [false, true] {
        let out = dir.path().join(format!("out{verify}.bin"));
        let mut cmd = gpusort();
        cmd.args(["sort", "--dtype", "u32", "--key-bits", "8..20", "-q"])
            .arg(&input)
            .arg("-o")
            .arg(&out);
        if verify {
            cmd.arg("--verify");
        }
        cmd.assert().success();
        assert_eq!(read_u32(&out), want, "--key-bits 8..20 verify={verify}");
    }
    // with segments, each sorted on its bits on its own; --verify checks each segment, on the
    // GPU and on the CPU engine
    let want: Vec<u32> = keys
        .chunks(777)
        .flat_map(|seg| {
            let (perm, _) = gpusort_core::reference::radix::argsort(seg, true, 8..20);
            perm.into_iter()
                .map(|i| seg[i as usize])
                .collect::<Vec<_>>()
        })
        .collect();
    for backend in ["gpu", "cpu"] {
        let out = dir.path().join(format!("seg-{backend}.bin"));
        gpusort()
            .args([
                "sort",
                "--dtype",
                "u32",
                "--key-bits",
                "8..20",
                "-q",
                "--verify",
            ])
            .args([
                "--segment-size",
                "777",
                "--descending",
                "--backend",
                backend,
            ])
            .arg(&input)
            .arg("-o")
            .arg(&out)
            .assert()
            .success();
        assert_eq!(read_u32(&out), want, "segments of 777 on {backend}");
    }
    let out = dir.path().join("refused.bin");
    for (extra, why) in [
        (vec!["--key-bits", "3..3"], "empty range"),
        (vec!["--key-bits", "0..33"], "wider than the key"),
        (vec!["--key-bits", "8"], "not a range"),
        (
            vec!["--key-bits", "0..8", "--algorithm", "bitonic"],
            "bitonic",
        ),
    ] {
        gpusort()
            .args(["sort", "--dtype", "u32", "-q"])
            .args(&extra)
            .arg(&input)
            .arg("-o")
            .arg(&out)
            .assert()
            .code(2);
        assert!(!out.exists(), "{why}: nothing written");
    }
}

/// Past --memory-budget the sort is external (runs on disk, streaming merge): the same result,
/// payload and permutation as in memory, .npy kept, run files gone afterwards, wherever they
/// went; bad budgets and run directories refused with nothing written.
#[test]
fn external_sort_under_a_low_memory_budget() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("k.bin");
    let values = dir.path().join("v.bin");
    let keys: Vec<u32> = random_u32(50_000, 21).iter().map(|k| k % 5000).collect();
    let vals = random_u32(50_000, 22);
    write_u32(&input, &keys);
    write_u32(&values, &vals);
    let mut perm: Vec<u32> = (0..keys.len() as u32).collect();
    perm.sort_by_key(|&i| std::cmp::Reverse(keys[i as usize]));
    let runs = dir.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    for (budget, tmp) in [("64K", false), ("128K", true)] {
        let (out, vout, pout) = (
            dir.path().join(format!("s{budget}.bin")),
            dir.path().join(format!("v{budget}.bin")),
            dir.path().join(format!("p{budget}.npy")),
        );
        let mut cmd = gpusort();
        cmd.args(["sort", "--dtype", "u32", "--descending", "--verify"])
            .args(["--memory-budget", budget])
            .arg(&input)
            .arg("-o")
            .arg(&out)
            .arg("--values")
            .arg(&values)
            .arg("--values-out")
            .arg(&vout)
            .arg("--argsort")
            .arg(&pout);
        if tmp {
            cmd.arg("--tmp-dir").arg(&runs);
        }
        let done = cmd.arg("--timings").assert().success();
        let err = String::from_utf8_lossy(&done.get_output().stderr).to_string();
        assert!(
            err.contains("externally") && err.contains("merge level"),
            "{err}"
        );
        let want: Vec<u32> = perm.iter().map(|&i| keys[i as usize]).collect();
        assert_eq!(read_u32(&out), want, "{budget}: keys");
        let want_v: Vec<u32> = perm.iter().map(|&i| vals[i as usize]).collect();
        assert_eq!(read_u32(&vout), want_v, "{budget}: values");
        assert_eq!(
            read_npy::<u32>(&pout),
            (vec![50_000], perm.clone()),
            "{budget}"
        );
        assert!(temp_files(dir.path()).is_empty() && listing(&runs).is_empty());
    }
    // .npy in, .npy out, f32 with the in-memory result
    let f = random_f32(30_000, 5);
    let npy = dir.path().join("f.npy");
    write_npy(&npy, &[30_000], &f);
    for budget in ["64K", "1G"] {
        let out = dir.path().join(format!("f{budget}.npy"));
        gpusort()
            .args(["sort", "-q", "--memory-budget", budget])
            .arg(&npy)
            .arg("-o")
            .arg(&out)
            .assert()
            .success();
    }
    assert_eq!(
        read_npy::<f32>(&dir.path().join("f64K.npy")).1,
        read_npy::<f32>(&dir.path().join("f1G.npy")).1
    );
    // a budget only a piece merge would break (120 KiB of keys; 1.2 MB in pieces): the device
    // is asked, takes the keys as one GPU sort, and the sort stays in memory
    let out = dir.path().join("f512K.npy");
    let done = gpusort()
        .args(["sort", "--timings", "--memory-budget", "512K"])
        .arg(&npy)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let err = String::from_utf8_lossy(&done.get_output().stderr).to_string();
    assert!(!err.contains("externally"), "{err}");
    assert_eq!(
        read_npy::<f32>(&out).1,
        read_npy::<f32>(&dir.path().join("f1G.npy")).1
    );
    let before = listing(dir.path());
    let out = dir.path().join("refused.bin");
    for (extra, why) in [
        (vec!["--memory-budget", "1K"], "below the floor"),
        (vec!["--memory-budget", "lots"], "not a size"),
        (
            vec![
                "--memory-budget",
                "64K",
                "--tmp-dir",
                "/nonexistent/gpusort",
            ],
            "no run directory",
        ),
    ] {
        gpusort()
            .args(["sort", "--dtype", "u32", "-q"])
            .args(&extra)
            .arg(&input)
            .arg("-o")
            .arg(&out)
            .assert()
            .code(2);
        assert_eq!(listing(dir.path()), before, "{why}: nothing written");
    }
}

/// `--key-bits` with several inputs: each file sorted on those bits.
#[test]
fn key_bits_for_many_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let mut cmd = gpusort();
    cmd.args([
        "sort",
        "-q",
        "--dtype",
        "u32",
        "--key-bits",
        "4..12",
        "--out-dir",
    ])
    .arg(&out);
    let mut want = Vec::new();
    for f in 0..3 {
        let keys = random_u32(3000 + 1000 * f, 30 + f as u64);
        let path = dir.path().join(format!("k{f}.bin"));
        write_u32(&path, &keys);
        cmd.arg(&path);
        let (perm, _) = gpusort_core::reference::radix::argsort(&keys, false, 4..12);
        want.push(perm.iter().map(|&i| keys[i as usize]).collect::<Vec<u32>>());
    }
    cmd.assert().success();
    for (f, w) in want.iter().enumerate() {
        assert_eq!(&read_u32(&out.join(format!("k{f}.bin"))), w, "file {f}");
    }
}

#[test]
fn info_lists_the_adapter() {
    let out = gpusort().args(["info", "--json"]).output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(v["chosen"]["name"].as_str().is_some_and(|n| !n.is_empty()));
    assert!(
        v["limits"]["max_storage_buffer_binding_size"]
            .as_u64()
            .unwrap()
            >= 128 << 20
    );
    let text = gpusort().arg("info").output().unwrap();
    let s = String::from_utf8_lossy(&text.stdout);
    assert!(
        s.contains("max storage binding") && s.contains("chosen:"),
        "{s}"
    );
}

#[test]
fn scan_partition_compact_on_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data: Vec<u32> = random_u32(10_000, 7).into_iter().map(|x| x % 100).collect();
    let input = d.join("x.bin");
    write_u32(&input, &data);
    gpusort()
        .args(["-q", "scan", "--dtype", "u32", "--exclusive", "--verify"])
        .arg(&input)
        .assert()
        .success();
    let want = gpusort_core::reference::scan::scan(&data, gpusort_core::scan::ScanOp::Add, false);
    assert_eq!(read_u32(&d.join("x.scan.bin")), want);
    gpusort()
        .args(["-q", "scan", "--dtype", "u32", "--op", "max", "-o"])
        .arg(d.join("m.bin"))
        .arg(&input)
        .assert()
        .success();
    assert_eq!(
        read_u32(&d.join("m.bin")),
        gpusort_core::reference::scan::scan(&data, gpusort_core::scan::ScanOp::Max, true)
    );

    let vals: Vec<u32> = (0..10_000).collect();
    write_u32(&d.join("v.bin"), &vals);
    let out = gpusort()
        .args([
            "-q",
            "partition",
            "--dtype",
            "u32",
            "--pivot",
            "50",
            "--verify",
            "--values",
        ])
        .arg(d.join("v.bin"))
        .arg("--values-out")
        .arg(d.join("vo.bin"))
        .arg(&input)
        .output()
        .unwrap();
    assert!(out.status.success());
    let pred = gpusort_core::scan::Predicate::Below(50u32);
    let (want, wv, split) = gpusort_core::reference::scan::partition(&data, Some(&vals), &pred);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        split.to_string()
    );
    assert_eq!(read_u32(&d.join("x.partitioned.bin")), want);
    assert_eq!(read_u32(&d.join("vo.bin")), wv.unwrap());

    let f: Vec<f32> = (0..3000)
        .map(|i| if i % 3 == 0 { 0.0 } else { i as f32 - 1500.0 })
        .collect();
    let fp = d.join("f.npy");
    write_npy(&fp, &[f.len() as u64], &f);
    let out = gpusort()
        .args(["-q", "compact", "--nonzero", "--verify"])
        .arg(&fp)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, got): (_, Vec<f32>) = read_npy(&d.join("f.compacted.npy"));
    assert_eq!(got.len(), 2000);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "2000");
    gpusort()
        .args(["-q", "compact", "--below", "-10.5", "-o"])
        .arg(d.join("neg.npy"))
        .arg(&fp)
        .assert()
        .success();
    let (_, got): (_, Vec<f32>) = read_npy(&d.join("neg.npy"));
    assert_eq!(
        got,
        f.iter().copied().filter(|&x| x < -10.5).collect::<Vec<_>>()
    );
}

#[test]
fn scan_partition_and_compact_stream_in_chunks() {
    // 4 KiB chunks (1024 u32): a 100_003-element file takes 98 chunks, the scan carrying its
    // sum across them; the compaction's .npy header is written last for the count kept (its
    // room was sized for every element, so it is padded) and NumPy-style readers accept it
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data: Vec<u32> = random_u32(100_003, 9);
    let input = d.join("x.npy");
    write_npy(&input, &[data.len() as u64], &data);
    let vals: Vec<u32> = (0..data.len() as u32).collect();
    write_u32(&d.join("v.bin"), &vals);
    let run_on = |input: &Path, args: &[&str]| {
        let out = gpusort()
            .env("GPUSORT_STREAM_CHUNK_BYTES", "4096")
            .args(args)
            .arg(input)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let run = |args: &[&str]| run_on(&input, args);
    run(&["-q", "scan", "--verify"]);
    let (shape, got): (_, Vec<u32>) = read_npy(&d.join("x.scan.npy"));
    assert_eq!(shape, vec![data.len() as u64]);
    assert_eq!(
        got,
        gpusort_core::reference::scan::scan(&data, gpusort_core::scan::ScanOp::Add, true)
    );
    let vo = d.join("vo.npy");
    let printed = run(&[
        "-q",
        "compact",
        "--at-least",
        "4000000000",
        "--verify",
        "--values",
        d.join("v.bin").to_str().unwrap(),
        "--values-out",
        vo.to_str().unwrap(),
    ]);
    let pred = gpusort_core::scan::Predicate::AtLeast(4_000_000_000u32);
    let (want, wv) = gpusort_core::reference::scan::compact(&data, Some(&vals), &pred);
    assert!(want.len() < data.len() / 10, "a small fraction kept");
    assert_eq!(printed, want.len().to_string());
    let (shape, got): (_, Vec<u32>) = read_npy(&d.join("x.compacted.npy"));
    assert_eq!((shape, got), (vec![want.len() as u64], want));
    let (_, got_vals): (_, Vec<u32>) = read_npy(&vo);
    assert_eq!(got_vals, wv.unwrap());
    // the partition: each chunk's elements below the pivot, then the others from a part
    // written aside, with the payload the same way
    let printed = run(&[
        "-q",
        "partition",
        "--pivot",
        "3000000000",
        "--verify",
        "--values",
        d.join("v.bin").to_str().unwrap(),
        "--values-out",
        vo.to_str().unwrap(),
    ]);
    let pred = gpusort_core::scan::Predicate::Below(3_000_000_000u32);
    let (want, wv, split) = gpusort_core::reference::scan::partition(&data, Some(&vals), &pred);
    assert_eq!(printed, split.to_string());
    let (shape, got): (_, Vec<u32>) = read_npy(&d.join("x.partitioned.npy"));
    assert_eq!((shape, got), (vec![data.len() as u64], want));
    let (_, got_vals): (_, Vec<u32>) = read_npy(&vo);
    assert_eq!(got_vals, wv.unwrap());
    // each chunk drained straight into a mapped output (--no-sync, both jobs; a flushed
    // partition) or held and appended (a flushed compaction): raw and .npy, 8-byte elements
    // after a .npy header, the rest part's payload after the matching ones
    let wide: Vec<f64> = data.iter().map(|&x| x as f64 - 2e9).collect();
    let wide_in = d.join("w.npy");
    write_npy(&wide_in, &[wide.len() as u64], &wide);
    let zero = gpusort_core::scan::Predicate::Below(0.0f64);
    let (v_bin, v_out) = (d.join("v.bin"), vo.to_str().unwrap().to_string());
    for sync in ["--timings", "--no-sync"] {
        for (cmd, flag, dest) in [
            ("compact", "--below", "wc.npy"),
            ("partition", "--pivot", "wp.u64raw"),
        ] {
            let dest = d.join(dest);
            run_on(
                &wide_in,
                &[
                    sync,
                    "-q",
                    cmd,
                    "--verify",
                    flag,
                    "0",
                    "--values",
                    v_bin.to_str().unwrap(),
                    "--values-out",
                    &v_out,
                    "-o",
                    dest.to_str().unwrap(),
                ],
            );
            let (want, wv, split) =
                gpusort_core::reference::scan::partition(&wide, Some(&vals), &zero);
            let wv = wv.unwrap();
            let (want, wv) = match cmd {
                "compact" => (&want[..split], &wv[..split]),
                _ => (&want[..], &wv[..]),
            };
            let got: Vec<f64> = match cmd {
                "compact" => read_npy(&dest).1,
                _ => bytemuck::pod_collect_to_vec(&std::fs::read(&dest).unwrap()),
            };
            assert!(
                got.iter()
                    .map(|x| x.to_bits())
                    .eq(want.iter().map(|x| x.to_bits())),
                "{cmd} {sync}"
            );
            assert_eq!(read_npy::<u32>(&vo).1, wv, "{cmd} {sync} values");
        }
        let s_bin = d.join("s.bin");
        run(&[
            sync,
            "-q",
            "scan",
            "--op",
            "max",
            "-o",
            s_bin.to_str().unwrap(),
        ]);
        let got: Vec<u32> = bytemuck::pod_collect_to_vec(&std::fs::read(&s_bin).unwrap());
        let max = gpusort_core::scan::ScanOp::Max;
        assert_eq!(
            got,
            gpusort_core::reference::scan::scan(&data, max, true),
            "{sync}"
        );
    }
    // nothing kept: a header for zero elements
    run(&[
        "-q",
        "compact",
        "--below",
        "0",
        "-o",
        d.join("none.npy").to_str().unwrap(),
    ]);
    let (shape, got): (_, Vec<u32>) = read_npy(&d.join("none.npy"));
    assert_eq!((shape, got.len()), (vec![0], 0));
    // the parts written aside are gone
    assert!(
        listing(d)
            .iter()
            .all(|f| !f.to_string_lossy().contains(".gpusort-")),
        "{:?}",
        listing(d)
    );
}

#[test]
fn scan_family_bad_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_u32(&d.join("ok.bin"), &[3, 1, 2]);
    write_npy(&d.join("f.npy"), &[2], &[1.0f64, 2.0]);
    let s = |p: &str| d.join(p).to_string_lossy().into_owned();
    let before = listing(d);
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["scan".into(), s("ok.bin")], "--dtype"),
        (
            vec!["scan".into(), s("f.npy"), "--op".into(), "xor".into()],
            "not supported",
        ),
        (
            vec![
                "scan".into(),
                s("ok.bin"),
                "--dtype".into(),
                "f32".into(),
                "--op".into(),
                "xor".into(),
            ],
            "not supported",
        ),
        (
            vec![
                "partition".into(),
                s("ok.bin"),
                "--dtype".into(),
                "u32".into(),
                "--pivot".into(),
                "abc".into(),
            ],
            "not a valid u32",
        ),
        (
            vec![
                "partition".into(),
                s("ok.bin"),
                "--dtype".into(),
                "u32".into(),
            ],
            "--pivot",
        ),
        (
            vec![
                "compact".into(),
                s("ok.bin"),
                "--dtype".into(),
                "u32".into(),
            ],
            "required",
        ),
        (
            vec![
                "compact".into(),
                s("ok.bin"),
                "--dtype".into(),
                "i32".into(),
                "--below".into(),
                "1".into(),
                "-o".into(),
                s("ok.bin"),
            ],
            "--in-place",
        ),
        (
            vec![
                "compact".into(),
                s("missing.bin"),
                "--dtype".into(),
                "u32".into(),
                "--nonzero".into(),
            ],
            "cannot read",
        ),
    ];
    assert_refused(&cases);
    assert_eq!(listing(d), before, "nothing written");
}

/// `gpusort bench --quick` runs every suite on this machine's adapter and exports JSON and
/// Markdown a script can compare (issue: bench). Not a timed test: it checks what is reported.
/// `gpusort ARGS --json DIR/bench.json --markdown DIR/bench.md`, which must succeed:
/// the JSON report, the Markdown table and stdout.
fn bench_exports(dir: &Path, args: &[&str]) -> (serde_json::Value, String, String) {
    let (json, md) = (dir.join("bench.json"), dir.join("bench.md"));
    let out = gpusort()
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg("--markdown")
        .arg(&md)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let table = std::fs::read_to_string(&md).unwrap();
    (v, table, String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn bench_quick_exports_every_case() {
    let dir = tempfile::tempdir().unwrap();
    let start = std::time::Instant::now();
    let (v, table, stdout) = bench_exports(
        dir.path(),
        &["-q", "bench", "--quick", "--suite", "sort,scan"],
    );
    let took = start.elapsed();
    let cases = v["cases"].as_array().unwrap();
    for (suite, name) in [
        ("sort", "bitonic (vectorised)"),
        ("sort", "bitonic (plain, method 2)"),
        ("sort", "radix (8-bit digits)"),
        ("sort", "vec4 copy (bound)"),
        ("scan", "exclusive sum scan u32"),
        ("scan", "compaction u32 (x < 2^31)"),
    ] {
        let c = cases
            .iter()
            .find(|c| c["suite"] == suite && c["case"] == name)
            .unwrap_or_else(|| panic!("{suite}/{name} missing"));
        assert!(
            c["stats"]["median_s"].as_f64().unwrap() > 0.0
                && c["throughput"].as_f64().unwrap() > 0.0,
            "{c}"
        );
        assert!(c["stats"]["min_s"].as_f64().unwrap() <= c["stats"]["max_s"].as_f64().unwrap());
    }
    assert!(v["device"].as_str().is_some_and(|d| !d.is_empty()));
    assert!(table.contains("| n | case |") && table.contains("bitonic (vectorised)"));
    assert!(stdout.contains("relative time"), "{stdout}");
    // each case printed once, as it was measured or with its part (never twice, none left out)
    let rows = stdout.lines().filter(|l| l.starts_with("2^")).count();
    assert_eq!(rows, cases.len(), "{stdout}");
    eprintln!("bench --quick took {took:?}");
}

/// --warmup repeats each GPU case untimed first and says so in every export.
#[test]
fn bench_warmup_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (v, table, stdout) = bench_exports(
        dir.path(),
        &[
            "bench",
            "--suite",
            "scan",
            "--sizes",
            "10",
            "--reps",
            "1",
            "--gpu-only",
            "--progress",
            "never",
            "--warmup",
            "30",
        ],
    );
    assert_eq!(v["warmup_ms"], 30, "{v}");
    assert!(table.contains("warmed up for 30 ms"), "{table}");
    assert!(stdout.contains("warm-up 30 ms a GPU case"), "{stdout}");
}

/// Ctrl-C or SIGTERM while the finished result waits to be renamed over the input: the input is
/// intact, the temporary file is gone, exit code 130.
#[cfg(unix)]
#[test]
fn interrupts_leave_the_input_intact() {
    let sort: &[&str] = &["-q", "sort", "--dtype", "u32", "--in-place"];
    let stencil: &[&str] = &[
        "-q",
        "stencil",
        "--shape",
        "250x200",
        "--steps",
        "3",
        "--in-place",
    ];
    for (signal, command) in [
        (libc::SIGINT, sort),
        (libc::SIGTERM, sort),
        (libc::SIGINT, stencil),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("keys.bin");
        let keys = random_u32(50_000, 11);
        write_u32(&input, &keys);
        let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("gpusort"))
            .args(command)
            .arg(&input)
            .env("GPUSORT_TEST_STALL_BEFORE_RENAME_MS", "20000")
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // wait for the finished temporary file: the most delicate moment
        wait_for_temp_files(dir.path(), 1);
        // SAFETY: sending a signal to our own child process.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(130),
            "signal {signal}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(read_u32(&input), keys, "input intact after signal {signal}");
        assert!(
            temp_files(dir.path()).is_empty(),
            "temporary file removed after signal {signal}"
        );
        assert_eq!(listing(dir.path()), vec![input.clone()]);
    }
}

/// A write that fails part-way (here: a file-size limit, as a full disk would) is a runtime
/// error with one line, exit code 1, and nothing left behind.
#[cfg(unix)]
#[test]
fn a_failing_write_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("keys.bin");
    let keys = random_u32(100_000, 12); // 400 KB
    write_u32(&input, &keys);
    let bin = assert_cmd::cargo::cargo_bin("gpusort");
    // sort writes through a buffered file; stencil reserves the output and writes through a map
    // and the external sort's run files and streamed output; scan, compaction and partition
    // write each chunk as it comes back (the partition a part aside too)
    for command in [
        "sort --dtype u32",
        "stencil --shape 400x250",
        "sort --dtype u32 --memory-budget 64K",
        "scan --dtype u32",
        "compact --dtype u32 --nonzero",
        "partition --dtype u32 --pivot 5",
    ] {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -f 64 && exec '{}' -q {command} '{}' -o '{}'",
                bin.display(),
                input.display(),
                dir.path().join("out.bin").display()
            ))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command}: {err}");
        assert!(
            err.starts_with("gpusort: cannot write") && err.trim_end().lines().count() == 1,
            "{command}: {err}"
        );
        assert_eq!(
            listing(dir.path()),
            vec![input.clone()],
            "{command}: no output, no temporary file"
        );
        assert_eq!(read_u32(&input), keys);
    }
}

/// A constant boundary of NaN or ±inf (as scipy.ndimage takes them): checked against the CPU
/// twin by --verify, NaN-aware, in core, streamed and with steps on chip, all the same bytes.
#[test]
fn stencils_with_a_non_finite_constant_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_f32(&d.join("g.raw"), &random_f32(48 * 40, 5));
    for cval in ["nan", "inf", "-inf"] {
        let run = |out: &str, extra: &[&str]| {
            gpusort()
                .args([
                    "-q", "stencil", "--shape", "48x40", "--radius", "1", "--steps", "3",
                ])
                .args([
                    "--boundary",
                    "constant",
                    &format!("--cval={cval}"),
                    "--verify",
                ])
                .args(extra)
                .arg(d.join("g.raw"))
                .arg("-o")
                .arg(d.join(out))
                .assert()
                .success();
            std::fs::read(d.join(out)).unwrap()
        };
        let a = run("in.raw", &[]);
        assert_eq!(
            a,
            run("out.raw", &["--gpu-memory", "12K"]),
            "{cval} streamed"
        );
        assert_eq!(
            a,
            run("chip.raw", &["--on-chip-steps", "3"]),
            "{cval} on chip"
        );
        let cells: &[f32] = bytemuck::cast_slice(&a);
        // the edges see the boundary (NaN, or inf where the sum keeps one sign)
        assert!(!cells[0].is_finite(), "{cval}: {}", cells[0]);
        assert!(
            cells[20 * 40 + 20].is_finite(),
            "{cval}: the middle is far from the edge"
        );
    }
}

/// Raw and .npy grids, 2-D and 3-D, every boundary: the result matches the CPU twin, .npy keeps
/// its shape, and a small --gpu-memory (streamed in sub-blocks) gives the same bytes as in core.
#[test]
fn stencil_on_files_in_core_and_streamed() {
    use gpusort_core::reference::stencil as reference;
    use gpusort_core::stencil::{Boundary, GridShape, Stencil};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let grid = random_f32(96 * 40, 21);
    write_f32(&d.join("g.raw"), &grid);
    for boundary in ["constant", "nearest", "reflect", "mirror", "wrap"] {
        let common = |out: &str| {
            let mut c = gpusort();
            c.args([
                "-q", "stencil", "--shape", "96x40", "--radius", "2", "--steps", "4",
            ])
            .args(["--boundary", boundary, "--cval", "-0.5", "--verify"])
            .arg(d.join("g.raw"))
            .arg("-o")
            .arg(d.join(out));
            c
        };
        common("in.raw").assert().success();
        common("out.raw")
            .args(["--gpu-memory", "20K"])
            .assert()
            .success();
        common("chip.raw")
            .args(["--on-chip-steps", "2", "--gpu-memory", "30K"])
            .assert()
            .success();
        let a = std::fs::read(d.join("in.raw")).unwrap();
        assert_eq!(a, std::fs::read(d.join("out.raw")).unwrap(), "{boundary}");
        assert_eq!(
            a,
            std::fs::read(d.join("chip.raw")).unwrap(),
            "{boundary} on chip"
        );
        let shape = GridShape::new(&[96, 40]).unwrap();
        let b: Boundary = boundary.parse().unwrap();
        let want = reference::run(&grid, shape, &Stencil::star(2, 2).unwrap(), b, -0.5, 4);
        let got: Vec<f32> = bytemuck::pod_collect_to_vec(&a);
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-5, "{boundary}: {g} vs {w}");
        }
    }
    // 3-D .npy with a weights file, output .npy of the same shape
    let g3 = random_f32(12 * 5 * 7, 22);
    write_npy(&d.join("g3.npy"), &[12, 5, 7], &g3);
    let w: Vec<f32> = (0..27).map(|i| (i as f32 - 10.0) / 40.0).collect();
    write_npy(&d.join("w.npy"), &[3, 3, 3], &w);
    gpusort()
        .args([
            "-q",
            "stencil",
            "--boundary",
            "wrap",
            "--steps",
            "3",
            "--verify",
        ])
        .arg(d.join("g3.npy"))
        .arg("--weights")
        .arg(d.join("w.npy"))
        .arg("-o")
        .arg(d.join("r3.npy"))
        .assert()
        .success();
    let (shape, got) = read_npy::<f32>(&d.join("r3.npy"));
    assert_eq!(shape, vec![12, 5, 7]);
    let wd: Vec<f64> = w.iter().map(|&x| x as f64).collect();
    let st = Stencil::from_weights(3, 1, &wd).unwrap();
    let want = reference::run(
        &g3,
        GridShape::new(&[12, 5, 7]).unwrap(),
        &st,
        Boundary::Wrap,
        0.0,
        3,
    );
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5, "{g} vs {w}");
    }
    // 2-D on chip in registers (a GPU with subgroups): 6 steps a pass give the single steps'
    // bytes; more than 8 is refused
    write_f32(&d.join("wide.raw"), &random_f32(120 * 256, 25));
    for k in ["1", "6"] {
        gpusort()
            .args(["-q", "stencil", "--shape", "120x256", "--steps", "9"])
            .args(["--boundary", "nearest", "--on-chip-steps", k])
            .arg(d.join("wide.raw"))
            .arg("-o")
            .arg(d.join(format!("wide{k}.raw")))
            .assert()
            .success();
    }
    assert_eq!(
        std::fs::read(d.join("wide1.raw")).unwrap(),
        std::fs::read(d.join("wide6.raw")).unwrap(),
        "2-D, 6 steps a pass in registers"
    );
    gpusort()
        .args(["stencil", "--shape", "120x256", "--on-chip-steps", "9"])
        .arg(d.join("wide.raw"))
        .arg("-o")
        .arg(d.join("never.raw"))
        .assert()
        .code(2);
    assert!(!d.join("never.raw").exists());
    // 3-D on chip: rows of 7 cells cannot stream (exit 2, nothing written); rows of 32 can, and
    // give the single steps' bytes: 2 and 3 steps a pass in registers (a GPU with subgroups),
    // the default (3 in registers for this radius-1 star), and under wrap through workgroup
    // memory; 5 steps a pass (beyond the 4 of 3-D grids) is refused
    let refused = gpusort()
        .args(["stencil", "--steps", "3", "--on-chip-steps", "2"])
        .arg(d.join("g3.npy"))
        .arg("-o")
        .arg(d.join("never.npy"))
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("multiple of 4") && err.lines().count() == 1,
        "{err}"
    );
    assert!(!d.join("never.npy").exists());
    write_npy(
        &d.join("g8.npy"),
        &[12, 16, 32],
        &random_f32(12 * 16 * 32, 24),
    );
    for (boundary, ks) in [
        ("mirror", &["1", "2", "3", "default"][..]),
        ("wrap", &["1", "2", "default"][..]),
    ] {
        for &k in ks {
            let mut cmd = gpusort();
            cmd.args(["-q", "stencil", "--steps", "6", "--boundary", boundary]);
            if k != "default" {
                cmd.args(["--on-chip-steps", k]);
            }
            cmd.arg(d.join("g8.npy"))
                .arg("-o")
                .arg(d.join(format!("k{k}.npy")))
                .assert()
                .success();
        }
        let one = std::fs::read(d.join("k1.npy")).unwrap();
        for k in &ks[1..] {
            assert_eq!(
                one,
                std::fs::read(d.join(format!("k{k}.npy"))).unwrap(),
                "3-D {boundary}, {k} steps a pass"
            );
        }
    }
    gpusort()
        .args(["stencil", "--on-chip-steps", "5"])
        .arg(d.join("g8.npy"))
        .arg("-o")
        .arg(d.join("never.npy"))
        .assert()
        .code(2);
}

/// --plan prints the plan and writes nothing; --time-block is obeyed.
#[test]
fn stencil_plan_prints_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_f32(&d.join("g.raw"), &random_f32(200 * 64, 23));
    let out = gpusort()
        .args([
            "stencil", "--shape", "200x64", "--radius", "1", "--steps", "9",
        ])
        .args(["--gpu-memory", "40K", "--time-block", "3", "--plan"])
        .arg(d.join("g.raw"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("out of core") && text.contains("T = 3") && text.contains("3 sweeps"),
        "{text}"
    );
    assert!(text.contains("predicted"), "{text}");
    assert_eq!(listing(d), vec![d.join("g.raw")]);
}

/// Each bad stencil input: exit code 2, one line, nothing written.
#[test]
fn stencil_bad_inputs_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_f32(&d.join("g.raw"), &random_f32(64, 24));
    write_npy(&d.join("one.npy"), &[64], &random_f32(64, 25));
    write_npy(&d.join("four.npy"), &[2, 2, 2, 8], &random_f32(64, 25));
    write_npy(&d.join("u32.npy"), &[8, 8], &random_u32(64, 26));
    write_npy(&d.join("g.npy"), &[8, 8], &random_f32(64, 27));
    write_npy(&d.join("w4.npy"), &[4, 4], &[0.0f32; 16]);
    write_npy(&d.join("w3d.npy"), &[3, 3, 3], &[0.0f32; 27]);
    write_npy(&d.join("wu.npy"), &[3, 3], &[1u32; 9]);
    write_npy(&d.join("wr.npy"), &[3, 5], &[0.0f32; 15]);
    std::fs::write(d.join("odd.raw"), [0u8; 5]).unwrap();
    std::fs::write(d.join("empty.raw"), []).unwrap();
    let before = listing(d);
    let s = |p: &str| d.join(p).to_string_lossy().into_owned();
    let st = |extra: &[&str]| {
        let mut v: Vec<String> = vec!["stencil".into()];
        v.extend(extra.iter().map(|x| x.to_string()));
        v
    };
    let g = s("g.raw");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (st(&[&g]), "--shape"),
        (st(&[&g, "--shape", "9x8"]), "has 72 cells"),
        (st(&[&g, "--shape", "64"]), "not a grid shape"),
        (st(&[&g, "--shape", "8x0x8"]), "not a grid shape"),
        (st(&[&g, "--shape", "8x8", "--radius", "9"]), "radius"),
        (st(&[&g, "--shape", "8x8", "--radius", "0"]), "radius"),
        (
            st(&[&g, "--shape", "2x32", "--radius", "3"]),
            "larger than the grid",
        ),
        (st(&[&g, "--shape", "8x8", "--steps", "0"]), "--steps"),
        (
            st(&[&g, "--shape", "8x8", "--boundary", "sideways"]),
            "sideways",
        ),
        (
            st(&[&g, "--shape", "8x8", "--gpu-memory", "0"]),
            "--gpu-memory",
        ),
        (
            st(&[&g, "--shape", "8x8", "--gpu-memory", "-5"]),
            "--gpu-memory",
        ),
        (
            st(&[&g, "--shape", "8x8", "--gpu-memory", "lots"]),
            "--gpu-memory",
        ),
        (
            st(&[&g, "--shape", "8x8", "--gpu-memory", "64"]),
            "too small",
        ),
        (
            st(&[&g, "--shape", "8x8", "--time-block", "0"]),
            "time-block",
        ),
        (
            st(&[&g, "--shape", "8x8", "--dtype", "f64"]),
            "holds 32 f64",
        ),
        (st(&[&s("odd.raw"), "--shape", "1x1"]), "not a multiple"),
        (
            st(&[&s("empty.raw"), "--shape", "8x8"]),
            "holds 0 f32 values",
        ),
        (st(&[&s("one.npy")]), "1-D"),
        (st(&[&s("four.npy")]), "4-D"),
        (st(&[&s("u32.npy")]), "f32 or f64"),
        (st(&[&s("g.npy"), "--shape", "4x16"]), "does not match"),
        (st(&[&s("g.npy"), "--weights", &s("w4.npy")]), "(2R+1)"),
        (st(&[&s("g.npy"), "--weights", &s("w3d.npy")]), "(2R+1)"),
        (st(&[&s("g.npy"), "--weights", &s("wr.npy")]), "(2R+1)"),
        (st(&[&s("g.npy"), "--weights", &s("wu.npy")]), "f32 or f64"),
        (
            st(&[&s("g.npy"), "--weights", &s("missing.npy")]),
            "cannot read",
        ),
        (st(&[&s("g.npy"), "--weights", &g]), ".npy"),
        (
            st(&[&s("g.npy"), "-o", &s("no/such/dir/out.npy")]),
            "does not exist",
        ),
        (st(&[&s("g.npy"), "-o", &s("g.npy")]), "--in-place"),
        (st(&[&s("missing.raw"), "--shape", "8x8"]), "cannot read"),
        (st(&[&s(""), "--shape", "8x8"]), "directory"),
    ];
    assert_refused(&cases);
    assert_eq!(listing(d), before, "nothing written");
}

/// `gpusort sort a b c --out-dir DIR`: small 32-bit files share merged launches, a large one and
/// a 64-bit one go one by one; every result equals the CPU's, and with segments too.
#[test]
fn many_files_sort_as_one_job() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let sizes = [0usize, 1, 31, 4096, 4097, 65536, 70_001];
    let mut inputs = Vec::new();
    for (i, &n) in sizes.iter().enumerate() {
        let p = dir.path().join(format!("k{i}.bin"));
        write_u32(&p, &random_u32(n, i as u64));
        inputs.push(p);
    }
    let f64_keys: Vec<f64> = f64_specials().into_iter().cycle().take(500).collect();
    let wide = dir.path().join("wide.npy");
    write_npy(&wide, &[f64_keys.len() as u64], &f64_keys);
    for (segment, desc) in [(None, false), (Some("1000"), true)] {
        // the raw files with their --dtype; the f64 .npy (whose header a --dtype u32 would
        // contradict) in a job of its own
        for files in [&inputs[..], std::slice::from_ref(&wide)] {
            let mut cmd = gpusort();
            cmd.args(["-q", "sort", "--verify", "--out-dir"])
                .arg(&out)
                .args(files);
            if files.len() > 1 {
                cmd.args(["--dtype", "u32"]);
            }
            if let Some(s) = segment {
                cmd.args(["--segment-size", s]);
            }
            if desc {
                cmd.arg("--descending");
            }
            cmd.assert().success();
        }
        let order = SortOrder {
            descending: desc,
            segment_size: segment.map(|s| s.parse().unwrap()),
        };
        for (i, p) in inputs.iter().enumerate() {
            let keys = read_u32(p);
            let want: Vec<u32> = match order.segment_size {
                Some(s) => keys
                    .chunks(s as usize)
                    .flat_map(|c| reference::sorted(c, order))
                    .collect(),
                None => reference::sorted(&keys, order),
            };
            assert_eq!(read_u32(&out.join(format!("k{i}.bin"))), want, "file {i}");
        }
        let (_, got) = read_npy::<f64>(&out.join("wide.npy"));
        let want = match order.segment_size {
            Some(s) => f64_keys
                .chunks(s as usize)
                .flat_map(|c| reference::sorted(c, order))
                .collect::<Vec<f64>>(),
            None => reference::sorted(&f64_keys, order),
        };
        assert_eq!(
            bytemuck::cast_slice::<f64, u64>(&got),
            bytemuck::cast_slice::<f64, u64>(&want)
        );
    }
    // --in-place over several files
    let a = dir.path().join("a.bin");
    let b = dir.path().join("b.bin");
    write_u32(&a, &[3, 1, 2]);
    write_u32(&b, &[9, 8]);
    gpusort()
        .args(["-q", "sort", "--dtype", "u32", "--in-place"])
        .arg(&a)
        .arg(&b)
        .assert()
        .success();
    assert_eq!((read_u32(&a), read_u32(&b)), (vec![1, 2, 3], vec![8, 9]));
}

#[test]
fn many_files_scan_and_compact() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let sizes = [0usize, 5, 4095, 9000, (1 << 20) + 3];
    let inputs: Vec<PathBuf> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let p = dir.path().join(format!("s{i}.bin"));
            write_u32(&p, &random_u32(n, 40 + i as u64));
            p
        })
        .collect();
    gpusort()
        .args([
            "-q",
            "scan",
            "--dtype",
            "u32",
            "--exclusive",
            "--verify",
            "--out-dir",
        ])
        .arg(&out)
        .args(&inputs)
        .assert()
        .success();
    for (i, p) in inputs.iter().enumerate() {
        let keys = read_u32(p);
        let want =
            gpusort_core::reference::scan::scan(&keys, gpusort_core::scan::ScanOp::Add, false);
        assert_eq!(read_u32(&out.join(format!("s{i}.bin"))), want, "file {i}");
    }
    let run = gpusort()
        .args([
            "-q",
            "compact",
            "--dtype",
            "u32",
            "--below",
            "1000000",
            "--out-dir",
        ])
        .arg(&out)
        .args(&inputs[..3])
        .output()
        .unwrap();
    assert!(run.status.success());
    let stdout = String::from_utf8_lossy(&run.stdout);
    for (i, p) in inputs[..3].iter().enumerate() {
        let keys = read_u32(p);
        let kept: Vec<u32> = keys.iter().copied().filter(|&k| k < 1_000_000).collect();
        assert_eq!(read_u32(&out.join(format!("s{i}.bin"))), kept);
        assert!(
            stdout.contains(&format!("{}\t{}", kept.len(), p.display())),
            "{stdout}"
        );
    }
    // partition: 32-bit files merged, the largest one by one; a float file as .npy, on its own
    let floats: Vec<f32> = f32_specials().into_iter().cycle().take(777).collect();
    let fpath = dir.path().join("f.npy");
    write_npy(&fpath, &[floats.len() as u64], &floats);
    let run = gpusort()
        .args([
            "-q",
            "partition",
            "--dtype",
            "u32",
            "--pivot",
            "7",
            "--verify",
            "--out-dir",
        ])
        .arg(&out)
        .args(&inputs)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // the .npy carries its own dtype (a --dtype u32 beside it would contradict its header)
    gpusort()
        .args(["-q", "partition", "--pivot", "7", "--verify", "--out-dir"])
        .arg(&out)
        .arg(&fpath)
        .assert()
        .success();
    for (i, p) in inputs.iter().enumerate() {
        let keys = read_u32(p);
        let split = keys.iter().filter(|&&k| k < 7).count();
        let want: Vec<u32> = keys
            .iter()
            .copied()
            .filter(|&k| k < 7)
            .chain(keys.iter().copied().filter(|&k| k >= 7))
            .collect();
        assert_eq!(read_u32(&out.join(format!("s{i}.bin"))), want, "file {i}");
        assert!(String::from_utf8_lossy(&run.stdout).contains(&format!("{split}\t{}", p.display())));
    }
    let (_, got) = read_npy::<f32>(&out.join("f.npy"));
    let (want, _, _) = gpusort_core::reference::scan::partition(
        &floats,
        None,
        &gpusort_core::scan::Predicate::Below(7.0f32),
    );
    assert_eq!(
        bytemuck::cast_slice::<f32, u32>(&got),
        bytemuck::cast_slice::<f32, u32>(&want)
    );
}

/// A bad input or a clash among many: exit 2, one line, nothing written.
#[test]
fn many_files_bad_inputs_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let good = dir.path().join("good.bin");
    write_u32(&good, &[5, 4, 3]);
    let odd = dir.path().join("odd.bin");
    std::fs::write(&odd, [1u8, 2, 3]).unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let twin = sub.join("good.bin");
    write_u32(&twin, &[1]);
    let s = |p: &Path| p.display().to_string();
    let o = s(&out);
    assert_refused(&[
        (
            vec![
                "sort".into(),
                "--dtype".into(),
                "u32".into(),
                s(&good),
                s(&twin),
            ],
            "several inputs need --out-dir",
        ),
        (
            vec![
                "sort".into(),
                "--dtype".into(),
                "u32".into(),
                "--out-dir".into(),
                o.clone(),
                s(&good),
                s(&odd),
            ],
            "not a multiple of the 4-byte size",
        ),
        (
            vec![
                "sort".into(),
                "--dtype".into(),
                "u32".into(),
                "--out-dir".into(),
                o.clone(),
                s(&good),
                s(&twin),
            ],
            "name the same file",
        ),
        (
            vec![
                "sort".into(),
                "--dtype".into(),
                "u32".into(),
                "--out-dir".into(),
                s(dir.path()),
                s(&good),
            ],
            "is the same file as the input",
        ),
        (
            vec![
                "sort".into(),
                "--dtype".into(),
                "u32".into(),
                "--out-dir".into(),
                o.clone(),
                "--argsort".into(),
                s(&dir.path().join("p.bin")),
                s(&good),
            ],
            "--argsort takes one input",
        ),
        (
            vec![
                "scan".into(),
                "--dtype".into(),
                "u32".into(),
                "--out-dir".into(),
                o.clone(),
                s(&good),
                s(&odd),
            ],
            "not a multiple of the 4-byte size",
        ),
    ]);
    assert!(listing(&out).is_empty(), "{:?}", listing(&out));
    assert_eq!(read_u32(&good), vec![5, 4, 3]);
}

#[test]
fn bench_sched_suite_reports_merged_and_baselines() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("sched.json");
    let out = gpusort()
        .args([
            "-q", "bench", "--suite", "sched", "--tasks", "12", "--sizes", "8,13", "--reps", "1",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let cases = v["cases"].as_array().unwrap();
    for name in [
        "12 sorts: merged launch",
        "12 sorts: safe mode",
        "12 sorts: one dispatch chain per task",
        "12 sorts: segmented sort (equal sizes only)",
        "12 sort→scan pairs: merged launch",
        "12 sort→scan pairs: one dispatch chain per task",
        "2 chains of 10 sorts: merged launch",
        "2 chains of 10 sorts: safe mode",
    ] {
        let hits: Vec<_> = cases.iter().filter(|c| c["case"] == name).collect();
        assert!(!hits.is_empty(), "{name} missing");
        for c in hits {
            assert!(c["stats"]["median_s"].as_f64().unwrap() > 0.0, "{c}");
            assert!(c["dispatches"].as_u64().unwrap() >= 1, "{c}");
        }
    }
}

/// The plain sort (no payload, permutation or --verify) uploads from the input's map and writes
/// on all cores: the same results, raw and .npy, in place too.
#[test]
fn plain_sorts_upload_from_the_mapped_input() {
    let dir = tempfile::tempdir().unwrap();
    let keys = random_u32(300_007, 9);
    let raw = dir.path().join("k.bin");
    write_u32(&raw, &keys);
    let out = dir.path().join("k.out.bin");
    gpusort()
        .args(["-q", "sort", "--dtype", "u32", "--descending"])
        .arg(&raw)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let desc = SortOrder {
        descending: true,
        segment_size: None,
    };
    assert_eq!(read_u32(&out), reference::sorted(&keys, desc));
    let floats: Vec<f64> = f64_specials().into_iter().cycle().take(10_001).collect();
    let npy = dir.path().join("f.npy");
    write_npy(&npy, &[floats.len() as u64], &floats);
    gpusort()
        .args(["-q", "sort", "--in-place"])
        .arg(&npy)
        .assert()
        .success();
    let (shape, got) = read_npy::<f64>(&npy);
    assert_eq!(shape, vec![floats.len() as u64]);
    let want = reference::sorted(&floats, SortOrder::default());
    assert_eq!(
        bytemuck::cast_slice::<f64, u64>(&got),
        bytemuck::cast_slice::<f64, u64>(&want)
    );
    assert_eq!(listing(dir.path()).len(), 3, "no temporary files left");
}

/// `--devices 0,0` and `0,0,0` (two and three devices on the one adapter CI has) give the bytes
/// one device gives, for every command, at sizes that split unevenly; bad values are refused.
#[test]
fn several_devices_give_one_devices_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut r = rng(41);
    let n = 70_001usize;
    let f: Vec<f32> = (0..n)
        .map(|i| match i % 501 {
            0 => f32::NAN,
            1 => -0.0,
            2 => f32::NEG_INFINITY,
            _ => r.random_range(-1e3..1e3),
        })
        .collect();
    write_npy(&d.join("f32.npy"), &[n as u64], &f);
    let small: Vec<i64> = (0..n).map(|_| r.random_range(-1000..1000)).collect();
    write_npy(&d.join("i64.npy"), &[n as u64], &small);
    let u: Vec<u64> = (0..n).map(|_| r.random()).collect();
    write_npy(&d.join("u64.npy"), &[n as u64], &u);
    let i: Vec<i32> = (0..n).map(|_| r.random_range(-50..50)).collect();
    write_npy(&d.join("i32.npy"), &[n as u64], &i);
    let g: Vec<f64> = (0..n).map(|_| r.random_range(-1.0..1.0)).collect();
    write_npy(&d.join("f64.npy"), &[n as u64], &g);
    write_u32(&d.join("u32.bin"), &random_u32(n, 42));
    write_u32(&d.join("vals.bin"), &random_u32(n, 43));
    let grid: Vec<f32> = (0..301 * 64).map(|i| ((i * 7919) % 1013) as f32).collect();
    write_npy(&d.join("grid.npy"), &[301, 64], &grid);
    let cube: Vec<f32> = (0..50 * 6 * 8).map(|i| ((i * 31) % 101) as f32).collect();
    write_npy(&d.join("cube.npy"), &[50, 6, 8], &cube);
    let run = |args: &[&str], devices: Option<&str>| {
        let mut c = gpusort();
        c.current_dir(d).arg("-q");
        if let Some(x) = devices {
            // inputs this small fit one GPU sort: spread them anyway, to test the split
            c.args(["--devices", x, "--spread-always"]);
        }
        c.args(args).assert().success();
    };
    // (command, outputs it writes)
    let mut jobs: Vec<(Vec<String>, Vec<&str>)> = Vec::new();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    for t in ["f32", "i64", "u64", "i32", "f64"] {
        let input = format!("{t}.npy");
        jobs.push((
            s(&[
                "sort",
                &input,
                "-o",
                "OUT.npy",
                "--argsort",
                "PERM.npy",
                "--verify",
            ]),
            vec!["OUT.npy", "PERM.npy"],
        ));
        jobs.push((
            s(&[
                "sort",
                &input,
                "-o",
                "OUT.npy",
                "--descending",
                "--segment-size",
                "1000",
            ]),
            vec!["OUT.npy"],
        ));
        jobs.push((
            s(&[
                "compact", &input, "--below", "0", "-o", "OUT.npy", "--verify",
            ]),
            vec!["OUT.npy"],
        ));
        jobs.push((
            s(&[
                "partition",
                &input,
                "--pivot",
                "0",
                "-o",
                "OUT.npy",
                "--verify",
            ]),
            vec!["OUT.npy"],
        ));
        if t != "f32" && t != "f64" {
            jobs.push((
                s(&["scan", &input, "--op", "max", "-o", "OUT.npy", "--verify"]),
                vec!["OUT.npy"],
            ));
            jobs.push((
                s(&["scan", &input, "--exclusive", "-o", "OUT.npy"]),
                vec!["OUT.npy"],
            ));
        }
    }
    jobs.push((
        s(&[
            "sort",
            "u32.bin",
            "--dtype",
            "u32",
            "--values",
            "vals.bin",
            "--values-out",
            "V.bin",
            "-o",
            "OUT.bin",
        ]),
        vec!["OUT.bin", "V.bin"],
    ));
    jobs.push((
        s(&[
            "sort",
            "u32.bin",
            "--dtype",
            "u32",
            "--key-bits",
            "4..12",
            "--argsort",
            "PERM.npy",
            "-o",
            "OUT.bin",
        ]),
        vec!["OUT.bin", "PERM.npy"],
    ));
    jobs.push((
        s(&[
            "sort",
            "u32.bin",
            "--dtype",
            "u32",
            "--memory-budget",
            "200K",
            "--argsort",
            "PERM.npy",
            "-o",
            "OUT.bin",
        ]),
        vec!["OUT.bin", "PERM.npy"],
    ));
    jobs.push((
        s(&[
            "partition",
            "u32.bin",
            "--dtype",
            "u32",
            "--pivot",
            "2147483648",
            "--values",
            "vals.bin",
            "--values-out",
            "V.bin",
            "-o",
            "OUT.bin",
        ]),
        vec!["OUT.bin", "V.bin"],
    ));
    for boundary in ["reflect", "wrap"] {
        jobs.push((
            s(&[
                "stencil",
                "grid.npy",
                "--radius",
                "1",
                "--steps",
                "13",
                "--boundary",
                boundary,
                "-o",
                "OUT.npy",
                "--verify",
            ]),
            vec!["OUT.npy"],
        ));
        jobs.push((
            s(&[
                "stencil",
                "cube.npy",
                "--radius",
                "2",
                "--steps",
                "4",
                "--boundary",
                boundary,
                "-o",
                "OUT.npy",
            ]),
            vec!["OUT.npy"],
        ));
    }
    // two jobs at a time (each job's outputs have names of their own): each run is a process
    // mostly on one core, and this test was the longest of its binary
    let jobs: Vec<_> = jobs.iter().enumerate().collect();
    let check = |&(k, (args, outs)): &(usize, &(Vec<String>, Vec<&str>))| {
        let named = |tag: &str| -> Vec<String> {
            args.iter()
                .map(|a| match outs.iter().find(|o| *o == a) {
                    Some(o) => format!("{tag}{k}-{o}"),
                    None => a.clone(),
                })
                .collect()
        };
        let one = named("one");
        run(&one.iter().map(String::as_str).collect::<Vec<_>>(), None);
        for devices in ["0,0", "0,0,0"] {
            let tag = format!("d{}-", devices.len());
            let many = named(&tag);
            run(
                &many.iter().map(String::as_str).collect::<Vec<_>>(),
                Some(devices),
            );
            for o in outs {
                let (a, b) = (
                    d.join(format!("one{k}-{o}")),
                    d.join(format!("{tag}{k}-{o}")),
                );
                assert_eq!(
                    std::fs::read(&a).unwrap(),
                    std::fs::read(&b).unwrap(),
                    "{args:?} --devices {devices}: {o}"
                );
            }
        }
    };
    std::thread::scope(|scope| {
        let (first, second) = jobs.split_at(jobs.len() / 2);
        let other = scope.spawn(|| first.iter().for_each(check));
        second.iter().for_each(check);
        other.join().unwrap();
    });
    // a pipe in, a pipe out
    let keys = std::fs::read(d.join("u32.bin")).unwrap();
    let piped = gpusort()
        .args([
            "-q",
            "--devices",
            "0,0",
            "sort",
            "-",
            "--dtype",
            "u32",
            "-o",
            "-",
        ])
        .write_stdin(keys)
        .output()
        .unwrap();
    assert!(piped.status.success());
    let mut want = random_u32(n, 42);
    want.sort_unstable();
    assert_eq!(piped.stdout, bytemuck::cast_slice::<u32, u8>(&want));
    // many files, spread over the devices
    let (src, a, b) = (d.join("parts"), d.join("sorted-one"), d.join("sorted-two"));
    std::fs::create_dir_all(&src).unwrap();
    for p in 0..5 {
        write_u32(
            &src.join(format!("p{p}.bin")),
            &random_u32(1000 + 7919 * p, 50 + p as u64),
        );
    }
    let parts: Vec<String> = (0..5).map(|p| format!("parts/p{p}.bin")).collect();
    let mut many = vec!["sort", "--dtype", "u32", "--algorithm", "radix"];
    many.extend(parts.iter().map(String::as_str));
    run(&[&many[..], &["--out-dir", "sorted-one"]].concat(), None);
    run(
        &[&many[..], &["--out-dir", "sorted-two"]].concat(),
        Some("0,0"),
    );
    for p in 0..5 {
        let name = format!("p{p}.bin");
        assert_eq!(
            std::fs::read(a.join(&name)).unwrap(),
            std::fs::read(b.join(&name)).unwrap()
        );
    }
    // many files scanned one by one (64-bit ones), dealt out to the devices
    let mut wide = vec!["scan".to_string(), "--op".into(), "max".into()];
    for p in 0..4u64 {
        let v: Vec<i64> = (0..(3000 + 5000 * p) as i64)
            .map(|i| (i * 7919 + p as i64) % 100_003 - 50_000)
            .collect();
        let name = format!("w{p}.npy");
        write_npy(&d.join(&name), &[v.len() as u64], &v);
        wide.push(name);
    }
    let wide: Vec<&str> = wide.iter().map(String::as_str).collect();
    run(&[&wide[..], &["--out-dir", "scanned-one"]].concat(), None);
    run(
        &[&wide[..], &["--out-dir", "scanned-two"]].concat(),
        Some("0,0"),
    );
    for p in 0..4 {
        let name = format!("w{p}.npy");
        assert_eq!(
            std::fs::read(d.join("scanned-one").join(&name)).unwrap(),
            std::fs::read(d.join("scanned-two").join(&name)).unwrap(),
            "{name}"
        );
    }
    // bad values: one line, exit code 2, nothing written
    let arg = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let out = d.join("never.bin").to_string_lossy().to_string();
    let input = d.join("u32.bin").to_string_lossy().to_string();
    assert_refused(&[
        (
            arg(&[
                "--devices",
                "0",
                "sort",
                &input,
                "--dtype",
                "u32",
                "-o",
                &out,
            ]),
            "--devices",
        ),
        (
            arg(&[
                "--devices",
                ",",
                "sort",
                &input,
                "--dtype",
                "u32",
                "-o",
                &out,
            ]),
            "--devices",
        ),
        (
            arg(&[
                "--devices",
                "99",
                "sort",
                &input,
                "--dtype",
                "u32",
                "-o",
                &out,
            ]),
            "--devices",
        ),
        (
            arg(&[
                "--devices",
                "0,0",
                "--adapter",
                "0",
                "sort",
                &input,
                "--dtype",
                "u32",
                "-o",
                &out,
            ]),
            "--adapter",
        ),
        (
            arg(&[
                "--devices",
                "0,nosuchgpu",
                "sort",
                &input,
                "--dtype",
                "u32",
                "-o",
                &out,
            ]),
            "nosuchgpu",
        ),
        (
            arg(&[
                "--devices",
                "0,0",
                "--backend",
                "cpu",
                "sort",
                &input,
                "--dtype",
                "u32",
                "-o",
                &out,
            ]),
            "--backend cpu",
        ),
    ]);
    assert!(!d.join("never.bin").exists());
    // info says which devices a job would use
    let info = gpusort()
        .args(["--devices", "0,0", "info"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&info.stdout);
    assert!(
        text.contains("devices: [0]") && text.contains("2 devices"),
        "{text}"
    );
}
