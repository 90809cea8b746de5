#!/bin/sh
# scatter_gather.sh: pipeline transfers between nodes of an activation every tensor-parallel rank
# holds whole go a 1/tp slice per rank and are all-gathered over TP inside the receiving node
# (Narayanan et al. 2021, §4.1). Nodes are laid out on this machine with PLAIT_RANKS_PER_NODE, as a
# launcher would place ranks: the losses equal the one-node run's bit for bit (threads and mpirun),
# and the bytes the runtime sends across the node boundary equal the plan's for a machine of that
# many devices a node, with and without the scatter. For Table 1's layouts with pipelines the plan's
# cross-node bytes are 1/t of those sent whole, and the iteration is shorter.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
fixed_text "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null ||
  { fail scatter_gather_data "plait data failed"; exit 0; }
# the cpu machine with two devices a node
sed 's/devices = 1048576/devices = 2/; s/name = "cpu"/name = "cpu-two-a-node"/' \
  lib/plait/machines/cpu.lua >"$TMP/two.lua"
LAYOUT="models/tiny.lua --tp 2 --pp 2 --mbs 2 --gbs 8"
mpirun="timeout 120 mpirun -q --oversubscribe --allow-run-as-root -np 4 -x PLAIT_RANKS_PER_NODE"

field() { sed -n "s/.*\"$1\": \([0-9.e+-]*\).*/\1/p" "$2"; }
# train NAME PROGRAM [LAUNCHER...]: 4 steps; NAME.loss and NAME.bytes (rank 0's across nodes)
train() {
  out=$1 program=$2; shift 2
  "$@" "$TMP/$program/train" --data "$TMP/text.bin" --steps 4 --log-json "$TMP/$out.json" \
    >"$TMP/$out.log" 2>&1 || return 1
  field loss "$TMP/$out.json" >"$TMP/$out.loss"
  field pp_bytes_across_nodes "$TMP/$out.json" | sort -u >"$TMP/$out.bytes"
}

for sg in on off; do
  # shellcheck disable=SC2086
  if ! $PLAIT build $LAYOUT --scatter-gather $sg -o "$TMP/$sg" >"$TMP/build.log" 2>&1; then
    fail "scatter_gather_build_$sg" "$(tail -c 300 "$TMP/build.log")"; continue
  fi
  # shellcheck disable=SC2086
  planned=$($PLAIT plan $LAYOUT --scatter-gather $sg --machine "$TMP/two.lua" --format json |
    field pp_across_nodes /dev/stdin)
  if ! train "one_node_$sg" "$sg"; then
    fail "scatter_gather_one_node_$sg" "$(tail -c 300 "$TMP/one_node_$sg.log")"; continue
  fi
  runs="threads"
  command -v mpirun >/dev/null && runs="threads mpi"
  for launch in $runs; do
    name="two_nodes_${sg}_$launch"
    if [ "$launch" = mpi ]; then PLAIT_RANKS_PER_NODE=2 train "$name" "$sg" $mpirun
    else PLAIT_RANKS_PER_NODE=2 train "$name" "$sg"; fi || {
      fail "scatter_gather_$name" "$(tail -c 300 "$TMP/$name.log")"; continue; }
    measured=$(cat "$TMP/$name.bytes")
    if ! cmp -s "$TMP/one_node_$sg.loss" "$TMP/$name.loss"; then
      fail "scatter_gather_$name" "losses differ from one node's:" \
        "$(paste "$TMP/one_node_$sg.loss" "$TMP/$name.loss" | head -2 | tr '\n\t' '; ')"
    elif [ -z "$planned" ] || [ "$measured" != "$planned" ]; then
      fail "scatter_gather_$name" "rank 0 sent $measured bytes across nodes, the plan $planned"
    else pass "scatter_gather_$name (losses equal, $measured bytes across nodes as planned)"; fi
  done
done
# scattered: half of what goes whole at tp 2
on=$(cat "$TMP/two_nodes_on_threads.bytes" 2>/dev/null)
off=$(cat "$TMP/two_nodes_off_threads.bytes" 2>/dev/null)
if [ -n "$on" ] && [ -n "$off" ] && [ $((on * 2)) = "$off" ]; then
  pass "scatter_gather_halves ($off -> $on)"
