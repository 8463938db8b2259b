#!/usr/bin/env python3
"""An Iceberg REST catalog for tests (tests/iceberg_output.rs), over pyiceberg's
SqlCatalog: the REST protocol's endpoints a writer uses, each answered by the same
catalog code pyiceberg users run (requirements checked, updates applied, metadata
written by pyiceberg).

    iceberg-rest-server.py SQLITE_PATH WAREHOUSE

GET  /v1/config
GET  /v1/namespaces/{ns}                 HEAD too; 404 when missing
POST /v1/namespaces                      {"namespace": [...], "properties": {}}
GET  /v1/namespaces/{ns}/tables/{t}      HEAD too (exists); the table's metadata
POST /v1/namespaces/{ns}/tables          create ({"name", "schema", "location", ...})
POST /v1/namespaces/{ns}/tables/{t}      commit ({"requirements", "updates"})

Prints its port on the first line of stdout.
"""
import json
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from pyiceberg.catalog.rest import CreateTableRequest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.table import CommitTableRequest

DB, WAREHOUSE = sys.argv[1], sys.argv[2]
CAT = SqlCatalog("rest", uri=f"sqlite:///{DB}", warehouse=WAREHOUSE)


def ns_of(seg):
    # The REST spec joins namespace levels with the unit separator (0x1F).
    return tuple(urllib.parse.unquote(seg).split("\x1f"))


def table_body(t):
    return {
        "metadata-location": t.metadata_location,
        "metadata": json.loads(t.metadata.model_dump_json()),
        "config": {},
    }


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, status, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def error(self, status, kind, msg):
        self.reply(status, {"error": {"message": msg, "type": kind, "code": status}})

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"{}")

    def route(self):
        p = urllib.parse.urlparse(self.path).path.strip("/").split("/")
        if p[:1] == ["v1"]:
            p = p[1:]
        # A prefix from the config (none here) would come next.
        return p

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        p = self.route()
        try:
            if p == ["config"]:
                return self.reply(200, {"defaults": {}, "overrides": {}})
            if len(p) == 2 and p[0] == "namespaces":
                ns = ns_of(p[1])
                props = CAT.load_namespace_properties(ns)
                return self.reply(200, {"namespace": list(ns), "properties": props})
            if len(p) == 4 and p[0] == "namespaces" and p[2] == "tables":
                t = CAT.load_table(ns_of(p[1]) + (urllib.parse.unquote(p[3]),))
                return self.reply(200, table_body(t))
        except NoSuchNamespaceError as e:
            return self.error(404, "NoSuchNamespaceException", str(e))
        except NoSuchTableError as e:
            return self.error(404, "NoSuchTableException", str(e))
        self.error(404, "NotFound", self.path)

    def do_POST(self):
        p = self.route()
        b = self.body()
        try:
            if p == ["namespaces"]:
                CAT.create_namespace(tuple(b["namespace"]), b.get("properties") or {})
                return self.reply(200, {"namespace": b["namespace"], "properties": b.get("properties") or {}})
            if len(p) == 3 and p[0] == "namespaces" and p[2] == "tables":
                # Optional in the REST spec, required by pyiceberg's model.
                b.setdefault("partition-spec", {"spec-id": 0, "fields": []})
                b.setdefault("write-order", {"order-id": 0, "fields": []})
                req = CreateTableRequest.model_validate(b)
                ident = ns_of(p[1]) + (req.name,)
                kw = {"properties": req.properties or {}}
                if req.location:
                    kw["location"] = req.location
                if req.partition_spec is not None:
                    kw["partition_spec"] = req.partition_spec
                if req.write_order is not None:
                    kw["sort_order"] = req.write_order
                t = CAT.create_table(ident, req.table_schema, **kw)
                return self.reply(200, table_body(t))
            if len(p) == 4 and p[0] == "namespaces" and p[2] == "tables":
                ident = ns_of(p[1]) + (urllib.parse.unquote(p[3]),)
                b["identifier"] = {"namespace": list(ident[:-1]), "name": ident[-1]}
                req = CommitTableRequest.model_validate(b)
                t = CAT.load_table(ident)
                resp = CAT.commit_table(t, tuple(req.requirements), tuple(req.updates))
                return self.reply(
                    200,
                    {
                        "metadata-location": resp.metadata_location,
                        "metadata": json.loads(resp.metadata.model_dump_json()),
                    },
                )
        except NamespaceAlreadyExistsError as e:
            return self.error(409, "AlreadyExistsException", str(e))
        except TableAlreadyExistsError as e:
            return self.error(409, "AlreadyExistsException", str(e))
        except NoSuchNamespaceError as e:
            return self.error(404, "NoSuchNamespaceException", str(e))
        except NoSuchTableError as e:
            return self.error(404, "NoSuchTableException", str(e))
        except CommitFailedException as e:
            return self.error(409, "CommitFailedException", str(e))
        except Exception as e:  # a bug here is the test's, said as a 500
            return self.error(500, type(e).__name__, str(e))
        self.error(404, "NotFound", self.path)


srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.daemon_threads = True
print(srv.server_address[1], flush=True)
srv.serve_forever()
