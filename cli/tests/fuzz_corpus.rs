//! The fuzz targets' short run for CI (stable Rust, no libFuzzer): every file of the kept corpus
//! (fuzz/corpus/), then random and mutated inputs from proptest, through the same entry points
//! cargo-fuzz drives (`gpusort::fuzzing`). Long runs happen outside CI: docs/RELIABILITY.md.

use std::path::PathBuf;

use gpusort_core::KeyType;
use gpusort_files::parse_npy;
use proptest::prelude::*;

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn npy_corpus_parses_or_is_refused_as_expected() {
    let files = corpus("npy_header");
    assert!(files.len() >= 10);
    for (name, bytes) in &files {
        gpusort::fuzzing::npy_header(bytes);
        // the hand-made seeds (named *.npy) say what they are; what the fuzzer kept is hashes
        if let Some(seed) = name.strip_suffix(".npy") {
            let parsed = parse_npy(bytes, None);
            let expect_ok =
                ["u4_1d", "f4_2d", "f8_3d", "i8_v2", "i4_v3", "u8_empty"].contains(&seed);
            assert_eq!(parsed.is_ok(), expect_ok, "{name}: {parsed:?}");
        }
    }
    let f = &files.iter().find(|(n, _)| n == "f4_2d.npy").unwrap().1;
    let layout = parse_npy(f, Some(KeyType::F32)).unwrap();
    assert_eq!((layout.shape.clone(), layout.len), (vec![2, 3], 6));
    assert!(parse_npy(f, Some(KeyType::U32))
        .unwrap_err()
        .contains("holds f32"));
}

#[test]
fn args_corpus_runs() {
    let files = corpus("args");
    assert!(files.len() >= 5);
    for (_, bytes) in &files {
        gpusort::fuzzing::args(bytes);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Corpus files with random bytes overwritten, truncated or extended.
    #[test]
    fn mutated_npy_never_panics(seed in 0usize..64, edits in prop::collection::vec((any::<usize>(), any::<u8>()), 0..8), cut in any::<usize>(), tail in prop::collection::vec(any::<u8>(), 0..16)) {
        static FILES: std::sync::OnceLock<Vec<(String, Vec<u8>)>> = std::sync::OnceLock::new();
        let files = FILES.get_or_init(|| corpus("npy_header"));
        let mut bytes = files[seed % files.len()].1.clone();
        for (at, b) in edits {
            if !bytes.is_empty() {
                let i = at % bytes.len();
                bytes[i] = b;
            }
        }
        if !bytes.is_empty() && cut % 3 == 0 {
            bytes.truncate(cut % bytes.len());
        }
        bytes.extend(tail);
        gpusort::fuzzing::npy_header(&bytes);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        gpusort::fuzzing::npy_header(&bytes);
        gpusort::fuzzing::args(&bytes);
    }

    #[test]
    fn random_words_never_panic(words in prop::collection::vec("[-a-z0-9.xX=]{0,12}", 0..10)) {
        gpusort::fuzzing::args(words.join("\0").as_bytes());
        let mut line = vec!["stencil".to_string()];
        line.extend(words);
        gpusort::fuzzing::args(line.join("\0").as_bytes());
    }
}