else fail scatter_gather_halves "bytes across nodes: scattered $on, whole $off"; fi
# on one node nothing crosses
one=$(cat "$TMP/one_node_on.bytes" 2>/dev/null)
if [ "$one" = 0 ]; then pass scatter_gather_one_node_sends_none
else fail scatter_gather_one_node_sends_none "rank 0 counted $one bytes"; fi

refusal='^plait: PLAIT_RANKS_PER_NODE=3 does not divide the 4 ranks of the job into nodes; '
expect_error scatter_gather_ranks_per_node_divide \
  "${refusal}give a whole number that divides 4, or unset it\$" \
  env PLAIT_RANKS_PER_NODE=3 "$TMP/on/train" --data "$TMP/text.bin" --steps 1

# Table 1's layouts with pipelines (Narayanan et al. 2021, a100, 8 GPUs a node, t = 8): each stage
# on nodes of its own, so every transfer crosses nodes, scattered 1/8 a rank.
while read -r params heads hidden layers p v gbs; do
  schedule=1f1b; [ "$v" -gt 1 ] && schedule=interleaved
  model="models/gpt.lua --set layers=$layers hidden=$hidden heads=$heads"
  for sg in on off; do
    # shellcheck disable=SC2086
    $PLAIT plan $model --tp 8 --pp "$p" --vpp "$v" --gbs "$gbs" --schedule $schedule \
      --recompute full --scatter-gather $sg --machine a100 --format json >"$TMP/$sg.json"
  done
  on=$(field pp_across_nodes "$TMP/on.json") off=$(field pp_across_nodes "$TMP/off.json")
  if awk -v on="$on" -v off="$off" \
       -v ton="$(field iteration_time "$TMP/on.json" | head -1)" \
       -v toff="$(field iteration_time "$TMP/off.json" | head -1)" \
       'BEGIN { exit !(on > 0 && on * 8 == off && ton < toff) }'; then
    pass "scatter_gather_table1_$params"
  else fail "scatter_gather_table1_$params" "across nodes $on scattered, $off whole"; fi
done <<'ROWS'
39.1B 64 8192 48 2 1 1536
76.1B 80 10240 60 4 3 1792
145.6B 96 12288 80 8 2 2304
175B 96 12288 96 12 2 48
ROWS

# the plan's trace says which transfers end in an all-gather inside the node (args.gather_us), and
# so does the step's with the distributed optimizer (the weights'); the SVG draws both in purple
# with a legend entry; without either there is none
# shellcheck disable=SC2086
$PLAIT plan $LAYOUT --dp 2 --machine "$TMP/two.lua" --format trace >"$TMP/on.trace" 2>&1
# shellcheck disable=SC2086
$PLAIT plan $LAYOUT --dp 2 --machine "$TMP/two.lua" --distributed-optimizer --format trace \
  >"$TMP/dopt.trace" 2>&1
# shellcheck disable=SC2086
$PLAIT plan $LAYOUT --dp 2 --machine "$TMP/two.lua" --scatter-gather off --format svg \
  >"$TMP/off.svg" 2>&1
# shellcheck disable=SC2086
$PLAIT plan $LAYOUT --dp 2 --machine "$TMP/two.lua" --format svg >"$TMP/on.svg" 2>&1
gathered_sends=$(grep -c '"name":"[0-9]*SEND_[FB][0-9]*".*"gather_us":[0-9.]*[1-9]' "$TMP/on.trace")
sends=$(grep -c '"name":"[0-9]*SEND_[FB][0-9]*"' "$TMP/on.trace")
if [ "$gathered_sends" -gt 0 ] && [ "$gathered_sends" = "$sends" ] &&
   ! grep -q '"name":"STEP".*gather_us' "$TMP/on.trace" &&
   grep -q '"name":"STEP".*"gather_us":[0-9.]*[1-9]' "$TMP/dopt.trace" &&
   grep -q '>all-gather<' "$TMP/on.svg" && ! grep -q '>all-gather<' "$TMP/off.svg"; then
  pass "scatter_gather_drawn ($gathered_sends of $sends sends end in a gather; so does the step \
with the distributed optimizer)"
else
  fail scatter_gather_drawn "sends $sends, gathered $gathered_sends: $(grep -m2 S "$TMP/on.trace")"
fi
