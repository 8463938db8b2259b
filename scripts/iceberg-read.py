#!/usr/bin/env python3
"""Reads an Iceberg table the way a query engine's user would (tests/iceberg_output.rs).

    iceberg-read.py SQLITE_PATH CATALOG_NAME NAMESPACE.TABLE

Loads pyiceberg's SqlCatalog over the SQLite file, scans the table to Arrow, and prints
one JSON object: {"rows": [[id, text], ...] sorted, "snapshots": [{"id", "summary"}]}.
"""
import json
import sys

from pyiceberg.catalog.sql import SqlCatalog

path, name, ident = sys.argv[1:4]
cat = SqlCatalog(name, uri=f"sqlite:///{path}")
t = cat.load_table(ident)
tbl = t.scan().to_arrow()
cols = tbl.column_names
rows = sorted([r["id"], r.get("text")] for r in tbl.to_pylist())
snaps = [
    {"id": s.snapshot_id, "summary": dict(s.summary.additional_properties) if s.summary else {}}
    for s in t.metadata.snapshots
]
print(json.dumps({"rows": rows, "columns": cols, "snapshots": snaps}))
