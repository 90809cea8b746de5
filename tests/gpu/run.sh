#!/bin/sh
# run.sh: the checks that need a GPU (`make gpu-check`). Needs only nvcc, CUDA's libraries (NCCL too, in
# the toolkit or in Python's nvidia-nccl package) and a C compiler: no Lua, OpenBLAS, MPI or network.
# The programs come from checked-in generated sources (generated/, tests/gpu/generated/), built here, or
# from `make gpu-bundle` on another machine (PLAIT_GPU_BUILD=build/gpu-bundle: nothing is built here
# then; docs/gpu.md, "On a lent GPU"); the CPU reference is the CPU runtime with a plain C GEMM. Then:
#   1. every CUDA kernel against the CPU's on fresh random inputs (kernel_check; attention on the kernels
#      --attention auto picks and on plait's own), then attention's time at the benchmarks' shapes on both
#      beside PyTorch's cuDNN and FlashAttention-2 (attention_bench, sdpa_bench.py);
#   2. tiny, and a small mixture of experts with its router's losses, trained 20 steps on the GPU
#      follow the CPU's loss curves within bf16 tolerance;
#   3. tiny at (tp, pp, vpp, dp) = (2, 2, 2, 1) on the local backend (one GPU) follows (1, 1, 1, 1);
#   4. the distributed optimizer at dp 2 and scatter/gather on two emulated nodes give the losses
#      without them; a one-rank NCCL job (TCP bootstrap) runs and gives the local backend's losses;
#   5. benchmarks (tests/gpu/benchmarks.txt): GPT-2 124M (sequence 1024) and a 1.3B GPT (sequence 2048):
#      tokens/s, TFLOP/s, MFU against the GPU's bf16 peak, peak GPU memory against the plan's, the plan's
#      iteration time against the measured one (with the bundle's plans.txt), llm.c's train_gpt2.cu on
#      the same GPT-2 batch and tokens (with the bundle's llmc/); then a --profile of a few steps by kind
#      of work, each memory-bound kind's rate against the copy rate measured in the same run (copy_rate);
#      then, where PyTorch is importable and time is left, the same model in PyTorch eager and under
#      torch.compile.
# Every step has a time limit and the whole check a budget (PLAIT_GPU_BUDGET seconds, default 540): what
# does not fit is reported as skipped. The report goes to REPORT_DIR (default docs/) as
# gpu-check-DATE-GPU.md, written again after every step (a check cut off still leaves its report), with
# the logs beside it as gpu-check-logs.tar.gz; and to stdout. Exit status 1 when a check fails.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
B=${PLAIT_GPU_BUILD:-build}
budget=${PLAIT_GPU_BUDGET:-540}
started=$(date +%s)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
: >"$work/checks.md"
: >"$work/bench.md"
: >"$work/notes.md"
: >"$work/torch.md"
: >"$work/attention.md"
: >"$work/memory.md"

# ---- time -------------------------------------------------------------------------------------------
left() { echo $((budget - ($(date +%s) - started))); }
# limited SECONDS CMD...: CMD under a limit of SECONDS or the budget's rest, whichever is less (exit 124
# when it is cut off; killed 10 s after the limit if it will not end)
limited() {
  limit=$1
  shift
  rest=$(left)
  [ "$rest" -lt "$limit" ] && limit=$rest
  [ "$limit" -lt 1 ] && return 124
  timeout -k 10 "$limit" "$@"
}
# Did the command whose status is $1 end because the check's budget ran out?
cut_by_budget() { { [ "$1" = 124 ] || [ "$1" = 137 ]; } && [ "$(left)" -le 1 ]; }

is_number() { case "$1" in '' | *[!0-9.]*) return 1 ;; esac; }
ratio() { if is_number "$1" && is_number "$2"; then awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; else echo -; fi; }

