#!/usr/bin/env bash
# The device runs that issues 37, 41 and 43 wait for, as one command on the GPU machine (see
# docs/BENCHMARKS.md "Reproduce"): `source .device/setup.sh && bench/pending_device_runs.sh BIN`.
# Each step's output goes to $OUT/<step>.txt (the device tool brings $OUT back); a step runs at
# most STEP_S seconds, and steps whose kind is not present (several GPUs) are skipped.
# DRY=1 prints the commands instead of running them.
set -u
bin=${1:?usage: bench/pending_device_runs.sh GPUSORT_BINARY}
out=${OUT:-.}
limit=${STEP_S:-240}
run() {
  local name=$1
  shift
  if [ -n "${DRY:-}" ]; then
    echo "$name: $*"
    return
  fi
  echo "== $name ($(date -u +%H:%M:%S))"
  timeout "$limit" "$@" >"$out/$name.txt" 2>&1
  echo "   exit $?"
}
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
# 43: f64 two cells an invocation (the "2 cells/invocation" rows) against one, and the 3-D
# radius-1 passes in registers on this card
run stencil "$bin" bench --suite stencil --sizes 26 --stencils 2d-star-r2,3d-star-r1 --progress never
# 37 and 43: the tuner end to end (its stencil step has not run on a GPU), in a cache of its own
run tune env GPUSORT_CACHE_DIR="$out/tune-cache" "$bin" tune --progress never
# 37: every key type and key set, then CuPy on the very same arrays
run sort-keys "$bin" bench --suite sort --sizes 24,26 --keys all --gpu-only --progress never \
  --json "$out/keys.json"
run sort-cupy python3 bench/cupy_reference.py "$out/keys.json" --matrix
# 37: scans and compaction against the copy bound at 2^28
run scan "$bin" bench --suite scan --sizes 24,28 --progress never
# 41: one job over every GPU, where the machine has several
if [ "$gpus" -gt 1 ] || [ -n "${DRY:-}" ]; then
  run multi "$bin" --devices all bench --suite multi --sizes 28,31 --reps 3 --progress never
fi
