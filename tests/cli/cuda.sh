# cuda.sh: the CUDA backend where no GPU is needed: the runtime and generated CUDA programs (tiny, gpt2)
# compile and link; every fused kernel of the reference models compiles with NVRTC for sm_90 (and a
# broken one is reported with its name and NVRTC's log), and some run on the host through a stand-in
# for CUDA; the kernel cache; a CUDA program without a GPU stops with one line; the GPU check's programs
# are built and its CPU side runs. Skipped, with a line saying so, only where nvcc is absent.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
B=$PLAIT_ROOT/build

if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  pass "cuda (skipped: nvcc is not installed on this machine)"
  exit 0
fi
[ -f "$B/libplait_rt_cuda.a" ] || { fail cuda_runtime "nvcc is here but build/libplait_rt_cuda.a is missing (run make)"; exit 0; }

# ---- generated programs compile and link --------------------------------------------------------
expect_error cuda_refuses_head_size '^plait: models/gpt.lua:[0-9]+: attention heads of 320 elements: the CUDA kernels take heads of up to 256' \
  $PLAIT build models/gpt.lua --set layers=2 hidden=640 heads=2 seq=64 --backend cuda --emit-only -o "$TMP/heads320"
# a mixture of experts too, with the router's losses added (runtime/cuda/moe.cu)
while read -r model args; do
  # shellcheck disable=SC2086
  if $PLAIT build $args --backend cuda -o "$TMP/$model" >"$TMP/build.log" 2>&1 &&
     [ -x "$TMP/$model/train" ]; then
    pass "cuda_build_$model"
  else
    fail "cuda_build_$model" "$(tail -c 800 "$TMP/build.log")"
  fi
done <<'MODELS'
tiny models/tiny.lua
gpt2 models/gpt2.lua
moe tests/cli/models/moe.lua
moe-losses tests/cli/models/moe.lua --set aux_loss=0.01 z_loss=0.001
mixtral models/mixtral.lua --set layers=2 hidden=64 heads=4 kv_heads=2 ffn=96 seq=32 vocab=256
MODELS
expect_error cuda_build_double '--double is for gradient checks' $PLAIT build models/tiny.lua --backend cuda --double -o "$TMP/d"
expect_error cuda_build_unknown_backend '--backend tpu: the backends are cpu and cuda' \
  $PLAIT build models/tiny.lua --backend tpu -o "$TMP/t"

# ---- without a GPU (none visible), the program stops with one line --------------------------------
: >"$TMP/empty.bin"
expect_error cuda_no_device '^plait: no CUDA device: .*run on a machine with an NVIDIA GPU' \
  env CUDA_VISIBLE_DEVICES= "$TMP/tiny/train" --data "$TMP/empty.bin" --steps 1

# ---- every fused kernel of the reference models through NVRTC for sm_90 --------------------------
while read -r name args; do
  # shellcheck disable=SC2086
  $PLAIT build $args --backend cuda --emit-only -o "$TMP/nvrtc-$name" >/dev/null 2>"$TMP/err" ||
    fail "nvrtc_emit_$name" "$(cat "$TMP/err")"
done <<'MODELS'
tiny models/tiny.lua
tiny-dropout models/tiny.lua --set dropout=0.1 --tp 2
tiny-sp models/tiny.lua --tp 2 --sequence-parallel
gpt2 models/gpt2.lua
llama models/llama.lua --set layers=2 kv_heads=8 --tp 2
bert models/bert.lua --set layers=2
primitives tests/cli/models/primitives.lua --tp 2
attention-options tests/cli/models/attention_options.lua --set hidden=64 --tp 2
fused-qkv tests/cli/models/fused_qkv.lua --set hidden=64 --tp 2
constants tests/cli/models/constants.lua --set hidden=64 --tp 2
frozen tests/cli/models/frozen.lua --set hidden=64 --tp 2
mistral models/mistral.lua --set layers=2 hidden=64 heads=4 kv_heads=2 ffn=96 seq=32 vocab=256 sliding_window=12 --tp 2
qwen2 models/qwen2.lua --set layers=2 hidden=64 heads=4 kv_heads=2 ffn=96 seq=32 vocab=256 --tp 2
qwen3 models/qwen3.lua --set layers=2 hidden=64 heads=4 kv_heads=2 head_dim=16 ffn=96 seq=32 vocab=256 --tp 2
olmo2 models/olmo2.lua --set layers=2 hidden=64 heads=4 kv_heads=2 ffn=96 seq=32 vocab=256 --tp 2
phi2 models/phi2.lua --set layers=2 hidden=64 heads=4 ffn=128 seq=32 vocab=256 --tp 2
llama31 models/llama.lua --set layers=2 hidden=64 heads=4 kv_heads=2 ffn=96 seq=32 vocab=256 rope_scaling=llama3 --tp 2
gemma2 models/gemma2.lua --set layers=2 hidden=64 heads=4 kv_heads=2 head_dim=32 ffn=96 seq=32 vocab=256 sliding_window=12 --tp 2
gemma models/gemma.lua --set layers=2 hidden=64 heads=4 kv_heads=2 head_dim=32 ffn=96 seq=32 vocab=256 --tp 2
moe tests/cli/models/moe.lua --set aux_loss=0.01 z_loss=0.001
moe-ep tests/cli/models/moe.lua --set aux_loss=0.01 --dp 2 --ep 2
mixtral models/mixtral.lua --set layers=2 hidden=64 heads=4 kv_heads=2 ffn=96 vocab=256 --tp 2
MODELS
PLAIT_CACHE_DIR="$TMP/cache" "$B/tests/cuda/nvrtc_check" 90 "$TMP"/nvrtc-*/fused_cuda.c \
  >"$TMP/nvrtc.out" 2>&1
