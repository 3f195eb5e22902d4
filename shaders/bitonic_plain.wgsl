// The plain global-memory bitonic sort of METHODS.md method 2: one dispatch per (stage k, step j),
// one comparator per invocation, direction from (i & k). Input padded to a power of two with real
// +inf keys. Kept only as the baseline the vectorised sort is measured against.
// Host-prepended constant: WG.

struct PlainParams { k: u32, j: u32, _pad0: u32, _pad1: u32 }

@group(0) @binding(0) var<uniform> pp: PlainParams;
@group(0) @binding(1) var<storage, read_write> keys: array<u32>;

@compute @workgroup_size(WG)
fn plain_step(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) li: u32) {
    let i = linear_workgroup(wid, nwg) * WG + li;
    let l = i ^ pp.j;
    if (l <= i || l >= arrayLength(&keys)) { return; }
    let a = keys[i];
    let b = keys[l];
    let ascending = (i & pp.k) == 0u;
    if ((ascending && a > b) || (!ascending && a < b)) {
        keys[i] = b;
        keys[l] = a;
    }
}
