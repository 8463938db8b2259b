#!/usr/bin/env python3
"""Near-duplicate dedup against an earlier corpus, measured (docs/PERFORMANCE.md): an
earlier `mdf run` of `dedup kind: phash` over OLD random 64-bit hashes (with near
copies), then a new job of NEW hashes against it (a third of them near or exact copies
of old ones), with the same `memory` budget. Prints, for the new job, the index entries
read, wall and CPU time, peak resident memory (one process: in-process workers) and
what was dropped. Run it with OLD and 10×OLD to see memory stay within the budget as
the index grows.

  scripts/against-bench.py MDF_BINARY [OLD] [NEW] [MEMORY] [WORKERS]
"""
import json
import os
import random
import subprocess
import sys
import tempfile

from benchrun import run_job


def write(path, hashes):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        for h in hashes:
            fh.write(json.dumps({"phash": f"{h:016x}"}) + "\n")


def flip(h, rng):
    for _ in range(1 + rng.randrange(4)):
        h ^= 1 << rng.randrange(64)
    return h


def main():
    mdf = sys.argv[1]
    n_old = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    n_new = int(sys.argv[3]) if len(sys.argv) > 3 else 100_000
    memory = sys.argv[4] if len(sys.argv) > 4 else "16MiB"
    workers = sys.argv[5] if len(sys.argv) > 5 else None
    rng = random.Random(7)
    old = [rng.getrandbits(64) for _ in range(n_old)]
    new = []
    for i in range(n_new):
        if i % 3 == 0:
            new.append(flip(old[rng.randrange(n_old)], rng))
        else:
            new.append(rng.getrandbits(64))
    with tempfile.TemporaryDirectory() as d:
        for k in range(8):
            write(f"{d}/old/{k}.jsonl", old[k::8])
            write(f"{d}/new/{k}.jsonl", new[k::8])
        jobs = f"{d}/jobs"
        spec_old = f"{d}/old.yaml"
        with open(spec_old, "w") as fh:
            fh.write(f"""version: 1
name: against-old
input: {{uris: ["{d}/old/*.jsonl"]}}
stages:
  - {{op: dedup, params: {{key: phash, kind: phash, radius: 4, memory: {memory}}}}}
output: {{uri: "{d}/out-old"}}
""")
        old_job, *_ = run_job(mdf, spec_old, jobs, workers)
        spec_new = f"{d}/new.yaml"
        with open(spec_new, "w") as fh:
            fh.write(f"""version: 1
name: against-new
input: {{uris: ["{d}/new/*.jsonl"]}}
stages:
  - {{op: dedup, params: {{key: phash, kind: phash, radius: 4, memory: {memory}, against: "{old_job}"}}}}
output: {{uri: "{d}/out-new"}}
""")
        job, wall, cpu, rss = run_job(mdf, spec_new, jobs, workers)
        st = json.loads(subprocess.run([mdf, "status", job, "--json"], capture_output=True,
                                       text=True, check=True).stdout)
        cand = st["phases"][1]["stats"]
        dropped = sum(p["stats"].get("rejected", 0) for p in st["phases"] if p["name"] != "finalize")
        print("| old hashes | new hashes | memory | candidates entries in | wall s | CPU s "
              "| peak RSS MiB | duplicates |")
        print("|---|---|---|---|---|---|---|---|")
        print(f"| {n_old:,} | {n_new:,} | {memory} | {cand.get('records_in', 0):,} | {wall:.2f} "
              f"| {cpu:.2f} | {rss:.0f} | {dropped:,} |")


if __name__ == "__main__":
    main()
