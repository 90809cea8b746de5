# bench.sh: benchmarks (make bench): ratios measured in the same run, never bare times in a test.
#   Table 1 of Narayanan et al. (2021): the plan's TFLOP/s per GPU on the a100 machine against the paper's;
#   plait tune on each of its models: the chosen layout, its memory and TFLOP/s beside the paper's layout's
#   (the plan's for both), and the search's time (target: under 10 s for the 1T model over 3072 GPUs).
#   This machine: plait calibrate's machine files (one rank, two ranks), then for layouts of tiny and of a
#   GPT-2-shaped model (threads and mpirun) the plan's iteration time against DIR/train's (median of steps
#   after the first), the error per layout, and the pairs the plan orders otherwise than measured; tune's
#   first choice for tiny on 2 ranks against the measured fastest of its top five.
#   Tokenizing 100 MB of text on one core: plait data --tokenizer beside Hugging Face tokenizers.
#   The machine: its single-precision GEMM rate (measured by each program at start-up) and its memory
#   bandwidth (build/tools/membw: a STREAM-like triad, an Adam-like pass over seven streams).
#   GPT-2 124M at B=4, T=64 (llm.c's CPU reference configuration): the step against its floor (its GEMM
#   and attention FLOPs at the GEMM rate, the optimizer's bytes at the Adam-like rate, the other kernels'
#   bytes at the triad's), its model FLOPs over the GEMM rate, the step by kind of work (--profile), the
#   attention kernels alone on its shape (build/tools/attention_bench), and llm.c's train_gpt2.c on the
#   same shape and tokens; the same model at gbs 32 (8 microbatches); peak resident memory against the
#   plan's prediction.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
PLAIT=$root/build/plait
TOOLS=$root/build/tools
LLMC=$root/../shared/peers/llm.c
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

cat $(ls /usr/share/games/fortunes/* | grep -v -e '\.dat$' -e '\.u8$') > "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null

# median of a JSON field over the step lines after the first (warm-up)
median() { grep '"step"' "$1" | grep -v '"val_loss"' | tail -n +2 | sed "s/.*\"$2\": \([0-9.e+-]*\).*/\1/" | sort -g |
           awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# a number of the profile's JSON line: profile FILE KIND FIELD (ms, flops or bytes a step)
profile() { grep '"profile_steps"' "$1" | sed "s/.*\"$2\": {\"ms\": \([^,]*\), \"flops\": \([^,]*\), \"bytes\": \([^}]*\)}.*/\1 \2 \3/" |
            awk -v f="$3" '{ print f == "ms" ? $1 : f == "flops" ? $2 : $3 }'; }
# the GEMM rate a program measured at start-up, in FLOP/s
gemm_rate() { sed -n 's/.*MFU against \([0-9.]*\) GFLOP\/s.*/\1/p' "$1" | awk '{ print $1 * 1e9 }'; }

echo "== this machine's memory bandwidth (every core, arrays of 124M floats)"
$TOOLS/membw > "$TMP/membw.out" || exit 1
triad=$(sed -n 's/^triad GB\/s //p' "$TMP/membw.out")
adam=$(sed -n 's/^adam GB\/s //p' "$TMP/membw.out")
printf "  triad (a = b + s·c, 12 B an element)         %8.1f GB/s\n" "$triad"
printf "  Adam-like (p, g, m, v read; p, m, v written) %8.1f GB/s\n" "$adam"

echo "== Table 1 of Narayanan et al. (2021): plait plan --machine a100 against the paper's TFLOP/s per GPU"
echo "   (layouts of Megatron-LM's examples/sc21/run_table_1.sh; full recomputation; dropout 0.1; its DDP=torch rows"
echo "   reduce gradients during the backward (--grad-reduce overlap), its DDP=local rows after it (--grad-reduce after))"
printf '  %8s  %3s %3s %2s %4s %5s %-7s  %9s  %6s  %7s\n' params t p v mbs GPUs reduce predicted paper error
while read -r params heads hidden layers t p v mbs gpus batch reduce paper; do
  schedule=1f1b; [ "$v" -gt 1 ] && schedule=interleaved
  predicted=$($PLAIT plan models/gpt.lua --set layers="$layers" hidden="$hidden" heads="$heads" dropout=0.1 --tp "$t" \
    --pp "$p" --vpp "$v" --dp $((gpus / (t * p))) --mbs "$mbs" --gbs "$batch" --schedule $schedule --recompute full \
    --grad-reduce "$reduce" --machine a100 --format json | sed -n 's/.*"flops_per_device": \([0-9.e+]*\),.*/\1/p')
  awk -v n="$params" -v t="$t" -v p="$p" -v v="$v" -v b="$mbs" -v g="$gpus" -v r="$reduce" -v x="$predicted" -v paper="$paper" 'BEGIN {
    printf "  %8s  %3d %3d %2d %4d %5d %-7s  %9.1f  %6d  %+7.2f%%\n", n, t, p, v, b, g, r, x / 1e12, paper, 100 * (x / 1e12 - paper) / paper }'
