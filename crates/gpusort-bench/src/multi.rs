//! The multi suite: each job over the first 1, 2, … N devices of `--devices`, from host memory to
//! host memory (as the library is called), wall clock, checked against the one-device result:
//!
//! - sorts of u32 and u64 keys split by key range (gpusort_core::multi::sort), with a parallel
//!   memcpy of the same bytes on the host as the bound the host's memory sets;
//! - the exclusive u32 sum scan in parts;
//! - stencils held resident in slabs with halo exchanges (the 2-D 32768² radius-2 star and the
//!   3-D 1024³ radius-1 star, 64 steps): end to end, and the resident part alone (steps and
//!   exchanges, without the first upload and the last download).
//!
//! `relative` is the time over the one-device time of the same case (speed-up = 1 / relative).

use std::time::Instant;

use gpusort_core::multi::{self, DeviceGroup};
use gpusort_core::scan::ScanOp;
use gpusort_core::stencil::{Boundary, GridShape, Stencil, StencilJob, StencilKernel};
use gpusort_core::{HostSort, KeyType, Scanner, SortKey, Sorter};
use rayon::prelude::*;

use super::{measure, Case, Ctx};
use crate::{Error, Result};

fn case(
    name: String,
    n: u64,
    stats: gpusort_core::bench::Stats,
    unit_per_s: f64,
    unit: &str,
    base: f64,
    note: String,
) -> Case {
    Case::measured("multi", name, n, stats, unit_per_s, unit)
        .relative_to(base)
        .with_note(note)
}

fn devices_words(k: usize) -> String {
    format!("{k} device{}", if k == 1 { "" } else { "s" })
}

fn sort_cases<T: SortKey>(
    ctx: &Ctx<'_>,
    group: &DeviceGroup,
    sorters: &[Sorter],
    n: usize,
    cases: &mut Vec<Case>,
) -> Result<(), Error> {
    let bytes = n * T::TYPE.size();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let words: Vec<u64> = (0..bytes.div_ceil(8))
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        })
        .collect();
    let mut keys: Vec<T> = bytemuck::pod_collect_to_vec(&words);
    keys.truncate(n);
    drop(words);
    let mut work = keys.clone();
    let mut copy = vec![0u8; bytes];
    let memcpy = measure(ctx.reps, || {
        let t = Instant::now();
        copy.par_chunks_mut(1 << 20)
            .zip(bytemuck::cast_slice::<T, u8>(&keys).par_chunks(1 << 20))
            .for_each(|(a, b)| a.copy_from_slice(b));
        Ok(t.elapsed().as_secs_f64())
    })?;
    drop(copy);
    let mut base = 0.0;
    let mut want: Option<Vec<u8>> = None;
    for k in 1..=group.len() {
        ctx.bar.set_message(format!(
            "multi: sort 2^{} {} on {}",
            n.ilog2(),
            T::TYPE,
            devices_words(k)
        ));
        let sub = group.prefix(k);
        let st = measure(ctx.reps, || {
            work.copy_from_slice(&keys);
            let t = Instant::now();
            multi::sort::sort_host(&sub, &sorters[..k], &mut work, HostSort::default())?;
            Ok(t.elapsed().as_secs_f64())
        })?;
        let got = bytemuck::cast_slice::<T, u8>(&work);
        match &want {
            None => want = Some(got.to_vec()),
            Some(w) if w.as_slice() != got => {
                return Err(Error::runtime(format!(
                    "bench: the sort on {} differs from one device's",
                    devices_words(k)
                )))
            }
            _ => {}
        }
        if k == 1 {
            base = st.median_s;
        }
        let note = format!(
            "host to host, {:.2}x one device; a parallel memcpy of the same {} MiB took {:.3} s ({:.1} GB/s): {:.2}x of it",
            base / st.median_s,
            bytes >> 20,
            memcpy.median_s,
            bytes as f64 / memcpy.median_s / 1e9,
            st.median_s / memcpy.median_s
        );
        cases.push(case(
            format!("sort {} keys, {}", T::TYPE, devices_words(k)),
            n as u64,
            st,
            n as f64 / 1e9,
            "GKeys/s",
            base,
            note,
        ));
        ctx.bar.inc(1);
    }
    Ok(())
}

