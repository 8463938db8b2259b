#!/usr/bin/env python3
"""Paragraph and line dedup, measured (docs/PERFORMANCE.md): a whole `mdf run` of
`dedup kind: paragraph` over the real pages of every extraction-wceb source with the
boilerplate lines tests/paragraph_dedup.rs pastes in (menus, cookie notices, copyright
lines, copied paragraphs), written SCALE times: copy r > 0 has its article lines made
its own (a word spelling r appended) while the boilerplate stays shared, so the corpus grows
SCALE× with the same share of boilerplate. Prints the text in, the units keyed and the
keys bytes per byte of text, what was cut, wall and CPU time, and the peak resident memory
of the run (one process: the workers are in-process), for the `memory` budget given.

  scripts/paragraph-bench.py MDF_BINARY [SCALE] [MEMORY] [UNIT] [WORKERS]
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
MENUS = ["Home | News | Sport | Contact", "Home | News | Sport | Contact  ", "\tHome | News | Sport | Contact"]
COOKIES = [
    "We use cookies to improve your experience. By continuing you accept our Cookie Policy.",
    "WE USE COOKIES to improve your experience, by continuing you accept our cookie policy!",
]


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
    return out


def boilerplate(i, pages):
    """The page's article with boilerplate around it: (head, tail)."""
    head, tail = [], []
    if i % 3 == 0:
        head.append(MENUS[i % 3])
    if i % 4 == 0:
        tail.append(COOKIES[(i // 4) % 2])
    if i % 5 == 1:
        tail.append(f"© {2000 + i % 23} Example Media. All rights reserved.")
    if i % 6 == 2:
        head.append("Mehr zum Thema – Überblick")
    if i % 7 == 3:
        src = pages[(i * 5 + 11) % len(pages)][1]
        p = next((p for p in src.split("\n\n") if len(p) > 80), None)
        if p:
            tail.append(p.strip())
    return head, tail


def main():
    mdf = sys.argv[1]
    scale = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    memory = sys.argv[3] if len(sys.argv) > 3 else "64MiB"
    unit = sys.argv[4] if len(sys.argv) > 4 else "line"
    workers = sys.argv[5] if len(sys.argv) > 5 else None
    base = pages()
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "in"))
        text_bytes = records = 0
        for r in range(scale):
            with open(os.path.join(d, "in", f"part-{r}.jsonl"), "w", encoding="utf-8") as fh:
                for i, (name, t) in enumerate(base):
                    if r:
                        # A word of letters (digits and punctuation would vanish under
                        # normalize: loose, and the copies would be one text again).
                        tag = " " + "".join(chr(ord("a") + int(c)) for c in str(r)) + "q"
                        t = "\n".join(l + tag if l.strip() else l for l in t.split("\n"))
                    head, tail = boilerplate(i, base)
                    sep = "\n\n" if "\n\n" in t else "\n"
                    t = sep.join(head + [t] + tail)
                    fh.write(json.dumps({"doc": f"{r}/{name}", "text": t}) + "\n")
                    text_bytes += len(t.encode("utf-8"))
                    records += 1
        spec = os.path.join(d, "spec.yaml")
        with open(spec, "w") as fh:
            fh.write(f"""version: 1
name: paragraph-bench
input: {{uris: ["{d}/in/*.jsonl"]}}
stages:
  - {{name: para, op: dedup, params: {{key: text, kind: paragraph, unit: {unit}, min_count: 2, keep: first, normalize: loose, memory: {memory}}}}}
output: {{uri: "{d}/out"}}
""")
        job, wall, cpu, rss_mib = run_job(mdf, spec, os.path.join(d, "jobs"), workers)
        st = json.loads(subprocess.run([mdf, "status", job, "--json"], capture_output=True,
                                       text=True, check=True).stdout)
        keys = 0
        jdir = job.removeprefix("file://")
        for f in os.listdir(os.path.join(jdir, "commits", "p00")):
            with open(os.path.join(jdir, "commits", "p00", f)) as fh:
                keys += json.load(fh)["shuffle"]["bytes"]
        red = st["phases"][1]["stats"]
        stage = st["phases"][2]["stats"]["stages"][0]
        removed = stage["totals"]["para_removed_bytes"]["sum"]
        print("| records | text MB | unit | memory | wall s | CPU s | peak RSS MiB | units keyed "
              "| keys bytes / text byte | text cut | rejects |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        print(f"| {records:,} | {text_bytes / 1e6:.1f} | {unit} | {memory} | {wall:.2f} | {cpu:.2f} "
              f"| {rss_mib:.0f} | {red.get('records_in', 0):,} | {keys / text_bytes:.3f} "
              f"| {100 * removed / text_bytes:.1f} % | {stage['reasons'].get('paragraph_duplicate', 0):,} |")


if __name__ == "__main__":
    main()
