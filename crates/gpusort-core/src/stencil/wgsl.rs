//! The WGSL of a job's kernels: the shader families with the job's constants and its taps
//! unrolled into the marked blocks.

use super::choice::*;
use super::job::map_axis;
use super::job::*;
use crate::keys::KeyType;

pub(super) const WG: u32 = 256;

/// A WGSL literal of type `T` for `v` (exact: shortest round-trip digits of the f64, which for an
/// f32 weight converts back to the same f32).
fn literal(v: f64) -> String {
    format!("T({v:?})")
}

/// Replace every line that holds only `marker` with `code`, indented as the marker was.
fn fill(text: &str, marker: &str, code: &str) -> String {
    let mut out = String::with_capacity(text.len() + code.len());
    for line in text.split_inclusive('\n') {
        if line.trim() == marker {
            let indent = &line[..line.len() - line.trim_start().len()];
            for l in code.lines() {
                out.push_str(indent);
                out.push_str(l);
                out.push('\n');
            }
        } else {
            out.push_str(line);
        }
    }
    out
}

/// The WGSL names of a vec4's components.
const COMP: [char; 4] = ['x', 'y', 'z', 'w'];

/// Four cells in each of `mz` consecutive rows (the z of the 3-D view), from vec4 loads that each
/// row's taps share: `load(dz, dy, m)` is the vec4 `dz` rows below the block's first, `dy` rows
/// along y and `m` vec4s along x from the group's own, emitted just before the first row that
/// needs it (short live ranges); `store(i)` stores row i's `vec4<T>(a{i}_0, .., a{i}_3)`. Each
/// cell sums its taps in tap order, as every other kernel does.
fn gather4_rows(
    job: &StencilJob,
    mz: i32,
    load: &dyn Fn(i32, i32, i32) -> String,
    store: &dyn Fn(i32) -> String,
) -> String {
    let taps = job.stencil.taps();
    let per16 = 16 / job.cell_bytes() as usize;
    let name = |z: i32, dy: i32, m: i32| format!("q_{}_{}_{}", z + 64, dy + 64, m + 64);
    let mut loaded = std::collections::HashSet::new();
    let mut s = String::new();
    for i in 0..mz {
        for t in taps {
            let [dz, dy, dx] = t.offset;
            for j in 0..4 {
                let key = (i + dz, dy, (j + dx).div_euclid(4));
                if loaded.insert(key) {
                    s += &format!(
                        "let {} = {};\n",
                        name(key.0, key.1, key.2),
                        load(key.0, key.1, key.2)
                    );
                }
            }
        }
        for j in 0..4 {
            s += &format!("var a{i}_{j} = T(p.zero);\n");
        }
        for (k, t) in taps.iter().enumerate() {
            let [dz, dy, dx] = t.offset;
            for j in 0..4 {
                let at = j + dx;
                s += &format!(
                    "a{i}_{j} = a{i}_{j} + weights[{}][{}] * {}.{};\n",
                    k / per16,
                    k % per16,
                    name(i + dz, dy, at.div_euclid(4)),
                    COMP[at.rem_euclid(4) as usize]
                );
            }
        }
        s += &store(i);
    }
    s
}

