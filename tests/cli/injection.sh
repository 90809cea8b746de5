# injection.sh: what a model file, a machine file or a path names is data in everything plait writes.
# Names that become identifiers or keys (the model's, a parameter's, a constant's, a dim's, a config key,
# an input's, a machine's) are refused unless plain, in one line naming the file and line; free text (a
# model file's path, a schedule file's, the "file:line" of comments, config values) is escaped for each
# format: the C of a program built from a hostile path is the same program with the path intact, the
# plan's JSON and trace load, its SVG is well-formed XML, its DOT's quotes balance, a checkpoint's header
# and the run's JSON load, and a terminal gets no control character.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

NAME_ERROR="is not a plain name: give it 1 to 63 ASCII letters, digits, '_', '.' or '-'$"

# ---- names that must be plain: refused where the model file gives them -------------------------------
H='[[x"; } int evil; /* */ #include "evil.h" ??/ %s%n \]]'
# hostile_model NAME STATEMENT: tiny.lua with STATEMENT as line 8, as $TMP/NAME.lua; a function evil it
# defines is the model's block
hostile_model() {
  { sed -n '1,7p' models/tiny.lua; printf '%s\n' "$2"; sed -n '8,$p' models/tiny.lua; } >"$TMP/$1.lua"
  case $2 in *"function evil"*) sed -i 's/block = block/block = evil/' "$TMP/$1.lua" ;; esac
}
hostile_model model_name "cfg.name = $H"
sed -i 's/name = "tiny"/name = cfg.name/' "$TMP/model_name.lua"
expect_error model_name_refused "^plait: .*/model_name.lua:1[56]: the model's name 'x\"; \} int evil; /\* \*/ #include .* $NAME_ERROR" \
  $PLAIT plan "$TMP/model_name.lua"
hostile_model param_name "local function evil(L, x) L:param($H, { 'hidden' }) return x end"
expect_error parameter_name_refused "^plait: .*/param_name.lua:8: parameter '.*' $NAME_ERROR" $PLAIT plan "$TMP/param_name.lua"
hostile_model constant_name "local function evil(L, x) plait.constant($H, { 'hidden' }, function() return 0 end) return x end"
expect_error constant_name_refused "^plait: .*/constant_name.lua:8: constant '.*' $NAME_ERROR" $PLAIT plan "$TMP/constant_name.lua"
hostile_model input_name "local function evil(L, x) require('plait.core').input('x;evil', { 'b', 'seq' }, 'int') return x end"
# inputs are named by plait's library alone: the core that names them is out of a model file's reach
expect_error input_name_refused "^plait: .*/input_name.lua:8: module 'plait.core' is plait's own" \
  $PLAIT plan "$TMP/input_name.lua"
hostile_model dim_name "plait.dim(7, $H)"
expect_error dim_name_refused "^plait: .*/dim_name.lua:8: dim '.*' $NAME_ERROR" $PLAIT plan "$TMP/dim_name.lua"
hostile_model config_key "cfg[ $H ] = 1"
expect_error config_key_refused "^plait: .*/config_key.lua:1[56]: config key '.*' $NAME_ERROR" $PLAIT plan "$TMP/config_key.lua"
hostile_model long_name "cfg.name = string.rep('a', 64)"
sed -i 's/name = "tiny"/name = cfg.name/' "$TMP/long_name.lua"
expect_error long_name_refused "^plait: .*/long_name.lua:1[56]: the model's name 'a{64}' $NAME_ERROR" $PLAIT plan "$TMP/long_name.lua"
hostile_model config_value "cfg.note = 'caf\\233'"
expect_error config_value_refused "^plait: .*/config_value.lua:1[56]: config.note: a text value must be at most 63 bytes \
of UTF-8 text \(checkpoints record it\)$" $PLAIT plan "$TMP/config_value.lua"
sed 's|^  name = "cpu",$|  name = "x\\"; */ /* evil\\n",|' lib/plait/machines/cpu.lua >"$TMP/machine.lua"
expect_error machine_name_refused "^plait: machine .*/machine.lua: name 'x\"; \*/ /\* evil\\\\n' is not a plain name" \
  $PLAIT plan models/tiny.lua --machine "$TMP/machine.lua"
