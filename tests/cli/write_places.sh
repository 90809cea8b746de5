# write_places.sh: every writer of plait and of its programs against every place it must not write: a
# character device (/dev/null itself), a named pipe, a directory or a folder holding a user's files, a
# symbolic link to elsewhere, plait's sources and a .git folder at any depth. Each is refused in one line
# with a non-zero exit, at once (a pipe never blocks), and everything there is byte for byte as before.
# Then what a folder of plait's own may hold: export into a folder with a user's look-alike files deletes
# none of them, import does not replace a training checkpoint with weights alone without --force, and a
# checkpoint folder from before markers is taken as plait's.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

S="layers=1 hidden=32 heads=2 ffn=64 seq=16"
fixed_text "$TMP/text.txt"
# shellcheck disable=SC2086
{ $PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null &&
  $PLAIT build models/tiny.lua --set $S -o "$TMP/tiny" >"$TMP/build.log" 2>&1 &&
  "$TMP/tiny/train" --data "$TMP/text.bin" --steps 1 --save "$TMP/ckpt" >/dev/null 2>&1 &&
  $PLAIT export models/tiny.lua "$TMP/ckpt" -o "$TMP/hf" --set $S >/dev/null 2>&1; } ||
  { fail setup "$(tail -c 600 "$TMP/build.log")"; exit 0; }
T=$TMP/tiny/train

# shellcheck disable=SC2046 # (writer's words are meant to split: $TMP has no spaces)
# ---- the places ------------------------------------------------------------------------------------
mkfifo "$TMP/fifo"
mkdir -p "$TMP/foreign" "$TMP/elsewhere/folder" "$TMP/repo/.git/objects"
for f in notes.txt model.c train model.safetensors config.json; do echo "the user's $f" >"$TMP/foreign/$f"; done
echo "the user's file" >"$TMP/elsewhere/file.txt"
echo "the user's file" >"$TMP/elsewhere/folder/kept.txt"
ln -s "$TMP/elsewhere/file.txt" "$TMP/link"
ln -s "$TMP/elsewhere/folder" "$TMP/linked_folder"
echo "a repository's object" >"$TMP/repo/.git/objects/x"

# state: what every place holds, to compare before and after
state() {
  stat -c '%n %F %t:%T' /dev/null "$TMP/fifo"
  readlink "$TMP/link" "$TMP/linked_folder"
  (cd "$TMP" && find foreign elsewhere repo ckpt hf | sort &&
     find foreign elsewhere repo ckpt hf -type f -exec cksum {} + | sort)
  git status --porcelain --untracked-files=all compiler runtime lib models tests
}

# ---- the writers: each command ends with the flag that takes the path ------------------------------------
writer() {
  case $1 in
    plan) echo "$PLAIT plan models/tiny.lua -o" ;;
    check) echo "$PLAIT check 1f1b --pp 2 --gbs 4 -o" ;;
    data) echo "$PLAIT data --bytes $TMP/text.txt -o" ;;
    log_json) echo "$T --data $TMP/text.bin --steps 1 --log-json" ;;
    trace) echo "$T --data $TMP/text.bin --steps 1 --trace" ;;
    build) echo "$PLAIT build models/tiny.lua --set $S -o" ;;
    import) echo "$PLAIT import models/tiny.lua $TMP/hf --set $S -o" ;;
    export) echo "$PLAIT export models/tiny.lua $TMP/ckpt --set $S -o" ;;
    save) echo "$T --data $TMP/text.bin --steps 1 --save" ;;
  esac
}

# refused WRITER PLACE PATTERN PATH: one line matching PATTERN and a non-zero exit, within 20 s
refused() {
  # shellcheck disable=SC2046
  expect_error "${1}_${2}" "$3" timeout 20 $(writer "$1") "$4"
}

for writer in plan check data log_json trace; do
  before=$(state)
  refused $writer dev_null "^plait: .*/dev/null is a character device; give the path of a regular file" /dev/null
  refused $writer fifo "^plait: .*/fifo is a named pipe; give the path of a regular file" "$TMP/fifo"
  refused $writer folder "^plait: .*/foreign is a directory; give the path of a regular file" "$TMP/foreign"
  refused $writer link "^plait: .*/link is a symbolic link \(to .*/elsewhere/file.txt\); plait does not write through" \
    "$TMP/link"
  refused $writer sources "^plait: .* compiler/deep/er/out is in plait's own sources \(.*\); write to build/" \
    compiler/deep/er/out
  refused $writer git "^plait: .*/repo/.git/objects/out is in a .git folder \(.*/repo/.git\); write outside" \
    "$TMP/repo/.git/objects/out"
  if [ "$(state)" = "$before" ] && [ ! -e compiler/deep ]; then pass "${writer}_changed_nothing"
  else state >"$TMP/after"; fail "${writer}_changed_nothing" "$(echo "$before" | diff - "$TMP/after" | head -c 400)"; fi
