"""tokenize_bench.py: plait data --tokenizer's speed against Hugging Face tokenizers (make bench).

Usage: python3 tests/bench/tokenize_bench.py BUILD [MEGABYTES]

MEGABYTES (default 100; the machine may hold less) of the machine's text (the collection of
tests/interop/tokenizers_check.py), a GPT-2-style and a Llama-3-style tokenizer trained by
`tokenizers` on its first 10 MB; then each encodes all of it on one core: `plait data --workers 1`
(reading the files and writing the token file included) and `tokenizers`' encode of each file's
text (already in memory; RAYON_NUM_THREADS=1).
Prints MB/s for both and their ratio, and checks that the ids are the same.
"""
import os
import subprocess
import sys
import tempfile
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
import tokenizers_check as check  # noqa: E402


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    megabytes = float(sys.argv[2]) if len(sys.argv) > 2 else 100
    with tempfile.TemporaryDirectory() as folder:
        texts = os.path.join(folder, "texts")
        os.mkdir(texts)
        files = check.collect(texts, megabytes)
        size = sum(len(t.encode("utf-8")) for _, t in files)
        print("  %d files, %.1f MB of README files, fortunes and manual pages"
              % (len(files), size / 1e6))
        head, total = [], 0
        for _, t in files:
            head.append(t)
            total += len(t)
            if total > 10e6:
                break
        for kind, eot in (("gpt2", "<|endoftext|>"), ("llama3", "<|end_of_text|>")):
            tok, path = check.train(kind, head, folder)
            out = os.path.join(folder, kind + ".bin")
            cmd = [os.path.join(build, "plait"), "data", "--tokenizer", path, "--eot", eot]
            cmd += [p for p, _ in files] + ["-o", out, "--val-fraction", "0", "--workers", "1"]
            start = time.time()
            run = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if run.returncode != 0:
                sys.exit(run.stderr.strip().splitlines()[-1])
            plait_s = time.time() - start
            want, eot_id = [], tok.token_to_id(eot)
            start = time.time()
            for _, text in files:
                want.append(eot_id)
                want.extend(tok.encode(text, add_special_tokens=False).ids)
            hf_s = time.time() - start
            got, _ = check.read_tokens(out)
            same = "same ids" if got == want else "IDS DIFFER"
            print("  %-7s plait data %6.1f MB/s   tokenizers %6.1f MB/s   plait/tokenizers %5.2f"
                  "   (%s)" % (kind, size / 1e6 / plait_s, size / 1e6 / hf_s, hf_s / plait_s, same))


if __name__ == "__main__":
    main()
