#!/usr/bin/env python3
"""Image pipeline benchmark (docs/PERFORMANCE.md): LAION-sized JPEGs made from real
photos, then Python Pillow + imagehash phash on one core over the same files.

  scripts/bench-images.py --make /tmp/bench-imgs 2000   # ~500 px JPEGs from ../shared/data/images/photos
  scripts/bench-images.py --make /tmp/tune 15000 tune    # from every other photo (tuning half)
  scripts/bench-images.py --make /tmp/held 15000 held    # from the others (held out; another seed)
  scripts/bench-images.py /tmp/bench-imgs               # Pillow + imagehash.phash, one core

mdf's side: `mdf run examples/images.yaml --input /tmp/bench-imgs/ -o /tmp/bench-out`
under /usr/bin/time (images per CPU-second).
"""
import os
import random
import sys
import time

from PIL import Image


def make(out, n, part="all"):
    root = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "images", "photos")
    srcs = []
    for k, name in enumerate(sorted(os.listdir(root))):
        if part != "all" and k % 2 != (0 if part == "tune" else 1):
            continue
        try:
            im = Image.open(os.path.join(root, name))
            im.load()
            im = im.convert("RGB")
        except Exception:
            continue
        if min(im.size) >= 256:
            srcs.append(im)
    os.makedirs(out, exist_ok=True)
    rnd = random.Random({"all": 1, "tune": 1, "held": 2}[part])
    total = 0
    for i in range(n):
        im = rnd.choice(srcs)
        w, h = im.size
        cw, ch = int(w * rnd.uniform(0.5, 1.0)), int(h * rnd.uniform(0.5, 1.0))
        x, y = rnd.randrange(w - cw + 1), rnd.randrange(h - ch + 1)
        crop = im.crop((x, y, x + cw, y + ch))
        s = rnd.uniform(400, 600) / max(crop.size)
        crop = crop.resize((max(1, int(cw * s)), max(1, int(ch * s))), Image.BILINEAR)
        p = os.path.join(out, f"img{i:06d}.jpg")
        crop.save(p, "JPEG", quality=rnd.choice((75, 85, 92)))
        total += os.path.getsize(p)
    print(f"{n} JPEGs, {total / n / 1024:.0f} KiB average, in {out}")


def bench(d):
    import imagehash

    files = sorted(os.path.join(d, f) for f in os.listdir(d))
    t = time.process_time()
    for f in files:
        imagehash.phash(Image.open(f))
    cpu = time.process_time() - t
    print(f"Pillow {Image.__version__} + imagehash {imagehash.__version__} phash: {len(files)} images, {cpu:.2f} CPU-s, {len(files) / cpu:.0f} images/s per core")


if __name__ == "__main__":
    if sys.argv[1] == "--make":
        make(sys.argv[2], int(sys.argv[3]), *sys.argv[4:5])
    else:
        bench(sys.argv[1])
