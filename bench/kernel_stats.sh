#!/usr/bin/env bash
# The driver's figures (registers, shared memory, stack) for gpusort's kernels in the
# configurations the tuning knobs select: each configuration runs a small bench with
# GPUSORT_DUMP_WGSL set (the kernels as composed for this device), then the shader_stats example
# reads every dump. On the GPU machine both binaries are built here and carried in .device/.
#   bench/kernel_stats.sh GPUSORT SHADER_STATS OUTDIR [NAME:SUITE[:VAR=VALUE[,VAR=VALUE...]] ...]
# Without configurations: the default list below.
set -u
bin=$1 stats=$2 out=$3
shift 3
configs=("$@")
if [ ${#configs[@]} -eq 0 ]; then
  configs=(default:sort radix_items6:sort:GPUSORT_RADIX_ITEMS=6 radix_items7:sort:GPUSORT_RADIX_ITEMS=7
    radix_items8:sort:GPUSORT_RADIX_ITEMS=8 radix_items10:sort:GPUSORT_RADIX_ITEMS=10
    radix_items11:sort:GPUSORT_RADIX_ITEMS=11 radix_items12:sort:GPUSORT_RADIX_ITEMS=12
    radix_wg256:sort:GPUSORT_RADIX_WG=256 radix_wg1024:sort:GPUSORT_RADIX_WG=1024
    radix_loop:sort:GPUSORT_RADIX_WORKGROUPS=1024 scan_default:scan
    compact_rounds4:scan:GPUSORT_COMPACT_ROUNDS=4 compact_rounds12:scan:GPUSORT_COMPACT_ROUNDS=12
    compact_512_whole_stage:scan:GPUSORT_COMPACT_WG=512,GPUSORT_COMPACT_STAGE=16384
    compact_loop:scan:GPUSORT_COMPACT_WORKGROUPS=1024)
fi
mkdir -p "$out"
for c in "${configs[@]}"; do
  IFS=: read -r name suite vars <<<"$c"
  IFS=, read -r -a envs <<<"${vars:-}"
  env "${envs[@]}" GPUSORT_DUMP_WGSL="$out/$name" "$bin" bench --suite "$suite" --sizes 16 --reps 1 \
    --gpu-only --progress never -q >/dev/null 2>"$out/$name.err" || echo "$name: bench failed" >&2
  echo "## $name ${vars:-}"
  "$stats" "$out/$name" | grep -v '^# device'
done
