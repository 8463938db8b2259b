#!/usr/bin/env python3
"""Main-text extraction side by side on several public benchmarks, scored per source
and per half (tuning / held-out): mdf's html_extract, trafilatura (defaults and
favor_precision), resiliparse and readability (readability-lxml, the Python port of
Arc90's readability; on the `readability` source the truth itself is Readability.js's
output).

    pip install trafilatura resiliparse readability-lxml lxml_html_clean
    cargo build --release
    taskset -c 0 scripts/extract-sources.py [--sources ../shared/data/extraction-wceb]
        [--mdf target/release/mdf] [--cache /tmp/extractors.json] [--only mdf]
        [--worst N] [--metadata]

Pages: every `<source>/html/<id>.html.gz` with its `ground-truth.json` entry, less the
pages the set flags as unable to yield their truth. Halves: crc32("source/id") even is
tuning, odd is held-out; rules are tuned on the tuning halves only.

Metric: the article-extraction literature's shingle F1 (Scrapinghub's
article-extraction-benchmark): `\\w+` tokens, bags of 4-token shingles, per page
tp/fp/fn normalised to sum to one, precision averaged over pages that predicted
something, recall over pages with a truth, F1 from the two means; and WCXB's snippet F1
(a `with` snippet found is a true positive, a `without` snippet found a false one).
The macro average is the mean of the sources' F1. mdf's texts come from `mdf bench
extract --sources --dump`, scored here by the same code as the others (the Rust
bench's own figures must equal these). Time is extraction only, CPU time of this one
process (pages decoded before the clock starts for the Python extractors; mdf's from
its own bench). The reference extractors' texts are cached in --cache, keyed by
their versions.
"""
import argparse, collections, gzip, json, os, re, subprocess, sys, time, zlib

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN = re.compile(r"\w+")


def half(source, pid):
    return "tuning" if zlib.crc32(f"{source}/{pid}".encode()) % 2 == 0 else "held-out"


def load(root):
    pages = []
    for src in sorted(os.listdir(root)):
        gt_path = os.path.join(root, src, "ground-truth.json")
        if not os.path.isfile(gt_path):
            continue
        for pid, e in sorted(json.load(open(gt_path)).items()):
            if e.get("flag"):
                continue
            path = os.path.join(root, src, "html", pid + ".html.gz")
            if os.path.exists(path):
                pages.append(dict(source=src, id=pid, half=half(src, pid), path=path,
                                  url=e.get("url"), truth=e.get("text") or "",
                                  with_=e.get("with") or [], without=e.get("without") or []))
    return pages


def shingles(text, n=4):
    t = TOKEN.findall(text or "")
    return collections.Counter(tuple(t[i:i + n]) for i in range(max(1, len(t) - n + 1)) if t[i:i + n])


def match(truth, pred):
    a, b = shingles(truth), shingles(pred)
    tp = sum(min(c, a.get(k, 0)) for k, c in b.items())
    fp = sum(max(0, c - a.get(k, 0)) for k, c in b.items())
    fn = sum(max(0, c - b.get(k, 0)) for k, c in a.items())
    s = tp + fp + fn
    return (tp / s, fp / s, fn / s) if s else (0.0, 0.0, 0.0)


def prf(ms):
    def sc(tp, x, fp, fn):
        if fp == fn == 0:
            return 1.0
        if tp == x == 0:
            return 0.0
        return tp / (tp + x)
    ps = [sc(tp, fp, fp, fn) for tp, fp, fn in ms if tp + fp > 0]
    rs = [sc(tp, fn, fp, fn) for tp, fp, fn in ms if tp + fn > 0]
    p = sum(ps) / len(ps) if ps else 0.0
    r = sum(rs) / len(rs) if rs else 0.0
    return p, r, 2 * p * r / (p + r) if p + r else 0.0


def norm(s):
    return " ".join(s.split())


def snippet(pages, texts):
    tp = fp = fn = 0
    for p, t in zip(pages, texts):
        t = norm(t or "")
        for s in p["with_"]:
            if norm(s) in t:
                tp += 1
            else:
                fn += 1
        fp += sum(1 for s in p["without"] if norm(s) in t)
    if tp + fn == 0:
        return None
    pr, rc = tp / max(tp + fp, 1), tp / max(tp + fn, 1)
    return 2 * pr * rc / (pr + rc) if pr + rc else 0.0


def python_extractors():
    import trafilatura
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding
    from readability import Document

    def decode(raw):
        return bytes_to_str(raw, detect_encoding(raw))

    def readab(html):
        summary = Document(html).summary(html_partial=True)
        return extract_plain_text(HTMLTree.parse(summary), main_content=False,
                                  alt_texts=False, links=False, list_bullets=False)

    from importlib.metadata import version
    rv = version("resiliparse")
    return {
        f"trafilatura {trafilatura.__version__}":
            lambda raw, html: trafilatura.extract(html, include_comments=False) or "",
        f"trafilatura {trafilatura.__version__} favor_precision":
            lambda raw, html: trafilatura.extract(html, include_comments=False, favor_precision=True) or "",
        f"resiliparse {rv}":
            lambda raw, html: extract_plain_text(HTMLTree.parse(html), main_content=True),
        "readability-lxml " + version("readability-lxml"): lambda raw, html: readab(html),
    }, decode