/// [`gather4_rows`] for a full box too wide to unroll ([`full_box`]): a loop over the input
/// rows (dz, dy) that the `mz` output rows' taps reach, each loading its 2·GR + 1 vec4s once
/// (`load(row, m)`, `row` the row's vec4 offset from the block's first as a WGSL expression) and
/// adding the taps along x of every output row whose tap row it is. Each cell still adds its taps
/// in tap order (rows in order, x within a row), so it rounds like every other kernel.
fn loop4_rows(
    job: &StencilJob,
    mz: i32,
    load: &dyn Fn(&str, i32) -> String,
    store: &dyn Fn(i32) -> String,
) -> String {
    let [rz, ry, rx] = job.stencil.reach();
    let [_, ny, nx] = job.shape.as_3d();
    let (plane4, nx4) = ((ny * nx / 4) as i64, (nx / 4) as i64);
    let per16 = 16 / job.cell_bytes() as i32;
    let gr = (rx + 3) / 4;
    let mut s = String::new();
    for i in 0..mz {
        for j in 0..4 {
            s += &format!("var a{i}_{j} = T(p.zero);\n");
        }
    }
    s += &format!("for (var zi = 0; zi < {}; zi++) {{\n", mz + 2 * rz);
    s += &format!("for (var yi = 0; yi < {}; yi++) {{\n", 2 * ry + 1);
    let row = format!("(zi - {rz}) * {plane4} + (yi - {ry}) * {nx4}");
    for m in -gr..=gr {
        s += &format!("let q{} = {};\n", m + gr, load(&row, m));
    }
    for i in 0..mz {
        // output row i reads tap row dz = zi - RZ - i
        s += &format!("if (zi >= {i} && zi <= {}) {{\n", i + 2 * rz);
        s += &format!(
            "let wb = ((zi - {i}) * {} + yi) * {};\n",
            2 * ry + 1,
            2 * rx + 1
        );
        for dx in -rx..=rx {
            s += &format!(
                "let w{} = weights[u32(wb + {}) / {per16}u][u32(wb + {}) % {per16}u];\n",
                dx + rx,
                dx + rx,
                dx + rx
            );
        }
        for dx in -rx..=rx {
            for j in 0..4 {
                let at = j + dx;
                s += &format!(
                    "a{i}_{j} = a{i}_{j} + w{} * q{}.{};\n",
                    dx + rx,
                    at.div_euclid(4) + gr,
                    COMP[at.rem_euclid(4) as usize]
                );
            }
        }
        s += "}\n";
    }
    s += "}\n}\n";
    for i in 0..mz {
        s += &store(i);
    }
    s
}

/// The components of each tap row's vec4 columns `(dz, dy, m)` (m vec4s from a block of four
/// cells' own) that some tap of the four cells reads: what the passes in registers shuffle.
fn components_read(job: &StencilJob) -> std::collections::HashMap<(i32, i32, i32), [bool; 4]> {
    let mut need = std::collections::HashMap::<(i32, i32, i32), [bool; 4]>::new();
    for t in job.stencil.taps() {
        let [dz, dy, dx] = t.offset;
        for j in 0..4 {
            let at = j + dx;
            need.entry((dz, dy, at.div_euclid(4))).or_default()[at.rem_euclid(4) as usize] = true;
        }
    }
    need
}

/// The generated blocks of `steps_lanes` (stencil_vec.wgsl) for K = `k`: the windows of rows
/// per level (`w{s}_{m}`, s < K, oldest row first), and one iteration's levels, last first: level
/// s sums its four cells from level s - 1's window as the previous iteration left it (columns of
/// other lanes through subgroup shuffles of the components its taps read) and pushes them into
/// its own window, level K stores them, and level 0 takes the row loaded last.
fn lanes_code(job: &StencilJob, k: i32) -> (String, String) {
    let rz = job.stencil.reach()[0];
    let win = 2 * rz + 1;
    let need = components_read(job);
    let mut windows = String::new();
    for s in 0..k {
        for m in 0..win {
            windows += &format!("var w{s}_{m} = vec4<T>(T(0));\n");
        }
    }
    let push = |s: i32, value: &str| -> String {
        let mut c: String = (0..win - 1)
            .map(|m| format!("w{s}_{m} = w{s}_{};\n", m + 1))
            .collect();
        c += &format!("w{s}_{} = {value};\n", win - 1);
        c
    };
    let mut levels = String::new();
    for s in (1..=k).rev() {
        let load = |dz: i32, _dy: i32, m: i32| -> String {
            let row = format!("w{}_{}", s - 1, rz + dz);
            if m == 0 {
                return row;
            }
            let used = need.get(&(dz, 0, m)).copied().unwrap_or_default();
            let parts: Vec<String> = (0..4)
                .map(|c| match (used[c], m < 0) {
                    (false, _) => "T(0)".to_string(),
                    (true, true) => format!("subgroupShuffleUp({row}.{}, {}u)", COMP[c], -m),
                    (true, false) => format!("subgroupShuffleDown({row}.{}, {}u)", COMP[c], m),
                })
                .collect();
            format!("vec4<T>({})", parts.join(", "))
        };
        let cells = "vec4<T>(a0_0, a0_1, a0_2, a0_3)";
        let store = |_: i32| -> String {
            if s < k {
                push(s, cells)
            } else {
                format!(
                    "if (i >= WARM && out_ok) {{\n    dst[(first_in + i - K * (RZ + 1)) * NX4 + col] = {cells};\n}}\n"
                )
            }
        };
        levels += &format!("{{\n{}}}\n", gather4_rows(job, 1, &load, &store));
    }
    levels += &push(0, "cur");
    (windows, levels)
}

