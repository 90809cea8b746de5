# bench.sh: benchmarks (make bench): ratios measured in the same run, never bare times in a test.
#   GPT-2 124M at B=4, T=64 (llm.c's CPU reference configuration): tokens/s, and its model FLOPs over
#   this machine's single-precision GEMM rate (measured by the program at start-up); peak resident
#   memory against the plan's prediction.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
PLAIT=$root/build/plait
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

cat README.md compiler/*.c runtime/*.c > "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null

# median of a JSON field over the step lines after the first (warm-up)
median() { grep '"step"' "$1" | grep -v '"val_loss"' | tail -n +2 | sed "s/.*\"$2\": \([0-9.e+-]*\).*/\1/" | sort -g |
           awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "== GPT-2 124M, B=4, T=64, one rank (fp32)"
GPT2="models/gpt2.lua --set seq=64 --mbs 4 --gbs 4"
# shellcheck disable=SC2086
$PLAIT build $GPT2 -o "$TMP/gpt2" >/dev/null || exit 1
"$TMP/gpt2/train" --data "$TMP/text.bin" --steps 6 --lr 1e-4 --log-json "$TMP/gpt2.json" >"$TMP/gpt2.out" || exit 1
# shellcheck disable=SC2086
predicted=$($PLAIT plan $GPT2 --machine cpu --format json | grep '"memory_bytes"' | sed 's/.*"memory_bytes": \([0-9]*\).*/\1/')
resident=$(grep peak_resident_bytes "$TMP/gpt2.json" | sed 's/.*"peak_resident_bytes": \([0-9]*\).*/\1/')
awk -v ms="$(median "$TMP/gpt2.json" ms)" -v tps="$(median "$TMP/gpt2.json" tokens_per_s)" \
    -v mfu="$(median "$TMP/gpt2.json" mfu)" -v rss="$resident" -v plan="$predicted" 'BEGIN {
  printf "  step time (median)               %8.1f ms\n", ms
  printf "  tokens/s                         %8.1f\n", tps
  printf "  fraction of the GEMM rate        %8.2f   (target 0.60 or more)\n", mfu
  printf "  peak resident memory             %8.1f MB\n", rss / 1e6
  printf "  plan prediction                  %8.1f MB\n", plan / 1e6
  printf "  resident / predicted             %8.2f   (target within 1.2)\n", rss / plan
}'

echo "== tiny GPT, parallel layouts against one rank (threads on this machine, same global batch)"
TINY="models/tiny.lua --set layers=8 --mbs 4 --gbs 32"
run_tiny() { # name layout...: median tokens/s
  name=$1; shift
  # shellcheck disable=SC2086
  $PLAIT build $TINY "$@" -o "$TMP/$name" >/dev/null || exit 1
  "$TMP/$name/train" --data "$TMP/text.bin" --steps 8 --log-json "$TMP/$name.json" >/dev/null || exit 1
  median "$TMP/$name.json" tokens_per_s
}
one=$(run_tiny one)
dp2=$(run_tiny dp2 --dp 2)
pp2=$(run_tiny pp2 --pp 2)
awk -v one="$one" -v dp2="$dp2" -v pp2="$pp2" 'BEGIN {
  printf "  one rank                         %8.0f tokens/s\n", one
  printf "  (tp,pp,vpp,dp) = (1,1,1,2)       %8.0f tokens/s   %.2f of one rank\n", dp2, dp2 / one
  printf "  (tp,pp,vpp,dp) = (1,2,1,1)       %8.0f tokens/s   %.2f of one rank\n", pp2, pp2 / one
}'

echo "== a pipelined run's bubble: measured against the plan's prediction (tiny, pp 2, 8 microbatches)"
# shellcheck disable=SC2086
"$TMP/pp2/train" --data "$TMP/text.bin" --steps 6 --trace "$TMP/pp2.trace" >"$TMP/pp2.out" || exit 1
measured=$(grep 'measured bubble' "$TMP/pp2.out" | sed 's/.*measured bubble \([0-9.e-]*\).*/\1/')
# shellcheck disable=SC2086
predicted=$($PLAIT plan $TINY --pp 2 --machine cpu --format json | grep '"bubble_fraction"' | sed 's/.*: \([0-9.e-]*\),/\1/')
awk -v m="$measured" -v p="$predicted" -v cores="$(nproc)" 'BEGIN {
  printf "  plan (cost model, machine cpu)   %8.3f\n", p
  printf "  papers (pp-1)/m                  %8.3f\n", 1 / 8
  printf "  measured (last iteration)        %8.3f   (2 ranks as threads on %d cores)\n", m, cores
}'