done

for writer in build import export save; do
  before=$(state)
  refused $writer dev_null "^plait: .*/dev/null is a character device; give a folder$" /dev/null
  refused $writer fifo "^plait: .*/fifo is a named pipe; give a folder$" "$TMP/fifo"
  refused $writer foreign_folder "^plait: .*/foreign holds [^ ]+ and 4 more, which plait did not write there; plait \
writes only into a new or empty folder or one of its own: give another folder$" "$TMP/foreign"
  refused $writer link "^plait: .*/linked_folder is a symbolic link \(to .*/elsewhere/folder\); plait does not write \
through links: give the folder itself, or another path$" "$TMP/linked_folder"
  refused $writer sources "^plait: .* compiler/deep/er is in plait's own sources \(.*\); write to build/" \
    compiler/deep/er
  refused $writer git "^plait: .*/repo/.git/objects/out is in a .git folder \(.*/repo/.git\); write outside" \
    "$TMP/repo/.git/objects/out"
  if [ "$(state)" = "$before" ] && [ ! -e compiler/deep ]; then pass "${writer}_changed_nothing"
  else state >"$TMP/after"; fail "${writer}_changed_nothing" "$(echo "$before" | diff - "$TMP/after" | head -c 400)"; fi
done
# a folder of another kind of plait's: a checkpoint folder is neither a program's nor a Hugging Face one
expect_error build_into_a_checkpoint_folder "^plait: -o .*/ckpt is a checkpoint folder \(--save, plait import\), not a \
program's folder \(plait build\): give another folder$" $(writer build) "$TMP/ckpt"
expect_error export_into_a_program_folder "^plait: -o .*/tiny is a program's folder \(plait build\), not a Hugging Face \
folder \(plait export\): give another folder$" $(writer export) "$TMP/tiny"

# ---- export beside a user's look-alike files -------------------------------------------------------
lookalikes="model.safetensors.bak model-fp16.safetensors modelcard.safetensors.md model.safetensors.tmp.backup"
mkdir "$TMP/user_hf"
for f in $lookalikes; do echo "the user's $f" >"$TMP/user_hf/$f"; done
before=$(cd "$TMP/user_hf" && cksum ./*)
expect_error export_beside_lookalikes "^plait: -o .*/user_hf holds [^ ]+ and 3 more, which plait did not write there" \
  $(writer export) "$TMP/user_hf"
# the same files put into a folder export made: refused too, and kept
$(writer export) "$TMP/own_hf" >"$TMP/out" 2>&1 || fail export_into_a_new_folder "$(cat "$TMP/out")"
for f in $lookalikes; do echo "the user's $f" >"$TMP/own_hf/$f"; done
expect_error export_over_its_folder_with_lookalikes "^plait: -o .*/own_hf holds [^ ]+ and 3 more, which plait did not" \
  $(writer export) "$TMP/own_hf"
ln -s "$TMP/own_hf" "$TMP/own_hf_link"
expect_error export_through_a_linked_folder "^plait: -o .*/own_hf_link is a symbolic link" \
  $(writer export) "$TMP/own_hf_link"
if [ "$(cd "$TMP/user_hf" && cksum ./*)" = "$before" ] &&
   [ "$(cd "$TMP/own_hf" && cksum $lookalikes)" = "$(cd "$TMP/user_hf" && cksum $lookalikes)" ]; then
  pass export_keeps_the_users_files
else fail export_keeps_the_users_files "$(ls "$TMP/user_hf" "$TMP/own_hf")"; fi

# ---- import over a training checkpoint: only with --force -------------------------------------------
cp -r "$TMP/ckpt" "$TMP/training"
before=$(cksum <"$TMP/training/model.safetensors")
expect_error import_over_a_training_checkpoint "^plait: -o .*/training holds a training checkpoint of step 1 \(weights \
and Adam's state\), which weights alone would replace: give another folder, or --force to replace it$" \
  $(writer import) "$TMP/training"
[ "$(cksum <"$TMP/training/model.safetensors")" = "$before" ] && pass training_checkpoint_kept ||
  fail training_checkpoint_kept "changed"
expect_ok import_with_force $(writer import) "$TMP/training" --force
expect_ok import_over_weights_alone $(writer import) "$TMP/training"

# ---- a checkpoint folder from before markers is plait's; a leftover of a build is not -----------------
cp -r "$TMP/ckpt" "$TMP/old"
rm "$TMP/old/.plait-folder"
expect_ok save_into_a_checkpoint_folder_without_marker "$T" --data "$TMP/text.bin" --steps 2 --decay-steps 1 \
  --load "$TMP/old" --save "$TMP/old"
if [ -f "$TMP/old/.plait-folder" ] && [ "$(ls "$TMP/old")" = model.safetensors ]; then pass old_checkpoint_folder_adopted
else fail old_checkpoint_folder_adopted "$(ls -a "$TMP/old")"; fi
