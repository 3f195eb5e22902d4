#!/usr/bin/env bash
# The driver's figures (registers, shared memory, stack) for gpusort's kernels in the
# configurations tuning files select: each configuration runs a small bench with
# GPUSORT_DUMP_WGSL set (the kernels as composed for this device) and its tuning given by
# `--tuning`, then the shader_stats example reads every dump. On the GPU machine both binaries
# are built here and carried in .device/.
#   bench/kernel_stats.sh GPUSORT SHADER_STATS OUTDIR [NAME:SUITE[:TUNING_JSON] ...]
# (TUNING_JSON as `--tuning` takes it, e.g. default:sort:{"sort":{"items":6}})
# Without configurations: the default list below.
set -u
bin=$1 stats=$2 out=$3
shift 3
configs=("$@")
if [ ${#configs[@]} -eq 0 ]; then
  configs=(default:sort
    'radix_items6:sort:{"sort":{"items":6}}' 'radix_items7:sort:{"sort":{"items":7}}'
    'radix_items8:sort:{"sort":{"items":8}}' 'radix_items10:sort:{"sort":{"items":10}}'
    'radix_items11:sort:{"sort":{"items":11}}' 'radix_items12:sort:{"sort":{"items":12}}'
    'radix_wg256:sort:{"sort":{"wg":256}}' 'radix_wg1024:sort:{"sort":{"wg":1024}}'
    'radix_loop:sort:{"sort":{"workgroups":1024}}' scan_default:scan
    'compact_rounds4:scan:{"scan":{"compact_rounds":4}}'
    'compact_rounds12:scan:{"scan":{"compact_rounds":12}}'
    'compact_512_whole_stage:scan:{"scan":{"compact_wg":512,"compact_stage":16384}}'
    'compact_loop:scan:{"scan":{"compact_workgroups":1024}}')
fi
mkdir -p "$out"
for c in "${configs[@]}"; do
  IFS=: read -r name suite tuning <<<"$c"
  echo "${tuning:-{\}}" > "$out/$name.json"
  GPUSORT_DUMP_WGSL="$out/$name" "$bin" --tuning "$out/$name.json" bench --suite "$suite" \
    --sizes 16 --reps 1 --gpu-only --progress never -q >/dev/null 2>"$out/$name.err" \
    || echo "$name: bench failed" >&2
  echo "## $name ${tuning:-}"
  "$stats" "$out/$name" | grep -v '^# device'
done
