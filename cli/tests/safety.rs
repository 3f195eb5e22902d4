//! Safe with data, through the CLI as people use it (docs/RELIABILITY.md lists each promise with
//! its test here): several outputs land together or not at all; no output may be an input or
//! another output; standard input and output, pipes, FIFOs and devices; symbolic links; inputs
//! that change under a running job; leftovers of killed runs; values a dtype cannot hold; the
//! output format; environment switches that must not change a result.

use std::path::{Path, PathBuf};
use std::process::Stdio;

mod common;
use common::*;

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn sorted(keys: &[u32]) -> Vec<u32> {
    let mut v = keys.to_vec();
    v.sort_unstable();
    v
}

/// Every file in `dir` with its bytes, to show a refused or failed run changed nothing.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    listing(dir)
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

/// One line on stderr, starting `gpusort: `.
fn one_line(err: &[u8]) -> String {
    let err = String::from_utf8_lossy(err).into_owned();
    assert!(err.starts_with("gpusort: "), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    err
}

/// Run `gpusort ARGS` under bash with a file-size limit of `kib` KiB (bash's unit), in `dir`.
#[cfg(unix)]
fn with_file_limit(dir: &Path, kib: u32, args: &str) -> std::process::Output {
    std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "ulimit -f {kib} && exec '{}' -q {args}",
            assert_cmd::cargo::cargo_bin("gpusort").display()
        ))
        .current_dir(dir)
        .output()
        .unwrap()
}

/// The second output of a job fails (a file-size limit, as a full disk would, or a folder that
/// cannot be written): the first output, written fine, is not put in place either — the input
/// replaced in place, or an existing `-o` file, keeps its bytes, the message says nothing was
/// written, and no temporary file is left.
#[cfg(unix)]
#[test]
fn several_outputs_land_together_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 16384 keys: 64 KiB of raw keys fit the limit; a .npy of the values (64 KiB + header) does not
    let keys = random_u32(16384, 1);
    write_u32(&d.join("k.bin"), &keys);
    write_u32(&d.join("v.bin"), &(0..16384).collect::<Vec<u32>>());
    write_u32(&d.join("existing.bin"), &[7, 8, 9]);
    let before = snapshot(d);
    for args in [
        "sort k.bin --dtype u32 --in-place --values v.bin --values-out vo.npy",
        "sort k.bin --dtype u32 --in-place --argsort perm.npy",
        "sort k.bin --dtype u32 -o existing.bin --argsort perm.npy",
        "sort k.bin --dtype u32 -o existing.bin --values v.bin --values-out vo.npy --memory-budget 64K",
        "partition k.bin --dtype u32 --pivot 100 -o existing.bin --values v.bin --values-out vo.npy",
    ] {
        let out = with_file_limit(d, 64, args);
        let err = one_line(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args}: {err}");
        assert!(
            err.contains("cannot write") && err.contains("no output was written"),
            "{args}: {err}"
        );
        assert_eq!(snapshot(d), before, "{args}: nothing changed");
    }
    // a second output in a folder no one can write to (not even root): refused before any work
    let out = gpusort()
        .current_dir(d)
        .args(["sort", "k.bin", "--dtype", "u32", "--in-place"])
        .args(["--values", "v.bin", "--values-out", "/proc/v.out"])
        .output()
        .unwrap();
    let err = one_line(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("/proc/v.out"), "{err}");
    assert_eq!(snapshot(d), before);
}

/// Ctrl-C while the finished outputs of a job wait for the final step: the keys replaced in
/// place and the values both stay as they were, and the message says so; then a run that is not
/// interrupted writes both.
#[cfg(unix)]
#[test]
fn an_interrupt_before_the_final_step_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let keys = random_u32(5000, 2);
    write_u32(&d.join("k.bin"), &keys);
    write_u32(&d.join("v.bin"), &(0..5000).collect::<Vec<u32>>());
    let before = snapshot(d);
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("gpusort"))
        .current_dir(d)
        .args(["sort", "k.bin", "--dtype", "u32", "--in-place"])
        .args(["--values", "v.bin", "--values-out", "vo.bin"])
        .env("GPUSORT_TEST_STALL_BEFORE_RENAME_MS", "20000")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_temp_files(d, 2);
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(
        err.trim_end()
            .ends_with("interrupted; no output was written"),
        "{err}"
    );
    assert_eq!(snapshot(d), before);
    gpusort()
        .current_dir(d)
        .args(["-q", "sort", "k.bin", "--dtype", "u32", "--in-place"])
        .args(["--values", "v.bin", "--values-out", "vo.bin"])
        .assert()
        .success();
    assert_eq!(read_u32(&d.join("k.bin")), sorted(&keys));
    let vals = read_u32(&d.join("vo.bin"));
    assert!(vals
        .iter()
        .zip(read_u32(&d.join("k.bin")))
        .all(|(&i, k)| keys[i as usize] == k));
}

/// Many files sorted in place and interrupted before the final step: every input keeps its
/// bytes (not 9 of 12 replaced), and the message says no output was written.
#[cfg(unix)]
#[test]
fn many_files_in_place_are_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut args: Vec<String> = vec![
        "sort".into(),
        "--dtype".into(),
        "u32".into(),
        "--in-place".into(),
    ];
    for i in 0..12 {
        let p = d.join(format!("part{i:02}.bin"));
        write_u32(&p, &random_u32(300 + i * 50, 10 + i as u64));
        args.push(s(&p));
    }
    let before = snapshot(d);
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("gpusort"))
        .args(&args)
        .env("GPUSORT_TEST_STALL_BEFORE_RENAME_MS", "20000")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_temp_files(d, 12);
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted; no output was written"), "{err}");
    assert_eq!(snapshot(d), before, "every input as it was");
}

