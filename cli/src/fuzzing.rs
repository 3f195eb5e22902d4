//! Entry points for the fuzz targets (fuzz/fuzz_targets/) and their corpus test
//! (cli/tests/fuzz_corpus.rs): each takes arbitrary bytes and must return without panicking.

use clap::Parser;

use crate::parse_bytes;
use crate::stencil::parse_shape;
use gpusort_files::parse_npy;

/// The .npy parser on arbitrary bytes, with each dtype expectation.
pub fn npy_header(data: &[u8]) {
    let _ = parse_npy(data, None);
    for t in gpusort_core::KeyType::ALL {
        if let Ok(layout) = parse_npy(data, Some(t)) {
            // what the parser accepts must describe the bytes exactly
            assert_eq!(layout.dtype, t);
            assert_eq!(layout.offset + layout.len * t.size(), data.len());
            assert_eq!(layout.shape.iter().product::<usize>(), layout.len);
        }
    }
}

/// Argument parsing: arbitrary words as a command line (through clap and gpusort's own value
/// parsers), and arbitrary text as a shape, a byte size, a boundary and a grid.
pub fn args(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let words: Vec<&str> = std::iter::once("gpusort")
        .chain(text.split(['\0', '\n']))
        .collect();
    if let Ok(cli) = crate::Cli::try_parse_from(&words) {
        if let crate::Command::Stencil(a) = &cli.command {
            if let Some(s) = &a.shape {
                let _ = parse_shape(s);
            }
            if let Some(b) = &a.gpu_memory {
                let _ = parse_bytes("--gpu-memory", b);
            }
        }
    }
    for piece in text.split('\0') {
        if let Ok(shape) = parse_shape(piece) {
            assert!((2..=3).contains(&shape.len()) && !shape.contains(&0));
            let _ = gpusort_core::stencil::GridShape::new(&shape);
        }
        if let Ok(b) = parse_bytes("--gpu-memory", piece) {
            assert!(b > 0);
        }
        let _ = piece.parse::<gpusort_core::stencil::Boundary>();
    }
}
