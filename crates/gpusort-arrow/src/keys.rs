//! Sort keys of Arrow columns packed into unsigned words whose plain order is Arrow's (and
//! DataFusion's) order of the rows.
//!
//! Each key column becomes an order-preserving code of its width (signed: sign bit flipped;
//! floats: IEEE 754 totalOrder, as Arrow's sort kernels order them: -NaN < -inf < … < -0 < +0 <
//! … < +inf < NaN; DESC: the code inverted), with one bit above it where the column holds nulls
//! (set for non-null rows under NULLS FIRST, for null rows under NULLS LAST). Codes are packed
//! from the most significant key down into words of at most 64 bits; a word of at most 32 bits is
//! sorted as u32. Several words are sorted from the last to the first with a stable sort, so the
//! rows end in lexicographic order of all keys, ties in input order.

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::SortOptions;
use arrow::datatypes::*;
use rayon::prelude::*;

use crate::error::{Error, Result};

/// The key types the GPU sort takes: every fixed-width primitive up to 64 bits.
pub fn supported(data_type: &DataType) -> bool {
    value_bits(data_type).is_some()
}

/// How many bits the order-preserving code of one value of this type needs.
fn value_bits(data_type: &DataType) -> Option<u32> {
    use DataType::*;
    Some(match data_type {
        Boolean => 1,
        Int8 | UInt8 => 8,
        Int16 | UInt16 | Float16 => 16,
        Int32 | UInt32 | Float32 | Date32 | Time32(_) => 32,
        Int64 | UInt64 | Float64 | Date64 | Time64(_) | Timestamp(_, _) | Duration(_) => 64,
        _ => return None,
    })
}

/// One key column as the sort sees it.
#[derive(Clone, Debug)]
pub struct KeyColumn {
    pub values: ArrayRef,
    pub options: SortOptions,
}

/// The packed keys of a set of rows: the words to sort, most significant first.
pub enum Word {
    U32(Vec<u32>),
    U64(Vec<u64>),
}