# a machine's about is free text: shown escaped, on its line
sed 's|^  about = .*|  about = "\\27[31mred\\n second line",|' lib/plait/machines/cpu.lua >"$TMP/about.lua"
$PLAIT plan models/tiny.lua --machine "$TMP/about.lua" >"$TMP/about.txt" 2>&1
if grep -q '^machine     cpu: \\x1b\[31mred\\n second line$' "$TMP/about.txt" && ! grep -q "$(printf '\033')" "$TMP/about.txt"
then pass machine_about_escaped; else fail machine_about_escaped "$(grep -a machine "$TMP/about.txt")"; fi

# ---- free text: a hostile path for the model file and the schedule, and a hostile config value ---------
dir="$TMP/x\"; } int evil; /* */ #include \"evil.h\" ??/ %s%n \\
line two \\ */"
mkdir -p "$dir" "$TMP/plain"
python3 -c 'import sys
text = open("tests/cli/models/constants.lua").read()
note = r"""note = "q\"uote */ /* \\ ??/ %s\n\27[31m #include <evil.h>" }"""
open(sys.argv[1], "w").write(text.replace("positions = \"none\" }", "positions = \"none\", " + note))' "$dir/model.lua"
cp "$dir/model.lua" "$TMP/plain/model.lua"
$PLAIT plan models/tiny.lua --pp 2 --gbs 16 --mbs 4 --set layers=2 | sed -n '/^schedule pp/,/^}/p' >"$dir/2.txt"
L="--pp 2 --gbs 16 --mbs 4"

# load_json NAME FILE: FILE is JSON, or (lines) JSON lines
load_json() {
  if python3 -c 'import json, sys
text = open(sys.argv[1], encoding="utf-8").read()
try: json.loads(text)
except ValueError: [json.loads(line) for line in text.splitlines() if line.strip()]' "$2" 2>"$TMP/why"; then pass "$1"
  else fail "$1" "$(tail -n 1 "$TMP/why")"; fi
}
for format in json trace svg dot text; do
  # shellcheck disable=SC2086
  $PLAIT plan "$dir/model.lua" $L --schedule "$dir/2.txt" --format $format -o "$TMP/plan.$format" 2>"$TMP/err" || fail "plan_$format" "$(cat "$TMP/err")"
done
load_json plan_json_loads "$TMP/plan.json"
load_json plan_trace_loads "$TMP/plan.trace"
if grep -q '"schedule": ".*two \\\\ \*/' "$TMP/plan.json"; then pass plan_json_keeps_the_path
else fail plan_json_keeps_the_path "$(grep schedule "$TMP/plan.json")"; fi
if python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$TMP/plan.svg" 2>"$TMP/why"; then pass plan_svg_is_xml
else fail plan_svg_is_xml "$(tail -n 1 "$TMP/why")"; fi
# DOT: every line's quotes pair up once escaped ones are set aside, and Graphviz reads it where it is installed
if python3 -c 'import re, sys
for line in open(sys.argv[1], encoding="utf-8"):
    assert len(re.sub(r"\\.", "", line).split("\"")) % 2 == 1, line' "$TMP/plan.dot" 2>"$TMP/why" &&
   { ! command -v dot >/dev/null || dot -Tsvg "$TMP/plan.dot" >/dev/null 2>"$TMP/why"; }; then pass plan_dot_quotes_balance
else fail plan_dot_quotes_balance "$(tail -n 2 "$TMP/why")"; fi
if [ "$(grep -c "$(printf '\033')" "$TMP/plan.text")" = 0 ] && grep -q "^plan        constants (.*two \\\\ \*//model.lua)$" "$TMP/plan.text"
then pass plan_text_has_no_control_characters
else fail plan_text_has_no_control_characters "$(head -n 2 "$TMP/plan.text")"; fi
$PLAIT tune "$dir/model.lua" --gpus 2 --gbs 8 --format json >"$TMP/tune.json" 2>"$TMP/err" || fail tune_json "$(cat "$TMP/err")"
load_json tune_json_loads "$TMP/tune.json"