/// Every output is checked against every input (keys, values, weights) and every other output
/// by file identity — other spellings and links included — before any work: exit 2, one line,
/// nothing written.
#[test]
fn outputs_that_are_inputs_or_each_other_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_u32(&d.join("in.bin"), &random_u32(100, 3));
    write_u32(&d.join("vals.bin"), &(0..100).collect::<Vec<u32>>());
    write_npy(&d.join("g.npy"), &[8, 8], &random_f32(64, 4));
    write_npy(
        &d.join("w.npy"),
        &[3, 3],
        &[0.0f32, 0.1, 0.0, 0.1, 0.6, 0.1, 0.0, 0.1, 0.0],
    );
    #[cfg(unix)]
    std::os::unix::fs::symlink("in.bin", d.join("alias.bin")).unwrap();
    let before = snapshot(d);
    let mut cases: Vec<(&str, &str)> = vec![
        ("sort in.bin --dtype u32 -o vals.bin --values vals.bin --values-out vo.bin", "same file as the input --values vals.bin"),
        ("sort in.bin --dtype u32 -o o.bin --values vals.bin --values-out o2.bin --argsort vals.bin", "--argsort vals.bin is the same file"),
        ("sort in.bin --dtype u32 -o same.bin --values vals.bin --values-out same.bin", "name the same file"),
        ("sort in.bin --dtype u32 -o same.bin --values vals.bin --values-out ./same.bin", "name the same file"),
        ("sort in.bin --dtype u32 -o k2.bin --argsort k2.bin", "name the same file"),
        ("sort in.bin --dtype u32 -o ./in.bin", "pass --in-place"),
        ("sort in.bin --dtype u32 --in-place --values vals.bin --values-out in.bin", "same file as the input"),
        ("partition in.bin --dtype u32 --pivot 5 -o p.bin --values vals.bin --values-out p.bin", "name the same file"),
        ("partition in.bin --dtype u32 --pivot 5 -o vals.bin --values vals.bin --values-out vo.bin", "same file as the input"),
        ("compact in.bin --dtype u32 --nonzero -o c.bin --values vals.bin --values-out in.bin", "same file as the input"),
        ("scan in.bin --dtype u32 -o in.bin", "same file as the input"),
        ("stencil g.npy --weights w.npy -o w.npy", "same file as the input --weights w.npy"),
        ("stencil g.npy -o ./g.npy", "same file as the input"),
        ("sort in.bin vals.bin --dtype u32 --out-dir .", "same file as the input"),
        ("sort in.bin --dtype u32 -o - --argsort -", "both write to standard output"),
    ];
    #[cfg(unix)]
    cases.extend([
        (
            "sort in.bin --dtype u32 -o alias.bin",
            "same file as the input",
        ),
        (
            "sort alias.bin --dtype u32 -o o.bin --values vals.bin --values-out in.bin",
            "same file as the input",
        ),
    ]);
    for (args, needle) in cases {
        let out = gpusort()
            .current_dir(d)
            .args(args.split(' '))
            .output()
            .unwrap();
        let err = one_line(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args}: {err}");
        assert!(err.contains(needle), "{args}: {err}");
        assert_eq!(snapshot(d), before, "{args}: nothing written");
    }
    // standard output redirected to an input
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("gpusort"))
        .current_dir(d)
        .args(["sort", "in.bin", "--dtype", "u32", "-o", "-"])
        .stdout(
            std::fs::OpenOptions::new()
                .append(true)
                .open(d.join("in.bin"))
                .unwrap(),
        )
        .output()
        .unwrap();
    let err = one_line(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("standard output is redirected to"), "{err}");
    assert_eq!(snapshot(d), before);
}

