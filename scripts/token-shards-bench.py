#!/usr/bin/env python3
"""The Python reference of mdf's token shard output, for docs/PERFORMANCE.md: what
Megatron-LM's tools/preprocess_data.py does per document (tokenizer.encode, append the
end-of-document id, IndexedDatasetBuilder.add_item: numpy.array(ids, dtype).tobytes()
into the .bin, lengths into the .idx), with the `tokenizers` package's batch encoder.

  token-shards-bench.py TOKENIZER OUT_PREFIX EOD FILE.jsonl...

Prints JSON {"docs", "tokens", "cpu_s", "wall_s"}: process CPU time, so compare with
`TOKENIZERS_PARALLELISM=false` against mdf's CPU time.
"""
import json
import struct
import sys
import time

import numpy as np
from tokenizers import Tokenizer


def main(tok_path, prefix, eod, *files):
    eod = int(eod)
    t0, c0 = time.time(), time.process_time()
    tok = Tokenizer.from_file(tok_path)
    lengths = []
    dtype = np.uint16 if tok.get_vocab_size() < 65500 else np.int32
    with open(prefix + ".bin", "wb") as data:
        for path in files:
            with open(path, encoding="utf-8") as f:
                batch = []
                for line in f:
                    batch.append(json.loads(line).get("text") or "")
                    if len(batch) == 1024:
                        flush(tok, batch, eod, dtype, data, lengths)
                        batch = []
                flush(tok, batch, eod, dtype, data, lengths)
    n = len(lengths)
    with open(prefix + ".idx", "wb") as idx:
        idx.write(b"MMIDIDX\x00\x00")
        idx.write(struct.pack("<Q", 1))
        idx.write(struct.pack("<B", 8 if dtype == np.uint16 else 4))
        idx.write(struct.pack("<Q", n))
        idx.write(struct.pack("<Q", n + 1))
        lens = np.array(lengths, dtype=np.int32)
        idx.write(lens.tobytes(order="C"))
        ptr = np.zeros(n, dtype=np.int64)
        if n:
            ptr[1:] = np.cumsum(lens[:-1].astype(np.int64)) * np.dtype(dtype).itemsize
        idx.write(ptr.tobytes(order="C"))
        idx.write(np.arange(n + 1, dtype=np.int64).tobytes(order="C"))
    print(json.dumps({"docs": n, "tokens": int(sum(lengths)),
                      "cpu_s": time.process_time() - c0, "wall_s": time.time() - t0}))


def flush(tok, batch, eod, dtype, data, lengths):
    for enc in tok.encode_batch_fast(batch, add_special_tokens=False):
        ids = enc.ids + [eod]
        data.write(np.array(ids, dtype=dtype).tobytes(order="C"))
        lengths.append(len(ids))


if __name__ == "__main__":
    main(*sys.argv[1:])
