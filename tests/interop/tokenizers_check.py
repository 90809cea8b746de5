"""tokenizers_check.py: plait data --tokenizer against Hugging Face tokenizers on Debian's text.

Usage: python3 tests/interop/tokenizers_check.py BUILD [MEGABYTES]

Collects MEGABYTES (default 10) of the machine's text (README files, fortunes, manual pages in
English and in the translations Debian ships: only files that are valid UTF-8), trains three
byte-level BPE tokenizers on it with `tokenizers` itself (no download): one as GPT-2's (the
ByteLevel pre-tokenizer with GPT-2's pattern, 50,257 ids), one as Llama 3's (its split pattern, then
ByteLevel without a pattern, ignore_merges, more ids than 16 bits hold) and one as Qwen2's (the NFC
normalizer, its split pattern, then ByteLevel without a pattern), then checks that `plait data
--tokenizer` writes, for every file in order, the end-of-text id followed by exactly the ids
`tokenizers` gives, every id in order (GPT-2's also from vocab.json and merges.txt; Qwen2's also for
one more file, the text beyond ASCII in NFD), and that the training programs' decoder
(build/tools/decode_tokens) gives every byte back (as the normalizer writes it). Prints one line a
check and a summary; exits 1 on any difference.
"""
import gzip
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
import unicodedata

try:
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
except ImportError:
    print("tokenizers_check: skipped (pip install tokenizers to compare with Hugging Face "
          "tokenizers)")
    sys.exit(0)

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLMC_FILES = {20240520: (1, "H"), 20240801: (7, "I")}  # magic: (version, ids' struct code)


def text_files():
    """The candidate files, in a fixed order: README files, fortunes, manual pages and translated
    manual pages (Cyrillic, CJK, accented Latin: the pre-tokenizers' Unicode classes) in turn."""
    docs = sorted(os.path.join(d, f) for d, _, fs in os.walk("/usr/share/doc") for f in fs
                  if f.startswith("README"))
    man = sorted(os.path.join("/usr/share/man/man1", f) for f in os.listdir("/usr/share/man/man1"))
    games = "/usr/share/games/fortunes"
    fortunes = sorted(os.path.join(games, f) for f in os.listdir(games)
                      if not f.endswith((".dat", ".u8")))
    root = "/usr/share/man"
    languages = [sorted(os.path.join(d, f)
                        for d, _, fs in os.walk(os.path.join(root, lang)) for f in fs)
                 for lang in sorted(os.listdir(root)) if not lang.startswith("man")]
    return in_turn([docs, fortunes, man, in_turn(languages)])


def in_turn(lists):
    """The lists' first items, then their second items, and so on."""
    return [k[i] for i in range(max(map(len, lists))) for k in lists if i < len(k)]


def read_text(path):
    """The file's text, or None where it is not valid UTF-8 or is empty."""
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            data = f.read()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError):
        return None
    return text or None


def collect(folder, megabytes):
    """Writes up to MEGABYTES of text as numbered files in FOLDER; returns [(path, text)]."""
    out, total = [], 0
    for path in text_files():
        text = read_text(path)
        if text is None:
            continue
        name = os.path.join(folder, "%05d.txt" % len(out))
        with open(name, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        out.append((name, text))
        total += len(text.encode("utf-8"))
        if total >= megabytes * 1e6:
            break
    return out


def decomposed(files, folder):
    """One more file: the text of FILES that goes beyond ASCII (up to 1 MB) in NFD, which NFC
    composes back."""
    parts, total = [], 0
    for _, text in files:
        if total < 1e6 and any(ord(c) > 127 for c in text):
            parts.append(text)
            total += len(text.encode("utf-8"))
    text = unicodedata.normalize("NFD", "".join(parts))
    path = os.path.join(folder, "decomposed.txt")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return path, text


def split_then_byte_level(pattern):
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def train(kind, texts, folder):
    """A tokenizer of KIND (gpt2, llama3 or qwen2) trained on TEXTS, saved as FOLDER/KIND.json."""
    if kind == "gpt2":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        specials, size = ["<|endoftext|>"], 50257
    elif kind == "llama3":
        tok = Tokenizer(models.BPE(ignore_merges=True))
        tok.pre_tokenizer = split_then_byte_level(LLAMA3_PATTERN)
        specials, size = ["<|begin_of_text|>", "<|end_of_text|>"], 72000
    else:
        tok = Tokenizer(models.BPE())
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = split_then_byte_level(QWEN2_PATTERN)
        specials, size = ["<|endoftext|>"], 60000
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    path = os.path.join(folder, kind + ".json")
    tok.save(path)
    return tok, path


def read_tokens(path):
    """The ids of an llm.c token file (uint16: magic 20240520, version 1; uint32: 20240801, 7)."""
    with open(path, "rb") as f:
        data = f.read()
    magic, version, count = struct.unpack_from("<3i", data, 0)
    if LLMC_FILES.get(magic, (None,))[0] != version:
        raise ValueError("%s: not an llm.c token file (magic %d, version %d)"
                         % (path, magic, version))
    ids = struct.unpack_from("<%d%s" % (count, LLMC_FILES[magic][1]), data, 1024)
    return list(ids), version


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def compare(name, got, want, version, seconds, nbytes):
    if got == want:
        print("PASS %s: %d ids equal, every one in order (token file version %d; "
              "plait data %.1f MB/s)" % (name, len(want), version, nbytes / 1e6 / seconds))
        return True
    i = first_difference(got, want)
    print("FAIL %s: %d ids against tokenizers' %d; first difference at %d: %s against %s"
          % (name, len(got), len(want), i, got[i:i + 8], want[i:i + 8]))
    return False


def plait_data(build, tokenizer_args, files, out):
    cmd = [os.path.join(build, "plait"), "data"] + tokenizer_args + [p for p, _ in files]
    cmd += ["-o", out, "--val-fraction", "0", "--workers", "2"]
    start = time.time()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.time() - start


def plait_decode(build, tokenizer_args, tokens):
    """The bytes build/tools/decode_tokens (the training programs' decoder) gives for TOKENS."""
    cmd = [os.path.join(build, "tools", "decode_tokens"), tokenizer_args[1], tokens]
    cmd += tokenizer_args[3:4]
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE).stdout


