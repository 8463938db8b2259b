#!/usr/bin/env python3
"""Writes tests/fixtures/megatron/ with megatron-core's own IndexedDatasetBuilder (run
once, where megatron-core and torch are installed; the files are checked in): the
documents src/io/write/tokens.rs's tests write, so its bytes are compared with
Megatron's, not with a reader written from the same understanding.

  megatron-fixtures.py OUT_DIR
"""
import sys

import numpy as np
from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

out = sys.argv[1]
cases = {
    # uint16, no end-of-document id, an empty (null) document in the middle
    "uint16-empty": (np.uint16, [[5, 6, 7], [], [9, 10]]),
    # int32, end-of-document id 2 appended (the writer's eod), an id above uint16
    "int32-eod": (np.int32, [[5, 6, 7, 2], [2], [70000, 2]]),
}
for name, (dtype, docs) in cases.items():
    b = IndexedDatasetBuilder(f"{out}/{name}.bin", dtype=dtype)
    for d in docs:
        # One sequence per non-empty document, as tools/preprocess_data.py adds them;
        # an empty document is a document of no sequences.
        b.add_document(np.array(d, dtype=dtype), [len(d)] if d else [])
    b.finalize(f"{out}/{name}.idx")
