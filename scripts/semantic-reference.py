#!/usr/bin/env python3
"""Semantic dedup's reference (tests/semantic_dedup.rs, docs/SEMANTIC.md), in numpy.

  gen DIR N DIM FILES SEED
      Writes FILES Parquet files under DIR of N records in all: `name` (unique),
      `embedding` (fixed_size_list<float32, DIM>) and `q` (float64). Planted: groups of
      near copies of a base vector (cosine 0.97-0.995 to it), near misses (cosine
      about 0.85), a null and a zero vector, the rest random.

  check  (JSON on stdin: inputs, centroids, eps, keep, ids)
      Given the centroids mdf's k-means wrote, brute force in float64: every vector
      (normalised as mdf does) assigned to its most similar centroid, every pair of a
      cluster with cosine >= 1 - eps joined, each component's first member by `keep`
      (nearest_centroid: similarity to the centroid high first; lowest_id; highest:q)
      kept, ties by mdf id (`ids`: name -> hex id). Prints JSON: rejects
      {name: representative name}, and the recall of the clustering against global
      brute force (all pairs, no clusters): global_pairs, found_pairs, recall; and
      each record's global component (`component`: name -> a member's name).
"""
import json
import sys

import numpy as np


def gen(out, n, dim, files, seed):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)

    def unit(v):
        return v / np.linalg.norm(v)

    def near(base, cos):
        # A vector at exactly cosine `cos` to `base`: base·cos + orthogonal·sin.
        o = rng.standard_normal(dim)
        o -= o.dot(base) * base
        o = unit(o)
        return unit(base * cos + o * np.sqrt(1 - cos * cos))

    rows = []
    while len(rows) < n:
        base = unit(rng.standard_normal(dim))
        r = rng.random()
        rows.append(base)
        if r < 0.25:
            for _ in range(rng.integers(1, 4)):
                rows.append(near(base, rng.uniform(0.97, 0.995)))
        elif r < 0.35:
            rows.append(near(base, 0.85))
    rows = rows[:n]
    vecs = [np.asarray(v, dtype=np.float32) for v in rows]
    vecs[n // 3] = None  # no embedding: kept, never a duplicate
    vecs[n // 2] = np.zeros(dim, dtype=np.float32)  # no direction: the same
    order = rng.permutation(n)
    names = [f"r{i:06d}" for i in range(n)]
    q = rng.random(n)
    t = pa.list_(pa.field("item", pa.float32()), dim)
    for f in range(files):
        idx = order[f::files]
        emb = pa.array(
            [None if vecs[i] is None else vecs[i].tolist() for i in idx], type=t
        )
        table = pa.table(
            {
                "name": pa.array([names[i] for i in idx]),
                "embedding": emb,
                "q": pa.array([float(q[i]) for i in idx]),
            }
        )
        pq.write_table(table, f"{out}/part-{f}.parquet")


def normalise(v):
    v64 = v.astype(np.float64)
    n = np.sqrt((v64 * v64).sum())
    if not np.isfinite(n) or n <= 0:
        return None
    u = (v64 / n).astype(np.float32)
    if not np.all(np.isfinite(u)):
        return None
    return u


def global_components(names, g, threshold):
    """Each record's component in the global graph (all pairs), named by a member."""
    parent = list(range(len(names)))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j in zip(*np.nonzero(np.triu(g >= threshold, 1))):
        a, b = find(int(i)), find(int(j))
        if a != b:
            parent[max(a, b)] = min(a, b)
    return {names[i]: names[find(i)] for i in range(len(names))}


def check(req):
    import pyarrow.parquet as pq

    names, vecs, qs = [], [], []
    for path in req["inputs"]:
        t = pq.read_table(path).to_pydict()
        for name, e, q in zip(t["name"], t["embedding"], t["q"]):
            if e is None:
                continue
            u = normalise(np.asarray(e, dtype=np.float32))
            if u is None:
                continue
            names.append(name)
            vecs.append(u)
            qs.append(q)
    v = np.stack(vecs).astype(np.float64)
    raw = open(req["centroids"], "rb").read()
    assert raw[:8] == b"MDFCENT1", raw[:8]
    start, end = np.frombuffer(raw[16:32], dtype="<u8")
    c = np.frombuffer(raw[start:end], dtype="<f4").astype(np.float64)
    c = c.reshape(-1, v.shape[1])
    sims = v @ c.T
    cluster = sims.argmax(axis=1)  # ties: the lowest centroid
    to_centroid = sims[np.arange(len(v)), cluster]
    threshold = 1.0 - req["eps"]
    ids = {k: int(x, 16) for k, x in req["ids"].items()}
    keep = req["keep"]

    def order_key(i):
        if keep == "nearest_centroid":
            score = to_centroid[i]
        elif keep == "lowest_id":
            score = 0.0
        else:
            score = qs[i]
        return (-score, ids[names[i]])

    rejects = {}
    for cl in np.unique(cluster):
        members = sorted(np.flatnonzero(cluster == cl), key=order_key)
        m = v[members]
        s = m @ m.T
        parent = list(range(len(members)))

        def find(x):
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for i in range(len(members)):
            for j in np.flatnonzero(s[i, i + 1 :] >= threshold) + i + 1:
                a, b = find(i), find(int(j))
                if a != b:
                    parent[max(a, b)] = min(a, b)
        for i in range(len(members)):
            r = find(i)
            if r != i:
                rejects[names[members[i]]] = names[members[r]]
    g = v @ v.T
    iu = np.triu_indices(len(v), 1)
    hits = g[iu] >= threshold
    same = cluster[iu[0]] == cluster[iu[1]]
    global_pairs = int(hits.sum())
    found = int((hits & same).sum())
    return {
        "rejects": rejects,
        "global_pairs": global_pairs,
        "found_pairs": found,
        "recall": found / global_pairs if global_pairs else 1.0,
        "component": global_components(names, g, threshold),
    }


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
    else:
        json.dump(check(json.load(sys.stdin)), sys.stdout)
