# init_eval.sh: starting from weights (--init) and evaluation runs (--eval). --init reads the weights alone
# of a weights-only checkpoint or of a full one: Adam starts from zero at step 1 with the command line's
# seed and schedule, and (1,1,1) and tp2·pp2·dp2 train alike from it. --eval gives the mean loss over
# every token of a file but the first: the same under every layout and under mpirun, the validation loss
# over the same windows, and a shorter sequence's loss where the last window is cut short; masked-LM
# programs evaluate their masked positions. --load refuses weights alone, naming --init, and does not
# compare what a checkpoint saved before the schedule was recorded lacks.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# a fixed English text (Debian's base-files), so that the project's own edits never change the data
cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 /usr/share/common-licenses/MPL-2.0 > "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null || { fail data "plait data failed"; exit 0; }
VAL=$TMP/text.val.bin

# safetensors and token files with the standard library alone
cat > "$TMP/files.py" <<'PY'
import json, struct, sys

def read(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    return head.pop("__metadata__"), head, raw[8 + n:]

def write(path, meta, head, data):
    out, blobs, at = {"__metadata__": meta}, [], 0
    for name in sorted(head):
        b, e = head[name]["data_offsets"]
        out[name] = dict(head[name], data_offsets=[at, at + e - b])
        blobs.append(data[b:e])
        at += e - b
    text = json.dumps(out).encode()
    text += b" " * (-(8 + len(text)) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + b"".join(blobs))

def floats(head, data, name):
    b, e = head[name]["data_offsets"]
    return struct.unpack("<%df" % ((e - b) // 4), data[b:e])

RUN = ("step", "seed", "lr", "warmup", "decay_steps", "weight_decay")
command, args = sys.argv[1], sys.argv[2:]
if command == "weights":  # SRC DST [drop-contents]: the weights alone, as plait import writes them
    meta, head, data = read(args[0])
    meta = {k: v for k, v in meta.items() if k not in RUN}
    meta["contents"] = "weights"
    if len(args) > 2: del meta["contents"]
    write(args[1], meta, {k: v for k, v in head.items() if not k.startswith("adam.")}, data)
elif command == "older":  # SRC DST: as saved before the schedule was recorded (step and seed kept)
    meta, head, data = read(args[0])
    write(args[1], {k: v for k, v in meta.items() if k not in RUN[2:] + ("contents",)}, head, data)
elif command == "without":  # SRC DST NAME: one weight tensor fewer
    meta, head, data = read(args[0])
    del head[args[2]]
    write(args[1], meta, head, data)
elif command == "adam_step":  # BEFORE AFTER LR: the step, the median and largest move of the weights that moved, over lr
    _, before, b_data = read(args[0])
    meta, after, a_data = read(args[1])
    lr, moves = float(args[2]), []
    for name in before:
        if name.startswith("adam."): continue
        moves += [abs(y - x) / lr for x, y in zip(floats(before, b_data, name), floats(after, a_data, name)) if x != y]
    moves.sort()
    print(meta["step"], "%.4f %.4f" % (moves[len(moves) // 2], moves[-1]) if moves else "0 0")
elif command == "cut":  # SRC DST START N: a token file of N tokens from START
    raw = open(args[0], "rb").read()
    header = list(struct.unpack("<256i", raw[:1024]))
    start, n = int(args[2]), int(args[3])
    header[2] = n
    open(args[1], "wb").write(struct.pack("<256i", *header) + raw[1024 + 2 * start:1024 + 2 * (start + n)])
elif command == "count":  # FILE: its tokens
    print(struct.unpack("<3i", open(args[0], "rb").read(12))[2])
PY
files() { python3 "$TMP/files.py" "$@"; }

# build NAME MODEL...: builds $TMP/NAME/train
build() {
  name=$1; shift
  $PLAIT build "$@" -o "$TMP/$name" >"$TMP/$name.log" 2>&1 || fail "build_$name" "$(tail -c 400 "$TMP/$name.log")"
}
TINY="models/tiny.lua --set layers=4 hidden=32 heads=2 ffn=64 seq=16 --mbs 2 --gbs 8"
# shellcheck disable=SC2086
{ build one $TINY; build tpd $TINY --tp 2 --pp 2 --dp 2; build vpp $TINY --pp 2 --vpp 2; }

# run NAME BUILD FLAGS...: runs $TMP/BUILD/train (under $LAUNCH when set) with --log-json $TMP/NAME.json;
# each step's loss in $TMP/NAME.loss, its gradient norm in $TMP/NAME.grad_norm, its learning rate in
# $TMP/NAME.lr; the evaluation's loss in $TMP/NAME.eval_loss and its token count in $TMP/NAME.tokens
LAUNCH=
run() {
  run_name=$1 run_build=$2; shift 2
  rm -f "$TMP/$run_name.json"
  # shellcheck disable=SC2086
  timeout 120 $LAUNCH "$TMP/$run_build/train" "$@" --log-json "$TMP/$run_name.json" >"$TMP/$run_name.out" 2>&1 ||
    { fail "$run_name" "$(tail -c 400 "$TMP/$run_name.out")"; return 1; }
  for key in loss grad_norm lr; do
    sed -n "s/^{\"step\": [0-9]*, .*\"$key\": \\([^,}]*\\).*/\\1/p" "$TMP/$run_name.json" >"$TMP/$run_name.$key"
  done
  sed -n 's/^{"eval": .*, "loss": \([^,]*\), .*/\1/p' "$TMP/$run_name.json" >"$TMP/$run_name.eval_loss"
  sed -n 's/^{"eval": .*, "tokens": \([0-9]*\), .*/\1/p' "$TMP/$run_name.json" >"$TMP/$run_name.tokens"
}
said() { tr '\n' ' ' <"$TMP/$1" | sed 's/ $//'; } # the numbers of $TMP/FILE on one line

# near A B TOLERANCE: $TMP/A and $TMP/B hold as many numbers (at least one), each of B's within TOLERANCE
# relative of A's; prints the largest relative difference
near() {
  paste "$TMP/$1" "$TMP/$2" | awk -v tol="$3" '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1)
    if (r > worst) worst = r; if (NF != 2) bad = 1 } END { printf "%.2g", worst; exit !(NR > 0 && !bad && worst <= tol) }'
}

# d0: the initial weights of seed 7; d4: after 4 steps (Adam's state, seed 7, lr 3e-3); w0, w4 their weights
T=$TMP/one/train
mkdir -p "$TMP/w0" "$TMP/w4"
$T --data "$TMP/text.bin" --steps 0 --seed 7 --save "$TMP/d0" >/dev/null 2>&1 &&
  $T --data "$TMP/text.bin" --steps 4 --seed 7 --lr 3e-3 --save "$TMP/d4" >/dev/null 2>&1 &&
  files weights "$TMP/d0/model.safetensors" "$TMP/w0/model.safetensors" &&
  files weights "$TMP/d4/model.safetensors" "$TMP/w4/model.safetensors" || { fail checkpoints "could not make them"; exit 0; }

# --init from initial weights is a fresh run: every step's loss and gradient norm to the last bit
TRAIN="--data $TMP/text.bin --steps 5"
# shellcheck disable=SC2086
if run fresh one $TRAIN --seed 7 --lr 3e-3 && run from_w0 one $TRAIN --seed 7 --lr 3e-3 --init "$TMP/w0"; then
  paste "$TMP/fresh.loss" "$TMP/fresh.grad_norm" >"$TMP/a"
  paste "$TMP/from_w0.loss" "$TMP/from_w0.grad_norm" >"$TMP/b"
  if [ "$(wc -l <"$TMP/a")" = 5 ] && cmp -s "$TMP/a" "$TMP/b"; then pass "init_is_a_fresh_run (5 steps to the last bit)"
  else fail init_is_a_fresh_run "$(diff "$TMP/a" "$TMP/b" | head -n 4 | tr '\n' ' ')"; fi
fi

# --init from a full checkpoint (step 4, Adam's state, seed 7) reads its weights alone: the run equals the
# one from its weights-only copy, to the last bit; and step 1 is Adam's first: m and v from zero, bias
# corrected at t = 1, so a weight moves by lr·|g|/(|g| + ε): by lr but where the gradient is near ε,
# never by more. The same check on --load's step, which reads m and v, fails, as it must.
# shellcheck disable=SC2086
if run from_d4 one $TRAIN --seed 9 --init "$TMP/d4" && run from_w4 one $TRAIN --seed 9 --init "$TMP/w4"; then
  if [ "$(wc -l <"$TMP/from_d4.loss")" = 5 ] && cmp -s "$TMP/from_d4.loss" "$TMP/from_w4.loss" &&
     cmp -s "$TMP/from_d4.grad_norm" "$TMP/from_w4.grad_norm"; then
    pass "init_reads_weights_alone (a full checkpoint and its weights: 5 steps to the last bit)"
  else
    fail init_reads_weights_alone "losses $(said from_d4.loss) against $(said from_w4.loss)"
  fi
fi
FIRST="--data $TMP/text.bin --lr 1e-3 --weight-decay 0"
# shellcheck disable=SC2086
if $T $FIRST --steps 1 --init "$TMP/d4" --save "$TMP/e1" >"$TMP/e1.out" 2>&1 &&
   $T $FIRST --steps 5 --load "$TMP/d4" --override-schedule --save "$TMP/l5" >/dev/null 2>&1; then
  init=$(files adam_step "$TMP/d4/model.safetensors" "$TMP/e1/model.safetensors" 1e-3)
  load=$(files adam_step "$TMP/d4/model.safetensors" "$TMP/l5/model.safetensors" 1e-3)
  if [ "$(grep -c '^step ' "$TMP/e1.out")" = 1 ] && grep -q '^step 1 |' "$TMP/e1.out" &&
     echo "$init $load" | awk '{ exit !($1 == 1 && $2 > 0.99 && $3 <= 1.0001 && $4 == 5 && ($5 < 0.99 || $5 > 1.01)) }'; then
    pass "init_starts_adam_at_zero (median and largest move over lr: ${init#* }; after --load's step: ${load#* })"
  else
    fail init_starts_adam_at_zero "--init: step, median and largest move over lr '$init'; --load: '$load'"
  fi
else
  fail init_starts_adam_at_zero "a run failed: $(tail -c 300 "$TMP/e1.out")"
fi

# the seed and the schedule are the command line's: seed 7 (the checkpoint's) draws other batches than
# seed 9 at every step; --lr 2e-3 --warmup 2 rises 0, 1e-3, 2e-3 (the checkpoint's schedule: 3e-3 at once)
# shellcheck disable=SC2086
if run seed7 one $TRAIN --seed 7 --init "$TMP/d4"; then
  same=$(paste "$TMP/seed7.loss" "$TMP/from_d4.loss" | awk '$1 == $2' | wc -l)
  [ "$(wc -l <"$TMP/seed7.loss")" = 5 ] && [ "$same" = 0 ] && pass "init_seed_from_command_line (no step alike)" ||
    fail init_seed_from_command_line "$same of 5 steps have the loss of seed 9"
fi
if run warm one --data "$TMP/text.bin" --steps 3 --lr 2e-3 --warmup 2 --init "$TMP/d4"; then
  [ "$(said warm.lr)" = "0 0.001 0.002" ] && pass "init_schedule_from_command_line (lr $(said warm.lr))" ||
    fail init_schedule_from_command_line "learning rates $(said warm.lr), not 0 0.001 0.002"
fi

# (1,1,1) and tp2·pp2·dp2 train alike from either checkpoint: every step within 1e-5 (the layout tolerance)
for c in d4 w4; do
  # shellcheck disable=SC2086
  run "tpd_$c" tpd $TRAIN --seed 9 --init "$TMP/$c" || continue
  if worst=$(near "from_$c.loss" "tpd_$c.loss" 1e-5) && [ "$(wc -l <"$TMP/tpd_$c.loss")" = 5 ]; then
    pass "init_${c}_across_layouts (tp2·pp2·dp2 losses within $worst of one rank's)"
  else
    fail "init_${c}_across_layouts" "losses differ by $worst: $(said "from_$c.loss") against $(said "tpd_$c.loss")"
  fi
done

# --eval: tokens = count - 1 (the file is not a whole number of windows of 16), the same loss from the
# weights alone as from the full checkpoint, and within 1e-6 under tp2·pp2·dp2, pp2·vpp2 and pp2·vpp2 as
# two processes under mpirun
count=$(files count "$VAL")
if run eval_one one --eval "$VAL" --init "$TMP/w4" && run eval_full one --eval "$VAL" --load "$TMP/d4"; then
  tokens=$(said eval_one.tokens)
  [ "$tokens" = $((count - 1)) ] && [ $(((count - 1) % 16)) != 0 ] && cmp -s "$TMP/eval_one.eval_loss" "$TMP/eval_full.eval_loss" &&
    pass "eval_counts_every_token_but_the_first ($count tokens, $tokens predictions)" ||
    fail eval_counts_every_token_but_the_first "$count tokens: $tokens predictions, loss $(said eval_one.eval_loss); from --load $(said eval_full.eval_loss)"
  for layout in tpd vpp vpp_mpi; do
    [ $layout = vpp_mpi ] && LAUNCH="mpirun -q -np 2 --oversubscribe"
    run "eval_$layout" "${layout%_mpi}" --eval "$VAL" --init "$TMP/w4"; ran=$?
    LAUNCH=
    [ $ran = 0 ] || continue
    worst=$(near eval_one.eval_loss "eval_$layout.eval_loss" 1e-6) && [ "$(said "eval_$layout.tokens")" = "$tokens" ] &&
      pass "eval_across_layouts_$layout (loss within $worst of one rank's, $tokens tokens)" ||
      fail "eval_across_layouts_$layout" "loss $(said "eval_$layout.eval_loss"), $(said "eval_$layout.tokens") tokens; one rank's $(said eval_one.eval_loss)"
  done
fi

# against the validation loss: a file of 16·16 + 1 tokens is 16 windows, which two validation batches of
# 8 read as --eval does; trained one step, the run prints both for the same weights. A wrong mean (over
# 257 tokens, say) or a shifted window would part them by far more than 1e-6.
files cut "$VAL" "$TMP/v257.bin" 0 257
for layout in one tpd; do
  run "val_$layout" $layout --data "$TMP/text.bin" --steps 1 --init "$TMP/w4" --eval-every 1 --eval-batches 2 \
    --val "$TMP/v257.bin" --eval "$TMP/v257.bin" || continue
  sed -n 's/^{"step": 1, "val_loss": \([^}]*\)}$/\1/p' "$TMP/val_$layout.json" >"$TMP/val_$layout.val"
  worst=$(near "val_$layout.val" "val_$layout.eval_loss" 1e-6) && [ "$(said "val_$layout.tokens")" = 256 ] &&
    pass "eval_is_the_validation_loss_$layout (within $worst; 256 tokens)" ||
    fail "eval_is_the_validation_loss_$layout" "validation $(said "val_$layout.val"), eval $(said "val_$layout.eval_loss")"
done

# a window cut short by the file's end: 9 tokens are one window of 8 predictions under seq 16 (the other 8
# positions have nothing to predict) and one whole window under seq 8. A Llama-style model (rotary
# positions: one checkpoint serves both lengths), trained so that its losses differ from token to token.
LLAMA="models/llama.lua --mbs 2 --gbs 8 --set layers=2 hidden=32 heads=2 kv_heads=2 ffn=48 vocab=256"
# shellcheck disable=SC2086
{ build llama16 $LLAMA seq=16; build llama8 $LLAMA seq=8; }
files cut "$VAL" "$TMP/nine.bin" 100 9
if "$TMP/llama16/train" --data "$TMP/text.bin" --steps 30 --lr 1e-2 --save "$TMP/llama" >/dev/null 2>&1 &&
   run cut16 llama16 --eval "$TMP/nine.bin" --init "$TMP/llama" &&
   run cut8 llama8 --eval "$TMP/nine.bin" --init "$TMP/llama"; then
  worst=$(near cut8.eval_loss cut16.eval_loss 1e-6) && [ "$(said cut16.tokens)" = 8 ] &&
    pass "eval_window_cut_short (seq 16 within $worst of seq 8; 8 tokens)" ||
    fail eval_window_cut_short "seq 16: $(said cut16.eval_loss), $(said cut16.tokens) tokens; seq 8: $(said cut8.eval_loss)"
else
  fail eval_window_cut_short "a run failed"
fi

# masked LM: the masked positions of windows of the file (about 15% of its tokens), the same under
# (1,1,1) and tp2·pp2·dp2
BERT="models/bert.lua --set layers=2 hidden=32 heads=2 ffn=64 seq=16 vocab=256 --mbs 2 --gbs 8"
# shellcheck disable=SC2086
{ build bert $BERT; build bert_tpd $BERT --tp 2 --pp 2 --dp 2; }
if run mlm bert --eval "$VAL" --seed 3 && run mlm_tpd bert_tpd --eval "$VAL" --seed 3; then
  masked=$(said mlm.tokens)
  worst=$(near mlm.eval_loss mlm_tpd.eval_loss 1e-6) && [ "$(said mlm_tpd.tokens)" = "$masked" ] &&
    awk -v m="$masked" -v n="$count" 'BEGIN { exit !(m > 0.13 * n && m < 0.17 * n) }' &&
    pass "eval_masked_lm (tp2·pp2·dp2 within $worst; $masked of $count tokens masked)" ||
    fail eval_masked_lm "one rank: $(said mlm.eval_loss), $masked tokens; tp2·pp2·dp2: $(said mlm_tpd.eval_loss), $(said mlm_tpd.tokens)"
fi

# --load of weights alone says so and names --init: by the metadata, or (no contents key) by the lack of
# Adam's state and of a step
mkdir -p "$TMP/bare" "$TMP/no_wte" "$TMP/older"
files weights "$TMP/d4/model.safetensors" "$TMP/bare/model.safetensors" drop-contents
for c in w4 bare; do
  expect_error "load_refuses_weights_only_$c" \
    "^plait: rank [0-9]+: .*/$c/model.safetensors holds weights only \\(no Adam state or step\\); start from it with --init .*/$c$" \
    "$T" --data "$TMP/text.bin" --steps 5 --load "$TMP/$c"
done
# --init checks the model and the set of weight tensors as --load does
files without "$TMP/w4/model.safetensors" "$TMP/no_wte/model.safetensors" wte
expect_error init_without_a_weight "has no tensor 'wte', which this model has" \
  "$T" --data "$TMP/text.bin" --steps 1 --init "$TMP/no_wte"
expect_error init_of_another_model "holds model 'llama', not 'tiny'" "$T" --data "$TMP/text.bin" --steps 1 --init "$TMP/llama"
# a checkpoint saved before the schedule was recorded: what it lacks is not compared (its seed still is)
files older "$TMP/d4/model.safetensors" "$TMP/older/model.safetensors"
expect_ok load_older_checkpoint "$T" --data "$TMP/text.bin" --steps 6 --lr 1e-3 --warmup 1 --weight-decay 0 --load "$TMP/older"
expect_error load_older_checkpoint_seed "seed is 7, --seed 8 would change that" \
  "$T" --data "$TMP/text.bin" --steps 6 --seed 8 --load "$TMP/older"
