# tokenizer.sh: `plait data --tokenizer`: byte-level BPE ids against an independent reference
# (tests/tools/bpe_reference.py, standard library only), the Unicode normalizers, 32-bit files,
# --workers, the GPT-2 pair of files, decoding through the runtime alone, --sample --tokenizer,
# and the refusals.
. "$(dirname "$0")/lib.sh"
REF="python3 $PLAIT_ROOT/tests/tools/bpe_reference.py"
DECODE="$PLAIT_ROOT/build/tools/decode_tokens"

# ids FILE WIDTH: a token file's tokens, one a line.
ids() { od -An -v -tu"$2" -j1024 "$1" | tr -s ' ' '\n' | sed '/^$/d'; }
# data ARGS...: plait data, quiet, every token in one file unless the arguments say otherwise.
data() { "$PLAIT" data --val-fraction 0 "$@" >/dev/null; }
# agree NAME A B: files A and B are the same.
agree() { if cmp -s "$2" "$3"; then pass "$1"; else fail "$1" "$2 and $3 differ"; fi; }

# same_ids NAME TOKENIZER TEXT [WIDTH]: plait's ids are the reference's (EOT first).
same_ids() {
  if ! "$PLAIT" data --tokenizer "$2" "$3" -o "$TMP/same.bin" --val-fraction 0 >"$TMP/out" 2>&1
  then fail "$1" "plait data failed: $(head -c 300 "$TMP/out")"; return; fi
  ids "$TMP/same.bin" "${4:-2}" >"$TMP/got"
  $REF encode "$2" "$3" >"$TMP/want"
  if cmp -s "$TMP/got" "$TMP/want"; then pass "$1"
  else fail "$1" "ids differ: $(diff "$TMP/got" "$TMP/want" | head -c 300 | tr '\n' ' ')"; fi
}

$REF make "$TMP/split.json"
$REF make "$TMP/gpt2.json" --gpt2
$REF make "$TMP/ignore.json" --gpt2 --ignore-merges
$REF make "$TMP/big.json" --big-id 70000

printf 'The quick brown fox: caf\303\251 M\303\274nchen \346\227\245\346\234\254\350\252\236' \
  >"$TMP/multi.txt"
printf ' \303\274ber 2024!\n\tTabs  and   spaces\n' >>"$TMP/multi.txt"
printf "x<|endoftext|>y <|sep|>  <|sep|>z it's <|endof <|endoftext|><|sep|>\n" >"$TMP/special.txt"
printf 'The lazy dog. It'"'"'s 1999 and 2024\n\n  the end   \n' >"$TMP/ascii.txt"
printf 'bad \377\376 caf\303 x\355\240\200y \360\237\230' >"$TMP/invalid.txt"
: >"$TMP/empty.txt"
for t in multi special ascii invalid empty; do
  same_ids "split pattern: $t" "$TMP/split.json" "$TMP/$t.txt"
done
for t in ascii special; do
  same_ids "ByteLevel's own pattern: $t" "$TMP/gpt2.json" "$TMP/$t.txt"
done
same_ids "ignore_merges" "$TMP/ignore.json" "$TMP/ascii.txt"

# Normalizers (Qwen2's NFC, the other Unicode forms, a Sequence of them) against Python's
# unicodedata: decomposed accents, Hangul jamo, ANGSTROM SIGN (U+212B, whose NFC is U+00C5),
# compatibility characters, and the normalized token <|U+212B|> met in either spelling.
python3 - "$TMP/unicode.txt" <<'PY'
import sys
open(sys.argv[1], "w", encoding="utf-8").write(
    "cafe\u0301 cafe\u0301 caf\u00e9 Mu\u0308nchen \u212b \u00c5 A\u030a "
    "\u1100\u1161\u11a8 \u1112\u1161\u11ab\u1100\u116e\u11a8 \ud55c\uad6d "
    "x<|endoftext|>e\u0301<|\u212b|> <|\u00c5|> <|sep|>\u0301 \ufb01 \u2460 \u00bd "
    "\u1e9b\u0323 o\u0323\u031b\n")
