#!/usr/bin/env python3
"""Glue's optimistic locking in front of moto's Glue, for tests (tests/iceberg_output.rs).

moto's Glue accepts an UpdateTable whatever its VersionId. AWS Glue refuses one whose
VersionId is not the table's current version with ConcurrentModificationException,
and that refusal is the compare-and-swap an Iceberg commit to Glue relies on. This
proxy forwards every request to moto and, for UpdateTable, first asks moto for the
table's current VersionId and refuses a stale one as Glue does (a missing one is let
through, as Glue lets it through).

    glue-cas-proxy.py UPSTREAM LOG [MODE]

MODE (what happens to the first UpdateTable):
  none   nothing (default)
  drop   it is applied, then the connection is closed without an answer (a response
         lost on the way back: the caller cannot tell whether it landed)
  race   another writer's UpdateTable of the same table lands just before it (the
         table's own input again: a new version, the same metadata), so it is stale

Every Glue request's target and JSON body is appended to LOG, one JSON object a line,
with "refused": true for the ones refused here. Prints its port on the first line of
stdout.
"""
import json
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

UPSTREAM, LOG = sys.argv[1].rstrip("/"), sys.argv[2]
MODE = sys.argv[3] if len(sys.argv) > 3 else "none"
LOCK = threading.Lock()
FIRST_UPDATE = [True]


def forward(path, headers, body):
    req = urllib.request.Request(UPSTREAM + path, data=body, method="POST")
    for k, v in headers.items():
        if k.lower() not in ("host", "content-length", "connection"):
            req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def glue(headers, target, payload):
    h = {k: v for k, v in headers.items()}
    h["X-Amz-Target"] = f"AWSGlue.{target}"
    status, _, body = forward("/", h, json.dumps(payload).encode())
    return status, json.loads(body or b"{}")


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def answer(self, status, headers, body):
        self.send_response(status)
        for k, v in headers.items():
            if k.lower() not in ("content-length", "connection", "transfer-encoding", "server", "date"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        headers = dict(self.headers)
        target = self.headers.get("X-Amz-Target", "").split(".")[-1]
        payload = json.loads(body or b"{}")
        entry = {"target": target, "body": payload}
        with LOCK:
            if target == "UpdateTable":
                first = FIRST_UPDATE[0]
                FIRST_UPDATE[0] = False
                key = {"DatabaseName": payload["DatabaseName"], "Name": payload["TableInput"]["Name"]}
                if first and MODE == "race":
                    _, cur = glue(headers, "GetTable", key)
                    t = cur["Table"]
                    other = {
                        "Name": t["Name"],
                        "TableType": t.get("TableType"),
                        "Parameters": t.get("Parameters", {}),
                        "StorageDescriptor": t.get("StorageDescriptor", {}),
                    }
                    glue(headers, "UpdateTable", {"DatabaseName": key["DatabaseName"], "TableInput": other})
                    entry["raced"] = True
                _, cur = glue(headers, "GetTable", key)
                current = cur.get("Table", {}).get("VersionId")
                asked = payload.get("VersionId")
                if asked is not None and asked != current:
                    entry["refused"] = True
                    with open(LOG, "a") as f:
                        f.write(json.dumps(entry) + "\n")
                    msg = json.dumps({
                        "__type": "ConcurrentModificationException",
                        "Message": f"version {asked} is not the current version {current}",
                    }).encode()
                    self.answer(400, {"Content-Type": "application/x-amz-json-1.1"}, msg)
                    return
                status, rh, rb = forward(self.path, headers, body)
                with open(LOG, "a") as f:
                    f.write(json.dumps(entry) + "\n")
                if first and MODE == "drop":
                    entry["dropped"] = True
                    with open(LOG, "a") as f:
                        f.write(json.dumps({"target": "UpdateTable", "dropped": True}) + "\n")
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.answer(status, rh, rb)
                return
        status, rh, rb = forward(self.path, headers, body)
        with open(LOG, "a") as f:
            f.write(json.dumps(entry) + "\n")
        self.answer(status, rh, rb)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
