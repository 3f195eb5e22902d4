//! Generates the register-level parts of shaders/bitonic.wgsl for one record width.
//!
//! Why generated: the first version wrote these networks as loops over private arrays
//! (`array<Rec, 8>` indexed by loop counters). On the NVIDIA H200 through Vulkan that ran the
//! vectorised sort 1.4x *slower* than the plain per-step sort (24 ms vs 17 ms at 2^24 u32): the
//! arrays were dynamically indexed and lived in local memory. Straight-line code over named
//! variables keeps every key in registers on every driver. The generated text is plain WGSL and is
//! validated by naga like every other shader (`shader_checks`).

use std::fmt::Write;

/// A compare-exchange between two named records; `mirror` compares against the reversed partner.
#[derive(Clone, Copy)]
struct Cx {
    lo: usize,
    hi: usize,
    mirror: bool,
}

fn emit_cx(out: &mut String, var: &str, c: Cx) {
    let (a, b) = (format!("{var}{}", c.lo), format!("{var}{}", c.hi));
    if c.mirror {
        let _ = writeln!(
            out,
            "    {{ let p = cx({a}, rev({b})); {a} = p.lo; {b} = rev(p.hi); }}"
        );
    } else {
        let _ = writeln!(
            out,
            "    {{ let p = cx({a}, {b}); {a} = p.lo; {b} = p.hi; }}"
        );
    }
}

fn planes(nw: u32) -> impl Iterator<Item = u32> {
    0..nw
}

fn rec_helpers(nw: u32) -> String {
    let mut s = String::new();
    let fields: Vec<String> = planes(nw).map(|p| format!("w{p}: vec4<u32>")).collect();
    let _ = writeln!(s, "struct Rec {{ {} }}", fields.join(", "));
    s.push_str("struct Pair { lo: Rec, hi: Rec }\n");
    let all = |f: &dyn Fn(u32) -> String| planes(nw).map(f).collect::<Vec<_>>().join(", ");
    let _ = writeln!(
        s,
        "fn inf_rec() -> Rec {{ return Rec({}); }}",
        all(&|_| "vec4<u32>(INF)".into())
    );
    let _ = writeln!(
        s,
        "fn load_global(v: u32) -> Rec {{\n    if (v >= nvec()) {{ return inf_rec(); }}\n    let e = v * 4u;\n    \
         let valid = vec4<u32>(e, e + 1u, e + 2u, e + 3u) < vec4<u32>(params.n);\n    let inf = vec4<u32>(INF);\n    \
         return Rec({});\n}}",
        all(&|p| format!("select(inf, data[{p}u * params.plane_vecs + v], valid)"))
    );
    let stores: String = planes(nw)
        .map(|p| format!(" data[{p}u * params.plane_vecs + v] = r.w{p};"))
        .collect();
    let _ = writeln!(
        s,
        "fn store_global(v: u32, r: Rec) {{ if (v < nvec()) {{{stores} }} }}"
    );
    let _ = writeln!(
        s,
        "fn load_tile(v: u32) -> Rec {{ return Rec({}); }}",
        all(&|p| format!("tile[{p}u * TILE_VECS + v]"))
    );
    let stores: String = planes(nw)
        .map(|p| format!(" tile[{p}u * TILE_VECS + v] = r.w{p};"))
        .collect();
    let _ = writeln!(s, "fn store_tile(v: u32, r: Rec) {{{stores} }}");
    // lexicographic a < b per component
    let mut less =
        String::from("fn less(a: Rec, b: Rec) -> vec4<bool> {\n    var lt = a.w0 < b.w0;\n");
    for p in 1..nw {
        if p == 1 {
            less.push_str("    var eq = a.w0 == b.w0;\n");
        }
        let _ = writeln!(less, "    lt = lt | (eq & (a.w{p} < b.w{p}));");
        if p + 1 < nw {
            let _ = writeln!(less, "    eq = eq & (a.w{p} == b.w{p});");
        }
    }
    less.push_str("    return lt;\n}\n");
    s.push_str(&less);
    if nw == 1 {
        s.push_str("fn cx(a: Rec, b: Rec) -> Pair { return Pair(Rec(min(a.w0, b.w0)), Rec(max(a.w0, b.w0))); }\n");
    } else {
        let _ = writeln!(
            s,
            "fn cx(a: Rec, b: Rec) -> Pair {{\n    let s = less(b, a);\n    return Pair(Rec({}), Rec({}));\n}}",
            all(&|p| format!("select(a.w{p}, b.w{p}, s)")),
            all(&|p| format!("select(b.w{p}, a.w{p}, s)"))
        );
    }
    let _ = writeln!(
        s,
        "fn rev(r: Rec) -> Rec {{ return Rec({}); }}",
        all(&|p| format!("r.w{p}.wzyx"))
    );
    // 4x4 transpose of a quad, per plane
    s.push_str("struct Quad { q0: Rec, q1: Rec, q2: Rec, q3: Rec }\n");
    s.push_str("fn transpose4(q: Quad) -> Quad {\n    var t: Quad;\n");
    for p in planes(nw) {
        for (c, comp) in ["x", "y", "z", "w"].iter().enumerate() {
            let _ = writeln!(
                s,
                "    t.q{c}.w{p} = vec4<u32>(q.q0.w{p}.{comp}, q.q1.w{p}.{comp}, q.q2.w{p}.{comp}, q.q3.w{p}.{comp});"
            );
        }
    }
    s.push_str("    return t;\n}\n");
    s
}

