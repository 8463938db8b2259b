#!/usr/bin/env python3
"""A file server with HTTP range requests, for tests (tests/http_input.rs): serves the
folder given as the first argument on 127.0.0.1, a free port (printed on the first
line), with HEAD, GET, `Range: bytes=a-b` / `a-` / `-n` (206 + Content-Range),
Content-Length, ETag (size and mtime) and Last-Modified. Every request is logged to
stderr as "METHOD PATH RANGE". A second argument names a file whose GET bodies stop
halfway (the connection closed after half the announced bytes): a server or network
that breaks mid-body."""
import email.utils
import http.server
import os
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s %s\n" % (self.command, self.path, self.headers.get("Range", "-")))

    def _file(self):
        rel = self.path.split("?", 1)[0].lstrip("/")
        path = os.path.realpath(os.path.join(ROOT, rel))
        if not path.startswith(ROOT + os.sep) or not os.path.isfile(path):
            return None
        return path

    def _headers(self, path, size, start, end, partial):
        st = os.stat(path)
        self.send_response(206 if partial else 200)
        self.send_header("Content-Length", str(end - start))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", '"%x-%x"' % (st.st_size, int(st.st_mtime)))
        self.send_header("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True))
        if partial:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end - 1, size))
        self.end_headers()

    def _range(self, size):
        r = self.headers.get("Range")
        if not r or not r.startswith("bytes="):
            return 0, size, False
        a, _, b = r[6:].partition("-")
        if a == "":
            n = int(b)
            return max(0, size - n), size, True
        start = int(a)
        end = min(size, int(b) + 1) if b else size
        return start, end, True

    def do_HEAD(self):
        path = self._file()
        if path is None:
            self.send_error(404)
            return
        size = os.path.getsize(path)
        self._headers(path, size, 0, size, False)

    def do_GET(self):
        path = self._file()
        if path is None:
            self.send_error(404)
            return
        size = os.path.getsize(path)
        start, end, partial = self._range(size)
        if partial and start >= size:
            self.send_response(416)
            self.send_header("Content-Range", "bytes */%d" % size)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self._headers(path, size, start, end, partial)
        with open(path, "rb") as f:
            f.seek(start)
            body = f.read(end - start)
        if BROKEN and os.path.basename(path) == BROKEN:
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


ROOT = os.path.realpath(sys.argv[1])
BROKEN = sys.argv[2] if len(sys.argv) > 2 else None
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
