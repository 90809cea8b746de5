#!/bin/sh
# ep.sh: expert parallelism (--ep): a mixture's experts spread over data-parallel ranks train as one
# rank does: ep 2 (dp 2), ep 2 of dp 4, pp 2 · ep 2 · dp 2, and experts split over tp: tp 2, tp 2
# with sequence parallelism, ep 2 · tp 2, pp 2 · ep 2 · tp 2 within 1e-5 of one rank's losses in
# float and a --double build within 1e-12, on threads and under mpirun; the exchange with uneven
# counts under mpirun; checkpoints saved at ep 2 continue at ep 1 and back, at ep 2 · tp 2 at one
# rank; the plan's all-to-all bytes against a hand calculation; what is not supported is refused in
# one line; tune spreads experts over ep where every rank holding all of them does not fit; the rows
# a rank receives, sized at run time, logged at their most and planned for balanced routing.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
fixed_text "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null ||
  { fail ep_data "plait data failed"; exit 0; }
MOE="tests/cli/models/moe.lua --gbs 8"
mpirun="timeout 120 mpirun -q --oversubscribe --allow-run-as-root"

# train NAME LAYOUT [RUN FLAGS...]: builds (unless built) and trains $steps steps (10 unless set)
# into NAME.loss
train() {
  name=$1 layout=$2; shift 2
  # shellcheck disable=SC2086
  [ -x "$TMP/${prefix:-}$layout/train" ] || $PLAIT build $MOE $(echo "$layout" | tr _ ' ') \
    -o "$TMP/${prefix:-}$layout" >"$TMP/$name.log" 2>&1 || return 1
  $launcher "$TMP/${prefix:-}$layout/train" --data "$TMP/text.bin" --steps "${steps:-10}" \
    --decay-steps 10 --lr 3e-3 --seed 7 --log-json "$TMP/$name.json" "$@" \
    >>"$TMP/$name.log" 2>&1 || return 1
  sed -n 's/.*"loss": \([^,]*\),.*/\1/p' "$TMP/$name.json" >"$TMP/$name.loss"
}

# close TEST A B TOLERANCE: the losses of runs A and B (3 steps at least) agree within the relative
# tolerance
close() {
  if [ "$(wc -l <"$TMP/$2.loss")" -ge 3 ] &&
     paste "$TMP/$2.loss" "$TMP/$3.loss" | awk -v tol="$4" '
       { d = $1 - $2; if (d < 0) d = -d; if (d > tol * $1 || NF != 2) bad = 1 } END { exit bad }'
  then pass "$1"
  else fail "$1" "$(paste "$TMP/$2.loss" "$TMP/$3.loss" | head -3 | tr '\n' ' ')
    $(tail -c 300 "$TMP/$3.log")"; fi
}

launcher=""
train one --mbs_2 || fail ep_one_rank "$(tail -c 400 "$TMP/one.log")"
for layout in --mbs_2_--dp_2_--ep_2 --mbs_1_--dp_4_--ep_2 --mbs_2_--pp_2_--dp_2_--ep_2; do
  train "f$layout" "$layout"
  close "ep_as_one_rank$(echo "$layout" | tr -d '-' | sed 's/mbs_[0-9]_//')" one "f$layout" 1e-5
done
train done --mbs_2_--double && train dep --mbs_1_--dp_4_--ep_2_--double
close ep_as_one_rank_double_dp_4_ep_2 done dep 1e-12
# experts split over tp (the router whole on each tp rank, each expert's ffn split as a dense
# MLP's), with sequence parallelism, with ep 2 (world 4) and with pp 2 · ep 2 (world 8)
for layout in --mbs_2_--tp_2 --mbs_2_--tp_2_--sequence-parallel --mbs_2_--tp_2_--dp_2_--ep_2 \
  --mbs_2_--pp_2_--tp_2_--dp_2_--ep_2; do
  train "f$layout" "$layout"
  close "ep_tp_as_one_rank$(echo "$layout" | tr -d '-' | sed 's/mbs_[0-9]_//')" one "f$layout" 1e-5
