// Key transforms between the user's native keys and the sortable u32 planes the sort kernels
// compare (CPU twin: crates/gpusort-core/src/cpu/keys.rs).
//
// Every key type maps to one (32-bit) or two (64-bit: hi, lo) u32 words whose unsigned order is the
// wanted order: signed integers flip the sign bit, floats flip the sign bit when positive and all
// bits when negative (total order, -0.0 before +0.0), every NaN becomes all ones (last), and a
// descending sort inverts the words of everything but NaN, so NaN stays last in both directions.
// Planes, in comparison order: [segment id][key hi][key lo][original index].
// Host-prepended constant: WG.

struct KeyParams {
    n: u32,
    plane_stride: u32, // u32 words per plane
    kind: u32,         // 0 u32, 1 i32, 2 f32, 3 u64, 4 i64, 5 f64
    descending: u32,
    seg_size: u32,     // records per segment when there is a segment plane
    flags: u32,        // bit 0: segment plane, bit 1: index plane
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> kp: KeyParams;
@group(0) @binding(1) var<storage, read_write> native: array<u32>;
@group(0) @binding(2) var<storage, read_write> planes: array<u32>;
@group(0) @binding(3) var<storage, read_write> perm: array<u32>;
@group(0) @binding(4) var<storage, read_write> values_in: array<u32>;
@group(0) @binding(5) var<storage, read_write> values_out: array<u32>;

const KIND_I32: u32 = 1u;
const KIND_F32: u32 = 2u;
const KIND_U64: u32 = 3u;
const KIND_I64: u32 = 4u;
const KIND_F64: u32 = 5u;

fn wide() -> bool { return kp.kind >= KIND_U64; }
fn is_float() -> bool { return kp.kind == KIND_F32 || kp.kind == KIND_F64; }
fn has_seg() -> bool { return (kp.flags & 1u) != 0u; }
fn has_idx() -> bool { return (kp.flags & 2u) != 0u; }

fn key_plane() -> u32 { return select(0u, 1u, has_seg()); }
fn idx_plane() -> u32 { return key_plane() + select(1u, 2u, wide()); }

fn element(wid: vec3<u32>, nwg: vec3<u32>, li: u32) -> u32 {
    return linear_workgroup(wid, nwg) * WG + li;
}

fn is_nan(hi: u32, lo: u32) -> bool {
    let mag = hi & 0x7fffffffu;
    if (kp.kind == KIND_F32) { return mag > 0x7f800000u; }
    return mag > 0x7ff00000u || (mag == 0x7ff00000u && lo != 0u);
}

// (hi, lo) of the native key -> sortable (hi, lo); for 32-bit keys lo is 0.
fn encode(hi: u32, lo: u32) -> vec2<u32> {
    if (is_float() && is_nan(hi, lo)) { return vec2<u32>(INF, select(0u, INF, wide())); }
    var h = hi;
    var l = lo;
    if (kp.kind == KIND_I32 || kp.kind == KIND_I64) {
        h = h ^ 0x80000000u;
    } else if (is_float()) {
        if ((h & 0x80000000u) != 0u) { h = ~h; l = ~l; } else { h = h ^ 0x80000000u; }
    }
    if (kp.descending != 0u) { h = ~h; l = ~l; }
    if (!wide()) { l = 0u; }
    return vec2<u32>(h, l);
}

fn decode(hi: u32, lo: u32) -> vec2<u32> {
    if (is_float() && hi == INF && (!wide() || lo == INF)) {
        // the one encoding every NaN shares; it comes back as the canonical quiet NaN
        return select(vec2<u32>(0x7fc00000u, 0u), vec2<u32>(0x7ff80000u, 0u), wide());
    }
    var h = hi;
    var l = lo;
    if (kp.descending != 0u) { h = ~h; l = ~l; }
    if (kp.kind == KIND_I32 || kp.kind == KIND_I64) {
        h = h ^ 0x80000000u;
    } else if (is_float()) {
        if ((h & 0x80000000u) != 0u) { h = h ^ 0x80000000u; } else { h = ~h; l = ~l; }
    }
    return vec2<u32>(h, l);
}

@compute @workgroup_size(WG)
fn encode_keys(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) li: u32) {
    let i = element(wid, nwg, li);
    if (i >= kp.n) { return; }
    var hi: u32;
    var lo = 0u;
    if (wide()) { lo = native[2u * i]; hi = native[2u * i + 1u]; } else { hi = native[i]; }
    let e = encode(hi, lo);
    let s = kp.plane_stride;
    if (has_seg()) { planes[i] = i / kp.seg_size; }
    planes[key_plane() * s + i] = e.x;
    if (wide()) { planes[(key_plane() + 1u) * s + i] = e.y; }
    if (has_idx()) { planes[idx_plane() * s + i] = i; }
}

@compute @workgroup_size(WG)
fn decode_keys(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) li: u32) {
    let i = element(wid, nwg, li);
    if (i >= kp.n) { return; }
    let s = kp.plane_stride;
    let hi = planes[key_plane() * s + i];
    var lo = 0u;
    if (wide()) { lo = planes[(key_plane() + 1u) * s + i]; }
    let d = decode(hi, lo);
    if (wide()) { native[2u * i] = d.y; native[2u * i + 1u] = d.x; } else { native[i] = d.x; }
    if (has_idx()) { perm[i] = planes[idx_plane() * s + i]; }
}

// values_out[i] = values_in[perm[i]]: carries a payload along with the sorted keys.
@compute @workgroup_size(WG)
fn gather_values(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) li: u32) {
    let i = element(wid, nwg, li);
    if (i >= kp.n) { return; }
    values_out[i] = values_in[perm[i]];
}