fn scan_cases(
    ctx: &Ctx<'_>,
    group: &DeviceGroup,
    scanners: &[Scanner],
    n: usize,
    cases: &mut Vec<Case>,
) -> Result<(), Error> {
    let data: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2654435761) >> 8)
        .collect();
    let out = std::sync::Mutex::new(vec![0u32; n]);
    let chunk = gpusort_core::scan::streamed::chunk_elements(group.first(), 4, None);
    let mut base = 0.0;
    let mut want: Option<Vec<u32>> = None;
    for k in 1..=group.len() {
        ctx.bar.set_message(format!(
            "multi: scan 2^{} u32 on {}",
            n.ilog2(),
            devices_words(k)
        ));
        let sub = group.prefix(k);
        let st = measure(ctx.reps, || {
            let t = Instant::now();
            // each chunk lands in its place: the copy a caller's sink would do
            let ptr = out
                .lock()
                .map_err(|_| Error::runtime("bench: a poisoned lock"))?
                .as_mut_ptr() as usize;
            multi::scan::scan_streamed(
                &sub,
                &scanners[..k],
                &data,
                &gpusort_core::scan::streamed::ScanStream::new(ScanOp::Add, false, chunk),
                &|at, piece| {
                    // SAFETY: chunks are disjoint ranges of `out`, which outlives the call and is
                    // not otherwise touched while it runs
                    let dst = unsafe {
                        std::slice::from_raw_parts_mut((ptr as *mut u32).add(at), piece.len())
                    };
                    dst.copy_from_slice(piece);
                    Ok(())
                },
            )?;
            Ok(t.elapsed().as_secs_f64())
        })?;
        let got = out
            .lock()
            .map_err(|_| Error::runtime("bench: a poisoned lock"))?
            .clone();
        match &want {
            None => want = Some(got),
            Some(w) if *w != got => {
                return Err(Error::runtime(format!(
                    "bench: the scan on {} differs from one device's",
                    devices_words(k)
                )))
            }
            _ => {}
        }
        if k == 1 {
            base = st.median_s;
        }
        cases.push(case(
            format!("exclusive u32 sum scan, {}", devices_words(k)),
            n as u64,
            st.clone(),
            n as f64 / 1e9,
            "GElem/s",
            base,
            format!("host to host, {:.2}x one device", base / st.median_s),
        ));
        ctx.bar.inc(1);
    }
    Ok(())
}

