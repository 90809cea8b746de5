# comm_mpi.sh: the MPI backend under mpirun -np 4: test_comm_mpi's checks (groups, ordered all-reduce
# bits, all-gather, reduce-scatter, point to point, nonblocking all-reduce), the refusal of a wrong world
# size, and failures that must end the whole job quickly: comm_fail, a tag mismatch, a timeout, SIGKILL
# (which mpirun must name: rank and signal), and the job's peak rate, the MFU's denominator.
. "$(dirname "$0")/lib.sh"
bin=$(dirname "$PLAIT")/tests/test_comm_mpi
mpirun="timeout 60 mpirun -q --oversubscribe --allow-run-as-root"
# without -q: mpirun's own line naming a rank a signal killed is what the SIGKILL check reads
mpirun_loud="timeout 60 mpirun --oversubscribe --allow-run-as-root"

if ! command -v mpirun >/dev/null; then
  fail mpirun_available "mpirun not found; install openmpi-bin (make deps)"
  exit 0
fi

$mpirun -np 4 "$bin" >"$TMP/checks" 2>"$TMP/checks.err"; status=$?
grep -E '^(PASS|FAIL|     )' "$TMP/checks"
if [ "$status" = 0 ] && grep -q '^PASS mpi_backend' "$TMP/checks" && ! grep -q '^FAIL' "$TMP/checks"; then
  pass mpi_checks_under_mpirun
else
  fail mpi_checks_under_mpirun "status $status: $(head -c 400 "$TMP/checks.err")"
fi

within mpi_wrong_world_size_is_quick 20 \
  expect_error mpi_wrong_world_size \
  '^plait: the launcher started 3 ranks but the plan needs tp·pp·dp = 2·2·1 = 4; run mpirun -np 4$' \
  $mpirun -np 3 "$bin"

within mpi_comm_fail_is_quick 20 \
  expect_error mpi_comm_fail_ends_job '^plait: rank 2: stopping on purpose$' $mpirun -np 4 "$bin" fail

within mpi_tag_mismatch_is_quick 20 \
  expect_error mpi_tag_mismatch \
  '^plait: rank 1: receive from rank 0 expected tag 6 with 8 elements, found tag 5 with 8 elements$' \
  $mpirun -np 4 "$bin" tag

export PLAIT_COMM_TIMEOUT=2
within mpi_timeout_is_bounded 30 \
  expect_error mpi_absent_rank_times_out \
  '^plait: rank [0-2]: all-reduce on the world group \(ranks 0 1 2 3\) was not complete within 2 s' \
  $mpirun -x PLAIT_COMM_TIMEOUT -np 4 "$bin" timeout
unset PLAIT_COMM_TIMEOUT

# rank 1 kills itself with SIGKILL: the job ends non-zero and mpirun names the rank and the signal
sigkill() { $mpirun_loud -np 4 "$bin" kill >"$TMP/out" 2>"$TMP/err"; }
within mpi_sigkill_is_quick 30 sigkill
if [ "$status" = 0 ]; then fail mpi_sigkill_ends_job "mpirun exited 0"
elif [ "$status" = 124 ]; then fail mpi_sigkill_ends_job "mpirun hung until timeout killed it"
elif ! grep -q -E 'process rank 1 .*exited on signal 9' "$TMP/err"; then
  fail mpi_sigkill_ends_job "status $status, but stderr does not name rank 1 and signal 9: $(head -c 400 "$TMP/err")"
else pass "mpi_sigkill_ends_job ($(grep -o -E 'process rank 1 .*exited on signal 9[^.]*' "$TMP/err"))"; fi

# MFU's denominator is the job's peak: a dp-2 job under mpirun (each process bound to one core, or
# unbound and seeing both) measures about the rate the same program measures with its ranks as threads,
# not one process's share of it. Two unbound processes time their start-up products on the same cores
# at once, and now and then each sees the other's (52.9 against 139.1 GFLOP/s once on a quiet 2-core
# machine): the jobs are started up to three times, and the first whose rates agree passes.
printf 'a few words to train on, again and again and again. ' >"$TMP/words.txt"
for i in 1 2 3 4 5 6; do cat "$TMP/words.txt" "$TMP/words.txt" >"$TMP/more.txt" && mv "$TMP/more.txt" "$TMP/words.txt"; done
peak() { grep -o 'MFU against [0-9.]* GFLOP/s' "$1" | grep -o '[0-9.]*' | head -1; }
peaks_agree() {
  timeout 60 "$TMP/dp2/train" --data "$TMP/words.bin" --steps 1 >"$TMP/threads.out" 2>&1 &&
    $mpirun -np 2 "$TMP/dp2/train" --data "$TMP/words.bin" --steps 1 >"$TMP/bound.out" 2>&1 &&
    $mpirun --bind-to none -np 2 "$TMP/dp2/train" --data "$TMP/words.bin" --steps 1 >"$TMP/unbound.out" 2>&1 ||
    return 2
  threads=$(peak "$TMP/threads.out") bound=$(peak "$TMP/bound.out") unbound=$(peak "$TMP/unbound.out")
  awk -v t="$threads" -v b="$bound" -v u="$unbound" \
    'BEGIN { exit !(t > 0 && b / t > 0.7 && b / t < 1.4 && u / t > 0.7 && u / t < 1.4) }'
}
if $PLAIT data --bytes "$TMP/words.txt" -o "$TMP/words.bin" --val-fraction 0 >/dev/null &&
   $PLAIT build models/tiny.lua --dp 2 --mbs 4 --gbs 8 -o "$TMP/dp2" >/dev/null 2>&1; then
  tries=1
  peaks_agree
  agree=$?
  while [ "$agree" = 1 ] && [ "$tries" -lt 3 ]; do tries=$((tries + 1)); peaks_agree; agree=$?; done
  rates="GFLOP/s: threads $threads, mpirun bound $bound, unbound $unbound; start-ups: $tries"
  if [ "$agree" = 0 ]; then pass "mpi_peak_is_the_jobs ($rates)"
  elif [ "$agree" = 1 ]; then fail mpi_peak_is_the_jobs "$rates"
  else fail mpi_peak_is_the_jobs "a run failed: $(tail -c 300 "$TMP/threads.out") $(tail -c 300 "$TMP/bound.out") $(tail -c 300 "$TMP/unbound.out")"
  fi
else
  fail mpi_peak_is_the_jobs "a run failed: $(tail -c 300 "$TMP/threads.out") $(tail -c 300 "$TMP/bound.out") $(tail -c 300 "$TMP/unbound.out")"
fi
