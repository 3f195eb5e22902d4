#!/usr/bin/env bash
# The digit histogram's workgroup size in tiles (sort::Tuning::hist_chunks, through `--tuning`):
# the histogram dispatch alone (sort.stop = 1, a measuring build), then whole sorts, for
# each candidate, in one run. `source .device/setup.sh && bench/radix_hist_chunks.sh BIN` on the GPU
# machine; the tables go to $OUT/hist-chunks.txt.
set -u
bin=${1:?usage: bench/radix_hist_chunks.sh GPUSORT_BINARY}
out=${OUT:-.}
log="$out/hist-chunks.txt"
chunks=${CHUNKS:-1 2 4 8}
common=(bench --suite sort --keys uniform --dtypes u32,f32,u64,f64 --gpu-only --warmup 200
  --reps 10 --progress never --sizes "${SIZES:-24,26}")
step() {
  echo "== $1 ($(date -u +%H:%M:%S))" | tee -a "$log"
  shift
  env "$@" >>"$log" 2>&1
  echo "   exit $?" | tee -a "$log"
}
tuning=$(mktemp)
trap 'rm -f "$tuning"' EXIT
for c in $chunks; do
  echo "{\"sort\": {\"stop\": 1, \"hist_chunks\": $c}}" >"$tuning"
  step "histogram alone, hist_chunks=$c" timeout 150 "$bin" --tuning "$tuning" "${common[@]}"
done
for c in $chunks; do
  echo "{\"sort\": {\"hist_chunks\": $c}}" >"$tuning"
  step "whole sorts, hist_chunks=$c" timeout 150 "$bin" --tuning "$tuning" "${common[@]}"
done
