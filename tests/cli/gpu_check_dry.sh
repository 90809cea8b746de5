# gpu_check_dry.sh: tests/gpu/run.sh (make gpu-check) walked through on a machine without a GPU, so that
# its own logic is right before a GPU's scarce minutes are spent on it: a stand-in nvidia-smi and nvcc, a
# bundle (as make gpu-bundle lays it out) whose training programs are a CPU build of tiny (one of them
# needing a library only the stand-in toolkit's folder holds) and whose benchmark programs, kernel check
# and llm.c print the lines the real ones print. The report must hold the checks,
# the benchmark figures computed from those lines, and the plan's prediction beside the measured step; a
# benchmark that fails must fail the check; a budget too small must skip what does not fit.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

bundle=$TMP/bundle
mkdir -p "$bundle/gpu" "$bundle/llmc" "$TMP/bin"
cat >"$TMP/bin/nvidia-smi" <<'EOF'
#!/bin/sh
echo "NVIDIA H100 80GB HBM3, 580.00, 81559 MiB"
EOF
chmod +x "$TMP/bin/nvidia-smi"
echo "made by a test" >"$bundle/bundle.txt"
echo "compilers of a test" >>"$bundle/bundle.txt"
cc -std=c11 -O2 -D_GNU_SOURCE -Iruntime -o "$bundle/gpu/tokens" tests/gpu/tokens.c
$PLAIT build models/tiny.lua --set layers=1 -o "$TMP/tiny" >/dev/null 2>&1 || fail gpu_dry_setup "plait build failed"
# tiny's GPU program: a launcher of the CPU build that needs a library in the folder of a stand-in toolkit
# (the loader does not know it: run.sh must find it there)
mkdir -p "$TMP/cuda/bin" "$TMP/cuda/lib64" "$bundle/gpu/tiny"
printf '#!/bin/sh\necho "Build cuda_13.0 (a stand-in)"\n' >"$TMP/cuda/bin/nvcc"
chmod +x "$TMP/cuda/bin/nvcc"
echo 'int dry_library(void) { return 0; }' >"$TMP/dry.c"
cc -shared -fPIC -o "$TMP/cuda/lib64/libplaitdry.so" "$TMP/dry.c"
cat >"$TMP/launch.c" <<LAUNCH
#include <unistd.h>
int dry_library(void);
int main(int argc, char **argv) { (void)argc; argv[0] = "$TMP/tiny/train"; execv(argv[0], argv); return dry_library() + 1; }
LAUNCH
cc -o "$bundle/gpu/tiny/train" "$TMP/launch.c" -L"$TMP/cuda/lib64" -lplaitdry
for dir in tiny-dropout tiny-tp2-pp2-vpp2 tiny-dp2 tiny-dp2-dopt; do
  mkdir -p "$bundle/gpu/$dir"
  ln -s "$TMP/tiny/train" "$bundle/gpu/$dir/train"
done
ln -s "$TMP/tiny/train" "$bundle/gpu/tiny/train-cpu"
mkdir -p "$bundle/gpu/moe"
for program in train train-cpu; do ln -s "$TMP/tiny/train" "$bundle/gpu/moe/$program"; done
cat >"$bundle/gpu/kernel_check-cpu" <<'EOF'
#!/bin/sh
echo "PASS reference gemm (10 values)"
EOF
cat >"$bundle/gpu/kernel_check-cuda" <<'EOF'
#!/bin/sh
echo "PASS gemm_NN (relative error 2.00e-03, limit 1e-02)"
echo "PASS layernorm (relative error 5.00e-06, limit 1e-05)"
echo "kernel check: 2 passed, 0 failed"
EOF
# the attention benchmark: auto on cuDNN's kernels, then plait's own, at both shapes
cat >"$bundle/gpu/attention_bench" <<'EOF'
#!/bin/sh
echo "attention gpt2 cuDNN 0.300 1.400"
echo "attention gpt2 plait 2.000 6.000"
echo "attention gpt-1.3b cuDNN 0.250 1.050"
echo "attention gpt-1.3b plait 3.000 9.000"
EOF
chmod +x "$bundle/gpu/attention_bench"
printf '#!/bin/sh\necho "copy 3000.0"\n' >"$bundle/gpu/copy_rate"
chmod +x "$bundle/gpu/copy_rate"
# a benchmark program: step lines of 100 to 120 ms after two slower ones, its memory line, and under
# --profile the start of a profile
cat >"$TMP/bench" <<'EOF'
#!/bin/sh
for ms in 900.0 900.0 100.0 110.0 120.0; do
  echo "step 1 | loss 10.0 | lr 1.000e-04 | grad-norm 1.0 | ms $ms | tok/s 1 | MFU 40.0%"
done
echo "GPU memory in use 31.50 GB (the whole device, once training is done); the plan's memory of its ranks 29.42 GB (NVIDIA H100 80GB HBM3)"
case "$*" in *--profile*) printf 'profile over 4 steps after the first: 100.0 ms a step\n  gemm  70.00  70.0%%\n'
  printf '  norm  6.00  6.0%%  13.2 GB 2200.0 GB/s\n  xent  4.00  4.0%%  12.5 GB 3100.0 GB/s\n' ;; esac
EOF
chmod +x "$bundle/gpu/kernel_check-cpu" "$bundle/gpu/kernel_check-cuda" "$TMP/bench"
grep -v '^#' tests/gpu/benchmarks.txt | awk '{ print $2 }' | while read -r dir; do
  mkdir -p "$bundle/gpu/$dir"
  cp "$TMP/bench" "$bundle/gpu/$dir/train"
