# megatron.sh: Megatron-LM indexed datasets (PREFIX.bin + PREFIX.idx): one written here from the
# documented format trains, validates and evaluates to the same losses, bit for bit, as the same
# tokens in an llm.c token file; plait data --format megatron writes the format; a bad index or
# token is refused in one line before anything is written.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

fixed_text "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" --val-fraction 0 >/dev/null ||
  { fail data "plait data failed"; exit 0; }
if ! $PLAIT build models/tiny.lua --set layers=1 hidden=32 heads=2 ffn=64 seq=16 -o "$TMP/tiny" \
     >"$TMP/build.log" 2>&1; then
  fail build "$(tail -c 400 "$TMP/build.log")"; exit 0
fi
T="$TMP/tiny/train"

# write_indexed PREFIX CASE: the tokens of text.bin as an indexed dataset, written from the format
# (megatron/core/datasets/indexed_dataset.py): uneven sequences, several to a document. CASE bends
# one part of it to make a bad dataset.
write_indexed() {
  python3 - "$TMP/text.bin" "$1" "$2" <<'PY'
import struct, sys
source, prefix, case = sys.argv[1:]
data = open(source, "rb").read()
count = struct.unpack("<i", data[8:12])[0]
tokens = list(struct.unpack(f"<{count}H", data[1024:1024 + 2 * count]))
code, fmt = (4, "i") if case == "int32" else (8, "H")
if case == "beyond_vocab": tokens[5000] = 300
if case == "negative": tokens[7] = -1
cuts = [0, 1000, 1001, 4000, 4096, 20000, 20001, len(tokens)]
sizes = [b - a for a, b in zip(cuts, cuts[1:])]
item = struct.calcsize(fmt)
pointers = [item * a for a in cuts[:-1]]
documents = [0, 2, 3, 6, len(sizes)]
magic, version = b"MMIDIDX\x00\x00", 1
if case == "magic": magic = b"MMIDIDY\x00\x00"
if case == "version": version = 2
if case == "float32": code = 7
if case == "unknown_dtype": code = 9
if case == "pointer_past_end": pointers[3] = 10 ** 9
if case == "gap": pointers[2] += 2
if case == "sizes_beyond": sizes[-1] += 10
if case == "documents": documents = [0, 3, 2, len(sizes)]
idx = magic + struct.pack("<QBQQ", version, code, len(sizes), len(documents))
idx += struct.pack(f"<{len(sizes)}i", *sizes) + struct.pack(f"<{len(sizes)}q", *pointers)
idx += struct.pack(f"<{len(documents)}q", *documents)
if case == "idx_short": idx = idx[:-3]
open(prefix + ".idx", "wb").write(idx)
open(prefix + ".bin", "wb").write(struct.pack(f"<{len(tokens)}{fmt}", *tokens))
PY
}

# losses NAME: the "loss" and "val_loss" values of NAME's log, as written (17 digits).
losses() { grep -o '"\(val_\)\{0,1\}loss": [^,}]*' "$TMP/$1.json"; }

# train_on NAME DATA: four steps at seed 3, validating on the same data at steps 2 and 4.
train_on() {
  "$T" --data "$2" --val "$2" --eval-every 2 --steps 4 --seed 3 --log-json "$TMP/$1.json" \
    >"$TMP/$1.out" 2>&1 || fail "$1 trains" "$(tail -c 300 "$TMP/$1.out")"
}

train_on llmc "$TMP/text.bin"
for kind in uint16 int32; do
  write_indexed "$TMP/$kind" "$kind"
  train_on "$kind" "$TMP/$kind"
  if [ "$(losses llmc | wc -l)" = 6 ] && [ "$(losses "$kind")" = "$(losses llmc)" ]; then
    pass "$kind indexed dataset trains and validates bit for bit as the token file"
  else fail "$kind losses" "$(losses "$kind" | tr '\n' ' ') against $(losses llmc | tr '\n' ' ')"
  fi
done
"$T" --data "$TMP/text.bin" --steps 1 --save "$TMP/ckpt" >/dev/null 2>&1
eval_of() { "$T" --load "$TMP/ckpt" --eval "$1" 2>&1 | sed -n 's/^eval [^|]*| //p'; }
a=$(eval_of "$TMP/text.bin") b=$(eval_of "$TMP/uint16")
if [ -n "$a" ] && [ "$a" = "$b" ]; then pass "--eval of an indexed dataset ($b)"
else fail "--eval of an indexed dataset" "'$b' against '$a'"; fi

# plait data --format megatron: a document a file, the format as documented; it trains as the
# token file plait data writes from the same files.
head -c 30000 "$TMP/text.txt" >"$TMP/one.txt"
tail -c +30001 "$TMP/text.txt" >"$TMP/two.txt"
expect_ok "plait data --format megatron" "$PLAIT" data --bytes "$TMP/one.txt" "$TMP/two.txt" \
  -o "$TMP/written" --format megatron --val-fraction 0.25
