#!/usr/bin/env bash
# The digit histogram and whole radix sorts of two binaries side by side: the histogram dispatch
# alone (`--tuning` sort.stop = 1, measuring builds), then whole sorts, A B A B.
# `source .device/setup.sh && bench/radix_hist_ab.sh A B` on the GPU machine; the log goes to
# $OUT/hist-ab.txt.
set -u
a=${1:?usage: bench/radix_hist_ab.sh A_BINARY B_BINARY}
b=${2:?usage: bench/radix_hist_ab.sh A_BINARY B_BINARY}
out=${OUT:-.}
log="$out/hist-ab.txt"
common=(bench --suite sort --gpu-only --warmup 100 --reps 10 --progress never --sizes "${SIZES:-24,26}")
keys=(--keys "${KEYS:-uniform,timestamps,zipf}" --dtypes "${DTYPES:-u32,f32,u64,f64}")
step() {
  echo "== $1 ($(date -u +%H:%M:%S))" | tee -a "$log"
  shift
  env "$@" >>"$log" 2>&1
  echo "   exit $?" | tee -a "$log"
}
stop1=$(mktemp)
trap 'rm -f "$stop1"' EXIT
echo '{"sort": {"stop": 1}}' >"$stop1"
for bin in A B; do
  [ $bin = A ] && exe=$a || exe=$b
  step "histogram alone, $bin" timeout 100 "$exe" --tuning "$stop1" "${common[@]}" "${keys[@]}"
done
for round in 1 2; do
  step "whole sorts, A, round $round" timeout 150 "$a" "${common[@]}" "${keys[@]}"
  step "whole sorts, B, round $round" timeout 150 "$b" "${common[@]}" "${keys[@]}"
done
