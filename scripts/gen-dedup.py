#!/usr/bin/env python3
"""Writes JSONL documents with planted duplicates for the dedup measurements in
docs/PERFORMANCE.md.

  scripts/gen-dedup.py exact N FILES OUTDIR   # N short records, ~1/3 exact copies
  scripts/gen-dedup.py near  N FILES OUTDIR   # N ~60-word texts, ~1/4 edited copies

Deterministic (seeded); copies land in random files so duplicates cross tasks.
"""
import json
import os
import random
import sys


def main():
    mode, n, files, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    os.makedirs(out, exist_ok=True)
    rnd = random.Random(42)
    fs = [open(os.path.join(out, f"part-{i:03d}.jsonl"), "w") for i in range(files)]
    vocab = [f"w{i}" for i in range(20000)]
    written = 0
    i = 0
    while written < n:
        if mode == "exact":
            text = f"document {i} of the crawl, value {rnd.getrandbits(40)}"
            copies = 1 + (i % 3 == 0)
            for c in range(copies):
                t = text.upper() if c else text
                fs[rnd.randrange(files)].write(json.dumps({"text": t}) + "\n")
            written += copies
        else:
            words = rnd.choices(vocab, k=60)
            fs[rnd.randrange(files)].write(json.dumps({"text": " ".join(words)}) + "\n")
            written += 1
            if i % 3 == 0:
                for _ in range(rnd.choice((0, 1, 2))):
                    words[rnd.randrange(60)] = f"x{rnd.getrandbits(32)}"
                fs[rnd.randrange(files)].write(json.dumps({"text": " ".join(words)}) + "\n")
                written += 1
        i += 1
    for f in fs:
        f.close()
    print(f"{written} records in {files} files under {out}")


if __name__ == "__main__":
    main()
