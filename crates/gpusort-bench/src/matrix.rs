//! The sort suite's key-type × key-set matrix: keys-only sorts, argsorts and key-value sorts
//! (u32 values) of every `--dtypes` × `--keys` case, as a user's `gpusort sort` would run them
//! (`Algorithm::Auto`), each result checked once. Named "sort f32 normal", "argsort f32 normal",
//! "key-value f32 normal", so that `bench/cupy_reference.py` times CuPy on the same arrays.
//! Segmented sorts (u32, segments of 2^8..2^20 keys) on both paths measure where `Auto`
//! should switch (`sort::SortTuning::segmented_radix_from`).

use gpusort_core::device::transfer;
use gpusort_core::reference::keys::{fingerprint, sortable, Fingerprint};
use gpusort_core::{Algorithm, KeyType, SortJob, SortKey, SortOrder};
use rayon::prelude::*;

use super::keysets::{applies, generate};
use super::{measure_warm, skipped, sort_case, too_big, Case, Ctx};
use crate::{Error, Result};

/// Cases of one size: every (type, set) pair that applies.
pub fn suite(
    ctx: &Ctx<'_>,
    sizes: &[u32],
    dtypes: &[KeyType],
    sets: &[String],
) -> Result<Vec<Case>, Error> {
    let mut cases = Vec::new();
    // measuring knob (sort_suite's): only the suite's GPU sorts whose names contain it, none of
    // the matrix's
    if ctx.knobs.sorts.clone().is_some_and(|s| !s.is_empty()) {
        return Ok(cases);
    }
    // sizes beyond one binding run where one radix job holds them (two ranges a buffer)
    let sorter = ctx.sorter()?;
    for &log in sizes {
        for &t in dtypes {
            for set in sets.iter().filter(|s| applies(t, s)) {
                ctx.bar.inc_length(3);
                let n = 1usize << log;
                let one_job = sorter.one_sort_max(ctx.gpu, t, true, SortOrder::default(), n);
                let skip = match n > one_job {
                    true => too_big(ctx.gpu, n as u64 * t.size() as u64),
                    false => None,
                };
                if let Some(why) = skip {
                    cases.push(skipped("sort", n as u64, &format!("sort {t} {set}"), why));
                    ctx.bar.inc(3);
                    continue;
                }
                let seed = log as u64 * 1000 + t.code() as u64 * 10;
                cases.extend(match t {
                    KeyType::U32 => one::<u32>(ctx, set, n, seed)?,
                    KeyType::I32 => one::<i32>(ctx, set, n, seed)?,
                    KeyType::F32 => one::<f32>(ctx, set, n, seed)?,
                    KeyType::U64 => one::<u64>(ctx, set, n, seed)?,
                    KeyType::I64 => one::<i64>(ctx, set, n, seed)?,
                    KeyType::F64 => one::<f64>(ctx, set, n, seed)?,
                });
            }
        }
        if log >= 16 {
            cases.extend(after_larger(ctx, log, dtypes, &cases)?);
        }
        // segmented sorts need one binding
        let one_binding = too_big(ctx.gpu, 4u64 << log).is_none();
        if log >= 16 && dtypes.contains(&KeyType::U32) && one_binding {
            cases.extend(segmented(ctx, 1usize << log)?);
        }
    }
    Ok(cases)
}

fn one<T: SortKey>(ctx: &Ctx<'_>, set: &str, n: usize, seed: u64) -> Result<Vec<Case>, Error> {
    let gpu = ctx.gpu;
    let t = T::TYPE;
    ctx.bar
        .set_message(format!("2^{}: {t} {set} keys", n.ilog2()));
    let keys: Vec<T> = generate(set, n, seed);
    let input_print = par_fingerprint(&keys);
    let bytes = n as u64 * t.size() as u64;
    let pristine = transfer::buffer_from(gpu, "bench keys", &keys)?;
    let work = transfer::storage_buffer(gpu, "bench sorted keys", bytes)?;
    let perm = transfer::storage_buffer(gpu, "bench permutation", n as u64 * 4)?;
    let values = transfer::storage_buffer(gpu, "bench values", n as u64 * 4)?;
    let sorter = ctx.sorter()?;
    let restore = |enc: &mut gpusort_core::wgpu::CommandEncoder| {
        enc.copy_buffer_to_buffer(&pristine, 0, &work, 0, bytes);
    };
    let job = SortJob {
        key_type: t,
        order: SortOrder::default(),
        keys: &work,
        n: n as u32,
        values: None,
        permutation: None,
    };
    let mut out = Vec::new();
    let mut keys_only_s = 0.0;
    for (what, job) in [
        ("sort", job),
        (
            "argsort",
            SortJob {
                permutation: Some(&perm),
                ..job
            },
        ),
        (
            "key-value",
            SortJob {
                values: Some(&values),
                ..job
            },
        ),
    ] {
        ctx.bar
            .set_message(format!("2^{}: {what} {t} {set}", n.ilog2()));
        let mut algorithm = Algorithm::Auto;
        let st = measure_warm(ctx.reps, ctx.warm, || {
            Ok(ctx.timer.time(gpu, restore, |enc| {
                algorithm = sorter.record(gpu, enc, &job)?.algorithm;
                Ok(())
            })?)
        })?;
        if !sorter.tuning().measuring() {
            check(
                ctx,
                &keys,
                input_print,
                &work,
                job.permutation.is_some().then_some(&perm),
                what,
                set,
            )?;
        }
        if what == "sort" {
            keys_only_s = st.median_s;
        }
        let mut c = sort_case(
            n,
            &format!("{what} {t} {set}"),
            st.clone(),
            n as f64 / st.median_s / 1e9,
            "GKeys/s",
            None,
            format!("{algorithm:?}").to_lowercase(),
        );
        c.relative = st.median_s / keys_only_s;
        out.push(ctx.show(c));
        ctx.bar.inc(1);
    }
    Ok(out)
}

