# train_errors.sh: a generated program meets bad input with one line naming the cause, and exit 1:
# token files, checkpoints, a loss that blows up (the last good checkpoint stays intact), a bad save
# directory, bad flags.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

cat README.md > "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null &&
  $PLAIT build models/tiny.lua --set layers=1 hidden=32 heads=2 ffn=64 seq=16 -o "$TMP/tiny" >"$TMP/build.log" 2>&1 ||
  { fail build "$(tail -c 600 "$TMP/build.log")"; exit 0; }
T=$TMP/tiny/train

expect_error missing_data_flag "--data FILE is missing" $T --steps 1
expect_error missing_token_file "nope.bin" $T --data "$TMP/nope.bin" --steps 1
head -c 100 "$TMP/text.bin" > "$TMP/short.bin"
expect_error short_token_file "short.bin" $T --data "$TMP/short.bin" --steps 1
printf 'not a token file at all, but long enough to hold a header of 1024 bytes...' > "$TMP/bad.bin"
head -c 2000 /dev/zero >> "$TMP/bad.bin"
expect_error malformed_token_file "bad.bin" $T --data "$TMP/bad.bin" --steps 1
# a token id beyond the vocabulary: the 256-byte vocabulary of tiny against a model of vocab 64
$PLAIT build models/tiny.lua --set layers=1 hidden=32 heads=2 ffn=64 seq=16 vocab=64 -o "$TMP/small_vocab" >/dev/null 2>&1
expect_error token_beyond_vocab "token" "$TMP/small_vocab/train" --data "$TMP/text.bin" --steps 1
expect_error unknown_train_flag "unknown flag --stepz" $T --data "$TMP/text.bin" --stepz 3
expect_error bad_train_number "--lr takes a number, not 'fast'" $T --data "$TMP/text.bin" --lr fast

# checkpoints
expect_error missing_checkpoint "nowhere" $T --data "$TMP/text.bin" --steps 1 --load "$TMP/nowhere"
$T --data "$TMP/text.bin" --steps 2 --save "$TMP/good" >/dev/null 2>&1 || fail save "could not save a checkpoint"
mkdir -p "$TMP/cut"
head -c 5000 "$TMP/good/model.safetensors" > "$TMP/cut/model.safetensors"
expect_error truncated_checkpoint "truncated|short|size" $T --data "$TMP/text.bin" --steps 3 --load "$TMP/cut"
$PLAIT build models/gpt.lua --set layers=1 hidden=32 heads=2 ffn=64 seq=16 vocab=256 -o "$TMP/other" >/dev/null 2>&1
expect_error checkpoint_of_another_model "holds model 'tiny', not 'gpt'" "$TMP/other/train" --data "$TMP/text.bin" --steps 3 --load "$TMP/good"
$PLAIT build models/tiny.lua --set layers=1 hidden=64 heads=2 ffn=64 seq=16 -o "$TMP/wider" >/dev/null 2>&1
expect_error checkpoint_of_another_shape "shape" "$TMP/wider/train" --data "$TMP/text.bin" --steps 3 --load "$TMP/good"

# a loss that blows up: the run stops naming the step; the checkpoint saved before stays as it was
$T --data "$TMP/text.bin" --steps 1 --save "$TMP/last" >/dev/null 2>&1
before=$(cksum < "$TMP/last/model.safetensors")
expect_error loss_blows_up "step [0-9]+: the (loss|gradient norm) is -?(nan|inf)" \
  $T --data "$TMP/text.bin" --steps 50 --lr 1e30 --load "$TMP/last" --save "$TMP/last" --save-every 100
after=$(cksum < "$TMP/last/model.safetensors")
[ "$before" = "$after" ] && pass last_checkpoint_intact || fail last_checkpoint_intact "the checkpoint changed"

# a save directory that cannot be made
touch "$TMP/a_file"
expect_error unwritable_save_dir "--save .*a_file/ckpt: cannot create the directory" $T --data "$TMP/text.bin" --steps 1 --save "$TMP/a_file/ckpt"
