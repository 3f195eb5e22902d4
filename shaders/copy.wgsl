// A plain vec4 copy: the bandwidth bound every benchmark reports its fraction of.
// Host-prepended constant: WG.

@group(0) @binding(0) var<storage, read> copy_src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> copy_dst: array<vec4<u32>>;

@compute @workgroup_size(WG)
fn copy_vec4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) li: u32) {
    let i = linear_workgroup(wid, nwg) * WG + li;
    if (i < arrayLength(&copy_dst)) { copy_dst[i] = copy_src[i]; }
}
