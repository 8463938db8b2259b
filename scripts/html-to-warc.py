#!/usr/bin/env python3
"""Wraps HTML files into a per-record-gzip WARC of HTTP responses, for throughput
measurements on real pages (e.g. ../shared/data/extraction-dev/html/*.gz, or Debian's
documentation packages unpacked with dpkg-deb -x).

    scripts/html-to-warc.py OUT.warc.gz FILE_OR_DIR...

Files ending in .gz are decompressed. Each page becomes one response record whose
target URI is derived from its file name."""
import gzip, os, sys, uuid

def pages(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, _, files in os.walk(p):
                for f in sorted(files):
                    if f.endswith((".html", ".htm", ".html.gz", ".htm.gz")):
                        yield os.path.join(root, f)
        else:
            yield p

def main():
    out, inputs = sys.argv[1], sys.argv[2:]
    n = 0
    with open(out, "wb") as w:
        for p in pages(inputs):
            body = gzip.open(p).read() if p.endswith(".gz") else open(p, "rb").read()
            http = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(body) + body
            name = os.path.basename(p).removesuffix(".gz")
            head = ("WARC/1.0\r\nWARC-Type: response\r\nWARC-Date: 2024-01-01T00:00:00Z\r\n"
                    f"WARC-Record-ID: <urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, p)}>\r\n"
                    f"WARC-Target-URI: https://pages.example/{name}\r\n"
                    "Content-Type: application/http; msgtype=response\r\n"
                    f"Content-Length: {len(http)}\r\n\r\n").encode()
            w.write(gzip.compress(head + http + b"\r\n\r\n", compresslevel=6, mtime=0))
            n += 1
    print(f"{n} pages -> {out}", file=sys.stderr)

if __name__ == "__main__":
    main()
