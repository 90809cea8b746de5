# plan_errors.sh: every mistake in a model file or a layout gets one line naming the cause, and exit 1.
. "$(dirname "$0")/lib.sh"
M=$PLAIT_ROOT/tests/cli/models
cd "$PLAIT_ROOT" || exit 1

expect_error lua_syntax_error "syntax_error.lua:3: unexpected symbol" $PLAIT plan tests/cli/models/syntax_error.lua
expect_error lua_runtime_error "runtime_error.lua:9: attempt to call a nil value \(field 'attentoin'\)" \
  $PLAIT plan tests/cli/models/runtime_error.lua
expect_error shape_mismatch "shape_mismatch.lua:9: elementwise \+: shapes \[b, seq, hidden\] = \(1, 16, 32\) and \[b, seq, ffn\] = \(1, 16, 64\)" \
  $PLAIT plan tests/cli/models/shape_mismatch.lua
expect_error not_a_model "must return plait.model" $PLAIT plan tests/cli/models/not_a_model.lua
# model files run in a sandbox, under limits: each ends in one line naming the file, within a bound
M=tests/cli/models
within endless_loop_ends 60 expect_error endless_loop \
  "^plait: $M/endless_loop.lua:2: the model file ran more than 1000000000 Lua instructions \(a loop that does not end\?\); raise the limit with --lua-instructions N$" \
  timeout 120 $PLAIT plan $M/endless_loop.lua
within memory_bomb_ends 60 expect_error memory_bomb \
  "^plait: $M/memory_bomb.lua:3: the model file used more than 64 MB of memory \(its Lua values and the model it traces\); raise the limit with --lua-memory MB$" \
  timeout 120 $PLAIT plan $M/memory_bomb.lua --lua-memory 64
expect_error reads_outside_its_folder "^plait: $M/reads_outside.lua:2: a model file reads files in its own folder only, not /etc/passwd$" \
  $PLAIT plan $M/reads_outside.lua
expect_error writes_a_file "^plait: $M/writes_file.lua:2: a model file reads files only" $PLAIT plan $M/writes_file.lua
[ -e $M/written.txt ] && fail writes_a_file "the file was written"
expect_error runs_a_program "^plait: $M/runs_program.lua:2: attempt to call a nil value \(field 'execute'\)$" \
  $PLAIT plan $M/runs_program.lua
expect_error lua_flag_value "--lua-memory takes a whole number of at least 1, not 'lots'" $PLAIT plan models/tiny.lua --lua-memory lots
# model-file mistakes name the file (and the line, where a frame of it is left), and the config key
expect_error missing_block "^plait: $M/missing_block.lua:[0-9]+: plait.model: missing field 'block'$" $PLAIT plan $M/missing_block.lua
expect_error zero_layers "^plait: models/tiny.lua:[0-9]+: plait.model: 'layers' must be a whole number from 1 to 2\^20, got 0$" \
  $PLAIT plan models/tiny.lua --set layers=0
expect_error negative_size "^plait: models/tiny.lua: config.hidden = -4 \(--set hidden=-4\): a size must be a positive integer, got -4$" \
  $PLAIT plan models/tiny.lua --set hidden=-4
expect_error fractional_size "config.seq = 2.5 \(--set seq=2.5\): a size must be a positive integer" $PLAIT plan models/tiny.lua --set seq=2.5
expect_error zero_heads "^plait: models/tiny.lua:10: heads must be a positive integer, got 0$" $PLAIT plan models/tiny.lua --set heads=0
expect_error overflowing_vocab "a tensor \[vocab, hidden\] of 1000000000000000000 × 128 = 1.28e\+20 elements, beyond what plait plans \(2\^40\)" \
  $PLAIT plan models/tiny.lua --set vocab=1e18
expect_error overflowing_activations "chunk 0 keeps 7.39e\+16 activation elements per microbatch \(1000000 layers\), times 1 microbatches, beyond what plait plans \(2\^52\)" \
  $PLAIT plan models/tiny.lua --set layers=1000000 seq=1000000 hidden=1024
expect_error overflowing_layers "'layers' must be a whole number from 1 to 2\^20, got 10000000000" \
  $PLAIT plan models/tiny.lua --set layers=1e10