/// The generated blocks of `steps_planes` (stencil_vec.wgsl) for K = `k` and `mr` rows an
/// invocation, by marker: each row's offsets and tile slots along y, the windows, the ring of
/// loads ahead, and the loop's body unrolled 2·RZ + 1 times (one rotation of the windows each):
/// loads, the fixups of window slots past the grid's ends along z, the stores of the planes
/// other rows read, and the levels (last first, as [`lanes_code`] builds them, with the rows off
/// the cell's own read from workgroup memory and the cells past the grid's x edges mirrored from
/// the invocation's own lane or its neighbour's).
fn planes_code(job: &StencilJob, k: i32, mr: i32) -> Vec<(&'static str, String)> {
    let [rz, _, _] = job.stencil.reach();
    let win = 2 * rz + 1;
    let b = job.boundary;
    let constant = b == Boundary::Constant;
    let shp = shared_planes(job);
    let rows = tap_rows(job);
    let need = components_read(job);
    let mut dys: Vec<i32> = rows
        .iter()
        .map(|&(_, dy)| dy)
        .filter(|&dy| dy != 0)
        .collect();
    dys.sort_unstable();
    dys.dedup();
    let (mut row_vars, mut windows, mut preload) = (String::new(), String::new(), String::new());
    for t in 0..mr {
        row_vars += &format!(
            "let y_{t} = y0 + {t};\nlet base_{t} = clamp(y_{t}, 0, NY - 1) * NX4 + colc;\n\
             let ok_{t} = col_ok && r0 + {t} >= KY && r0 + {t} < rows - KY && y_{t} < NY;\n"
        );
        for dy in &dys {
            let n = dy + 64;
            row_vars +=
                &format!("let ys_{t}_{n} = tile_row(y_{t} + {dy}, yb, rows) * sg + lane;\n");
            if constant {
                row_vars += &format!("let yo_{t}_{n} = y_{t} + {dy} < 0 || y_{t} + {dy} >= NY;\n");
            }
        }
        for s in 0..k {
            for m in 0..win {
                windows += &format!("var w{s}_{m}_{t} = vec4<T>(T(0));\n");
            }
        }
        for u in 0..win {
            preload += &format!(
                "var ld{u}_{t} = src[clamp(first_in + {u}, 0, p.res_rows - 1) * plane + base_{t}];\n"
            );
        }
    }
    // the register of logical window slot m (oldest plane first) at rotation u
    let reg = |s: i32, m: i64, t: i32, u: i32| {
        format!("w{s}_{}_{t}", (m + u as i64).rem_euclid(win as i64))
    };
    let big = 1i64 << 30;
    let nx = job.shape.as_3d()[2] as i64;
    let nx4 = nx / 4;
    // the cell x (outside the grid) a lane at the grid's first or last vec4 column reads,
    // from its own vec4 or a neighbour's
    let edge_cell = |row: &str, x: i64, own_col: i64| -> String {
        match map_axis(b, x, nx) {
            None => "T(CVAL)".to_string(),
            Some(v) => {
                let off = v.div_euclid(4) - own_col;
                let c = COMP[v.rem_euclid(4) as usize];
                match off {
                    0 => format!("{row}.{c}"),
                    1 => format!("subgroupShuffleDown({row}.{c}, 1u)"),
                    -1 => format!("subgroupShuffleUp({row}.{c}, 1u)"),
                    _ => unreachable!("Blocking::planes_fit keeps rows of at least 3 vec4s"),
                }
            }
        }
    };
    // One iteration at rotation u: loads, edge fixups, stores, barrier, levels, pushes.
    let body = |u: i32| -> String {
        let mut out = String::new();
        for t in 0..mr {
            out += &format!("let cur_{t} = ld{u}_{t};\n");
            out += &format!(
                "ld{u}_{t} = src[clamp(first_in + i + {win}, 0, p.res_rows - 1) * plane + base_{t}];\n"
            );
        }
        // along z: a window slot (plane d from the plane gz its level computes) past the
        // grid's first or last plane takes the slot of the plane it mirrors. At gz = 0 every
        // slot before the grid is set (later planes see them shifted down); towards the end
        // each of the last RZ planes sets the slots past the grid that entered since.
        let slot = |s: i32, d: i64, from: Option<i64>| -> String {
            let m = rz as i64 + d;
            (0..mr)
                .map(|t| match from {
                    Some(v) => format!("{} = {};\n", reg(s, m, t, u), reg(s, rz as i64 + v, t, u)),
                    None => format!("{} = vec4<T>(CVAL);\n", reg(s, m, t, u)),
                })
                .collect()
        };
        for s in 1..=k {
            if rz == 0 {
                break;
            }
            let w = s - 1;
            out += &format!(
                "{{\nlet gz = first_in + i - {} + p.res_lo;\nif (gz == 0) {{\n",
                s * (rz + 1)
            );
            for d in -(rz as i64)..0 {
                out += &slot(w, d, map_axis(b, d, big));
            }
            out += "}\n";
            for t in 0..rz as i64 {
                // gz = rows - 1 - t: planes gz + d for d > t lie past the end
                out += &format!("if (gz == p.rows - 1 - {t}) {{\n");
                for d in t + 1..=rz as i64 {
                    let from = map_axis(b, big - 1 + d - t, big).map(|v| v - (big - 1) + t);
                    out += &slot(w, d, from);
                }
                out += "}\n";
            }
            out += "}\n";
        }
        out += "let buf = (i % NB) * K * SHP * TP;\n";
        for s in 0..k {
            for (idx, &m) in shp.iter().enumerate() {
                for t in 0..mr {
                    out += &format!(
                        "sh[buf + {} * TP + (r0 + {t}) * sg + lane] = {};\n",
                        s as usize * shp.len() + idx,
                        reg(s, m as i64, t, u)
                    );
                }
            }
        }
        out += "workgroupBarrier();\n";
        for s in (1..=k).rev() {
            for t in 0..mr {
                let mut block = String::new();
                for (n, &(dz, dy)) in rows.iter().enumerate() {
                    let m = rz + dz;
                    let value = if dy == 0 {
                        reg(s - 1, m as i64, t, u)
                    } else {
                        let idx = shp.iter().position(|&q| q == m).expect("a shared plane");
                        let at = format!(
                            "sh[buf + {} * TP + ys_{t}_{}]",
                            (s - 1) as usize * shp.len() + idx,
                            dy + 64
                        );
                        if constant {
                            format!("select({at}, vec4<T>(CVAL), yo_{t}_{})", dy + 64)
                        } else {
                            at
                        }
                    };
                    block += &format!("let r_{n} = {value};\n");
                }
                let tap = |dz: i32, dy: i32, m: i32| -> String {
                    let n = rows.iter().position(|&r| r == (dz, dy)).expect("a tap row");
                    let row = format!("r_{n}");
                    if m == 0 {
                        return row;
                    }
                    let used = need.get(&(dz, dy, m)).copied().unwrap_or_default();
                    let parts: Vec<String> = (0..4)
                        .map(|c| {
                            if !used[c] {
                                return "T(0)".to_string();
                            }
                            let comp = COMP[c];
                            if m < 0 {
                                let edge = edge_cell(&row, 4 * m as i64 + c as i64, 0);
                                format!(
                                    "select(subgroupShuffleUp({row}.{comp}, {}u), {edge}, at_l)",
                                    -m
                                )
                            } else {
                                let x = 4 * (nx4 - 1 + m as i64) + c as i64;
                                let edge = edge_cell(&row, x, nx4 - 1);
                                format!(
                                    "select(subgroupShuffleDown({row}.{comp}, {m}u), {edge}, at_r)"
                                )
                            }
                        })
                        .collect();
                    format!("vec4<T>({})", parts.join(", "))
                };
                let cells = "vec4<T>(a0_0, a0_1, a0_2, a0_3)";
                // a push writes the oldest slot, which the next rotation makes the newest
                let store = |_: i32| -> String {
                    if s < k {
                        format!("{} = {cells};\n", reg(s, 0, t, u))
                    } else {
                        format!(
                            "if (i >= WARM && ok_{t}) {{\n    dst[(first_in + i - K * (RZ + 1)) * plane + y_{t} * NX4 + col] = {cells};\n}}\n"
                        )
                    }
                };
                block += &gather4_rows(job, 1, &tap, &store);
                out += &format!("{{\n{block}}}\n");
            }
        }
        for t in 0..mr {
            out += &format!("{} = cur_{t};\n", reg(0, 0, t, u));
        }
        // with one buffer, the next iteration's stores would overwrite what slower subgroups
        // still read; with two they go to the other, which every subgroup finished reading
        // before the barrier above
        out += "if (NB == 1) {\n    workgroupBarrier();\n}\n";
        out
    };
    let mut looped = String::new();
    for u in 0..win {
        if u > 0 {
            looped += &format!("if (i0 + {u} >= iterations) {{\n    break;\n}}\n");
        }
        looped += &format!("{{\nlet i = i0 + {u};\n{}}}\n", body(u));
    }
    vec![
        ("// @generated-planes-rows", row_vars),
        ("// @generated-planes-windows", windows),
        ("// @generated-planes-preload", preload),
        ("// @generated-planes-loop", looped),
    ]
}

