"""Generates the bundled CommonCrawl-style sample: sample.warc.gz (per-record gzip,
WARC/1.0, warcinfo + request + response records like a CC segment) with synthetic
pages that exercise the text pipeline: good English articles with navigation and
footer boilerplate, a German article, a page on a blocked domain, a URL with a banned
word, a near-empty page, a spammy repetitive page, a non-HTML response, a page
with an email address, and an exact copy of a report at another URL. Also writes the tiny block lists the example uses.
Deterministic: `python3 generate.py` rewrites identical files."""
import gzip, io, random, uuid

EN = ("the river city council approved a plan to restore old banks and build new paths "
      "for people who walk and cycle along the water while engineers study floods and "
      "residents share their views at public meetings held every month in the hall").split()
DE = ("der rat der stadt hat einen plan beschlossen die alten ufer zu erneuern und neue wege "
      "für menschen zu bauen die am wasser gehen und radfahren während ingenieure das "
      "hochwasser untersuchen").split()

def para(rng, words, n):
    out = []
    for _ in range(n):
        s = " ".join(rng.choice(words) for _ in range(rng.randint(10, 18)))
        out.append(s[0].upper() + s[1:] + ".")
    return " ".join(out)

def page(title, body_paras, lang="en"):
    nav = '<nav><a href="/">Home</a> | <a href="/news">News</a> | <a href="/about">About us</a></nav>'
    foot = '<footer>Copyright 2024 Example Media. All rights reserved. <a href="/privacy">Privacy</a></footer>'
    ps = "".join(f"<p>{p}</p>\n" for p in body_paras)
    return (f'<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8"><title>{title}</title>'
            f'<script>var tracking = "<p>not text</p>";</script></head><body>{nav}'
            f'<div class="cookie-banner">This site uses cookies.</div>'
            f'<article><h1>{title}</h1>\n{ps}</article>{foot}</body></html>')

def record(wtype, uri, block, date, content_type):
    rid = uuid.UUID(int=random.getrandbits(128))
    head = (f"WARC/1.0\r\nWARC-Type: {wtype}\r\nWARC-Date: {date}\r\n"
            f"WARC-Record-ID: <urn:uuid:{rid}>\r\n" + (f"WARC-Target-URI: {uri}\r\n" if uri else "") +
            f"Content-Type: {content_type}\r\nContent-Length: {len(block)}\r\n\r\n")
    return gzip.compress(head.encode() + block + b"\r\n\r\n", mtime=0)

def http(body, ctype="text/html; charset=utf-8"):
    b = body.encode("utf-8")
    return (f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {len(b)}\r\n\r\n").encode() + b

def main():
    random.seed(11)
    rng = random.Random(5)
    date = "2024-12-01T00:00:00Z"
    pages = []
    for i in range(12):
        pages.append((f"https://news.example.org/{2024}/river-{i}", page(f"River report {i}", [para(rng, EN, 4) for _ in range(5)])))
    pages.append(("https://zeitung.example.de/fluss", page("Flussbericht", [para(rng, DE, 4) for _ in range(5)], "de")))
    pages.append(("https://www.casino-spam.example/win", page("Win now", [para(rng, EN, 4) for _ in range(5)])))
    pages.append(("https://blog.example.org/free-xxx-videos", page("Videos", [para(rng, EN, 4) for _ in range(5)])))
    pages.append(("https://tiny.example.org/", page("Tiny", ["Hello."])))
    spam = " ".join(["buy cheap watches now"] * 60)
    pages.append(("https://shop.example.org/watches", page("Watches", [spam + "."] * 3)))
    pages.append(("https://news.example.org/contact", page("Contact the newsroom",
        [para(rng, EN, 4) + " Write to the newsroom at desk@news.example.org with your questions and we answer the same day." for _ in range(4)])))
    # A syndicated copy of the first report at another URL: removed by exact dedup.
    pages.append(("https://mirror.example.net/syndicated/river-0", pages[0][1]))
    out = io.BytesIO()
    info = b"software: mdf sample generator\r\nformat: WARC File Format 1.0\r\n"
    out.write(record("warcinfo", None, info, date, "application/warc-fields"))
    for uri, html in pages:
        req = f"GET / HTTP/1.1\r\nHost: {uri.split('/')[2]}\r\n\r\n".encode()
        out.write(record("request", uri, req, date, "application/http; msgtype=request"))
        out.write(record("response", uri, http(html), date, "application/http; msgtype=response"))
    out.write(record("response", "https://news.example.org/logo.png", http("PNGDATA", "image/png"), date, "application/http; msgtype=response"))
    open("sample.warc.gz", "wb").write(out.getvalue())
    open("blocked-domains.txt", "w").write("# tiny example list (UT1 lists work the same)\ncasino-spam.example\n")
    open("banned-words.txt", "w").write("xxx\n")

if __name__ == "__main__":
    main()
