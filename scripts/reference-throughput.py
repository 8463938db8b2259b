#!/usr/bin/env python3
"""The reference run on every core, for whole-job throughput per machine (issue 32,
docs/PERFORMANCE.md): one process per core, files dealt out as datatrove deals them
(a file is one unit of work), the figures of the whole run.

  scripts/reference-throughput.py text  [--procs N] FILE.warc.gz...   # FastWARC + resiliparse
  scripts/reference-throughput.py image [--procs N] DIR               # Pillow + imagehash.phash

text: FastWARC reads the response records, resiliparse detects each page's encoding
(`bytes_to_str(detect_encoding(...))`) and extracts its main text
(`extract_plain_text(HTMLTree, main_content=True)`): extraction alone, no filters, no
dedup, no output. image: Pillow decodes each file and imagehash computes its phash.
Prints records, wall and CPU seconds (children's user + system), records/s per
machine and per CPU-second.
    pip install resiliparse fastwarc imagehash pillow
"""
import argparse
import os
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor


def text_file(path):
    from fastwarc.warc import ArchiveIterator, WarcRecordType
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding
    from resiliparse.parse.html import HTMLTree

    n = chars = 0
    with open(path, "rb") as f:
        for rec in ArchiveIterator(f, record_types=WarcRecordType.response, parse_http=True):
            body = rec.reader.read()
            html = bytes_to_str(body, detect_encoding(body))
            text = extract_plain_text(HTMLTree.parse(html), main_content=True)
            n += 1
            chars += len(text)
    return n, os.path.getsize(path)


def image_chunk(paths):
    import imagehash
    from PIL import Image

    n = size = 0
    for p in paths:
        imagehash.phash(Image.open(p))
        n += 1
        size += os.path.getsize(p)
    return n, size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["text", "image"])
    ap.add_argument("--procs", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("inputs", nargs="+")
    a = ap.parse_args()
    if a.kind == "text":
        units, fn = a.inputs, text_file
    else:
        files = sorted(os.path.join(a.inputs[0], f) for f in os.listdir(a.inputs[0]))
        step = 200
        units, fn = [files[i:i + step] for i in range(0, len(files), step)], image_chunk
    t0 = time.perf_counter()
    with ProcessPoolExecutor(a.procs) as ex:
        done = list(ex.map(fn, units))
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ru.ru_utime + ru.ru_stime
    n = sum(d[0] for d in done)
    size = sum(d[1] for d in done)
    print(f"{a.kind}: {a.procs} processes, {n} records, {size / 1e6:.1f} MB input, "
          f"wall {wall:.2f} s, cpu {cpu:.2f} s: {n / wall:.0f} records/s per machine, "
          f"{n / cpu:.0f} per CPU-second, {size / 1e6 / wall:.1f} MB/s per machine")


if __name__ == "__main__":
    sys.exit(main())
