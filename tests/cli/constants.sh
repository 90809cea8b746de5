# constants.sh: a constant of more values than model.c carries (300,000 in
# tests/cli/models/large_constant.lua) goes into DIR/constants.bin; the program trains to the same
# losses as one with the same values in five constants of model.c, its gradients pass a check in
# double precision, and DIR/train refuses a missing, short or damaged constants file in one line; a
# rebuild without one removes the old file.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
MODEL=tests/cli/models/large_constant.lua

cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 > "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null ||
  { fail data "plait data failed"; exit 0; }
TRAIN="--data $TMP/text.bin --lr 3e-3 --seed 7 --steps 4"

# losses NAME: trains DIR NAME 4 steps, each step's loss in $TMP/NAME.loss
losses() {
  timeout 300 "$TMP/$1/train" $TRAIN --log-json "$TMP/$1.json" >"$TMP/$1.log" 2>&1 &&
    grep '"loss"' "$TMP/$1.json" | sed 's/.*"loss": \([^,]*\),.*/\1/' >"$TMP/$1.loss"
}

LAYOUT="--mbs 2 --gbs 4"
if $PLAIT build $MODEL $LAYOUT -o "$TMP/whole" >"$TMP/build.log" 2>&1 &&
   $PLAIT build $MODEL --set pieces=5 $LAYOUT -o "$TMP/pieces" >>"$TMP/build.log" 2>&1; then
  pass build
else
  fail build "$(tail -c 600 "$TMP/build.log")"; exit 0
fi

# 8 bytes of magic, a record of 4 + 5 ("scale") + 8 + 8 bytes, and 300,000 doubles
size=$(wc -c <"$TMP/whole/constants.bin")
if [ "$size" = $((8 + 25 + 300000 * 8)) ] &&
   grep -q '{"scale", 300000, NULL}' "$TMP/whole/model.c" &&
   ! grep -q 'constant_0\[' "$TMP/whole/model.c" && [ ! -e "$TMP/pieces/constants.bin" ] &&
   [ "$(grep -c 'static const double constant_[0-9]*\[60000\]' "$TMP/pieces/model.c")" = 5 ]; then
  pass constants_file_written
else
  fail constants_file_written "constants.bin of $size bytes; $(grep constant_ "$TMP/whole/model.c")"
fi

if losses whole && losses pieces; then
  paste "$TMP/whole.loss" "$TMP/pieces.loss" >"$TMP/both.loss"
  if worst=$(awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / $2; if (r > w) w = r }
                  END { printf "%.2g", w; exit !(NR == 4 && w <= 1e-5) }' "$TMP/both.loss"); then
    pass "same_losses_as_small_constants (within $worst relative)"
  else
    fail same_losses_as_small_constants "losses differ by $worst: $(head -3 "$TMP/both.loss")"
  fi
else
  fail same_losses_as_small_constants \
    "$(tail -c 500 "$TMP/whole.log"; tail -c 500 "$TMP/pieces.log")"
fi

if $PLAIT build $MODEL --double $LAYOUT -o "$TMP/double" >"$TMP/build.log" 2>&1 &&
   "$TMP/double/train" --data "$TMP/text.bin" --gradcheck 40 >"$TMP/gradcheck.out" 2>&1; then
  errors=$(grep -o 'largest relative error [^ ;]*' "$TMP/gradcheck.out" | tr '\n' ' ')
  pass "gradcheck_large_constant ($errors)"
else
  fail gradcheck_large_constant "$(tail -c 600 "$TMP/build.log"; tail -c 600 "$TMP/gradcheck.out")"
fi

# refused NAME PATTERN: DIR whole's program, its constants.bin changed by what ran before, refuses
# to start in one line with status 1; the file is restored afterwards
cp "$TMP/whole/constants.bin" "$TMP/good.bin"
refused() {
  expect_error "$1" "^plait: $TMP/whole/constants.bin: $2; rebuild the program with plait build\$" \
    "$TMP/whole/train" $TRAIN
  [ "$status" = 1 ] || fail "$1_status" "exit status $status, not 1"
  cp "$TMP/good.bin" "$TMP/whole/constants.bin"
}
rm "$TMP/whole/constants.bin"
refused missing_constants_file \
  "cannot be read \(No such file or directory\): it holds the program's larger constants"
head -c 1000000 "$TMP/good.bin" >"$TMP/whole/constants.bin"
refused short_constants_file "short: it ends inside constant 'scale'"
printf 'X' | dd of="$TMP/whole/constants.bin" bs=1 seek=2000000 conv=notrunc 2>/dev/null
refused damaged_constants_file "damaged: the values of constant 'scale' fail their checksum"
printf 'PLAITXXX' | dd of="$TMP/whole/constants.bin" bs=1 conv=notrunc 2>/dev/null
refused not_a_constants_file "not a constants file of plait's \(its first bytes differ\)"
printf '\0\0\0\0\0\0\0\0' >>"$TMP/whole/constants.bin"
refused trailing_constants_file "damaged: bytes follow its last constant"
if losses whole; then pass restored_constants_file
else fail restored_constants_file "$(tail -c 600 "$TMP/whole.log")"; fi

# a rebuild of the folder without a large constant removes the constants file of the earlier build
if $PLAIT build $MODEL --set pieces=5 $LAYOUT -o "$TMP/whole" >"$TMP/build.log" 2>&1 &&
   [ ! -e "$TMP/whole/constants.bin" ]; then
  pass rebuild_removes_constants_file
else
  fail rebuild_removes_constants_file "$(tail -c 600 "$TMP/build.log"; ls "$TMP/whole")"
fi
