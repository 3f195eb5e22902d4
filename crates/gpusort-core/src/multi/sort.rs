//! Sorts over a device group: a partition by key range, then one sort per device.
//!
//! A sample of (key, position) pairs gives D − 1 splitters; one stable partition on the host's
//! cores moves each key to its device's range; each device sorts its range, which lands where
//! it belongs in the output — one exchange through the host and no final merge (the MSB
//! partition of multi-GPU sorts). Splitting ties by position keeps the parts balanced when many
//! keys are equal, and keeps the result that of one stable sort: every key, payload and
//! permutation comes out bit-identical to a single device's.

use std::ops::Range;
use std::time::Instant;

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::keys::order::{key_on_bits, sortable};
use crate::keys::{SortKey, SortOrder};
use crate::multi::{on_each, split_even, DeviceGroup};
use crate::sort::{HostSort, SortStats, Sorter};

/// Sample positions per bucket: splitters within about 1/√(this) of an even split.
const SAMPLE_PER_DEVICE: usize = 4096;

/// At most this many buckets (bucket ids are bytes).
const MAX_BUCKETS: usize = 255;

/// One bucket of keys for a device, with the original positions where they are carried.
type Bucket<'a, T> = (&'a mut [T], Option<&'a mut [u32]>);

/// What a group sort did: the host's partition, and each device's sort.
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GroupSortStats {
    /// Sampling, partition and copy back on the host (seconds).
    pub partition_s: f64,
    /// Each device's keys and its sort (upload, GPU, download), in device order.
    pub parts: Vec<usize>,
    pub devices: Vec<SortStats>,
    /// From the call to the last device's download, payload gathered (seconds).
    pub seconds: f64,
}

impl GroupSortStats {
    /// The slowest device's split, for reports: (upload, GPU, download) seconds.
    pub fn slowest(&self) -> (f64, f64, f64) {
        self.devices
            .iter()
            .map(|s| (s.upload_s, s.gpu_s, s.download_s))
            .max_by(|a, b| (a.0 + a.1 + a.2).total_cmp(&(b.0 + b.1 + b.2)))
            .unwrap_or_default()
    }
}

/// When a group sort spreads its keys over the devices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Spread {
    /// Where one device cannot sort the input as one GPU sort (it would sort pieces and merge
    /// them on the host): below that, the host's partition costs more than a second device
    /// saves (on two H100s, 2^28 u32 keys took 0.13 s on one device and 0.31 s split), so the
    /// first device sorts alone.
    #[default]
    WhenItPays,
    /// Always (tests, measurements).
    Always,
}

/// [`Sorter::sort_host`] over every device of `group` (`sorters[d]` built on device d, all with
/// the same key bits and algorithm), spread where it pays ([`Spread::WhenItPays`]). Same results
/// as one device: sorted keys, the payload in their order, the stable permutation.
pub fn sort_host<T: SortKey>(
    group: &DeviceGroup,
    sorters: &[Sorter],
    keys: &mut [T],
    job: HostSort<'_>,
) -> Result<(Option<Vec<u32>>, GroupSortStats)> {
    sort_host_spread(group, sorters, keys, job, Spread::WhenItPays)
}