done
# llm.c: steps of 125 to 135 ms after three slower ones
cat >"$bundle/llmc/train_gpt2cu" <<'EOF'
#!/bin/sh
for ms in 999.00 999.00 999.00 125.00 130.00 135.00; do
  printf 'step    1/20 | loss 11.000000 (+nanz)| norm 1.0000 (+nanz)| lr 6.00e-04 | %s ms | 50.0%% bf16 MFU | 1 tok/s\n' $ms
done
EOF
chmod +x "$bundle/llmc/train_gpt2cu"
echo "gpt2-bench h100 0.088 29420442624" >"$bundle/plans.txt"

run_check() { env PATH="$TMP/bin:$PATH" NVCC="$TMP/cuda/bin/nvcc" PLAIT_GPU_BUILD="$bundle" REPORT_DIR="$1" PLAIT_GPU_BUDGET="$2" sh tests/gpu/run.sh; }
run_check "$TMP/report" 300 >"$TMP/out" 2>&1
status=$?
report=$(ls "$TMP"/report/gpu-check-*-NVIDIA-H100-80GB-HBM3.md 2>/dev/null)
# the medians after the first two and three steps: batch 64 × 1024 tokens in 110 ms, 595782 tokens/s; llm.c
# the same in 130 ms, 504123, plait 1.18 of it; the plan's 88 ms, 1.25 of it; at batch 160 no llm.c
row=$(grep '^| gpt2-124M | 64 × 1024 |' "$report" 2>/dev/null)
if [ "$status" = 0 ] && [ -n "$row" ] &&
   [ "$row" = "| gpt2-124M | 64 × 1024 | 595782 | $(awk 'BEGIN { printf "%.1f", '"$(sed -n 's/.*\.flops_per_iteration = \([0-9]*\).*/\1/p' tests/gpu/generated/gpt2-bench/model.c)"' / 0.11 / 1e12 }') | 40.0% | 31.50 GB / 29.42 GB | 110.0 ms / 88.0 ms (1.25) | 504123 | 1.18 |" ]; then
  pass gpu_dry_benchmark_row
else
  fail gpu_dry_benchmark_row "status $status, row '$row'; $(tail -n 5 "$TMP/out")"
fi
if grep -q '^| kernels | PASS | 2 outputs within tolerance' "$report" && grep -q '^| tiny_gpu_follows_cpu | PASS |' "$report" &&
   grep -q '^| layout_2221_follows_1111 | PASS |' "$report" && grep -q '^| nccl_one_rank | PASS |' "$report" &&
   grep -q "^Programs from .make gpu-bundle. (made by a test; compilers of a test); libraries added from $TMP/cuda/lib64\.$" "$report" &&
   grep -A 4 '^### Profile: gpt-1.3B' "$report" | grep -q '^  gemm  70.00' &&
   grep -q '^| gpt2-124M | 160 × 1024 | .* | - | - |$' "$report" &&
   grep -q '^| attention_bench | PASS | 4 timings' "$report" &&
   grep -q '^| gpt2 | cuDNN 1.700 | 8.000 | - | - | - | - |$' "$report" &&
   grep -q '^| gpt-1.3b | cuDNN 1.300 | 12.000 |' "$report" &&
   grep -q '^| copy_rate | PASS | 3000.0 GB/s' "$report" &&
   grep -q '^| gpt2-124M | norm | 6.00 | 2200 | 0.73 | yes |$' "$report" &&
   grep -q '^| gpt-1.3B | xent | 4.00 | 3100 | 1.03 | yes |$' "$report" &&
   ! grep -q '^### Profile: gpt2-124M (gpt2-bench-large)' "$report" && [ -f "$TMP/report/gpu-check-logs.tar.gz" ]; then
  pass gpu_dry_checks_and_profiles
else
  fail gpu_dry_checks_and_profiles "$(grep '^|' "$report" | head -8 | tr '\n' ' ')"
fi

# a benchmark that fails, and a kernel check that crashes after some outputs passed, fail the check
printf '#!/bin/sh\necho "plait: out of GPU memory: the activations need 9 bytes"\nexit 1\n' >"$bundle/gpu/gpt2-bench-large/train"
printf '#!/bin/sh\necho "PASS gemm_NN (relative error 2.00e-03, limit 1e-02)"\nkill -SEGV $$\n' >"$bundle/gpu/kernel_check-cuda"
run_check "$TMP/report2" 300 >"$TMP/out2" 2>&1
status=$?
if [ "$status" = 1 ] && grep -q '^| bench gpt2-124M, batch 160 | FAIL | .*out of GPU memory' "$TMP"/report2/gpu-check-*.md &&
   grep -q '^| kernels | FAIL | kernel_check-cuda ended with status 139 after 1 passed' "$TMP"/report2/gpu-check-*.md &&
   grep -q '^gpu-check: 2 failed' "$TMP/out2"; then
  pass gpu_dry_failed_benchmark
else
  fail gpu_dry_failed_benchmark "status $status: $(tail -n 3 "$TMP/out2")"
fi

# a budget spent before the benchmarks: they are skipped and said so, and the report is still written
run_check "$TMP/report3" 1 >"$TMP/out3" 2>&1
if grep -q '^| bench gpt-1.3B, batch 8 | SKIP | too little of the check.s budget of 1 s was left' "$TMP"/report3/gpu-check-*.md; then
  pass gpu_dry_budget_skips
else
  fail gpu_dry_budget_skips "$(grep '^|' "$TMP"/report3/gpu-check-*.md 2>/dev/null | tail -4 | tr '\n' ' ')"
fi
