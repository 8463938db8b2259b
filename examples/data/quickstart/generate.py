"""Generates the quickstart sample: small JSONL shards of synthetic web documents,
including a few records the pipeline must reject (too short, malformed JSON, invalid UTF-8) and exact duplicates differing only in case/spacing.
Deterministic: `python3 generate.py` rewrites identical files."""
import json, random

WORDS = ("data model train web page text token corpus clean filter quality language "
         "dedup crawl common html extract parquet shard worker lease commit store object "
         "the a of and to in is for on with as by at from that this it be are was").split()

def doc(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."

def main():
    rng = random.Random(7)
    for shard in range(3):
        lines = []
        for i in range(120):
            d = {"url": f"https://example.org/{shard}/{i}", "text": doc(rng, rng.randint(3, 200)),
                 "lang": rng.choice(["en", "en", "en", "de", "fr"])}
            lines.append(json.dumps(d))
        # exact duplicates of earlier docs, differing only in case and spacing
        for i in range(5):
            d = json.loads(lines[i])
            d["url"] += "?dup"
            d["text"] = "  " + d["text"].upper().replace(" ", "   ")
            lines.append(json.dumps(d))
        lines.insert(17, '{"url": "https://example.org/broken", "text": "unterminated')
        lines.insert(33, b'{"url": "https://example.org/latin1", "text": "caf\xe9 au lait is not utf-8"}'.decode("latin-1"))
        with open(f"shard-{shard:02}.jsonl", "w", encoding="latin-1") as f:
            f.write("\n".join(lines) + "\n")

if __name__ == "__main__":
    main()
