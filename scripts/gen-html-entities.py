#!/usr/bin/env python3
"""Writes src/kernels/html_entities.tsv: the tables Python's html.unescape and ftfy's
unescape_html decode with, for the CLIP tokenizer's text cleaning
(src/kernels/clip_tokenizer.rs reproduces open_clip's cleaning exactly).

    python3 scripts/gen-html-entities.py > src/kernels/html_entities.tsv

Lines (code points as hex, space-separated; an empty field is the empty string):
    E <name> <value>    html.entities.html5 (names with and without ';')
    U <name> <value>    ftfy's upper-cased variants of lower-case names (ftfy 6.3.1)
    C <num> <value>     html._invalid_charrefs
    X <num>             html._invalid_codepoints (decoded as nothing)
"""
import html
import html.entities
import sys

import ftfy.chardata


def hx(s):
    return " ".join(f"{ord(c):x}" for c in s)


out = sys.stdout
for name, value in sorted(html.entities.html5.items()):
    out.write(f"E\t{name}\t{hx(value)}\n")
for ent, value in sorted(ftfy.chardata.HTML_ENTITIES.items()):
    name = ent[1:]
    if name not in html.entities.html5:
        out.write(f"U\t{name}\t{hx(value)}\n")
for num, value in sorted(html._invalid_charrefs.items()):
    out.write(f"C\t{num:x}\t{hx(value)}\n")
for num in sorted(html._invalid_codepoints):
    out.write(f"X\t{num:x}\n")
