#!/bin/sh
# bundle.sh OBJECTS BUNDLE LLMC NVCC (make gpu-bundle): what a GPU machine needs to run the GPU check
# without building, in one folder the device tool carries (docs/gpu.md, "On a lent GPU"):
#   gpu/            the check's programs, built in OBJECTS without MPI (a GPU machine has none), stripped
#   llmc/           llm.c's train_gpt2.cu (the peer, from LLMC) built for sm_90 with tests/gpu/llmc_cuda13.h,
#                   and its sources beside it
#   plans.txt       plait plan's iteration time and memory for every benchmark model on h100.lua and h200.lua
#   text.bin        the check's training text as tokens: Debian's fortunes (fortunes-min, fortune-mod)
#                   where this machine has them, so that every bundle trains on the same text; without
#                   them none, and the check tokenizes the sources it carries
#   bundle.txt      what was built where, with which compilers
# Ends with an error when the folder would not fit the device tool's 64 MiB beside the working tree.
set -eu
objects=$1 bundle=$2 llmc=$3 nvcc=$4
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
rm -rf "$bundle"
mkdir -p "$bundle/gpu" "$bundle/llmc"

(cd "$objects/gpu" && find . -type f -perm -u+x) | while read -r program; do
  mkdir -p "$(dirname "$bundle/gpu/$program")"
  cp "$objects/gpu/$program" "$bundle/gpu/$program"
  strip "$bundle/gpu/$program"
  if ldd "$bundle/gpu/$program" | grep -q libmpi; then
    echo "bundle.sh: $program links MPI; build it with MPI_INC= MPI_LIB=" >&2
    exit 1
  fi
done

# cuBLAS's folder as an RPATH of llm.c's program (its link has none), where this toolkit keeps it
cuda_lib=$(dirname "$(dirname "$nvcc")")/lib64
if [ -f "$llmc/train_gpt2.cu" ]; then
  mkdir -p "$bundle/llmc/src"
  cp -r "$llmc/." "$bundle/llmc/src/"
  chmod -R u+w "$bundle/llmc/src"
  cp tests/gpu/llmc_cuda13.h "$bundle/llmc/src/"
  if ! make -C "$bundle/llmc/src" train_gpt2cu NVCC="$nvcc" NO_MULTI_GPU=1 NO_USE_MPI=1 USE_CUDNN=0 \
       GPU_COMPUTE_CAPABILITY=90 NVCC_INCLUDES="-include llmc_cuda13.h" \
       NVCC_LDFLAGS="-lcublas -lcublasLt -Xlinker --disable-new-dtags -Xlinker -rpath=$cuda_lib" \
       >"$bundle/llmc/build.log" 2>&1; then
    tail -5 "$bundle/llmc/build.log" >&2
    echo "bundle.sh: llm.c's train_gpt2.cu did not build (its log: $bundle/llmc/build.log)" >&2
    exit 1
  fi
  mv "$bundle/llmc/src/train_gpt2cu" "$bundle/llmc/train_gpt2cu"
  rm -rf "$bundle/llmc/src/build"
  llmc_line="llm.c $(cut -c1-12 "$llmc/COMMIT" 2>/dev/null || echo '(no COMMIT)'), train_gpt2cu built for sm_90"
else
  llmc_line="llm.c not found at $llmc: the check runs without it"
fi

fortunes=$(ls /usr/share/games/fortunes/* 2>/dev/null | grep -v -e '\.dat$' -e '\.u8$' || true)
if [ -n "$fortunes" ]; then
  # shellcheck disable=SC2086
  "$objects/gpu/tokens" "$bundle/text.bin" $fortunes >/dev/null
  text_line="text.bin: Debian's fortunes, $(($(wc -c <"$bundle/text.bin") / 2)) tokens"
else
  text_line="no text.bin (no fortunes here): the check tokenizes the sources"
fi

grep -v '^#' tests/gpu/benchmarks.txt | while read -r _ dir _ _ _ _ _ _ args; do
  for machine in h100 h200; do
    # shellcheck disable=SC2086
    build/plait plan $args --machine $machine --format json |
      awk -v dir="$dir" -v machine="$machine" '
        /"iteration_time":/ { gsub(/[^0-9.e+-]/, "", $2); seconds = $2 }
        /"memory_bytes":/ { match($0, /"memory_bytes": [0-9]+/); bytes = substr($0, RSTART + 16, RLENGTH - 16) }
        END { print dir, machine, seconds, bytes }'
  done
done >"$bundle/plans.txt"

{
  echo "made by make gpu-bundle on $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -m), commit $(git describe --always --dirty 2>/dev/null || echo '?')"
  echo "$("$nvcc" --version | tail -1); $(cc --version | head -1)"
  echo "$llmc_line"
  echo "$text_line"
} >"$bundle/bundle.txt"

bytes=$(du -sb "$bundle" | cut -f1)
if [ "$bytes" -gt $((56 << 20)) ]; then
  echo "bundle.sh: $bundle is $bytes bytes, over the 56 MiB that leaves the working tree room in 64 MiB" >&2
  exit 1
fi
echo "gpu-bundle: $bundle ($((bytes >> 20)) MiB): $(find "$bundle/gpu" -type f | wc -l) programs; $llmc_line"