/// `-` is standard input for every command and standard output for `-o -`; a stream input with
/// no `-o` goes to standard output. Raw and .npy, through pipes, the same bytes as from files.
#[test]
fn standard_input_and_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let keys = random_u32(10_000, 5);
    write_u32(&d.join("k.bin"), &keys);
    write_npy(&d.join("k.npy"), &[10_000], &keys);
    write_npy(&d.join("g.npy"), &[40, 30], &random_f32(1200, 6));
    let raw = std::fs::read(d.join("k.bin")).unwrap();
    let npy = std::fs::read(d.join("k.npy")).unwrap();
    let grid = std::fs::read(d.join("g.npy")).unwrap();
    let from_file = |args: &[&str], input: &str| {
        // the same extension, so that the result keeps the input's format
        let ext = Path::new(input)
            .extension()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let out = d.join(format!("expected.{ext}"));
        gpusort()
            .current_dir(d)
            .arg("-q")
            .args(args)
            .arg(input)
            .arg("-o")
            .arg(&out)
            .assert()
            .success();
        std::fs::read(out).unwrap()
    };
    let piped = |args: &[&str], stdin: &[u8], o: bool| {
        let mut c = gpusort();
        c.current_dir(d).arg("-q").args(args).arg("-");
        if o {
            c.args(["-o", "-"]);
        }
        let out = c.write_stdin(stdin.to_vec()).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    let commands: [(&[&str], &[u8], &str); 8] = [
        (&["sort", "--dtype", "u32"], &raw, "k.bin"),
        (&["sort"], &npy, "k.npy"),
        (&["sort", "--descending"], &npy, "k.npy"),
        (&["scan", "--dtype", "u32"], &raw, "k.bin"),
        (&["scan"], &npy, "k.npy"),
        (&["partition", "--pivot", "2000000000"], &npy, "k.npy"),
        (&["compact", "--below", "1000000000"], &npy, "k.npy"),
        (
            &["stencil", "--radius", "2", "--steps", "3"],
            &grid,
            "g.npy",
        ),
    ];
    for (args, stdin, file) in commands {
        let want = from_file(args, file);
        assert!(piped(args, stdin, true).stdout == want, "{args:?} -o -");
        assert!(
            piped(args, stdin, false).stdout == want,
            "{args:?}, default output"
        );
    }
    // partition's split index goes to stderr when the result takes stdout
    let out = piped(&["partition", "--pivot", "2000000000"], &npy, true);
    let split = keys.iter().filter(|&&k| k < 2_000_000_000).count();
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        split.to_string()
    );
    // raw grid on stdin with its shape
    let raw_grid = bytemuck::cast_slice::<f32, u8>(&read_npy::<f32>(&d.join("g.npy")).1).to_vec();
    std::fs::write(d.join("g.raw"), &raw_grid).unwrap();
    let want = from_file(&["stencil", "--shape", "40x30"], "g.raw");
    assert!(piped(&["stencil", "--shape", "40x30"], &raw_grid, true).stdout == want);
    // an empty stream is an empty array; standard input is refused where a file is needed
    assert!(piped(&["sort", "--dtype", "u32"], &[], true)
        .stdout
        .is_empty());
    for (args, needle) in [
        (
            "sort - --dtype u32 --in-place",
            "--in-place needs a regular file",
        ),
        (
            "sort k.bin - --dtype u32 --out-dir .",
            "standard input (-) is one input",
        ),
        (
            "sort - --dtype u32 -o - --argsort -",
            "both write to standard output",
        ),
    ] {
        let before = snapshot(d);
        let out = gpusort()
            .current_dir(d)
            .args(args.split(' '))
            .write_stdin(raw.clone())
            .output()
            .unwrap();
        let err = one_line(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args}: {err}");
        assert!(err.contains(needle), "{args}: {err}");
        assert_eq!(snapshot(d), before, "{args}");
    }
}

/// A stream larger than the memory budget spills to a temporary file and sorts externally,
/// with the same result.
#[test]
fn a_stream_beyond_the_memory_budget_sorts_externally() {
    let keys = random_u32(100_000, 7);
    let out = gpusort()
        .args([
            "-q",
            "sort",
            "-",
            "--dtype",
            "u32",
            "-o",
            "-",
            "--memory-budget",
            "128K",
        ])
        .write_stdin(bytemuck::cast_slice::<u32, u8>(&keys).to_vec())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        bytemuck::pod_collect_to_vec::<u8, u32>(&out.stdout),
        sorted(&keys)
    );
}

/// Pipes and FIFOs are read to their end (not taken as empty); `/proc` files, whose size reads
/// 0, are read too; character devices, sockets and directories are refused; a FIFO or a
/// character device as output is written to, never replaced.
#[cfg(unix)]
#[test]
fn pipes_fifos_and_devices() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let keys = random_u32(20_000, 8);
    let bytes = bytemuck::cast_slice::<u32, u8>(&keys).to_vec();
    // a FIFO as input and another as output
    let fifo_in = d.join("in.fifo");
    let fifo_out = d.join("out.fifo");
    for f in [&fifo_in, &fifo_out] {
        let c = std::ffi::CString::new(s(f)).unwrap();
        // SAFETY: mkfifo on a path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }
    let writer = {
        let (p, b) = (fifo_in.clone(), bytes.clone());
        std::thread::spawn(move || std::fs::write(p, b).unwrap())
    };
    let reader = {
        let p = fifo_out.clone();
        std::thread::spawn(move || std::fs::read(p).unwrap())
    };
    gpusort()
        .args(["-q", "sort", "--dtype", "u32"])
        .arg(&fifo_in)
        .arg("-o")
        .arg(&fifo_out)
        .assert()
        .success();
    writer.join().unwrap();
    let got = reader.join().unwrap();
    assert_eq!(bytemuck::pod_collect_to_vec::<u8, u32>(&got), sorted(&keys));
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::metadata(&fifo_out).unwrap().file_type().is_fifo(),
        "the FIFO stays"
    );
    // process substitution's /dev/fd paths are pipes too
    std::fs::write(d.join("k.bin"), &bytes).unwrap();
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "'{}' -q scan --dtype u32 <(cat '{}') -o -",
            assert_cmd::cargo::cargo_bin("gpusort").display(),
            s(&d.join("k.bin"))
        ))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want: Vec<u32> = keys
        .iter()
        .scan(0u32, |acc, &k| {
            *acc = acc.wrapping_add(k);
            Some(*acc)
        })
        .collect();
    assert_eq!(bytemuck::pod_collect_to_vec::<u8, u32>(&out.stdout), want);
    // /dev/null as output: written to, still a character device
    gpusort()
        .args(["-q", "sort", "--dtype", "u32"])
        .arg(d.join("k.bin"))
        .args(["-o", "/dev/null"])
        .assert()
        .success();
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    // a /proc file reports size 0 but holds bytes: read, not taken as empty ("Linux\n" is 6
    // bytes, not a multiple of 4)
    let out = gpusort()
        .args(["sort", "--dtype", "u32", "/proc/sys/kernel/ostype", "-o"])
        .arg(d.join("o.bin"))
        .output()
        .unwrap();
    let err = one_line(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("has 6 bytes"), "{err}");
    // what cannot be read as a stream of elements
    let before = snapshot(d);
    for (input, needle) in [
        ("/dev/zero", "a character device"),
        ("/dev/null", "a character device"),
        (".", "a directory"),
    ] {
        let out = gpusort()
            .current_dir(d)
            .args(["sort", "--dtype", "u32", input, "-o", "o.bin"])
            .output()
            .unwrap();
        let err = one_line(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{input}: {err}");
        assert!(err.contains(needle), "{input}: {err}");
    }
    assert_eq!(snapshot(d), before);
}

