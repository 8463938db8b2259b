#!/usr/bin/env python3
"""Generates the small image set bundled in examples/data/images/ (used by
examples/images.yaml and its test): photo-like scenes (gradients, shapes, texture,
noise) as ~500 px JPEGs, with near-duplicates made the ways the web makes them
(recompressed, resized, slightly cropped, brightened), exact copies, flat images,
tiny thumbnails and a truncated file.

  scripts/gen-images.py examples/data/images
"""
import io
import os
import random
import sys

from PIL import Image, ImageDraw, ImageEnhance, ImageFilter


def scene(rnd, w, h):
    img = Image.new("RGB", (w, h))
    px = img.load()
    c0 = [rnd.randrange(256) for _ in range(3)]
    c1 = [rnd.randrange(256) for _ in range(3)]
    for y in range(h):
        t = y / h
        row = tuple(int(a + (b - a) * t) for a, b in zip(c0, c1))
        for x in range(w):
            px[x, y] = row
    d = ImageDraw.Draw(img)
    for _ in range(rnd.randrange(6, 14)):
        x0, y0 = rnd.randrange(w), rnd.randrange(h)
        x1, y1 = x0 + rnd.randrange(4, max(5, w // 2)), y0 + rnd.randrange(4, max(5, h // 2))
        fill = tuple(rnd.randrange(256) for _ in range(3))
        if rnd.random() < 0.5:
            d.ellipse([x0, y0, x1, y1], fill=fill)
        else:
            d.rectangle([x0, y0, x1, y1], fill=fill)
    noise = Image.effect_noise((w, h), rnd.choice((8, 16, 32))).convert("RGB")
    img = Image.blend(img, noise, 0.15)
    return img.filter(ImageFilter.GaussianBlur(rnd.choice((0, 0.6, 1.2))))


def jpeg(img, q):
    b = io.BytesIO()
    img.save(b, "JPEG", quality=q)
    return b.getvalue()


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rnd = random.Random(7)
    files = {}
    for i in range(12):
        w, h = rnd.choice(((512, 384), (480, 480), (384, 512), (500, 333)))
        img = scene(rnd, w, h)
        files[f"scene{i:02d}.jpg"] = jpeg(img, 88)
        if i % 3 == 0:
            files[f"scene{i:02d}-recompressed.jpg"] = jpeg(img, 45)
        if i % 3 == 1:
            files[f"scene{i:02d}-half.jpg"] = jpeg(img.resize((w // 2, h // 2), Image.LANCZOS), 85)
        if i % 4 == 0:
            c = img.crop((w // 40, h // 40, w - w // 40, h - h // 40))
            files[f"scene{i:02d}-crop.jpg"] = jpeg(c, 85)
        if i % 4 == 1:
            files[f"scene{i:02d}-bright.png"] = None
            b = io.BytesIO()
            ImageEnhance.Brightness(img).enhance(1.1).resize((w // 2, h // 2)).save(b, "PNG")
            files[f"scene{i:02d}-bright.png"] = b.getvalue()
        if i == 5:
            files["copy-of-scene05.jpg"] = files["scene05.jpg"]
    files["blank-white.jpg"] = jpeg(Image.new("RGB", (400, 300), (255, 255, 255)), 90)
    files["blank-grey.png"] = None
    b = io.BytesIO()
    Image.new("L", (300, 300), 128).save(b, "PNG")
    files["blank-grey.png"] = b.getvalue()
    files["thumbnail.jpg"] = jpeg(scene(rnd, 48, 40), 80)
    files["truncated.jpg"] = files["scene03.jpg"][: len(files["scene03.jpg"]) // 3]
    files["not-an-image.jpg"] = b"<html>404 not found</html>"
    for name, data in sorted(files.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print(f"{len(files)} files, {sum(len(d) for d in files.values())} bytes in {out}")


if __name__ == "__main__":
    main()