fn stencil_cases(
    ctx: &Ctx<'_>,
    group: &DeviceGroup,
    name: &str,
    job: StencilJob,
    cases: &mut Vec<Case>,
) -> Result<(), Error> {
    let cells = job.shape.cells();
    let grid: Vec<f32> = (0..cells)
        .map(|i| ((i * 7919) % 1013) as f32 / 1013.0)
        .collect();
    let mut out = vec![0f32; cells];
    // the kernels a user's job gets (`gpusort stencil`: planned on the first device)
    let first = StencilKernel::planned(group.first(), &job)?;
    let mut kernels = vec![];
    for gpu in &group.gpus()[1..] {
        kernels.push(StencilKernel::with_choice(gpu, &job, first.choice())?);
    }
    kernels.insert(0, first);
    let (mut base, mut base_resident, mut base_best) = (0.0, 0.0, 0.0);
    let mut want: Option<Vec<f32>> = None;
    for k in 1..=group.len() {
        ctx.bar
            .set_message(format!("multi: {name} on {}", devices_words(k)));
        let sub = group.prefix(k);
        let mut resident = Vec::new();
        let mut last = None;
        let st = super::measure_warm(ctx.reps.min(5), ctx.warm, || {
            let t = Instant::now();
            let s = multi::stencil::run(
                &sub,
                &kernels[..k],
                bytemuck::cast_slice(&grid),
                bytemuck::cast_slice_mut(&mut out),
            )?;
            resident.push(s.compute_s + s.exchange_s + s.wait_s);
            last = Some(s);
            Ok(t.elapsed().as_secs_f64())
        })?;
        match &want {
            None => want = Some(out.clone()),
            Some(w)
                if bytemuck::cast_slice::<f32, u8>(w) != bytemuck::cast_slice::<f32, u8>(&out) =>
            {
                return Err(Error::runtime(format!(
                    "bench: the stencil on {} differs from one device's",
                    devices_words(k)
                )))
            }
            _ => {}
        }
        let res = gpusort_core::bench::Stats::of(resident);
        if k == 1 {
            base = st.median_s;
            base_resident = res.median_s;
            base_best = res.min_s;
        }
        let s = last.unwrap_or_default();
        let updates = cells as f64 * job.steps as f64;
        let note = format!(
            "{} slab(s) a device, {} rounds of {} steps (slabs of a device: every {}); end to end {:.2}x one device; resident (steps + exchanges) {:.3} s = {:.2}x one device, {:.0} GCells/s, best run {:.3} s = {:.2}x; steps {:.3} s (each device: {}), exchange copies {:.3} s, waits {:.3} s; in (buffers and upload) {:.3} s, out {:.3} s",
            s.slabs_per_device,
            s.rounds,
            s.round_steps,
            s.local_steps,
            base / st.median_s,
            res.median_s,
            base_resident / res.median_s,
            updates / res.median_s / 1e9,
            res.min_s,
            base_best / res.min_s,
            s.compute_s,
            s.compute_each_s
                .iter()
                .map(|c| format!("{c:.3}"))
                .collect::<Vec<_>>()
                .join(" / "),
            s.exchange_s,
            s.wait_s,
            s.upload_s,
            s.download_s
        );
        cases.push(case(
            format!("stencil {name}, {}", devices_words(k)),
            cells as u64,
            st,
            updates / 1e9,
            "GCells/s",
            base,
            note,
        ));
        ctx.bar.inc(1);
    }
    Ok(())
}

/// Every case on 1..N devices of `group`.
pub fn suite(
    ctx: &Ctx<'_>,
    group: &DeviceGroup,
    sizes: &[u32],
    quick: bool,
) -> Result<Vec<Case>, Error> {
    let mut cases = Vec::new();
    let sorters = group
        .gpus()
        .iter()
        .map(|g| Sorter::new(g))
        .collect::<Result<Vec<_>, _>>()?;
    let scanners = group
        .gpus()
        .iter()
        .map(|g| Scanner::new(g))
        .collect::<Result<Vec<_>, _>>()?;
    let per = group.len() as u64;
    ctx.bar.inc_length(per * (3 * sizes.len() as u64 + 2));
    for &log in sizes {
        sort_cases::<u32>(ctx, group, &sorters, 1 << log, &mut cases)?;
        sort_cases::<u64>(ctx, group, &sorters, 1 << (log - 1), &mut cases)?;
        scan_cases(ctx, group, &scanners, 1 << log.min(30), &mut cases)?;
    }
    let (side2, side3) = if quick { (512, 64) } else { (32768, 1024) };
    let job = |shape: &[usize], stencil: Stencil| -> Result<StencilJob, Error> {
        Ok(StencilJob {
            shape: GridShape::new(shape)?,
            stencil,
            boundary: Boundary::Reflect,
            cval: 0.0,
            steps: 64,
            dtype: KeyType::F32,
        })
    };
    stencil_cases(
        ctx,
        group,
        &format!("2-D {side2}² star r2, 64 steps"),
        job(&[side2, side2], Stencil::star(2, 2)?)?,
        &mut cases,
    )?;
    stencil_cases(
        ctx,
        group,
        &format!("3-D {side3}³ star r1, 64 steps"),
        job(&[side3, side3, side3], Stencil::star(3, 1)?)?,
        &mut cases,
    )?;
    Ok(cases)
}
