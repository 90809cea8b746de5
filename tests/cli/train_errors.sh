# train_errors.sh: a generated program meets bad input with one line naming the cause, and exit 1:
# token files, checkpoints, a resumed run's seed or schedule given otherwise than the checkpoint's, --eval
# files, a loss that blows up (the last good checkpoint stays intact), a bad save directory, bad flags.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

fixed_text "$TMP/text.txt"
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
expect_error checkpoint_of_another_width "saved with hidden = 32, this model has hidden = 64; .*--set hidden=32" \
  "$TMP/wider/train" --data "$TMP/text.bin" --steps 3 --load "$TMP/good"
# the sequence length is not compared (the same weights read any length), but learned positions hold it
$PLAIT build models/tiny.lua --set layers=1 hidden=32 heads=2 ffn=64 seq=32 -o "$TMP/longer" >/dev/null 2>&1
expect_error checkpoint_of_another_shape "tensor 'wpe' has shape \\[16, 32\\] but the model expects \\[32, 32\\]" \
  "$TMP/longer/train" --data "$TMP/text.bin" --steps 3 --load "$TMP/good"
# another depth, either way: the layer counts are named, not one missing tensor
$PLAIT build models/tiny.lua --set layers=2 hidden=32 heads=2 ffn=64 seq=16 -o "$TMP/deeper" >/dev/null 2>&1
"$TMP/deeper/train" --data "$TMP/text.bin" --steps 1 --save "$TMP/deep" >/dev/null 2>&1 || fail save "could not save a 2-layer checkpoint"
expect_error checkpoint_of_more_layers "holds a 2-layer 'tiny', this model is a 1-layer one" \
  $T --data "$TMP/text.bin" --steps 3 --load "$TMP/deep"
expect_error checkpoint_of_fewer_layers "holds a 1-layer 'tiny', this model is a 2-layer one" \
  "$TMP/deeper/train" --data "$TMP/text.bin" --steps 3 --load "$TMP/good"
# the same shapes under another configuration: heads 4 against heads 2 (head size 8 against 16)
$PLAIT build models/tiny.lua --set layers=1 hidden=32 heads=4 ffn=64 seq=16 -o "$TMP/heads4" >/dev/null 2>&1
expect_error checkpoint_of_other_heads "saved with heads = 2, this model has heads = 4; .*--set heads=2" \
  "$TMP/heads4/train" --data "$TMP/text.bin" --steps 3 --load "$TMP/good"
# the same configuration, another set of tensors (an untied output matrix chosen in the model file)
$PLAIT build tests/cli/models/tiny_untied.lua --set layers=1 hidden=32 heads=2 ffn=64 seq=16 -o "$TMP/untied" >/dev/null 2>&1
"$TMP/untied/train" --data "$TMP/text.bin" --steps 1 --save "$TMP/untied_ckpt" >/dev/null 2>&1 || fail save "could not save an untied checkpoint"
expect_error checkpoint_with_a_tensor_too_many "holds tensor 'lm_head.weight', which this model does not have" \
  $T --data "$TMP/text.bin" --steps 3 --load "$TMP/untied_ckpt"
expect_error checkpoint_without_a_tensor "has no tensor 'lm_head.weight', which this model has" \
  "$TMP/untied/train" --data "$TMP/text.bin" --steps 3 --load "$TMP/good"
# nothing of the layout is compared: the one-rank 2-layer checkpoint loads under every flag of another
$PLAIT build models/tiny.lua --set layers=2 hidden=32 heads=2 ffn=64 seq=16 --tp 2 --pp 2 --mbs 2 --gbs 8 \
  --schedule gpipe --sequence-parallel -o "$TMP/laid_out" >/dev/null 2>&1
expect_ok checkpoint_across_layout_flags "$TMP/laid_out/train" --data "$TMP/text.bin" --steps 2 --decay-steps 1 \
  --load "$TMP/deep"
# dropout does not change what the weights compute: a checkpoint loads across it
$PLAIT build models/tiny.lua --set layers=1 hidden=32 heads=2 ffn=64 seq=16 dropout=0.1 -o "$TMP/dropout" >/dev/null 2>&1
expect_ok checkpoint_across_dropout "$TMP/dropout/train" --data "$TMP/text.bin" --steps 3 --decay-steps 2 \
  --load "$TMP/good"

# resuming holds the command line's seed and schedule against the checkpoint's (saved at step 2 of 2 with
# seed 1234, lr 0.001, no warm-up, weight decay 0.01): each flag given otherwise stops the run, naming both
# values and both ways on; --override-schedule lets each through; the same values pass
G="$T --data $TMP/text.bin --load $TMP/good"
expect_error resume_other_seed "good/model.safetensors: the checkpoint's seed is 1234, --seed 5 would change that; \
give --seed 1234 to continue as saved, or --override-schedule to go on with --seed 5$" $G --steps 2 --seed 5
expect_error resume_other_lr "the checkpoint's learning rate peaks at 0.001, --lr 0.003 would change that; give --lr 0.001 \
to continue as saved, or --override-schedule to go on with --lr 0.003$" $G --steps 2 --lr 3e-3
expect_error resume_other_steps "the checkpoint's learning rate decays over 2 steps, --steps 4 would change that; give \
--decay-steps 2 to continue as saved, or --override-schedule to go on with --steps 4$" $G --steps 4
expect_error resume_other_decay_steps "decays over 2 steps, --decay-steps 3 would change that; give --decay-steps 2 " \
  $G --steps 4 --decay-steps 3