/// [`sort_host`] with a choice of when to spread.
pub fn sort_host_spread<T: SortKey>(
    group: &DeviceGroup,
    sorters: &[Sorter],
    keys: &mut [T],
    job: HostSort<'_>,
    spread: Spread,
) -> Result<(Option<Vec<u32>>, GroupSortStats)> {
    let HostSort {
        values,
        permutation: want_permutation,
        order,
    } = job;
    if sorters.len() != group.len() {
        return Err(Error::InvalidInput(format!(
            "{} sorters for {} devices",
            sorters.len(),
            group.len()
        )));
    }
    if let Some(v) = values.as_deref() {
        if v.len() != keys.len() {
            return Err(Error::InvalidInput(format!(
                "{} keys but {} values",
                keys.len(),
                v.len()
            )));
        }
    }
    let start = Instant::now();
    let n = keys.len();
    let want_index = values.is_some() || want_permutation;
    let one_sort = |g: &crate::Gpu, s: &Sorter| {
        let whole = SortOrder {
            segment_size: None,
            ..order
        };
        s.one_sort_max(g, T::TYPE, want_index, whole, n)
    };
    let pays = match spread {
        Spread::Always => true,
        Spread::WhenItPays => n > one_sort(group.first(), &sorters[0]),
    };
    if group.len() == 1 || n < 2 || !pays {
        let (perm, stats) = sorters[0].sort_host(
            group.first(),
            keys,
            HostSort {
                values,
                permutation: want_permutation,
                order,
            },
        )?;
        return Ok((
            perm,
            GroupSortStats {
                parts: vec![n],
                devices: vec![stats],
                seconds: start.elapsed().as_secs_f64(),
                ..Default::default()
            },
        ));
    }
    if let Some(seg) = order.segment_size.map(|s| s.max(1) as usize) {
        if seg < n {
            let job = HostSort {
                values,
                permutation: want_permutation,
                order,
            };
            return by_segments(group, sorters, keys, job, seg, start);
        }
    }
    let order = SortOrder {
        segment_size: None,
        ..order
    };
    let bits = sorters[0].key_bits();
    let word = |k: &T| match &bits {
        Some(r) => key_on_bits(k, order.descending, r),
        None => sortable(k, order.descending),
    };
    // more buckets than devices where a device's share exceeds one GPU sort: each device then
    // sorts its buckets one after another, and they still land in order (no merge)
    let devices = group.len();
    let share = n.div_ceil(devices);
    let cap = group
        .gpus()
        .iter()
        .zip(sorters)
        .map(|(g, s)| s.one_sort_max(g, T::TYPE, want_index, order, share))
        .min()
        .unwrap_or(share)
        .max(1);
    // an eighth of slack for a sample's unevenness
    let per_device = (share + share / 8)
        .div_ceil(cap)
        .clamp(1, MAX_BUCKETS / devices);
    let t = Instant::now();
    let splitters = splitters(keys, devices * per_device, &word);
    let (mut moved, mut index, counts) = partition(keys, &splitters, want_index, &word);
    let partition_s = t.elapsed().as_secs_f64();

    // each device sorts its buckets of `moved` in place, the original positions as their payload
    let mut mine: Vec<Vec<Bucket<'_, T>>> = (0..devices).map(|_| Vec::new()).collect();
    let (mut rk, mut ri): (&mut [T], &mut [u32]) = (&mut moved, &mut index);
    for (b, &c) in counts.iter().enumerate() {
        let (a, rest) = std::mem::take(&mut rk).split_at_mut(c);
        rk = rest;
        let idx = if want_index {
            let (a, rest) = std::mem::take(&mut ri).split_at_mut(c);
            ri = rest;
            Some(a)
        } else {
            None
        };
        mine[b / per_device].push((a, idx));
    }
    let devices = on_each(group, mine, |d, gpu, buckets| {
        let mut total: Option<SortStats> = None;
        for (part, idx) in buckets {
            let st = sorters[d]
                .sort_host(
                    gpu,
                    part,
                    HostSort {
                        values: idx,
                        order,
                        ..HostSort::default()
                    },
                )?
                .1;
            total = Some(match total {
                None => st,
                Some(t) => SortStats {
                    upload_s: t.upload_s + st.upload_s,
                    gpu_s: t.gpu_s + st.gpu_s,
                    download_s: t.download_s + st.download_s,
                    n: t.n.saturating_add(st.n),
                    ..t
                },
            });
        }
        Ok(total.unwrap_or_default())
    })?;
    let counts: Vec<usize> = counts.chunks(per_device).map(|c| c.iter().sum()).collect();
    let t = Instant::now();
    keys.par_chunks_mut(1 << 16)
        .zip(moved.par_chunks(1 << 16))
        .for_each(|(a, b)| a.copy_from_slice(b));
    if let Some(v) = values {
        let src = v.to_vec();
        v.par_iter_mut()
            .zip(index.par_iter())
            .for_each(|(dst, &i)| *dst = src[i as usize]);
    }
    tracing::debug!(
        "group sort: copied back in {:.3} s; partition {partition_s:.3} s",
        t.elapsed().as_secs_f64()
    );
    let partition_s = partition_s + t.elapsed().as_secs_f64();
    let t = Instant::now();
    drop(moved);
    tracing::debug!("group sort: freed in {:.3} s", t.elapsed().as_secs_f64());
    Ok((
        want_permutation.then_some(index),
        GroupSortStats {
            partition_s,
            parts: counts,
            devices,
            seconds: start.elapsed().as_secs_f64(),
        },
    ))
}