done <<'ROWS'
1.7B 24 2304 24 1 1 1 16 32 512 overlap 137
3.6B 32 3072 30 2 1 1 16 64 512 overlap 138
7.5B 32 4096 36 4 1 1 16 128 512 overlap 142
18.4B 48 6144 40 8 1 1 8 256 1024 overlap 135
39.1B 64 8192 48 8 2 1 4 512 1536 after 138
76.1B 80 10240 60 8 4 3 2 1024 1792 after 140
145.6B 96 12288 80 8 8 2 2 1536 2304 after 148
310.1B 128 16384 96 8 16 2 1 1920 2160 after 155
529.6B 128 20480 105 8 35 3 1 2520 2520 after 163
1008.0B 160 25600 128 8 64 1 1 3072 3072 after 163
ROWS

echo "== Korthikanti et al. (2022), Megatron-LM a year later on the same A100s: measured iteration times (Table 5,"
echo "   full recomputation, no data parallelism, s 2048) against plait plan --machine a100; a check the a100 file"
echo "   takes one number from (its memory efficiency, from the 22B layer's attention core in Table 4)"
printf '  %6s %3s %3s %2s %4s %5s  %10s  %8s  %7s\n' model t p v mbs batch predicted measured error
while read -r name heads hidden layers t p v mbs batch measured; do
  schedule=1f1b; [ "$v" -gt 1 ] && schedule=interleaved
  predicted=$($PLAIT plan models/gpt.lua --set layers="$layers" hidden="$hidden" heads="$heads" dropout=0.1 --tp "$t" \
    --pp "$p" --vpp "$v" --mbs "$mbs" --gbs "$batch" --schedule $schedule --recompute full --machine a100 \
    --format json | sed -n 's/.*"iteration_time": \([0-9.e+-]*\).*/\1/p' | head -n 1)
  awk -v n="$name" -v t="$t" -v p="$p" -v v="$v" -v b="$mbs" -v g="$batch" -v x="$predicted" -v m="$measured" 'BEGIN {
    printf "  %6s %3d %3d %2d %4d %5d  %8.2f s  %6.2f s  %+6.1f%%\n", n, t, p, v, b, g, x, m, 100 * (x - m) / m }'
done <<'ROWS'
22B 64 6144 48 8 1 1 4 4 1.42
175B 96 12288 96 8 8 3 1 64 18.13
1T 160 25600 128 8 64 1 1 512 94.42
ROWS

json_field() { sed -n "s/.*\"$1\": \([0-9.e+-]*\).*/\1/p" | head -n 1; }
echo "== scatter/gather (Narayanan et al. 2021, §4.1, Figure 18: the 175B model, t 8, p 12,"
echo "   interleaved, 96 A100s: up to 11% more throughput with it); the plan's TFLOP/s per GPU"
echo "   without and with it (a100)"
printf '  %6s  %10s  %10s  %6s\n' batch without with gain
for batch in 12 24 36 48 60; do
  for sg in off on; do
    $PLAIT plan models/gpt.lua --set layers=96 hidden=12288 heads=96 dropout=0.1 --tp 8 --pp 12 \
      --vpp 2 --gbs "$batch" --schedule interleaved --scatter-gather $sg --machine a100 \
      --format json | json_field flops_per_device >"$TMP/sg_$sg"
  done
  awk -v b="$batch" -v off="$(cat "$TMP/sg_off")" -v on="$(cat "$TMP/sg_on")" 'BEGIN {
    printf "  %6d  %10.1f  %10.1f  %+5.1f%%\n", b, off / 1e12, on / 1e12, 100 * (on / off - 1) }'
