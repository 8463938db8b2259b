#!/usr/bin/env python3
"""mdf's quality filters side by side with datatrove 0.10.1's on the same texts: how
often their verdicts (keep or drop) agree, per filter and per half, and where they
part (docs/FILTERS.md, issue 24).

    python3 scripts/filter-agreement.py MDF [--words whitespace|uax29|spacy] [--dump FILE]
        [--dt-cache FILE] [--texts FILE]

MDF is an mdf binary (release build). The texts are the ground-truth main texts of
../shared/data/extraction-wceb (every source; real pages' text, 2,900 of them, mostly
English), each split into a tuning half and a held-out half by the parity of a hash of
its id (crc32 of "source/id"). datatrove runs in this interpreter: it needs datatrove
0.10.1 and spaCy (`pip download datatrove==0.10.1 --no-deps`, `pip install spacy`),
with its filters' defaults (English). mdf runs one job per filter, its defaults plus
`words:` for the filters that split words, and its kept and rejected records are read
back. Prints a table (filter, half, pages, agreement, mdf-only drops, datatrove-only
drops) and, per filter, the most frequent disagreeing (mdf reason, datatrove reason)
pairs; --dump FILE writes every disagreement as JSON Lines. --texts FILE takes the texts
from a JSON Lines file of {"doc", "text"} instead (e.g. html_extract's output on
../shared/data/extraction-dev, pages the word splits were never adjusted on), halved
the same way.
"""
import argparse
import collections
import glob
import gzip
import json
import os
import subprocess
import sys
import tempfile
import zlib

import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data", "extraction-wceb")

FILTERS = ["gopher_quality", "gopher_repetition", "c4_quality", "fineweb_quality"]
WORDS = {"gopher_quality", "gopher_repetition", "fineweb_quality"}


def half_of(key):
    return "tuning" if zlib.crc32(key.encode()) % 2 == 0 else "held-out"


def texts_file(path):
    docs = []
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            if (d.get("text") or "").strip():
                docs.append({"doc": d["doc"], "text": d["text"], "half": half_of(d["doc"])})
    return docs


def corpus():
    docs = []
    for gt in sorted(glob.glob(os.path.join(DATA, "*", "ground-truth.json"))):
        source = os.path.basename(os.path.dirname(gt))
        with open(gt) as f:
            truth = json.load(f)
        for pid, v in sorted(truth.items()):
            text = v.get("text") or ""
            if not text.strip():
                continue
            key = f"{source}/{pid}"
            docs.append({"doc": key, "text": text, "half": half_of(key)})
    return docs


def datatrove_verdicts(docs):
    from datatrove.data import Document
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )

    filters = {
        "gopher_quality": GopherQualityFilter(),
        "gopher_repetition": GopherRepetitionFilter(),
        "c4_quality": C4QualityFilter(),
        "fineweb_quality": FineWebQualityFilter(),
    }
    out = {}
    for name, f in filters.items():
        v = {}
        for d in docs:
            r = f.filter(Document(text=d["text"], id=d["doc"]))
            if r is True or (isinstance(r, tuple) and r[0]):
                v[d["doc"]] = None
            elif isinstance(r, tuple):
                v[d["doc"]] = r[1]
            else:
                v[d["doc"]] = "dropped"
        out[name] = v
    return out


def mdf_verdicts(mdf, docs, words, tmp):
    inp = os.path.join(tmp, "pages.jsonl")
    with open(inp, "w") as f:
        for d in docs:
            f.write(json.dumps({"doc": d["doc"], "text": d["text"]}) + "\n")
    out = {}
    for name in FILTERS:
        params = {"words": words} if (words and name in WORDS) else {}
        spec = os.path.join(tmp, f"{name}.yaml")
        dest = os.path.join(tmp, f"out-{name}")
        with open(spec, "w") as f:
            json.dump(
                {
                    "version": 1,
                    "name": f"agree-{name}",
                    "input": {"uris": [inp]},
                    "stages": [{"op": name, "params": params}],
                    "output": {"uri": dest, "overwrite": True},
                },
                f,
            )
        r = subprocess.run(
            [mdf, "run", spec, "--job-root", os.path.join(tmp, "jobs")],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            sys.exit(f"mdf {name}: {r.stderr}")
        v = {}
        for p in glob.glob(os.path.join(dest, "part-*.parquet")):
            for doc in pq.read_table(p, columns=["doc"]).column("doc").to_pylist():
                v[doc] = None
        for p in glob.glob(os.path.join(dest, "_rejects", "**", "*.parquet"), recursive=True):
            t = pq.read_table(p, columns=["reason", "record"])
            for why, rec in zip(t.column("reason").to_pylist(), t.column("record").to_pylist()):
                v[json.loads(rec)["doc"]] = why or "dropped"
        out[name] = v
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mdf")
    ap.add_argument("--words", default=None)
    ap.add_argument("--dump", default=None)
    ap.add_argument("--dt-cache", default=None, help="datatrove's verdicts, kept between runs")
    ap.add_argument("--texts", default=None, help='JSON Lines of {"doc", "text"} to use instead')
    a = ap.parse_args()
    docs = texts_file(a.texts) if a.texts else corpus()
    halves = {d["doc"]: d["half"] for d in docs}
    if a.dt_cache and os.path.exists(a.dt_cache):
        with open(a.dt_cache) as f:
            dt = json.load(f)
    else:
        dt = datatrove_verdicts(docs)
        if a.dt_cache:
            with open(a.dt_cache, "w") as f:
                json.dump(dt, f)
    with tempfile.TemporaryDirectory() as tmp:
        ours = mdf_verdicts(a.mdf, docs, a.words, tmp)
    dump = open(a.dump, "w") if a.dump else None
    print(f"words: {a.words or 'default'}; {len(docs)} texts")
    print("| filter | half | pages | agree | same reason | mdf drops only | datatrove drops only |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name in FILTERS:
        pairs = collections.Counter()
        for half in ["tuning", "held-out"]:
            n = agree = only_m = only_d = same_reason = 0
            for d in docs:
                if d["half"] != half:
                    continue
                k = d["doc"]
                m, t = ours[name].get(k, "missing"), dt[name][k]
                n += 1
                # A record mdf lost, or an operator failure, is never agreement.
                lost = m == "missing" or (m or "").startswith("operator_")
                if not lost and (m is None) == (t is None):
                    agree += 1
                    same_reason += m == t
                    continue
                if m is None and not lost:
                    only_d += 1
                else:
                    only_m += 1
                pairs[(m, t)] += 1
                if dump:
                    dump.write(json.dumps({"filter": name, "doc": k, "half": half, "mdf": m, "datatrove": t}) + "\n")
            print(
                f"| {name} | {half} | {n} | {100 * agree / n:.2f} % | {100 * same_reason / n:.2f} % | {only_m} | {only_d} |"
            )
        for (m, t), c in pairs.most_common(6):
            print(f"    {c:4d}  mdf {m!r:34} datatrove {t!r}", file=sys.stderr)


if __name__ == "__main__":
    main()