# an error about a hostile path: one line, its control characters shown escaped
printf 'return {' >"$dir/broken.lua"
expect_error error_names_the_path_in_one_line '^plait: .*\\nline two \\ \*//broken.lua:1: ' \
  $PLAIT plan "$dir/broken.lua"

# the program: its C is the plain path's program (the same code), and the path is intact in .source
# shellcheck disable=SC2086
if $PLAIT build "$dir/model.lua" $L --schedule "$dir/2.txt" --emit-only -o "$TMP/hostile_c" >/dev/null 2>"$TMP/err" &&
   $PLAIT build "$TMP/plain/model.lua" $L --emit-only -o "$TMP/plain_c" >/dev/null 2>>"$TMP/err"; then
  for d in hostile_c plain_c; do
    mpicc -std=c11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -fopenmp -Iruntime -Iruntime/cpu -I"$TMP/$d" \
      -c "$TMP/$d/model.c" -o "$TMP/$d.o" 2>>"$TMP/err"
    objdump -d -j .text "$TMP/$d.o" | tail -n +4 >"$TMP/$d.s"
  done
  if [ -s "$TMP/hostile_c.s" ] && cmp -s "$TMP/hostile_c.s" "$TMP/plain_c.s" &&
     [ "$(grep -c '^#' "$TMP/hostile_c/model.c")" = "$(grep -c '^#' "$TMP/plain_c/model.c")" ]; then
    pass program_code_is_the_plain_paths
  else fail program_code_is_the_plain_paths "$(head -c 600 "$TMP/err")"; fi
else fail program_code_is_the_plain_paths "$(cat "$TMP/err")"; fi
# shellcheck disable=SC2086
if $PLAIT build "$dir/model.lua" $L --schedule "$dir/2.txt" -o "$TMP/hostile" >"$TMP/build.log" 2>&1; then
  if python3 -c 'import sys
program = open(sys.argv[1], "rb").read()
assert (sys.argv[2] + "/model.lua").encode() + b"\0" in program' "$TMP/hostile/train" "$dir"; then pass program_source_is_intact
  else fail program_source_is_intact "the path is not in $TMP/hostile/train"; fi
  fixed_text "$TMP/text.txt"
  $PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null
  if "$TMP/hostile/train" --data "$TMP/text.bin" --steps 1 --save "$TMP/ckpt" --log-json "$TMP/log.json" \
       --trace "$TMP/trace.json" >"$TMP/run.out" 2>&1; then
    load_json run_log_loads "$TMP/log.json"
    load_json run_trace_loads "$TMP/trace.json"
    if python3 -c 'import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
meta = json.loads(data[8:8 + n].decode("utf-8"))["__metadata__"]
assert "#include <evil.h>" in meta["config.note"], meta["config.note"]' "$TMP/ckpt/model.safetensors" 2>"$TMP/why"
    then pass checkpoint_header_loads
    else fail checkpoint_header_loads "$(tail -n 1 "$TMP/why")"; fi
  else fail hostile_program_runs "$(tail -c 400 "$TMP/run.out")"; fi
else fail hostile_program_builds "$(tail -c 600 "$TMP/build.log")"; fi

# a model file's print goes to stderr: stdout stays plait's own (a plan in JSON loads), nothing lost
hostile_model prints 'print("hello", 1, nil, "{ \"not\": json")'
if $PLAIT plan "$TMP/prints.lua" --format json >"$TMP/prints.json" 2>"$TMP/prints.err" &&
   python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$TMP/prints.json" 2>"$TMP/why" &&
   [ "$(cat "$TMP/prints.err")" = "$(printf 'hello\t1\tnil\t{ "not": json')" ]; then
  pass model_print_to_stderr
else fail model_print_to_stderr "$(tail -n 1 "$TMP/why") stderr: $(head -c 200 "$TMP/prints.err")"; fi
