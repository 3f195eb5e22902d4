// The scan operators on u32 words, by code (crates/gpusort-core/src/scan.rs ScanOp::code; CPU
// twin crates/gpusort-core/src/reference/scan.rs). Families with one operator per pipeline call it with
// a constant code, which the compiler folds; the merged launch passes a per-task code.
fn scan_op(op: u32, a: u32, b: u32) -> u32 {
    switch op {
        case 1u: { return bitcast<u32>(bitcast<f32>(a) + bitcast<f32>(b)); }
        case 2u: { return max(a, b); }
        case 3u: { return min(a, b); }
        case 4u: { return bitcast<u32>(max(bitcast<i32>(a), bitcast<i32>(b))); }
        case 5u: { return bitcast<u32>(min(bitcast<i32>(a), bitcast<i32>(b))); }
        case 6u: { return a & b; }
        case 7u: { return a | b; }
        case 8u: { return a ^ b; }
        default: { return a + b; } // 0: wrapping add of u32 and i32
    }
}
