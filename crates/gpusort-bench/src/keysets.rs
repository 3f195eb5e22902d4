//! The key sets the sort suite measures every key type on (`--dtypes`, `--keys`), made from a
//! counter-based generator (splitmix64 of seed + (i+1)·φ) so that `bench/keysets.py` builds the
//! very same arrays in NumPy for CuPy's side of the comparison.

use gpusort_core::KeyType;
use rayon::prelude::*;

/// Every key set by name, and what it is.
pub const KEY_SETS: [(&str, &str); 16] = [
    (
        "uniform",
        "uniform over the whole type (floats: in [-1, 1))",
    ),
    ("unit", "floats uniform in [0, 1)"),
    ("normal", "floats normal(0, 1) (sum of 12 uniforms - 6)"),
    ("small", "integers in 0..1000"),
    ("pm20", "integers in -2^20..2^20 (unsigned: 0..2^21)"),
    (
        "timestamps",
        "seconds (32-bit) or microseconds (64-bit) over a year from 2023-11",
    ),
    ("sorted", "uniform, already sorted"),
    ("reverse", "uniform, sorted in reverse"),
    ("nearly", "uniform, sorted, then 1% of positions swapped"),
    ("equal", "one key repeated"),
    (
        "zipf",
        "a power-law skew: a uniform word shifted right by 0..width-1 bits",
    ),
    (
        "clustered",
        "floats: uniform in [1, 2) (one exponent: the top bits shared)",
    ),
    ("prices", "floats: whole cents from 0.00 to 999.99"),
    (
        "sizes",
        "log-uniform magnitudes, as file sizes: 2^e plus e random bits, e below 31 (64-bit: 63)",
    ),
    (
        "prefix",
        "integers: ids with a common top half and a random bottom half",
    ),
    ("few", "eight distinct uniform keys, repeated"),
];

