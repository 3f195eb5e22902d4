//! The CPU engine as the run sorter of an external sort (`sort::external`).

use crate::keys::{KeyType, SortKey, SortOrder};
use crate::sort::external::RunSorter;
use crate::sort::{HostSort, SortStats};
use crate::Result;

/// Runs of an external sort sorted by the CPU engine, on the key-bit range `bits` if given.
pub struct CpuRuns {
    pub bits: Option<std::ops::Range<u32>>,
}

impl RunSorter for CpuRuns {
    fn max_run(&self, _key: KeyType, _carried: bool, _order: SortOrder) -> u64 {
        u32::MAX as u64 // permutations are u32 positions
    }
    fn key_bits(&self) -> Option<std::ops::Range<u32>> {
        self.bits.clone()
    }
    fn sort_run<T: SortKey>(
        &self,
        keys: &mut [T],
        job: HostSort<'_>,
    ) -> Result<(Option<Vec<u32>>, Option<SortStats>)> {
        let HostSort {
            values,
            permutation,
            order,
        } = job;
        let perm = super::sort(keys, values, permutation, order, self.bits.clone())?;
        Ok((perm, None))
    }
}
