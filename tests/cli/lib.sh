# lib.sh: helpers for command-line tests: each check prints "PASS name" or "FAIL name: why".
# PLAIT (the compiler) and PLAIT_ROOT (the checkout) come from tests/run.sh.
: "${PLAIT_ROOT:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${PLAIT:=$PLAIT_ROOT/build/plait}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }

# fixed_text FILE: the tests' training text, the same whatever the commit: the first 80 KiB of Debian's
# fortunes (the deps step installs them; `make demo` trains on all of them).
fixed_text() {
  cat $(ls /usr/share/games/fortunes/* | grep -v -e '\.dat$' -e '\.u8$') | head -c 81920 >"$1"
}

# expect_error NAME PATTERN CMD...: the command must exit non-zero with exactly one line on stderr matching PATTERN.
# Status 124 is `timeout` ending a command that hung, and fails; 128 and above is a crash.
expect_error() {
  name=$1 pattern=$2; shift 2
  "$@" >"$TMP/out" 2>"$TMP/err"; status=$?
  lines=$(wc -l <"$TMP/err")
  if [ "$status" = 0 ]; then fail "$name" "exit status 0"
  elif [ "$status" = 124 ]; then fail "$name" "did not end: timeout stopped it (status 124); stderr: $(head -c 300 "$TMP/err")"
  elif [ "$status" -ge 128 ]; then fail "$name" "crashed with status $status"
  elif [ "$lines" != 1 ]; then fail "$name" "expected one line on stderr, got $lines: $(head -c 400 "$TMP/err")"
  elif ! grep -q -E -- "$pattern" "$TMP/err"; then fail "$name" "stderr '$(cat "$TMP/err")' does not match '$pattern'"
  else pass "$name"; fi
}

# expect_ok NAME CMD...: the command must exit 0; its stdout is left in $TMP/out.
expect_ok() {
  name=$1; shift
  if "$@" >"$TMP/out" 2>"$TMP/err"; then pass "$name"; else fail "$name" "exit $?: $(head -c 400 "$TMP/err")"; fi
}

# within NAME MAX_SECONDS CMD...: runs the command (its status left in $status; CMD may be expect_error)
# and passes NAME when it ended within MAX_SECONDS. Bound the command itself with `timeout` (a larger
# limit) so that a hang ends: expect_error fails its 124.
within() {
  within_name=$1 within_max=$2; shift 2
  within_start=$(date +%s)
  "$@"
  status=$?
  within_took=$(( $(date +%s) - within_start ))
  if [ "$within_took" -le "$within_max" ]; then pass "$within_name ($within_took s)"
  else fail "$within_name" "took $within_took s, more than $within_max s"; fi
  return "$status"
}