# ---- the report -------------------------------------------------------------------------------------
note() { echo "$*" | tee -a "$work/notes.md"; }
result() { # name, PASS|FAIL|SKIP, detail
  [ "$2" = FAIL ] && failed=$((failed + 1))
  echo "$2 $1: $3"
  echo "| $1 | $2 | $(echo "$3" | tr '|\n' '/ ') |" >>"$work/checks.md"
  publish
}
# The report so far, and the logs so far, in REPORT_DIR.
publish() {
  {
    cat "$work/header.md"
    echo "## Checks"
    echo
    echo "| check | result | detail |"
    echo "| --- | --- | --- |"
    cat "$work/checks.md"
    echo
    if [ -s "$work/bench.md" ]; then
      echo "## Benchmarks"
      echo
      echo "Median of the steps after the first two; TFLOP/s count the model's FLOPs (the plan's, as in the step"
      echo "lines' MFU) over the step's time; MFU is against the GPU's dense bf16 peak; GPU memory is the whole"
      echo "device's in use once training is done (every arena still held, with the CUDA context and libraries,"
      echo "which the plan does not count) against the plan's; predicted is plait plan's iteration time on the"
      echo "machine file of this GPU. llm.c: train_gpt2.cu built with USE_CUDNN=0 (its own attention, which"
      echo "keeps the whole T×T scores: no flash attention), GPT-2 124M from scratch (-e d12), the same batch,"
      echo "sequence and token file, median of its steps after the first three; run at batch 64 and below (at"
      echo "160 its scores alone take 48 GB); \"-\" where it did not run."
      echo
      echo "| model | batch × seq | plait tokens/s | TFLOP/s | MFU | GPU memory in use / plan | step: measured / predicted | llm.c tokens/s | plait / llm.c |"
      echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
      cat "$work/bench.md"
      echo
    fi
    if [ -s "$work/attention.md" ]; then
      echo "Attention at the benchmarks' shapes (causal, bf16; tests/gpu/attention_bench.c and sdpa_bench.py),"
      echo "forward + backward in ms, median of its timed calls: the kernels --attention auto picks (named),"
      echo "plait's own kernels, and PyTorch's scaled_dot_product_attention on cuDNN and on FlashAttention-2 in"
      echo "the same run. Targets: auto within 1.2× and plait's own within 2.0× of PyTorch's cuDNN."
      echo
      echo "| shape | auto: kernels, ms | plait's own, ms | PyTorch cuDNN, ms | PyTorch flash, ms | auto / cuDNN | own / cuDNN |"
      echo "| --- | --- | --- | --- | --- | --- | --- |"
      cat "$work/attention.md"
      echo
    fi
    if [ -s "$work/memory.md" ]; then
      echo "Memory-bound kinds of work (the profiles below) against the copy rate, $copy GB/s: one"
      echo "device-to-device copy of 2 GiB in the same run (tests/gpu/copy_rate.c, bytes read plus written)."
      echo "A kind's rate is the bytes it must move (as the profile counts them) over its time, the device"
      echo "waiting after each kernel. Target: every kind at 0.70 of the copy rate or more."
      echo
      echo "| model | kind | ms a step | GB/s | of the copy rate | target met |"
      echo "| --- | --- | --- | --- | --- | --- |"
      cat "$work/memory.md"
      echo
    fi
    if [ -s "$work/torch.md" ]; then
      echo "PyTorch, the same GPT (tests/gpu/torch_gpt.py: bf16 autocast, fp32 master weights, fused AdamW,"
      echo "scaled_dot_product_attention), eager and under torch.compile, median of its timed steps:"
      echo
      echo "| model | batch × seq | eager tokens/s | plait / eager | compiled tokens/s | plait / compiled |"
      echo "| --- | --- | --- | --- | --- | --- |"
      cat "$work/torch.md"
      echo
    fi
    cat "$work/notes.md"
    [ -f "$work/profiles.md" ] && cat "$work/profiles.md"
  } >"$dest/.gpu-check-report"
  mv "$dest/.gpu-check-report" "$dest/gpu-check-$day-$slug.md"
  (cd "$work" && tar czf "$dest/.gpu-check-logs" --exclude=cache --exclude=ref --exclude='*.bin' . 2>/dev/null &&
    mv "$dest/.gpu-check-logs" "$dest/gpu-check-logs.tar.gz")
}

# ---- the machine ------------------------------------------------------------------------------------
NVCC=${NVCC:-$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)}
if ! gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1) || [ -z "$gpu" ]; then
  echo "gpu-check: no GPU answers nvidia-smi; run this on a machine with an NVIDIA GPU" >&2
  exit 1
