//! Benchmark helpers (filled in below).
