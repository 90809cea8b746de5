#!/bin/sh
# Runs every unit test binary and every command-line test script; ends with "N passed, N failed".
# Each test prints lines "PASS name" or "FAIL name: why"; a program that exits non-zero without a FAIL line counts as one failure.
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
export PLAIT="$root/$build/plait" PLAIT_ROOT="$root"
cd "$root" || exit 1
log=$(mktemp -d)
passed=0 failed=0
run_one() {  # name, command...
  name=$1; shift
  start=$(date +%s)
  "$@" >"$log/out" 2>&1; status=$?
  secs=$(( $(date +%s) - start ))
  p=$(grep -c '^PASS ' "$log/out"); f=$(grep -c '^FAIL ' "$log/out")
  if [ "$status" != 0 ] && [ "$f" = 0 ]; then
    f=1; echo "FAIL $name: exited with status $status" >>"$log/out"
  fi
  passed=$((passed + p)); failed=$((failed + f))
  printf '%-40s %4d passed %3d failed %4ds\n' "$name" "$p" "$f" "$secs"
  [ "$f" = 0 ] || { grep -v '^PASS ' "$log/out" | tail -n 40 | sed 's/^/    /'; }
}
for t in "$root/$build"/tests/test_*; do
  [ -x "$t" ] && run_one "$(basename "$t")" "$t"
done
for t in "$root"/tests/cli/*.sh; do
  [ "$(basename "$t")" = lib.sh ] && continue
  [ -f "$t" ] && run_one "cli/$(basename "$t")" sh "$t"
done
rm -rf "$log"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