done

echo "== plait tune on Table 1's models, GPU counts and batches (a100, 80 GB): its first choice against the paper's layout"
echo "   (time: the search's wall time; chosen/paper: the plan's iteration time of the paper's layout over the chosen's)"
printf '  %8s  %-66s %8s %8s %8s %8s %7s\n' params "chosen layout" memory TFLOP/s paper-l. chosen/p "time"
while read -r params heads hidden layers t p v mbs gpus batch; do
  model="models/gpt.lua --set layers=$layers hidden=$hidden heads=$heads dropout=0.1"
  schedule=1f1b; [ "$v" -gt 1 ] && schedule=interleaved
  # shellcheck disable=SC2086
  $PLAIT tune $model --gpus "$gpus" --gbs "$batch" --machine a100 --format json >"$TMP/tune.json" || exit 1
  # shellcheck disable=SC2086
  $PLAIT plan $model --tp "$t" --pp "$p" --vpp "$v" --dp $((gpus / (t * p))) --mbs "$mbs" --gbs "$batch" \
    --schedule $schedule --recompute full --machine a100 --format json >"$TMP/paper.json" || exit 1
  awk -v n="$params" -v flags="$(sed -n 's/.*"flags": "\(.*\)"}.*/\1/p' "$TMP/tune.json" | head -n 1 | sed 's/--schedule //; s/--recompute /recompute=/; s/--sequence-parallel/sp/; s/--//g')" \
      -v mem="$(json_field memory_bytes <"$TMP/tune.json")" -v cap="$(json_field memory_capacity <"$TMP/tune.json")" \
      -v x="$(json_field flops_per_device <"$TMP/tune.json")" -v px="$(json_field flops_per_device <"$TMP/paper.json")" \
      -v it="$(json_field iteration_time <"$TMP/tune.json")" -v pit="$(json_field iteration_time <"$TMP/paper.json")" \
      -v secs="$(json_field seconds <"$TMP/tune.json")" 'BEGIN {
    printf "  %8s  %-66s %5.1f GB %8.1f %8.1f %8.2f %5.2f s%s%s\n", n, flags, mem / 1e9, x / 1e12, px / 1e12, pit / it, secs,
      (mem <= cap ? "" : "  (does not fit)"), (pit >= it ? "" : "  (slower than the paper'"'"'s)") }'
done <<'ROWS'
1.7B 24 2304 24 1 1 1 16 32 512
3.6B 32 3072 30 2 1 1 16 64 512
7.5B 32 4096 36 4 1 1 16 128 512
18.4B 48 6144 40 8 1 1 8 256 1024
39.1B 64 8192 48 8 2 1 4 512 1536
76.1B 80 10240 60 8 4 3 2 1024 1792
145.6B 96 12288 80 8 8 2 2 1536 2304
310.1B 128 16384 96 8 16 2 1 1920 2160
529.6B 128 20480 105 8 35 3 1 2520 2520
1008.0B 160 25600 128 8 64 1 1 3072 3072
ROWS

