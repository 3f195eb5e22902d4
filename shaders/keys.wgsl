// Key transforms between the user's native keys and the sortable u32 planes the sort kernels
// compare; the order itself is common/keyorder.wgsl.
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

fn wide() -> bool { return kind_wide(kp.kind); }
fn has_seg() -> bool { return (kp.flags & 1u) != 0u; }
fn has_idx() -> bool { return (kp.flags & 2u) != 0u; }

fn key_plane() -> u32 { return select(0u, 1u, has_seg()); }
fn idx_plane() -> u32 { return key_plane() + select(1u, 2u, wide()); }

fn element(wid: vec3<u32>, nwg: vec3<u32>, li: u32) -> u32 {
    return linear_workgroup(wid, nwg) * WG + li;
}

fn encode(hi: u32, lo: u32) -> vec2<u32> { return key_encode(kp.kind, kp.descending != 0u, hi, lo); }
fn decode(hi: u32, lo: u32) -> vec2<u32> { return key_decode(kp.kind, kp.descending != 0u, hi, lo); }

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

// values_out[i] = values_in[perm[i]]: carries a payload along with the sorted keys; with flag
// bit 2, elements of two words (64-bit keys).
@compute @workgroup_size(WG)
fn gather_values(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) li: u32) {
    let i = element(wid, nwg, li);
    if (i >= kp.n) { return; }
    let p = perm[i];
    if ((kp.flags & 4u) != 0u) {
        values_out[2u * i] = values_in[2u * p];
        values_out[2u * i + 1u] = values_in[2u * p + 1u];
    } else {
        values_out[i] = values_in[p];
    }
}

// values_out[i] = perm[i] / seg_size: the segment of each element of a global argsort. The
// segmented radix sort sorts these stably next, which leaves every segment's keys in key order.
@compute @workgroup_size(WG)
fn segment_of(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) li: u32) {
    let i = element(wid, nwg, li);
    if (i >= kp.n) { return; }
    values_out[i] = perm[i] / kp.seg_size;
}