# an error of the library's C core names the model file's line once
expect_error location_once "^plait: tests/cli/models/bad_dim.lua:8: dim pieces: size 30 is not a whole number of pieces of 4$" \
  $PLAIT plan tests/cli/models/bad_dim.lua
expect_error missing_model_file "cannot open model file models/nope.lua" $PLAIT plan models/nope.lua
# a message longer than a line's room keeps its cause and fix whole: long names lose their middles
long="$TMP/$(printf 'd%.0s' $(seq 250))/$(printf 'e%.0s' $(seq 250))/$(printf 'f%.0s' $(seq 250))/$(printf 'g%.0s' $(seq 250)).lua"
expect_error long_path_keeps_cause_and_fix \
  "^plait: cannot open model file $TMP/d+.*\.\.\..*g+\.lua: cannot open it \(No such file or directory\); give a model file \(a \.lua file\)$" \
  $PLAIT plan "$long"
[ "$(wc -c <"$TMP/err")" -le 1032 ] || fail long_path_fits "$(wc -c <"$TMP/err") bytes"
expect_error heads_not_divisible "gpt2.lua:10: 12 attention heads .* not divisible by tp = 8" $PLAIT plan models/gpt2.lua --tp 8
expect_error hidden_heads_not_divisible "5 attention heads \(qdim = 5 heads × head_dim 20\) are not divisible by tp = 2" \
  $PLAIT plan models/gpt.lua --set hidden=100 heads=5 --tp 2
expect_error ffn_not_divisible "gpt.lua:13: ffn = 1000 is not divisible by tp = 16" $PLAIT plan models/gpt.lua --set ffn=1000 --tp 16
expect_error seq_not_divisible_sp "seq = 2050 is not divisible by tp = 4, which sequence parallelism" \
  $PLAIT plan models/gpt.lua --set seq=2050 --tp 4 --sequence-parallel
expect_error layers_vs_chunks "4 layers cannot be cut into pp·vpp = 4·2 = 8 chunks" $PLAIT plan models/tiny.lua --pp 4 --vpp 2
expect_error layers_uniform "10 layers do not divide into pp·vpp = 4 equal chunks" \
  $PLAIT plan models/gpt.lua --set layers=10 --pp 4 --partition uniform
expect_error gbs_not_divisible "global batch 10 is not divisible by mbs·dp = 4·1 = 4" $PLAIT plan models/tiny.lua --gbs 10 --mbs 4
expect_error unknown_flag "unknown flag --tpp" $PLAIT plan models/tiny.lua --tpp 2
expect_error bad_flag_value "--tp takes a positive integer, not 'zero'" $PLAIT plan models/tiny.lua --tp zero
expect_error bad_grad_reduce "^plait: --grad-reduce takes overlap or after, not 'later'$" \
  $PLAIT plan models/tiny.lua --dp 2 --grad-reduce later
sed 's/parallel = { mbs = 8, gbs = 8 }/parallel = { grad_reduce = "later" }/' models/tiny.lua >"$TMP/later.lua"
expect_error bad_grad_reduce_in_file "^plait: $TMP/later.lua: parallel.grad_reduce must be \"overlap\" or \"after\", not \"later\"$" \
  $PLAIT plan "$TMP/later.lua"
expect_error unknown_set_key "--set layerz: the model has no config key 'layerz'" $PLAIT plan models/tiny.lua --set layerz=3
expect_error bad_set_value "--set layers=many: layers takes a number" $PLAIT plan models/tiny.lua --set layers=many
expect_error unknown_format "--format yaml: unknown format" $PLAIT plan models/tiny.lua --format yaml
expect_error unknown_machine "^plait: --machine tpu: unknown machine \(built-in: a100, cpu, h100, h200; or a machine file, NAME.lua\)$" $PLAIT plan models/tiny.lua --machine tpu
expect_error unknown_print "--print fuse2: unknown pass" $PLAIT plan models/tiny.lua --print fuse2
expect_error unwritable_output "cannot write /nonexistent/plan.txt: No such file or directory; check that its folder exists" $PLAIT plan models/tiny.lua -o /nonexistent/plan.txt
expect_error unknown_command "unknown command 'plna'" $PLAIT plna models/tiny.lua
# attention options and rotary positions a layout or a size cannot serve
expect_error window_longer_than_seq "^plait: models/llama_block.lua:[0-9]+: attention: a sliding window of 4096 positions is longer than the sequence \(2048\); choose a window of at most 2048" \
  $PLAIT plan models/mistral.lua --set seq=2048
