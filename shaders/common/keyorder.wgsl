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
    if (kind == KIND_F32) { return mag > 0x7f800000u; }
    if (kind == KIND_F64) { return mag > 0x7ff00000u || (mag == 0x7ff00000u && lo != 0u); }
    return false;
}

fn key_encode(kind: u32, descending: bool, hi: u32, lo: u32) -> vec2<u32> {
    if (key_is_nan(kind, hi, lo)) { return vec2<u32>(INF, select(0u, INF, kind_wide(kind))); }
    return key_order(kind, descending, hi, lo);
}

// key_encode of a key that is no NaN, or whose NaN is the canonical quiet one in an ascending
// order (it then lands after every other key by itself: above +inf's encoding)
fn key_order(kind: u32, descending: bool, hi: u32, lo: u32) -> vec2<u32> {
    var h = hi;
    var l = lo;
    if (kind == KIND_I32 || kind == KIND_I64) {
        h = h ^ 0x80000000u;
    } else if (kind_float(kind)) {
        if ((h & 0x80000000u) != 0u) { h = ~h; l = ~l; } else { h = h ^ 0x80000000u; }
    }
    if (descending) { h = ~h; l = ~l; }
    if (!kind_wide(kind)) { l = 0u; }
    return vec2<u32>(h, l);
}

fn key_decode(kind: u32, descending: bool, hi: u32, lo: u32) -> vec2<u32> {
    if (kind_float(kind) && hi == INF && (!kind_wide(kind) || lo == INF)) {
        // the one encoding every NaN shares; it comes back as the canonical quiet NaN
        return select(vec2<u32>(0x7fc00000u, 0u), vec2<u32>(0x7ff80000u, 0u), kind_wide(kind));
    }
    var h = hi;
    var l = lo;
    if (descending) { h = ~h; l = ~l; }
    if (kind == KIND_I32 || kind == KIND_I64) {
        h = h ^ 0x80000000u;
    } else if (kind_float(kind)) {
        if ((h & 0x80000000u) != 0u) { h = h ^ 0x80000000u; } else { h = ~h; l = ~l; }
    }
    if (!kind_wide(kind)) { l = 0u; }
    return vec2<u32>(h, l);
}