status=$?
grep -E '^(PASS|FAIL)' "$TMP/nvrtc.out"
[ "$status" = 0 ] || fail nvrtc_check "exit status $status: $(grep -v '^PASS' "$TMP/nvrtc.out" | head -c 600)"
if grep -q 'rt_dropout' "$TMP"/nvrtc-tiny-dropout/fused_cuda.c; then
  pass "nvrtc_dropout_kernels_present"
else fail nvrtc_dropout_kernels_present "no dropout in tiny-dropout's kernels"; fi
if ls "$TMP"/cache/fused-*.bin >/dev/null 2>&1; then pass "nvrtc_cache_files"
else fail nvrtc_cache_files "nothing in PLAIT_CACHE_DIR"; fi

# the fused kernels of four of those programs run on the host (tests/gpu/fused_host.py): the 8-wide
# vector loop gives the element loop's bits, dropout and fp32 gradients included
if ! command -v python3 >/dev/null 2>&1 || ! command -v c++ >/dev/null 2>&1; then
  pass "fused_host (skipped: python3 or c++ is missing)"
else
  for name in tiny-dropout tiny-sp primitives moe; do
    if python3 tests/gpu/fused_host.py "$TMP/nvrtc-$name/fused_cuda.c" "$TMP/fused-$name.cpp" \
         2>"$TMP/err" &&
       c++ -std=c++17 -O1 -Wall -Wextra -Werror -Wno-unknown-pragmas -DPLAIT_CUDA -Itests/gpu -Iruntime/cuda -Iruntime \
         -o "$TMP/fused-$name" "$TMP/fused-$name.cpp" 2>>"$TMP/err" &&
       "$TMP/fused-$name" >"$TMP/fused.out" 2>&1; then
      pass "fused_host_$name ($(grep -c '^PASS' "$TMP/fused.out") kernels: the vector loop gives the element loop's bits)"
    else
      fail "fused_host_$name" "$(head -c 600 "$TMP/err") $(grep -v '^PASS' "$TMP/fused.out" 2>/dev/null | head -c 600)"
    fi
  done
fi

# NVRTC opens its builtins library by name, which a program's RUNPATH does not reach: GPU programs carry
# CUDA's folder as an RPATH, so they compile kernels on a machine whose loader cache lacks that folder
loader=/lib64/ld-linux-x86-64.so.2
if [ -x "$loader" ]; then
  if PLAIT_CACHE_DIR="$TMP/cache-nocache" "$loader" --inhibit-cache "$B/tests/cuda/nvrtc_check" 90 \
       generated/tiny/fused_cuda.c >"$TMP/nocache.out" 2>&1; then
    pass nvrtc_without_the_loader_cache
  else
    fail nvrtc_without_the_loader_cache "$(grep -v '^PASS' "$TMP/nocache.out" | head -c 400)"
  fi
fi