def run_python(pages, cache_path):
    cache = json.load(open(cache_path)) if cache_path and os.path.exists(cache_path) else {}
    fns, decode = python_extractors()
    decoded = None
    for name, fn in fns.items():
        if name in cache and len(cache[name]["texts"]) == len(pages):
            continue
        if decoded is None:
            raws = [gzip.open(p["path"]).read() for p in pages]
            decoded = [decode(r) for r in raws]
        texts, secs = [], 0.0
        for p, raw, html in zip(pages, raws, decoded):
            t = time.process_time()
            try:
                texts.append(fn(raw, html) or "")
            except Exception as e:  # an extractor failing on a page scores it empty
                print(f"{name}: {p['source']}/{p['id']}: {e}", file=sys.stderr)
                texts.append("")
            secs += time.process_time() - t
        mb = sum(len(h.encode("utf-8", "replace")) for h in decoded) / 1e6
        cache[name] = dict(texts=texts, secs=secs, mb=mb)
        print(f"{name}: {secs:.1f} s", file=sys.stderr)
        if cache_path:
            json.dump(cache, open(cache_path, "w"))
    return cache


def run_mdf(binary, root, pages):
    dump = "/tmp/mdf-extract-sources.jsonl"
    out = subprocess.run([binary, "bench", "extract", "--sources", root, "--dump", dump],
                         check=True, capture_output=True, text=True).stdout
    got = {(d["source"], d["id"]): d for d in map(json.loads, open(dump))}
    m = re.search(r"([0-9.]+) pages/s, ([0-9.]+) MB/s", out)
    texts = [got.get((p["source"], p["id"]), {}).get("text", "") for p in pages]
    return dict(texts=texts, pps=float(m.group(1)), mbs=float(m.group(2)), report=out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sources", default=os.path.join(HERE, "..", "..", "shared", "data", "extraction-wceb"))
    ap.add_argument("--mdf", default="target/release/mdf")
    ap.add_argument("--cache", default="")
    ap.add_argument("--only", default="", help="mdf: score mdf alone")
    ap.add_argument("--worst", type=int, default=0,
                    help="list mdf's N worst tuning pages (F1 and the reference's)")
    a = ap.parse_args()
    pages = load(a.sources)
    results = {}
    speed = {}
    if a.only != "mdf":
        for name, r in run_python(pages, a.cache).items():
            results[name] = r["texts"]
            speed[name] = (len(pages) / r["secs"], r["mb"] / r["secs"])
    m = run_mdf(a.mdf, a.sources, pages)
    results["mdf html_extract"] = m["texts"]
    speed["mdf html_extract"] = (m["pps"], m["mbs"])
    names = list(results)
    groups = collections.OrderedDict()
    for i, p in enumerate(pages):
        groups.setdefault((p["source"], p["half"]), []).append(i)
    print(f"{len(pages)} pages; shingle F1 (snippet F1 where the source has snippets)\n")
    print("| source | half | pages | " + " | ".join(names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    macro = {h: collections.defaultdict(list) for h in ("tuning", "held-out")}
    for (src, h), idx in sorted(groups.items(), key=lambda kv: (kv[0][1] != "tuning", kv[0][0])):
        cells = []
        for n in names:
            f1 = prf([match(pages[i]["truth"], results[n][i]) for i in idx])[2]
            macro[h][n].append(f1)
            sn = snippet([pages[i] for i in idx], [results[n][i] for i in idx])
            cells.append(f"{f1:.3f}" + (f" ({sn:.3f})" if sn is not None else ""))
        print(f"| {src} | {h} | {len(idx)} | " + " | ".join(cells) + " |")
    for h in ("tuning", "held-out"):
        print(f"| **macro** | {h} | | " + " | ".join(
            f"**{sum(macro[h][n]) / len(macro[h][n]):.3f}**" for n in names) + " |")
    print("| pages/s, one core | | | " + " | ".join(f"{speed[n][0]:,.0f}" for n in names) + " |")
    print("| MB/s of HTML | | | " + " | ".join(f"{speed[n][1]:.1f}" for n in names) + " |")
    if a.worst:
        ref = next((n for n in names if n.startswith("trafilatura") and "precision" not in n), None)
        rows = []
        for i, p in enumerate(pages):
            if p["half"] != "tuning":
                continue
            f = prf([match(p["truth"], results["mdf html_extract"][i])])
            g = prf([match(p["truth"], results[ref][i])]) if ref else (0, 0, 0)
            rows.append((f[2] - g[2], p["source"], p["id"], f, g))
        rows.sort()
        for d, s, pid, f, g in rows[:a.worst]:
            print(f"{s}/{pid}: mdf P {f[0]:.2f} R {f[1]:.2f} F {f[2]:.2f} | ref P {g[0]:.2f} R {g[1]:.2f} F {g[2]:.2f}")


if __name__ == "__main__":
    main()
