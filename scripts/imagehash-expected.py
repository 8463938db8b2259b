#!/usr/bin/env python3
"""Hashes of ../shared/data/images/photos/ by the Python imagehash package, the
reference tests/images.rs checks mdf's image_hash kernels against.

  pip install imagehash        # 4.3.x, with Pillow
  scripts/imagehash-expected.py ../shared/data/images/photos > tests/data/imagehash-photos.csv
  scripts/imagehash-expected.py ../shared/data/images/pillow-tests hopper_orientation_ \
      > tests/data/imagehash-orientation.csv

Only the numbers are stored (file name, phash, dhash, ahash as imagehash prints them);
the photos stay in the shared data directory. Multi-frame files hash their first frame
(as imagehash does on what Image.open returns).
"""
import os
import sys

import imagehash
from PIL import Image, ImageOps


def main():
    root = sys.argv[1]
    prefix = sys.argv[2] if len(sys.argv) > 2 else ""
    print("file,phash,dhash,ahash")
    for name in sorted(os.listdir(root)):
        if not name.startswith(prefix):
            continue
        path = os.path.join(root, name)
        try:
            img = Image.open(path)
            img.load()
        except Exception:
            continue
        # mdf applies EXIF orientation before hashing; so does this reference.
        img = ImageOps.exif_transpose(img)
        if img.mode not in ("RGB", "L"):
            img = img.convert("RGB")
        print(f"{name},{imagehash.phash(img)},{imagehash.dhash(img)},{imagehash.average_hash(img)}")


if __name__ == "__main__":
    main()
