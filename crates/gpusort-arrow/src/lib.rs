//! gpusort-arrow: Arrow record batches sorted by their columns with gpusort, on the GPU or its
//! CPU engine; the sorted runs of a larger-than-memory table merged back into one order.
//!
//! - [`keys`]: key columns packed into unsigned words whose plain order is the rows' order
//!   (Arrow's: floats by IEEE 754 totalOrder, nulls first or last, DESC inverted).
//! - [`SortEngine`]: what sorts the packed words (one GPU job, or the CPU engine).
//! - [`permutation`]: the stable order of a batch's rows by any key columns: packed and sorted
//!   by the engine where every key is a fixed-width primitive, Arrow's row format compared on all
//!   cores otherwise (text, binary, decimals).
//! - [`Merge`]: sorted runs merged into one sorted stream of batches (ties to the earlier run).
//! - [`batches`]: concatenation and gathers on all cores.
//! - [`plan`]: how an external sort spends its memory budget (reads at once, run size, fan-in).
//!
//! gpusort's CLI sorts tables with this crate; gpusort-datafusion's `GpuSortExec` packs and
//! sorts its keys with it.

pub mod batches;
pub mod engine;
mod error;
pub mod keys;
mod merge;
pub mod plan;

use arrow::row::{RowConverter, SortField};
use rayon::prelude::*;

pub use engine::SortEngine;
pub use error::{Error, Result};
pub use keys::KeyColumn;
pub use merge::{Merge, Run};

/// The stable permutation that orders `rows` rows by `columns` (most significant first): rows
/// with equal keys keep their order.
pub fn permutation(engine: &SortEngine, columns: &[KeyColumn], rows: usize) -> Result<Vec<u32>> {
    if columns.is_empty() {
        return Err(Error::Invalid("no sort keys".into()));
    }
    if rows > u32::MAX as usize {
        return Err(Error::TooManyRows(rows));
    }
    if columns
        .iter()
        .all(|c| keys::supported(c.values.data_type()))
    {
        return engine.argsort(keys::pack(columns, rows)?);
    }
    let converter = RowConverter::new(
        columns
            .iter()
            .map(|c| SortField::new_with_options(c.values.data_type().clone(), c.options))
            .collect(),
    )?;
    let values: Vec<_> = columns.iter().map(|c| c.values.clone()).collect();
    let encoded = converter.convert_columns(&values)?;
    let mut perm: Vec<u32> = (0..rows as u32).collect();
    // a stable sort: equal rows keep their input order, as the packed words' sort does
    perm.par_sort_by(|&a, &b| encoded.row(a as usize).cmp(&encoded.row(b as usize)));
    Ok(perm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Float64Array, Int32Array, StringArray};
    use arrow::compute::SortOptions;
    use std::cmp::Ordering;
    use std::sync::Arc;

    fn key(values: ArrayRef, descending: bool, nulls_first: bool) -> KeyColumn {
        KeyColumn {
            values,
            options: SortOptions {
                descending,
                nulls_first,
            },
        }
    }

    /// SQL's order of one key: nulls where `nulls_first` says, values by `cmp`, DESC reversed.
    fn by<T>(
        a: &Option<T>,
        b: &Option<T>,
        o: SortOptions,
        cmp: impl Fn(&T, &T) -> Ordering,
    ) -> Ordering {
        match (a, b) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) if o.nulls_first => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(_), None) if o.nulls_first => Ordering::Greater,
            (Some(_), None) => Ordering::Less,
            (Some(x), Some(y)) if o.descending => cmp(y, x),
            (Some(x), Some(y)) => cmp(x, y),
        }
    }

    /// The packed path (every key a primitive) and the row-format path (a text key beside
    /// them) give the same stable order as a plain comparison sort.
    #[test]
    fn packed_and_row_format_orders_match_a_comparison_sort() {
        let n = 5000;
        let a: Vec<Option<i32>> = (0..n)
            .map(|i| (i % 13 != 0).then_some((i * 7919 % 17) as i32 - 8))
            .collect();
        let f: Vec<Option<f64>> = (0..n)
            .map(|i| match i % 11 {
                0 => None,
                1 => Some(f64::NAN),
                2 => Some(-0.0),
                3 => Some(0.0),
                4 => Some(f64::NEG_INFINITY),
                _ => Some((i * 31 % 7) as f64 - 3.0),
            })
            .collect();
        let s: Vec<Option<String>> = (0..n)
            .map(|i| (i % 5 != 0).then(|| format!("k{}", i * 13 % 9)))
            .collect();
        let engine = SortEngine::cpu();
        for (desc, nf) in [(false, false), (true, true), (false, true), (true, false)] {
            let ka = key(Arc::new(Int32Array::from(a.clone())), desc, nf);
            let kf = key(Arc::new(Float64Array::from(f.clone())), !desc, nf);
            let ks = key(Arc::new(StringArray::from(s.clone())), desc, !nf);
            let cmp_a = |i: usize, j: usize| by(&a[i], &a[j], ka.options, |x, y| x.cmp(y));
            let cmp_f = |i: usize, j: usize| by(&f[i], &f[j], kf.options, |x, y| x.total_cmp(y));
            let cmp_s = |i: usize, j: usize| by(&s[i], &s[j], ks.options, |x, y| x.cmp(y));

            let packed = permutation(&engine, &[ka.clone(), kf.clone()], n).unwrap();
            let mut want: Vec<u32> = (0..n as u32).collect();
            want.sort_by(|&i, &j| {
                cmp_a(i as usize, j as usize).then(cmp_f(i as usize, j as usize))
            });
            assert_eq!(packed, want, "packed, desc {desc} nulls first {nf}");

            let rows = permutation(&engine, &[ks.clone(), ka.clone(), kf.clone()], n).unwrap();
            let mut want: Vec<u32> = (0..n as u32).collect();
            want.sort_by(|&i, &j| {
                let (i, j) = (i as usize, j as usize);
                cmp_s(i, j).then(cmp_a(i, j)).then(cmp_f(i, j))
            });
            assert_eq!(rows, want, "row format, desc {desc} nulls first {nf}");
        }
        assert!(permutation(&engine, &[], 0).is_err());
    }
}