/// The kernel source for a job: the prelude constants and the generated tap code, with the
/// four-cell kernels where [`four_cells`] allows them and the streamed pass where `blocking`
/// is given (its workgroup memory sized for a device with 48 KiB of it).
pub fn source(job: &StencilJob, choice: KernelChoice) -> String {
    source_with(job, choice, four_cells(job), 48 << 10)
}

/// The plane rows a workgroup of `step4` covers: the `asked` ones (`KernelChoice::plane_rows`)
/// on 3-D grids with four cells per invocation, else 1; more where rows are narrower than the
/// patch (WG / rows vec4s), so that few of its invocations fall past the row's end; and 1 where
/// patches would still leave half their invocations past the plane's edges (small planes, which
/// workgroups along x pack without a gap).
pub(super) fn plane_rows(job: &StencilJob, asked: u32, four: bool) -> u32 {
    let [_, ny, nx] = job.shape.as_3d();
    let nx4 = nx as u64 / 4;
    if !four || ny <= 1 || asked <= 1 || nx4 == 0 {
        return 1;
    }
    let th = asked.max(WG / (nx4.next_power_of_two().min(WG as u64) as u32));
    let tw = (WG / th) as u64;
    let covered = (ny as u64).div_ceil(th as u64) * th as u64 * nx4.div_ceil(tw) * tw;
    if 2 * ny as u64 * nx4 < covered {
        return 1;
    }
    th
}

