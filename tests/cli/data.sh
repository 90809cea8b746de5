# data.sh: `plait data`: text to byte-level token files (header, tokens, the validation split) and its errors.
. "$(dirname "$0")/lib.sh"

# words FILE OD-ARGS...: od's numbers, one per line.
words() { f=$1; shift; od -An -v "$@" "$f" | tr -s ' ' '\n' | sed '/^$/d'; }

# check_token_file NAME FILE TEXT: FILE's header is (20240520, 1, count) and its tokens are TEXT's bytes.
check_token_file() {
  name=$1 file=$2 text=$3
  count=$(wc -c <"$text" | tr -d ' ')
  header=$(words "$file" -tu4 -N12 | tr '\n' ' ')
  size=$(wc -c <"$file" | tr -d ' ')
  words "$file" -tu2 -j1024 >"$TMP/tokens"
  words "$text" -tu1 >"$TMP/bytes"
  rest=$(words "$file" -tu4 -j12 -N1012 | sort -u | tr '\n' ' ')
  if [ "$header" != "20240520 1 $count " ]; then fail "$name" "header '$header', expected '20240520 1 $count'"
  elif [ "$rest" != "0 " ]; then fail "$name" "the rest of the header is not zero: $rest"
  elif [ "$size" != $((1024 + 2 * count)) ]; then fail "$name" "size $size for $count tokens"
  elif ! cmp -s "$TMP/tokens" "$TMP/bytes"; then fail "$name" "tokens are not the text's bytes"
  else pass "$name"; fi
}

printf 'The quick brown fox jumps over the lazy dog.\n' >"$TMP/a.txt"
i=0; while [ $i -lt 20 ]; do printf 'line %d: caf\303\251 \001\377 tabs\tand more\n' $i; i=$((i + 1)); done >"$TMP/b.txt"
cat "$TMP/a.txt" "$TMP/b.txt" >"$TMP/ab.txt"
total=$(wc -c <"$TMP/ab.txt" | tr -d ' ')

# Everything in one file with --val-fraction 0: no validation file.
expect_ok "all tokens, no split" "$PLAIT" data --bytes "$TMP/a.txt" "$TMP/b.txt" -o "$TMP/all.bin" --val-fraction 0
check_token_file "round trip of two files" "$TMP/all.bin" "$TMP/ab.txt"
if [ -e "$TMP/all.val.bin" ]; then fail "no validation file at fraction 0" "all.val.bin exists"; else pass "no validation file at fraction 0"; fi

# The default split: the last 10% (rounded) in OUT.val.bin, the rest in OUT.bin, no temporary files left.
expect_ok "default split" "$PLAIT" data --bytes "$TMP/a.txt" "$TMP/b.txt" -o "$TMP/split.bin"
val=$(awk -v n="$total" 'BEGIN { printf "%d", n * 0.1 + 0.5 }')
head -c $((total - val)) "$TMP/ab.txt" >"$TMP/train.txt"
tail -c "$val" "$TMP/ab.txt" >"$TMP/val.txt"
check_token_file "training part" "$TMP/split.bin" "$TMP/train.txt"
check_token_file "validation part" "$TMP/split.val.bin" "$TMP/val.txt"
if ls "$TMP" | grep -q tmp; then fail "no temporary files" "$(ls "$TMP")"; else pass "no temporary files"; fi

# A quarter, and an output name without .bin.
expect_ok "quarter split" "$PLAIT" data --val-fraction 0.25 -o "$TMP/tokens" --bytes "$TMP/ab.txt"
val=$(awk -v n="$total" 'BEGIN { printf "%d", n * 0.25 + 0.5 }')
tail -c "$val" "$TMP/ab.txt" >"$TMP/val.txt"
check_token_file "quarter validation part" "$TMP/tokens.val.bin" "$TMP/val.txt"

# A rerun replaces the old files.
expect_ok "rerun" "$PLAIT" data --bytes "$TMP/a.txt" -o "$TMP/split.bin" --val-fraction 0
check_token_file "rerun replaces the file" "$TMP/split.bin" "$TMP/a.txt"

# Errors: one line each, nothing written.
: >"$TMP/empty.txt"
mkdir "$TMP/folder"
expect_error "no --bytes" "data needs input files: plait data --bytes" "$PLAIT" data -o "$TMP/x.bin"
expect_error "--bytes without files" "--bytes takes one or more text files" "$PLAIT" data --bytes -o "$TMP/x.bin"
expect_error "no -o" "data needs an output file: add -o OUT.bin" "$PLAIT" data --bytes "$TMP/a.txt"
expect_error "-o without a value" "-o takes the output file" "$PLAIT" data --bytes "$TMP/a.txt" -o
expect_error "missing input" "cannot read '.*nothere.txt' \(No such file or directory\); check the path" \
  "$PLAIT" data --bytes "$TMP/a.txt" "$TMP/nothere.txt" -o "$TMP/x.bin"
expect_error "input is a folder" "'.*folder' is not a regular file; give text files after --bytes" \
  "$PLAIT" data --bytes "$TMP/folder" -o "$TMP/x.bin"
expect_error "empty input" "the input holds no bytes; give text files that are not empty" \
  "$PLAIT" data --bytes "$TMP/empty.txt" -o "$TMP/x.bin"
expect_error "unwritable output" "cannot write .*nodir/x.bin: No such file or directory; check that its folder exists" \
  "$PLAIT" data --bytes "$TMP/a.txt" -o "$TMP/nodir/x.bin"
expect_error "output is a folder" "-o .*folder is a directory; give the path of a regular file" \
  "$PLAIT" data --bytes "$TMP/a.txt" -o "$TMP/folder" --val-fraction 0
expect_error "bad fraction" "--val-fraction takes a number from 0 up to \(not including\) 1.*not '1.5'" \
  "$PLAIT" data --bytes "$TMP/a.txt" -o "$TMP/x.bin" --val-fraction 1.5
expect_error "fraction not a number" "--val-fraction takes a number.*not 'lots'" \
  "$PLAIT" data --bytes "$TMP/a.txt" -o "$TMP/x.bin" --val-fraction lots
expect_error "split leaves a part empty" "45 bytes split with --val-fraction 0.001 leave a part empty" \
  "$PLAIT" data --bytes "$TMP/a.txt" -o "$TMP/x.bin" --val-fraction 0.001
expect_error "unknown flag" "unknown flag --tokens; see plait help" "$PLAIT" data --tokens "$TMP/a.txt" -o "$TMP/x.bin"
expect_error "stray argument" "unexpected argument 'extra'; input files follow --bytes" \
  "$PLAIT" data -o "$TMP/x.bin" extra
if ls "$TMP" | grep -q -e '^x' -e tmp -e 'folder.val'; then fail "failures leave nothing behind" "$(ls "$TMP")"
else pass "failures leave nothing behind"; fi