def check(build, kind, tok, tokenizer_args, eot, files, folder):
    """plait's ids for FILES against tokenizers', each file preceded by EOT's id."""
    want = []
    for _, text in files:
        want.append(tok.token_to_id(eot))
        want.extend(tok.encode(text, add_special_tokens=False).ids)
    out = os.path.join(folder, kind + ".bin")
    seconds = plait_data(build, tokenizer_args + ["--eot", eot], files, out)
    got, version = read_tokens(out)
    nbytes = sum(len(t.encode("utf-8")) for _, t in files)
    ok = compare(kind, got, want, version, seconds, nbytes)
    decoded = plait_decode(build, tokenizer_args, out)
    normal = tok.normalizer.normalize_str if tok.normalizer else (lambda t: t)
    text = b"".join(eot.encode("utf-8") + normal(t).encode("utf-8") for _, t in files)
    if decoded == text:
        print("PASS %s_decode: plait's decoder gives the %d bytes back" % (kind, len(text)))
    else:
        i = first_difference(decoded, text)
        print("FAIL %s_decode: plait's decoder differs at byte %d: %r against %r"
              % (kind, i, decoded[i:i + 20], text[i:i + 20]))
        ok = False
    return ok


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    megabytes = float(sys.argv[2]) if len(sys.argv) > 2 else 10
    ok = True
    with tempfile.TemporaryDirectory() as folder:
        texts = os.path.join(folder, "texts")
        os.mkdir(texts)
        files = collect(texts, megabytes)
        size = sum(len(t.encode("utf-8")) for _, t in files)
        wide = sum(1 for _, t in files for c in t if ord(c) > 127)
        print("text: %d files, %.1f MB of README files, fortunes and manual pages "
              "(%d characters beyond ASCII)" % (len(files), size / 1e6, wide))
        sample = [t for _, t in files]
        gpt2, gpt2_json = train("gpt2", sample, folder)
        ok &= check(build, "gpt2", gpt2, ["--tokenizer", gpt2_json], "<|endoftext|>", files, folder)
        vocab, merges = gpt2.model.save(folder)
        ok &= check(build, "gpt2_vocab_merges", gpt2, ["--tokenizer", vocab, "--merges", merges],
                    "<|endoftext|>", files, folder)
        llama, llama_json = train("llama3", sample, folder)
        print("llama3-style vocabulary: %d ids" % llama.get_vocab_size())
        ok &= check(build, "llama3", llama, ["--tokenizer", llama_json], "<|end_of_text|>", files,
                    folder)
        qwen2, qwen2_json = train("qwen2", sample, folder)
        nfd = decomposed(files, texts)
        composed = len(unicodedata.normalize("NFC", nfd[1]))
        print("qwen2-style vocabulary: %d ids; the NFD file: %d characters, %d in NFC"
              % (qwen2.get_vocab_size(), len(nfd[1]), composed))
        ok &= check(build, "qwen2", qwen2, ["--tokenizer", qwen2_json], "<|endoftext|>",
                    files + [nfd], folder)
    print("tokenizers: all equal" if ok else "tokenizers: DIFFERENCES")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