/// Whether a key set is defined for a key type.
pub fn applies(t: KeyType, set: &str) -> bool {
    match set {
        "unit" | "normal" | "clustered" | "prices" => t.is_float(),
        "pm20" | "timestamps" | "prefix" => !t.is_float(),
        _ => KEY_SETS.iter().any(|(s, _)| *s == set),
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Word `i` of the stream `seed`.
pub fn word(seed: u64, i: u64) -> u64 {
    mix(seed.wrapping_add((i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)))
}

/// One key of set `set` for type `t` from the stream (`i` the element), as u64 bits of the key
/// (the low 32 for 32-bit types).
fn key(t: KeyType, set: &str, seed: u64, i: u64) -> u64 {
    let z = word(seed, i);
    let f64_bits = |x: f64| match t {
        KeyType::F32 => (x as f32).to_bits() as u64,
        _ => x.to_bits(),
    };
    let int = |v: i64| match t {
        KeyType::U32 | KeyType::I32 => v as u32 as u64,
        _ => v as u64,
    };
    let wide = t.is_wide();
    match set {
        "uniform" | "sorted" | "reverse" | "nearly" => match t {
            KeyType::F32 => f64_bits((z >> 40) as f64 / (1u64 << 23) as f64 - 1.0),
            KeyType::F64 => f64_bits((z >> 11) as f64 / (1u64 << 52) as f64 - 1.0),
            _ if wide => z,
            _ => z >> 32,
        },
        "unit" => match t {
            KeyType::F32 => f64_bits((z >> 40) as f64 / (1u64 << 24) as f64),
            _ => f64_bits((z >> 11) as f64 / (1u64 << 53) as f64),
        },
        "clustered" => match t {
            KeyType::F32 => f64_bits(1.0 + (z >> 40) as f64 / (1u64 << 24) as f64),
            _ => f64_bits(1.0 + (z >> 11) as f64 / (1u64 << 53) as f64),
        },
        "normal" => {
            let mut acc = 0.0f64;
            for k in 0..12 {
                acc += (word(seed, 12 * i + k) >> 11) as f64 / (1u64 << 53) as f64;
            }
            f64_bits(acc - 6.0)
        }
        "small" => match t.is_float() {
            true => f64_bits((z % 1000) as f64),
            false => z % 1000,
        },
        "pm20" => match t {
            KeyType::U32 | KeyType::U64 => z % (1 << 21),
            _ => int((z % (1 << 21)) as i64 - (1 << 20)),
        },
        "timestamps" => match wide {
            true => 1_700_000_000_000_000 + z % 31_536_000_000_000,
            false => 1_700_000_000 + z % 31_536_000,
        },
        "equal" => key(t, "uniform", seed, 0),
        "zipf" => match (wide, t.is_float()) {
            (true, false) => z >> (z & 63),
            (false, false) => (z >> 32) >> (z & 31),
            (_, true) => f64_bits(((z >> 32) >> (z & 31)) as f64),
        },
        "prices" => f64_bits((z % 100_000) as f64 / 100.0),
        "sizes" => {
            let e = (z >> 58) % if wide { 63 } else { 31 };
            let v = (1u64 << e) | (z & ((1u64 << e) - 1));
            match t.is_float() {
                true => f64_bits(v as f64),
                false => v,
            }
        }
        "prefix" => match wide {
            true => 0x5eed_5eed_0000_0000 | (z >> 32),
            false => 0x5eed_0000 | (z >> 48),
        },
        "few" => key(t, "uniform", seed, z % 8),
        _ => unreachable!("checked by applies()"),
    }
}

/// `n` keys of set `set` for type `T`.
pub fn generate<T: gpusort_core::SortKey>(set: &str, n: usize, seed: u64) -> Vec<T> {
    let t = T::TYPE;
    let mut v: Vec<T> = (0..n as u64)
        .into_par_iter()
        .map(|i| {
            let bits = key(t, set, seed, i).to_le_bytes();
            bytemuck::pod_read_unaligned::<T>(&bits[..t.size()])
        })
        .collect();
    let order = |a: &T, b: &T| {
        gpusort_core::reference::keys::sortable(a, false)
            .cmp(&gpusort_core::reference::keys::sortable(b, false))
    };
    match set {
        "sorted" => v.par_sort_by(order),
        "reverse" => v.par_sort_by(|a, b| order(b, a)),
        "nearly" => {
            v.par_sort_by(order);
            let swap_seed = seed ^ 0x5eed;
            for j in 0..(n / 100) as u64 {
                let a = word(swap_seed, 2 * j) % n as u64;
                let b = word(swap_seed, 2 * j + 1) % n as u64;
                v.swap(a as usize, b as usize);
            }
        }
        _ => {}
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A digest of each key set for n = 1000, seed 7: sum and position-weighted xor of the keys'
    /// bits. `bench/keysets_golden.json` pins it; `python/tests/test_bench_keysets.py` checks
    /// that bench/keysets.py (NumPy, for CuPy's side) gives the same arrays.
    fn digests() -> Vec<(String, u64, u64)> {
        fn of<T: gpusort_core::SortKey>(set: &str) -> (u64, u64) {
            let v: Vec<T> = generate(set, 1000, 7);
            v.iter().enumerate().fold((0u64, 0u64), |(s, x), (i, k)| {
                let mut b = [0u8; 8];
                b[..T::TYPE.size()].copy_from_slice(bytemuck::bytes_of(k));
                let bits = u64::from_le_bytes(b);
                (s.wrapping_add(bits), x ^ bits.wrapping_mul(i as u64 + 1))
            })
        }
        let mut out = Vec::new();
        for t in ["u32", "i32", "f32", "u64", "i64", "f64"] {
            let kt = KeyType::parse(t).unwrap();
            for (set, _) in KEY_SETS {
                if !applies(kt, set) {
                    continue;
                }
                let (s, x) = match kt {
                    KeyType::U32 => of::<u32>(set),
                    KeyType::I32 => of::<i32>(set),
                    KeyType::F32 => of::<f32>(set),
                    KeyType::U64 => of::<u64>(set),
                    KeyType::I64 => of::<i64>(set),
                    KeyType::F64 => of::<f64>(set),
                };
                out.push((format!("{t} {set}"), s, x));
            }
        }
        out
    }

    #[test]
    fn key_sets_match_their_pinned_digests() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../bench/keysets_golden.json"
        );
        let text = std::fs::read_to_string(path).expect("bench/keysets_golden.json");
        let golden: serde_json::Value = serde_json::from_str(&text).unwrap();
        let got: serde_json::Map<String, serde_json::Value> = digests()
            .into_iter()
            .map(|(n, s, x)| (n, serde_json::json!([s.to_string(), x.to_string()])))
            .collect();
        // on a deliberate change of a key set, the message is the file's new content
        assert!(
            serde_json::Value::Object(got.clone()) == golden,
            "the key sets changed; bench/keysets.py must change with them, and the digests are\n{}",
            serde_json::to_string_pretty(&got).unwrap()
        );
    }
}
