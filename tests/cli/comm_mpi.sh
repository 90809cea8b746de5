# comm_mpi.sh: the MPI backend under mpirun -np 4: test_comm_mpi's checks (groups, ordered all-reduce
# bits, all-gather, reduce-scatter, point to point, nonblocking all-reduce), the refusal of a wrong world
# size, and failures that must end the whole job quickly: comm_fail, a tag mismatch, a timeout, SIGKILL
# (which mpirun must name: rank and signal).
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
