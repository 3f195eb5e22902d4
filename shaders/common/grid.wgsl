// Shared helpers for every kernel family. The host prepends `const NAME: u32 = ...;` lines for
// each kernel's compile-time configuration before this file.

const INF: u32 = 0xffffffffu;

// Large launches are split over x and y (max_compute_workgroups_per_dimension is often 65535);
// this turns the 2-D workgroup id back into one linear index.
fn linear_workgroup(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}
