#!/usr/bin/env python3
"""Reads mdf's token shard outputs back, independently of mdf (tests/tokenizers.rs).

  token-shards-read.py megatron DIR
      Every document of every DIR/*.idx + .bin pair. With megatron-core (and torch)
      installed, through megatron.core.datasets.indexed_dataset.IndexedDataset itself;
      otherwise through a reader written from that module's documented layout, with
      numpy only (the same header, version, dtype codes, arrays and checks as its
      _IndexReader). Prints JSON {"reader": ..., "dtype": ..., "docs": [[ids...], ...],
      "shards": N}.
  token-shards-read.py tokens DIR DTYPE
      Every document of every DIR/*.tokens + .offsets pair (numpy.fromfile).
"""
import glob
import json
import os
import struct
import sys

import numpy as np

HEADER = b"MMIDIDX\x00\x00"
# megatron.core.datasets.indexed_dataset.DType
CODES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64,
         6: np.float64, 7: np.float32, 8: np.uint16}


def read_idx(idx_path):
    with open(idx_path, "rb") as f:
        assert f.read(9) == HEADER, f"bad header: {idx_path}"
        (version,) = struct.unpack("<Q", f.read(8))
        assert version == 1, f"bad version {version}"
        (code,) = struct.unpack("<B", f.read(1))
        (seqs,) = struct.unpack("<Q", f.read(8))
        (docs,) = struct.unpack("<Q", f.read(8))
        offset = f.tell()
    buf = np.memmap(idx_path, mode="r", order="C")
    lengths = np.frombuffer(buf, dtype=np.int32, count=seqs, offset=offset)
    pointers = np.frombuffer(buf, dtype=np.int64, count=seqs, offset=offset + lengths.nbytes)
    doc_idx = np.frombuffer(buf, dtype=np.int64, count=docs,
                            offset=offset + lengths.nbytes + pointers.nbytes)
    end = offset + lengths.nbytes + pointers.nbytes + doc_idx.nbytes
    assert end == os.path.getsize(idx_path), f"{idx_path}: {os.path.getsize(idx_path) - end} trailing bytes"
    return CODES[code], lengths, pointers, doc_idx


def megatron(d, _dtype=None):
    prefixes = sorted(p[:-4] for p in glob.glob(os.path.join(d, "*.idx")))
    out, reader, dtype = [], "layout", None
    try:
        from megatron.core.datasets.indexed_dataset import IndexedDataset  # noqa
        reader = "megatron-core"
    except Exception:
        IndexedDataset = None
    for prefix in prefixes:
        dt, lengths, pointers, doc_idx = read_idx(prefix + ".idx")
        dtype = np.dtype(dt).name
        assert doc_idx[0] == 0 and doc_idx[-1] == len(lengths), "document indices span the sequences"
        assert all(a <= b for a, b in zip(doc_idx[:-1], doc_idx[1:])), "document indices ascend"
        if IndexedDataset is not None:
            ds = IndexedDataset(prefix)
            assert list(ds.document_indices) == list(doc_idx)
            seqs = [[int(x) for x in ds[i]] for i in range(len(ds))]
        else:
            data = np.memmap(prefix + ".bin", mode="r", order="C")
            size = np.dtype(dt).itemsize
            assert len(lengths) == 0 or pointers[-1] + lengths[-1] * size == len(data), "the .bin's size"
            seqs = [[int(x) for x in np.frombuffer(data, dtype=dt, count=int(n), offset=int(p))]
                    for n, p in zip(lengths, pointers)]
        # Document d is the sequences doc_idx[d]..doc_idx[d+1] (none: an empty document).
        for a, b in zip(doc_idx[:-1], doc_idx[1:]):
            out.append([t for s in seqs[a:b] for t in s])
    print(json.dumps({"reader": reader, "dtype": dtype, "docs": out, "shards": len(prefixes)}))


def tokens(d, dtype):
    out, shards = [], sorted(glob.glob(os.path.join(d, "*.tokens")))
    for t in shards:
        ids = np.fromfile(t, dtype=np.dtype(dtype).newbyteorder("<"))
        off = np.fromfile(t[: -len(".tokens")] + ".offsets", dtype="<u8")
        assert off[0] == 0 and off[-1] == len(ids), "offsets span the ids"
        out.extend([int(x) for x in ids[a:b]] for a, b in zip(off[:-1], off[1:]))
    print(json.dumps({"reader": "numpy", "dtype": dtype, "docs": out, "shards": len(shards)}))


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"megatron": megatron, "tokens": tokens}[cmd](*args)
