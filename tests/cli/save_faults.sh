# save_faults.sh: SIGKILL at random moments while a program saves after every step, 20 times with its ranks
# as threads and 20 times under mpirun -np 2 (rank 0, the one that writes, is killed). After each kill the
# checkpoint reads whole (every tensor's checksum agrees, every value is finite), and once the next run
# has saved, no temporary file of the killed save is left. The delays come from a seeded sequence, so a
# run is reproducible; they are spread over several step-and-save periods after the run's first save, so
# kills land in every part of a save and between saves. At the end the checkpoint resumes for one more
# step with a finite loss, and its folder holds the checkpoint alone.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
CHECK=$PLAIT_ROOT/build/tools/ckpt_check
KILLS=20 WINDOW_MS=60 STEPS=1000000

fixed_text "$TMP/text.txt"
S="layers=1 hidden=32 heads=2 ffn=64 seq=16"
# shellcheck disable=SC2086
{ $PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null &&
  $PLAIT build models/tiny.lua --set $S -o "$TMP/one" >"$TMP/build.log" 2>&1 &&
  $PLAIT build models/tiny.lua --set $S --dp 2 --mbs 4 --gbs 8 -o "$TMP/dp2" >>"$TMP/build.log" 2>&1; } ||
  { fail setup "$(tail -c 600 "$TMP/build.log")"; exit 0; }

# next_delay: the next number of a linear congruential sequence with a fixed seed, as milliseconds below
# WINDOW_MS, in $delay (seconds, for sleep)
lcg=20240520
next_delay() {
  lcg=$(( (lcg * 1103515245 + 12345) % 2147483648 ))
  delay=$(printf '0.%03d' $(( lcg / 65536 % WINDOW_MS )))
}

# writer_pid TIMEOUT_PID: the process that writes the checkpoint: the program `timeout` runs, or under mpirun
# its rank 0 (found by the rank mpirun gives it in its environment)
writer_pid() {
  [ "$mode" = threads ] && { pgrep -P "$1"; return; }
  for p in $(pgrep -f "^$TMP/dp2/train "); do
    [ "$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')" = 0 ] && echo "$p"
  done
}

# saved_since BEFORE: waits (at most 30 s, while the job runs) until the checkpoint is not the one whose
# inode and modification time were BEFORE: the job has saved once
saved_since() {
  waited=0
  while [ "$(stat -c '%i %.9Y' "$CK" 2>/dev/null)" = "$1" ] && kill -0 "$job" 2>/dev/null && [ $waited -lt 6000 ]; do
    sleep 0.005; waited=$((waited + 1))
  done
  [ "$(stat -c '%i %.9Y' "$CK" 2>/dev/null)" != "$1" ]
}

# kills MODE LAUNCH...: KILLS runs of LAUNCH train, each killed at a random moment after its first save
kills() {
  mode=$1; shift
  dir=$TMP/ck_$mode CK=$TMP/ck_$mode/model.safetensors
  mid=0 between=0 problems="" stale="" start=$(date +%s)
  for i in $(seq "$KILLS"); do
    load="" before=$(stat -c '%i %.9Y' "$CK" 2>/dev/null)
    [ -e "$CK" ] && load="--load $dir"
    # shellcheck disable=SC2086
    timeout 60 "$@" --data "$TMP/text.bin" --steps $STEPS --save "$dir" --save-every 1 $load >"$TMP/run.out" 2>&1 &
    job=$!
    if ! saved_since "$before"; then
      kill "$job" 2>/dev/null; wait "$job" 2>/dev/null
      problems="$problems; run $i never saved: $(tail -c 300 "$TMP/run.out")"; break
    fi
    # the temporaries the last kill left: gone once this run has saved
    for f in $stale; do [ -e "$dir/$f" ] && problems="$problems; run $i saved and $f is still there"; done
    victim=$(writer_pid "$job")
    next_delay
    sleep "$delay"
    # (no writer found: timeout passes a plain kill on to the job, which ends it)
    kill -9 "$victim" 2>/dev/null || kill "$job" 2>/dev/null
    wait "$job" 2>/dev/null
    stale=""
    for f in "$dir"/model.safetensors.tmp.*; do [ -e "$f" ] && stale="$stale ${f##*/}"; done
    if [ -n "$stale" ]; then mid=$((mid + 1)); else between=$((between + 1)); fi
    "$CHECK" "$CK" >"$TMP/check.out" 2>&1 || problems="$problems; after kill $i ($delay s): $(cat "$TMP/check.out")"
  done
  took=$(( $(date +%s) - start ))
  if [ -z "$problems" ]; then
    pass "kills_during_saves_$mode ($KILLS kills in $took s: $mid during a save, $between between saves; the last read whole at $(cat "$TMP/check.out"))"
  else fail "kills_during_saves_$mode" "${problems#; }"; fi
  # resumes for one more step with a finite loss; that save removes what the last kill left
  at=$(sed -n 's/^step \([0-9]*\),.*/\1/p' "$TMP/check.out")
  # shellcheck disable=SC2086
  if "$@" --data "$TMP/text.bin" --steps $((at + 1)) --decay-steps $STEPS --load "$dir" --save "$dir" >"$TMP/last.out" 2>&1 &&
     grep -q -E "^step $((at + 1)) \| loss [0-9]+\.[0-9]+ " "$TMP/last.out" && [ "$(ls "$dir")" = model.safetensors ]; then
    pass "resumes_after_the_kills_$mode ($(grep "^step $((at + 1)) " "$TMP/last.out" | cut -d'|' -f1-2))"
  else fail "resumes_after_the_kills_$mode" "$(ls "$dir" | tr '\n' ' ') $(tail -c 300 "$TMP/last.out")"; fi
}

kills threads "$TMP/one/train"
if command -v mpirun >/dev/null; then
  # mpirun ends the other rank at once rather than after a second's grace
  kills mpi mpirun -q --oversubscribe --mca odls_base_sigkill_timeout 0 -np 2 "$TMP/dp2/train"
else fail mpirun_available "mpirun not found; install openmpi-bin (make deps)"; fi

# two runs saving into one folder at once, after every step: each writes through a temporary of its own
# (its mark and process) that the other never removes; both end with their saves, the checkpoint reads
# whole, and the folder holds it and its marker alone
CK=$TMP/shared/model.safetensors
for run in a b; do
  timeout 300 "$TMP/one/train" --data "$TMP/text.bin" --steps 20 --save "$TMP/shared" --save-every 1 \
    >"$TMP/shared_$run.out" 2>&1 &
  eval "job_$run=\$!"
done
# shellcheck disable=SC2154
wait "$job_a"; status_a=$?; wait "$job_b"; status_b=$?
if [ "$status_a" = 0 ] && [ "$status_b" = 0 ] && "$CHECK" "$CK" >"$TMP/check.out" 2>&1 &&
   [ "$(ls -A "$TMP/shared" | tr '\n' ' ')" = ".plait-folder model.safetensors " ] &&
   grep -q "^saved .*shared/model.safetensors (step 20)$" "$TMP/shared_a.out" &&
   grep -q "^saved .*shared/model.safetensors (step 20)$" "$TMP/shared_b.out"; then
  pass two_runs_save_into_one_folder
else
  fail two_runs_save_into_one_folder "exits $status_a $status_b; $(ls -A "$TMP/shared" | tr '\n' ' ');\
 $(tail -n 1 "$TMP/shared_a.out") $(tail -n 1 "$TMP/shared_b.out") $(cat "$TMP/check.out")"
fi
