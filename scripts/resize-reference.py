#!/usr/bin/env python3
"""Pillow's result for mdf's `image_resize` (tests/image_resize.rs), compared with mdf's.

    resize-reference.py MODE SIZE ONLY_IF_BIGGER FILTER FORMAT QUALITY INPUT_DIR PARQUET...

For every row of mdf's output (`path`, `image`), the input file is opened with Pillow,
made upright (EXIF), alpha matted onto white as img2dataset does, resized with the same
geometry (albumentations' smallest/longest_max_size, centre crop, white border) and
Pillow's filter. With FORMAT png the two are compared pixel for pixel; with jpg,
Pillow's own JPEG at the same quality is made too and the PSNR of mdf's JPEG against
it is given. Prints one JSON line per image and a summary line.
"""
import io
import json
import math
import os
import sys

import numpy as np
import pyarrow.parquet as pq
from PIL import Image, ImageOps

FILTERS = {"lanczos": Image.LANCZOS, "bicubic": Image.BICUBIC, "bilinear": Image.BILINEAR}


def upright_rgb(path):
    im = Image.open(path)
    im.seek(0)
    im = ImageOps.exif_transpose(im)
    alpha = im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info)
    if im.format == "GIF" or alpha:
        a = np.asarray(im.convert("RGBA")).astype(np.uint32)
        rgb = (a[..., :3] * a[..., 3:] + 255 * (255 - a[..., 3:]) + 127) // 255
        return Image.fromarray(rgb.astype(np.uint8), "RGB")
    return im.convert("RGB")


def plan(w, h, mode, size, only_if_bigger):
    if mode == "no":
        return None
    judged = min(w, h) if mode in ("keep_ratio", "center_crop") else max(w, h)
    if only_if_bigger and judged <= size:
        return None
    scale = size / float(judged)
    sw, sh = (w, h) if judged == size else (max(1, round(w * scale)), max(1, round(h * scale)))
    return sw, sh


def reference(path, mode, size, only_if_bigger, flt):
    im = upright_rgb(path)
    p = plan(im.width, im.height, mode, size, only_if_bigger)
    if p is None:
        return im
    sw, sh = p
    im = im.resize((sw, sh), FILTERS[flt])
    if mode == "center_crop":
        cw, ch = min(size, sw), min(size, sh)
        x, y = (sw - cw) // 2, (sh - ch) // 2
        im = im.crop((x, y, x + cw, y + ch))
    elif mode == "border":
        cw, ch = max(size, sw), max(size, sh)
        canvas = Image.new("RGB", (cw, ch), (255, 255, 255))
        canvas.paste(im, ((cw - sw) // 2, (ch - sh) // 2))
        im = canvas
    return im


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 99.0 if mse == 0 else 10 * math.log10(255.0**2 / mse)


def main():
    mode, size, only, flt, fmt, quality, indir = sys.argv[1:8]
    size, only, quality = int(size), only == "true", int(quality)
    rows = []
    for f in sys.argv[8:]:
        t = pq.read_table(f, columns=["path", "image"]).to_pylist()
        rows.extend(t)
    worst_max, diffs, psnrs = 0, [], []
    for r in sorted(rows, key=lambda r: r["path"]):
        name = os.path.basename(r["path"])
        ref = reference(os.path.join(indir, name), mode, size, only, flt)
        got = Image.open(io.BytesIO(r["image"]))
        got.load()
        out = {"path": name, "size": list(got.size), "want": list(ref.size)}
        if got.size != ref.size:
            out["error"] = "size"
            print(json.dumps(out))
            worst_max = 999
            continue
        g = np.asarray(got.convert("RGB")).astype(np.int32)
        if fmt == "png":
            w = np.asarray(ref).astype(np.int32)
            d = np.abs(g - w)
            out.update(max=int(d.max()), mean=float(d.mean()), over1=float((d > 1).mean()))
            worst_max = max(worst_max, int(d.max()))
            diffs.append(float(d.mean()))
            psnrs.append(psnr(g, w))
        else:
            buf = io.BytesIO()
            ref.save(buf, "JPEG", quality=quality)
            w = np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB")).astype(np.int32)
            out.update(psnr=psnr(g, w))
            psnrs.append(out["psnr"])
        print(json.dumps(out))
    print(
        json.dumps(
            {
                "summary": True,
                "n": len(rows),
                "worst_max": worst_max,
                "mean_of_means": float(np.mean(diffs)) if diffs else None,
                "min_psnr": min(psnrs) if psnrs else None,
            }
        )
    )


if __name__ == "__main__":
    main()
