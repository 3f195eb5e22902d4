//! CPU twin of shaders/bitonic.wgsl: executes a [`BitonicPlan`] pass by pass, comparator by
//! comparator, on planes of u32 words compared lexicographically. Positions at or past `n` are
//! +inf and, as on the GPU, never read or written.

use crate::sort::{BitonicPlan, Pass};

/// One step of the network: the stage's mirrored step (`i ^ (k - 1)`) or a plain one (`i ^ j`).
fn step(planes: &mut [Vec<u32>], n: usize, k: usize, j: usize, mirror: bool) {
    let virtual_len = n.next_power_of_two().max(k);
    for i in 0..virtual_len {
        if i & j != 0 {
            continue; // i is the upper element of its pair
        }
        let partner = if mirror { i ^ (k - 1) } else { i ^ j };
        if partner >= n {
            continue; // the partner is +inf: nothing moves
        }
        let less = planes
            .iter()
            .map(|p| p[partner].cmp(&p[i]))
            .find(|o| o.is_ne())
            == Some(std::cmp::Ordering::Less);
        if less {
            for p in planes.iter_mut() {
                p.swap(i, partner);
            }
        }
    }
}

fn stage(
    planes: &mut [Vec<u32>],
    n: usize,
    k: usize,
    j_from: usize,
    j_to: usize,
    mirror_first: bool,
) {
    let mut j = j_from;
    let mut mirror = mirror_first;
    while j >= j_to && j >= 1 {
        step(planes, n, k, j, mirror);
        mirror = false;
        j /= 2;
    }
}

/// Run `plan` over `planes` (each at least `plan.n` long), exactly as the GPU dispatches it.
pub fn run(plan: &BitonicPlan, planes: &mut [Vec<u32>]) {
    let n = plan.n as usize;
    let tile = plan.tile as usize;
    for pass in &plan.passes {
        match *pass {
            Pass::LocalSort => {
                let mut k = 2;
                while k <= (plan.k_end as usize).min(tile) {
                    stage(planes, n, k, k / 2, 1, true);
                    k *= 2;
                }
            }
            Pass::Global {
                k,
                j,
                steps,
                mirror,
            } => {
                let (k, j) = (k as usize, j as usize);
                stage(planes, n, k, j, j >> (steps - 1), mirror);
            }
            Pass::LocalMerge { k } => stage(planes, n, k as usize, tile / 2, 1, false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(n: u32, k_end: u32, tile: u32, seed: u64) {
        let mut x = seed;
        let mut key: Vec<u32> = (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 33) % 50) as u32
            })
            .collect();
        let idx: Vec<u32> = (0..n).collect();
        let mut planes = vec![key.clone(), idx];
        let plan = BitonicPlan::new(n, k_end, tile, 3);
        run(&plan, &mut planes);
        let seg = k_end.max(1) as usize;
        let mut expect: Vec<(u32, u32)> = Vec::new();
        for (c, chunk) in key.chunks_mut(seg).enumerate() {
            let mut pairs: Vec<(u32, u32)> = chunk
                .iter()
                .enumerate()
                .map(|(i, &k)| (k, (c * seg + i) as u32))
                .collect();
            pairs.sort();
            expect.extend(pairs);
        }
        let got: Vec<(u32, u32)> = planes[0]
            .iter()
            .zip(&planes[1])
            .map(|(&a, &b)| (a, b))
            .collect();
        assert_eq!(got, expect, "n={n} k_end={k_end} tile={tile}");
    }

    #[test]
    fn plan_sorts_on_the_cpu_for_many_sizes() {
        for n in [
            0u32, 1, 2, 3, 5, 16, 17, 31, 64, 100, 255, 256, 257, 1000, 1024, 1500, 4097,
        ] {
            check(n, n.next_power_of_two().max(2), 64, n as u64);
            check(n, n.next_power_of_two().max(2), 16, n as u64 + 7);
        }
    }

    #[test]
    fn segments_sort_independently() {
        for (n, seg) in [
            (64u32, 2u32),
            (100, 4),
            (1000, 16),
            (1000, 128),
            (4096, 1024),
            (70, 32),
        ] {
            check(n, seg, 64, 3);
        }
    }
}