fi
gpu_name=$(echo "$gpu" | cut -d, -f1 | sed 's/^ *//;s/ *$//')
slug=$(echo "$gpu_name" | tr -c 'A-Za-z0-9\n' '-' | sed 's/--*/-/g;s/^-//;s/-$//')
# the machine file whose plan is set beside the measured step (SXM parts only: h100.lua and h200.lua)
case "$gpu_name" in *PCIe* | *NVL*) machine= ;; *H200*) machine=h200 ;; *H100*) machine=h100 ;; *A100*) machine=a100 ;; *) machine= ;; esac
day=$(date +%Y-%m-%d)
jobs=$(nproc 2>/dev/null || echo 4)
dest=${REPORT_DIR:-docs}
mkdir -p "$dest" && dest=$(cd "$dest" && pwd)
# NCCL: the toolkit's, else the one Python's nvidia-nccl package carries
nccl_home=${NCCL_HOME:-}
if [ -z "$nccl_home" ] && [ -n "$NVCC" ] && [ ! -f "$(dirname "$(dirname "$NVCC")")/include/nccl.h" ]; then
  nccl_home=$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)
fi
{
  echo "# GPU check, $day, $gpu_name"
  echo
  echo "Made by \`make gpu-check\` (tests/gpu/run.sh) on: $gpu (name, driver, memory); ${NVCC:+$("$NVCC" --version | tail -1); }$jobs CPU cores."
  echo
} >"$work/header.md"

# ---- the programs: the bundle's where they start here, else built here ------------------------------
bundle=$B
# The folders where this machine keeps CUDA's and NCCL's libraries: the toolkit's, and Python's nvidia
# packages'.
library_dirs() {
  [ -n "$NVCC" ] && echo "$(dirname "$(dirname "$NVCC")")/lib64" "$(dirname "$(dirname "$NVCC")")/lib"
  echo /usr/local/cuda/lib64 /usr/local/cuda/lib
  python3 -c 'import nvidia; print("\n".join(nvidia.__path__))' </dev/null 2>/dev/null | while read -r top; do
    find "$top" -maxdepth 4 -name 'lib*.so*' -exec dirname {} \; 2>/dev/null | sort -u
  done
}
missing_libraries() { ldd "$1" 2>/dev/null | awk '/not found/ { printf "%s ", $1 }'; }
added=
add_library_dir() {
  case ":${LD_LIBRARY_PATH:-}:" in *":$1:"*) return ;; esac
  LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$1"
  added="${added:+$added:}$1"
  export LD_LIBRARY_PATH
}
# resolve PROGRAM: each library the loader does not find for it is looked for in those folders, and the
# first folder holding it goes on LD_LIBRARY_PATH (no other: a second copy of a library it does find could
# shadow it). NVRTC's own folder goes there too: NVRTC opens its builtins library by name, and the program's
# RUNPATH does not reach that. True when nothing is missing.
resolve() {
  for library in $(missing_libraries "$1"); do
    for dir in $(library_dirs); do
      if [ -e "$dir/$library" ]; then add_library_dir "$dir"; break; fi
    done
  done
  nvrtc=$(ldd "$1" 2>/dev/null | awk '/libnvrtc\.so/ && $3 ~ /^\// { print $3 }')
  [ -n "$nvrtc" ] && add_library_dir "$(dirname "$nvrtc")"
  missing=$(missing_libraries "$1")
  [ -z "$missing" ]
}
if [ -f "$bundle/bundle.txt" ] && resolve "$B/gpu/tiny/train"; then
  note "Programs from \`make gpu-bundle\` ($(head -1 "$bundle/bundle.txt"); $(sed -n 2p "$bundle/bundle.txt"))${added:+; libraries added from $added}."
else
  [ -f "$bundle/bundle.txt" ] && note "The bundle's programs do not start here (missing: $missing): built here instead."
  if [ -z "$NVCC" ]; then echo "gpu-check: nvcc not found; install the CUDA toolkit or set NVCC" >&2; exit 1; fi
  B=build
  echo "building (make gpu-programs)"
  # warnings stay warnings here: this machine's compilers may know ones the development machine's do not
  if ! limited 300 make -j"$jobs" NVCC="$NVCC" WARN="-Wall -Wextra" NVCC_WERROR= ${nccl_home:+NCCL_HOME="$nccl_home"} \
       gpu-programs >"$work/build.log" 2>&1; then
    tail -40 "$work/build.log"
    echo "gpu-check: the build failed" >&2
    exit 1
  fi
  note "Programs built here with \`make gpu-programs\` in $(($(date +%s) - started)) s."
  resolve "$B/gpu/tiny/train"
