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
resident=$(grep peak_resident_bytes "$TMP/gpt2.json" | sed 's/.*: \([0-9]*\).*/\1/')
awk -v ms="$(median "$TMP/gpt2.json" ms)" -v tps="$(median "$TMP/gpt2.json" tokens_per_s)" \
    -v mfu="$(median "$TMP/gpt2.json" mfu)" -v rss="$resident" -v plan="$predicted" 'BEGIN {
  printf "  step time (median)               %8.1f ms\n", ms
  printf "  tokens/s                         %8.1f\n", tps
  printf "  fraction of the GEMM rate        %8.2f   (target 0.60 or more)\n", mfu
  printf "  peak resident memory             %8.1f MB\n", rss / 1e6
  printf "  plan prediction                  %8.1f MB\n", plan / 1e6
  printf "  resident / predicted             %8.2f   (target within 1.2)\n", rss / plan
}'