/// Writing through a symbolic link puts the result in the link's target and keeps the link:
/// `-o link`, `--in-place link`, a link to a file that does not exist yet.
#[cfg(unix)]
#[test]
fn links_are_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("real")).unwrap();
    let keys = random_u32(3000, 9);
    write_u32(&d.join("real/k.bin"), &keys);
    write_u32(&d.join("real/old.bin"), &[1, 2, 3]);
    std::os::unix::fs::symlink("real/k.bin", d.join("k.link")).unwrap();
    std::os::unix::fs::symlink("real/old.bin", d.join("out.link")).unwrap();
    std::os::unix::fs::symlink("real/new.bin", d.join("new.link")).unwrap();
    let run = |args: &[&str]| {
        gpusort()
            .current_dir(d)
            .arg("-q")
            .args(args)
            .assert()
            .success();
    };
    run(&["sort", "--dtype", "u32", "real/k.bin", "-o", "out.link"]);
    run(&["sort", "--dtype", "u32", "real/k.bin", "-o", "new.link"]);
    for link in ["out.link", "new.link"] {
        assert!(
            std::fs::symlink_metadata(d.join(link))
                .unwrap()
                .file_type()
                .is_symlink(),
            "{link} stays a link"
        );
        assert_eq!(read_u32(&d.join(link)), sorted(&keys), "{link}");
    }
    assert_eq!(read_u32(&d.join("real/old.bin")), sorted(&keys));
    assert_eq!(read_u32(&d.join("real/new.bin")), sorted(&keys));
    run(&["sort", "--dtype", "u32", "k.link", "--in-place"]);
    assert!(std::fs::symlink_metadata(d.join("k.link"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        read_u32(&d.join("real/k.bin")),
        sorted(&keys),
        "the target is sorted"
    );
    assert!(temp_files(d).is_empty() && temp_files(&d.join("real")).is_empty());
}

/// An input truncated or rewritten by another process while a job reads it: one line, exit 1,
/// no output and no temporary file — for the mapped commands (scan, partition, stencil, sort).
#[cfg(unix)]
#[test]
fn inputs_that_change_during_the_run_fail_cleanly() {
    let cases: [(&str, &str); 5] = [
        ("scan --dtype u32", "truncate"),
        ("partition --dtype u32 --pivot 100", "truncate"),
        ("stencil --shape 400x250", "truncate"),
        ("scan --dtype u32", "rewrite"),
        ("sort --dtype u32 --algorithm bitonic", "rewrite"),
    ];
    for (command, change) in cases {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let input = d.join("in.bin");
        write_u32(&input, &random_u32(100_000, 12));
        let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("gpusort"))
            .current_dir(d)
            .arg("-q")
            .args(command.split(' '))
            .args(["in.bin", "-o", "out.bin"])
            .env("GPUSORT_TEST_STALL_AFTER_OPEN_MS", "3000")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1000));
        match change {
            "truncate" => {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&input)
                    .unwrap()
                    .set_len(1000)
                    .unwrap();
            }
            _ => {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&input)
                    .unwrap();
                f.write_all(&[9, 9, 9, 9]).unwrap();
            }
        }
        let out = child.wait_with_output().unwrap();
        let err = one_line(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command} ({change}): {err}");
        assert!(err.contains("no output was written"), "{command}: {err}");
        assert_eq!(
            listing(d),
            vec![input.clone()],
            "{command} ({change}): nothing left"
        );
    }
}

/// A run killed with SIGKILL leaves its temporary file, named after its host and process; the
/// next run that writes to the same folder removes it, and leaves alone what a live process, an
/// older gpusort or another host left.
#[cfg(unix)]
#[test]
fn leftovers_of_killed_runs_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_u32(&d.join("k.bin"), &random_u32(2000, 13));
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("gpusort"))
        .current_dir(d)
        .args(["-q", "sort", "k.bin", "--dtype", "u32", "-o", "out.bin"])
        .env("GPUSORT_TEST_STALL_BEFORE_RENAME_MS", "20000")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_temp_files(d, 1);
    child.kill().unwrap(); // SIGKILL: nothing can clean up
    child.wait().unwrap();
    let left = temp_files(d);
    assert_eq!(left.len(), 1, "{left:?}");
    let name = left[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.contains(&format!("-{}-", child.id())),
        "named after its process: {name}"
    );
    let keep = [
        ".gpusort-OLDSTYLE.tmp".to_string(),
        ".gpusort-otherhost-999999999-abc123.tmp".to_string(),
        // this test process is alive
        name.replace(
            &format!("-{}-", child.id()),
            &format!("-{}-", std::process::id()),
        ),
    ];
    for k in &keep {
        std::fs::write(d.join(k), b"x").unwrap();
    }
    let dead_runs = name
        .replace(".gpusort-", ".gpusort-runs-")
        .trim_end_matches(".tmp")
        .to_string();
    std::fs::create_dir(d.join(&dead_runs)).unwrap();
    std::fs::write(d.join(&dead_runs).join("run0"), b"x").unwrap();
    gpusort()
        .current_dir(d)
        .args(["-q", "sort", "k.bin", "--dtype", "u32", "-o", "out.bin"])
        .assert()
        .success();
    let mut want: Vec<PathBuf> = keep.iter().map(|k| d.join(k)).collect();
    want.extend([d.join("k.bin"), d.join("out.bin")]);
    want.sort();
    assert_eq!(listing(d), want);
}