fi
[ -f "$bundle/plans.txt" ] && cp "$bundle/plans.txt" "$work/plans.txt"
export PLAIT_CACHE_DIR="$work/cache"
# cuDNN's own errors and warnings go to a log kept with the others (a plan it cannot build says why there)
export CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG="$work/cudnn-errors.log"

# ---- 1. kernels ---------------------------------------------------------------------------------------
seed=$(date +%s)
mkdir -p "$work/ref"
limited 60 "$B/gpu/kernel_check-cpu" "$seed" "$work/ref" >"$work/kernels-cpu.log" 2>&1
limited 60 "$B/gpu/kernel_check-cuda" "$seed" "$work/ref" >"$work/kernels-gpu.log" 2>&1
kstatus=$?
kpass=$(grep -c '^PASS' "$work/kernels-gpu.log")
kfail=$(grep -c '^FAIL' "$work/kernels-gpu.log")
if [ "$kstatus" != 0 ] || ! grep -q "^kernel check: $kpass passed, 0 failed$" "$work/kernels-gpu.log"; then
  result kernels FAIL "kernel_check-cuda ended with status $kstatus after $kpass passed and $kfail failed: $(grep -v '^PASS' "$work/kernels-gpu.log" | tail -n 3 | tr '\n' ';')"
elif [ "$kfail" = 0 ] && [ "$kpass" -gt 0 ] && ! grep -q '^FAIL' "$work/kernels-cpu.log"; then
  worst=$(sed -n 's/^PASS \(.*\) (relative error \([0-9.e+-]*\), limit \([0-9.e+-]*\))$/\2 \3 \1/p' "$work/kernels-gpu.log" |
    awk '{ r = $1 / $2; if (r > best) { best = r; line = $3 " " $1 " of " $2 } } END { print line }')
  result kernels PASS "$kpass outputs within tolerance, seed $seed (closest to its limit: $worst)"
elif [ "$((kpass + kfail))" = 0 ]; then
  result kernels FAIL "kernel_check-cuda checked nothing: $(tail -n 2 "$work/kernels-gpu.log")"
else
  result kernels FAIL "$kfail of $((kpass + kfail)) outputs failed, seed $seed: $(grep '^FAIL' "$work/kernels-cpu.log" "$work/kernels-gpu.log" | head -5 | tr '\n' ';')"
fi
cat "$work/kernels-gpu.log"

# ---- attention: plait's (cuDNN's where auto picks it, and plait's own) against PyTorch's -------------
limited 60 "$B/gpu/attention_bench" >"$work/attention.log" 2>&1
astatus=$?
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' </dev/null 2>/dev/null && torch_ok=1 || torch_ok=0
[ "$torch_ok" = 1 ] && limited 90 python3 tests/gpu/sdpa_bench.py </dev/null >>"$work/attention.log" 2>&1
# attention_ms NAME PATH: forward + backward ms of a line "attention|sdpa NAME PATH fwd bwd"
attention_ms() { awk -v n="$1" -v p="$2" '$2 == n && $3 == p && $4 + 0 > 0 { printf "%.3f", $4 + $5; exit }' "$work/attention.log"; }
for shape in gpt2 gpt-1.3b; do
  auto=$(awk -v n="$shape" '$1 == "attention" && $2 == n { print $3; exit }' "$work/attention.log")
  ran=$(attention_ms "$shape" "$auto") own=$(attention_ms "$shape" plait)
  anchor=$(attention_ms "$shape" cudnn) flash=$(attention_ms "$shape" flash)
  echo "| $shape | ${auto:--} ${ran:--} | ${own:--} | ${anchor:--} | ${flash:--} | $(ratio "$ran" "$anchor") | $(ratio "$own" "$anchor") |" >>"$work/attention.md"
done
if [ "$astatus" = 0 ]; then result attention_bench PASS "$(grep -c '^attention ' "$work/attention.log") timings: see the attention table"
else result attention_bench FAIL "status $astatus: $(tail -n 2 "$work/attention.log" | tr '\n' ';')"; fi
cat "$work/attention.log"

