#!/bin/sh
# Runs every unit test binary and every command-line test script; ends with "N passed, N failed".
# Each test prints lines "PASS name" or "FAIL name: why"; a program that exits non-zero without a
# FAIL line counts as one failure. Tests are independent: PLAIT_TEST_JOBS of them (default: the
# number of cores, at most 2) run at once, the longest first, each reported as it ends.
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
export PLAIT="$root/$build/plait" PLAIT_ROOT="$root"
cd "$root" || exit 1
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

# run_one NAME CMD...: runs one test into $log/NAME.out and writes its tally to $log/NAME.tally
run_one() {
  name=$1; shift
  out="$log/$(echo "$name" | tr / _)"
  start=$(date +%s)
  "$@" >"$out.out" 2>&1; status=$?
  secs=$(( $(date +%s) - start ))
  p=$(grep -c '^PASS ' "$out.out"); f=$(grep -c '^FAIL ' "$out.out")
  if [ "$status" != 0 ] && [ "$f" = 0 ]; then
    f=1; echo "FAIL $name: exited with status $status" >>"$out.out"
  fi
  echo "$p $f" >"$out.tally"
  {
    printf '%-40s %4d passed %3d failed %4ds\n' "$name" "$p" "$f" "$secs"
    [ "$f" = 0 ] || { grep -v '^PASS ' "$out.out" | tail -n 40 | sed 's/^/    /'; }
  } >"$out.report"
  cat "$out.report"
}

# The scripts that take a minute or more on a two-core machine start first, so that no long one is
# left running alone at the end.
longest="equivalence cuda calibrate baseline train dist_optim recompute hf train_errors
  kv_replicate ep"

list_tests() {
  for name in $longest; do echo "cli/$name.sh"; done
  for t in "$root/$build"/tests/test_*; do
    [ -x "$t" ] && echo "unit/$(basename "$t")"
  done
  for t in "$root"/tests/cli/*.sh; do
    name=$(basename "$t" .sh)
    [ "$name" = lib ] && continue
    case " $longest " in *" $name "*) continue ;; esac
    echo "cli/$name.sh"
  done
}

# run_entry ENTRY: one line of list_tests
run_entry() {
  case $1 in
    unit/*) run_one "${1#unit/}" "$root/$build/tests/${1#unit/}" ;;
    cli/*) [ -f "$root/tests/$1" ] && run_one "$1" sh "$root/tests/$1" ;;
  esac
}

jobs=${PLAIT_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$jobs" -gt 2 ] 2>/dev/null && [ -z "$PLAIT_TEST_JOBS" ] && jobs=2
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
list_tests >"$log/queue"

# worker: takes the next entry off the queue (a directory made per entry is the lock) until none
# is left
worker() {
  i=0
  while entry=$(sed -n "$((i + 1))p" "$log/queue") && [ -n "$entry" ]; do
    i=$((i + 1))
    mkdir "$log/taken.$i" 2>/dev/null && run_entry "$entry"
  done
}
n=0
while [ "$n" -lt "$jobs" ]; do worker & n=$((n + 1)); done
wait

passed=0 failed=0
for tally in "$log"/*.tally; do
  [ -f "$tally" ] || continue
  read -r p f <"$tally"
  passed=$((passed + p)); failed=$((failed + f))
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