if python3 - "$TMP" <<'PY' >"$TMP/format.out" 2>&1
import struct, sys
tmp = sys.argv[1]
text = open(f"{tmp}/one.txt", "rb").read() + open(f"{tmp}/two.txt", "rb").read()
val = round(len(text) * 0.25)
parts = {"written": (text[:-val], [30000, len(text) - val - 30000]),
         "written.val": (text[-val:], [val])}
for prefix, (part, sizes) in parts.items():
    idx = open(f"{tmp}/{prefix}.idx", "rb").read()
    n, d = len(sizes), len(sizes) + 1
    want = b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, n, d)
    want += struct.pack(f"<{n}i", *sizes)
    want += struct.pack(f"<{n}q", *[2 * sum(sizes[:i]) for i in range(n)])
    want += struct.pack(f"<{d}q", *range(d))
    assert idx == want, f"{prefix}.idx is {idx!r}, not {want!r}"
    binary = open(f"{tmp}/{prefix}.bin", "rb").read()
    assert binary == struct.pack(f"<{len(part)}H", *part), f"{prefix}.bin is not the bytes"
PY
then pass "the written .idx and .bin are the documented format"
else fail "the written format" "$(tail -n 2 "$TMP/format.out")"; fi
$PLAIT data --bytes "$TMP/one.txt" "$TMP/two.txt" -o "$TMP/same.bin" --val-fraction 0.25 >/dev/null
"$T" --data "$TMP/written" --val "$TMP/written.val" --eval-every 2 --steps 4 --seed 3 \
  --log-json "$TMP/written.json" >/dev/null 2>&1
"$T" --data "$TMP/same.bin" --val "$TMP/same.val.bin" --eval-every 2 --steps 4 --seed 3 \
  --log-json "$TMP/same.json" >/dev/null 2>&1
if [ "$(losses written | wc -l)" = 6 ] && [ "$(losses written)" = "$(losses same)" ]; then
  pass "plait data's indexed dataset trains as its token file"
else fail "plait data's indexed dataset" "$(losses written | tr '\n' ' ')"; fi
expect_error "megatron -o ending in .bin" "-o takes the prefix: -o .*/x writes .*/x.bin and" \
  "$PLAIT" data --bytes "$TMP/one.txt" -o "$TMP/x.bin" --format megatron
expect_error "an unknown --format" "--format takes llmc or megatron" \
  "$PLAIT" data --bytes "$TMP/one.txt" -o "$TMP/x" --format parquet
if [ -e "$TMP/x.bin" ] || [ -e "$TMP/x.idx" ]; then
  fail "refused data writes nothing" "$(ls "$TMP")"
else pass "refused data writes nothing"; fi

# Bad datasets: one line naming the file and the cause, exit 1, no log written.
bad() { # CASE PATTERN
  write_indexed "$TMP/bad" "$1"
  expect_error "bad dataset: $1" "$2" "$T" --data "$TMP/bad" --steps 1 --log-json "$TMP/bad.json"
  if [ -e "$TMP/bad.json" ]; then fail "bad dataset $1 writes no log" "bad.json exists"
  else pass "bad dataset $1 writes no log"; fi
}
bad magic 'bad.idx: not an indexed dataset.s index \(it does not start with "MMIDIDX'
bad version "bad.idx: index version 2; plait reads version 1"
bad float32 "bad.idx: tokens of dtype float32 \(code 7\); plait reads uint16 \(8\) and int32 \(4\)"
bad unknown_dtype "bad.idx: unknown dtype code 9; plait reads uint16 \(8\) and int32 \(4\)"
bad pointer_past_end "bad.idx: sequence 3 starts at byte 1000000000, past the end of .*bad.bin"
bad gap "bad.idx: sequence 2 starts at byte 2004, not at byte 2002 where the one before it ends"
bad sizes_beyond "bad.idx: the sizes of sequences 0..6 sum to [0-9]* bytes, beyond the [0-9]* of"
bad documents "bad.idx: document index 2 is 2; they rise from 0 to the sequence count 7"
bad idx_short "bad.idx: 7 sequences and 5 documents need 158 bytes, but the index has 155"
bad beyond_vocab "bad: token 300 at position 5000 is not below the model's vocabulary size 256"
write_indexed "$TMP/neg" int32
python3 -c "
import struct, sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[28:32] = struct.pack('<i', -1)
open(p, 'wb').write(b)" "$TMP/neg.bin"
expect_error "a negative int32 token" "neg: token -1 at position 7 is negative" \
  "$T" --data "$TMP/neg" --steps 1
rm "$TMP/uint16.bin"
expect_error "an index without its .bin" "uint16.bin: cannot open it \(No such file" \
  "$T" --data "$TMP/uint16" --steps 1