PY
same_ids "no normalizer: unicode" "$TMP/split.json" "$TMP/unicode.txt"
for form in NFC NFD NFKC NFKD NFKD,NFC; do
  $REF make "$TMP/form.json" --normalizer "$form"
  same_ids "normalizer $form" "$TMP/form.json" "$TMP/unicode.txt"
done

# GPT-2's vocab.json + merges.txt read as its tokenizer.json reads.
python3 - "$TMP/gpt2.json" "$TMP/vocab.json" "$TMP/merges.txt" <<'PY'
import json, sys
tok = json.load(open(sys.argv[1], encoding="utf-8"))
vocab = dict(tok["model"]["vocab"], **{"<|endoftext|>": tok["added_tokens"][0]["id"]})
json.dump(vocab, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
with open(sys.argv[3], "w", encoding="utf-8") as f:
    f.write("#version: 0.2\n")
    for m in tok["model"]["merges"]:
        f.write((m if isinstance(m, str) else " ".join(m)) + "\n")
PY
data --tokenizer "$TMP/vocab.json" --merges "$TMP/merges.txt" "$TMP/ascii.txt" -o "$TMP/pair.bin"
data --tokenizer "$TMP/gpt2.json" "$TMP/ascii.txt" -o "$TMP/json.bin"
agree "vocab.json + merges.txt" "$TMP/pair.bin" "$TMP/json.bin"

# 32-bit tokens: llm.c's header (20240801, 7) and uint32 ids; the indexed dataset's dtype int32.
printf 'a <|big|> b' >"$TMP/big.txt"
same_ids "32-bit ids" "$TMP/big.json" "$TMP/big.txt" 4
header=$(od -An -tu4 -N8 "$TMP/same.bin" | tr -s ' ')
if [ "$header" = " 20240801 7" ]; then pass "32-bit header"
else fail "32-bit header" "'$header'"; fi
data --tokenizer "$TMP/big.json" "$TMP/big.txt" -o "$TMP/mega" --format megatron
dtype=$(od -An -tu1 -j17 -N1 "$TMP/mega.idx" | tr -d ' ') size=$(wc -c <"$TMP/mega.bin")
if [ "$dtype" = 4 ] && [ "$size" = 20 ]; then pass "indexed dataset of int32"
else fail "indexed dataset of int32" "dtype $dtype, $size bytes"; fi

# decode(encode(x)) == x through the runtime (training programs' side), 16- and 32-bit files
# (<|sep|> left out: its lstrip drops the spaces before it, as tokenizers does).
{ cat "$TMP/multi.txt"; printf 'x<|endoftext|>y <|big|>\n'; cat "$TMP/ascii.txt"; } \
  >"$TMP/mixed.txt"
{ printf '<|endoftext|>'; cat "$TMP/mixed.txt"; } >"$TMP/expected"
for tok in split big; do
  data --tokenizer "$TMP/$tok.json" "$TMP/mixed.txt" -o "$TMP/rt.bin"
  "$DECODE" "$TMP/$tok.json" "$TMP/rt.bin" >"$TMP/decoded"
  agree "round trip ($tok)" "$TMP/decoded" "$TMP/expected"
done
if nm "$PLAIT_ROOT/build/libplait_rt.a" 2>/dev/null | grep -q 'pcre2\|utf8proc'
then fail "runtime without PCRE2 and utf8proc" "libplait_rt.a refers to them"
else pass "runtime without PCRE2 and utf8proc"; fi

# --workers: the same files for 1 and 3 threads; the validation split as with --bytes.
for i in 0 1 2 3 4 5 6; do sed "s/fox/fox $i/" "$TMP/mixed.txt" >"$TMP/doc$i.txt"; done
"$PLAIT" data --tokenizer "$TMP/split.json" "$TMP"/doc*.txt -o "$TMP/w1.bin" --workers 1 >/dev/null
"$PLAIT" data --tokenizer "$TMP/split.json" "$TMP"/doc*.txt -o "$TMP/w3.bin" --workers 3 >/dev/null
agree "--workers 1 and 3: training part" "$TMP/w1.bin" "$TMP/w3.bin"
agree "--workers 1 and 3: validation part" "$TMP/w1.val.bin" "$TMP/w3.val.bin"
n=$(($(ids "$TMP/w1.bin" 2 | wc -l) + $(ids "$TMP/w1.val.bin" 2 | wc -l)))
data --tokenizer "$TMP/split.json" "$TMP"/doc*.txt -o "$TMP/w0.bin"
if [ "$n" = "$(ids "$TMP/w0.bin" 2 | wc -l)" ]; then pass "the split keeps every token"
else fail "the split keeps every token" "$n"; fi
data --tokenizer "$TMP/split.json" --eot '<|sep|>' "$TMP/ascii.txt" -o "$TMP/eot.bin"
first=$(ids "$TMP/eot.bin" 2 | head -1)
if [ "$first" = 557 ]; then pass "--eot names the separator"; else fail "--eot" "$first"; fi

# A megabyte line of one character is no slower than linear.
head -c 1000000 /dev/zero | tr '\0' a >"$TMP/aaa.txt"
{ head -c 1000000 /dev/zero | tr '\0' ' '; printf x; } >"$TMP/spaces.txt"
encode_long() { timeout 60 "$PLAIT" data --tokenizer "$TMP/gpt2.json" "$1" -o "$TMP/long.bin" \
                  --val-fraction 0 >/dev/null; }
for t in aaa spaces; do
  within "1 MB line: $t" 5 encode_long "$TMP/$t.txt" || fail "1 MB line: $t" "exit status $status"
done

# Broken tokenizer files: one line, exit 1, an existing output untouched.
cp "$TMP/w1.bin" "$TMP/keep.bin"
refused() {  # NAME PATTERN TOKENIZER
  expect_error "$1" "$2" "$PLAIT" data --tokenizer "$3" "$TMP/ascii.txt" -o "$TMP/keep.bin"
}
broken() {  # NAME PATTERN PYTHON-EDIT (of the dict t)
  python3 - "$TMP/split.json" "$TMP/bad.json" "$3" <<'PY'
import json, sys
t = json.load(open(sys.argv[1], encoding="utf-8"))
exec(sys.argv[3])
open(sys.argv[2], "w", encoding="utf-8").write(json.dumps(t, ensure_ascii=False))
PY
  refused "$1" "$2" "$TMP/bad.json"
}
m="t['model']" pre="t['pre_tokenizer']"
broken "unigram" "model type Unigram is not supported; plait reads byte-level BPE" \
  "$m['type'] = 'Unigram'"
broken "wordpiece" "model type WordPiece is not supported" "$m['type'] = 'WordPiece'"
broken "normalizer" "normalizer Lowercase is not supported; plait reads byte-level BPE" \
  "t['normalizer'] = {'type': 'Lowercase'}"
broken "normalizer in a sequence" "normalizer step Strip is not supported" \
  "t['normalizer'] = {'type': 'Sequence', 'normalizers': [{'type': 'NFC'}, {'type': 'Strip'}]}"
broken "metaspace" "pre_tokenizer Metaspace is not supported" "$pre = {'type': 'Metaspace'}"
broken "unknown merge token" "merge 1 \('h' 'zz'\) names 'zz', which is not in the vocabulary" \
  "$m['merges'][0] = 'h zz'"
broken "merge not a pair" "merge 2 is a number" "$m['merges'][1] = 7"
broken "id out of range" "has id -1, not a whole number" "$m['vocab']['h'] = -1"
broken "id not a number" "has id of the wrong type" "$m['vocab']['h'] = 'x'"
broken "id duplicated" "id 72 is given to both" "$m['vocab']['hh'] = 72"
broken "vocab of the wrong type" "model.vocab is an array, not an object" "$m['vocab'] = []"
broken "missing byte token" "no token for byte 0x68" "del $m['vocab']['h']"
broken "single_word" "is single_word; plait reads added tokens without single_word" \
  "t['added_tokens'][1]['single_word'] = True"
broken "bad regex" "the pre-tokenizer's pattern does not compile" \
  "$pre['pretokenizers'][0]['pattern']['Regex'] = '(a'"
head -c 3000 "$TMP/split.json" >"$TMP/cut.json"
refused "truncated file" "not JSON at byte 3000: .*give a tokenizer file" "$TMP/cut.json"
printf 'vocab = 3\n' >"$TMP/text.json"
refused "not JSON" "text.json: not JSON at byte 0" "$TMP/text.json"
expect_error "--eot unknown" "--eot <\|nope\|>: the tokenizer .* has no such token" \
  "$PLAIT" data --tokenizer "$TMP/split.json" --eot '<|nope|>' "$TMP/ascii.txt" -o "$TMP/keep.bin"
expect_error "--bytes with --tokenizer" "--bytes and --tokenizer do not go together" \
  "$PLAIT" data --tokenizer "$TMP/split.json" --bytes "$TMP/ascii.txt" -o "$TMP/keep.bin"
expect_error "bad --workers" "--workers takes a whole number from 1 to 256" \
  "$PLAIT" data --tokenizer "$TMP/split.json" "$TMP/ascii.txt" -o "$TMP/new.bin" --workers 0
beyond="not below the model's vocabulary"
expect_error "ids beyond --vocab" \
  "ascii.txt': token 0 is id 557, $beyond 300 \(--vocab\); give the model's own" \
  "$PLAIT" data --tokenizer "$TMP/split.json" --eot '<|sep|>' "$TMP/ascii.txt" -o "$TMP/keep.bin" \
  --vocab 300
expect_error "bytes beyond --vocab" "ascii.txt': token [0-9]+ is id [0-9]+, $beyond 65" \
  "$PLAIT" data --bytes "$TMP/ascii.txt" -o "$TMP/keep.bin" --vocab 65
data --tokenizer "$TMP/split.json" --eot '<|sep|>' "$TMP/ascii.txt" -o "$TMP/vocab.bin" --vocab 558
agree "ids within --vocab" "$TMP/vocab.bin" "$TMP/eot.bin"
expect_error "bad --vocab" "--vocab takes the model's vocabulary, a whole number" \
  "$PLAIT" data --bytes "$TMP/ascii.txt" -o "$TMP/keep.bin" --vocab 0
if cmp -s "$TMP/keep.bin" "$TMP/w1.bin" && [ ! -e "$TMP/new.bin" ] && ! ls "$TMP" | grep -q tmp
then pass "refusals write nothing"
else fail "refusals write nothing" "$(ls "$TMP" | tr '\n' ' ')"; fi

# Training: ids beyond the model's vocabulary are refused in 32-bit files too; --sample decodes.
tiny() { "$PLAIT" build models/tiny.lua --set layers=1 hidden=32 heads=2 ffn=64 seq=16 "$@"; }
if tiny -o "$TMP/tiny" >"$TMP/build.log" 2>&1; then
  for i in 1 2 3 4 5 6; do cat "$TMP/mixed.txt"; done >"$TMP/long.txt"
  data --tokenizer "$TMP/big.json" "$TMP/long.txt" -o "$TMP/wide.bin"
  expect_error "32-bit id beyond the vocabulary" \
    "token 556 at position 0 is not below the model's vocabulary size 256" \
    "$TMP/tiny/train" --data "$TMP/wide.bin" --steps 1
  data --bytes "$TMP/long.txt" -o "$TMP/bytes.bin"
  expect_ok "--sample --tokenizer" "$TMP/tiny/train" --data "$TMP/bytes.bin" --steps 2 \
    --sample 20 --tokenizer "$TMP/split.json" --log-json "$TMP/log.json"
  if grep -q '^sample:' "$TMP/out" && grep -q '"sample_tokenizer": "split.json"' "$TMP/log.json"
  then pass "the sample's log names the tokenizer"
  else fail "the sample's log names the tokenizer" "$(tail -c 300 "$TMP/out")"; fi
  tiny vocab=600 -o "$TMP/v600" >/dev/null 2>&1
  expect_error "tokenizer smaller than the model" \
    "the model's vocabulary has 600 tokens but the tokenizer has no token 558" \
    "$TMP/v600/train" --data "$TMP/bytes.bin" --steps 1 --sample 5 --tokenizer "$TMP/split.json"
else
  fail "tiny model builds" "$(tail -c 300 "$TMP/build.log")"
fi
