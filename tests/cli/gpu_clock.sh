# gpu_clock.sh: the plan's clock against plait's GPU run of 2026-11-27 on an H200
# (docs/gpu-check-2026-11-27-NVIDIA-H200.md): h200.lua with plait's own attention kernels, the ones that
# run ran, predicts each benchmark's measured step within 15%; on cuDNN's kernels (h200.lua as it is,
# what the next GPU run checks) every benchmark is faster. --print costs names the kernel each layer's
# attention is timed on: cuDNN where the runtime's rules let it, plait's kernels for capped scores, and
# how many layers each where layers differ.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

sed 's/attention = "cudnn",/attention = "plait",/' lib/plait/machines/h200.lua >"$TMP/h200_plait.lua"
grep -q 'attention = "plait",' "$TMP/h200_plait.lua" || fail gpu_clock_machine "h200.lua names no cuDNN attention"
iteration() { sed -n 's/.*"iteration_time": \([0-9.e+-]*\),.*/\1/p'; }

# the benchmarks (tests/gpu/benchmarks.txt) and their measured steps, ms (the report's Benchmarks table)
measured() { case $1 in gpt2-bench) echo 531.7 ;; gpt2-bench-large) echo 1328.6 ;; gpt-1.3b-bench) echo 1190.6 ;; esac; }
grep -v '^#' tests/gpu/benchmarks.txt | while read -r _ dir _ _ _ _ _ _ args; do
  # shellcheck disable=SC2086
  plait=$($PLAIT plan $args --machine "$TMP/h200_plait.lua" --format json | iteration)
  # shellcheck disable=SC2086
  cudnn=$($PLAIT plan $args --machine h200 --format json | iteration)
  awk -v name="$dir" -v p="$plait" -v c="$cudnn" -v m="$(measured "$dir")" 'BEGIN {
    detail = sprintf("predicted %.1f ms on plait'\''s kernels, measured %.1f ms (%.3f); on cuDNN'\''s %.1f ms", \
                     1e3 * p, m, 1e3 * p / m, 1e3 * c)
    r = 1e3 * p / m
    if (r > 0.85 && r < 1.15) print "PASS gpu_clock_" name ": " detail; else print "FAIL gpu_clock_" name ": " detail
    if (c > 0 && c < p) print "PASS gpu_clock_cudnn_faster_" name; else print "FAIL gpu_clock_cudnn_faster_" name ": " detail
  }'
done

# which kernel each attention is timed on
costs() { $PLAIT plan "$@" --print costs | grep -E '^  (fwd|bwd) attention'; }
kernels() { sed -E 's/^  (fwd|bwd) +[a-z_]+ +[^ ]+ +(.*[^ ]) +[0-9.]+ µs.*/\2/' | sort -u | tr '\n' '|'; }
on_gpt2=$(costs models/gpt2.lua --machine h200 | kernels)
[ "$on_gpt2" = "cuDNN|" ] && pass gpu_clock_gpt2_on_cudnn || fail gpu_clock_gpt2_on_cudnn "timed on: $on_gpt2"
on_plait=$(costs models/gpt2.lua --machine "$TMP/h200_plait.lua" | kernels)
[ "$on_plait" = "plait's kernels|" ] && pass gpu_clock_without_cudnn || fail gpu_clock_without_cudnn "timed on: $on_plait"
on_gemma=$(costs models/gemma2.lua --set layers=2 --machine h200 | kernels)
[ "$on_gemma" = "plait's kernels|" ] && pass gpu_clock_capped_scores || fail gpu_clock_capped_scores "timed on: $on_gemma"
on_odd=$(costs models/gpt.lua --set layers=2 hidden=240 heads=4 seq=256 --machine h200 | kernels)
[ "$on_odd" = "plait's kernels|" ] && pass gpu_clock_heads_of_60 || fail gpu_clock_heads_of_60 "timed on: $on_odd"
costs tests/cli/models/softcap_by_layer.lua --machine h200 >"$TMP/mixed"
costs tests/cli/models/softcap_by_layer.lua --machine "$TMP/h200_plait.lua" >"$TMP/plait"
on_mixed=$(kernels <"$TMP/mixed")
[ "$on_mixed" = "cuDNN 2 layers, plait's 2|" ] && pass gpu_clock_layers_differ || fail gpu_clock_layers_differ "timed on: $on_mixed"
# half the layers on cuDNN: the block's attention is faster than all of them on plait's kernels
forward() { grep '^  fwd' "$1" | sed 's/.* \([0-9.]*\) µs.*/\1/'; }
awk -v mixed="$(forward "$TMP/mixed")" -v plait="$(forward "$TMP/plait")" 'BEGIN { exit !(mixed > 0 && mixed < plait) }' &&
  pass gpu_clock_layers_differ_time || fail gpu_clock_layers_differ_time "$(forward "$TMP/mixed") µs, all on plait's $(forward "$TMP/plait") µs"
