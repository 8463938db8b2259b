#!/usr/bin/env python3
"""Reads an Iceberg table the way a query engine's user would (tests/iceberg_output.rs).

    iceberg-read.py SQLITE_PATH CATALOG_NAME NAMESPACE.TABLE
    iceberg-read.py --glue ENDPOINT NAMESPACE.TABLE

The first loads pyiceberg's SqlCatalog over the SQLite file; the second its
GlueCatalog against the Glue and S3 endpoint ENDPOINT (a moto server: region
us-east-1, credentials test/test), reading the data files through pyarrow's S3. Either
scans the table to Arrow and prints one JSON object: {"rows": [[id, text], ...] sorted,
"columns", "snapshots": [{"id", "summary"}]}, and for Glue "glue": the Glue table's
parameters, type and columns as Glue answers them.
"""
import json
import sys

extra = {}
if sys.argv[1] == "--glue":
    from pyiceberg.catalog.glue import GlueCatalog
    import boto3

    endpoint, ident = sys.argv[2:4]
    creds = {"access-key-id": "test", "secret-access-key": "test", "region": "us-east-1"}
    props = {f"glue.{k}": v for k, v in creds.items()}
    props.update({f"s3.{k}": v for k, v in creds.items()})
    props.update({"glue.endpoint": endpoint, "s3.endpoint": endpoint})
    cat = GlueCatalog("glue", **props)
    glue = boto3.client(
        "glue",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    db, name = ident.split(".")
    g = glue.get_table(DatabaseName=db, Name=name)["Table"]
    extra["glue"] = {
        "parameters": g.get("Parameters", {}),
        "table_type": g.get("TableType"),
        "location": g.get("StorageDescriptor", {}).get("Location"),
        "columns": [[c["Name"], c["Type"]] for c in g.get("StorageDescriptor", {}).get("Columns", [])],
    }
else:
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
print(json.dumps({"rows": rows, "columns": cols, "snapshots": snaps, **extra}))
