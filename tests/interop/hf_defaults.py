#!/usr/bin/env python3
"""hf_defaults.py: lib/plait/hf_defaults.lua against transformers' defaults (make interop-check).

For each model_type a family in lib/plait/hf.lua names, the table lists what
transformers.AutoConfig.for_model(model_type).to_dict() holds, less the keys every configuration has
(PretrainedConfig's: architectures, id2label, ...). Without arguments this writes the table as
transformers gives it and compares it with lib/plait/hf_defaults.lua, failing with the
difference; `--write` rewrites the file (after a change of transformers or a new family). Without
transformers it says so in one line and exits 0.
"""
import difflib
import json
import os
import re
import sys

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

try:
    import transformers
except ImportError as missing:
    print("hf_defaults: skipped, %s; pip install transformers to run it" % missing)
    sys.exit(0)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAMILIES = os.path.join(ROOT, "lib", "plait", "hf.lua")
TABLE = os.path.join(ROOT, "lib", "plait", "hf_defaults.lua")
WIDTH = 100
LUA_KEYWORDS = set("and break do else elseif end false for function goto if in local nil not or "
                   "repeat return then true until while".split())

HEADER = """\
-- plait.hf_defaults: transformers' defaults per model_type (what a config.json key is when the
-- file lacks it), as data: AutoConfig.for_model(model_type).to_dict() of transformers %s, for
-- each model_type of a family in plait.hf, less the keys every configuration has. Written by
-- tests/interop/hf_defaults.py --write; make interop-check checks it against transformers.
local json = require "plait.json"

return {
"""


def model_types():
    """The model_types of the families plait ships, sorted."""
    with open(FAMILIES) as f:
        return sorted(set(re.findall(r'architecture = "[A-Z]\w*", model_type = "(\w+)"', f.read())))


def defaults(model_type):
    """transformers' configuration of model_type made without arguments, less the common keys."""
    common = transformers.PretrainedConfig().to_dict()
    config = transformers.AutoConfig.for_model(model_type).to_dict()
    return {k: v for k, v in config.items() if k not in common}


def lua_key(key):
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) and key not in LUA_KEYWORDS:
        return key
    return "[%s]" % lua_string(key)


def lua_string(s):
    text = json.dumps(s)
    if "\\" in text:
        raise ValueError("a string with an escape: %r" % s)
    return text


def lua_value(v, indent):
    """v as Lua: None is json.null, a list a json.array, a dict a table of its sorted keys."""
    if v is None:
        return "json.null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return lua_string(v)
    if isinstance(v, list):
        return lua_list([lua_value(x, indent + "  ") for x in v], indent)
    if isinstance(v, dict):
        return lua_table(v, indent)
    raise ValueError("no Lua for %r" % (v,))


def lua_list(items, indent):
    """json.array { ... }, on one line where it fits, else wrapped at WIDTH."""
    one = "json.array { %s }" % ", ".join(items) if items else "json.array {}"
    if len(indent) + len(one) + 40 <= WIDTH:
        return one
    lines, line = [], indent + "  "
    for item in items:
        if len(line) + len(item) + 2 > WIDTH:
            lines.append(line.rstrip())
            line = indent + "  "
        line += item + ", "
    lines.append(line.rstrip())
    return "json.array {\n%s\n%s}" % ("\n".join(lines), indent)


def lua_table(d, indent):
    inner = indent + "  "
    rows = ["%s%s = %s," % (inner, lua_key(k), lua_value(d[k], inner)) for k in sorted(d)]
    return "{\n%s\n%s}" % ("\n".join(rows), indent)


def table_text():
    body = "".join("  %s = %s,\n" % (lua_key(t), lua_table(defaults(t), "  "))
                   for t in model_types())
    return HEADER % transformers.__version__ + body + "}\n"


def main():
    want = table_text()
    if sys.argv[1:] == ["--write"]:
        with open(TABLE, "w") as f:
            f.write(want)
        print("hf_defaults: wrote %s (%d model_types)" % (TABLE, len(model_types())))
        return
    with open(TABLE) as f:
        have = f.read()
    if have != want:
        diff = difflib.unified_diff(have.splitlines(), want.splitlines(), "hf_defaults.lua",
                                    "transformers %s" % transformers.__version__, lineterm="")
        print("\n".join(list(diff)[:60]))
        print("hf_defaults: FAIL, lib/plait/hf_defaults.lua differs from transformers' defaults; "
              "python3 tests/interop/hf_defaults.py --write rewrites it")
        sys.exit(1)
    print("hf_defaults: ok, %d model_types as transformers %s has them"
          % (len(model_types()), transformers.__version__))


if __name__ == "__main__":
    main()
