# baseline.sh: the kernels' baseline x86-64 path (what a CPU without AVX2 runs), forced on this host by
# PLAIT_CPU=baseline: a program built so holds no AVX-512 or AVX2 clone, and it passes the training and
# gradient tests of train.sh (their names prefixed with baseline_); another value is refused.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

clones() { nm "$1" | grep -c -E '\.arch_x86_64_v[34]$'; }
if $PLAIT build models/tiny.lua --set layers=1 -o "$TMP/wide" >"$TMP/build.log" 2>&1 &&
   PLAIT_CPU=baseline $PLAIT build models/tiny.lua --set layers=1 -o "$TMP/baseline" >>"$TMP/build.log" 2>&1; then
  wide=$(clones "$TMP/wide/train") narrow=$(clones "$TMP/baseline/train")
  if [ "$wide" -gt 0 ] && [ "$narrow" = 0 ]; then pass "baseline_has_no_wide_clones ($wide in the default build)"
  else fail baseline_has_no_wide_clones "AVX2 and AVX-512 clones: $wide by default, $narrow under PLAIT_CPU=baseline"; fi
else
  fail baseline_has_no_wide_clones "$(tail -c 800 "$TMP/build.log")"
fi

expect_error baseline_other_value "PLAIT_CPU=avx9: the one value it takes is baseline" \
  env PLAIT_CPU=avx9 $PLAIT build models/tiny.lua -o "$TMP/refused"

PLAIT_CPU=baseline sh "$(dirname "$0")/train.sh" | sed -e 's/^PASS /PASS baseline_/' -e 's/^FAIL /FAIL baseline_/'
