# machines.sh: machines as data. A machine file read with --machine FILE costs a plan as the built-in of
# the same numbers does; each field it lacks or has negative is named in one line; the clock follows the
# file's numbers (a faster device, a faster plan); --print costs lists every kernel with its time and
# bound, and the iteration's parts add up to its time.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
GPT="models/gpt.lua --set layers=4 hidden=1024 heads=16 --tp 2 --pp 2 --gbs 16 --recompute full"

# the built-in a100 written out as a file gives the same plan
cp lib/plait/machines/a100.lua "$TMP/a100.lua"
# shellcheck disable=SC2086
$PLAIT plan $GPT --format json >"$TMP/builtin.json" && $PLAIT plan $GPT --machine "$TMP/a100.lua" --format json >"$TMP/file.json"
if cmp -s "$TMP/builtin.json" "$TMP/file.json"; then pass machine_file_as_builtin
else fail machine_file_as_builtin "$(diff "$TMP/builtin.json" "$TMP/file.json" | head -c 600)"; fi

# twice the memory bandwidth and peak rate: every kernel faster, so the iteration is shorter
sed -e 's/bf16 = 312e12/bf16 = 624e12/' -e 's/memory_bandwidth = 2.039e12/memory_bandwidth = 4.078e12/' \
  lib/plait/machines/a100.lua >"$TMP/fast.lua"
iteration() { sed -n 's/.*"iteration_time": \([0-9.e+-]*\),.*/\1/p' "$1"; }
# shellcheck disable=SC2086
$PLAIT plan $GPT --machine "$TMP/fast.lua" --format json >"$TMP/fast.json"
if awk -v a="$(iteration "$TMP/builtin.json")" -v b="$(iteration "$TMP/fast.json")" 'BEGIN { exit !(b > 0 && b < 0.7 * a) }'; then
  pass machine_file_numbers_used
else fail machine_file_numbers_used "a100 $(iteration "$TMP/builtin.json") s, twice as fast $(iteration "$TMP/fast.json") s"; fi

# the optimizer step: the gradient norm's pass over the fp32 gradients (4 bytes a parameter), then Adam's
# 34 bytes a parameter in bf16, each a kernel at a100's copy rate (2.039 TB/s × 0.69, 4 µs a launch)
$PLAIT plan models/gpt2.lua --machine a100 --format json >"$TMP/gpt2.json"
optimizer=$(sed -n 's/.*"optimizer": \([0-9.e+-]*\)}.*/\1/p' "$TMP/gpt2.json" | head -n 1)
params=$(sed -n 's/.*"params_padded": \([0-9]*\),.*/\1/p' "$TMP/gpt2.json" | head -n 1)
if awk -v t="$optimizer" -v n="$params" 'BEGIN { e = 8e-6 + n * 38 / (2.039e12 * 0.69); exit !(n > 0 && (t - e) ^ 2 < 1e-18) }'; then
  pass optimizer_step_norm_and_adam
else fail optimizer_step_norm_and_adam "$optimizer s for $params parameters"; fi

# every field missing, or negative, is named
for field in gemm_efficiency memory_bandwidth memory_efficiency memory compute_units launch_overhead special_rate devices \
             link_bandwidth link_latency nics nic_bandwidth nic_latency; do
  grep -v "^ *$field = " lib/plait/machines/a100.lua >"$TMP/missing.lua"
  expect_error "machine_missing_$field" "^plait: machine $TMP/missing.lua: [a-z]*\.$field is missing \(.*\); add it to the machine file$" \
    $PLAIT plan models/tiny.lua --machine "$TMP/missing.lua"
  sed -e "s/^\( *$field = \)0,/\1-1,/" -e "s/^\( *$field = \)\([^-]\)/\1-\2/" lib/plait/machines/a100.lua >"$TMP/negative.lua"
  expect_error "machine_negative_$field" "^plait: machine $TMP/negative.lua: [a-z]*\.$field is -[0-9.e+-]*; it must be (0 or )?from [0-9.e+-]* to [0-9.e+-]* \(" \
    $PLAIT plan models/tiny.lua --machine "$TMP/negative.lua"
done
sed 's/bf16 = 312e12, //' lib/plait/machines/a100.lua >"$TMP/no_rate.lua"
expect_error machine_missing_rate "^plait: machine $TMP/no_rate.lua: device.flops.bf16 is missing" \
  $PLAIT plan models/tiny.lua --machine "$TMP/no_rate.lua"
sed 's/attention = "materialised"/attention = "paged"/' lib/plait/machines/a100.lua >"$TMP/attention.lua"
expect_error machine_attention_kind \
  "kernels.attention is \"paged\"; it must be \"materialised\", \"fused\", \"cudnn\" or \"plait\"$" \
  $PLAIT plan models/tiny.lua --machine "$TMP/attention.lua"
