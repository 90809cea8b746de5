# limits.sh: a model file's limits bound everything it can do. Under a small instruction limit, each way
# of running for ever that Lua offers past a count hook (a pcall or xpcall swallowing the limit's error, a
# looping message handler, a finalizer, a coroutine, a backtracking pattern, one library call over 10^14
# elements) stops within twice the CPU time a plain endless loop takes to reach the limit, in one line
# naming the model file's line; parameters and operations without bound stop at the memory limit, which counts
# the model plait builds from them; and the work per parameter does not grow with their number.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
LIMIT=100000000

# body NAME LUA: $TMP/NAME.lua, whose line 2 on is LUA.
body() { printf -- '-- %s\n%s\n' "$1" "$2" >"$TMP/$1.lua"; }

# cpu_ms: $cpu, the CPU time (user and system, in ms) this script's finished commands have taken: the
# load of other processes does not change it (`times` runs in this shell, not in a subshell).
cpu_ms() {
  times >"$TMP/times"
  cpu=$(tail -n 1 "$TMP/times" | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, t, "m"); n += t[1] * 60 + t[2] }
                                        printf "%d", n * 1000 }')
}

# The CPU time a plain endless loop takes to reach the limit.
body loop 'while true do end'
cpu_ms; start=$cpu
expect_error endless_loop "^plait: $TMP/loop.lua:2: the model file ran more than $LIMIT Lua instructions \(a loop that does not end\?\); raise the limit with --lua-instructions N$" \
  timeout 120 $PLAIT plan "$TMP/loop.lua" --lua-instructions $LIMIT
cpu_ms; base_ms=$((cpu - start))

# stops NAME LINE CAUSE LUA: the model file LUA stops within twice the plain loop's CPU time (and a fifth of
# a second for starting), in one line naming LINE and, in parentheses, CAUSE.
stops() {
  body "$1" "$4"
  cpu_ms; start=$cpu
  expect_error "$1" "^plait: $TMP/$1.lua:$2: the model file ran more than $LIMIT Lua instructions \($3\); raise the limit with --lua-instructions N$" \
    timeout 120 $PLAIT plan "$TMP/$1.lua" --lua-instructions $LIMIT
  cpu_ms; took_ms=$((cpu - start))
  if [ "$took_ms" -le $((2 * base_ms + 200)) ]; then pass "$1 stops in time ($took_ms ms; the plain loop $base_ms ms)"
  else fail "$1 stops in time" "$took_ms ms of CPU, the plain loop $base_ms ms"; fi
}

LOOP='a loop that does not end\?'
stops pcall_loop 3 "$LOOP" 'while true do
  pcall(function() while true do end end)
end'
stops nested_pcall 2 "$LOOP" 'local function f() while true do pcall(f) end end
f()'
stops xpcall_swallows 2 "$LOOP" 'while true do xpcall(function() while true do end end, function(e) return e end) end'
stops xpcall_handler_loop 2 "$LOOP" 'xpcall(error, function() while true do end end)'
stops deep_pcall_loop 3 "$LOOP" 'local function deep(n) if n > 0 then return deep(n - 1) + 1 end
  while true do pcall(error) end end
deep(100000)'
stops load_error_loop 3 "$LOOP" 'local function deep(n) if n > 0 then return deep(n - 1) + 1 end
  while true do load("(") end end
deep(100000)'
stops coroutine_loop 3 "$LOOP" 'while true do
  coroutine.resume(coroutine.create(function() while true do end end))
end'
stops close_handler_loop 4 "$LOOP" 'do
  local x <close> = setmetatable({}, { __close = function() while true do end end })
  while true do end
end'
stops concat_loop 3 "$LOOP" 'local s = string.rep("x", 1 << 24)
while true do local t = s .. s end'
stops gsub_callback 2 "$LOOP" 'string.gsub(string.rep("x", 1000000), ".", function() while true do end end)'
stops backtracking_find 2 'string.find: the pattern may take more than [0-9.e+]+ steps on a subject of 30000 characters; simplify the pattern or shorten the subject' \
  'string.find(string.rep("a", 30000), string.rep("a*", 30) .. "b")'
stops backtracking_method 2 'string.match: the pattern may take more than [0-9.e+]+ steps on a subject of 30000 characters; simplify the pattern or shorten the subject' \
  'local s = ("a"):rep(30000); s:match(("(.-)"):rep(4) .. "x")'
