#!/usr/bin/env python3
"""Side-by-side main-text extraction on the same real pages: trafilatura, resiliparse
and mdf's html_extract, scored with one metric and timed on one core.

    pip install trafilatura resiliparse lxml_html_clean
    cargo build --release
    scripts/bench-extractors.py [--dev ../shared/data/extraction-dev] [--limit N]
                                [--mdf target/release/mdf] [--skip trafilatura,...]

The metric is the development set's (see ../shared/data/README.md): a "with" snippet
found in the extracted text is a true positive, missing a false negative; a "without"
snippet found is a false positive; whitespace is collapsed on both sides. Time is
extraction only: pages are decompressed and decoded to text before the clock starts,
for every extractor alike. mdf's row comes from `mdf bench extract`, which applies the
same metric and timing rule in Rust.
"""
import argparse, gzip, json, os, re, subprocess, sys, time


def norm(s):
    return " ".join(s.split())


def load(dev, limit):
    ev = json.load(open(os.path.join(dev, "evaldata.json")))
    pages = []
    for url, e in list(ev.items())[:limit]:
        path = os.path.join(dev, "html", e["file"] + ".gz")
        if not os.path.exists(path):
            continue
        raw = gzip.open(path).read()
        pages.append((url, raw, e.get("with", []), e.get("without", [])))
    return pages


def score(pages, texts):
    tp = fp = fn = 0
    for (_, _, with_, without), text in zip(pages, texts):
        t = norm(text or "")
        for s in with_:
            if norm(s) in t:
                tp += 1
            else:
                fn += 1
        fp += sum(1 for s in without if norm(s) in t)
    p = tp / max(tp + fp, 1)
    r = tp / max(tp + fn, 1)
    return p, r, 2 * p * r / max(p + r, 1e-9)


def run_python(name, pages):
    if name == "trafilatura":
        import trafilatura

        def extract(raw, html):
            return trafilatura.extract(html, include_comments=False) or ""
    elif name == "resiliparse":
        from resiliparse.extract.html2text import extract_plain_text
        from resiliparse.parse.html import HTMLTree

        def extract(raw, html):
            return extract_plain_text(HTMLTree.parse(html), main_content=True)
    else:
        raise SystemExit(f"unknown extractor {name}")
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding

    decoded = [bytes_to_str(raw, detect_encoding(raw)) for _, raw, _, _ in pages]
    texts, secs = [], 0.0
    for (url, raw, _, _), html in zip(pages, decoded):
        t = time.process_time()
        try:
            texts.append(extract(raw, html))
        except Exception as e:  # an extractor failing on a page scores it empty
            print(f"{name}: {url}: {e}", file=sys.stderr)
            texts.append("")
        secs += time.process_time() - t
    mb = sum(len(h.encode("utf-8", "replace")) for h in decoded) / 1e6
    return score(pages, texts) + (len(pages) / secs, mb / secs)


def run_mdf(binary, dev, limit):
    out = subprocess.run(
        [binary, "bench", "extract", "--dev", dev, "--limit", str(limit)],
        check=True, capture_output=True, text=True,
    ).stdout
    val = lambda key: float(re.search(r"\| \**" + re.escape(key) + r"\** \| \**([0-9.]+)", out).group(1))
    return (val("precision"), val("recall"), val("F1"),
            val("pages/s (extraction only)"), val("MB/s of HTML"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dev", default=os.path.join(os.path.dirname(__file__), "../../shared/data/extraction-dev"))
    ap.add_argument("--limit", type=int, default=100000)
    ap.add_argument("--mdf", default="target/release/mdf")
    ap.add_argument("--skip", default="")
    a = ap.parse_args()
    skip = set(filter(None, a.skip.split(",")))
    pages = load(a.dev, a.limit)
    print(f"{len(pages)} pages, one core, extraction time only\n")
    print("| extractor | F1 | precision | recall | pages/s | MB/s of HTML |")
    print("|---|---|---|---|---|---|")
    def row(name, res):
        p, r, f1, pps, mbs = res
        print(f"| {name} | {f1:.3f} | {p:.3f} | {r:.3f} | {pps:,.0f} | {mbs:.1f} |", flush=True)

    if "mdf" not in skip:
        row("mdf html_extract", run_mdf(a.mdf, a.dev, a.limit))
    for name in ("resiliparse", "trafilatura"):
        if name not in skip:
            row(name, run_python(name, pages))

if __name__ == "__main__":
    main()