echo "== this machine: plait calibrate, then the plan's iteration time against DIR/train's (median of steps after the first)"
echo "   (load average at the start: $(cut -d ' ' -f 1-3 /proc/loadavg) on $(nproc) cores; other work on the machine slows two ranks most)"
mpirun="mpirun -q --oversubscribe --allow-run-as-root -np 2"
$PLAIT calibrate --ranks 1 -o "$TMP/one_rank.lua" || exit 1
$PLAIT calibrate --ranks 2 -o "$TMP/two_ranks.lua" || exit 1
$PLAIT calibrate --ranks 2 --launcher "$mpirun" -o "$TMP/two_processes.lua" || exit 1
sed -n 's/.*about = "\(.*\)",/  \1/p' "$TMP/one_rank.lua" "$TMP/two_ranks.lua"
sed -n 's/.*about = "this machine, \(.*\)",/  this machine, under mpirun: \1/p' "$TMP/two_processes.lua"
# Each layout is built and predicted once, then run in rounds (every layout once per round, 6 steps) so
# that the machine's other load falls on all of them alike; measured: the median over the rounds of each
# run's median step after the first.
prepare() { # name launcher model-and-layout...
  name=$1 launcher=$2; shift 2
  # shellcheck disable=SC2086
  $PLAIT build "$@" -o "$TMP/m_$name" >/dev/null || exit 1
  world=$($PLAIT plan "$@" --machine cpu --format json |
          sed -n 's/.*"layout": {"tp": \([0-9]*\), "pp": \([0-9]*\), "vpp": [0-9]*, "dp": \([0-9]*\).*/\1 \2 \3/p' |
          awk '{ print $1 * $2 * $3 }')
  machine="$TMP/one_rank.lua"; [ "$world" -gt 1 ] && machine="$TMP/two_ranks.lua"
  [ -n "$launcher" ] && machine="$TMP/two_processes.lua"
  $PLAIT plan "$@" --machine "$machine" --format json | sed -n 's/.*"iteration_time": \([0-9.e+-]*\),.*/\1/p' \
    >"$TMP/m_$name.predicted"
  echo "$launcher" >"$TMP/m_$name.launcher"
}
run_rounds() { # rounds name...
  rounds=$1; shift
  for _ in $(seq "$rounds"); do
    for name in "$@"; do
      # shellcheck disable=SC2046
      $(cat "$TMP/m_$name.launcher") "$TMP/m_$name/train" --data "$TMP/text.bin" --steps 6 --log-json "$TMP/m_$name.json" \
        >/dev/null </dev/null || exit 1
      median "$TMP/m_$name.json" ms >>"$TMP/m_$name.runs"
    done
  done
}
result() { # name: "predicted measured" in seconds
  echo "$(cat "$TMP/m_$1.predicted") $(sort -g "$TMP/m_$1.runs" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] / 1000 }')"
}
TINY8="models/tiny.lua --set layers=8 --mbs 4 --gbs 32"
GPT2S="models/gpt2.lua --set layers=2 seq=64 --mbs 2 --gbs 8"
names=
while read -r name launcher model layout; do
  [ "$launcher" = threads ] && launcher=""; [ "$launcher" = mpirun ] && launcher=$mpirun
  [ "$model" = tiny ] && model=$TINY8; [ "$model" = gpt2 ] && model=$GPT2S
  # shellcheck disable=SC2086
  prepare "$name" "$launcher" $model $layout
  names="$names $name"
done <<'LAYOUTS'
tiny:one-rank threads tiny
tiny:dp2 threads tiny --dp 2
tiny:tp2 threads tiny --tp 2
tiny:tp2-sp threads tiny --tp 2 --sequence-parallel
tiny:pp2-1f1b threads tiny --pp 2
tiny:pp2-gpipe threads tiny --pp 2 --schedule gpipe
tiny:pp2-vpp2-interleaved threads tiny --pp 2 --vpp 2 --schedule interleaved
tiny:dp2-recompute threads tiny --dp 2 --recompute full
tiny:dp2-mpirun mpirun tiny --dp 2
gpt2:one-rank threads gpt2
gpt2:tp2 threads gpt2 --tp 2
gpt2:pp2 threads gpt2 --pp 2
LAYOUTS
# shellcheck disable=SC2086
run_rounds 3 $names
printf '  %-34s %10s %10s %8s\n' layout predicted measured error
for name in $names; do
  # shellcheck disable=SC2046
  set -- $(result "$name")
  echo "$name $1 $2" >>"$TMP/layouts.txt"
  awk -v n="$name" -v p="$1" -v m="$2" 'BEGIN { printf "  %-34s %8.1f ms %8.1f ms %+7.1f%%\n", n, 1e3 * p, 1e3 * m, 100 * (p - m) / m }'
