//! The library's promises about itself, checked on its sources: no environment variable is read
//! by the library crates, and the core crate's families depend on each other one way only.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable source folder") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Code lines of a file: comments dropped, so a doc comment may name a variable.
fn code(path: &Path) -> Vec<(usize, String)> {
    std::fs::read_to_string(path)
        .expect("readable source")
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split("//").next().unwrap_or("").to_string()))
        .collect()
}

#[test]
fn the_library_crates_read_no_environment_variable() {
    let mut files = Vec::new();
    for krate in ["crates/gpusort-core/src", "crates/gpusort-sched/src"] {
        rust_files(&root().join(krate), &mut files);
    }
    assert!(
        files.len() > 20,
        "found the sources ({} files)",
        files.len()
    );
    let mut found = Vec::new();
    for f in &files {
        for (n, line) in code(f) {
            if [
                "std::env",
                "env::var",
                "var_os(",
                "option_env!",
                "with_env()",
            ]
            .iter()
            .any(|p| line.contains(p))
            {
                found.push(format!("{}:{n}: {}", f.display(), line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "environment reads in the library:\n{}",
        found.join("\n")
    );
}

/// The families of gpusort-core, lowest first: each may use those before it, never one after.
const FAMILIES: [&str; 5] = ["device", "scan", "sort", "stencil", "schedule"];

#[test]
fn the_core_families_depend_one_way() {
    let src = root().join("crates/gpusort-core/src");
    let mut uses: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for family in FAMILIES {
        let mut files = Vec::new();
        rust_files(&src.join(family), &mut files);
        assert!(
            !files.is_empty(),
            "crates/gpusort-core/src/{family}/ exists"
        );
        for f in &files {
            for (_, line) in code(f) {
                for other in FAMILIES {
                    if other != family && line.contains(&format!("crate::{other}")) {
                        uses.entry(family).or_default().insert(other);
                    }
                }
            }
        }
    }
    let rank = |f: &str| FAMILIES.iter().position(|x| *x == f).expect("a family");
    let upward: Vec<String> = uses
        .iter()
        .flat_map(|(f, used)| {
            used.iter()
                .filter(|u| rank(u) > rank(f))
                .map(move |u| format!("{f} uses {u}"))
        })
        .collect();
    assert!(
        upward.is_empty(),
        "families must depend downward only ({FAMILIES:?}): {upward:?}"
    );
    // and the facades are where the architecture says
    for (family, facade) in [
        ("sort", "pub struct Sorter"),
        ("scan", "pub struct Scanner"),
        ("device", "pub struct Gpu"),
    ] {
        let text = std::fs::read_to_string(src.join(family).join("mod.rs")).expect("mod.rs");
        assert!(text.contains(facade), "{family}/mod.rs holds `{facade}`");
    }
}
