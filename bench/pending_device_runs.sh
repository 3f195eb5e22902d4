#!/usr/bin/env bash
# The device runs the open issues wait for, as commands on the GPU machine (see
# docs/BENCHMARKS.md "Reproduce"): `source .device/setup.sh && bench/pending_device_runs.sh BIN
# [STEP...]`. Each step's output goes to $OUT/<step>.txt (the device tool brings $OUT back); a
# step runs at most STEP_S seconds. With no STEP every step runs: more than one device call's ten
# minutes, so name the steps of one call (e.g. `matrix-small cupy-small`, then `matrix-26
# cupy-26`). DRY=1 prints the commands instead of running them.
set -u
bin=${1:?usage: bench/pending_device_runs.sh GPUSORT_BINARY [STEP...]}
shift
out=${OUT:-.}
limit=${STEP_S:-280}
wanted=" $* "
run() {
  local name=$1
  shift
  if [ "$wanted" != "  " ] && [[ "$wanted" != *" $name "* ]]; then
    return
  fi
  if [ -n "${DRY:-}" ]; then
    echo "$name: $*"
    return
  fi
  echo "== $name ($(date -u +%H:%M:%S))"
  timeout "$limit" "$@" >"$out/$name.txt" 2>&1
  echo "   exit $?"
}
# issue 66: every key type and key set (the four added 2026-11-30 included) against CuPy on the
# very same arrays, 2^16-2^24 in one step and 2^26 in another; a warm-up of every type first, as
# a freshly started machine's first process measures slow (docs/BENCHMARKS.md)
run warm "$bin" bench --suite sort --sizes 20 --keys uniform --gpu-only --progress never
run matrix-small "$bin" bench --suite sort --sizes 16,20,24 --keys all --gpu-only --warmup 100 \
  --reps 10 --progress never --json "$out/matrix-small.json"
run cupy-small python3 bench/cupy_reference.py "$out/matrix-small.json" --matrix --warm-ms 100
run matrix-26 "$bin" bench --suite sort --sizes 26 --keys all --gpu-only --warmup 100 --reps 10 \
  --progress never --json "$out/matrix-26.json"
run cupy-26 python3 bench/cupy_reference.py "$out/matrix-26.json" --matrix --warm-ms 100
# issue 66: CUB's sm90 sweep shape, 384 invocations, against the default 512 x 9, every sort on
# the LSD passes, A B C A B C (measured 2026-11-30: slower, bench/results/h200-radix-wg384-*.md;
# one round takes ~190 s)
shapes=("" ', "wg": 384, "items": 12' ', "wg": 384, "items": 16')
files=()
for i in 0 1 2; do
  files+=("$out/wg384-$i.json")
  [ -n "${DRY:-}" ] || echo "{\"sort\": {\"msd_from\": 4294967295${shapes[$i]}}}" >"$out/wg384-$i.json"
done
run wg384 bash -c 'b=$0; for f in "$@"; do echo "== $f"; "$b" --tuning "$f" bench --suite sort \
  --sizes 20,24,26 --dtypes u32,f32,u64 --keys uniform,zipf --gpu-only --warmup 100 --reps 7 \
  --progress never; done' "$bin" "${files[@]}" "${files[@]}"
# issue 68: scans (32- and 64-bit: `exclusive sum scan u64`, one dispatch since 2026-12-01,
# 28% of the copy then), compaction and partition against the copy bound; every stencil, f32 and
# f64
run scan "$bin" bench --suite scan --sizes 24,26,28 --progress never
# issue 68: the chained u64 scan's tiles scanned by subgroups in contiguous runs
# (scan.scan64_subgroup_tiles, landed off and not yet measured) against the default, A B A B
[ -n "${DRY:-}" ] || echo '{"scan": {"scan64_subgroup_tiles": true}}' >"$out/scan64-sg.json"
run scan64-tiles bash -c 'b=$0; for f in "" "$1" "" "$1"; do echo "== ${f:-default}"; \
  "$b" ${f:+--tuning "$f"} bench --suite scan --sizes 24,26,27 --gpu-only --progress never \
  | grep u64; done' "$bin" "$out/scan64-sg.json"
run stencil "$bin" bench --suite stencil --sizes 24,26 --stencils all --progress never