done
awk '{ n[NR] = $1; p[NR] = $2; m[NR] = $3; e = (p[NR] - m[NR]) / m[NR]; if (e < 0) e = -e; if (e <= 0.2) within++ }
  END {
    for (i = 1; i <= NR; i++) for (j = i + 1; j <= NR; j++) {
      if (m[i] > 1.2 * m[j] || m[j] > 1.2 * m[i]) { pairs++; if ((m[i] > m[j]) != (p[i] > p[j])) { wrong++; list = list " " n[i] "/" n[j] } }
    }
    printf "  within 20%%: %d of %d layouts (target: all)\n", within, NR
    printf "  pairs measured more than 20%% apart: %d, ordered otherwise by the plan: %d (target 0)%s\n", pairs, wrong, list
  }' "$TMP/layouts.txt"

echo "== tune's first choice for tiny on 2 ranks (this machine's two-rank file) against its top five measured"
# shellcheck disable=SC2086
$PLAIT tune $TINY8 --gpus 2 --machine "$TMP/two_ranks.lua" --format json >"$TMP/tiny_tune.json" || exit 1
sed -n 's/.*"flags": "\(.*\)"}.*/\1/p' "$TMP/tiny_tune.json" >"$TMP/tiny_top.txt"
i=0
while read -r flags; do
  i=$((i + 1))
  # shellcheck disable=SC2086
  prepare "top$i" "" models/tiny.lua --set layers=8 --gbs 32 $flags
done <"$TMP/tiny_top.txt"
run_rounds 3 top1 top2 top3 top4 top5
i=0
while read -r flags; do
  i=$((i + 1))
  # shellcheck disable=SC2046
  set -- $(result "top$i")
  echo "$i $1 $2" >>"$TMP/tiny_top_times.txt"
  awk -v i="$i" -v f="$flags" -v p="$1" -v m="$2" 'BEGIN { printf "  %d  %-74s %7.1f ms predicted %7.1f ms measured\n", i, f, 1e3 * p, 1e3 * m }'
done <"$TMP/tiny_top.txt"
awk 'NR == 1 { first = $3 } { if (best == "" || $3 < best) { best = $3; at = $1 } }
  END { printf "  measured fastest: choice %d; the first choice is %.2f of its time (target: 1, or within 1.10)\n", at, first / best }' \
  "$TMP/tiny_top_times.txt"

echo "== GPT-2 124M, B=4, T=64, one rank (fp32)"
GPT2="models/gpt2.lua --set seq=64 --mbs 4 --gbs 4"
# shellcheck disable=SC2086
$PLAIT build $GPT2 -o "$TMP/gpt2" >/dev/null || exit 1
"$TMP/gpt2/train" --data "$TMP/text.bin" --steps 6 --lr 1e-4 --profile --log-json "$TMP/gpt2.json" >"$TMP/gpt2.out" || exit 1
# shellcheck disable=SC2086
predicted=$($PLAIT plan $GPT2 --machine cpu --format json | grep '"memory_bytes"' | sed 's/.*"memory_bytes": \([0-9]*\).*/\1/')
resident=$(grep peak_resident_bytes "$TMP/gpt2.json" | sed 's/.*"peak_resident_bytes": \([0-9]*\).*/\1/')
j=$TMP/gpt2.json
memory_bound=0
for kind in norm elementwise rope split_concat bias_sums embedding xent grad_norm; do
  memory_bound=$(awk -v a="$memory_bound" -v b="$(profile "$j" $kind bytes)" 'BEGIN { print a + b }')