/// Numbers a dtype cannot hold are refused with its range (exit 2), not rounded to ±inf or 0;
/// exact values, ±inf among them, are accepted.
#[test]
fn values_that_do_not_fit_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let x = random_f32(1000, 14);
    write_f32(&d.join("x.bin"), &x);
    write_f32(&d.join("g.bin"), &random_f32(64, 15));
    let before = snapshot(d);
    for (args, needle) in [
        (
            "stencil g.bin --shape 8x8 --boundary constant --cval 1e39",
            "not a valid f32",
        ),
        (
            "stencil g.bin --shape 8x8 --boundary constant --cval -1e39",
            "not a valid f32",
        ),
        (
            "partition x.bin --dtype f32 --pivot -1e40",
            "not a valid f32",
        ),
        (
            "partition x.bin --dtype f32 --pivot 1e-50",
            "not a valid f32",
        ),
        (
            "compact x.bin --dtype f32 --at-least 1e40",
            "not a valid f32",
        ),
        ("compact x.bin --dtype f32 --below 1e40", "not a valid f32"),
        (
            "partition x.bin --dtype f64 --pivot 1e400",
            "not a valid f64",
        ),
    ] {
        let out = gpusort()
            .current_dir(d)
            .args(args.split(' '))
            .output()
            .unwrap();
        let err = one_line(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args}: {err}");
        assert!(err.contains(needle), "{args}: {err}");
        if needle.contains("f32") {
            assert!(err.contains("3.4028235e38"), "the range is named: {err}");
        }
        assert_eq!(snapshot(d), before, "{args}");
    }
    // exact values are fine: inf keeps every finite element before it
    let out = gpusort()
        .current_dir(d)
        .args([
            "partition",
            "x.bin",
            "--dtype",
            "f32",
            "--pivot",
            "inf",
            "-o",
            "p.bin",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1000");
    gpusort()
        .current_dir(d)
        .args(["-q", "stencil", "g.bin", "--shape", "8x8", "--dtype", "f32"])
        .args([
            "--boundary",
            "constant",
            "--cval",
            "3.4028235e38",
            "-o",
            "s.bin",
        ])
        .assert()
        .success();
}

/// The result's format follows a name given with -o: a raw input written to `out.npy` gets a
/// NumPy header, a .npy input written to `out.bin` raw bytes; in place and by default it keeps
/// the input's.
#[test]
fn the_output_format_follows_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let keys = random_u32(777, 16);
    write_u32(&d.join("k.bin"), &keys);
    write_npy(&d.join("k.npy"), &[777], &keys);
    for args in [
        "sort k.bin --dtype u32 -o out.npy",
        "scan k.bin --dtype u32 -o scan.npy",
        "sort k.npy -o out.bin",
        "sort k.npy",
    ] {
        gpusort()
            .current_dir(d)
            .arg("-q")
            .args(args.split(' '))
            .assert()
            .success();
    }
    let (shape, got) = read_npy::<u32>(&d.join("out.npy"));
    assert_eq!((shape, got), (vec![777], sorted(&keys)));
    assert_eq!(read_npy::<u32>(&d.join("scan.npy")).0, vec![777]);
    assert_eq!(read_u32(&d.join("out.bin")), sorted(&keys));
    assert_eq!(read_npy::<u32>(&d.join("k.sorted.npy")).1, sorted(&keys));
}

