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
# an error of the library's C core names the model file's line once
expect_error location_once "^plait: tests/cli/models/bad_dim.lua:8: dim pieces: size 30 is not a whole number of pieces of 4$" \
  $PLAIT plan tests/cli/models/bad_dim.lua
expect_error missing_model_file "cannot open model file models/nope.lua" $PLAIT plan models/nope.lua
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
expect_error unknown_set_key "--set layerz: the model has no config key 'layerz'" $PLAIT plan models/tiny.lua --set layerz=3
expect_error bad_set_value "--set layers=many: layers takes a number" $PLAIT plan models/tiny.lua --set layers=many
expect_error unknown_format "--format yaml: unknown format" $PLAIT plan models/tiny.lua --format yaml
expect_error unknown_machine "--machine tpu: unknown machine" $PLAIT plan models/tiny.lua --machine tpu
expect_error unknown_print "--print fuse2: unknown pass" $PLAIT plan models/tiny.lua --print fuse2
expect_error unwritable_output "-o /nonexistent/plan.txt: cannot write there" $PLAIT plan models/tiny.lua -o /nonexistent/plan.txt
expect_error unknown_command "unknown command 'plna'" $PLAIT plna models/tiny.lua