done
awk -v ms="$(median "$j" ms)" -v tps="$(median "$j" tokens_per_s)" -v mfu="$(median "$j" mfu)" \
    -v rate="$(gemm_rate "$TMP/gpt2.out")" -v gemm="$(profile "$j" gemm flops)" -v attn="$(profile "$j" attention flops)" \
    -v optim="$(profile "$j" optimizer bytes)" -v other="$memory_bound" -v adam="$adam" -v triad="$triad" 'BEGIN {
  floor_ms = 1e3 * ((gemm + attn) / rate + optim / (adam * 1e9) + other / (triad * 1e9))
  printf "  step time (median of 5 after the first)  %8.1f ms   (%.1f tokens/s)\n", ms, tps
  printf "  the GEMM rate (this run)                 %8.1f GFLOP/s\n", rate / 1e9
  printf "  floor: GEMM and attention FLOPs          %8.1f ms   (%.1f GFLOP)\n", 1e3 * (gemm + attn) / rate, (gemm + attn) / 1e9
  printf "         optimizer bytes                   %8.1f ms   (%.2f GB at the Adam-like rate)\n", 1e3 * optim / (adam * 1e9), optim / 1e9
  printf "         other kernels bytes               %8.1f ms   (%.2f GB at the triad rate)\n", 1e3 * other / (triad * 1e9), other / 1e9
  printf "  step / floor                             %8.2f   (target 1.25 or less)\n", ms / floor_ms
  printf "  model FLOP/s / GEMM rate                 %8.2f   (target 0.60 or more)\n", mfu
}'
sed -n '/^profile over/,$p' "$TMP/gpt2.out" | sed 's/^/  /'
"$TOOLS/attention_bench" 0.5 gpt2 | awk '/^gpt2/ {
  printf "  attention kernels alone (build/tools/attention_bench): %.3f ms forward, %.3f backward, %.2f of the GEMM rate\n",
    $(NF - 3), $(NF - 2), $NF }'
awk -v rss="$resident" -v plan="$predicted" 'BEGIN {
  printf "  peak resident memory                     %8.1f MB\n", rss / 1e6
  printf "  plan prediction                          %8.1f MB\n", plan / 1e6
  printf "  resident / predicted                     %8.2f   (target within 1.2)\n", rss / plan
}'

echo "== GPT-2 124M at dp 2 and dp 4 (threads), without and with the distributed optimizer"
# Peak resident memory of the process (every rank's) against the plan's bytes of its ranks; what
# sharding Adam's m and v over the data-parallel ranks saves, measured and planned.
held='s/.*"peak_resident_bytes": \([0-9]*\), "planned_bytes": \([0-9]*\).*/\1 \2/p'
for dp in 2 4; do
  for sharded in no yes; do
    flag=; [ $sharded = yes ] && flag=--distributed-optimizer
    # shellcheck disable=SC2086
    $PLAIT build models/gpt2.lua --set seq=64 --mbs 1 --dp $dp $flag -o "$TMP/dopt" >/dev/null ||
      exit 1
    "$TMP/dopt/train" --data "$TMP/text.bin" --steps 2 --log-json "$TMP/dopt.json" >/dev/null ||
      exit 1
    echo "$dp $sharded $(sed -n "$held" "$TMP/dopt.json")" >>"$TMP/dopt.txt"
  done
done
awk '{ printf "  dp %d, sharded %-3s  resident %7.1f MB, planned %7.1f MB: %5.2f", $1, $2,
         $3 / 1e6, $4 / 1e6, $3 / $4
       printf " (target within 1.1)\n"
       if ($2 == "no") { rss = $3; plan = $4; next }
       printf "  dp %d: sharding saves %.1f MB measured, %.1f MB planned\n", $1,
         (rss - $3) / 1e6, (plan - $4) / 1e6 }' "$TMP/dopt.txt"

echo "== GPT-2 124M at B=4, T=512: recomputation none, selective and full (threads, one rank)"
echo "   step time (median after the first) against none's (targets: selective under 5% more, full"
echo "   about 33%), peak resident memory against the plan's bytes (target within 1.1)"
for recompute in none selective full; do
  $PLAIT build models/gpt2.lua --set seq=512 --mbs 4 --recompute $recompute -o "$TMP/rc" \
    >/dev/null || exit 1
  "$TMP/rc/train" --data "$TMP/text.bin" --steps 6 --lr 1e-4 --log-json "$TMP/rc.json" \
    >/dev/null || exit 1
  echo "$recompute $(median "$TMP/rc.json" ms) $(sed -n "$held" "$TMP/rc.json")" >>"$TMP/rc.txt"
