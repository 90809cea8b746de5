#!/bin/sh
# recompute.sh: --recompute full keeps each layer's input alone and re-runs one layer's forward just
# before its backward: the gradients are those of the model (finite differences in double precision;
# equivalence.sh trains it on two pipeline ranks against one), and the plan's activation memory falls on
# every rank.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
# a fixed English text (Debian's base-files), so that the project's own edits never change the data
cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 /usr/share/common-licenses/MPL-2.0 > "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null || { fail recompute_data "plait data failed"; exit 0; }

SMALL="layers=3 hidden=32 heads=2 seq=16 vocab=256 ffn=64 dropout=0.1"
# shellcheck disable=SC2086
if $PLAIT build models/gpt.lua --set $SMALL --mbs 2 --gbs 4 --recompute full --double -o "$TMP/gpt" >"$TMP/build.log" 2>&1 &&
   "$TMP/gpt/train" --data "$TMP/text.bin" --gradcheck 60 >"$TMP/gpt.out" 2>&1; then
  pass "recompute_gradcheck ($(grep -o 'largest relative error [^ ;]*' "$TMP/gpt.out" | tr '\n' ' '))"
else
  fail recompute_gradcheck "$(tail -c 600 "$TMP/build.log") $(tail -c 600 "$TMP/gpt.out")"
fi

# activation bytes per pipeline rank, without and with recomputation
activations() { # flags...: one line of bytes per rank
  # shellcheck disable=SC2068
  $PLAIT plan models/gpt2.lua --machine cpu --format json $@ |
    python3 -c 'import json, sys; print(*[r["memory"]["activations"] for r in json.load(sys.stdin)["ranks"]])'
}
for layout in "--gbs 4" "--pp 4 --gbs 16"; do
  name=$(echo "$layout" | tr -d ' -')
  without=$(activations $layout) with=$(activations $layout --recompute full)
  if [ -n "$without" ] && echo "$without" "|" "$with" |
     awk '{ n = (NF - 1) / 2; for (i = 1; i <= n; i++) if (!($(i + n + 1) < $i)) bad = 1 } END { exit bad || n < 1 }'; then
    pass "recompute_saves_memory_$name (bytes per rank: $without -> $with)"
  else
    fail "recompute_saves_memory_$name" "activation bytes per rank without: '$without', with: '$with'"
  fi
done
