//! Command lines, shapes, sizes and boundary names from arbitrary bytes: never a panic.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gpusort::fuzzing::args(data));