# a kernel that does not compile is named, with NVRTC's log
cat >"$TMP/broken.c" <<'EOF'
const CudaKernelSource plait_cuda_kernels[] = {
  {"ew_0",
    "extern \"C\" __global__ void ew_0(long long n, act_t *out) { if (threadIdx.x < n) out[0] = st(1.0f); }\n"},
  {"ew_1",
    "extern \"C\" __global__ void ew_1(long long n, act_t *out) { out[0] = st(no_such_function(n)); }\n"},
};
EOF
"$B/tests/cuda/nvrtc_check" 90 "$TMP/broken.c" >"$TMP/broken.out" 2>&1
if grep -q '^PASS nvrtc .*broken.c ew_0 ' "$TMP/broken.out" &&
   grep -q '^FAIL nvrtc .*broken.c ew_1: NVRTC could not compile fused kernel ew_1 for sm_90: .*no_such_function' "$TMP/broken.out" &&
   grep -q '^FAIL nvrtc .*broken.c: all together: NVRTC could not compile fused kernel ew_1' "$TMP/broken.out"; then
  pass nvrtc_names_the_broken_kernel
else
  fail nvrtc_names_the_broken_kernel "$(head -c 600 "$TMP/broken.out")"
fi

# ---- cuDNN's attention without a GPU: the loader's search and refusals on stand-in libraries, every
# descriptor of the graphs with the toolkit's cuDNN; DIR/train --attention's refusals -----------------
standins=$TMP/cudnn
standin() { # standin DIR CFLAGS...: a stand-in libcudnn.so.9 in $standins/DIR
  dir=$1; shift
  mkdir -p "$standins/$dir" && cc -shared -fPIC -o "$standins/$dir/libcudnn.so.9" tests/gpu/cudnn_standin.c "$@"
}
standin old -DVERSION=91400 -DCUDART=13000
standin cuda12 -DVERSION=91900 -DCUDART=12080
standin noexec -DVERSION=91900 -DCUDART=13000 -DWITHOUT_EXECUTE
standin good -DVERSION=91900 -DCUDART=13000
site=venv/lib/python3.12/site-packages/nvidia/cudnn/lib user=home/.local/lib/python3.11/site-packages/nvidia/cudnn/lib
mkdir -p "$standins/venv/bin" "$standins/$site" "$standins/$user"
printf '#!/bin/sh\n' >"$standins/venv/bin/python3" && chmod +x "$standins/venv/bin/python3"
cp "$standins/good/libcudnn.so.9" "$standins/$site/" && cp "$standins/good/libcudnn.so.9" "$standins/$user/"
if [ -x "$B/tests/cuda/cudnn_check" ]; then
  toolkit=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")/lib64
  "$B/tests/cuda/cudnn_check" "$standins" "$toolkit" >"$TMP/cudnn.out" 2>&1
  status=$?
  grep -E '^(PASS|FAIL)' "$TMP/cudnn.out"
  [ "$status" = 0 ] || fail cudnn_check "exit status $status: $(grep -v '^PASS' "$TMP/cudnn.out" | head -c 600)"
else
  pass "cudnn_check (skipped: cuDNN's headers are not on this machine)"
fi
expect_error attention_flag_value "^plait: --attention takes one of auto, cudnn and plait, not 'fast'$" \
  "$TMP/tiny/train" --data "$TMP/empty.bin" --steps 1 --attention fast
expect_error attention_cudnn_too_old \
  "^plait: --attention cudnn: no cuDNN this program can use \(.*/old/libcudnn.so.9 is cuDNN 9.14.0, not 9.x from 9.15.1 on\)" \
  env PLAIT_CUDNN="$standins/old" "$TMP/tiny/train" --data "$TMP/empty.bin" --steps 1 --attention cudnn
$PLAIT build models/tiny.lua -o "$TMP/tiny-cpu" >/dev/null 2>&1
expect_error attention_cudnn_on_the_cpu '^plait: --attention cudnn: this program runs on the CPU' \
  "$TMP/tiny-cpu/train" --data "$TMP/empty.bin" --steps 1 --attention cudnn

# ---- the GPU check: its programs built (generated.sh keeps their sources current), its CPU side runs
for program in tiny tiny-dropout tiny-tp2-pp2-vpp2 moe \
    $(grep -v '^#' tests/gpu/benchmarks.txt | awk '{ print $2 }'); do
  [ -x "$B/gpu/$program/train" ] || fail "gpu_program_$program" "build/gpu/$program/train was not built"
done
if "$B/gpu/kernel_check-cpu" 12345 "$TMP" >"$TMP/kcpu.out" 2>&1 && ! grep -q '^FAIL' "$TMP/kcpu.out"; then
  pass "gpu_kernel_check_reference ($(grep -c '^PASS' "$TMP/kcpu.out") outputs written)"