/// D − 1 splitters as (key word, position) pairs from an evenly spaced sample.
fn splitters<T: SortKey>(
    keys: &[T],
    devices: usize,
    word: &(impl Fn(&T) -> u64 + Sync),
) -> Vec<(u64, usize)> {
    let n = keys.len();
    let m = (SAMPLE_PER_DEVICE * devices).min(n);
    let mut sample: Vec<(u64, usize)> = (0..m)
        .into_par_iter()
        .map(|j| {
            let i = j * n / m;
            (word(&keys[i]), i)
        })
        .collect();
    sample.par_sort_unstable();
    (1..devices).map(|e| sample[e * m / devices]).collect()
}

/// A stable partition of `keys` into the devices' ranges (`splitters`' buckets, compared as
/// (word, position)): the moved keys, their original positions (when wanted) and each bucket's
/// size. In chunks on all cores: count per chunk and bucket, then each chunk scatters into its
/// own slice of every bucket.
fn partition<T: SortKey>(
    keys: &[T],
    splitters: &[(u64, usize)],
    want_index: bool,
    word: &(impl Fn(&T) -> u64 + Sync),
) -> (Vec<T>, Vec<u32>, Vec<usize>) {
    let n = keys.len();
    let buckets = splitters.len() + 1;
    let chunk = n.div_ceil(crate::cpu_engine::threads() * 4).max(1 << 14);
    // recomputed in the scatter rather than kept: an array of ids is another allocation to fault
    // in, which cost more than the comparisons on a 32-thread host
    let bucket_of = |k: &T, i: usize| {
        let w = word(k);
        splitters.partition_point(|&s| s <= (w, i))
    };
    let t = Instant::now();
    let chunk_counts: Vec<Vec<usize>> = keys
        .par_chunks(chunk)
        .enumerate()
        .map(|(c, part)| {
            let mut h = vec![0usize; buckets];
            for (j, k) in part.iter().enumerate() {
                h[bucket_of(k, c * chunk + j)] += 1;
            }
            h
        })
        .collect();
    let ids_s = t.elapsed().as_secs_f64();
    let counts: Vec<usize> = (0..buckets)
        .map(|b| chunk_counts.iter().map(|h| h[b]).sum())
        .collect();
    let mut moved = vec![T::zeroed(); n];
    let mut index = if want_index {
        vec![0u32; n]
    } else {
        Vec::new()
    };
    // every (chunk, bucket) pair gets its own disjoint slice of the outputs
    let mut key_pieces = carve(&mut moved, &chunk_counts);
    let mut index_pieces = if want_index {
        carve(&mut index, &chunk_counts)
    } else {
        chunk_counts
            .iter()
            .map(|h| h.iter().map(|_| None).collect())
            .collect()
    };
    key_pieces
        .par_iter_mut()
        .zip(index_pieces.par_iter_mut())
        .enumerate()
        .for_each(|(c, (kp, ip))| {
            let first = c * chunk;
            let mut fill = vec![0usize; buckets];
            for (j, k) in keys[first..(first + chunk).min(n)].iter().enumerate() {
                let b = bucket_of(k, first + j);
                let at = fill[b];
                if let Some(p) = kp[b].as_deref_mut() {
                    p[at] = *k;
                }
                if let Some(p) = ip[b].as_deref_mut() {
                    p[at] = (first + j) as u32;
                }
                fill[b] += 1;
            }
        });
    drop((key_pieces, index_pieces));
    tracing::debug!(
        "group sort partition of {n} keys into {buckets}: counts {ids_s:.3} s, scatter {:.3} s",
        t.elapsed().as_secs_f64() - ids_s
    );
    (moved, index, counts)
}

