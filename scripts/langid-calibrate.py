#!/usr/bin/env python3
"""Fits and measures the built-in language identifier's score (kernels/lang.rs,
`calibrated`): a logistic function of the identifier's evidence (the leader's
tempered log-odds over the runner-up, log of the n-grams scored, how well the leader's
model fits the text, whether the leader's class was counted from the UDHR), so that the score reads as the probability that the answer is right.

    pip install lingua-language-detector numpy
    cargo build --release
    scripts/langid-calibrate.py [--mdf target/release/mdf] [--fit]

Data, each split into a tuning half and a held-out half by crc32 of its id:
- lingua's labelled sentences (../shared/data/langid, 75 languages x 1,000);
- real pages' main text as mdf extracts it (`html_extract`): extraction-dev's 990
  pages in many languages and extraction-wceb's 2,914, labelled by lingua (all its
  languages, high accuracy; pages lingua cannot name are left out). A page in a
  language mdf does not know counts as a wrong answer: its score should be low.

--fit fits on the tuning halves (sentences and pages weighted equally) and prints the
weights for `CAL`; without it the current binary's scores are measured. Both print,
per set and half: accuracy, and at the default cut (language_filter min_score 0.65)
the share of wrong answers below it and of right answers at or above it.
"""
import argparse, gzip, json, math, os, subprocess, sys, tempfile, zlib

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data")
CUT = 0.65


def half(i):
    return "tuning" if zlib.crc32(i.encode()) % 2 == 0 else "held-out"


def pages_jsonl(mdf, path):
    """Real pages' extracted text, labelled by lingua."""
    from lingua import LanguageDetectorBuilder
    det = LanguageDetectorBuilder.from_all_languages().build()
    texts = []
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([mdf, "bench", "extract", "--dev", os.path.join(DATA, "extraction-dev")],
                       check=True, capture_output=True, env=dict(os.environ, MDF_BENCH_DUMP=d))
        for f in sorted(os.listdir(d)):
            texts.append(("dev/" + f[:-4], open(os.path.join(d, f)).read()))
        dump = os.path.join(d, "wceb.jsonl")
        subprocess.run([mdf, "bench", "extract", "--sources", os.path.join(DATA, "extraction-wceb"),
                        "--dump", dump], check=True, capture_output=True)
        for x in map(json.loads, open(dump)):
            texts.append((f"wceb/{x['source']}/{x['id']}", x["text"]))
    n = 0
    with open(path, "w") as out:
        for i, t in texts:
            if len(t.strip()) < 20:
                continue
            lang = det.detect_language_of(t)
            if lang is None:
                continue
            out.write(json.dumps({"id": i, "lang": lang.iso_code_639_1.name.lower(), "text": t}) + "\n")
            n += 1
    print(f"{n} pages labelled by lingua", file=sys.stderr)


def features(r):
    m = min(r["margin"], 10.0)
    return [m, math.log(max(r["ngrams"], 1)), r["fit"], 1.0 if r["udhr"] else 0.0, 1.0]


def score(w, r):
    if r["margin"] >= 1e9:
        return 1.0
    z = sum(a * b for a, b in zip(w, features(r)))
    return 1 / (1 + math.exp(-z))


def fit(rows):
    import numpy as np
    X = np.array([features(r) for r in rows])
    y = np.array([1.0 if r["got"] == r["lang"] else 0.0 for r in rows])
    sw = np.array([r["weight"] for r in rows])
    w = np.zeros(X.shape[1])
    for _ in range(50):  # Newton's method on the weighted log-loss (+ a small ridge)
        p = 1 / (1 + np.exp(-X @ w))
        g = X.T @ (sw * (p - y)) + 1e-3 * w
        H = (X * (sw * p * (1 - p))[:, None]).T @ X + 1e-3 * np.eye(len(w))
        step = np.linalg.solve(H, g)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return list(w)


def report(rows, w):
    print("| set | half | texts | accuracy | wrong answers below 0.65 | right answers at or above 0.65 |")
    print("|---|---|---|---|---|---|")
    for s in ("sentences", "sentences, languages mdf lacks", "pages"):
        for h in ("tuning", "held-out"):
            g = [r for r in rows if r["set"] == s and r["half"] == h]
            right = [r for r in g if r["got"] == r["lang"]]
            wrong = [r for r in g if r["got"] != r["lang"]]
            lo = sum(score(w, r) < CUT for r in wrong) / max(len(wrong), 1)
            hi = sum(score(w, r) >= CUT for r in right) / max(len(right), 1)
            print(f"| {s} | {h} | {len(g)} | {len(right) / max(len(g), 1):.3f} | "
                  f"{lo:.1%} of {len(wrong)} | {hi:.1%} of {len(right)} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mdf", default="target/release/mdf")
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--pages", default="/tmp/langid-pages.jsonl")
    ap.add_argument("--cal", default="", help="weights to measure instead of the binary's (a,b,c,d)")
    a = ap.parse_args()
    if not os.path.exists(a.pages):
        pages_jsonl(a.mdf, a.pages)
    dump = "/tmp/langid-evidence.jsonl"
    subprocess.run([a.mdf, "bench", "langid", "--data", os.path.join(DATA, "langid", "lingua-testdata-sentences"),
                    "--dump", dump, "--texts", a.pages], check=True, capture_output=True)
    rows = [r for r in map(json.loads, open(dump)) if r["got"] is not None]
    out = subprocess.run([a.mdf, "bench", "langid", "--data", os.path.join(
        DATA, "langid", "lingua-testdata-sentences"), "--per-language", "1"],
        check=True, capture_output=True, text=True).stdout
    lacking = set(out.split("(not scored): ")[1].split(", ")) if "(not scored): " in out else set()
    for r in rows:
        r["half"] = half(r["set"] + "/" + r["id"])
    for r in rows:
        if r["set"] == "sentences" and r["lang"] in {k.strip() for k in lacking}:
            r["set"] = "sentences, languages mdf lacks"
    group = lambda r: "pages" if r["set"] == "pages" else "sentences"
    n = {g: sum(1 for r in rows if group(r) == g and r["half"] == "tuning") for g in ("sentences", "pages")}
    for r in rows:
        r["weight"] = 1.0 / n[group(r)]
    if a.fit:
        # Texts whose writing system names the language never reach `calibrated`.
        w = fit([r for r in rows if r["half"] == "tuning" and r["margin"] < 1e9])
        print("CAL = [" + ", ".join(f"{x:.4f}" for x in w) + "]\n")
    elif a.cal:
        w = [float(x) for x in a.cal.split(",")]
    else:
        w = None
    if w is None:
        # The binary's own scores: read them back through the same formula's inputs
        # is not possible, so ask it: `identify` = calibrated(evidence).
        src = open(os.path.join(HERE, "..", "src", "kernels", "lang.rs")).read()
        line = next(l for l in src.splitlines() if l.startswith("const CAL"))
        w = [float(x) for x in line.split("= [")[1].split("]")[0].split(",")]
        print(f"CAL in src/kernels/lang.rs: {w}\n")
    report(rows, w)


if __name__ == "__main__":
    main()
