#!/usr/bin/env python3
"""Times datatrove's MinHash signatures (MinhashDedupSignature: get_shingles +
get_signature, its defaults: 5-grams, 14 buckets x 8 hashes) on the `text` field of a
JSONL file, one core, to compare with `mdf bench minhash --jsonl FILE`.

    pip install datatrove tokenizers xxhash
    scripts/bench-minhash.py FILE.jsonl

Also writes FILE.jsonl from Debian's documentation HTML (tags stripped) with
`--make FILE.jsonl DIR [N]`, so both tools read the same real text."""
import json, os, re, sys, time


def make(out, root, n):
    docs = []
    for d, _, files in os.walk(root):
        for f in sorted(files):
            if f.endswith(".html") and len(docs) < n:
                html = open(os.path.join(d, f), encoding="utf-8", errors="replace").read()
                html = re.sub(r"(?is)<(script|style)[^>]*>.*?</\\1>", " ", html)
                text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()
                if len(text) > 200:
                    docs.append(text)
    with open(out, "w") as w:
        for t in docs:
            w.write(json.dumps({"text": t}) + "\n")
    print(f"{len(docs)} docs -> {out}")


def main():
    if sys.argv[1] == "--make":
        return make(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 5000)
    from datatrove.pipeline.dedup.minhash import MinhashConfig, MinhashDedupSignature

    texts = [json.loads(l)["text"] for l in open(sys.argv[1])]
    step = MinhashDedupSignature(output_folder="/tmp/mdf-minhash-bench", config=MinhashConfig())
    # datatrove 0.10.1 passes str to xxhash, which xxhash >= 3.6 refuses; encode first
    # (what older xxhash did internally), leaving datatrove's algorithm as it is.
    import xxhash

    probe = step._hash_func
    try:
        probe("a b")
    except TypeError:
        step._hash_func = lambda s: xxhash.xxh64_intdigest(s.encode())
    t = time.process_time()
    for x in texts:
        step.get_signature(step.get_shingles(x))
    secs = time.process_time() - t
    mb = sum(len(x.encode()) for x in texts) / 1e6
    print(f"datatrove MinhashDedupSignature: {len(texts)} docs, {mb:.1f} MB, one core")
    print(f"| docs/s | {len(texts) / secs:.0f} |")
    print(f"| MB/s of text | {mb / secs:.1f} |")


if __name__ == "__main__":
    main()