/// Mutable pieces of `out` of `lens[chunk][bucket]` elements, laid out bucket by bucket and
/// chunk by chunk within a bucket (so each bucket is contiguous, its chunks in input order).
fn carve<'a, T>(out: &'a mut [T], lens: &[Vec<usize>]) -> Vec<Vec<Option<&'a mut [T]>>> {
    let chunks = lens.len();
    let buckets = lens.first().map_or(0, Vec::len);
    let mut pieces: Vec<Vec<Option<&'a mut [T]>>> = (0..chunks)
        .map(|_| (0..buckets).map(|_| None).collect())
        .collect();
    let mut rest = out;
    for b in 0..buckets {
        for c in 0..chunks {
            let len = lens[c][b];
            let (piece, tail) = std::mem::take(&mut rest).split_at_mut(len);
            pieces[c][b] = Some(piece);
            rest = tail;
        }
    }
    pieces
}

/// Segmented sorts (segments of `seg` keys): whole segments to each device, in order.
fn by_segments<T: SortKey>(
    group: &DeviceGroup,
    sorters: &[Sorter],
    keys: &mut [T],
    job: HostSort<'_>,
    seg: usize,
    start: Instant,
) -> Result<(Option<Vec<u32>>, GroupSortStats)> {
    let HostSort {
        mut values,
        permutation: want_permutation,
        order,
    } = job;
    let ranges = split_even(keys.len(), group.len(), seg);
    let mut items = Vec::new();
    let mut rk: &mut [T] = keys;
    for r in &ranges {
        let (a, b) = std::mem::take(&mut rk).split_at_mut(r.len());
        let v = match values.take() {
            Some(v) => {
                let (va, vb) = v.split_at_mut(r.len());
                values = Some(vb);
                Some(va)
            }
            None => None,
        };
        items.push((a, v, r.start));
        rk = b;
    }
    let results = on_each(group, items, |d, gpu, (part, vals, first)| {
        let (perm, stats) = sorters[d].sort_host(
            gpu,
            part,
            HostSort {
                values: vals,
                permutation: want_permutation,
                order,
            },
        )?;
        Ok((
            perm.map(|p| p.iter().map(|&i| i + first as u32).collect::<Vec<_>>()),
            stats,
        ))
    })?;
    let mut perm = want_permutation.then(Vec::new);
    let mut devices = Vec::new();
    for (p, s) in results {
        if let (Some(all), Some(p)) = (perm.as_mut(), p) {
            all.extend(p);
        }
        devices.push(s);
    }
    Ok((
        perm,
        GroupSortStats {
            partition_s: 0.0,
            parts: ranges.iter().map(Range::len).collect(),
            devices,
            seconds: start.elapsed().as_secs_f64(),
        },
    ))
}

/// Runs of an external sort sorted over a device group.
pub struct GroupRuns<'a> {
    pub group: &'a DeviceGroup,
    pub sorters: &'a [Sorter],
}

impl crate::sort::external::RunSorter for GroupRuns<'_> {
    fn max_run(&self, key: crate::KeyType, carried: bool, order: SortOrder) -> u64 {
        // each device sorts about 1/D of a run; a part a little over its share still sorts
        // (in pieces on that device)
        let one = self
            .group
            .gpus()
            .iter()
            .map(|g| Sorter::max_len(g, key, carried, order))
            .min()
            .unwrap_or(0);
        (one.saturating_mul(self.group.len() as u64) / 16 * 15).min(u32::MAX as u64)
    }
    fn key_bits(&self) -> Option<Range<u32>> {
        self.sorters[0].key_bits()
    }
    fn sort_run<K: SortKey>(
        &self,
        keys: &mut [K],
        job: HostSort<'_>,
    ) -> Result<(Option<Vec<u32>>, Option<SortStats>)> {
        let (perm, st) = sort_host(self.group, self.sorters, keys, job)?;
        Ok((perm, Some(st.combined())))
    }
}

impl GroupSortStats {
    /// One [`SortStats`] for the whole: the first device's, with the slowest device's times and
    /// every key counted.
    pub fn combined(&self) -> SortStats {
        let (upload_s, gpu_s, download_s) = self.slowest();
        let mut s = self
            .devices
            .iter()
            .find(|s| s.n > 0)
            .cloned()
            .unwrap_or_default();
        s.n = self.parts.iter().sum::<usize>().min(u32::MAX as usize) as u32;
        s.upload_s = upload_s + self.partition_s;
        s.gpu_s = gpu_s;
        s.download_s = download_s;
        s
    }
}