/// No environment variable sets a tuning (the old `GPUSORT_RADIX_*` switches change nothing), and
/// `--tuning FILE` changes shapes only: a valid file gives the same results; an unknown field, a
/// value the kernels cannot take, bad JSON or a measuring switch (results wrong on purpose: only
/// `--features measure` builds take one) is one line, exit 2, nothing written.
#[test]
fn the_environment_and_tuning_files_cannot_change_a_result() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let keys = random_u32(70_000, 17);
    write_u32(&d.join("k.bin"), &keys);
    let sort = "sort k.bin --dtype u32 --algorithm radix -o o.bin";
    for (var, value) in [
        ("GPUSORT_RADIX_STOP", "1"),
        ("GPUSORT_RADIX_PROBE", "7"),
        ("GPUSORT_RADIX_WORKGROUPS", "4294967295"),
        ("GPUSORT_COMPACT_PROBE", "3"),
    ] {
        gpusort()
            .current_dir(d)
            .env(var, value)
            .arg("-q")
            .args(sort.split(' '))
            .assert()
            .success();
        assert_eq!(read_u32(&d.join("o.bin")), sorted(&keys), "{var}={value}");
    }
    // shapes from a file: the same results
    let sums: Vec<u32> = keys
        .iter()
        .scan(0u32, |acc, &k| {
            *acc = acc.wrapping_add(k);
            Some(*acc)
        })
        .collect();
    std::fs::write(
        d.join("shapes.json"),
        r#"{"sort": {"items": 6, "workgroups": 64, "count_first": false},
            "scan": {"scan_rounds": 4, "scan_workgroups": 64}}"#,
    )
    .unwrap();
    for args in [sort, "scan k.bin --dtype u32 -o s.bin"] {
        gpusort()
            .current_dir(d)
            .args(["-q", "--tuning", "shapes.json"])
            .args(args.split(' '))
            .assert()
            .success();
    }
    assert_eq!(read_u32(&d.join("o.bin")), sorted(&keys));
    assert_eq!(read_u32(&d.join("s.bin")), sums);
    // refused before any work: one line, exit 2, nothing written
    for (file, says) in [
        (r#"{"sort": {"probe": 7}}"#, "measuring switch"),
        (r#"{"scan": {"no_lookback": true}}"#, "measuring switch"),
        (r#"{"sort": {"itemz": 6}}"#, "no field \"itemz\""),
        (r#"{"sort": {"items": 99}}"#, "items is out of range"),
        (r#"{"scan": {"scan_rounds": 7}}"#, "scan_rounds"),
        (r#"{"sorts": {}}"#, "no tuning is called"),
        (r#"{"sort": {"items": "six"}}"#, "invalid type"),
        ("not json", "not JSON"),
    ] {
        std::fs::write(d.join("bad.json"), file).unwrap();
        let out = gpusort()
            .current_dir(d)
            .args(["--tuning", "bad.json"])
            .args("sort k.bin --dtype u32 -o fresh.bin".split(' '))
            .assert()
            .code(2);
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert_eq!(stderr.lines().count(), 1, "{file}: {stderr}");
        assert!(stderr.contains(says), "{file}: {stderr}");
        assert!(!d.join("fresh.bin").exists(), "{file}");
    }
}

/// `--no-sync` skips only the flush: the outputs are the same bytes, land under their names
/// through a rename (no temporary file left), replace an existing output, go to standard output,
/// and the time split says no flush was made; without it the split says the outputs' flush was
/// started and the final step says how long it waited for it (sort, scan, compact, partition).
#[test]
fn no_sync_writes_the_same_outputs_without_the_flush() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let keys = random_u32(5000, 91);
    write_u32(&d.join("in.u32"), &keys);
    let mut want = keys.clone();
    want.sort_unstable();
    std::fs::write(d.join("old.u32"), b"an earlier result").unwrap();
    for (flag, out, flushed) in [
        (None, "flushed.u32", true),
        (Some("--no-sync"), "old.u32", false),
    ] {
        let mut c = gpusort();
        c.args(["--timings", "sort", "--dtype", "u32"])
            .arg(d.join("in.u32"))
            .arg("-o")
            .arg(d.join(out));
        if let Some(f) = flag {
            c.arg(f);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let err = String::from_utf8_lossy(&o.stderr);
        // "write, flush started" or "flush started" in the command's split, then the final
        // step's wait for it
        let says_flushed = err.contains("flush") && !err.contains("not flushed");
        assert_eq!(says_flushed, flushed, "{err}");
        assert_eq!(err.contains("--no-sync: not flushed"), !flushed, "{err}");
        assert_eq!(err.contains("\ntime: final flush "), flushed, "{err}");
        assert_eq!(read_u32(&d.join(out)), want, "{out}");
    }
    // the streamed jobs' splits: the device's start, the job, whether a flush was started
    for args in [
        &["scan", "--dtype", "u32"][..],
        &["compact", "--dtype", "u32", "--below", "2147483648"],
        &["partition", "--dtype", "u32", "--pivot", "2147483648"],
    ] {
        for flushed in [true, false] {
            let mut c = gpusort();
            c.arg("--timings");
            if !flushed {
                c.arg("--no-sync");
            }
            let o = c
                .args(args)
                .arg(d.join("in.u32"))
                .arg("-o")
                .arg(d.join("streamed.u32"))
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains("\ntime: GPU start "), "{args:?}: {err}");
            assert_eq!(err.contains("flush started"), flushed, "{args:?}: {err}");
            assert_eq!(
                err.contains("\ntime: final flush "),
                flushed,
                "{args:?}: {err}"
            );
        }
    }
    assert!(temp_files(d).is_empty(), "{:?}", temp_files(d));
    let o = gpusort()
        .args(["--no-sync", "scan", "--dtype", "u32"])
        .arg(d.join("in.u32"))
        .args(["-o", "-"])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(o.stdout.len(), keys.len() * 4);
}

/// Files keep what is not data: a read-only output is refused without --force, a hard-linked one
/// refused without it and written through with it, a replaced file keeps its mode and owner, a
/// loop of links and a name ending in '/' are refused.
#[cfg(unix)]
#[test]
fn outputs_keep_modes_owners_and_links() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let keys = random_u32(5000, 21);
    let input = d.join("in.bin");
    write_u32(&input, &keys);
    let ro = d.join("ro.bin");
    write_u32(&ro, &[7, 8, 9]);
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::os::unix::fs::symlink("loop", d.join("loop")).unwrap();
    let linked = d.join("linked.bin");
    write_u32(&linked, &keys);
    std::fs::hard_link(&linked, d.join("other-name.bin")).unwrap();
    let before = snapshot(d);
    assert_refused(&[
        (
            vec![
                "sort".into(),
                "--dtype".into(),
                "u32".into(),
                s(&input),
                "-o".into(),
                s(&ro),
            ],
            "read-only",
        ),
        (
            vec![
                "sort".into(),
                "--dtype".into(),
                "u32".into(),
                s(&linked),
                "--in-place".into(),
            ],
            "hard links",
        ),
        (
            vec![
                "sort".into(),
                "--dtype".into(),
                "u32".into(),
                s(&input),
                "-o".into(),
                s(&d.join("loop")),
            ],
            "loop",
        ),
        (
            vec![
                "sort".into(),
                "--dtype".into(),
                "u32".into(),
                s(&input),
                "-o".into(),
                format!("{}/", s(&d.join("newdir"))),
            ],
            "names a folder",
        ),
    ]);
    assert_eq!(snapshot(d), before);
    assert!(std::fs::symlink_metadata(d.join("loop"))
        .unwrap()
        .file_type()
        .is_symlink());
    // --force: the read-only file is replaced and stays read-only; the hard-linked one is
    // written through, so both names see the result
    gpusort()
        .args(["-q", "--force", "sort", "--dtype", "u32"])
        .arg(&input)
        .arg("-o")
        .arg(&ro)
        .assert()
        .success();
    assert_eq!(read_u32(&ro), sorted(&keys));
    assert_eq!(std::fs::metadata(&ro).unwrap().mode() & 0o777, 0o444);
    gpusort()
        .args(["-q", "--force", "sort", "--dtype", "u32", "--in-place"])
        .arg(&linked)
        .assert()
        .success();
    assert_eq!(read_u32(&d.join("other-name.bin")), sorted(&keys));
    assert_eq!(std::fs::metadata(&linked).unwrap().nlink(), 2);
    // a replaced file keeps its mode and its owner (another user's where this process may give
    // it: as root)
    let shared = d.join("shared.bin");
    write_u32(&shared, &keys);
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o640)).unwrap();
    let given = std::os::unix::fs::chown(&shared, Some(4321), Some(4321)).is_ok();
    let owner = std::fs::metadata(&shared).unwrap();
    gpusort()
        .args(["-q", "sort", "--dtype", "u32", "--in-place"])
        .arg(&shared)
        .assert()
        .success();
    let after = std::fs::metadata(&shared).unwrap();
    assert_eq!(read_u32(&shared), sorted(&keys));
    assert_eq!(after.mode() & 0o7777, 0o640);
    assert_eq!((after.uid(), after.gid()), (owner.uid(), owner.gid()));
    if given {
        assert_eq!(after.uid(), 4321);
    }
    assert!(temp_files(d).is_empty());
}

/// Jobs that share outputs cannot mix them: each output is locked from its first write to the
/// end of the job, and a second job fails (exit 1) before it writes.
#[cfg(unix)]
#[test]
fn jobs_that_share_outputs_cannot_mix_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (a, b) = (d.join("a.bin"), d.join("b.bin"));
    let (ka, kb) = (random_u32(300_000, 1), random_u32(300_000, 2));
    write_u32(&a, &ka);
    write_u32(&b, &kb);
    let out = |name: &str| d.join(name);
    for round in 0..12 {
        let job = |input: &Path| {
            std::process::Command::new(assert_cmd::cargo::cargo_bin("gpusort"))
                .args(["-q", "sort", "--dtype", "u32"])
                .arg(input)
                .arg("-o")
                .arg(out("o.bin"))
                .arg("--values")
                .arg(input)
                .arg("--values-out")
                .arg(out("vo.bin"))
                .arg("--argsort")
                .arg(out("po.bin"))
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (ja, jb) = (job(&a), job(&b));
        let (ra, rb) = (
            ja.wait_with_output().unwrap(),
            jb.wait_with_output().unwrap(),
        );
        for r in [&ra, &rb] {
            assert!(
                matches!(r.status.code(), Some(0 | 1)),
                "round {round}: {r:?}"
            );
            if r.status.code() == Some(1) {
                assert!(String::from_utf8_lossy(&r.stderr).contains("another gpusort job"));
            }
        }
        assert!(
            ra.status.success() || rb.status.success(),
            "round {round}: one job lands"
        );
        // whichever landed last, the three outputs come from one job
        let o = read_u32(&out("o.bin"));
        let from_a = o == sorted(&ka);
        assert!(from_a || o == sorted(&kb), "round {round}");
        let keys = if from_a { &ka } else { &kb };
        let perm = read_u32(&out("po.bin"));
        let vo = read_u32(&out("vo.bin"));
        assert!(
            perm.iter().zip(&o).all(|(&p, &k)| keys[p as usize] == k),
            "round {round}"
        );
        assert_eq!(vo, o, "round {round}: values came with their keys");
    }
    let locks: Vec<_> = listing(d)
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".gpusort-lock"))
        .collect();
    assert!(locks.is_empty(), "{locks:?}");
    assert!(temp_files(d).is_empty());
}

