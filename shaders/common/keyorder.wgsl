// The sort order of every key type as u32 words (CPU twin: crates/gpusort-core/src/reference/keys.rs).
// Native (hi, lo) -> sortable (hi, lo) whose unsigned order is the wanted order: signed integers
// flip the sign bit, floats flip the sign bit when positive and all bits when negative (total
// order, -0.0 before +0.0), every NaN becomes all ones (last), and descending inverts everything
// but NaN, so NaN stays last both ways. For 32-bit kinds lo is 0.

const KIND_I32: u32 = 1u;
const KIND_F32: u32 = 2u;
const KIND_U64: u32 = 3u;
const KIND_I64: u32 = 4u;
const KIND_F64: u32 = 5u;

fn kind_wide(kind: u32) -> bool { return kind >= KIND_U64; }
fn kind_float(kind: u32) -> bool { return kind == KIND_F32 || kind == KIND_F64; }

fn key_is_nan(kind: u32, hi: u32, lo: u32) -> bool {
    let mag = hi & 0x7fffffffu;
    let nan32 = mag > 0x7f800000u;
    let nan64 = mag > 0x7ff00000u || (mag == 0x7ff00000u && lo != 0u);
    return (kind == KIND_F32 && nan32) || (kind == KIND_F64 && nan64);
}

fn key_encode(kind: u32, descending: bool, hi: u32, lo: u32) -> vec2<u32> {
    let nan = vec2<u32>(INF, select(0u, INF, kind_wide(kind)));
    return select(key_order(kind, descending, hi, lo), nan, key_is_nan(kind, hi, lo));
}

// key_encode of a key that is no NaN, or whose NaN is the canonical quiet one in an ascending
// order (it then lands after every other key by itself: above +inf's encoding)
fn key_order(kind: u32, descending: bool, hi: u32, lo: u32) -> vec2<u32> {
    // written without branches: a float's sign differs from lane to lane
    let negative = u32(i32(hi) >> 31u); // all ones where the sign bit is set
    var flip_hi = select(0u, 0x80000000u, kind == KIND_I32 || kind == KIND_I64);
    var flip_lo = 0u;
    if (kind_float(kind)) { flip_hi = negative | 0x80000000u; flip_lo = negative; }
    if (descending) { flip_hi = ~flip_hi; flip_lo = ~flip_lo; }
    return vec2<u32>(hi ^ flip_hi, select(0u, lo ^ flip_lo, kind_wide(kind)));
}

fn key_decode(kind: u32, descending: bool, hi: u32, lo: u32) -> vec2<u32> {
    let nan = select(vec2<u32>(0x7fc00000u, 0u), vec2<u32>(0x7ff80000u, 0u), kind_wide(kind));
    let is_nan = kind_float(kind) && hi == INF && (!kind_wide(kind) || lo == INF);
    let undo = select(0u, 0xffffffffu, descending);
    let h = hi ^ undo;
    // a sortable float's top bit is set where the key is positive: flip it alone, else every bit
    let negative = ~u32(i32(h) >> 31u);
    var flip_hi = select(0u, 0x80000000u, kind == KIND_I32 || kind == KIND_I64);
    var flip_lo = 0u;
    if (kind_float(kind)) { flip_hi = negative | 0x80000000u; flip_lo = negative; }
    let key = vec2<u32>(h ^ flip_hi, select(0u, lo ^ undo ^ flip_lo, kind_wide(kind)));
    return select(key, nan, is_nan);
}
