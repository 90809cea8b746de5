# calibrate.sh: plait calibrate measures this machine through the runtime (ranks as threads, or as the
# processes a launcher such as mpirun starts) and writes a machine file that plait plan reads (a device:
# one rank's share; every measured number positive); bad input is one line.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

expect_ok calibrate_two_ranks timeout 120 $PLAIT calibrate --ranks 2 -o "$TMP/here.lua"
if grep -q '^  name = "calibrated",$' "$TMP/here.lua" && grep -q 'devices = 2,' "$TMP/here.lua"; then pass calibrate_file
else fail calibrate_file "$(head -c 600 "$TMP/here.lua")"; fi
expect_ok calibrate_file_plans $PLAIT plan models/tiny.lua --dp 2 --gbs 16 --machine "$TMP/here.lua" --format json
if grep -q '"iteration_time": [0-9.]*e-0[1-9],' "$TMP/out" || grep -q '"iteration_time": 0\.[0-9]*,' "$TMP/out"; then
  pass calibrate_file_gives_a_time
else fail calibrate_file_gives_a_time "$(grep iteration_time "$TMP/out")"; fi

# to stdout without -o; one rank (no collectives to time)
expect_ok calibrate_one_rank_stdout timeout 120 $PLAIT calibrate --ranks 1
if grep -q 'this machine, 1 rank:' "$TMP/out"; then pass calibrate_stdout; else fail calibrate_stdout "$(head -c 300 "$TMP/out")"; fi

# ranks as MPI processes, as mpirun starts a training job's: the file names the backend it measured
mpirun="timeout 120 mpirun -q --oversubscribe --allow-run-as-root"
expect_ok calibrate_under_mpirun timeout 150 $PLAIT calibrate --ranks 2 --launcher "$mpirun -np 2" -o "$TMP/mpi.lua"
if grep -q '2 ranks (mpi backend)' "$TMP/mpi.lua" && grep -q 'all-reduce bus' "$TMP/mpi.lua"; then pass calibrate_mpi_file
else fail calibrate_mpi_file "$(head -c 600 "$TMP/mpi.lua")"; fi
expect_error calibrate_launcher_count "^plait: the probe failed: the launcher started 1 rank but .* run mpirun -np 2$" \
  $PLAIT calibrate --ranks 2 --launcher "$mpirun -np 1"
expect_error calibrate_launcher_missing "^plait: the probe failed: .*no-such-launcher: not found$" \
  $PLAIT calibrate --ranks 2 --launcher no-such-launcher
# bounds before anything starts, and a launcher that never ends is stopped within its time limit
within calibrate_too_many_ranks_at_once 2 expect_error calibrate_too_many_ranks \
  "^plait: --ranks 100000 is more than this machine runs \(8 ranks a core, [0-9]+ cores\); give --ranks [0-9]+ or fewer$" \
  timeout 20 $PLAIT calibrate --ranks 100000 -o "$TMP/many.lua"
[ -e "$TMP/many.lua" ] && fail calibrate_too_many_ranks_writes_nothing "$TMP/many.lua exists"
within calibrate_launcher_stopped 8 expect_error calibrate_endless_launcher \
  "^plait: the probe ran more than 3 s and was stopped: the launcher did not end; check that it runs the probe, or give calibrate a --time-limit$" \
  timeout 30 $PLAIT calibrate --ranks 1 --launcher "sh -c 'sleep 67' launcher" --time-limit 3 -o "$TMP/endless.lua"
[ -e "$TMP/endless.lua" ] && fail calibrate_endless_launcher_writes_nothing "$TMP/endless.lua exists"
if pgrep -f "^sleep 67$" >/dev/null; then
  fail calibrate_endless_launcher_ended "its processes still run"
else pass calibrate_endless_launcher_ended; fi
expect_error calibrate_launcher_needs_ranks "^plait: --launcher needs --ranks N" $PLAIT calibrate --launcher "mpirun -np 2"

expect_error calibrate_no_file '^plait: calibrate takes no file: plait calibrate \[--ranks N\] \[--launcher CMD\] \[-o FILE\]$' \
  $PLAIT calibrate models/tiny.lua
expect_error calibrate_zero_ranks '^plait: --ranks takes a positive integer' $PLAIT calibrate --ranks 0
expect_error calibrate_into_sources '^plait: -o ' $PLAIT calibrate -o compiler/machine.lua
expect_error calibrate_unknown_flag '^plait: unknown flag --gpus' $PLAIT calibrate --gpus 2
PLAIT_HOME="$TMP/nowhere" expect_error calibrate_no_probe "^plait: the probe $TMP/nowhere/build/plait-probe is missing; run make" \
  $PLAIT calibrate
