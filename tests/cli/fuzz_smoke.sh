#!/bin/sh
# fuzz_smoke.sh: builds the libFuzzer target of the schedule readers (make fuzz) and runs it for 10 seconds;
# `make fuzz` alone runs it for FUZZ_SECONDS (180 by default).
. "$(dirname "$0")/../cli/lib.sh"
if make -C "$PLAIT_ROOT" -s fuzz FUZZ_SECONDS=10 >"$TMP/log" 2>&1 && grep -q '^Done [0-9]* runs' "$TMP/log"; then
  pass "fuzz the schedule readers for 10 s ($(grep '^Done' "$TMP/log"))"
else
  fail "fuzz the schedule readers for 10 s" "$(tail -n 20 "$TMP/log")"
fi