impl Word {
    pub fn len(&self) -> usize {
        match self {
            Word::U32(w) => w.len(),
            Word::U64(w) => w.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A part of a key's code and its place in a word: `bits` bits starting at `shift`.
struct Field {
    column: usize,
    shift: u32,
    bits: u32,
    part: Part,
}

/// A nullable key is two fields, so that a 64-bit key's null bit may go to the word before.
#[derive(Clone, Copy, PartialEq)]
enum Part {
    /// One bit: where the row's null goes (NULLS FIRST: set for non-null rows).
    NullFlag,
    /// The value's order-preserving code (0 for null rows).
    Value,
}

/// Pack the key columns (all of `rows` rows) into words, most significant first.
pub fn pack(columns: &[KeyColumn], rows: usize) -> Result<Vec<Word>> {
    // lay the fields out: most significant key in the top bits of the first word
    let mut words: Vec<Vec<Field>> = Vec::new();
    let mut used = 64u32;
    for (column, key) in columns.iter().enumerate() {
        if key.values.len() != rows {
            return Err(Error::Invalid(format!(
                "sort key {column} has {} rows, expected {rows}",
                key.values.len()
            )));
        }
        let value = value_bits(key.values.data_type())
            .ok_or_else(|| Error::Unsupported(key.values.data_type().clone()))?;
        let mut parts = vec![(Part::Value, value)];
        if key.values.null_count() > 0 {
            parts.insert(0, (Part::NullFlag, 1));
        }
        for (part, bits) in parts {
            if used + bits > 64 {
                words.push(Vec::new());
                used = 0;
            }
            used += bits;
            words.last_mut().expect("a word was started").push(Field {
                column,
                shift: 0,
                bits,
                part,
            });
        }
    }
    words
        .into_iter()
        .map(|mut fields| {
            let total: u32 = fields.iter().map(|f| f.bits).sum();
            let mut shift = total;
            for f in &mut fields {
                shift -= f.bits;
                f.shift = shift;
            }
            let mut word = vec![0u64; rows];
            for f in &fields {
                or_codes(&columns[f.column], f, &mut word)?;
            }
            Ok(if total <= 32 {
                Word::U32(word.into_par_iter().map(|w| w as u32).collect())
            } else {
                Word::U64(word)
            })
        })
        .collect()
}

/// OR one key's codes into its place in `word`.
fn or_codes(key: &KeyColumn, field: &Field, word: &mut [u64]) -> Result<()> {
    use DataType::*;
    let a = &key.values;
    let value_bits = field.bits;
    if field.part == Part::NullFlag {
        let present = key.options.nulls_first as u64;
        let nulls = a.logical_nulls().expect("a nullable key has nulls");
        let shift = field.shift;
        word.par_iter_mut().enumerate().for_each(|(i, w)| {
            *w |= (present ^ nulls.is_null(i) as u64) << shift;
        });
        return Ok(());
    }
    match a.data_type() {
        Boolean => {
            let b = a.as_boolean();
            fill(a, key.options, field, value_bits, word, |i| {
                b.value(i) as u64
            })
        }
        Int8 => prim::<Int8Type>(a, key.options, field, value_bits, word, |v| {
            (v as u8 ^ 0x80) as u64
        }),
        UInt8 => prim::<UInt8Type>(a, key.options, field, value_bits, word, |v| v as u64),
        Int16 => prim::<Int16Type>(a, key.options, field, value_bits, word, |v| {
            (v as u16 ^ 0x8000) as u64
        }),
        UInt16 => prim::<UInt16Type>(a, key.options, field, value_bits, word, |v| v as u64),
        Float16 => prim::<Float16Type>(a, key.options, field, value_bits, word, |v| {
            let b = v.to_bits();
            (if b & 0x8000 != 0 { !b } else { b | 0x8000 }) as u64
        }),
        Int32 => prim::<Int32Type>(a, key.options, field, value_bits, word, i32_code),
        Date32 => prim::<Date32Type>(a, key.options, field, value_bits, word, i32_code),
        Time32(_) => {
            let as_i32 = reinterpret(a, Int32)?;
            prim::<Int32Type>(&as_i32, key.options, field, value_bits, word, i32_code)
        }
        UInt32 => prim::<UInt32Type>(a, key.options, field, value_bits, word, |v| v as u64),
        Float32 => prim::<Float32Type>(a, key.options, field, value_bits, word, |v| {
            let b = v.to_bits();
            (if b & 0x8000_0000 != 0 {
                !b
            } else {
                b | 0x8000_0000
            }) as u64
        }),
        Int64 => prim::<Int64Type>(a, key.options, field, value_bits, word, i64_code),
        UInt64 => prim::<UInt64Type>(a, key.options, field, value_bits, word, |v| v),
        Float64 => prim::<Float64Type>(a, key.options, field, value_bits, word, |v| {
            let b = v.to_bits();
            if b >> 63 != 0 {
                !b
            } else {
                b | 1 << 63
            }
        }),
        // every other 64-bit type is an i64 underneath; reinterpret its data as Int64
        Date64 | Time64(_) | Timestamp(_, _) | Duration(_) => {
            let as_i64 = reinterpret(a, Int64)?;
            prim::<Int64Type>(&as_i64, key.options, field, value_bits, word, i64_code)
        }
        other => Err(Error::Unsupported(other.clone())),
    }
}

/// The same buffers read as a plain integer type of the same width.
fn reinterpret(a: &ArrayRef, as_type: DataType) -> Result<ArrayRef> {
    let data = a.to_data().into_builder().data_type(as_type).build()?;
    Ok(arrow::array::make_array(data))
}

fn i32_code(v: i32) -> u64 {
    (v as u32 ^ 0x8000_0000) as u64
}

fn i64_code(v: i64) -> u64 {
    v as u64 ^ 1 << 63
}

fn prim<T: ArrowPrimitiveType>(
    a: &ArrayRef,
    options: SortOptions,
    field: &Field,
    value_bits: u32,
    word: &mut [u64],
    code: impl Fn(T::Native) -> u64 + Sync,
) -> Result<()> {
    let p = a.as_primitive::<T>();
    let values = p.values();
    fill(a, options, field, value_bits, word, |i| code(values[i]))
}

/// OR `code(i)` of every row into `word`, inverted for DESC, with the null bit above it.
fn fill(
    a: &ArrayRef,
    options: SortOptions,
    field: &Field,
    value_bits: u32,
    word: &mut [u64],
    code: impl Fn(usize) -> u64 + Sync,
) -> Result<()> {
    let mask = if value_bits == 64 {
        u64::MAX
    } else {
        (1u64 << value_bits) - 1
    };
    let invert = if options.descending { mask } else { 0 };
    let shift = field.shift;
    let nulls = a.logical_nulls();
    const CHUNK: usize = 1 << 16;
    word.par_chunks_mut(CHUNK).enumerate().for_each(|(c, out)| {
        let base = c * CHUNK;
        for (j, w) in out.iter_mut().enumerate() {
            let i = base + j;
            if nulls.as_ref().is_some_and(|n| n.is_null(i)) {
                continue; // a null's value bits stay 0: its flag field orders it
            }
            *w |= ((code(i) ^ invert) & mask) << shift;
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int32Array, UInt8Array};
    use std::sync::Arc;

    fn unpack64(w: &Word) -> Vec<u64> {
        match w {
            Word::U32(v) => v.iter().map(|&x| x as u64).collect(),
            Word::U64(v) => v.clone(),
        }
    }

    #[test]
    fn float_codes_follow_total_order() {
        let vals = [
            f64::NAN,
            1.0,
            -0.0,
            0.0,
            f64::NEG_INFINITY,
            -f64::NAN,
            f64::INFINITY,
            -2.5,
        ];
        let col = KeyColumn {
            values: Arc::new(Float64Array::from(vals.to_vec())),
            options: SortOptions::default(),
        };
        let words = pack(&[col], vals.len()).unwrap();
        let codes = unpack64(&words[0]);
        let mut by_code: Vec<usize> = (0..vals.len()).collect();
        by_code.sort_by_key(|&i| codes[i]);
        let mut by_total: Vec<usize> = (0..vals.len()).collect();
        by_total.sort_by(|&a, &b| vals[a].total_cmp(&vals[b]));
        assert_eq!(by_code, by_total);
    }

    #[test]
    fn narrow_keys_share_one_u32_word_with_null_bits() {
        let a = KeyColumn {
            values: Arc::new(UInt8Array::from(vec![Some(1), None, Some(0)])),
            options: SortOptions {
                descending: false,
                nulls_first: true,
            },
        };
        let b = KeyColumn {
            values: Arc::new(Int32Array::from(vec![Some(-1), Some(5), Some(7)])),
            options: SortOptions {
                descending: true,
                nulls_first: false,
            },
        };
        // 1 + 8 + 32 bits: one u64 word
        let words = pack(&[a, b], 3).unwrap();
        assert_eq!(words.len(), 1);
        let w = unpack64(&words[0]);
        assert!(
            w[1] < w[2] && w[2] < w[0],
            "null first, then 0, then 1: {w:x?}"
        );
        let small = KeyColumn {
            values: Arc::new(UInt8Array::from(vec![3, 2, 1])),
            options: SortOptions::default(),
        };
        assert!(matches!(pack(&[small], 3).unwrap()[0], Word::U32(_)));
    }

    #[test]
    fn a_nullable_64_bit_key_puts_its_null_flag_in_the_word_before() {
        let col = KeyColumn {
            values: Arc::new(Float64Array::from(vec![Some(1.0), None, Some(-1.0)])),
            options: SortOptions {
                descending: false,
                nulls_first: false,
            },
        };
        let words = pack(&[col], 3).unwrap();
        assert_eq!(words.len(), 2);
        let (flag, value) = (unpack64(&words[0]), unpack64(&words[1]));
        assert_eq!(flag, vec![0, 1, 0], "NULLS LAST: the null's flag is set");
        assert!(value[2] < value[0]);
    }

    #[test]
    fn wide_keys_start_new_words() {
        let mk = || KeyColumn {
            values: Arc::new(Float64Array::from(vec![1.0, 2.0])),
            options: SortOptions::default(),
        };
        assert_eq!(pack(&[mk(), mk(), mk()], 2).unwrap().len(), 3);
    }
}
