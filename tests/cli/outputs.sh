# outputs.sh: plait's commands never write over their inputs or into plait's own sources, and a failed
# write or build leaves what was there before (byte for byte) and no stray file.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

# unchanged NAME FILE COPY: FILE is still byte for byte its COPY
unchanged() {
  if cmp -s "$2" "$3"; then pass "$1"; else fail "$1" "$2 changed"; fi
}
# no_strays NAME FOLDER: no temporary file left in FOLDER
no_strays() {
  if ls "$2" | grep -q '\.tmp'; then fail "$1" "$(ls "$2" | grep '\.tmp' | tr '\n' ' ')"; else pass "$1"; fi
}

cp /usr/share/common-licenses/GPL-3 "$TMP/text.txt"
cp "$TMP/text.txt" "$TMP/text.copy"

# plait data over its own input
expect_error data_output_is_input "-o $TMP/text.txt is also an input \\($TMP/text.txt\\); it would be replaced" \
  $PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.txt"
unchanged data_input_kept "$TMP/text.txt" "$TMP/text.copy"
no_strays data_no_temporary "$TMP"

# plait plan -o: not the model file, not plait's sources; a failed plan leaves the old output
cp models/tiny.lua "$TMP/tiny.lua"
cp "$TMP/tiny.lua" "$TMP/tiny.copy"
expect_error plan_output_is_the_model "-o $TMP/tiny.lua is also an input" $PLAIT plan "$TMP/tiny.lua" -o "$TMP/tiny.lua"
unchanged plan_model_kept "$TMP/tiny.lua" "$TMP/tiny.copy"
expect_error plan_output_in_sources "-o models/plan.txt is in plait's own sources .*; write to build/ or a folder of your own" \
  $PLAIT plan models/tiny.lua -o models/plan.txt
if [ -e models/plan.txt ]; then fail plan_output_in_sources_not_written "models/plan.txt exists"; rm -f models/plan.txt
else pass plan_output_in_sources_not_written; fi
echo "an earlier plan" > "$TMP/plan.txt"
cp "$TMP/plan.txt" "$TMP/plan.copy"
expect_error plan_error_keeps_output "not divisible by tp = 3" $PLAIT plan models/tiny.lua --tp 3 -o "$TMP/plan.txt"
unchanged plan_output_kept "$TMP/plan.txt" "$TMP/plan.copy"
no_strays plan_no_temporary "$TMP"
expect_ok plan_output_written $PLAIT plan models/tiny.lua -o "$TMP/plan.txt"
if grep -q '^plan        tiny' "$TMP/plan.txt"; then pass plan_output_complete; else fail plan_output_complete "$(head -c 200 "$TMP/plan.txt")"; fi

# plait build: not into plait's sources; a build that fails to link leaves the working program
expect_error build_into_sources "-o runtime/tiny is in plait's own sources" $PLAIT build models/tiny.lua -o runtime/tiny
if [ -e runtime/tiny ]; then fail build_into_sources_not_made "runtime/tiny exists"; rm -rf runtime/tiny
else pass build_into_sources_not_made; fi
if $PLAIT build models/tiny.lua --set layers=1 hidden=32 heads=2 ffn=64 seq=16 -o "$TMP/tiny" >"$TMP/build.log" 2>&1; then
  cp "$TMP/tiny/train" "$TMP/train.copy"
  # another checkout whose runtime library is broken: compiling succeeds, linking fails
  mkdir -p "$TMP/home/build"
  ln -s "$PLAIT_ROOT/runtime" "$TMP/home/runtime"
  echo "not an archive" > "$TMP/home/build/libplait_rt.a"
  PLAIT_HOME="$TMP/home" $PLAIT build models/tiny.lua --set layers=1 hidden=32 heads=2 ffn=64 seq=16 -o "$TMP/tiny" \
    >"$TMP/out" 2>"$TMP/err"
  status=$?
  if [ "$status" = 1 ] && tail -n 1 "$TMP/err" | grep -q "compiling the generated program failed .*tiny/train is as it was"; then
    pass build_failure_says_so
  else
    fail build_failure_says_so "status $status: $(tail -c 300 "$TMP/err")"
  fi
  unchanged build_failure_keeps_program "$TMP/tiny/train" "$TMP/train.copy"
  no_strays build_no_temporary "$TMP/tiny"
else
  fail build "$(tail -c 400 "$TMP/build.log")"
fi