expect_error resume_other_warmup "learning rate warms up over 0 steps, --warmup 1 would change that; give --warmup 0 " \
  $G --steps 2 --warmup 1
expect_error resume_other_weight_decay "weight decay is 0.01, --weight-decay 0.1 would change that; give --weight-decay 0.01 " \
  $G --steps 2 --weight-decay 0.1
for flags in "--steps 3 --seed 5" "--steps 3 --lr 3e-3" "--steps 4" "--steps 4 --decay-steps 3" "--steps 3 --warmup 1" \
             "--steps 3 --weight-decay 0.1"; do
  # shellcheck disable=SC2086
  name=$(echo "$flags" | sed 's/--steps [0-9] *//; s/^--//; s/ .*//; s/^$/steps/' | tr - _)
  expect_ok "override_schedule_$name" $G $flags --override-schedule
done
expect_ok resume_same_schedule $G --steps 3 --decay-steps 2 --seed 1234 --lr 0.001 --warmup 0 --weight-decay 0.01
# with --override-schedule the command line's values count, defaults included: lr 0.01 decaying over 3
# steps is 0.00325 at step 3 (the checkpoint's would be its floor, 1e-4)
$G --steps 3 --lr 0.01 --override-schedule >"$TMP/override.out" 2>&1
grep -q '^step 3 | loss [0-9.]* | lr 3.250e-03 ' "$TMP/override.out" && pass override_schedule_uses_the_command_line ||
  fail override_schedule_uses_the_command_line "$(grep '^step 3' "$TMP/override.out")"
expect_error init_and_load "--init .*good and --load .*good both name a checkpoint: --init starts from its weights alone, \
--load resumes its run; give one of them" $G --init "$TMP/good" --steps 3
expect_error override_without_load "--override-schedule .* give it with --load DIR" \
  $T --data "$TMP/text.bin" --steps 1 --override-schedule

# --eval: a missing, malformed, short or out-of-vocabulary file; training without --data
expect_error eval_missing_file "nope.bin: cannot open it \\(No such file or directory\\); give the path of a token file" $T --eval "$TMP/nope.bin"
expect_error eval_malformed_file "bad.bin: bad magic" $T --eval "$TMP/bad.bin"
# a path of 2,400 characters: the line keeps its cause and its fix whole
long=$TMP$(printf '/%0200d' 1 2 3 4 5 6 7 8 9 10 11 12)
expect_error data_long_path_whole "$long/x.bin: cannot open it \\(No such file or directory\\); give the path of a token file made with plait data$" \
  $T --data "$long/x.bin" --steps 1
expect_error save_long_path_whole "^plait: --save $long/ck.*; give a path in a folder you can write$" \
  $T --data "$TMP/text.bin" --steps 1 --save "$long/ck"
python3 -c "import struct, sys; open(sys.argv[1], 'wb').write(struct.pack('<256iH', 20240520, 1, 1, *[0] * 253, 65))" \
  "$TMP/one.bin"
expect_error eval_one_token "one.bin: 1 tokens, fewer than the 2 --eval needs \(a token and the next, to predict it\); \
use a longer file" $T --eval "$TMP/one.bin"
expect_error eval_token_beyond_vocab "token [0-9]+ at position [0-9]+ is not below the model's vocabulary size 64" \
  "$TMP/small_vocab/train" --eval "$TMP/text.bin"
expect_error eval_training_without_data "--data FILE is missing" $T --eval "$TMP/text.bin" --steps 2

# a loss that blows up: the run stops naming the step; the checkpoint saved before stays as it was
$T --data "$TMP/text.bin" --steps 1 --save "$TMP/last" >/dev/null 2>&1
before=$(cksum < "$TMP/last/model.safetensors")
expect_error loss_blows_up "step [0-9]+: the (loss|gradient norm) is -?(nan|inf)" \
  $T --data "$TMP/text.bin" --steps 50 --lr 1e30 --load "$TMP/last" --override-schedule --save "$TMP/last" --save-every 100
after=$(cksum < "$TMP/last/model.safetensors")
[ "$before" = "$after" ] && pass last_checkpoint_intact || fail last_checkpoint_intact "the checkpoint changed"

# a save directory that cannot be made
touch "$TMP/a_file"
expect_error unwritable_save_dir "--save .*a_file/ckpt: cannot create the directory" $T --data "$TMP/text.bin" --steps 1 --save "$TMP/a_file/ckpt"