/// A job's time on a `Sorter` that sorted a larger job of another type before (u32 keys 2^4
/// times as many, or f32 keys for u32), against the fresh `Sorter`'s time of the same case
/// (`relative`): renderers, the Python package and DataFusion keep one `Sorter` for the life of
/// the process. Uniform keys, keys only and argsort; named "after-larger sort f32 uniform".
fn after_larger(
    ctx: &Ctx<'_>,
    log: u32,
    dtypes: &[KeyType],
    fresh: &[Case],
) -> Result<Vec<Case>, Error> {
    let gpu = ctx.gpu;
    let n = 1usize << log;
    let mut big_log = (log + 4).min(28);
    while big_log > log && too_big(gpu, 4u64 << big_log).is_some() {
        big_log -= 1;
    }
    let mut out = Vec::new();
    // a question for hardware GPUs (whose drivers keep state between jobs); on a software
    // adapter the larger sort would only lengthen the quick bench
    if big_log == log || gpu.is_software() {
        return Ok(out);
    }
    let big = 1usize << big_log;
    // one array of larger keys for every type (sorted as u32, or as f32 before u32 keys): its
    // words are generated once
    let big_keys = transfer::buffer_from(
        gpu,
        "bench larger keys",
        &generate::<u32>("uniform", big, 5),
    )?;
    for &t in dtypes {
        if too_big(gpu, n as u64 * t.size() as u64).is_some() {
            continue;
        }
        let other = if t == KeyType::U32 {
            KeyType::F32
        } else {
            KeyType::U32
        };
        let sorter = ctx.sorter()?;
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        sorter.record(
            gpu,
            &mut enc,
            &SortJob {
                key_type: other,
                order: SortOrder::default(),
                keys: &big_keys,
                n: big as u32,
                values: None,
                permutation: None,
            },
        )?;
        gpu.queue.submit([enc.finish()]);
        gpu.wait()?;
        let seed = log as u64 * 1000 + t.code() as u64 * 10;
        let bytes = n as u64 * t.size() as u64;
        let keys = match t {
            KeyType::U32 => bytemuck::cast_slice(&generate::<u32>("uniform", n, seed)).to_vec(),
            KeyType::I32 => bytemuck::cast_slice(&generate::<i32>("uniform", n, seed)).to_vec(),
            KeyType::F32 => bytemuck::cast_slice(&generate::<f32>("uniform", n, seed)).to_vec(),
            KeyType::U64 => bytemuck::cast_slice(&generate::<u64>("uniform", n, seed)).to_vec(),
            KeyType::I64 => bytemuck::cast_slice(&generate::<i64>("uniform", n, seed)).to_vec(),
            KeyType::F64 => bytemuck::cast_slice(&generate::<f64>("uniform", n, seed)).to_vec(),
        };
        let keys: Vec<u8> = keys;
        let pristine = transfer::buffer_from(gpu, "bench keys", &keys)?;
        let work = transfer::storage_buffer(gpu, "bench sorted keys", bytes)?;
        let perm = transfer::storage_buffer(gpu, "bench permutation", n as u64 * 4)?;
        let restore = |enc: &mut gpusort_core::wgpu::CommandEncoder| {
            enc.copy_buffer_to_buffer(&pristine, 0, &work, 0, bytes);
        };
        for what in ["sort", "argsort"] {
            let job = SortJob {
                key_type: t,
                order: SortOrder::default(),
                keys: &work,
                n: n as u32,
                values: None,
                permutation: (what == "argsort").then_some(&perm),
            };
            let st = measure_warm(ctx.reps, ctx.warm, || {
                Ok(ctx.timer.time(gpu, restore, |enc| {
                    sorter.record(gpu, enc, &job)?;
                    Ok(())
                })?)
            })?;
            let name = format!("{what} {t} uniform");
            let base = fresh
                .iter()
                .find(|c| c.n == n as u64 && c.case == name)
                .map(|c| c.stats.median_s);
            let mut c = sort_case(
                n,
                &format!("after-larger {name}"),
                st.clone(),
                n as f64 / st.median_s / 1e9,
                "GKeys/s",
                None,
                format!(
                    "after 2^{big_log} {other} keys on the same Sorter; relative: to a fresh one"
                ),
            );
            c.relative = base.map_or(0.0, |b| st.median_s / b);
            out.push(ctx.show(c));
        }
    }
    Ok(out)
}