# ---- the copy rate, the memory-bound kernels' ceiling ---------------------------------------------------
copy=$(limited 30 "$B/gpu/copy_rate" 2>"$work/copy.err" | sed -n 's/^copy \([0-9.]*\)$/\1/p')
if [ -n "$copy" ]; then result copy_rate PASS "$copy GB/s device to device"
else copy=-; result copy_rate FAIL "$(tail -n 1 "$work/copy.err")"; fi

# ---- training -------------------------------------------------------------------------------------------
# The bundle's fixed text where it has one (the same text whatever the commit: the loss curves compared
# below are then the same curves every run); else the sources, which change with every commit.
if [ -f "$B/text.bin" ] && cp "$B/text.bin" "$work/text.bin"; then
  note "Training text: the bundle's text.bin ($(sed -n 's/^text.bin: //p' "$B/bundle.txt" 2>/dev/null))."
elif ! "$B/gpu/tokens" "$work/text.bin" $(find compiler runtime -name '*.c' | sort) >/dev/null; then
  echo "gpu-check: the token file could not be written in $work" >&2
  exit 1
fi

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
limited 60 "$B/gpu/tiny/train-cpu" $TRAIN --steps 20 >"$work/tiny-cpu.out" 2>&1
limited 60 "$B/gpu/tiny/train" $TRAIN --steps 20 >"$work/tiny-gpu.out" 2>&1
compare tiny_gpu_follows_cpu "$work/tiny-cpu.out" "$work/tiny-gpu.out" 20 3e-2

# a mixture of experts, its router's losses and a capacity (moe.cu; the loss term via the host)
limited 60 "$B/gpu/moe/train-cpu" $TRAIN --steps 20 >"$work/moe-cpu.out" 2>&1
limited 60 "$B/gpu/moe/train" $TRAIN --steps 20 >"$work/moe-gpu.out" 2>&1
compare moe_gpu_follows_cpu "$work/moe-cpu.out" "$work/moe-gpu.out" 20 3e-2

limited 60 "$B/gpu/tiny-dropout/train" $TRAIN --steps 20 >"$work/layout-1.out" 2>&1
limited 60 "$B/gpu/tiny-tp2-pp2-vpp2/train" $TRAIN --steps 20 >"$work/layout-8.out" 2>&1
compare layout_2221_follows_1111 "$work/layout-1.out" "$work/layout-8.out" 20 2e-2

# same_losses NAME A B DETAIL: two runs' 20 loss lines are the same
same_losses() {
  if [ "$(losses "$2" | wc -l)" = 20 ] && [ "$(losses "$2")" = "$(losses "$3")" ]; then
    result "$1" PASS "$4"
  else
    result "$1" FAIL "$(tail -n 1 "$2") / $(tail -n 1 "$3")"
  fi
}
# the distributed optimizer gives the losses of the same layout without it (the same ordered sums)
limited 60 "$B/gpu/tiny-dp2/train" $TRAIN --steps 20 >"$work/dp2.out" 2>&1
limited 60 "$B/gpu/tiny-dp2-dopt/train" $TRAIN --steps 20 >"$work/dp2-dopt.out" 2>&1
same_losses distributed_optimizer_dp2 "$work/dp2.out" "$work/dp2-dopt.out" \
  "20 steps at dp 2, the same losses with and without it"
# two emulated nodes: pipeline transfers scattered over TP and gathered, the one node's losses
limited 60 env PLAIT_RANKS_PER_NODE=2 "$B/gpu/tiny-tp2-pp2-vpp2/train" $TRAIN --steps 20 \
  >"$work/layout-8-nodes.out" 2>&1
same_losses scatter_gather_two_nodes "$work/layout-8.out" "$work/layout-8-nodes.out" \
  "tp 2 · pp 2 on two emulated nodes: the one node's losses, 20 steps"

port=$((20000 + $$ % 20000))
limited 40 env RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$B/gpu/tiny/train" $TRAIN --steps 5 >"$work/nccl.out" 2>&1
limited 40 "$B/gpu/tiny/train" $TRAIN --steps 5 >"$work/local.out" 2>&1
if [ "$(losses "$work/nccl.out" | wc -l)" = 5 ] && [ "$(losses "$work/nccl.out")" = "$(losses "$work/local.out")" ]; then
  result nccl_one_rank PASS "RANK=0 WORLD_SIZE=1 over TCP: 5 steps, the same losses as the local backend"