/// The bench's exports follow the output rules, checked before anything is measured.
#[test]
fn bench_exports_are_checked_before_the_bench_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let same = s(&d.join("same.out"));
    let base = d.join("base.json");
    std::fs::write(&base, "{}").unwrap();
    let missing = s(&d.join("nodir/x.json"));
    let started = std::time::Instant::now();
    assert_refused(&[
        (
            strs(&["bench", "--json", &same, "--markdown", &same]),
            "name the same file",
        ),
        (
            strs(&["bench", "--compare", &s(&base), "--json", &s(&base)]),
            "same file as the input",
        ),
        (strs(&["bench", "--json", &missing]), "does not exist"),
    ]);
    assert!(
        started.elapsed().as_secs() < 30,
        "refused before the bench ran"
    );
    assert_eq!(std::fs::read(&base).unwrap(), b"{}");
}

/// Values no engine takes are refused on every engine, with one line: the stencil's on-chip steps
/// and time blocks on the CPU engine too, keys and values both on standard input.
#[test]
fn values_no_engine_takes_are_refused_on_every_engine() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let grid = d.join("g.npy");
    write_npy::<f32>(&grid, &[16, 16], &vec![1.0; 256]);
    let g = s(&grid);
    let mut cases = Vec::new();
    for backend in ["cpu", "auto"] {
        let stencil = |flag: &str, v: &str| {
            strs(&[
                "--backend",
                backend,
                "stencil",
                &g,
                "--radius",
                "1",
                flag,
                v,
            ])
        };
        for k in ["0", "9", "1000"] {
            cases.push((stencil("--on-chip-steps", k), "--on-chip-steps"));
        }
        cases.push((stencil("--time-block", "0"), "--time-block 0"));
    }
    let before = snapshot(d);
    assert_refused(&cases);
    assert_eq!(snapshot(d), before);
    let out = gpusort()
        .args([
            "sort",
            "--dtype",
            "u32",
            "-",
            "--values",
            "-",
            "-o",
            "-",
            "--values-out",
        ])
        .arg(d.join("vo.bin"))
        .write_stdin(vec![0u8; 4096])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(one_line(&out.stderr).contains("both read standard input"));
}

