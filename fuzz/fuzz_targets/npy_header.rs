//! The .npy parser on arbitrary bytes: it must refuse or describe them exactly, never panic.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gpusort::fuzzing::npy_header(data));