# cuDNN's attention needs plait's kernels' rates too (the calls cuDNN cannot run); plait's its own
grep -v 'plait_attention = ' lib/plait/machines/h200.lua >"$TMP/no_plait_rates.lua"
expect_error machine_missing_plait_attention "^plait: machine $TMP/no_plait_rates.lua: kernels.plait_attention is missing \
\(\{ head size, forward FLOP/s, backward FLOP/s \} of the kernel, measured\); kernels.attention \"cudnn\" times attention on it$" \
  $PLAIT plan models/tiny.lua --machine "$TMP/no_plait_rates.lua"
sed 's/attention = "cudnn",/attention = "plait",/' lib/plait/machines/h200.lua | grep -v 'cudnn_attention = ' >"$TMP/plait_only.lua"
expect_ok machine_plait_without_cudnn_rates $PLAIT plan models/tiny.lua --machine "$TMP/plait_only.lua"
# a calibrated machine's measurements: GEMM shapes { M, N, K, FLOP/s }, rate curves { FLOPs, FLOP/s } by
# FLOPs, attention kernels' rates { head size, forward, backward } by head size, memory-bound kinds'
# shares of the copy rate by kind name, every number positive. Each case: a name, the a100 file's line it edits (special_rate's or
# attention_dropout's), what it adds there, and the one line expected (after "machine FILE: ").
while IFS='|' read -r name key added expected; do
  sed "s/^\( *$key = [^,]*,\)/\1 $added,/" lib/plait/machines/a100.lua >"$TMP/$name.lua"
  expect_error "machine_$name" "^plait: machine $TMP/$name.lua: $expected" $PLAIT plan models/tiny.lua --machine "$TMP/$name.lua"
