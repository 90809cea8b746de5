# generated.sh: generated/ holds the emitted sources of reference models, and tests/gpu/generated/ those
# the GPU check builds on a machine without plait (its benchmark models from tests/gpu/benchmarks.txt);
# regenerating them must give the same files.
# UPDATE_GENERATED=1 rewrites them (review the diff before committing). The folder's marker (.plait-folder,
# random per build) is neither compared nor kept.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

# the GPU check's mixture of experts: the router's losses and a capacity
moe_settings="--set aux_loss=0.01 z_loss=0.001 capacity_factor=1.25"
while read -r dir args; do
  [ -z "$dir" ] && continue
  name=$(basename "$dir")
  # shellcheck disable=SC2086
  if ! $PLAIT build $args --emit-only -o "$TMP/$name" >"$TMP/err" 2>&1; then
    fail "generated_$name" "plait build failed: $(cat "$TMP/err")"
  elif [ "${UPDATE_GENERATED:-0}" = 1 ]; then
    rm -rf "$dir" && cp -r "$TMP/$name" "$dir" && rm "$dir/.plait-folder" && pass "generated_$name (updated)"
  elif diff -ru -x .plait-folder "$dir" "$TMP/$name" >"$TMP/diff"; then
    pass "generated_$name"
  else
    fail "generated_$name" "$dir is out of date (UPDATE_GENERATED=1 sh tests/cli/generated.sh): $(head -c 1200 "$TMP/diff")"
  fi
done <<CASES
$(grep -v '^#' tests/gpu/benchmarks.txt | awk '{ $1 = ""; $2 = "tests/gpu/generated/" $2; $3 = $4 = $5 = $6 = $7 = $8 = ""; print }')
generated/tiny models/tiny.lua
generated/gpt2 models/gpt2.lua
generated/tiny-tp2-pp2-vpp2 models/tiny.lua --tp 2 --pp 2 --vpp 2 --gbs 16 --mbs 4 --set dropout=0.1
tests/gpu/generated/tiny-dropout models/tiny.lua --gbs 16 --mbs 4 --set dropout=0.1
tests/gpu/generated/tiny-dp2 models/tiny.lua --dp 2 --gbs 16 --mbs 4
tests/gpu/generated/tiny-dp2-dopt models/tiny.lua --dp 2 --gbs 16 --mbs 4 --distributed-optimizer
tests/gpu/generated/moe tests/cli/models/moe.lua --gbs 16 --mbs 4 $moe_settings
CASES

# generated/gpt2/model.c reads like llm.c: buffers named after the model's scopes (no t7 or dt19_46
# where the model names a scope), each fused call with its expression beside it, sizes by the dims'
# names, the GEMMs' flags by name, and the fused kernels in fused.h.
model=generated/gpt2/model.c
calls=$(sed 's|/\*[^*]*\*/||g' "$model" | grep -E '^ +(k_|rt_|ew_)')
numbered=$(grep -cE '^  (act_t|real) \*(d_)?d?t[0-9]+(_[0-9]+)? =' "$model")
bare_ew=$(grep -E '^ +ew_[a-z0-9_]+\(' "$model" | grep -cvE '\); /\* [a-z_][a-z0-9_]* \+?= .+ \*/')
literal=$(printf '%s\n' "$calls" | grep -cE '[(, ][0-9]{3,}[,)]')
if [ "$numbered" != 0 ]; then fail generated_names "$numbered buffers of $model are numbered"
elif ! grep -q '\*ln_1_rstd = ' "$model" || ! grep -q '\*attn_q = ' "$model" ||
     ! grep -q '\*d_mlp_fc = ' "$model"; then
  fail generated_names "$model has no attn_q, ln_1_rstd or d_mlp_fc"
else pass generated_names; fi
if [ "$bare_ew" != 0 ] || ! grep -qE '^ +ew_gelu_bias_add\(.*/\* mlp_fc_gelu = gelu' "$model"; then
  fail generated_fused_calls "$bare_ew fused calls of $model lack their expression, or no ew_gelu_bias_add"
else pass generated_fused_calls; fi
if [ "$literal" != 0 ] || ! grep -qE '^  B = 1, T = 1024, Vp = 50304, C = 768' "$model" ||
   ! printf '%s\n' "$calls" | grep -qF 'k_gemm(GEMM_N, GEMM_T, B*T, FFN, C, 1,'; then
  fail generated_sizes "$literal calls of $model with sizes as numbers, or no dims enum or named GEMM"
else pass generated_sizes; fi
if ! grep -q '#include "fused.h"' "$model" || [ -e generated/gpt2/kernels.h ]; then
  fail generated_fused_header "$model does not include fused.h, or generated/gpt2/kernels.h is left"
else pass generated_fused_header; fi

# Scopes named int, B, dy and rt_x: the buffers keep clear of C's keywords, the dims' constants, the
# functions' arguments and the runtime's names, and the program compiles.
hostile=$TMP/hostile
if ! $PLAIT build tests/cli/models/hostile_scopes.lua --emit-only -o "$hostile" >"$TMP/err" 2>&1; then
  fail generated_hostile_scopes "plait build failed: $(cat "$TMP/err")"
elif ! cc -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -fopenmp -fsyntax-only -Iruntime \
     -Iruntime/cpu -I"$hostile" "$hostile/model.c" "$hostile/fused.c" >"$TMP/err" 2>&1; then
  fail generated_hostile_scopes "its model.c does not compile: $(head -c 600 "$TMP/err")"
elif ! grep -q '\*B_ = ' "$hostile/model.c" || ! grep -q '\*int_ = ' "$hostile/model.c" ||
     ! grep -q '\*dy_ = ' "$hostile/model.c" || ! grep -q '\*rt_x_fc_ = ' "$hostile/model.c"; then
  fail generated_hostile_scopes "its buffers are not B_, int_, dy_, rt_x_fc_: $(grep -E '^  act_t' "$hostile/model.c" | head -5)"
else pass generated_hostile_scopes; fi
