# generated.sh: generated/ holds the emitted sources of reference models, and tests/gpu/generated/ those
# the GPU check builds on a machine without plait (its benchmark models from tests/gpu/benchmarks.txt);
# regenerating them must give the same files.
# UPDATE_GENERATED=1 rewrites them (review the diff before committing). The folder's marker (.plait-folder,
# random per build) is neither compared nor kept.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

while read -r dir args; do
  [ -z "$dir" ] && continue
  name=$(basename "$dir")
  # shellcheck disable=SC2086
  if ! $PLAIT build $args --emit-only -o "$TMP/$name" >"$TMP/err" 2>&1; then
    fail "generated_$name" "plait build failed: $(cat "$TMP/err")"
  elif [ "${UPDATE_GENERATED:-0}" = 1 ]; then
    rm -rf "$dir" && cp -r "$TMP/$name" "$dir" && rm "$dir/.plait-folder" && pass "generated_$name (updated)"
  elif diff -ru -x .plait-folder "$dir" "$TMP/$name" >"$TMP/diff"; then
    pass "generated_$name"
  else
    fail "generated_$name" "$dir is out of date (UPDATE_GENERATED=1 sh tests/cli/generated.sh): $(head -c 1200 "$TMP/diff")"
  fi
done <<CASES
$(grep -v '^#' tests/gpu/benchmarks.txt | awk '{ $1 = ""; $2 = "tests/gpu/generated/" $2; $3 = $4 = $5 = $6 = $7 = $8 = ""; print }')
generated/tiny models/tiny.lua
generated/gpt2 models/gpt2.lua
generated/tiny-tp2-pp2-vpp2 models/tiny.lua --tp 2 --pp 2 --vpp 2 --gbs 16 --mbs 4 --set dropout=0.1
tests/gpu/generated/tiny-dropout models/tiny.lua --gbs 16 --mbs 4 --set dropout=0.1
CASES
