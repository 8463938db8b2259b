#!/usr/bin/env python3
"""Decontamination throughput per core: datatrove 0.10's `NGramsDecontFilter` against
`mdf run` with one worker pinned to one core (`taskset -c 0`), on the corpus and
benchmarks of scripts/decont-reference.py (2,789 real pages from
../shared/data/extraction-wceb, 13-grams). Prints a table; both flag the same documents.

    /root/.cache/mdf/py-decont/bin/python scripts/decont-bench.py [path/to/mdf]
"""
import importlib.metadata  # noqa: F401
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ref = __import__("decont-reference")

import numpy as np  # noqa: E402
from datatrove.data import Document  # noqa: E402
from datatrove.pipeline.decont import NGramsDecontConfig, NGramsDecontFilter, NGramsDecontIndexer  # noqa: E402

MDF = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ref.ROOT, "target", "release", "mdf")


def main():
    docs = list(ref.corpus())
    mb = sum(len(t.encode()) for _, t in docs) / 1e6
    config = NGramsDecontConfig(n_grams=ref.N, find_query_ngrams=True, find_overlap_ngrams=True)
    NGramsDecontIndexer._requires_dependencies = []
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        indexer = NGramsDecontIndexer(output_folder=tmp, config=config, language="en")
        os.makedirs(os.path.join(tmp, "evals"))
        os.makedirs(os.path.join(tmp, "index"))
        for name, items in ref.benchmarks():
            with open(os.path.join(tmp, "evals", f"{name}.jsonl"), "w") as f:
                for r in items:
                    f.write(json.dumps(r) + "\n")
            hashes = set()
            for r in items:
                hashes.update(indexer.compute_hashes(r["answer"], r["question"]))
            np.array(sorted(hashes), dtype=config.hash_config.np_descr).tofile(
                os.path.join(tmp, "index", f"{name}.index.hashes")
            )
        filt = NGramsDecontFilter(index_folder=os.path.join(tmp, "index"), config=config, language="en")
        filt.filter(Document(text="warm up", id="0"))
        t0 = time.process_time()
        dt_flagged = sum(1 for i, t in docs if filt.filter(Document(text=t, id=i)) is not True)
        dt = time.process_time() - t0
        rows.append(("datatrove 0.10 NGramsDecontFilter (filter only, index loaded)", dt, dt_flagged))

        os.makedirs(os.path.join(tmp, "in"))
        with open(os.path.join(tmp, "in", "corpus.jsonl"), "w") as f:
            for i, t in docs:
                f.write(json.dumps({"doc": i, "text": t}) + "\n")
        spec = os.path.join(tmp, "spec.yaml")
        with open(spec, "w") as f:
            f.write(
                f"""version: 1
name: decont-bench
input: {{uris: ["{tmp}/in/*.jsonl"]}}
stages:
  - name: decont
    op: decontaminate
    params:
      benchmarks: ["{tmp}/evals/quiz.jsonl", "{tmp}/evals/held.jsonl"]
      fields: [question, answer]
      id_field: id
output: {{uri: "{tmp}/out"}}
"""
            )
        t0 = time.time()
        r0 = os.times()
        subprocess.run(
            ["taskset", "-c", "0", MDF, "run", spec, "--workers", "1", "--job-root", os.path.join(tmp, "jobs")],
            check=True,
            capture_output=True,
        )
        r1 = os.times()
        cpu = (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)
        m = json.load(open(os.path.join(tmp, "out", "_manifest.json")))
        rows.append(("mdf run --workers 1, one core (whole job: read, write, commit)", cpu, m["rejected"]))
    print(f"{len(docs)} documents, {mb:.1f} MB of text, {ref.N}-grams\n")
    print("| what | CPU-s | documents/s per core | MB/s per core | flagged |")
    print("|---|---:|---:|---:|---:|")
    for what, s, flagged in rows:
        print(f"| {what} | {s:.2f} | {len(docs) / s:,.0f} | {mb / s:.2f} | {flagged} |")


if __name__ == "__main__":
    main()
