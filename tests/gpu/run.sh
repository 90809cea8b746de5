#!/bin/sh
# run.sh: the checks that need a GPU (`make gpu-check`). Needs only nvcc, CUDA's libraries (NCCL too, in
# the toolkit or in Python's nvidia-nccl package) and a C compiler: no Lua, OpenBLAS, MPI or network.
# The programs come from checked-in generated sources (generated/, tests/gpu/generated/), and the CPU
# reference is the CPU runtime with a plain C GEMM. Then:
#   1. every CUDA kernel against the CPU's on fresh random inputs (kernel_check);
#   2. tiny trained 20 steps on the GPU follows the CPU's loss curve within bf16 tolerance;
#   3. tiny at (tp, pp, vpp, dp) = (2, 2, 2, 1) on the local backend (one GPU) follows (1, 1, 1, 1);
#   4. a one-rank NCCL job (TCP bootstrap) runs and gives the local backend's losses;
#   5. benchmarks: GPT-2 124M (seq 1024) and a 1.3B GPT (24 layers, hidden 2048, 16 heads, seq 2048):
#      tokens/s, TFLOP/s, MFU against the GPU's bf16 peak, and where PyTorch is importable the same
#      model's training step in PyTorch eager and torch.compile, as ratios.
# The report goes to REPORT_DIR (default docs/) as gpu-check-DATE-GPU.md, and to stdout. Exit status 1
# when a check fails.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
B=build
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
report="$work/report.md"
failed=0

note() { echo "$*" | tee -a "$report"; }
result() { # name, PASS|FAIL, detail
  [ "$2" = PASS ] || failed=$((failed + 1))
  echo "$2 $1: $3"
  echo "| $1 | $2 | $(echo "$3" | tr '|\n' '/ ') |" >>"$work/checks.md"
}

# ---- the machine ---------------------------------------------------------------------------------
NVCC=${NVCC:-$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)}
if [ -z "$NVCC" ]; then echo "gpu-check: nvcc not found; install the CUDA toolkit or set NVCC" >&2; exit 1; fi
if ! gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1) || [ -z "$gpu" ]; then
  echo "gpu-check: no GPU answers nvidia-smi; run this on a machine with an NVIDIA GPU" >&2
  exit 1
fi
gpu_name=$(echo "$gpu" | cut -d, -f1 | sed 's/^ *//;s/ *$//')
slug=$(echo "$gpu_name" | tr -c 'A-Za-z0-9\n' '-' | sed 's/--*/-/g;s/^-//;s/-$//')
day=$(date +%Y-%m-%d)
jobs=$(nproc 2>/dev/null || echo 4)
# NCCL: the toolkit's, else the one Python's nvidia-nccl package carries
nccl_home=${NCCL_HOME:-}
if [ -z "$nccl_home" ] && [ ! -f "$(dirname "$(dirname "$NVCC")")/include/nccl.h" ]; then
  nccl_home=$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)
fi
{
  echo "# GPU check, $day, $gpu_name"
  echo
  echo "Made by \`make gpu-check\` (tests/gpu/run.sh) on: $gpu (name, driver, memory); $("$NVCC" --version | tail -1);"
  echo "NCCL from ${nccl_home:-the CUDA toolkit}; $jobs CPU cores."
  echo
} >"$report"

# ---- building ------------------------------------------------------------------------------------
echo "building (make gpu-programs)"
# warnings stay warnings here: this machine's compilers may know ones the development machine's do not
if ! make -j"$jobs" NVCC="$NVCC" WARN="-Wall -Wextra" NVCC_WERROR= ${nccl_home:+NCCL_HOME="$nccl_home"} gpu-programs \
     >"$work/build.log" 2>&1; then
  tail -40 "$work/build.log"
  echo "gpu-check: the build failed" >&2
  exit 1
fi
export PLAIT_CACHE_DIR="$work/cache"

