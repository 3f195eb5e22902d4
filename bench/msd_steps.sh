#!/usr/bin/env bash
# The radix MSD path step by step on the GPU machine: keys-only u32 sorts of 2^24, 2^26 and 2^28
# keys recorded up to each dispatch of the path (GPUSORT_RADIX_STOP=10+k, results wrong on
# purpose), so that the differences of consecutive rows time each step, barriers included; then
# the whole sort and the LSD passes alone. Alternating processes, two rounds.
#   bench/msd_steps.sh GPUSORT [SIZES]   (GPUSORT: a measuring build, `cargo build --release --features measure`;
#   normal builds ignore GPUSORT_RADIX_STOP)
# Rows: stop 1 count_digits + prepare; 11 the top digit's sweep; 12 msd_count; 13 msd_scan (its
# last workgroup decides); 14 msd_sweep; 15 msd_local; 16 msd_plan_rest (msd_dense's size); 17
# msd_dense; 0 the whole sort (the LSD passes' empty dispatches).
# Then the whole sort with msd_local's measuring variant GPUSORT_RADIX_MSD_PREFETCH=0 (checked by
# the bench); its registers: bench/kernel_stats.sh with the configuration
# nopre:sort:GPUSORT_RADIX_MSD_FROM=0,GPUSORT_RADIX_MSD_PREFETCH=0.
set -u
bin=$1
sizes=${2:-24,26,28}
export GPUSORT_BENCH_SORTS="radix (8"
b() {
  "$bin" bench --suite sort --sizes "$sizes" --gpu-only --reps 10 --progress never 2>&1 |
    grep -E "radix|copy" | cut -c1-75
}
for r in 1 2; do
  for s in 1 11 12 13 14 15 16 17 0; do
    echo "== round $r stop $s"
    GPUSORT_RADIX_STOP=$s b
  done
  echo "== round $r no prefetch"
  GPUSORT_RADIX_MSD_PREFETCH=0 b
  echo "== round $r lsd"
  GPUSORT_RADIX_MSD_FROM=4294967295 b
done
