# runtime_f32.sh: the unit tests of the parts of the runtime that store `real` (init, checkpoints, optimizer),
# built again against the float runtime (build/libplait_rt.a), as generated CPU programs use it.
. "$(dirname "$0")/lib.sh"

lib="$PLAIT_ROOT/build/libplait_rt.a"
for t in philox ckpt optim; do
  bin="$TMP/test_${t}_f32"
  if ! ${CC:-cc} -std=c11 -O2 -D_GNU_SOURCE -fopenmp -I"$PLAIT_ROOT/runtime" -I"$PLAIT_ROOT/tests/unit" \
       -o "$bin" "$PLAIT_ROOT/tests/unit/test_$t.c" "$lib" -lm 2>"$TMP/cc.err"; then
    fail "build test_$t against the float runtime" "$(head -c 400 "$TMP/cc.err")"
    continue
  fi
  "$bin" >"$TMP/out"; status=$?
  sed -E 's/^(PASS|FAIL) /\1 f32 /' "$TMP/out"
  [ "$status" = 0 ] || grep -q '^FAIL' "$TMP/out" || fail "f32 test_$t" "exited with status $status"
done
