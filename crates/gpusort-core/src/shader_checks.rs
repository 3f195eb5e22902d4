//! Every kernel configuration the library composes, run through naga's validator without a GPU,
//! and the workgroup-memory rules of the radix sweeps and the compaction checked against the
//! kernels as composed (unit tests only).

use crate::scan::wgsl::{compact, scan};
use crate::scan::ScanTuning;
use crate::schedule::merged;
use crate::sort::bitonic_wgsl::bitonic;
use crate::sort::radix_wgsl::{radix, RadixConfig};
use crate::wgsl::{compose, compose_with, BITONIC_PLAIN, COPY, KEYS, KEY_ORDER};

/// Every (family name, composed source) configuration the library can build, so a test can run
/// each through naga's validator without a GPU.
fn all_configurations() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let tuning = ScanTuning::default();
    for nw in 1..=4 {
        for wg in [64, 128, 256] {
            out.push((format!("bitonic NW={nw} WG={wg}"), bitonic(nw, wg)));
        }
    }
    out.push((
        "bitonic_plain".into(),
        compose(BITONIC_PLAIN, &[("WG", 256)]),
    ));
    out.push((
        "keys".into(),
        compose_with(KEYS, &[("WG", 256)], &[KEY_ORDER]),
    ));
    for sg in [false, true] {
        for op in 0..=8 {
            for inclusive in [false, true] {
                out.push((
                    format!("scan op={op} inclusive={inclusive} subgroups={sg}"),
                    scan(op, 0, inclusive, sg, &tuning, 8),
                ));
            }
        }
        for kind in 0..6u32 {
            let words = if kind >= 3 { 2 } else { 1 };
            for variant in (0..6).map(|pk| kind << 3 | pk) {
                for payload in [false, true] {
                    out.push((
                        format!("compact kind={kind} variant={variant} payload={payload} subgroups={sg}"),
                        compact(words, payload, variant, sg, &tuning, u32::MAX, 32768),
                    ));
                }
            }
        }
    }
    for min_subgroup in [None, Some(8), Some(32)] {
        for kind in 0..6u32 {
            for payload in [false, true] {
                for narrow_ballot in [false, true] {
                    let descending = (kind + payload as u32) % 2 == 1;
                    out.push((
                        format!(
                            "radix kind={kind} descending={descending} payload={payload} min_sg={min_subgroup:?} narrow={narrow_ballot} subgroups={}",
                            min_subgroup.is_some()
                        ),
                        radix(&RadixConfig {
                            items: 16,
                            wg: if min_subgroup.is_some() && payload { 512 } else { 256 },
                            kind,
                            descending,
                            nan_test: !descending && narrow_ballot,
                            payload,
                            min_subgroup,
                            spin_limit: 4096,
                            max_dim: 65535,
                            window: 16,
                            probe: 0,
                            stable_sweep_groups: if narrow_ballot { 0 } else { 64 },
                            unstable_sweep_groups: 64 * (kind % 2),
                            group_tiles: 8,
                            narrow_ballot,
                            early_counts: payload,
                            count_first: kind % 2 == 0,
                            spare_lanes: None,
                            hist_chunks: 8,
                            pack: 1 + kind % 2,
                            // the unstable sweep is for keys-only sorts
                            unstable: !payload && narrow_ballot,
                            unstable_items: 12,
                            msd_local_groups: 64,
                            msd_prefetch: kind == 0,
                            // the two-binding access of jobs beyond one binding
                            split: (kind % 3 == 1).then_some(4096),
                        }),
                    ));
                }
            }
        }
    }
    for cap in crate::schedule::CAPACITIES {
        out.push((
            format!("merged CAP={cap} subgroups=false"),
            merged(cap, 4096),
        ));
    }
    out.push(("copy".into(), compose(COPY, &[("WG", 256)])));
    out.extend(stencil_configurations());
    out
}

