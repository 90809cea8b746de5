#!/usr/bin/env python3
"""bpe_reference.py: a small byte-level BPE tokenizer for the tests, in the standard library only.

  bpe_reference.py make OUT.json [--gpt2] [--big-id N] [--ignore-merges] [--normalizer FORMS]
      trains about 300 merges on a fixed text and writes a Hugging Face tokenizer.json: a Split on
      an ASCII pattern then ByteLevel (or, with --gpt2, ByteLevel with GPT-2's own pattern), the
      added tokens <|endoftext|> (special) and <|sep|> (normalized, lstrip), and with --big-id an
      added token <|big|> of id N (past 65535: 32-bit token files). --normalizer NFC (NFD, NFKC,
      NFKD) gives the tokenizer that normalizer, "NFKD,NFC" a Sequence of them, and adds the
      normalized token <|\u212b|> (ANGSTROM SIGN, whose NFC is U+00C5).
  bpe_reference.py encode TOKENIZER.json TEXTFILE
      prints the ids the same rules give (EOT first), one per line: an independent encoder built
      from the definitions (pattern, bytes_char, merges by rank, unicodedata's normalization
      forms), not from plait's code.
"""
import json
import re
import sys
import unicodedata

ASCII_PATTERN = r"'s|'t|'re| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+"

CORPUS = """The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs away.
It's a café in München where the naïve über-coder wrote 日本語 and 日本 text, 1234 5678.
Numbers 2024 and 1999 come back: 2024, 1999, 42. Tabs\tand  double  spaces   stay.
the the the then there these those this that fox fox dog dog café café München
""" + " ".join(a + b + c
               for a in ["ka", "lo", "mé", "ne", "ru", "sö", "ta", "本", "gu", "pi", "wa", "xe"]
               for b in ["ri", "to", "ñu", "se", "dal", "fen"]
               for c in ["", "n", "ß", "ck"]) + "\n"


def bytes_char():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1))
    bs += list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_CHAR = bytes_char()


def mapped(piece):
    return "".join(BYTE_CHAR[b] for b in piece.encode("utf-8"))


def pre_tokens(text, pattern):
    out, done = [], 0
    for m in re.finditer(pattern, text):
        if m.start() > done:
            out.append(text[done:m.start()])
        if m.end() > m.start():
            out.append(m.group(0))
        done = max(done, m.end())
    if done < len(text):
        out.append(text[done:])
    return out


def train(merges_wanted):
    words = {}
    for piece in pre_tokens(CORPUS, ASCII_PATTERN):
        w = tuple(mapped(piece))
        words[w] = words.get(w, 0) + 1
    vocab = [BYTE_CHAR[b] for b in range(256)]
    merges = []
    for _ in range(merges_wanted):
        counts = {}
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + c
        if not counts:
            break
        best = max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0]
        merges.append(best)
        vocab.append(best[0] + best[1])
        new_words = {}
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new_words[tuple(out)] = new_words.get(tuple(out), 0) + c
        words = new_words
    return vocab, merges


def normalizer(forms):
    steps = [{"type": f} for f in forms.split(",") if f]
    if len(steps) < 2:
        return steps[0] if steps else None
    return {"type": "Sequence", "normalizers": steps}


def normalize(tok, text):
    """The normalizer's forms, in turn."""
    n = tok["normalizer"]
    for step in (n["normalizers"] if n and n["type"] == "Sequence" else [n] if n else []):
        text = unicodedata.normalize(step["type"], text)
    return text


def make(path, gpt2, big_id, ignore_merges, forms):
    vocab, merges = train(300)
    ids = {t: i for i, t in enumerate(vocab)}
    added = [{"id": len(vocab), "content": "<|endoftext|>", "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": True},
             {"id": len(vocab) + 1, "content": "<|sep|>", "single_word": False, "lstrip": True,
              "rstrip": False, "normalized": True, "special": False}]
    if big_id:
        added.append({"id": big_id, "content": "<|big|>", "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
    if forms:
        added.append({"id": len(vocab) + 2, "content": "<|\u212b|>", "single_word": False,
                      "lstrip": False, "rstrip": False, "normalized": True, "special": False})
    if gpt2:
        pre = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
               "use_regex": True}
    else:
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": ASCII_PATTERN}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]}
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": normalizer(forms), "pre_tokenizer": pre, "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                       "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None,
                     "continuing_subword_prefix": None, "end_of_word_suffix": None,
                     "fuse_unk": False, "byte_fallback": False, "ignore_merges": ignore_merges,
                     "vocab": ids,
                     # both spellings: the first half as "a b", the rest as pairs
                     "merges": [f"{a} {b}" if k < len(merges) // 2 else [a, b]
                                for k, (a, b) in enumerate(merges)]}}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)


def bpe(piece, ranks, vocab, ignore_merges):
    if ignore_merges and piece in vocab:
        return [vocab[piece]]
    parts = list(piece)
    while len(parts) > 1:
        pairs = [(ranks.get((a, b), 1 << 30), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
        rank, i = min(pairs)
        if rank == 1 << 30:
            break
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    return [vocab[p] for p in parts]


def split_added(text, tokens):
    """Leftmost, then longest, match of the added tokens; lstrip takes the spaces before it."""
    out, done, at = [], 0, 0
    while at < len(text):
        hits = [t for t in tokens if text.startswith(t["content"], at)]
        if not hits:
            at += 1
            continue
        t = max(hits, key=lambda t: len(t["content"]))
        start = at
        if t["lstrip"]:
            while start > done and text[start - 1].isspace():
                start -= 1
        if start > done:
            out.append(text[done:start])
        out.append(t["id"])
        done = at = at + len(t["content"])
    if done < len(text):
        out.append(text[done:])
    return out


def encode(tok_path, text_path):
    tok = json.load(open(tok_path, encoding="utf-8"))
    model = tok["model"]
    vocab = model["vocab"]
    ranks = {}
    for k, m in enumerate(model["merges"]):
        a, b = m.split(" ") if isinstance(m, str) else m
        ranks[(a, b)] = k
    pre = tok["pre_tokenizer"]
    pattern = ASCII_PATTERN  # GPT-2's own pattern matches it on ASCII text
    text = open(text_path, "rb").read().decode("utf-8", errors="replace")
    ids = [next(t["id"] for t in tok["added_tokens"] if t["content"] == "<|endoftext|>")]
    plain = [t for t in tok["added_tokens"] if not t["normalized"]]
    normalized = [dict(t, content=normalize(tok, t["content"])) for t in tok["added_tokens"]
                  if t["normalized"]]
    for part in split_added(text, plain):
        for piece in ([part] if isinstance(part, int)
                      else split_added(normalize(tok, part), normalized)):
            if isinstance(piece, int):
                ids.append(piece)
                continue
            for word in pre_tokens(piece, pattern):
                ids.extend(bpe(mapped(word), ranks, vocab, model.get("ignore_merges", False)))
    assert pre["type"] in ("Sequence", "ByteLevel")
    print("\n".join(str(i) for i in ids))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        args = sys.argv[3:]
        big = int(args[args.index("--big-id") + 1]) if "--big-id" in args else 0
        forms = args[args.index("--normalizer") + 1] if "--normalizer" in args else ""
        make(sys.argv[2], "--gpt2" in args, big, "--ignore-merges" in args, forms)
    else:
        encode(sys.argv[2], sys.argv[3])
