# generated.sh: generated/ holds the emitted sources of reference models; regenerating them must give
# the same files. UPDATE_GENERATED=1 rewrites them (review the diff before committing).
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

while read -r name args; do
  [ -z "$name" ] && continue
  # shellcheck disable=SC2086
  if ! $PLAIT build $args --emit-only -o "$TMP/$name" >"$TMP/err" 2>&1; then
    fail "generated_$name" "plait build failed: $(cat "$TMP/err")"
  elif [ "${UPDATE_GENERATED:-0}" = 1 ]; then
    rm -rf "generated/$name" && cp -r "$TMP/$name" "generated/$name" && pass "generated_$name (updated)"
  elif diff -ru "generated/$name" "$TMP/$name" >"$TMP/diff"; then
    pass "generated_$name"
  else
    fail "generated_$name" "generated/$name is out of date (UPDATE_GENERATED=1 sh tests/cli/generated.sh): $(head -c 1200 "$TMP/diff")"
  fi
done <<'CASES'
tiny models/tiny.lua
gpt2 models/gpt2.lua
tiny-tp2-pp2-vpp2 models/tiny.lua --tp 2 --pp 2 --vpp 2 --gbs 16 --mbs 4 --set dropout=0.1
CASES