done
train dtp --mbs_2_--tp_2_--dp_2_--ep_2_--double
close ep_tp_as_one_rank_double_tp_2_dp_2_ep_2 done dtp 1e-12

if command -v mpirun >/dev/null; then
  launcher="$mpirun -np 2"
  train mpi --mbs_2_--dp_2_--ep_2 && close ep_under_mpirun f--mbs_2_--dp_2_--ep_2 mpi 1e-12
  launcher=""
  if $mpirun -np 4 "$(dirname "$PLAIT")/tests/test_experts" mpi >"$TMP/x.out" 2>&1; then
    pass ep_exchange_uneven_counts_under_mpirun
  else fail ep_exchange_uneven_counts_under_mpirun "$(tail -c 400 "$TMP/x.out")"; fi
else
  fail ep_mpirun_available "mpirun not found; install openmpi-bin (make deps)"
fi

# the most rows one rank received: past the balanced T·k = 2·16·2 = 64 rows at least once (the
# buffers past the arena's room used, the losses as one rank's above), within the worst ep·64
most=$(sed -n 's/^{"expert_rows_most": \([0-9]*\)}$/\1/p' "$TMP/f--mbs_2_--dp_2_--ep_2.json")
if [ -n "$most" ] && [ "$most" -gt 64 ] && [ "$most" -le 128 ] &&
   grep -q "^experts: the most rows one rank received in an exchange $most$" \
     "$TMP/f--mbs_2_--dp_2_--ep_2.log"; then
  pass "ep_logs_most_rows_received ($most of 64 balanced)"
else fail ep_logs_most_rows_received "'$most' $(tail -c 300 "$TMP/f--mbs_2_--dp_2_--ep_2.log")"
fi

# under a capacity (each expert keeps 12 of a microbatch's 64 rows, those of the largest routing
# weights) with the load-balancing loss over the rows before any is dropped: a layout routing the
# same microbatches as one rank drops the same rows (the count in the log) and trains as it does
MOE="tests/cli/models/moe.lua --gbs 8 --set capacity_factor=0.75 aux_loss=0.01" prefix=cap
for layout in --mbs_2 --mbs_2_--dp_2_--ep_2 --mbs_2_--tp_2_--dp_2_--ep_2 \
  --mbs_2_--pp_2_--dp_2_--ep_2; do
  train "cap$layout" "$layout" && sed -n 's/.*"expert_rows_dropped": \([0-9]*\)}/\1/p' \
    "$TMP/cap$layout.json" >"$TMP/cap$layout.dropped"
  [ "$layout" = --mbs_2 ] && continue
  close "ep_capacity_as_one_rank$(echo "$layout" | tr -d '-' | sed 's/mbs_[0-9]_//')" cap--mbs_2 \
    "cap$layout" 1e-5
  if [ -s "$TMP/cap--mbs_2.dropped" ] && [ "$(cat "$TMP/cap--mbs_2.dropped")" -gt 0 ] &&
     cmp -s "$TMP/cap--mbs_2.dropped" "$TMP/cap$layout.dropped"; then
    pass "ep_capacity_drops_as_one_rank$(echo "$layout" | tr -d '-' | sed 's/mbs_[0-9]_//') \
($(cat "$TMP/cap$layout.dropped") rows)"
  else fail "ep_capacity_drops_as_one_rank$layout" "$(cat "$TMP"/cap*.dropped | tr '\n' ' ')"; fi
done
# a zero router sends every token to expert 0 (top-1, a tie to the lower index): the second ep
# rank's experts receive no row at the first step, its kernels run over empty tensors, and the
# run trains as one rank does
MOE="tests/cli/models/moe.lua --gbs 8 --set router_std=0 topk=1" prefix=idle
train idle--mbs_2 --mbs_2 && train idle_ep2 --mbs_2_--dp_2_--ep_2 &&
  close ep_rank_receiving_no_rows idle--mbs_2 idle_ep2 1e-5 ||
  fail ep_rank_receiving_no_rows "$(tail -c 400 "$TMP/idle_ep2.log")"
MOE="tests/cli/models/moe.lua --gbs 8" prefix=""