/// Stencil kernels are generated per job: a spread of them (2-D and 3-D, every boundary, narrow
/// and wide, rows of a multiple of 4 cells and not, extents of one cell, f32 and f64, with and
/// without the streamed pass).
fn stencil_configurations() -> Vec<(String, String)> {
    use crate::stencil::{self, Blocking, Boundary, GridShape, KernelChoice, Stencil, StencilJob};
    let mut out = Vec::new();
    let boundaries = Boundary::ALL;
    for boundary in boundaries {
        for (shape, st) in [
            (vec![64, 48], Stencil::star(2, 2)),
            (vec![64, 46], Stencil::star(2, 1)),
            (vec![64, 48], Stencil::boxed(2, 4)),
            (vec![64, 48], Stencil::boxed(2, 1)),
            (vec![16, 12, 20], Stencil::star(3, 1)),
            (vec![16, 12, 20], Stencil::boxed(3, 1)),
            (vec![16, 12, 20], Stencil::boxed(3, 2)),
            // degenerate extents: a module must not fold a division by a zero extent
            (vec![1, 1], Stencil::star(2, 1)),
            (vec![3, 1], Stencil::boxed(2, 1)),
            (vec![1, 4], Stencil::star(2, 1)),
            (vec![1, 1, 1], Stencil::star(3, 1)),
            (vec![2, 1, 4], Stencil::boxed(3, 1)),
            (vec![1, 3, 2], Stencil::star(3, 1)),
        ] {
            let st = st.expect("valid stencil");
            for dtype in [crate::KeyType::F32, crate::KeyType::F64] {
                let job = StencilJob {
                    shape: GridShape::new(&shape).expect("valid shape"),
                    stencil: st.clone(),
                    boundary,
                    cval: 0.5,
                    steps: 1,
                    dtype,
                };
                let name = format!(
                    "stencil {shape:?} {boundary:?} {dtype} taps={}",
                    job.stencil.taps().len()
                );
                out.push((name.clone(), stencil::source(&job, Default::default())));
                let rows = KernelChoice {
                    rows: 3,
                    ..KernelChoice::default()
                };
                out.push((format!("{name} 3 rows"), stencil::source(&job, rows)));
                let pairs = KernelChoice {
                    pairs: true,
                    ..KernelChoice::default()
                };
                out.push((format!("{name} pairs"), stencil::source(&job, pairs)));
                let along_x = KernelChoice {
                    plane_rows: 1,
                    ..KernelChoice::default()
                };
                out.push((format!("{name} along x"), stencil::source(&job, along_x)));
                // 3-D passes in registers: one buffer of workgroup memory and two
                for (k, w, rows) in [(2, 256, 2), (4, 1024, 1)] {
                    if job.shape.dims() == 3
                        && job.boundary != Boundary::Wrap
                        && dtype == crate::KeyType::F32
                        && job.stencil.taps().len() <= 32
                    {
                        let choice = KernelChoice {
                            blocking: Some(Blocking::planes(k, w, rows)),
                            ..KernelChoice::default()
                        };
                        out.push((
                            format!("{name} planes K={k} {w}x{rows}"),
                            stencil::source(&job, choice),
                        ));
                    }
                }
                for b in Blocking::candidates(&job, 48 << 10) {
                    let choice = KernelChoice {
                        rows: 1,
                        blocking: Some(b),
                        pairs: false,
                        plane_rows: 1,
                    };
                    out.push((
                        format!("{name} streamed {b:?}"),
                        stencil::source(&job, choice),
                    ));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    /// Every shader configuration parses and validates with naga, with no GPU involved.
    #[test]
    fn every_shader_validates_with_naga() {
        for (name, source) in super::all_configurations() {
            let module = naga::front::wgsl::parse_str(&source)
                .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(&source)));
            naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                // the workgroup-memory twins must not touch subgroups at all
                if name.contains("subgroups=false") {
                    naga::valid::Capabilities::all()
                        - naga::valid::Capabilities::SUBGROUP
                        - naga::valid::Capabilities::SUBGROUP_BARRIER
                } else {
                    naga::valid::Capabilities::all()
                },
            )
            .validate(&module)
            .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(&source)));
        }
    }

    /// Workgroup bytes a composed kernel declares, as the driver is asked for them.
    fn workgroup_bytes(source: &str) -> u32 {
        let module = naga::front::wgsl::parse_str(source).unwrap();
        let mut layouter = naga::proc::Layouter::default();
        layouter.update(module.to_ctx()).unwrap();
        module
            .global_variables
            .iter()
            .filter(|(_, v)| v.space == naga::AddressSpace::WorkGroup)
            .map(|(_, v)| layouter[v.ty].size)
            .sum()
    }

    /// Workgroup bytes each entry point of a composed module uses (the variables it touches, as
    /// wgpu and the driver count them), by name.
    fn entry_workgroup_bytes(source: &str) -> Vec<(String, u32)> {
        let module = naga::front::wgsl::parse_str(source).unwrap();
        let info = naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::all(),
        )
        .validate(&module)
        .unwrap();
        let mut layouter = naga::proc::Layouter::default();
        layouter.update(module.to_ctx()).unwrap();
        let workgroup: Vec<_> = module
            .global_variables
            .iter()
            .filter(|(_, v)| v.space == naga::AddressSpace::WorkGroup)
            .collect();
        module
            .entry_points
            .iter()
            .enumerate()
            .map(|(i, ep)| {
                let used = info.get_entry_point(i);
                let bytes = workgroup
                    .iter()
                    .filter(|(h, _)| !used[*h].is_empty())
                    .map(|(_, v)| layouter[v.ty].size)
                    .sum();
                (ep.name.clone(), bytes)
            })
            .collect()
    }

    /// The radix sweep shape rule's estimate (`radix::other_workgroup_bytes` beside the scratch),
    /// checked against every radix kernel as composed: no entry point declares more, with or
    /// without subgroups, at every workgroup size, stable or unstable, with or without a payload.
    #[test]
    fn radix_workgroup_estimate_covers_the_kernels() {
        for min_subgroup in [None, Some(4), Some(8), Some(32), Some(64)] {
            for wg in [256, 384, 512, 768, 1024] {
                for items in [1, 9, 16] {
                    // kind 3 (u64) for the sweeps; kind 0 (u32) adds the MSD path's kernels
                    for (payload, unstable, kind) in [
                        (false, false, 3),
                        (true, false, 3),
                        (false, true, 3),
                        (false, true, 0),
                    ] {
                        let source = super::radix(&super::RadixConfig {
                            items,
                            wg,
                            kind,
                            descending: false,
                            nan_test: false,
                            payload,
                            min_subgroup,
                            spin_limit: 4096,
                            max_dim: 65535,
                            window: 4,
                            probe: 0,
                            stable_sweep_groups: 0,
                            unstable_sweep_groups: 0,
                            group_tiles: 8,
                            narrow_ballot: false,
                            early_counts: true,
                            count_first: false,
                            spare_lanes: None,
                            hist_chunks: 8,
                            pack: 2,
                            unstable,
                            unstable_items: items,
                            msd_local_groups: 0,
                            msd_prefetch: true,
                            // two bindings add code, not workgroup memory
                            split: (items == 9).then_some(4096),
                        });
                        let estimate =
                            crate::sort::radix_layout::scratch_words(items, min_subgroup, wg, 2)
                                * 4
                                + crate::sort::radix::other_workgroup_bytes(
                                    wg,
                                    min_subgroup.is_some(),
                                );
                        for (entry, bytes) in entry_workgroup_bytes(&source) {
                            let estimate = match entry.as_str() {
                                "msd_local" | "msd_dense" => crate::sort::radix::msd_local_bytes(
                                    wg,
                                    items,
                                    min_subgroup.is_some(),
                                ),
                                _ => estimate,
                            };
                            assert!(
                                bytes <= estimate,
                                "{entry} sg={min_subgroup:?} wg={wg} items={items} \
                                 payload={payload} unstable={unstable}: {bytes} > {estimate}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// The compaction stage rule's promise, checked against the kernels as composed: with the
    /// scan helpers it reserves (`scan::scan_helper_bytes`, a copy of the WGSL arrays' sizes), a
    /// stage smaller than its tile leaves the kernel within half the workgroup storage, so two
    /// workgroups can share an SM.
    #[test]
    fn compaction_stage_fits_in_half_the_workgroup_storage() {
        let t = crate::scan::ScanTuning::default();
        for storage in [32768, 49152, 65536] {
            for subgroups in [true, false] {
                for (words, payload) in [(1, false), (1, true), (2, false), (2, true)] {
                    let stage = t.compact_stage_size(payload, words, subgroups, storage);
                    let source = super::compact(words, payload, 0, subgroups, &t, 8, storage);
                    let bytes = workgroup_bytes(&source);
                    let name = format!("storage={storage} subgroups={subgroups} words={words}");
                    assert!(stage > 1, "{name}: stage {stage}");
                    if stage < t.compact_tile(payload, words) {
                        assert!(bytes <= storage / 2, "{name}: {bytes} bytes");
                    } else {
                        assert!(bytes <= storage, "{name}: {bytes} bytes");
                    }
                }
            }
        }
    }
}
