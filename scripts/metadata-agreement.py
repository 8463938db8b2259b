#!/usr/bin/env python3
"""Page metadata side by side: mdf's html_extract `metadata: true` (through `mdf bench
extract --sources --dump`) against trafilatura's `extract_metadata`, on every page of
../shared/data/extraction-wceb. Per field: pages where each finds a value, and where
both do, how often they agree (case and white space ignored; dates compared as
YYYY-MM-DD; URLs without a trailing slash; authors as sets of names).

    pip install trafilatura
    scripts/metadata-agreement.py [--mdf target/release/mdf] [--sources DIR]
"""
import argparse, gzip, json, os, re, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))


def norm(field, v):
    if v is None:
        return None
    v = " ".join(str(v).split()).lower()
    if field == "canonical_url":
        v = v.rstrip("/")
    if field == "author":
        v = frozenset(a.strip() for a in re.split(r"[;,]| and ", v) if a.strip())
    return v or None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sources", default=os.path.join(HERE, "..", "..", "shared", "data", "extraction-wceb"))
    ap.add_argument("--mdf", default="target/release/mdf")
    a = ap.parse_args()
    import trafilatura
    from trafilatura.metadata import extract_metadata
    dump = "/tmp/mdf-metadata.jsonl"
    subprocess.run([a.mdf, "bench", "extract", "--sources", a.sources, "--dump", dump],
                   check=True, capture_output=True)
    fields = {"author": "author", "date": "date", "site_name": "sitename",
              "canonical_url": "url", "description": "description"}
    stats = {f: [0, 0, 0, 0] for f in fields}  # mdf found, traf found, both, agree
    n = 0
    urls = {}
    for src in os.listdir(a.sources):
        gt = os.path.join(a.sources, src, "ground-truth.json")
        if os.path.isfile(gt):
            for pid, e in json.load(open(gt)).items():
                urls[(src, pid)] = e.get("url")
    for d in map(json.loads, open(dump)):
        raw = gzip.open(os.path.join(a.sources, d["source"], "html", d["id"] + ".html.gz")).read()
        try:
            # Both see the page's address (mdf dates a page by its path too).
            t = extract_metadata(raw, default_url=urls.get((d["source"], d["id"])))
        except Exception as e:
            print(f"{d['source']}/{d['id']}: {e}", file=sys.stderr)
            t = None
        t = t.as_dict() if t is not None else {}
        n += 1
        for f, tf in fields.items():
            mv, tv = norm(f, d.get(f)), norm(f, t.get(tf))
            s = stats[f]
            s[0] += mv is not None
            s[1] += tv is not None
            if mv is not None and tv is not None:
                s[2] += 1
                s[3] += mv == tv
    print(f"{n} pages; trafilatura {trafilatura.__version__}\n")
    print("| field | mdf finds | trafilatura finds | both | agree where both |")
    print("|---|---|---|---|---|")
    for f, (m, t, b, ag) in stats.items():
        print(f"| {f} | {m} ({m / n:.0%}) | {t} ({t / n:.0%}) | {b} | {ag / max(b, 1):.1%} |")


if __name__ == "__main__":
    main()
