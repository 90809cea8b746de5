# ckpt_integrity.sh: what a checkpoint guarantees. Every tensor carries a checksum, and one flipped bit is
# refused wherever plait reads it (--load, --init, a rank that reads a slice, export, import), while files
# without checksums still load and Python's safetensors reads ours. A save never writes a value that is not
# finite: the old checkpoint stays byte for byte. Every metadata field is checked on load, naming the key.
# Temporaries of killed saves (named with the folder's mark) are never read and are removed by the next save
# once their process has ended; a folder holding anything else is refused and nothing in it removed.
# --save never names a file, plait's source tree or the --init folder.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
ST="python3 tests/tools/st.py"

fixed_text "$TMP/text.txt"
S="layers=1 hidden=32 heads=2 ffn=64 seq=16"
# shellcheck disable=SC2086
{ $PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null &&
  $PLAIT build models/tiny.lua --set $S -o "$TMP/one" >"$TMP/build.log" 2>&1 &&
  $PLAIT build models/tiny.lua --set $S --tp 2 --dp 2 --mbs 2 --gbs 8 -o "$TMP/tp2dp2" >>"$TMP/build.log" 2>&1 &&
  "$TMP/one/train" --data "$TMP/text.bin" --steps 2 --save "$TMP/good" >/dev/null 2>&1; } ||
  { fail setup "$(tail -c 600 "$TMP/build.log")"; exit 0; }
T="$TMP/one/train --data $TMP/text.bin"
GOOD=$TMP/good/model.safetensors
# copy NAME: a copy of the good checkpoint in $TMP/NAME
copy() { rm -rf "${TMP:?}/$1" && cp -r "$TMP/good" "$TMP/$1"; }

# ---- checksums --------------------------------------------------------------------------------------
$ST list "$GOOD" >"$TMP/list"
tensors=$(grep -c -v '^meta ' "$TMP/list") sums=$(grep -c -E '^meta checksum\..*=[0-9a-f]{16}$' "$TMP/list")
[ "$tensors" = "$sums" ] && [ "$sums" -gt 0 ] && pass "every_tensor_has_a_checksum ($sums)" ||
  fail every_tensor_has_a_checksum "$tensors tensors, $sums checksums"
copy flipped && $ST flip "$TMP/flipped/model.safetensors" layers.0.attn.q.weight
damaged="flipped/model.safetensors: tensor 'layers.0.attn.q.weight' does not match its checksum: the file is damaged; use another checkpoint$"
expect_error checksum_on_load "$damaged" $T --steps 3 --decay-steps 2 --load "$TMP/flipped"
expect_error checksum_on_init "$damaged" $T --steps 1 --init "$TMP/flipped"
# q is split over tp: each rank reads only its rows, and the whole tensor is checked all the same
expect_error checksum_on_a_slice "$damaged" "$TMP/tp2dp2/train" --data "$TMP/text.bin" --steps 1 --init "$TMP/flipped"
# shellcheck disable=SC2086
expect_error checksum_on_export "$damaged" $PLAIT export models/tiny.lua "$TMP/flipped" -o "$TMP/flipped.hf" --set $S
copy adam_flipped && $ST flip "$TMP/adam_flipped/model.safetensors" adam.v.wte
expect_error checksum_of_adam_state "tensor 'adam.v.wte' does not match its checksum" \
  $T --steps 3 --decay-steps 2 --load "$TMP/adam_flipped"
expect_ok init_reads_no_adam_state $T --steps 1 --init "$TMP/adam_flipped"
# plait export writes checksums too, and plait import checks them
# shellcheck disable=SC2086
$PLAIT export models/tiny.lua "$TMP/good" -o "$TMP/good.hf" --set $S >/dev/null 2>&1 &&
  $ST flip "$TMP/good.hf/model.safetensors" transformer.h.0.mlp.c_fc.weight
# shellcheck disable=SC2086
expect_error checksum_on_import "good.hf/model.safetensors: tensor 'transformer.h.0.mlp.c_fc.weight' does not match its checksum" \
  $PLAIT import models/tiny.lua "$TMP/good.hf" -o "$TMP/reimported" --set $S
# a checkpoint saved before checksums loads, and goes on as the same one with them
copy unsummed && $ST unsum "$TMP/unsummed/model.safetensors"
if $T --steps 3 --decay-steps 2 --load "$TMP/unsummed" >"$TMP/unsummed.out" 2>&1 &&
   $T --steps 3 --decay-steps 2 --load "$TMP/good" >"$TMP/summed.out" 2>&1 &&
   [ "$(grep '^step 3 ' "$TMP/unsummed.out" | cut -d'|' -f2)" = "$(grep '^step 3 ' "$TMP/summed.out" | cut -d'|' -f2)" ]; then
  pass "checkpoint_without_checksums_loads ($(grep '^step 3 ' "$TMP/unsummed.out" | cut -d'|' -f2))"