/// Steps j = jmax .. 1 on 16 consecutive records held as a quad (see bitonic.wgsl).
fn reg_steps(jmax: u32, mirror: bool) -> String {
    let name = format!("reg_steps_{jmax}{}", if mirror { "_mirror" } else { "" });
    let mut s = format!("fn {name}(q: Quad) -> Quad {{\n    var q0 = q.q0; var q1 = q.q1; var q2 = q.q2; var q3 = q.q3;\n");
    let cx = |lo, hi, m| Cx { lo, hi, mirror: m };
    if jmax == 8 {
        for c in if mirror {
            [cx(0, 3, true), cx(1, 2, true)]
        } else {
            [cx(0, 2, false), cx(1, 3, false)]
        } {
            emit_cx(&mut s, "q", c);
        }
    }
    if jmax >= 4 {
        let m = mirror && jmax == 4;
        for c in [cx(0, 1, m), cx(2, 3, m)] {
            emit_cx(&mut s, "q", c);
        }
    }
    s.push_str("    var t = transpose4(Quad(q0, q1, q2, q3));\n    q0 = t.q0; q1 = t.q1; q2 = t.q2; q3 = t.q3;\n");
    if jmax >= 2 {
        // transposed, the mirror of k = 4 pairs components c and 3 - c of one vec4: no reversal
        let pairs = if mirror && jmax == 2 {
            [(0, 3), (1, 2)]
        } else {
            [(0, 2), (1, 3)]
        };
        for (a, b) in pairs {
            emit_cx(&mut s, "q", cx(a, b, false));
        }
    }
    for c in [cx(0, 1, false), cx(2, 3, false)] {
        emit_cx(&mut s, "q", c);
    }
    s.push_str("    return transpose4(Quad(q0, q1, q2, q3));\n}\n");
    s
}

/// The comparators of r fused steps on a group of 2^r vec4s (registers g0..), first mirrored or not.
fn group_network(r: u32, mirror: bool) -> Vec<Cx> {
    let size = 1usize << r;
    let half = size / 2;
    let mut ops = Vec::new();
    for m in 0..half {
        ops.push(if mirror {
            Cx {
                lo: m,
                hi: size - 1 - m,
                mirror: true,
            }
        } else {
            Cx {
                lo: m,
                hi: m + half,
                mirror: false,
            }
        });
    }
    let mut d = half / 2;
    while d > 0 {
        for m in 0..size {
            if m & d == 0 {
                ops.push(Cx {
                    lo: m,
                    hi: m | d,
                    mirror: false,
                });
            }
        }
        d /= 2;
    }
    ops
}

/// Load, both networks behind a uniform branch on `mirror`, store: for `load`/`store` in global
/// or workgroup memory.
fn group_body(r: u32, load: &str, store: &str, indent: &str) -> String {
    let size = 1u32 << r;
    let mut s = String::new();
    for m in 0..size {
        let _ = writeln!(
            s,
            "{indent}let i{m} = group_vec(gid, lo, {r}u, mirror, {m}u);"
        );
    }
    for m in 0..size {
        let _ = writeln!(s, "{indent}var g{m} = {load}(i{m});");
    }
    for (cond, mirror) in [("if (mirror) {", true), ("} else {", false)] {
        let _ = writeln!(s, "{indent}{cond}");
        let mut body = String::new();
        for c in group_network(r, mirror) {
            emit_cx(&mut body, "g", c);
        }
        for line in body.lines() {
            let _ = writeln!(s, "{indent}{line}");
        }
    }
    let _ = writeln!(s, "{indent}}}");
    for m in 0..size {
        let _ = writeln!(s, "{indent}{store}(i{m}, g{m});");
    }
    s
}

fn tile_steps(r: u32) -> String {
    format!(
        "fn tile_steps_{r}(li: u32, j: u32, mirror: bool) {{\n    let lo = firstTrailingBit(j / 4u) + 1u - {r}u;\n    \
         for (var gid = li; gid < (TILE_VECS >> {r}u); gid += WG) {{\n{}    }}\n}}\n",
        group_body(r, "load_tile", "store_tile", "        ")
    )
}

fn global_steps(r: u32) -> String {
    format!(
        "@compute @workgroup_size(WG)\nfn global_steps_{r}(@builtin(workgroup_id) wid: vec3<u32>, \
         @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {{\n    \
         let gid = linear_workgroup(wid, nwg) * WG + li;\n    let lo = firstTrailingBit(params.j / 4u) + 1u - {r}u;\n    \
         let mirror = params.mirror != 0u;\n    if (group_vec(gid, lo, {r}u, false, 0u) >= nvec()) {{ return; }}\n{}}}\n",
        group_body(r, "load_global", "store_global", "    ")
    )
}

/// Everything bitonic.wgsl expects to be generated for records of `nw` planes.
pub fn generated(nw: u32) -> String {
    let mut s = String::from("// ---- generated by crates/gpusort-core/src/bitonic_wgsl.rs ----\n");
    s.push_str(&rec_helpers(nw));
    for (jmax, mirror) in [(1, true), (2, true), (4, true), (8, true), (8, false)] {
        s.push_str(&reg_steps(jmax, mirror));
    }
    for r in 1..=2 {
        s.push_str(&tile_steps(r));
    }
    for r in 1..=crate::sort::MAX_FUSED_GLOBAL_STEPS {
        s.push_str(&global_steps(r));
    }
    s
}

/// The bitonic family for records of `nw` planes: the file plus its generated networks.
pub fn bitonic(nw: u32, wg: u32) -> String {
    crate::wgsl::compose(crate::wgsl::BITONIC, &[("NW", nw), ("WG", wg)]).replacen(
        "// @generated-networks",
        &generated(nw),
        1,
    )
}