# ---- 1. kernels ------------------------------------------------------------------------------------
seed=$(date +%s)
mkdir -p "$work/ref"
$B/gpu/kernel_check-cpu "$seed" "$work/ref" >"$work/kernels-cpu.log" 2>&1
$B/gpu/kernel_check-cuda "$seed" "$work/ref" >"$work/kernels-gpu.log" 2>&1
kpass=$(grep -c '^PASS' "$work/kernels-gpu.log")
kfail=$(grep -c '^FAIL' "$work/kernels-gpu.log")
if [ "$kfail" = 0 ] && [ "$kpass" -gt 0 ] && ! grep -q '^FAIL' "$work/kernels-cpu.log"; then
  worst=$(sed -n 's/^PASS \(.*\) (relative error \([0-9.e+-]*\), limit \([0-9.e+-]*\))$/\2 \3 \1/p' "$work/kernels-gpu.log" |
    awk '{ r = $1 / $2; if (r > best) { best = r; line = $3 " " $1 " of " $2 } } END { print line }')
  result kernels PASS "$kpass outputs within tolerance, seed $seed (closest to its limit: $worst)"
elif [ "$((kpass + kfail))" = 0 ]; then
  result kernels FAIL "kernel_check-cuda checked nothing: $(tail -n 2 "$work/kernels-gpu.log")"
else
  result kernels FAIL "$kfail of $((kpass + kfail)) outputs failed, seed $seed: $(grep '^FAIL' "$work/kernels-cpu.log" "$work/kernels-gpu.log" | head -5 | tr '\n' ';')"
fi
cat "$work/kernels-gpu.log"

