#!/usr/bin/env python3
"""The reference for `decontaminate`: datatrove 0.10's n-gram decontamination
(`datatrove.pipeline.decont`: its indexer's `compute_hashes` and its filter) run on a
corpus and benchmark built from real text in ../shared/data/extraction-wceb, written to
tests/fixtures/decont/reference.json. tests/decont.rs builds the same corpus and
benchmark files (the rule is below, and mirrored there), runs them through `mdf run`
and compares: the same documents flagged, each word list equal to datatrove's.

Nothing of the text is stored: per document its word count and the xxh3-64 of its
words joined by spaces, and the ids flagged.

    python3 -m venv /root/.cache/mdf/py-decont
    /root/.cache/mdf/py-decont/bin/pip install datatrove==0.10.0 spacy==3.8.* regex "xxhash<4"
    /root/.cache/mdf/py-decont/bin/python scripts/decont-reference.py
"""
import importlib.metadata  # noqa: F401  (datatrove 0.10 uses it without importing it)
import json
import os
import sys
import tempfile

import numpy as np
import xxhash
from datatrove.data import Document
from datatrove.pipeline.decont import NGramsDecontConfig, NGramsDecontFilter, NGramsDecontIndexer
from datatrove.utils.text import simplify_text

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DATA = os.path.join(ROOT, "..", "shared", "data", "extraction-wceb")
N = 13
CORPUS = ["cleaneval", "cleanportaleval", "l3s-gn1", "wcxb"]
HELD_OUT = "readability"


def py_words(text):
    return text.split()


def texts(source):
    d = json.load(open(os.path.join(DATA, source, "ground-truth.json")))
    for key in sorted(d):
        v = d[key]
        t = v["text"] if isinstance(v, dict) else v
        yield f"{source}/{key}", t or ""


def corpus():
    for s in CORPUS:
        yield from texts(s)


def benchmarks():
    """(name, rows): every 9th corpus document gives a question (its words 10..30)
    and an answer (words 30..40); every 2nd held-out document one question (words
    0..25), no answer. Rows are JSON objects with `id`, `question`, `answer`."""
    quiz = []
    for i, (doc, t) in enumerate(corpus()):
        w = py_words(t)
        if i % 9 == 0 and len(w) >= 40:
            quiz.append({"id": f"q{i}", "question": " ".join(w[10:30]), "answer": " ".join(w[30:40])})
    held = []
    for i, (doc, t) in enumerate(texts(HELD_OUT)):
        w = py_words(t)
        if i % 2 == 0 and len(w) >= 25:
            held.append({"id": f"h{i}", "question": " ".join(w[0:25]), "answer": ""})
    return [("quiz", quiz), ("held", held)]


def main():
    config = NGramsDecontConfig(n_grams=N, find_query_ngrams=True, find_overlap_ngrams=True)
    # The indexer's constructor insists on lighteval (torch and more), which only its
    # `run` needs, to fetch tasks from the Hub; `compute_hashes` does not.
    NGramsDecontIndexer._requires_dependencies = []
    with tempfile.TemporaryDirectory() as tmp:
        indexer = NGramsDecontIndexer(output_folder=tmp, config=config, language="en")
        for name, rows in benchmarks():
            hashes = set()
            for r in rows:
                hashes.update(indexer.compute_hashes(r["answer"], r["question"]))
            np.array(sorted(hashes), dtype=config.hash_config.np_descr).tofile(
                os.path.join(tmp, f"{name}.index.hashes")
            )
        filt = NGramsDecontFilter(index_folder=tmp, config=config, language="en")
        words, flagged = {}, {}
        for doc_id, text in corpus():
            toks = filt.tokenizer.word_tokenize(simplify_text(text, config.norm_config))
            words[doc_id] = [len(toks), xxhash.xxh3_64_hexdigest(" ".join(toks).encode())]
            doc = Document(text=text, id=doc_id)
            r = filt.filter(doc)
            if r is not True:
                flagged[doc_id] = doc.metadata["contaminated_task"]
    out = {
        "datatrove": importlib.metadata.version("datatrove"),
        "spacy": importlib.metadata.version("spacy"),
        "n": N,
        "benchmarks": {name: len(rows) for name, rows in benchmarks()},
        "flagged": flagged,
        "words": words,
    }
    path = os.path.join(ROOT, "tests", "fixtures", "decont", "reference.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=0, sort_keys=True)
    print(f"{len(words)} documents, {len(flagged)} flagged -> {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
