#!/bin/sh
# dp_buckets.sh: data-parallel gradients are reduced in buckets of one layer, each started during the
# chunk's last backward as soon as that layer is done (the rest, the embedding's and head's parameters,
# when the plan's REDUCE_GRAD comes); with --grad-reduce after, one bucket a chunk, none during the
# backward. The step lines of --log-json count them on rank 0.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
fixed_text "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null || { fail dp_buckets_data "plait data failed"; exit 0; }

# name, expected "buckets during_backward", layout flags: tiny has 4 layers
while read -r name expected flags; do
  # shellcheck disable=SC2086
  if ! $PLAIT build models/tiny.lua --mbs 4 --gbs 8 $flags -o "$TMP/$name" >"$TMP/build.log" 2>&1; then
    fail "dp_buckets_$name" "build failed: $(tail -c 400 "$TMP/build.log")"; continue
  fi
  "$TMP/$name/train" --data "$TMP/text.bin" --steps 2 --log-json "$TMP/$name.json" >/dev/null 2>"$TMP/err" ||
    { fail "dp_buckets_$name" "training failed: $(cat "$TMP/err")"; continue; }
  got=$(grep '"step": 2,' "$TMP/$name.json" | sed 's/.*"dp_buckets": \([0-9]*\), "dp_buckets_during_backward": \([0-9]*\).*/\1 \2/')
  expected=$(echo "$expected" | tr _ ' ')
  if [ "$got" = "$expected" ]; then pass "dp_buckets_$name ($got)"
  else fail "dp_buckets_$name" "buckets and buckets during backward on rank 0: '$got', expected '$expected'"; fi
done <<'CASES'
dp1 0_0
dp2 5_4 --dp 2
dp2pp2 3_2 --dp 2 --pp 2
dp2vpp2 5_4 --dp 2 --pp 2 --vpp 2 --gbs 16 --set layers=8
dp2after 1_0 --dp 2 --grad-reduce after
dp2vpp2after 2_0 --dp 2 --pp 2 --vpp 2 --gbs 16 --set layers=8 --grad-reduce after
CASES