else
  result nccl_one_rank FAIL "$(tail -n 2 "$work/nccl.out")"
fi

# ---- benchmarks ---------------------------------------------------------------------------------------
# The median of a column of step lines after the first SKIP: median_after SKIP (numbers on stdin).
median_after() { tail -n +"$(($1 + 1))" | sort -g | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "" }'; }
# plait's step lines: "step N | loss L | lr R | grad-norm G | ms M | tok/s T | MFU U%"
plait_ms() { grep '^step [0-9]* | loss' "$1" | sed 's/.*| ms \([0-9.]*\) |.*/\1/' | median_after 2; }
plait_mfu() { grep '^step [0-9]* | loss' "$1" | sed 's/.*| MFU \([0-9.]*\)%.*/\1/' | median_after 2; }
# llm.c's: "step    4/20 | loss ... | 123.45 ms | 45.6% bf16 MFU | 123456 tok/s"
llmc_ms() { grep '^step *[0-9]*/' "$1" | sed 's/.*| \([0-9.]*\) ms |.*/\1/' | median_after 3; }

llmc=$bundle/llmc/train_gpt2cu
if [ -x "$llmc" ] && ! resolve "$llmc"; then
  note "llm.c's train_gpt2cu does not start here (missing: $missing): no llm.c figures."
  llmc=
fi

# bench NAME DIR SEQ BATCH: plait's program, then llm.c on its shape (GPT-2).
bench() {
  name=$1 dir=$2 seq=$3 batch=$4
  label="$name, batch $batch"
  program=$B/gpu/$dir/train
  flops=$(sed -n 's/.*\.flops_per_iteration = \([0-9]*\).*/\1/p' "tests/gpu/generated/$dir/model.c")
  echo "benchmark $label"
  limited 150 "$program" --data "$work/text.bin" --steps 12 </dev/null >"$work/$dir.out" 2>&1
  status=$?
  if cut_by_budget "$status"; then
    result "bench $label" SKIP "cut off by the check's budget of $budget s"
    return
  elif [ "$status" != 0 ]; then
    result "bench $label" FAIL "$(tail -n 2 "$work/$dir.out")"
    return
  fi
  ms=$(plait_ms "$work/$dir.out") mfu=$(plait_mfu "$work/$dir.out")
  rate=$(awk -v ms="$ms" -v t="$((batch * seq))" 'BEGIN { printf "%.0f", t / (ms / 1e3) }')
  tflops=$(awk -v ms="$ms" -v f="$flops" 'BEGIN { printf "%.1f", f / (ms / 1e3) / 1e12 }')
  memory=$(sed -n "s/^GPU memory in use \([0-9.]* [KMGT]*B\) (.*); the plan's memory of its ranks \([0-9.]* [KMGT]*B\).*/\1 \/ \2/p" "$work/$dir.out")
  predicted=$(awk -v d="$dir" -v m="$machine" '$1 == d && $2 == m { print $3 * 1000 }' "$work/plans.txt" 2>/dev/null)
  step="$ms ms${predicted:+ / $(printf '%.1f' "$predicted") ms ($(ratio "$ms" "$predicted"))}"
  llmc_rate=- r_llmc=-
  if [ "$name" = gpt2-124M ] && [ -n "$llmc" ] && [ -x "$llmc" ] && [ "$batch" -le 64 ]; then
    if limited 150 "$llmc" -i "$work/text.bin" -j "$work/text.bin" -e d12 -b "$batch" -t "$seq" -x 20 -v 1000 -m 1 -s 0 \
         </dev/null >"$work/llmc-$batch.out" 2>&1 && [ -n "$(llmc_ms "$work/llmc-$batch.out")" ]; then
      llmc_rate=$(awk -v ms="$(llmc_ms "$work/llmc-$batch.out")" -v t="$((batch * seq))" 'BEGIN { printf "%.0f", t / (ms / 1e3) }')
      r_llmc=$(ratio "$rate" "$llmc_rate")
    else
      llmc_rate="failed: $(tail -n 1 "$work/llmc-$batch.out" | cut -c1-80)"
    fi
  fi
  echo "| $name | $batch × $seq | $rate | $tflops | $mfu% | ${memory:--} | $step | $llmc_rate | $r_llmc |" >>"$work/bench.md"
  echo "$name $dir $rate" >>"$work/rates"
  result "bench $label" PASS "$rate tokens/s, $tflops TFLOP/s, MFU $mfu%${memory:+, memory $memory}"
}

