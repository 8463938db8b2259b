#!/usr/bin/env python3
"""Reference for paragraph and line dedup (docs/DEDUP.md, "Repeated paragraphs and
lines"), written from the document alone, in plain Python: no hashing (units are
compared as strings), no shuffle, no shared code with mdf.

stdin: {"unit": "line" | "paragraph", "min_count": N, "keep_first": bool,
        "normalize": "none" | "ccnet" | "loose", "min_chars": N,
        "docs": [[id as hex, text], ...]}
stdout: {id: {"spans": [[start, end], ...] (UTF-8 byte offsets of the cut text),
              "text": what is left, "rejected": bool}}  for every record cut.
"""
import json
import re
import sys
import unicodedata

# Unicode White_Space (what Rust's char::is_whitespace and str::trim use), not
# Python's str.isspace, which also counts U+001C..U+001F.
WHITE_SPACE = set(
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000"
)
WS = "".join(sorted(WHITE_SPACE))


def lines(text):
    """Lines ending after their newline; the last at the end of the text."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def blank(s):
    return all(c in WHITE_SPACE for c in s)


def units(text, unit):
    ls = lines(text)
    if unit == "line":
        return ls
    paras, cur, content, gap = [], "", False, False
    for line in ls:
        if not blank(line):
            if gap:
                paras.append(cur)
                cur, gap = "", False
            content = True
        elif content:
            gap = True
        cur += line
    if cur:
        paras.append(cur)
    return paras


# cc_net/text_normalizer.py: the keys of UNICODE_PUNCT, and NON_PRINTING_CHARS_RE.
CCNET_PUNCT = set("，。、„”“«»１」「《》´∶：？！（）；–—．～’…━〈〉【】％►")
NON_PRINTING = {chr(c) for c in list(range(0, 32)) + list(range(127, 160))}


def ccnet(s):
    """cc_net's normalize_for_dedup: strip, lower, digits to 0, then its Unicode
    punctuation and the non-printing characters removed."""
    s = s.strip()
    s = s.lower()
    s = re.sub(r"\d", "0", s)
    return "".join(c for c in s if c not in CCNET_PUNCT and c not in NON_PRINTING)


def loose(s):
    """The loose normalisation as the design states it."""
    out, space = [], False
    for ch in s.lower():
        if ch in WHITE_SPACE:
            space = True
            continue
        cat = unicodedata.category(ch)
        if cat.startswith("P") or cat == "Cc":
            continue
        if space and out:
            out.append(" ")
        space = False
        out.append("0" if cat == "Nd" else ch)
    return "".join(out)


def main():
    req = json.load(sys.stdin)
    unit, norm = req["unit"], req["normalize"]
    docs = sorted((int(i, 16), t) for i, t in req["docs"])
    split = {}
    occurrences = {}
    for rid, text in docs:
        us = units(text, unit)
        split[rid] = us
        for pos, u in enumerate(us):
            key = u.strip(WS)
            if norm == "ccnet":
                key = ccnet(key)
            elif norm == "loose":
                key = loose(key)
            if key:
                occurrences.setdefault(key, []).append((rid, pos))
    cut = {}
    for occ in occurrences.values():
        if len(occ) < req["min_count"]:
            continue
        occ.sort()
        for rid, pos in occ[1:] if req["keep_first"] else occ:
            cut.setdefault(rid, set()).add(pos)
    result = {}
    for rid, positions in cut.items():
        us = split[rid]
        spans, left, at = [], [], 0
        for pos, u in enumerate(us):
            n = len(u.encode("utf-8"))
            if pos in positions:
                if spans and spans[-1][1] == at:
                    spans[-1][1] = at + n
                else:
                    spans.append([at, at + n])
            else:
                left.append(u)
            at += n
        left = "".join(left)
        chars = sum(1 for c in left if c not in WHITE_SPACE)
        result["%x" % rid] = {
            "spans": spans,
            "text": left,
            "rejected": chars < req["min_chars"],
        }
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
