//! Key types gpusort sorts, and the order they sort in.
//!
//! Order: integers numerically; floats in IEEE total order except that every NaN sorts last in
//! both directions and comes back as the canonical quiet NaN (all other values bit-exact);
//! -0.0 sorts before +0.0. Sorts are stable: equal keys keep their input order.

pub mod order;

use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum KeyType {
    U32,
    I32,
    F32,
    U64,
    I64,
    F64,
}

impl KeyType {
    pub const ALL: [KeyType; 6] = [
        KeyType::U32,
        KeyType::I32,
        KeyType::F32,
        KeyType::U64,
        KeyType::I64,
        KeyType::F64,
    ];

    /// Bytes per key.
    pub fn size(self) -> usize {
        if self.is_wide() {
            8
        } else {
            4
        }
    }

    /// 64-bit keys travel as two u32 words (no SHADER_INT64 needed).
    pub fn is_wide(self) -> bool {
        matches!(self, KeyType::U64 | KeyType::I64 | KeyType::F64)
    }

    pub fn is_float(self) -> bool {
        matches!(self, KeyType::F32 | KeyType::F64)
    }

    /// The `kind` code the WGSL key transforms use.
    pub fn code(self) -> u32 {
        match self {
            KeyType::U32 => 0,
            KeyType::I32 => 1,
            KeyType::F32 => 2,
            KeyType::U64 => 3,
            KeyType::I64 => 4,
            KeyType::F64 => 5,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            KeyType::U32 => "u32",
            KeyType::I32 => "i32",
            KeyType::F32 => "f32",
            KeyType::U64 => "u64",
            KeyType::I64 => "i64",
            KeyType::F64 => "f64",
        }
    }

    pub fn parse(s: &str) -> Result<KeyType> {
        KeyType::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "unknown dtype '{s}' (expected u32, i32, f32, u64, i64 or f64)"
                ))
            })
    }
}

impl std::fmt::Display for KeyType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A host type that can be sorted.
pub trait SortKey: bytemuck::Pod + Send + Sync + std::fmt::Debug {
    const TYPE: KeyType;
}

macro_rules! sort_key {
    ($($t:ty => $k:ident),*) => { $(impl SortKey for $t { const TYPE: KeyType = KeyType::$k; })* };
}
sort_key!(u32 => U32, i32 => I32, f32 => F32, u64 => U64, i64 => I64, f64 => F64);

/// What order to sort in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SortOrder {
    pub descending: bool,
    /// Sort independent segments of this many keys (the last may be shorter); None sorts all.
    pub segment_size: Option<u32>,
}