/// A table sort whose spill or output hits a full disk (a file-size limit here): a failure while
/// working, exit code 1, one line saying nothing was written; no output, no temporary file.
#[cfg(unix)]
#[test]
fn a_table_sort_on_a_full_disk_fails_as_work_not_as_usage() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut text = String::from("id,x,name\n");
    for i in 0..300_000u64 {
        text.push_str(&format!("{i},{},row{}\n", (i * 7919) % 300_007, i % 97));
    }
    std::fs::write(d.join("t.csv"), &text).unwrap();
    std::fs::create_dir(d.join("spill")).unwrap();
    let before = snapshot(d);
    for args in [
        "sort t.csv --by x -o out.parquet --memory-budget 2M --tmp-dir spill",
        "sort t.csv --by x -o out.csv",
    ] {
        let out = with_file_limit(d, 512, args);
        let err = one_line(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args}: {err}");
        assert!(
            err.contains("no output was written") || err.contains("nothing was written"),
            "{args}: {err}"
        );
        // the line names the input, and where the spill went
        assert!(err.contains("sorting t.csv"), "{args}: {err}");
        if args.contains("--tmp-dir") {
            assert!(err.contains("(spilling to spill)"), "{args}: {err}");
        }
        assert_eq!(snapshot(d), before, "{args}: nothing changed");
        assert!(temp_files(d).is_empty());
    }
}

/// .npy inputs that say one thing and hold another, each refused with one line (exit 2), nothing
/// written: a header in JSON's words (NumPy reads Python literals), an f32 file in a many-file job
/// of `--dtype u32` (the single-file form refuses it too), and a stream that runs on past the
/// elements its header gives (an endless one: refused as it overruns, not after filling $TMPDIR).
#[cfg(unix)]
#[test]
fn npy_inputs_that_contradict_themselves_or_their_flags_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let header = b"{\"descr\": \"<f4\", \"fortran_order\": false, \"shape\": [4]}";
    let mut json = b"\x93NUMPY\x01\x00".to_vec();
    let pad = 128 - 10 - header.len() - 1;
    json.extend_from_slice(&((header.len() + pad + 1) as u16).to_le_bytes());
    json.extend_from_slice(header);
    json.extend(std::iter::repeat_n(b' ', pad));
    json.push(b'\n');
    json.extend(std::iter::repeat_n(0u8, 16));
    std::fs::write(d.join("json.npy"), &json).unwrap();
    write_npy(&d.join("f.npy"), &[3], &[3.0f32, 1.0, 2.0]);
    std::fs::write(d.join("raw.bin"), 7u32.to_le_bytes().repeat(3)).unwrap();
    write_npy(&d.join("ten.npy"), &[10], &(0..10u32).collect::<Vec<_>>());
    let before = snapshot(d);
    for (args, says) in [
        ("sort json.npy -o out.npy", "is not a valid .npy file"),
        (
            "sort raw.bin f.npy --dtype u32 --out-dir o",
            "holds f32 but --dtype u32 was given",
        ),
    ] {
        let out = gpusort()
            .current_dir(d)
            .args(args.split(' '))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args}");
        assert!(one_line(&out.stderr).contains(says), "{args}");
    }
    // ten elements, then zeros without end
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "cat ten.npy /dev/zero | GPUSORT_BACKEND=gpu timeout 60 '{}' sort - -o out.npy",
            assert_cmd::cargo::cargo_bin("gpusort").display()
        ))
        .current_dir(d)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = one_line(&out.stderr);
    let whole = std::fs::metadata(d.join("ten.npy")).unwrap().len();
    let says = format!("holds more bytes than its .npy header says ({whole} in all)");
    assert!(err.contains(&says), "{err}");
    assert_eq!(snapshot(d), before);
    assert!(!d.join("o").exists());
}