done
awk '{ if ($1 == "none") base = $2
       printf "  %-9s %8.1f ms a step (%+5.1f%%), resident %7.1f MB, planned %7.1f MB: %5.2f\n",
         $1, $2, 100 * ($2 / base - 1), $3 / 1e6, $4 / 1e6, $3 / $4 }' "$TMP/rc.txt"

echo "== the same at gbs 32 (8 microbatches of 4 × 64, the optimizer once a step)"
# shellcheck disable=SC2086
$PLAIT build $GPT2 --gbs 32 -o "$TMP/gpt2-32" >/dev/null || exit 1
"$TMP/gpt2-32/train" --data "$TMP/text.bin" --steps 4 --lr 1e-4 --log-json "$TMP/gpt2-32.json" >/dev/null || exit 1
awk -v ms="$(median "$TMP/gpt2-32.json" ms)" -v mfu="$(median "$TMP/gpt2-32.json" mfu)" 'BEGIN {
  printf "  step time (median of 3 after the first)  %8.1f ms   (%.1f tokens/s)\n", ms, 32 * 64 / (ms / 1e3)
  printf "  model FLOP/s / GEMM rate                 %8.2f   (target 0.75 or more)\n", mfu
}'

echo "== llm.c (train_gpt2.c, -Ofast -fopenmp -march=native), same shape and tokens, a random checkpoint"
if [ -f "$LLMC/train_gpt2.c" ] && command -v gcc >/dev/null; then
  mkdir -p "$TMP/llmc/dev/data/tinyshakespeare"
  cp "$TMP/text.bin" "$TMP/llmc/dev/data/tinyshakespeare/tiny_shakespeare_train.bin"
  cp "$TMP/text.val.bin" "$TMP/llmc/dev/data/tinyshakespeare/tiny_shakespeare_val.bin"
  gcc -Ofast -fopenmp -march=native "$LLMC/train_gpt2.c" -lm -o "$TMP/llmc/train_gpt2" 2>/dev/null || exit 1
  $TOOLS/llmc_checkpoint "$TMP/llmc/gpt2_124M.bin" || exit 1
  # its loop runs 40 steps (with validation and sampling); the first six are timed, then it is stopped
  (cd "$TMP/llmc" && exec stdbuf -oL ./train_gpt2 > llmc.out 2>&1) & llmc=$!
  waited=0
  while kill -0 $llmc 2>/dev/null && ! grep -q '^step 5:' "$TMP/llmc/llmc.out" && [ $waited -lt 600 ]; do
    sleep 2; waited=$((waited + 2))
  done
  kill $llmc 2>/dev/null; wait $llmc 2>/dev/null
  llmc_ms=$(grep '^step [1-5]:' "$TMP/llmc/llmc.out" | sed 's/.*took \([0-9.]*\) ms.*/\1/' | sort -g |
            awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : 0 }')
  # plait again right after it, so that a machine busier or quieter than before shows in both
  "$TMP/gpt2/train" --data "$TMP/text.bin" --steps 6 --lr 1e-4 --log-json "$TMP/gpt2-again.json" >/dev/null || exit 1
  awk -v theirs="$llmc_ms" -v before="$(median "$j" ms)" -v after="$(median "$TMP/gpt2-again.json" ms)" 'BEGIN {
    if (theirs <= 0) { print "  llm.c made no timed step"; exit }
    printf "  llm.c step time (median of 5 after the first) %8.1f ms   (%.1f tokens/s)\n", theirs, 256 / (theirs / 1e3)
    printf "  plait step time before and after it          %8.1f and %.1f ms\n", before, after
    printf "  plait / llm.c (tokens/s, plait the mean)      %8.2f\n", theirs / ((before + after) / 2)
  }'