done <<'CASES'
rates_order|attention_dropout|attention_rates = { { 1e6, 1e11 }, { 1e5, 2e11 } }|kernels.attention_rates\[2\] has 100000 FLOPs, not more than the pair before it; list the pairs by FLOPs$
gemm_rates_shape|special_rate|gemm_rates = { { 1e6, 1e11 } }|device.gemm_rates\[1\] must be \{ M, N, K, FLOP/s \} \(run plait calibrate again\)$
gemm_rates_negative|special_rate|gemm_rates = { { 128, 768, 768, -5 } }|device.gemm_rates\[1\] is -5; it must be from 1000 to 1e\+18 \(the FLOP/s it ran at\)$
rates_negative|attention_dropout|attention_rates = { { 1e6, -5 } }|kernels.attention_rates\[1\] is -5; it must be from 1000 to 1e\+18 \(the FLOP/s it ran at\)$
rates_empty|special_rate|gemm_rates = {}|device.gemm_rates must list 1 to 64 shapes
head_order|attention_dropout|cudnn_attention = { { 128, 1e14, 1e14 }, { 64, 1e14, 1e14 } }|kernels.cudnn_attention\[2\] has head size 64, not more than the entry before it; list them by head size$
head_entry|attention_dropout|plait_attention = { { 64, 1e13 } }|kernels.plait_attention\[1\] must be \{ head size, forward FLOP/s, backward FLOP/s \}$
head_negative|attention_dropout|plait_attention = { { 64, 1e13, -1 } }|kernels.plait_attention\[1\] is -1; it must be from 1000 to 1e\+18 \(the backward's FLOP/s
kind_unknown|attention_dropout|memory_efficiency = { elementwse = 0.5 }|kernels.memory_efficiency names a kind "elementwse"; the kinds are elementwise, norm, bias_sums, embedding, xent, optimizer, grad_norm$
kind_above_one|attention_dropout|memory_efficiency = { norm = 1.5 }|kernels.memory_efficiency.norm is 1.5; it must be from 1e-06 to 1 \(the share of the copy rate
kind_negative|attention_dropout|memory_efficiency = { xent = -0.5 }|kernels.memory_efficiency.xent is -0.5; it must be from 1e-06 to 1
kind_table|attention_dropout|memory_efficiency = 0.5|kernels.memory_efficiency must be a table \{ kind = share, ... \}$
CASES
# absurd numbers (infinite, NaN, vanishing, negative, beyond any machine) are refused naming the field, its
# value and its range, before anything is planned: none reaches a plan as an infinite, NaN or negative time
while IFS='|' read -r name from to expected; do
  sed "s#$from#$to#" lib/plait/machines/a100.lua >"$TMP/$name.lua"
  expect_error "machine_absurd_$name" "^plait: machine $TMP/$name.lua: $expected" \
    $PLAIT plan models/tiny.lua --machine "$TMP/$name.lua"
  [ -s "$TMP/out" ] && fail "machine_absurd_${name}_plans_nothing" "$(head -c 200 "$TMP/out")"
done <<'CASES'
flops_infinite|bf16 = 312e12|bf16 = 1/0|device.flops.bf16 is inf; it must be from 1000 to 1e\+18 \(dense FLOP/s
flops_nan|bf16 = 312e12|bf16 = 0/0|device.flops.bf16 is -?nan; it must be from 1000 to 1e\+18
flops_tiny|bf16 = 312e12|bf16 = 1e-300|device.flops.bf16 is 1e-300; it must be from 1000 to 1e\+18
flops_negative|bf16 = 312e12|bf16 = -312e12|device.flops.bf16 is -3.12e\+14; it must be from 1000 to 1e\+18
tile_huge|gemm_tile = { [0-9]*,|gemm_tile = { 1e18,|device.gemm_tile\[1\] is 1e\+18; it must be from 1 to 65536 \(rows
bandwidth_tiny|memory_bandwidth = 2.039e12|memory_bandwidth = 1e-300|device.memory_bandwidth is 1e-300; it must be from 1000 to 1e\+16
latency_huge|link_latency = [0-9.e-]*|link_latency = 1e300|node.link_latency is 1e\+300; it must be 0 or from 0 to 10
special_tiny|special_rate = [0-9.e]*|special_rate = 1e-300|device.special_rate is 1e-300; it must be 0 or from 1000 to 1e\+18
CASES
echo 'return 42' >"$TMP/number.lua"
expect_error machine_not_a_table "^plait: machine $TMP/number.lua: the file must return a table" \
  $PLAIT plan models/tiny.lua --machine "$TMP/number.lua"
echo 'return { name = ' >"$TMP/syntax.lua"
expect_error machine_syntax_error "^plait: machine $TMP/syntax.lua: $TMP/syntax.lua:[0-9]+: unexpected symbol" \
  $PLAIT plan models/tiny.lua --machine "$TMP/syntax.lua"
echo 'return { name = io.open("/etc/passwd") }' >"$TMP/reads.lua"
expect_error machine_has_no_libraries "attempt to index a nil value \(global 'io'\)" \
  $PLAIT plan models/tiny.lua --machine "$TMP/reads.lua"
echo 'while true do end' >"$TMP/loop.lua"
within machine_loop_ends 30 expect_error machine_loop \
  "^plait: machine $TMP/loop.lua: $TMP/loop.lua:1: the machine file ran more than 10000000 Lua instructions \(a loop that does not end\?\); a machine file is a table of numbers$" \
  timeout 60 $PLAIT plan models/tiny.lua --machine "$TMP/loop.lua"
echo 'local t = {} for i = 1, 1e9 do t[i] = i end return t' >"$TMP/big.lua"
within machine_memory_ends 30 expect_error machine_memory \
  "^plait: machine $TMP/big.lua: the machine file used more than 16 MB of Lua memory; a machine file is a table of numbers$" \
  timeout 60 $PLAIT plan models/tiny.lua --machine "$TMP/big.lua"
expect_error machine_file_absent "^plait: --machine $TMP/absent.lua: cannot read the machine file" \
  $PLAIT plan models/tiny.lua --machine "$TMP/absent.lua"

# --print costs: every kernel with a bound; the parts of the iteration add up to it
# shellcheck disable=SC2086
if $PLAIT plan $GPT --print costs >"$TMP/costs"; then
  kernels=$(grep -c ' µs ' "$TMP/costs")
  unbound=$(grep ' µs ' "$TMP/costs" | grep -c -v -E 'µs  (compute|quantisation|memory|latency|communication) ')
  allreduces=$(sed -n '/^block/,/^head/p' "$TMP/costs" | grep -c -E 'allreduce .* (communication|latency) ')
  [ "$kernels" -gt 20 ] && [ "$unbound" = 0 ] && [ "$allreduces" = 4 ] && pass print_costs_kernels ||
    fail print_costs_kernels "$kernels kernels, $unbound without a bound, $allreduces TP all-reduces in the block (4 expected)"
  if awk '/^iteration/ { gsub(/[=+;]/, " "); s = $5 + $7 + $9 + $11 + $13 + $15 - $2; exit !(s * s < 1e-6 * $2 * $2) }' "$TMP/costs" &&
     grep -q '^iteration' "$TMP/costs"; then pass print_costs_breakdown_adds_up
  else fail print_costs_breakdown_adds_up "$(grep '^iteration' "$TMP/costs")"; fi
else fail print_costs_kernels "plan --print costs failed"; fi
