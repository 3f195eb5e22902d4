#!/usr/bin/env bash
# The radix MSD path step by step on the GPU machine: keys-only u32 sorts of 2^24, 2^26 and 2^28
# keys recorded up to each dispatch of the path (`--tuning` sort.stop = 10+k, results wrong on
# purpose), so that the differences of consecutive rows time each step, barriers included; then
# the whole sort and the LSD passes alone. Alternating processes, two rounds.
#   bench/msd_steps.sh GPUSORT [SIZES]   (GPUSORT: a measuring build, `cargo build --release --features measure`;
#   normal builds refuse sort.stop)
# Rows: stop 1 count_digits + prepare; 11 the top digit's sweep; 12 msd_count; 13 msd_scan (its
# last workgroup decides); 14 msd_sweep; 15 msd_local; 16 msd_plan_rest (msd_dense's size); 17
# msd_dense; 0 the whole sort (the LSD passes' empty dispatches).
# Then the whole sort with msd_local's measuring variant sort.msd_prefetch = false (checked by
# the bench); its registers: bench/kernel_stats.sh with the configuration
# 'nopre:sort:{"sort":{"msd_from":0,"msd_prefetch":false}}'.
set -u
bin=$1
sizes=${2:-24,26,28}
export GPUSORT_BENCH_SORTS="radix (8"
tuning=$(mktemp)
trap 'rm -f "$tuning"' EXIT
# b TUNING_JSON: the bench under that tuning
b() {
  echo "$1" >"$tuning"
  "$bin" --tuning "$tuning" bench --suite sort --sizes "$sizes" --gpu-only --reps 10 --progress never 2>&1 |
    grep -E "radix|copy" | cut -c1-75
}
for r in 1 2; do
  for s in 1 11 12 13 14 15 16 17 0; do
    echo "== round $r stop $s"
    b "{\"sort\": {\"stop\": $s}}"
  done
  echo "== round $r no prefetch"
  b '{"sort": {"msd_prefetch": false}}'
  echo "== round $r lsd"
  b '{"sort": {"msd_from": 4294967295}}'
done