else fail checkpoint_without_checksums_loads "$(tail -c 300 "$TMP/unsummed.out")"; fi
if python3 -c "import safetensors.numpy" 2>/dev/null; then
  if out=$(python3 -c "
import sys, safetensors, safetensors.numpy
t = safetensors.numpy.load_file(sys.argv[1])
with safetensors.safe_open(sys.argv[1], 'np') as f: meta = f.metadata()
print(len(t), sum(k.startswith('checksum.') for k in meta))" "$GOOD" 2>&1) && [ "$out" = "$tensors $tensors" ]; then
    pass "python_safetensors_reads_it ($out)"
  else fail python_safetensors_reads_it "$out"; fi
else pass "python_safetensors_reads_it (skipped: no safetensors module)"; fi

# ---- a save writes finite values only ---------------------------------------------------------------
# lr 1e39 (a finite double, infinite once a float) leaves the gradient norm of step 3 finite and turns every
# weight it updates into inf or nan (flags refuse lr nan itself); with ranks as
# threads and under mpirun, the gathered tensors are checked on rank 0 as they go to the file
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for layout in one tp2dp2 mpi; do
  copy "nan_$layout"
  program="$TMP/$layout/train"
  [ $layout = mpi ] && program="timeout 60 mpirun -q --oversubscribe -np 4 $TMP/tp2dp2/train"
  # shellcheck disable=SC2086
  expect_error "nan_not_saved_$layout" "^plait: rank 0: step 3: tensor '[a-z0-9_.]+' holds -?(nan|inf) at element [0-9]+ \
\\([0-9]+ elements are not finite\\); a checkpoint keeps finite values only: not saved, .*nan_$layout/model.safetensors \
stays as it was; try a lower --lr$" \
    $program --data "$TMP/text.bin" --steps 5 --lr 1e39 --override-schedule --load "$TMP/nan_$layout" \
    --save "$TMP/nan_$layout" --save-every 1
  if cmp -s "$GOOD" "$TMP/nan_$layout/model.safetensors" && [ "$(ls "$TMP/nan_$layout")" = model.safetensors ]; then
    pass "nan_leaves_the_checkpoint_intact_$layout"
  else fail "nan_leaves_the_checkpoint_intact_$layout" "$(ls "$TMP/nan_$layout")"; fi
done

# ---- metadata ---------------------------------------------------------------------------------------
# bad KEY VALUE PATTERN: the checkpoint with KEY = VALUE (or without KEY, when VALUE is -) is refused naming it
bad() {
  name=$(printf '%s_%s' "$1" "$2" | sed 's/_-$/_missing/' | tr -c 'a-zA-Z0-9_\n' _)
  copy "$name"
  if [ "$2" = - ]; then $ST meta "$TMP/$name/model.safetensors" "$1"; else $ST meta "$TMP/$name/model.safetensors" "$1" "$2"; fi
  expect_error "metadata_$name" "$3" $T --steps 3 --decay-steps 2 --load "$TMP/$name"
}
whole="is not a whole number from" damaged="; the file is damaged, use another checkpoint$"
bad step x "metadata step = 'x' $whole 0 to 9223372036854775807$damaged"
bad step -5 "metadata step = '-5' $whole 0 to"
bad step 1e30 "metadata step = '1e30' $whole 0 to"
bad step 99999999999999999999 "metadata step = '99999999999999999999' $whole 0 to"
bad seed abc "metadata seed = 'abc' $whole 0 to 18446744073709551615$damaged"
bad seed 18446744073709551616 "metadata seed = '18446744073709551616' $whole 0 to 18446744073709551615"
bad layers 0 "metadata layers = '0' $whole 1 to 2147483647$damaged"
bad layers one "metadata layers = 'one' $whole 1 to"
bad lr nan "metadata lr = 'nan' is not a finite number of at least 0$damaged"
bad lr -0.001 "metadata lr = '-0.001' is not a finite number of at least 0"
bad warmup 1.5 "metadata warmup = '1.5' $whole 0 to 9223372036854775807"
bad decay_steps -2 "metadata decay_steps = '-2' $whole 0 to"
bad weight_decay inf "metadata weight_decay = 'inf' is not a finite number of at least 0"
bad format "plait checkpoint 2" "metadata format = 'plait checkpoint 2' is not 'plait checkpoint 1'; the file is damaged \
or of another version of plait, use a checkpoint this plait wrote$"
bad contents everything "metadata contents = 'everything' is not 'weights' or 'weights and optimizer'; "
bad step - "has no step or seed in its metadata"
# --init and export read format, contents and layers through the same checks
expect_error metadata_on_init "metadata format = 'plait checkpoint 2'" $T --steps 1 --init "$TMP/format_plait_checkpoint_2"
# shellcheck disable=SC2086
expect_error metadata_on_export "metadata layers = '0' $whole 1 to" \
  $PLAIT export models/tiny.lua "$TMP/layers_0" -o "$TMP/layers_0.hf" --set $S
# a seed anywhere below 2^64 is a seed
copy big_seed && $ST meta "$TMP/big_seed/model.safetensors" seed 18446744073709551615
expect_ok metadata_seed_below_2_64 $T --steps 3 --decay-steps 2 --load "$TMP/big_seed"
# a run that would train nothing says so
expect_error steps_not_beyond_the_checkpoint "good holds step 2, and --steps 2 is not beyond it: nothing would train; \
give --steps above 2$" $T --steps 2 --load "$TMP/good"
expect_error steps_below_the_checkpoint "good holds step 2, and --steps 1 is not beyond it" \
  $T --steps 1 --decay-steps 2 --load "$TMP/good"
expect_ok eval_alone_of_a_checkpoint "$TMP/one/train" --eval "$TMP/text.bin" --load "$TMP/good"

# ---- temporaries of killed saves --------------------------------------------------------------------
copy stale
mark=$(sed -n 's/^mark //p' "$TMP/stale/.plait-folder")
ended=model.safetensors.tmp.$mark-999999999-Zz9Zz9 running=model.safetensors.tmp.$mark-$$-Zz9Zz9
for f in "$ended" "$running"; do head -c 100 /dev/urandom >"$TMP/stale/$f"; done
expect_ok load_ignores_temporaries $T --steps 3 --decay-steps 2 --load "$TMP/stale"
[ -e "$TMP/stale/$ended" ] && pass load_leaves_temporaries || fail load_leaves_temporaries "removed"
expect_ok save_after_temporaries $T --steps 3 --decay-steps 2 --load "$TMP/stale" --save "$TMP/stale"
left=$(cd "$TMP/stale" && echo *)
[ "$left" = "model.safetensors $running" ] &&
  pass save_removes_only_ended_temporaries || fail save_removes_only_ended_temporaries "left: $left"
rm "$TMP/stale/$running"
# files of the user's that look like temporaries: the folder is refused, and nothing in it is removed
for f in model.safetensors.tmp.Zz9Zz9 model.safetensors.tmp.backup notes.tmp.Zz9Zz9; do
  head -c 100 /dev/urandom >"$TMP/stale/$f"
done
before=$(cd "$TMP/stale" && cksum .plait-folder *)
expect_error save_by_a_users_files "^plait: --save .*/stale holds [^ ]+ and 2 more, which plait did not write there; \
plait writes only into a new or empty folder or one of its own: give another folder$" \
  $T --steps 4 --decay-steps 2 --load "$TMP/stale" --save "$TMP/stale"
[ "$(cd "$TMP/stale" && cksum .plait-folder *)" = "$before" ] && pass users_files_kept || fail users_files_kept "changed"

# ---- what --save must not name ----------------------------------------------------------------------
before=$(cksum <"$GOOD")
expect_error save_into_the_init_folder "^plait: --save .*good/ is the folder --init reads its weights from, and saving \
would replace them; give --save another folder$" $T --steps 1 --init "$TMP/good" --save "$TMP/./good/"
[ "$(cksum <"$GOOD")" = "$before" ] && pass init_folder_untouched || fail init_folder_untouched "changed"
expect_error save_onto_a_file "^plait: --save .*text.bin is a regular file; give a folder$" \
  $T --steps 1 --save "$TMP/text.bin"
mkdir -p "$TMP/tree/compiler" "$TMP/tree/runtime" "$TMP/tree/lib/plait"
expect_error save_into_the_source_tree "^plait: --save .*tree is in plait's own sources \\(.*/tree\\); write to build/ or \
a folder of your own$" $T --steps 1 --save "$TMP/tree"
[ ! -e "$TMP/tree/model.safetensors" ] && pass source_tree_untouched || fail source_tree_untouched "a checkpoint was written"
