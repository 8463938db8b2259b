#!/usr/bin/env python3
"""A local Hugging Face Hub for tests (tests/hf_input.rs): the endpoints `hf://` reads.

    hf-hub-server.py ROOT [--token T] [--page-size N]

ROOT holds `refs.json` ({"OWNER/NAME": {"main": SHA, ...}}), optionally `gated.json`
(["OWNER/NAME", ...]: resolving their files needs `Authorization: Bearer T`), and the
files of each commit under `repos/OWNER/NAME/SHA/`. Served, as the Hub serves them:

- GET /api/datasets/O/N/revision/REV  → {"id", "sha"}; 404 {"error"} for a missing
  repository or revision.
- GET /api/datasets/O/N/tree/REV/PATH[?recursive=true][&cursor=K] → a page of
  entries ({"type", "oid", "size", "path", "lfs"?}), the next page in a
  `Link: <...>; rel="next"` header; 404 for a missing folder.
- GET|HEAD /datasets/O/N/resolve/REV/PATH → the file (ranges honoured), or for LFS
  files (.parquet) a 302 to /cdn/... on host `localhost` (another host than the API's
  127.0.0.1, so a client must not send its token there).
- POST /admin/move?repo=O/N&ref=R&sha=S moves a branch; POST /admin/storm?n=K makes the
  next K resolve requests answer 429 with `Retry-After: 1`; GET /admin/log gives every
  request seen ({host, method, path, auth, status}).

Prints its port on the first line of stdout.
"""
import hashlib
import json
import os
import re
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = sys.argv[1]
TOKEN = None
PAGE = 2
args = sys.argv[2:]
while args:
    if args[0] == "--token":
        TOKEN = args[1]
        args = args[2:]
    elif args[0] == "--page-size":
        PAGE = int(args[1])
        args = args[2:]
    else:
        sys.exit(f"unknown argument {args[0]}")

LOCK = threading.Lock()
LOG = []
STORM = [0]


def refs():
    with open(os.path.join(ROOT, "refs.json")) as f:
        return json.load(f)


def gated():
    p = os.path.join(ROOT, "gated.json")
    if not os.path.exists(p):
        return []
    with open(p) as f:
        return json.load(f)


def sha_of(repo, rev):
    r = refs().get(repo)
    if r is None:
        return None, "Repository not found"
    if rev in r:
        return r[rev], None
    if re.fullmatch(r"[0-9a-f]{40}", rev) and os.path.isdir(os.path.join(ROOT, "repos", repo, rev)):
        return rev, None
    return None, f"Invalid rev id: {rev}"


def is_lfs(path):
    return path.endswith(".parquet")