# checkpoints are logical: saved at ep 2 after 3 steps, continued at ep 1 as ep 2 continues (and
# the reverse); losses of steps 4-10 within 1e-6; the continued runs load the saved state
EP2=--mbs_2_--dp_2_--ep_2
steps=3 train save_ep2 $EP2 --save "$TMP/ck_ep2"
steps=3 train save_one --mbs_2 --save "$TMP/ck_one"
train one_from_ep2 --mbs_2 --load "$TMP/ck_ep2" && train ep2_from_ep2 $EP2 --load "$TMP/ck_ep2"
close ep_checkpoint_ep2_continues_at_ep1 ep2_from_ep2 one_from_ep2 1e-6
# and as the uninterrupted run of one rank: the file holds every rank's experts
tail -n +4 "$TMP/one.loss" >"$TMP/one_after_3.loss"
close ep_checkpoint_as_uninterrupted one_after_3 one_from_ep2 1e-6
train ep2_from_one $EP2 --load "$TMP/ck_one" && train one_from_one --mbs_2 --load "$TMP/ck_one"
close ep_checkpoint_ep1_continues_at_ep2 one_from_one ep2_from_one 1e-6
# saved at ep 2 · tp 2, every expert whole in the file: one rank continues as uninterrupted
steps=3 train save_ep2_tp2 --mbs_2_--tp_2_--dp_2_--ep_2 --save "$TMP/ck_ep2_tp2"
train one_from_ep2_tp2 --mbs_2 --load "$TMP/ck_ep2_tp2"
close ep_tp_checkpoint_continues_at_one_rank one_after_3 one_from_ep2_tp2 1e-6

# Mixtral at ep 8 over dp 8: each rank routes T·k = mbs·seq·topk = 1·4096·2 rows of hidden 4096 in
# bf16 (2 bytes); a row stays on its rank with probability 1/8, so each exchange sends
# 4096·2·(7/8)·4096·2 = 58,720,256 bytes; two exchanges forward (to the experts and back) and two
# backward: 117,440,512 bytes each way
expected=$((4096 * 2 * 7 / 8 * 4096 * 2 * 2))
$PLAIT plan models/mixtral.lua --ep 8 --dp 8 --format json >"$TMP/mixtral.json" 2>&1
if grep -q "\"alltoall_bytes_per_layer\": {\"forward\": $expected, \"backward\": $expected}" \
     "$TMP/mixtral.json" &&
   $PLAIT plan models/mixtral.lua --ep 8 --dp 8 | grep -q \
     '^experts .* 117.44 MB forward (2 exchanges), 117.44 MB backward (2)$'; then
  pass "ep_plan_alltoall_bytes ($expected per layer each way)"
else fail ep_plan_alltoall_bytes "$(grep -o '"experts[^}]*}' "$TMP/mixtral.json")"; fi
# the rows a rank's experts receive: T·k = 8192 for balanced routing, 8·8192 at worst; the memory
# table counts the balanced, close to the activations without ep (each rank's tokens the same)
acts() { # FLAGS: rank 0's activation bytes in Mixtral's plan
  # shellcheck disable=SC2086
  $PLAIT plan models/mixtral.lua --dp 8 $1 --format json |
    sed -n 's/.*"activations": \([0-9.e+]*\),.*/\1/p' | head -n1
}
with_ep=$(acts "--ep 8") without=$(acts "")
if grep -q '"received_rows": {"balanced": 8192, "worst": 65536}' "$TMP/mixtral.json" &&
   $PLAIT plan models/mixtral.lua --ep 8 --dp 8 | grep -q \
     "^ *rows a rank's experts receive, sized at run time: 8192 a mixture .* at worst 65536, " &&
   awk -v a="$with_ep" -v b="$without" 'BEGIN { exit !(a > 0 && a < 1.01 * b) }'; then
  pass "ep_plan_balanced_rows ($with_ep activation bytes at ep 8, $without without)"
