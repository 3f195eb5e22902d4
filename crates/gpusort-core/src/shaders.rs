//! The WGSL sources (one file per kernel family under `shaders/`) and how they are composed.
//!
//! A kernel's source is `const NAME: u32 = V;` lines for its configuration, then
//! `shaders/common/grid.wgsl`, then the family's file. Plain constants, not pipeline overrides,
//! because they size workgroup arrays and private register arrays.

pub const COMMON: &str = include_str!("../../../shaders/common/grid.wgsl");
pub const BITONIC: &str = include_str!("../../../shaders/bitonic.wgsl");
pub const BITONIC_PLAIN: &str = include_str!("../../../shaders/bitonic_plain.wgsl");
pub const KEYS: &str = include_str!("../../../shaders/keys.wgsl");
pub const COPY: &str = include_str!("../../../shaders/copy.wgsl");

/// Source of one kernel family with its compile-time constants.
pub fn compose(family: &str, consts: &[(&str, u32)]) -> String {
    let mut s = String::new();
    for (name, value) in consts {
        s.push_str(&format!("const {name}: u32 = {value}u;\n"));
    }
    s.push_str(COMMON);
    s.push('\n');
    s.push_str(family);
    s
}

/// The bitonic family for records of `nw` planes: the file plus its generated networks.
pub fn bitonic(nw: u32, wg: u32) -> String {
    compose(BITONIC, &[("NW", nw), ("WG", wg)]).replacen(
        "// @generated-networks",
        &crate::bitonic_wgsl::generated(nw),
        1,
    )
}

/// Every (family name, composed source) configuration the library can build, so a test can run
/// each through naga's validator without a GPU.
pub fn all_configurations() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for nw in 1..=4 {
        for wg in [64, 128, 256] {
            out.push((format!("bitonic NW={nw} WG={wg}"), bitonic(nw, wg)));
        }
    }
    out.push((
        "bitonic_plain".into(),
        compose(BITONIC_PLAIN, &[("WG", 256)]),
    ));
    out.push(("keys".into(), compose(KEYS, &[("WG", 256)])));
    out.push(("copy".into(), compose(COPY, &[("WG", 256)])));
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
                naga::valid::Capabilities::all(),
            )
            .validate(&module)
            .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(&source)));
        }
    }
}
