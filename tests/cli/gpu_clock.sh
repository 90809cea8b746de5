# gpu_clock.sh: the plan's clock against plait's GPU runs. Each run's machine file, with the attention
# kernels that run ran, predicts each benchmark's (tests/gpu/benchmarks.txt) measured step within 15%:
# - 2026-11-27, an H200 on plait's own attention kernels (docs/gpu-check-2026-11-27-NVIDIA-H200.md):
#   tests/cli/machines/h200-2026-11-27.lua, h200.lua as that run calibrated it; on cuDNN's kernels (the
#   same file with attention = "cudnn") every benchmark is faster;
# - 2026-11-28, an H200 on cuDNN's attention (docs/gpu-check-2026-11-28-NVIDIA-H200.md): h200.lua as
#   it is;
# - 2026-11-28, an H100 on plait's own attention kernels (docs/gpu-check-2026-11-28-NVIDIA-H100-80GB-HBM3.md):
#   h100.lua with attention = "plait"; on cuDNN's (h100.lua as it is) every benchmark is faster.
# --print costs names the kernel each layer's attention is timed on: cuDNN where the runtime's rules let
# it, plait's kernels for capped scores, and how many layers each where layers differ.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

TOLERANCE=${GPU_CLOCK_TOLERANCE:-0.15}
# with_attention KIND FILE OUT: the machine file with kernels.attention = KIND
with_attention() {
  sed "s/attention = \"[a-z]*\",/attention = \"$1\",/" "$2" >"$3"
  grep -q "attention = \"$1\"," "$3" || fail gpu_clock_machine "$2 names no kernels.attention"
}
with_attention plait lib/plait/machines/h200.lua "$TMP/h200_plait.lua"
with_attention plait lib/plait/machines/h100.lua "$TMP/h100_plait.lua"
with_attention cudnn tests/cli/machines/h200-2026-11-27.lua "$TMP/h200_1127_cudnn.lua"
iteration() { sed -n 's/.*"iteration_time": \([0-9.e+-]*\),.*/\1/p'; }

# the benchmarks' measured steps, ms (each report's Benchmarks table): RUN DIR
measured() {
  case $1/$2 in
    1127-h200/gpt2-bench) echo 531.7 ;; 1127-h200/gpt2-bench-large) echo 1328.6 ;; 1127-h200/gpt-1.3b-bench) echo 1190.6 ;;
    1128-h200/gpt2-bench) echo 121.6 ;; 1128-h200/gpt2-bench-large) echo 306.3 ;; 1128-h200/gpt-1.3b-bench) echo 259.6 ;;
    1128-h100/gpt2-bench) echo 145.3 ;; 1128-h100/gpt2-bench-large) echo 351.0 ;; 1128-h100/gpt-1.3b-bench) echo 305.5 ;;
  esac
}
# RUN MACHINE(what ran) OTHER(the other attention kernels, expected faster, or -): one PASS or FAIL a benchmark
while read -r run machine other; do
  grep -v '^#' tests/gpu/benchmarks.txt | while read -r _ dir _ _ _ _ _ _ args; do
    # shellcheck disable=SC2086
    p=$($PLAIT plan $args --machine "$machine" --format json | iteration)
    o=
    # shellcheck disable=SC2086
    [ "$other" = - ] || o=$($PLAIT plan $args --machine "$other" --format json | iteration)
    awk -v name="${run}_$dir" -v p="$p" -v o="$o" -v m="$(measured "$run" "$dir")" -v tol="$TOLERANCE" 'BEGIN {
      if (p == "" || m == "") { print "FAIL gpu_clock_" name ": no plan or no measured step"; exit }
      r = 1e3 * p / m
      detail = sprintf("predicted %.1f ms, measured %.1f ms (%.3f)", 1e3 * p, m, r)
      if (r > 1 - tol && r < 1 + tol) print "PASS gpu_clock_" name ": " detail; else print "FAIL gpu_clock_" name ": " detail
      if (o == "") exit
      detail = sprintf("%s; on the other attention kernels %.1f ms", detail, 1e3 * o)
      if (o > 0 && o < p) print "PASS gpu_clock_cudnn_faster_" name; else print "FAIL gpu_clock_cudnn_faster_" name ": " detail
    }'
  done
done <<RUNS
1127-h200 tests/cli/machines/h200-2026-11-27.lua $TMP/h200_1127_cudnn.lua
1128-h200 h200 -
1128-h100 $TMP/h100_plait.lua h100
RUNS

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

# the cross entropy whose forward takes the gradient (rt_xent_forward_grad: the logits read and written
# once) has a backward that costs nothing; split by vocabulary (tp 2) the backward is its own pass
xent_lines() { $PLAIT plan "$@" --print costs | grep -cE '^  bwd xent_bwd '; }
fused=$(xent_lines models/gpt2.lua --machine h200)
split=$(xent_lines models/gpt2.lua --tp 2 --machine h200)
[ "$fused" = 0 ] && [ "$split" = 1 ] && pass gpu_clock_xent_backward_in_forward ||
  fail gpu_clock_xent_backward_in_forward "backward passes timed: $fused whole, $split split by vocabulary"
