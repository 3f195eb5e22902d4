//! The merged launch's WGSL: shaders/merged.wgsl with its generated register networks.

use super::batch::*;

/// `global_group_r(d, g, lo, mirror)` for r = 1..=3: the fused global steps of
/// shaders/merged.wgsl on one group of 2^r elements, straight-line (see `own_networks`).
pub fn global_networks() -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for r in 1..=MAX_FUSED_STEPS as usize {
        let size = 1usize << r;
        let _ = writeln!(
            s,
            "fn global_group_{r}(d: Task, g: u32, lo: u32, mirror: bool) {{"
        );
        for m in 0..size {
            let _ = writeln!(
                s,
                "    let i{m} = group_index(g, lo, {r}u, mirror, {m}u);\n    var x{m} = load_elem(d, i{m});"
            );
        }
        let cx = |s: &mut String, a: usize, b: usize| {
            let _ = writeln!(
                s,
                "        {{ let t = x{a}; x{a} = min(t, x{b}); x{b} = max(t, x{b}); }}"
            );
        };
        // the first step: mirrored (m with m ^ (size - 1)) or plain (m with m | size / 2)
        s.push_str("    if (mirror) {\n");
        for m in 0..size / 2 {
            cx(&mut s, m, m ^ (size - 1));
        }
        s.push_str("    } else {\n");
        for m in (0..size).filter(|m| m & (size / 2) == 0) {
            cx(&mut s, m, m | (size / 2));
        }
        s.push_str("    }\n");
        let mut j = size / 4;
        while j >= 1 {
            for m in (0..size).filter(|m| m & j == 0) {
                cx(&mut s, m, m | j);
            }
            j /= 2;
        }
        for m in 0..size {
            let _ = writeln!(s, "    store_elem(d, i{m}, x{m});");
        }
        s.push_str("}\n\n");
    }
    s
}

/// The register networks of shaders/merged.wgsl for `per` words per invocation: `own_sort(li,
/// kmax)` runs every stage up to min(kmax, per) on the invocation's own consecutive words,
/// `own_merge(li)` the steps below `per` of a later stage. Straight-line code over named
/// variables, as in bitonic_wgsl.rs, so no key sits in a dynamically indexed array (drivers put
/// those in slow local memory).
pub fn own_networks(per: u32) -> String {
    use std::fmt::Write;
    let per = per as usize;
    let cx = |out: &mut String, a: usize, b: usize| {
        let _ = writeln!(
            out,
            "        {{ let x = r{a}; r{a} = min(x, r{b}); r{b} = max(x, r{b}); }}"
        );
    };
    let load = |out: &mut String| {
        out.push_str("    let base = li * PER_INVOCATION;\n");
        for m in 0..per {
            let _ = writeln!(out, "    var r{m} = tile[pad(base + {m}u)];");
        }
    };
    let store = |out: &mut String| {
        for m in 0..per {
            let _ = writeln!(out, "    tile[pad(base + {m}u)] = r{m};");
        }
    };
    let mut s = String::from("fn own_sort(li: u32, kmax: u32) {\n");
    load(&mut s);
    let mut k = 2;
    while k <= per {
        let _ = writeln!(s, "    if (kmax >= {k}u) {{");
        let mut j = k / 2;
        while j >= 1 {
            for m in 0..per {
                let partner = if j == k / 2 { m ^ (k - 1) } else { m | j };
                if partner > m && (j == k / 2 || m & j == 0) {
                    cx(&mut s, m, partner);
                }
            }
            j /= 2;
        }
        s.push_str("    }\n");
        k *= 2;
    }
    store(&mut s);
    s.push_str("}\n\nfn own_merge(li: u32) {\n");
    load(&mut s);
    let mut j = per / 2;
    while j >= 1 {
        for m in (0..per).filter(|m| m & j == 0) {
            cx(&mut s, m, m | j);
        }
        j /= 2;
    }
    store(&mut s);
    s.push_str("}\n");
    s
}

/// The merged launch (scheduler) for blocks of `cap` words of workgroup memory, with its
/// generated register networks.
pub fn merged(cap: u32, spin_limit: u32) -> String {
    let wg = workgroup_size(cap);
    let mut s = crate::wgsl::compose_with(
        crate::wgsl::MERGED,
        &[("CAP", cap), ("WG", wg), ("SPIN_LIMIT", spin_limit)],
        &[crate::wgsl::KEY_ORDER, crate::wgsl::SCAN_OP],
    );
    s.push('\n');
    s.push_str(&own_networks(cap / wg));
    s.push_str(&global_networks());
    s
}