/// [`source`], with the four-cell kernels where `four` (decided by the caller within what
/// [`four_cells`] allows).
pub(super) fn source_with(
    job: &StencilJob,
    choice: KernelChoice,
    four: bool,
    workgroup_bytes: u32,
) -> String {
    let blocking = choice.blocking;
    let mz = choice.rows.max(1) as i32;
    let [_, ny, nx] = job.shape.as_3d();
    let [rz, ry, rx] = job.stencil.reach();
    let taps = job.stencil.taps();
    let ty = if job.dtype == KeyType::F64 {
        "f64"
    } else {
        "f32"
    };
    let cval = if job.dtype == KeyType::F32 {
        job.cval as f32 as f64
    } else {
        job.cval
    };
    // A finite boundary value is a constant; NaN and ±inf cannot be WGSL constants, so they are
    // read from the weights' last element, which the host fills with the value (kernel.rs)
    let cval_text = match cval.is_finite() {
        true => literal(cval),
        false => "T(0.0)".to_string(),
    };
    let mut s = format!(
        "alias T = {ty};\nconst NX: i32 = {nx};\nconst NY: i32 = {ny};\nconst MODE: u32 = {}u;\n\
         const CVAL: T = {};\nconst RZ: i32 = {rz};\nconst RY: i32 = {ry};\nconst RX: i32 = {rx};\n\
         const NTAPS: u32 = {}u;\nconst NWEIGHTS: u32 = {}u;\nalias WEIGHTS = vec{}<T>;\nconst WG: u32 = {WG}u;\n",
        job.boundary.code(),
        cval_text,
        taps.len().max(1),
        weight_elements(job),
        16 / job.cell_bytes(),
    );
    if four {
        s += &format!(
            "alias CELLS = vec4<T>;\nconst GR: i32 = {};\nconst MZ: i32 = {mz};\nconst TH: u32 = {}u;\n\
             fn ld(i: i32) -> T {{ return src[i >> 2u][i & 3]; }}\n\
             fn st(i: i32, v: T) {{ dst[i >> 2u][i & 3] = v; }}\n",
            reach_vec4(job),
            plane_rows(job, choice.plane_rows, four)
        );
    } else {
        s += "alias CELLS = T;\nfn ld(i: i32) -> T { return src[i]; }\n\
              fn st(i: i32, v: T) { dst[i] = v; }\n";
    }
    s.push_str(crate::wgsl::COMMON);
    s.push('\n');
    let plane = (ny * nx) as i64;
    let unrolled = taps.len() <= UNROLL_TAPS;
    let per16 = 16 / job.cell_bytes() as usize;
    // One cell's sum: the same text in every kernel of a job, so every path rounds alike.
    let sum = if unrolled {
        (0..taps.len())
            .map(|k| {
                format!(
                    "acc = acc + weights[{}][{}] * v[{k}];\n",
                    k / per16,
                    k % per16
                )
            })
            .collect::<String>()
    } else {
        format!("for (var k = 0u; k < NTAPS; k++) {{\n    acc = acc + weights[k / {per16}u][k % {per16}u] * v[k];\n}}\n")
    };
    // Gathers: one statement per tap, or a loop over the tap table for wide stencils (whose
    // unrolled code takes a software compiler minutes).
    let gather = |one: &dyn Fn(&Tap) -> String, looped: &str| -> String {
        if unrolled {
            taps.iter()
                .enumerate()
                .map(|(k, t)| format!("v[{k}] = {};\n", one(t)))
                .collect()
        } else {
            format!(
                "for (var k = 0u; k < NTAPS; k++) {{\n    let o = tap_offsets[k];\n    v[k] = {looped};\n}}\n"
            )
        }
    };
    let direct = gather(
        &|t| {
            let [dz, dy, dx] = t.offset;
            format!(
                "ld(c + {})",
                dz as i64 * plane + dy as i64 * nx as i64 + dx as i64
            )
        },
        "ld(c + o.w)",
    );
    let fetch = gather(
        &|t| {
            let [dz, dy, dx] = t.offset;
            format!("fetch(zr + {dz}, y + {dy}, x + {dx})")
        },
        "fetch(zr + o.x, y + o.y, x + o.z)",
    );
    let mut text = fill(crate::wgsl::STENCIL, "// @generated-direct", &direct);
    // `step2`: the offsets of both cells' taps, each loaded once, then each cell's sum in tap
    // order with the same expression as `sum`
    let mut direct2 = String::new();
    if unrolled {
        let off = |t: &Tap, j: i64| {
            let [dz, dy, dx] = t.offset;
            dz as i64 * plane + dy as i64 * nx as i64 + dx as i64 + j
        };
        let mut loaded = std::collections::HashSet::new();
        for j in 0..2 {
            for t in taps {
                let o = off(t, j);
                if loaded.insert(o) {
                    direct2 += &format!("let l_{} = ld(c + {o});\n", o + (1 << 30));
                }
            }
        }
        for j in 0..2 {
            direct2 += &format!("var acc{j} = T(p.zero);\n");
            for (k, t) in taps.iter().enumerate() {
                direct2 += &format!(
                    "acc{j} = acc{j} + weights[{}][{}] * l_{};\n",
                    k / per16,
                    k % per16,
                    off(t, j) + (1 << 30)
                );
            }
            direct2 += &format!("st(c + {j}, acc{j});\n");
        }
    } else {
        direct2 += "st(c, cell_at(zr, y, x));\nst(c + 1, cell_at(zr, y, x + 1));\n";
    }
    text = fill(&text, "// @generated-direct2", &direct2);
    text = fill(&text, "// @generated-fetch", &fetch);
    if four {
        let (vec, planes) = crate::wgsl::STENCIL_VEC
            .split_once("// @planes")
            .and_then(|(a, b)| Some((a, b.split_once('\n')?.1)))
            .expect("stencil_vec.wgsl marks its 3-D part in registers");
        let (step4, streamed) = vec
            .split_once("// @streamed")
            .and_then(|(a, b)| Some((a, b.split_once('\n')?.1)))
            .expect("stencil_vec.wgsl marks its streamed part");
        let row_off = |dz: i32, dy: i32| (dz as i64 * plane + dy as i64 * nx as i64) / 4;
        let store = |i: i32| {
            format!(
                "dst[c4 + {}] = vec4<T>(a{i}_0, a{i}_1, a{i}_2, a{i}_3);\n",
                i as i64 * plane / 4
            )
        };
        let (direct4, xedge4) = if unrolled {
            (
                gather4_rows(
                    job,
                    mz,
                    &|dz, dy, m| format!("src[c4 + {}]", row_off(dz, dy) + m as i64),
                    &store,
                ),
                gather4_rows(
                    job,
                    mz,
                    &|dz, dy, m| format!("ld4(row4 + {}, xg + {m})", row_off(dz, dy)),
                    &store,
                ),
            )
        } else {
            (
                loop4_rows(job, mz, &|row, m| format!("src[c4 + {row} + {m}]"), &store),
                loop4_rows(
                    job,
                    mz,
                    &|row, m| format!("ld4(row4 + {row}, xg + {m})"),
                    &store,
                ),
            )
        };
        let step4 = fill(step4, "// @generated-direct4", &direct4);
        text += &fill(&step4, "// @generated-xedge4", &xedge4);
        if let Some(b) = blocking.filter(|b| b.is_planes(job)) {
            text += &format!(
                "\nconst K: i32 = {};\nconst PWG: u32 = {}u;\nconst MR: i32 = {};\n\
                 const SHP: i32 = {};\nconst NB: i32 = {};\n",
                b.steps,
                b.workgroup,
                b.tile_rows,
                shared_planes(job).len().max(1),
                b.plane_buffers(job, workgroup_bytes)
            );
            let mut part = planes.to_string();
            for (marker, code) in planes_code(job, b.steps as i32, b.tile_rows as i32) {
                part = fill(&part, marker, &code);
            }
            text += &part;
        } else if let Some(b) = blocking {
            let mut lanes_part = String::new();
            text += &format!(
                "\nconst K: i32 = {};\nconst RB: i32 = {};\nconst D: i32 = {};\nconst TY: i32 = {};\n\
                 const LW4: i32 = {};\nconst HY: i32 = {};\nconst HG: i32 = {};\n\
                 const SWG: u32 = {}u;\nconst PRE: i32 = {};\nconst LANES: bool = {};\n",
                b.steps,
                b.planes,
                ring_depth(job, b.planes),
                b.tile_rows,
                b.tile_vec4s,
                b.halo_rows(job),
                b.halo_vec4s(job),
                b.workgroup,
                (b.planes * b.tile_rows * b.tile_vec4s).div_ceil(b.workgroup),
                b.lanes
            );
            let tile_fetch = gather(
                &|t| {
                    let [dz, dy, dx] = t.offset;
                    format!("tile_fetch(lb, zr + {dz}, y + {dy}, x + {dx}, y0, x0)")
                },
                "tile_fetch(lb, zr + o.x, y + o.y, x + o.z, y0, x0)",
            );
            // one row of four cells into `out`: the streamed kernels' own loads
            let to_out = |_: i32| "out = vec4<T>(a0_0, a0_1, a0_2, a0_3);\n".to_string();
            let tile4 = gather4_rows(
                job,
                1,
                &|dz, dy, m| {
                    format!("ring[lb + slot(z + {dz}) * PLANE4 + (ly + {dy}) * LW4 + lg + {m}]")
                },
                &to_out,
            );
            let rows = tap_rows(job);
            let row_bases: String = rows
                .iter()
                .enumerate()
                .map(|(n, (dz, dy))| {
                    format!("let rb{n} = lb + slot(z + {dz}) * PLANE4 + {dy} * LW4;\n")
                })
                .collect();
            let interior4 = gather4_rows(
                job,
                1,
                &|dz, dy, m| {
                    let n = rows.iter().position(|&r| r == (dz, dy)).expect("a tap row");
                    format!("ring[rb{n} + e + {m}]")
                },
                &to_out,
            );
            let (streamed, lanes) = streamed
                .split_once("// @lanes")
                .and_then(|(a, b)| Some((a, b.split_once('\n')?.1)))
                .expect("stencil_vec.wgsl marks its part in registers");
            if b.lanes {
                let (windows, levels) = lanes_code(job, b.steps as i32);
                let mut part = format!("const LANES_WG: u32 = {LANES_WG}u;\n");
                part += &fill(lanes, "// @generated-lanes-windows", &windows);
                lanes_part = fill(&part, "// @generated-lanes-levels", &levels);
            }
            let mut part = fill(streamed, "// @generated-tile-fetch", &tile_fetch);
            part = fill(&part, "// @generated-tile4", &tile4);
            part = fill(&part, "// @generated-interior-rows", &row_bases);
            text += &fill(&part, "// @generated-interior4", &interior4);
            text += &lanes_part;
        }
    }
    let source = s + &fill(&text, "// @generated-sum", &sum);
    match cval.is_finite() {
        true => source,
        false => source.replacen("const CVAL: T = T(0.0);\n", "", 1).replace(
            "CVAL",
            &format!("weights[{}u][0]", weight_elements(job) - 1),
        ),
    }
}

/// Elements of the weights' uniform array (16 bytes each: four f32 or two f64 weights): the
/// taps', then, where the boundary value (`cval`) is not finite, one that starts with it (a
/// finite one is a constant, and its kernels' text is the same as without this element).
pub(crate) fn weight_elements(job: &StencilJob) -> usize {
    job.stencil
        .taps
        .len()
        .div_ceil(16 / job.cell_bytes() as usize)
        .max(1)
        + !job.cval.is_finite() as usize
}