# ---- training ------------------------------------------------------------------------------------
$B/gpu/tokens "$work/text.bin" README.md compiler/*.c runtime/*.c runtime/cpu/*.c >/dev/null

losses() { grep '^step [0-9]* |' "$1" | sed 's/^step \([0-9]*\) | loss \([0-9.]*\).*/\1 \2/'; }
# compare NAME A B STEPS LIMIT: the loss curves of two logs agree within a relative LIMIT at every step.
compare() {
  losses "$2" >"$work/a"
  losses "$3" >"$work/b"
  if [ "$(wc -l <"$work/a")" != "$4" ] || [ "$(wc -l <"$work/b")" != "$4" ]; then
    result "$1" FAIL "a run did not finish $4 steps: $(tail -n 1 "$2") / $(tail -n 1 "$3")"
    return
  fi
  verdict=$(paste "$work/a" "$work/b" | awk -v limit="$5" '
    NR == 1 { at = $1 } { d = $2 - $4; if (d < 0) d = -d; r = d / $2; if (r > worst) { worst = r; at = $1 } }
    NR == 1 { first_a = $2; first_b = $4 } { last_a = $2; last_b = $4 }
    END { ok = worst <= limit && last_a < first_a - 0.5;
          printf "%s largest relative difference %.2e at step %d (limit %.0e); loss %.4f -> %.4f vs %.4f -> %.4f\n",
                 ok ? "PASS" : "FAIL", worst, at, limit, first_a, last_a, first_b, last_b }')
  result "$1" "${verdict%% *}" "${verdict#* }"
}

TRAIN="--data $work/text.bin --lr 3e-3 --seed 7"
$B/gpu/tiny/train-cpu $TRAIN --steps 20 >"$work/tiny-cpu.out" 2>&1
$B/gpu/tiny/train $TRAIN --steps 20 >"$work/tiny-gpu.out" 2>&1
compare tiny_gpu_follows_cpu "$work/tiny-cpu.out" "$work/tiny-gpu.out" 20 3e-2

$B/gpu/tiny-dropout/train $TRAIN --steps 20 >"$work/layout-1.out" 2>&1
$B/gpu/tiny-tp2-pp2-vpp2/train $TRAIN --steps 20 >"$work/layout-8.out" 2>&1
compare layout_2221_follows_1111 "$work/layout-1.out" "$work/layout-8.out" 20 2e-2

port=$((20000 + $$ % 20000))
RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port $B/gpu/tiny/train $TRAIN --steps 5 >"$work/nccl.out" 2>&1
$B/gpu/tiny/train $TRAIN --steps 5 >"$work/local.out" 2>&1
if [ "$(losses "$work/nccl.out" | wc -l)" = 5 ] && [ "$(losses "$work/nccl.out")" = "$(losses "$work/local.out")" ]; then
  result nccl_one_rank PASS "RANK=0 WORLD_SIZE=1 over TCP: 5 steps, the same losses as the local backend"
else
  result nccl_one_rank FAIL "$(tail -n 2 "$work/nccl.out")"
fi

# ---- benchmarks ----------------------------------------------------------------------------------
# bench NAME DIR STEPS LAYERS HIDDEN HEADS SEQ VOCAB BATCH: median step of the steps after the first two.
echo "| model | tokens/step | plait tokens/s | TFLOP/s | MFU | PyTorch eager tokens/s | plait / eager | torch.compile tokens/s | plait / compile |" >"$work/bench.md"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |" >>"$work/bench.md"
torch_ok=0
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null && torch_ok=1
bench() {
  name=$1 dir=$2 steps=$3
  flops=$(sed -n 's/.*\.flops_per_iteration = \([0-9]*\).*/\1/p' "$dir/model.c")
  echo "benchmark $name ($steps steps)"
  if ! $B/gpu/$(basename "$dir")/train --data "$work/text.bin" --steps "$steps" >"$work/$name.out" 2>&1; then
    result "bench_$name" FAIL "$(tail -n 2 "$work/$name.out")"
    return
  fi
  row=$(grep '^step [0-9]* |' "$work/$name.out" | awk -F'|' -v flops="$flops" -v batch="$9" -v seq="$7" '
    NR > 2 { split($5, a, " "); ms[++n] = a[2]; split($7, b, " "); sub("%", "", b[2]); mfu[n] = b[2] }
    END { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (ms[j] < ms[i]) { t = ms[i]; ms[i] = ms[j]; ms[j] = t; t = mfu[i]; mfu[i] = mfu[j]; mfu[j] = t }
          m = ms[int((n + 1) / 2)]; u = mfu[int((n + 1) / 2)]
          printf "%d %.0f %.1f %.1f", batch * seq, batch * seq / (m / 1000), flops / (m / 1000) / 1e12, u }')
  set -- "$@" $row
  tokens=${10} rate=${11} tflops=${12} mfu=${13}
  eager="-" compiled="-" r1="-" r2="-"
  if [ "$torch_ok" = 1 ]; then
    if python3 tests/gpu/torch_gpt.py --layers "$4" --hidden "$5" --heads "$6" --seq "$7" --vocab "$8" --batch "$9" \
         >"$work/$name.torch" 2>&1; then
      eager=$(sed -n 's/^eager tokens\/s \([0-9.]*\)$/\1/p' "$work/$name.torch")
      compiled=$(sed -n 's/^compile tokens\/s \([0-9.]*\)$/\1/p' "$work/$name.torch")
      [ -n "$eager" ] && r1=$(awk -v a="$rate" -v b="$eager" 'BEGIN { printf "%.2f", a / b }')
      [ -n "$compiled" ] && r2=$(awk -v a="$rate" -v b="$compiled" 'BEGIN { printf "%.2f", a / b }')
    else
      eager="failed: $(tail -1 "$work/$name.torch")"
    fi
  fi
  echo "| $name | $tokens | $rate | $tflops | $mfu% | ${eager:--} | $r1 | ${compiled:--} | $r2 |" >>"$work/bench.md"
  result "bench_$name" PASS "$rate tokens/s, $tflops TFLOP/s, MFU $mfu%"
}
bench gpt2-124M tests/gpu/generated/gpt2-bench 12 12 768 12 1024 50304 16
bench gpt-1.3B tests/gpu/generated/gpt-1.3b-bench 8 24 2048 16 2048 51200 8

# ---- the report ----------------------------------------------------------------------------------
{
  echo "## Checks"
  echo
  echo "| check | result | detail |"
  echo "| --- | --- | --- |"
  cat "$work/checks.md"
  echo
  echo "## Benchmarks"
  echo
  echo "Median of the steps after the first two; TFLOP/s count the model's FLOPs (the plan's, as in the step"
  echo "lines' MFU) over the step's time; MFU is against the GPU's dense bf16 peak. PyTorch: the same GPT"
  echo "(tests/gpu/torch_gpt.py: bf16 autocast, fp32 master weights, fused AdamW, scaled_dot_product_attention)"
  echo "in the same run; \"-\" where PyTorch was not importable."
  echo
  cat "$work/bench.md"
} >>"$report"
dest=${REPORT_DIR:-docs}
mkdir -p "$dest"
cp "$report" "$dest/gpu-check-$day-$slug.md"
echo
cat "$report"
echo "report: $dest/gpu-check-$day-$slug.md"
echo "gpu-check: $failed failed"
[ "$failed" = 0 ]