# profile NAME DIR: where a step's time goes, by kind of work (--profile: the device waits after each
# runtime kernel, so the kinds add up to a little more than a plain step).
profile() {
  limited 90 "$B/gpu/$2/train" --data "$work/text.bin" --steps 5 --profile </dev/null >"$work/$2.profile" 2>&1 || return
  { echo; echo "### Profile: $1 ($2), --profile over the steps after the first"; echo; echo '```';
    sed -n '/^profile over/,$p' "$work/$2.profile"; echo '```'; } >>"$work/profiles.md"
  memory_bound "$1" "$work/$2.profile"
  publish
}

# memory_bound NAME PROFILE: each kind the profile rates in GB/s, against the copy rate.
memory_bound() {
  is_number "$copy" || return
  sed -n '/^profile over/,$p' "$2" | awk -v m="$1" -v c="$copy" '$NF == "GB/s" && $(NF - 1) + 0 > 0 {
    share = $(NF - 1) / c
    printf "| %s | %s | %.2f | %.0f | %.2f | %s |\n", m, $1, $2, $(NF - 1), share, (share >= 0.70 ? "yes" : "no")
  }' >>"$work/memory.md"
}

# torch NAME DIR LAYERS HIDDEN HEADS SEQ VOCAB BATCH: PyTorch's same model, beside plait's rate.
torch() {
  limited 180 python3 tests/gpu/torch_gpt.py --layers "$3" --hidden "$4" --heads "$5" --seq "$6" --vocab "$7" \
    --batch "$8" </dev/null >"$work/$2.torch" 2>&1
  eager=$(sed -n 's/^eager tokens\/s \([0-9.]*\)$/\1/p' "$work/$2.torch")
  compiled=$(sed -n 's/^compile tokens\/s \([0-9.]*\)$/\1/p' "$work/$2.torch")
  rate=$(awk -v d="$2" '$2 == d { print $3 }' "$work/rates")
  failed_line="failed: $(tail -n 1 "$work/$2.torch" | cut -c1-80 | tr '|' '/')"
  [ -z "$eager" ] && eager=$failed_line
  [ -z "$compiled" ] && compiled=$failed_line
  echo "| $1 | $8 × $6 | $eager | $(ratio "$rate" "$eager") | $compiled | $(ratio "$rate" "$compiled") |" >>"$work/torch.md"
  publish
}

# First plait and llm.c on every model, then where the time goes, then PyTorch while time is left.
grep -v '^#' tests/gpu/benchmarks.txt >"$work/benchmarks"
: >"$work/rates"
while read -r name dir _ _ _ seq _ batch _; do
  if [ "$(left)" -lt 90 ]; then result "bench $name, batch $batch" SKIP "too little of the check's budget of $budget s was left"; continue; fi
  bench "$name" "$dir" "$seq" "$batch"
done <"$work/benchmarks"
while read -r name dir _ _ _ _ _ batch _; do
  if [ "$batch" -gt 64 ] || ! grep -q " $dir " "$work/rates"; then continue; fi
  if [ "$(left)" -lt 60 ]; then note "Not profiled for lack of time: $name at batch $batch."; else profile "$name" "$dir"; fi
done <"$work/benchmarks"
while read -r name dir layers hidden heads seq vocab batch _; do
  if [ "$torch_ok" != 1 ] || [ "$batch" -gt 64 ] || ! grep -q " $dir " "$work/rates"; then continue; fi
  if [ "$(left)" -le 120 ]; then note "Not run in PyTorch for lack of time: $name at batch $batch."; continue; fi
  torch "$name" "$dir" "$layers" "$hidden" "$heads" "$seq" "$vocab" "$batch"
done <"$work/benchmarks"
[ "$torch_ok" = 1 ] || note "PyTorch with CUDA was not importable: no PyTorch figures."

publish
echo
cat "$dest/gpu-check-$day-$slug.md"
echo "report: $dest/gpu-check-$day-$slug.md (logs: $dest/gpu-check-logs.tar.gz); $(($(date +%s) - started)) s"
echo "gpu-check: $failed failed"
[ "$failed" = 0 ]