expect_error rotary_part_odd "^plait: models/phi2.lua:[0-9]+: rope: the rotated part must be an even number of dims from 2 to head_dim 80, not 25$" \
  $PLAIT plan models/phi2.lua --set rotary_fraction=0.3125
BOTH="rotary \(30 dims\) and rotary_fraction \(0.5\) both given; give one$"
expect_error rotary_count_and_fraction "rotary_count.lua:[0-9]+: nn.attention: $BOTH" \
  $PLAIT plan tests/cli/models/rotary_count.lua --set rotary_fraction=0.5
expect_error qk_norm_heads_vs_tp "llama_block.lua:[0-9]+: 6 key/value heads \(kvdim = 6 heads × head_dim 128\) can neither be split over tp = 4 nor each held by a group of tp/6 ranks; choose a tp that divides 6 or is a multiple of it$" \
  $PLAIT plan models/qwen3.lua --set heads=24 kv_heads=6 --tp 4
expect_error layers_differ_beyond_attention "^plait: tests/cli/models/layer_differs.lua:9: layer 1's block differs from layer 0's here \(ew\); layers may differ only in their attention's window, softcap, scale and rope_theta$" \
  $PLAIT plan tests/cli/models/layer_differs.lua
# a split or concat whose groups tp cannot divide: a fused q, k, v laid out [q; k; v] rather than by head
expect_error split_groups_vs_tp "^plait: tests/cli/models/fused_qkv.lua:[0-9]+: qkv.0 = 32 is 1 group of 32 from a split or concat, which tp = 2 cannot divide .*groups = heads" \
  $PLAIT plan tests/cli/models/fused_qkv.lua --set qkv_groups=1 --tp 2
expect_error concat_groups_vs_tp "^plait: tests/cli/models/fused_qkv.lua:[0-9]+: .*from a split or concat, which tp = 2 cannot divide" \
  $PLAIT plan tests/cli/models/fused_qkv.lua --set concat_groups=1 --tp 2
# a constant beyond what a program carries
expect_error constant_too_large "^plait: tests/cli/models/constants.lua:[0-9]+: constant 'positions' has more than 268435456 elements, the most a program carries" \
  $PLAIT plan tests/cli/models/constants.lua --set seq=8388608 hidden=64
# a FIFO (or a device) where plait reads a file is refused at once, never waited on
mkfifo "$TMP/fifo.lua" "$TMP/fifo.txt" "$TMP/fifo.json"
within fifo_machine_ends 10 expect_error fifo_machine "^plait: --machine .*fifo.lua: cannot read the machine file: not a regular file \(a FIFO\)" \
  timeout 20 $PLAIT plan models/tiny.lua --machine "$TMP/fifo.lua"
within fifo_schedule_ends 10 expect_error fifo_schedule "^plait: schedule file .*fifo.txt: not a regular file \(a FIFO\)" \
  timeout 20 $PLAIT plan models/tiny.lua --pp 2 --schedule "$TMP/fifo.txt"
within fifo_trace_ends 10 expect_error fifo_trace "^plait: trace .*fifo.json: not a regular file \(a FIFO\)" \
  timeout 20 $PLAIT check "$TMP/fifo.json"
within fifo_text_ends 10 expect_error fifo_text "^plait: .*fifo.txt.* not a regular file" \
  timeout 20 $PLAIT data --bytes "$TMP/fifo.txt" -o "$TMP/fifo-out.bin"
within device_machine_ends 10 expect_error device_machine "^plait: --machine /dev/zero: cannot read the machine file: not a regular file \(a character device\)" \
  timeout 20 $PLAIT plan models/tiny.lua --machine /dev/zero
