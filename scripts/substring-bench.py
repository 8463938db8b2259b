#!/usr/bin/env python3
"""Exact-substring dedup, measured (docs/PERFORMANCE.md): a whole `mdf run` of
`dedup kind: substring` over real pages (../shared/data/extraction-wceb, every source)
with passages pasted between pages and whole copies, as tests/substring.rs builds them,
repeated REPEAT times under other names (so the corpus grows and repeats). Prints the
text bytes in, the store bytes the shuffle wrote (keys objects, marks objects) per byte
of text, what was cut, and the run's wall and CPU time.

  scripts/substring-bench.py MDF_BINARY [REPEAT] [MIN_TOKENS] [WORKERS]
"""
import json
import os
import subprocess
import sys
import tempfile

from benchrun import run_job

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "extraction-wceb")
SOURCES = ["cleaneval", "cleanportaleval", "l3s-gn1", "wcxb", "readability"]


def pages():
    out = []
    for s in SOURCES:
        with open(os.path.join(DATA, s, "ground-truth.json"), encoding="utf-8") as fh:
            d = json.load(fh)
        for k in sorted(d):
            v = d[k]
            t = v.get("text", "") if isinstance(v, dict) else v
            if isinstance(t, str) and t:
                out.append((f"{s}/{k}", t))
    n = len(out)
    docs = list(out)
    for i in range(0, n, 4):
        words = out[(i * 7 + 3) % n][1].split()
        if len(words) < 40:
            continue
        a = (i * 13) % (len(words) - 30)
        passage = " ".join(words[a:a + 15 + (i * 31) % 60])
        t = docs[i][1]
        mid = max(t.rfind(" ", 0, len(t) // 2), 0)
        docs[i] = (docs[i][0], f"{t[:mid]} {passage}{t[mid:]}")
    for i in range(0, n, 9):
        docs.append((f"copy-of/{docs[i][0]}", docs[i][1]))
    return docs


def main():
    mdf = sys.argv[1]
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    k = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    workers = sys.argv[4] if len(sys.argv) > 4 else None
    docs = pages()
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "in"))
        text_bytes = 0
        words = 0
        for r in range(repeat):
            with open(os.path.join(d, "in", f"part-{r}.jsonl"), "w", encoding="utf-8") as fh:
                for name, t in docs:
                    fh.write(json.dumps({"doc": f"{r}/{name}", "text": t}) + "\n")
                    text_bytes += len(t.encode("utf-8"))
                    words += len(t.split())
        spec = os.path.join(d, "spec.yaml")
        with open(spec, "w") as fh:
            fh.write(f"""version: 1
name: substring-bench
input: {{uris: ["{d}/in/*.jsonl"]}}
stages:
  - {{name: substr, op: dedup, params: {{key: text, kind: substring, min_tokens: {k}}}}}
output: {{uri: "{d}/out"}}
""")
        job, wall, cpu, _ = run_job(mdf, spec, os.path.join(d, "jobs"), workers)
        jdir = job.removeprefix("file://")
        keys = marks = cut = 0
        for phase, var in (("p00", "keys"), ("p01", "marks")):
            for f in os.listdir(os.path.join(jdir, "commits", phase)):
                with open(os.path.join(jdir, "commits", phase, f)) as fh:
                    c = json.load(fh)
                if phase == "p00":
                    keys += c["shuffle"]["bytes"]
                else:
                    marks += c["shuffle"]["bytes"]
                    cut += c["shuffle"]["rows"]
        st = json.loads(subprocess.run([mdf, "status", job, "--json"], capture_output=True,
                                       text=True, check=True).stdout)
        stage = st["phases"][2]["stats"]["stages"][0]
        removed = stage["totals"]["substr_removed_bytes"]["sum"]
        print(f"| records | text MB | words | min_tokens | wall s | CPU s | text MB/s per CPU-s "
              f"| keys bytes / text byte | marks bytes / text byte | windows cut | text cut | rejects |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        print(f"| {len(docs) * repeat:,} | {text_bytes / 1e6:.1f} | {words:,} | {k} | {wall:.2f} "
              f"| {cpu:.2f} | {text_bytes / 1e6 / cpu:.2f} | {keys / text_bytes:.2f} "
              f"| {marks / text_bytes:.3f} | {cut:,} | {100 * removed / text_bytes:.1f} % "
              f"| {stage['reasons'].get('substring_duplicate', 0):,} |")


if __name__ == "__main__":
    main()
