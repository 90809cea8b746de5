#!/bin/sh
# exhaustive_ops.sh: a primitive that a pass does not handle fails the build. The compiler's headers
# are copied with one more op kind in graph.h's GRAPH_OPS (one more elementwise op in expr.h's
# EXPR_OPS), and the passes that switch over them, compiled against the copy under the compiler's
# warning flags, must fail naming the new op; compiled unchanged they must build.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

# compile FILE HEADERS: FILE (a compiler source) compiled against the headers in HEADERS, as the
# Makefile compiles the compiler; its messages in $TMP/log.
compile() {
  mkdir -p "$2/src" && cp "compiler/$1" "$2/src/" &&
    ${CC:-cc} -std=c11 -Wall -Wextra -Werror -Wswitch-enum -D_GNU_SOURCE -I/usr/include/lua5.4 \
      -I"$2" -Icompiler -Iruntime -DPLAIT_REAL_DOUBLE -fsyntax-only "$2/src/${1##*/}" >"$TMP/log" 2>&1
}

# headers DIR HEADER AFTER LINE: the compiler's tree copied to DIR, with LINE added to HEADER after
# the line holding AFTER; fails when there is no such line.
headers() {
  mkdir -p "$1" && cp -r compiler/. "$1/" &&
    awk -v after="$3" -v line="$4" '{ print } index($0, after) { print line; added = 1 }
      END { exit !added }' "compiler/$2" >"$1/$2"
}

for file in emit/emit_stage.c passes/shard.c ir/expr.c; do
  if compile "$file" "$TMP/unchanged"; then pass "builds_unchanged ($file)"
  else fail "builds_unchanged ($file)" "$(head -c 600 "$TMP/log")"; fi
done

headers "$TMP/op" ir/graph.h 'X(OP_MATMUL, "matmul")' '  X(OP_HYPOTHETICAL, "hypothetical") \' ||
  fail new_op_kind "no X(OP_MATMUL, ...) row in compiler/ir/graph.h's GRAPH_OPS"
headers "$TMP/ew" ir/expr.h 'X(E_ADD, "+"' \
  '  X(E_HYPOTHETICAL, "hypothetical", 1, EW_INTERNAL, NULL, 0) \' ||
  fail new_elementwise_op "no X(E_ADD, ...) row in compiler/ir/expr.h's EXPR_OPS"

# unhandled NAME FILE HEADERS ENUMERATOR: FILE must fail to build against HEADERS, naming
# ENUMERATOR.
unhandled() {
  if compile "$2" "$3"; then fail "$1 ($2)" "built with $4 added, which it does not handle"
  elif grep -q "enumeration value .*$4.* not handled in switch" "$TMP/log"; then pass "$1 ($2)"
  else fail "$1 ($2)" "failed, but not on $4: $(head -c 600 "$TMP/log")"; fi
}
unhandled new_op_kind_fails emit/emit_stage.c "$TMP/op" OP_HYPOTHETICAL
unhandled new_op_kind_fails passes/shard.c "$TMP/op" OP_HYPOTHETICAL
unhandled new_elementwise_op_fails ir/expr.c "$TMP/ew" E_HYPOTHETICAL