/// `reference::keys::fingerprint` on all cores: at 2^26 keys one thread took longer than the sorts
/// the check is for.
fn par_fingerprint<T: SortKey>(v: &[T]) -> Fingerprint {
    v.par_chunks(1 << 16)
        .map(fingerprint)
        .reduce(Default::default, |a, b| a.combine(b))
}

/// The result is the input in order (same multiset, non-decreasing), and an argsort's
/// permutation is stable: the keys it orders are non-decreasing, ties by position.
fn check<T: SortKey>(
    ctx: &Ctx<'_>,
    keys: &[T],
    keys_print: Fingerprint,
    work: &gpusort_core::wgpu::Buffer,
    perm: Option<&gpusort_core::wgpu::Buffer>,
    what: &str,
    set: &str,
) -> Result<(), Error> {
    let gpu = ctx.gpu;
    let n = keys.len();
    let got: Vec<T> = transfer::read_vec(gpu, work, n)?;
    let ordered = got
        .par_windows(2)
        .all(|w| sortable(&w[0], false) <= sortable(&w[1], false));
    let mut ok = ordered && par_fingerprint(&got) == keys_print;
    if let (true, Some(p)) = (ok, perm) {
        let p: Vec<u32> = transfer::read_vec(gpu, p, n)?;
        let stable = p.par_windows(2).all(|w| {
            let (a, b) = (
                sortable(&keys[w[0] as usize], false),
                sortable(&keys[w[1] as usize], false),
            );
            a < b || (a == b && w[0] < w[1])
        });
        let mut q = p.clone();
        q.par_sort_unstable();
        ok = stable && q.par_iter().enumerate().all(|(i, &v)| v as usize == i);
    }
    if !ok {
        return Err(Error::runtime(format!(
            "bench: {what} of {n} {} {set} keys is wrong on {}",
            T::TYPE,
            gpu.adapter.name
        )));
    }
    Ok(())
}

/// Segmented u32 sorts on the bitonic network and on the radix path, segments of 2^8..2^20.
fn segmented(ctx: &Ctx<'_>, n: usize) -> Result<Vec<Case>, Error> {
    let gpu = ctx.gpu;
    let keys: Vec<u32> = generate("uniform", n, 77);
    let pristine = transfer::buffer_from(gpu, "bench keys", &keys)?;
    let work = transfer::storage_buffer(gpu, "bench sorted keys", n as u64 * 4)?;
    let restore = |enc: &mut gpusort_core::wgpu::CommandEncoder| {
        enc.copy_buffer_to_buffer(&pristine, 0, &work, 0, n as u64 * 4);
    };
    let mut out = Vec::new();
    for seg_log in [8u32, 12, 16, 20]
        .into_iter()
        .filter(|&s| (1usize << (s + 2)) <= n)
    {
        let mut bitonic_s = 0.0;
        for algorithm in [Algorithm::Bitonic, Algorithm::Radix] {
            ctx.bar.inc_length(1);
            let name = format!("segments of 2^{seg_log}, {algorithm:?}").to_lowercase();
            ctx.bar.set_message(format!("2^{}: {name}", n.ilog2()));
            let sorter = ctx.sorter()?.with_algorithm(algorithm);
            let order = SortOrder {
                descending: false,
                segment_size: Some(1 << seg_log),
            };
            let job = SortJob {
                key_type: KeyType::U32,
                order,
                keys: &work,
                n: n as u32,
                values: None,
                permutation: None,
            };
            let st = measure_warm(ctx.reps, ctx.warm, || {
                Ok(ctx.timer.time(gpu, restore, |enc| {
                    sorter.record(gpu, enc, &job)?;
                    Ok(())
                })?)
            })?;
            let got: Vec<u32> = transfer::read_vec(gpu, &work, n)?;
            let measuring = algorithm == Algorithm::Radix && sorter.tuning().measuring();
            if !measuring && got != gpusort_core::reference::keys::sorted(&keys, order) {
                return Err(Error::runtime(format!(
                    "bench: {name} of {n} keys is wrong on {}",
                    gpu.adapter.name
                )));
            }
            if algorithm == Algorithm::Bitonic {
                bitonic_s = st.median_s;
            }
            let mut c = sort_case(
                n,
                &name,
                st.clone(),
                n as f64 / st.median_s / 1e9,
                "GKeys/s",
                None,
                "u32 uniform; relative: to the bitonic network".into(),
            );
            c.relative = st.median_s / bitonic_s;
            out.push(ctx.show(c));
            ctx.bar.inc(1);
        }
    }
    Ok(out)
}