else
  echo "  (llm.c not found at $LLMC, or no gcc: skipped)"
fi

echo "== tiny GPT, parallel layouts against one rank (threads on this machine, same global batch)"
TINY="models/tiny.lua --set layers=8 --mbs 4 --gbs 32"
run_tiny() { # name layout...: median tokens/s
  name=$1; shift
  # shellcheck disable=SC2086
  $PLAIT build $TINY "$@" -o "$TMP/$name" >/dev/null || exit 1
  "$TMP/$name/train" --data "$TMP/text.bin" --steps 8 --log-json "$TMP/$name.json" >/dev/null || exit 1
  median "$TMP/$name.json" tokens_per_s
}
one=$(run_tiny one)
dp2=$(run_tiny dp2 --dp 2)
pp2=$(run_tiny pp2 --pp 2)
awk -v one="$one" -v dp2="$dp2" -v pp2="$pp2" 'BEGIN {
  printf "  one rank                         %8.0f tokens/s\n", one
  printf "  (tp,pp,vpp,dp) = (1,1,1,2)       %8.0f tokens/s   %.2f of one rank\n", dp2, dp2 / one
  printf "  (tp,pp,vpp,dp) = (1,2,1,1)       %8.0f tokens/s   %.2f of one rank\n", pp2, pp2 / one
}'

echo "== sharing the cores: tiny (one rank) alone, then beside as many busy processes as there are cores"
# Target: at most about the share the program is given (2× slower beside one busy process a core); the
# same beside them with OMP_WAIT_POLICY=active (libgomp spinning, what a program did before it waited
# passively) for comparison.
shared_step() { # env...: median ms of 8 steps
  env "$@" "$TMP/one/train" --data "$TMP/text.bin" --steps 8 --log-json "$TMP/shared.json" >/dev/null || exit 1
  median "$TMP/shared.json" ms
}
alone=$(shared_step)
busy=""
for _ in $(seq "$(nproc)"); do (while :; do :; done) & busy="$busy $!"; done
trap 'kill $busy 2>/dev/null; rm -rf "$TMP"' EXIT
beside=$(shared_step)
spinning=$(shared_step OMP_WAIT_POLICY=active)
# shellcheck disable=SC2086
kill $busy
trap 'rm -rf "$TMP"' EXIT
awk -v a="$alone" -v b="$beside" -v s="$spinning" -v cores="$(nproc)" 'BEGIN {
  printf "  alone                            %8.1f ms a step\n", a
  printf "  beside %d busy processes          %8.1f ms a step   %.2f× alone (target: 2× or less)\n", cores, b, b / a
  printf "  the same, threads spinning       %8.1f ms a step   %.2f× alone\n", s, s / a
}'

echo "== a pipelined run's bubble: measured against the plan's prediction (tiny, pp 2, 8 microbatches)"
# shellcheck disable=SC2086
"$TMP/pp2/train" --data "$TMP/text.bin" --steps 6 --trace "$TMP/pp2.trace" >"$TMP/pp2.out" || exit 1
measured=$(grep 'measured bubble' "$TMP/pp2.out" | sed 's/.*measured bubble \([0-9.e-]*\).*/\1/')
# shellcheck disable=SC2086
predicted=$($PLAIT plan $TINY --pp 2 --machine cpu --format json | grep '"bubble_fraction"' | sed 's/.*: \([0-9.e-]*\),/\1/')
awk -v m="$measured" -v p="$predicted" -v cores="$(nproc)" 'BEGIN {
  printf "  plan (cost model, machine cpu)   %8.3f\n", p
  printf "  papers (pp-1)/m                  %8.3f\n", 1 / 8
  printf "  measured (last iteration)        %8.3f   (2 ranks as threads on %d cores)\n", m, cores
}'

echo "== tokenizing 100 MB of text on one core: plait data --tokenizer against tokenizers"
if python3 -c 'import tokenizers' 2>/dev/null; then
  python3 tests/bench/tokenize_bench.py "$root/build" 100 || exit 1
else
  echo "  (skipped: pip install tokenizers to compare)"
fi