else fail ep_plan_balanced_rows "$with_ep $without $(grep -o '"received[^}]*}' "$TMP/mixtral.json")"
fi
# under a capacity factor of 1.25 a rank's experts receive at most their capacity from each rank:
# 8 experts · ceil(8192 / 8 · 1.25) = 10240 rows
if $PLAIT plan models/mixtral.lua --ep 8 --dp 8 --set capacity_factor=1.25 | grep -q \
     "^ *rows a rank's experts receive, sized at run time: 8192 .* at worst 10240, .* capacity)$"
then pass ep_plan_capacity_bounds_rows
else fail ep_plan_capacity_bounds_rows "$($PLAIT plan models/mixtral.lua --ep 8 --dp 8 \
  --set capacity_factor=1.25 2>&1 | grep -A1 '^experts')"; fi
# the experts' weights a rank holds: 1/8 of them at ep 8
experts=$((32 * 8 * 3 * 14336 * 4096))
all=$($PLAIT plan models/mixtral.lua --dp 8 --format json |
  sed -n 's/.*"params": \([0-9]*\),.*/\1/p' | head -n1)
ep8=$($PLAIT plan models/mixtral.lua --dp 8 --ep 8 --format json |
  sed -n 's/.*"params": \([0-9]*\),.*/\1/p' | head -n1)
if [ -n "$all" ] && [ "$((all - ep8))" = "$((experts * 7 / 8))" ]; then
  pass "ep_plan_rank_holds_its_experts ($all -> $ep8 parameters a rank)"
else fail ep_plan_rank_holds_its_experts "$all -> $ep8, expected $((experts * 7 / 8)) fewer"; fi

expect_error ep_not_dividing_dp \
  '^plait: --ep 2 does not divide dp = 3: .*choose --ep a divisor of 3$' \
  $PLAIT plan $MOE --dp 3 --gbs 6 --ep 2
expect_error ep_not_dividing_experts '--ep 8 does not divide the 4 experts; choose --ep a divisor' \
  $PLAIT plan $MOE --dp 8 --ep 8
expect_error ep_without_experts "^plait: --ep 2 spreads a mixture's experts, and tiny has none" \
  $PLAIT plan models/tiny.lua --dp 2 --mbs 1 --gbs 2 --ep 2
expect_error ep_with_distributed_optimizer \
  '^plait: --ep 2 with the distributed optimizer is not supported yet' \
  $PLAIT plan $MOE --dp 2 --ep 2 --distributed-optimizer

# tune searches ep: with 16 experts over 2 ranks of 4.5 MB, every rank holding every expert does
# not fit (plan says so too), half of them does; tune's first layout spreads them and says why
big="tests/cli/models/moe.lua --set experts=16 ffn=128 --gbs 4"
sed 's/memory = 16e9/memory = 4.5e6/' lib/plait/machines/cpu.lua >"$TMP/small.lua"
$PLAIT tune $big --gpus 2 --tp 1 --pp 1 --machine "$TMP/small.lua" >"$TMP/tune.txt" 2>&1
first=$(sed -n 's/^the first as plan.s flags: //p' "$TMP/tune.txt")
memory() { # FLAGS: the plan's memory of rank 0 in bytes
  # shellcheck disable=SC2086
  $PLAIT plan $big $1 --machine cpu --format json |
    sed -n 's/.*"memory_bytes": \([0-9]*\),.*/\1/p' | head -n1
}
spread=$(memory "$first") single=$(memory "$(echo "$first" | sed 's/ --ep 2//')")
# the table's first row: tp, pp, dp 2, ep 2 (its column after dp's)
if echo "$first" | grep -q -- '--ep 2$' && grep -q '^ #  *tp  *pp  *dp  *ep ' "$TMP/tune.txt" &&
   grep -q '^ 1  *1  *1  *2  *2 ' "$TMP/tune.txt" &&
   grep -q '^ 1 spreads the experts over ep 2 ranks: with ep 1 the same layout needs .*, '\
'more than the 4.50 MB a device has$' "$TMP/tune.txt" &&
   [ "$spread" -le 4500000 ] && [ "$single" -gt 4500000 ]; then
  pass "ep_tune_spreads_experts_to_fit ($single bytes at ep 1, $spread at ep 2)"
else fail ep_tune_spreads_experts_to_fit "$spread $single $(head -c 1500 "$TMP/tune.txt")"; fi
