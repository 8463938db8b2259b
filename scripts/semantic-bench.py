#!/usr/bin/env python3
"""Semantic dedup measured as a whole job (docs/PERFORMANCE.md): N generated unit
vectors of DIM dimensions (a fifth of them near copies, cosine 0.97-0.995, of another)
in Parquet files of 2,500 vectors each, one `mdf run` of `dedup kind: semantic` with a MEMORY budget.
Prints wall and CPU seconds, vectors per CPU-second, peak resident memory (one
process: in-process workers) and what was dropped. Run it with N and 10×N to see memory
stay within the budget as the input grows.

  scripts/semantic-bench.py MDF_BINARY [N] [DIM] [MEMORY] [WORKERS] [CLUSTERS] [SAMPLE]
"""
import json
import subprocess
import sys
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchrun import run_job


def vectors(n, dim, rng):
    v = rng.standard_normal((n, dim)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    # Every fifth row a near copy of a random earlier row: base·c + orthogonal·s.
    copies = np.arange(5, n, 5)
    src = (rng.random(len(copies)) * copies).astype(np.int64)
    o = rng.standard_normal((len(copies), dim)).astype(np.float32)
    b = v[src]
    o -= (o * b).sum(axis=1, keepdims=True) * b
    o /= np.linalg.norm(o, axis=1, keepdims=True)
    c = rng.uniform(0.97, 0.995, (len(copies), 1)).astype(np.float32)
    v[copies] = b * c + o * np.sqrt(1 - c * c)
    return v


def main():
    mdf = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
    dim = int(sys.argv[3]) if len(sys.argv) > 3 else 256
    memory = sys.argv[4] if len(sys.argv) > 4 else "64MiB"
    workers = sys.argv[5] if len(sys.argv) > 5 else "1"
    clusters = sys.argv[6] if len(sys.argv) > 6 else "auto"
    sample = sys.argv[7] if len(sys.argv) > 7 else "20000"
    rng = np.random.default_rng(7)
    v = vectors(n, dim, rng)
    t = pa.list_(pa.field("item", pa.float32()), dim)
    with tempfile.TemporaryDirectory() as d:
        # Files of 2,500 vectors and tasks of 16 MiB: as the input grows, tasks stay the
        # same size, so the records pipeline's buffers do too; what could grow is the
        # dedup's.
        files = max(8, n // 2500)
        for f in range(files):
            part = v[f::files]
            emb = pa.FixedSizeListArray.from_arrays(pa.array(part.reshape(-1)), dim)
            pq.write_table(pa.table({"embedding": emb.cast(t)}), f"{d}/part-{f}.parquet")
        spec = f"{d}/spec.yaml"
        with open(spec, "w") as fh:
            fh.write(f"""version: 1
name: semantic-bench
input: {{uris: ["{d}/*.parquet"]}}
stages:
  - {{op: dedup, params: {{key: embedding, kind: semantic, eps: 0.05, clusters: {clusters}, sample: {sample}, memory: {memory}}}}}
output: {{uri: "{d}/out"}}
job: {{task_bytes: 16MiB}}
""")
        job, wall, cpu, rss = run_job(mdf, spec, f"{d}/jobs", workers)
        st = json.loads(subprocess.run([mdf, "status", job, "--json"], capture_output=True,
                                       text=True, check=True).stdout)
        dropped = sum(p["stats"].get("rejected", 0) for p in st["phases"] if p["name"] != "finalize")
        mib = n * dim * 4 / 2**20
        print("| vectors | dim | MiB of vectors | memory | workers | wall s | CPU s "
              "| vectors / CPU-s | peak RSS MiB | dropped |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        print(f"| {n:,} | {dim} | {mib:.0f} | {memory} | {workers} | {wall:.2f} | {cpu:.2f} "
              f"| {n / cpu:,.0f} | {rss:.0f} | {dropped:,} |")


if __name__ == "__main__":
    main()