stops backtracking_gmatch 2 'string.gmatch: .* steps on a subject of 30000 characters; .*' \
  'for w in string.gmatch(string.rep("a", 30000), "a*a*a*b") do end'
stops backtracking_gsub 2 'string.gsub: .* steps on a subject of 30000 characters; .*' \
  'string.gsub(string.rep("a", 30000), "(a-)(a-)(a-)b", "")'
stops table_move 2 'table.move of 2e\+14 steps' 'table.move({}, 1, 1e14, 2)'
stops table_move_alias 2 'table.move of 2e\+14 steps' 'local t = table; t.move({ 1 }, 1, 1e14, 1)'
stops rep_of_nothing 2 'string.rep of 1e\+15 repetitions' 'string.rep("", 1e15)'
stops concat_range 2 'table.concat of 2e\+14 steps' 'table.concat({}, "", 1, 1e14)'
stops unpack_loop 3 "$LOOP" 'local t = {} for i = 1, 100000 do t[i] = i end
while true do table.unpack(t, 1, 100000) end'
stops sort_loop 3 "$LOOP" 'local t = {} for i = 1, 100000 do t[i] = i end
while true do table.sort(t) end'
stops insert_front_loop 3 "$LOOP" 'local t = {} for i = 1, 100000 do t[i] = i end
while true do table.insert(t, 1, 0) table.remove(t, 1) end'
stops format_loop 3 "$LOOP" 'local s = string.rep("x", 1 << 24)
while true do string.format("%.0s", s) end'
stops utf8_loop 3 "$LOOP" 'local s = string.rep("x", 1 << 24)
while true do utf8.len(s) end'
stops collect_loop 3 "$LOOP" 'local t = {} for i = 1, 1000000 do t[i] = {} end
while true do collectgarbage() end'

# A finalizer runs with the hook off: a model file's tables have none.
body finalizer 'setmetatable({}, { __gc = function() while true do end end })'
expect_error finalizer_refused "^plait: $TMP/finalizer.lua:2: a model file's tables have no finalizers \(__gc\): plait does not run them; close what needs closing yourself$" \
  timeout 60 $PLAIT plan "$TMP/finalizer.lua"

# Parameters and operations without bound stop at the memory limit, which counts the model plait builds.
grow() {
  cat >"$TMP/$1.lua" <<EOF
local plait = require "plait"
local nn = require "plait.nn"
local cfg = plait.config { vocab = 256, seq = 16, layers = 1, hidden = 32, count = 3000000 }
local function block(L, x)
  $2
  return x
end
return plait.model { name = "$1", config = cfg, embed = nn.embedding, block = block, head = nn.lm_head }
EOF
}
grow params 'for i = 1, cfg.count do L:param("p" .. i, { cfg.hidden }) end'
grow operations 'for i = 1, cfg.count do x = x * 2 end'
for what in params operations; do
  within "${what}_stop_in_time" 60 expect_error "${what}_at_memory_limit" \
    "^plait: $TMP/$what.lua:5: the model file used more than 64 MB of memory \(its Lua values and the model it traces\); raise the limit with --lua-memory MB$" \
    timeout 120 $PLAIT plan "$TMP/$what.lua" --lua-memory 64
done

# a memory limit past this machine's memory (2^44 MB: its bytes would wrap) is refused, naming the most
expect_error lua_memory_beyond_machine \
  "^plait: --lua-memory 17592186044416 MB is more than this machine's memory \([0-9]+ MB\); give at most [0-9]+$" \
  $PLAIT plan models/tiny.lua --lua-memory 17592186044416

# 200,000 parameters: each found by its name in constant time (searching the others, plait took some 13
# minutes of CPU; now under 2 seconds).
grow unused_params 'for i = 1, cfg.count do L:param("p" .. i, { cfg.hidden }, { init = "zeros" }) end'
cpu_ms; start=$cpu
expect_ok many_parameters timeout 120 $PLAIT plan "$TMP/unused_params.lua" --set count=200000
cpu_ms; took_ms=$((cpu - start))
if [ "$took_ms" -le 15000 ]; then pass "many_parameters_in_time ($took_ms ms of CPU)"
else fail many_parameters_in_time "$took_ms ms of CPU, more than 15 s"; fi
