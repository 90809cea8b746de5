# include_graph.sh: the training loop (runtime/train/trainer.c) stays at the top of the runtime's
# include graph: only the entry point (train.c, with main()) includes trainer.h, and nothing
# trainer.c includes leads back to it. The checker must refuse copies of runtime/ that break either
# rule.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
GRAPH="python3 tests/tools/include_graph.py"

# shellcheck disable=SC2086
if $GRAPH runtime train/trainer.c >"$TMP/out" 2>&1; then pass include_graph_runtime
else fail include_graph_runtime "$(head -c 1200 "$TMP/out")"; fi

# refused NAME FILE PATTERN: a copy of runtime/ whose FILE also includes trainer.h is refused with
# a line matching PATTERN.
refused() {
  rm -rf "$TMP/runtime" && cp -r runtime "$TMP/runtime" || return
  printf '#include "train/trainer.h"\n' >>"$TMP/runtime/$2"
  # shellcheck disable=SC2086
  if $GRAPH "$TMP/runtime" train/trainer.c >"$TMP/out" 2>&1; then fail "$1" "the checker passed it"
  elif grep -q -E -- "$3" "$TMP/out"; then pass "$1"
  else fail "$1" "no line matches '$3': $(head -c 600 "$TMP/out")"; fi
}
refused include_graph_header_refused train/log.h '^cycle: trainer -> log -> trainer '
refused include_graph_source_refused train/evaluate.c \
  '^train/evaluate.c includes trainer.h; only train/train.c may$'
refused include_graph_unused_refused bytes.c '^bytes.c includes trainer.h; only train/train.c may$'