def entry(base, rel):
    full = os.path.join(base, rel)
    if os.path.isdir(full):
        return {"type": "directory", "oid": hashlib.sha1(rel.encode()).hexdigest(), "size": 0, "path": rel}
    with open(full, "rb") as f:
        data = f.read()
    e = {"type": "file", "oid": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest(), "size": len(data), "path": rel}
    if is_lfs(rel):
        e["size"] = 134
        e["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
    return e


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, status, body=b"", headers=None, ctype="application/json"):
        with LOCK:
            LOG.append(
                {
                    "host": self.headers.get("Host", ""),
                    "method": self.command,
                    "path": self.path,
                    "auth": self.headers.get("Authorization") is not None,
                    "status": status,
                }
            )
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, status, msg):
        self.send(status, json.dumps({"error": msg}).encode())

    def serve_file(self, full):
        with open(full, "rb") as f:
            data = f.read()
        etag = '"%s"' % hashlib.sha256(data).hexdigest()
        rng = self.headers.get("Range")
        if rng:
            m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
            a, b = m.group(1), m.group(2)
            if a == "":
                start, end = max(0, len(data) - int(b)), len(data) - 1
            else:
                start = int(a)
                end = min(int(b), len(data) - 1) if b else len(data) - 1
            if start >= len(data):
                return self.send(416, b"", {"Content-Range": f"bytes */{len(data)}"})
            return self.send(
                206,
                data[start : end + 1],
                {"Content-Range": f"bytes {start}-{end}/{len(data)}", "ETag": etag, "Accept-Ranges": "bytes"},
                "application/octet-stream",
            )
        self.send(200, data, {"ETag": etag, "Accept-Ranges": "bytes"}, "application/octet-stream")

    def do_POST(self):
        u = urllib.parse.urlparse(self.path)
        q = dict(urllib.parse.parse_qsl(u.query))
        if u.path == "/admin/move":
            r = refs()
            r[q["repo"]][q["ref"]] = q["sha"]
            with open(os.path.join(ROOT, "refs.json"), "w") as f:
                json.dump(r, f)
            return self.send(200, b"{}")
        if u.path == "/admin/storm":
            STORM[0] = int(q["n"])
            return self.send(200, b"{}")
        self.error(404, "no such endpoint")

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        if u.path == "/admin/log":
            with LOCK:
                body = json.dumps(LOG).encode()
            return self.send(200, body)
        segs = [urllib.parse.unquote(s) for s in u.path.split("/")[1:]]
        q = dict(urllib.parse.parse_qsl(u.query))
        if segs[:2] == ["api", "datasets"] and len(segs) >= 6:
            repo, what, rev, rest = f"{segs[2]}/{segs[3]}", segs[4], segs[5], "/".join(segs[6:])
            sha, err = sha_of(repo, rev)
            if sha is None:
                return self.error(404, err)
            if what == "revision":
                return self.send(200, json.dumps({"id": repo, "sha": sha}).encode())
            if what == "tree":
                base = os.path.join(ROOT, "repos", repo, sha)
                d = os.path.join(base, rest)
                if not os.path.isdir(d):
                    return self.error(404, f"{rest} not found")
                rels = []
                if q.get("recursive") == "true":
                    for dp, dns, fns in os.walk(d):
                        for n in dns + fns:
                            rels.append(os.path.relpath(os.path.join(dp, n), base))
                else:
                    rels = [os.path.relpath(os.path.join(d, n), base) for n in os.listdir(d)]
                rels.sort()
                cursor = int(q.get("cursor", "0"))
                page = [entry(base, r) for r in rels[cursor : cursor + PAGE]]
                headers = {}
                if cursor + PAGE < len(rels):
                    nq = dict(q)
                    nq["cursor"] = str(cursor + PAGE)
                    nxt = f"http://{self.headers.get('Host')}{u.path}?{urllib.parse.urlencode(nq)}"
                    headers["Link"] = f'<{nxt}>; rel="next"'
                return self.send(200, json.dumps(page).encode(), headers)
            return self.error(404, "no such endpoint")
        if segs[:1] == ["datasets"] and len(segs) >= 6 and segs[3] == "resolve":
            repo, rev, rest = f"{segs[1]}/{segs[2]}", segs[4], "/".join(segs[5:])
            with LOCK:
                storm = STORM[0] > 0
                if storm:
                    STORM[0] -= 1
            if storm:
                return self.send(429, b"{}", {"Retry-After": "1"})
            if repo in gated() and self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self.error(401, f"Access to dataset {repo} is restricted. You must have access to it and be authenticated to access it.")
            sha, err = sha_of(repo, rev)
            if sha is None:
                return self.error(404, err)
            full = os.path.join(ROOT, "repos", repo, sha, rest)
            if not os.path.isfile(full):
                return self.error(404, "Entry not found")
            if is_lfs(rest):
                port = self.server.server_address[1]
                loc = f"http://localhost:{port}/cdn/{repo}/{sha}/{urllib.parse.quote(rest)}?sig=x"
                return self.send(302, b"", {"Location": loc, "X-Repo-Commit": sha})
            return self.serve_file(full)
        if segs[:1] == ["cdn"]:
            repo, sha, rest = f"{segs[1]}/{segs[2]}", segs[3], "/".join(segs[4:])
            full = os.path.join(ROOT, "repos", repo, sha, rest)
            if not os.path.isfile(full):
                return self.error(404, "no such object")
            return self.serve_file(full)
        self.error(404, "no such endpoint")


srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.daemon_threads = True
print(srv.server_address[1], flush=True)
srv.serve_forever()