else
  fail gpu_kernel_check_reference "$(grep -v '^PASS' "$TMP/kcpu.out" | head -c 600)"
fi
expect_error gpu_kernel_check_no_device '^plait: no CUDA device' \
  env CUDA_VISIBLE_DEVICES= "$B/gpu/kernel_check-cuda" 12345 "$TMP"

# the reference runtime's plain C GEMM trains tiny as the OpenBLAS runtime does (fp32, to rounding)
# (the token file comes from tests/gpu/tokens.c, as on the GPU machine: a header, then each byte as a token)
fixed_text "$TMP/text.txt"
"$B/gpu/tokens" "$TMP/text.bin" "$TMP/text.txt" >/dev/null
bytes=$(wc -c <"$TMP/text.txt")
header=$(od -A n -t d4 -N 12 "$TMP/text.bin" | tr -s ' ' | sed 's/^ //')
if [ "$header" = "20240520 1 $bytes" ] && [ "$(wc -c <"$TMP/text.bin")" = $((1024 + 2 * bytes)) ]; then
  pass gpu_tokens_file
else
  fail gpu_tokens_file "header '$header' for $bytes bytes"
fi
"$TMP/tiny-cpu/train" --data "$TMP/text.bin" --steps 3 --lr 3e-3 --seed 7 >"$TMP/blas.out" 2>&1
"$B/gpu/tiny/train-cpu" --data "$TMP/text.bin" --steps 3 --lr 3e-3 --seed 7 >"$TMP/plain.out" 2>&1
grep '^step' "$TMP/blas.out" | sed 's/.*loss \([0-9.]*\).*/\1/' >"$TMP/a"
grep '^step' "$TMP/plain.out" | sed 's/.*loss \([0-9.]*\).*/\1/' >"$TMP/b"
if [ "$(wc -l <"$TMP/b")" = 3 ] &&
   paste "$TMP/a" "$TMP/b" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * $1) bad = 1 } END { exit bad }'; then
  pass "gpu_reference_runtime_trains ($(tr '\n' ' ' <"$TMP/b"))"
else
  fail gpu_reference_runtime_trains "losses $(tr '\n' ' ' <"$TMP/a") vs $(tr '\n' ' ' <"$TMP/b") $(tail -c 300 "$TMP/plain.out")"
fi

# the check script and the PyTorch comparison parse
if sh -n tests/gpu/run.sh 2>"$TMP/err"; then pass gpu_run_script_parses; else fail gpu_run_script_parses "$(cat "$TMP/err")"; fi
if ! command -v python3 >/dev/null 2>&1; then pass "gpu_torch_script_parses (skipped: no python3)"
elif python3 -c 'import ast, sys; [ast.parse(open(f).read()) for f in sys.argv[1:]]' tests/gpu/torch_gpt.py \
       tests/gpu/sdpa_bench.py 2>"$TMP/err"; then
  pass gpu_torch_script_parses
else fail gpu_torch_script_parses "$(cat "$TMP/err")"; fi

# make gpu-bundle: the check's programs without MPI, llm.c where its sources are, the plan's figures
if make gpu-bundle >"$TMP/bundle.log" 2>&1; then
  linked=$(find "$B/gpu-bundle/gpu" -type f -perm -u+x -exec ldd {} \; 2>/dev/null | grep -c -e libmpi -e 'not found')
  plans=$(wc -l <"$B/gpu-bundle/plans.txt")
  want=$((2 * $(grep -vc '^#' tests/gpu/benchmarks.txt)))
  llmc_ok=1
  [ -f ../shared/peers/llm.c/train_gpt2.cu ] && [ ! -x "$B/gpu-bundle/llmc/train_gpt2cu" ] && llmc_ok=0
  if [ "$linked" = 0 ] && [ "$plans" = "$want" ] && [ "$llmc_ok" = 1 ] && [ -x "$B/gpu-bundle/gpu/tiny/train" ]; then
    pass "gpu_bundle ($(tail -n 1 "$TMP/bundle.log" | sed 's/^gpu-bundle: //'))"
  else
    fail gpu_bundle "$linked MPI or missing libraries, $plans of $want plans, llm.c built $llmc_ok: $(tail -n 3 "$TMP/bundle.log")"
  fi
else
  fail gpu_bundle "$(tail -n 5 "$TMP/bundle.log")"
fi
